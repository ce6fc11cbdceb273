"""Targets, one module per family; importing this package registers them all."""

from gradmc.targets import (  # noqa: F401
    boltzmann,
    continuous,
    discs,
    hams_targets,
    lattice,
    logistic,
    mixtures,
    ordinal,
    quadratic,
    sparse_regression,
)
