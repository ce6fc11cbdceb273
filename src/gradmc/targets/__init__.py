"""Targets, one module per family; importing this package registers them all."""

from gradmc.targets import continuous, mixtures  # noqa: F401
