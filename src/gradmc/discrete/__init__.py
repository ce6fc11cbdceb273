"""Discrete samplers: pure kernel modules, their shared base (:mod:`~gradmc.discrete.proposals`)
and the registered builders (:mod:`~gradmc.discrete.samplers`). The HAMS second-order model
they use lives in :mod:`gradmc.curvature`.
"""
