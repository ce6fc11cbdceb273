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


#: Parametrizations run in the slow job only, to keep the default run under 15 minutes on two
#: cores: each is one case of a test whose other cases stay in the default run.
SLOW_CASES = frozenset(
    {
        "tests/learn/test_pcd.py::test_gradient_estimate_unbiased[ncg]",
        "tests/diagnostics/test_health.py::test_failed_adaptation_warns_and_returns[target5-o-pdhams-delta-flat]",
        "tests/diagnostics/test_health.py::test_failed_adaptation_warns_and_returns[target4-v-dhams-delta-flat]",
        "tests/diagnostics/test_health.py::test_a_value_held_at_its_bound_on_a_varying_target_is_not_a_failure"
        "[target0-v-pdhams]",
        "tests/discrete/test_hams.py::test_registered_samplers_run[o-pdhams-target0-opts0]",
        "tests/discrete/test_hams.py::test_rejection_free_quadratic[0.9--0.5-0.3-0.1]",
        "tests/discrete/test_hams.py::test_dhams_rejection_free_linear[0.75-0.9--0.7-0.1]",
        "tests/continuous/test_continuous_samplers.py::test_banana_reference_moments[nuts]",
        "tests/discrete/test_structured_w.py::test_exactness_test_detects_a_missing_momentum_term[ising]",
        "tests/discrete/test_structured_w.py::test_exactness_test_detects_a_missing_momentum_term[ising-graph]",
        "tests/continuous/test_gad.py::test_kept_chain_logistic_pima_against_reference[gadmala-f]",
        "tests/discrete/test_warmup_adaptation.py::test_adapt_none_keeps_the_value[v-dhams-delta-0.9-step_size]",
        "tests/discrete/test_warmup_adaptation.py::test_adapt_none_keeps_the_value[o-dhams-delta-0.75-step_size]",
        "tests/discrete/test_warmup_adaptation.py::test_adapted_acceptance_is_near_the_target[mh-uniform-ising]",
        "tests/discrete/test_warmup_adaptation.py::test_adapted_acceptance_is_near_the_target[lattice-metropolis-wide]",
        "tests/test_cli.py::test_sample_runs_a_user_model_file[potts-extra1-gwg-names1]",
    }
)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items):
    for item in items:
        if item.nodeid in SLOW_CASES:
            item.add_marker(pytest.mark.slow)
