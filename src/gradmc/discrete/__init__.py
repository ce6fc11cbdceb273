"""Discrete samplers: pure kernel modules, their shared base (:mod:`~gradmc.discrete.proposals`),
the HAMS second-order model and the registered builders (:mod:`~gradmc.discrete.samplers`).
"""
