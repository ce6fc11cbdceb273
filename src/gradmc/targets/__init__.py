"""Targets, one module per family; importing this package registers them all."""

from gradmc.targets import boltzmann, continuous, hams_targets, lattice, logistic, mixtures, ordinal, quadratic, sparse_regression  # noqa: F401
