"""Shared fixtures: small targets whose truth is exact, built once per test run."""

import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gradmc.base import Target, Truth
from gradmc.spaces import Real

jax.config.update("jax_platforms", "cpu")
os.environ.setdefault("GRADMC_NO_COMPILE_CACHE", "1")  # the CLI's tests leave the user's cache alone


def gaussian_target(mean, cov, name="test-gaussian"):
    mean = np.asarray(mean, np.float64)
    cov = np.asarray(cov, np.float64)
    precision = jnp.asarray(np.linalg.inv(cov), jnp.float32)
    mu = jnp.asarray(mean, jnp.float32)

    def logdensity(x):
        r = x - mu
        return -0.5 * r @ precision @ r

    return Target(name, logdensity, Real(mean.size), truth=Truth(mean=mean, cov=cov, source="closed form"))


@pytest.fixture(scope="session")
def corr_gaussian():
    """2-D Gaussian with unequal scales and correlation 0.8."""
    sd = np.array([1.0, 2.0])
    corr = np.array([[1.0, 0.8], [0.8, 1.0]])
    return gaussian_target([1.0, -2.0], corr * np.outer(sd, sd), "corr-gaussian")
