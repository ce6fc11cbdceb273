"""Targets, one module per family; importing this package registers them all."""

from gradmc.targets import continuous, logistic, mixtures  # noqa: F401
