"""Continuous-space samplers.

Kernel modules (pure, BlackJAX's contract: State/Info, ``init``, ``build_kernel``,
``as_top_level_api``): :mod:`~gradmc.continuous.rwm`, :mod:`~gradmc.continuous.mala` (MALA, ULA),
:mod:`~gradmc.continuous.hmc` (BlackJAX HMC/NUTS), :mod:`~gradmc.continuous.am`,
:mod:`~gradmc.continuous.ram`, :mod:`~gradmc.continuous.gad`, :mod:`~gradmc.continuous.sgld`,
:mod:`~gradmc.continuous.ct_hmc`, :mod:`~gradmc.continuous.parallel_tempering`,
:mod:`~gradmc.continuous.simulated_tempering`, :mod:`~gradmc.continuous.equi_energy`, and
:mod:`~gradmc.continuous.ais` (annealed importance sampling), with what the tempering methods
share in :mod:`~gradmc.continuous.tempering`. :mod:`~gradmc.continuous.samplers` binds each
kernel to its warm-up and registers it under its name.
"""
