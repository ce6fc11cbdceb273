"""Jittered HMC: its number of leapfrog steps, what its warm-up learns, and that it is frozen after.

Its draws are judged with the other continuous samplers' (MCSE z-tests against exact moments in
test_continuous_samplers.py) and, as the real block of mixed models, by the exact-truth tests of
test_mixed.py.
"""

import jax.numpy as jnp
import numpy as np
import pytest

import gradmc
from gradmc.continuous.jittered_hmc import num_steps
from gradmc.testing import assert_moments_match


def test_the_steps_cover_one_to_the_longest_evenly():
    """The Halton points of 0..2^k - 1 are the multiples of 2^-k: each of 1..L comes up
    floor or ceil of 2^k / L times."""
    for longest in (1, 2, 5, 7, 16):
        steps = np.array([int(num_steps(jnp.int32(k), jnp.int32(longest))) for k in range(64)])
        assert steps.min() == 1 and steps.max() == longest
        counts = np.bincount(steps, minlength=longest + 1)[1:]
        assert counts.min() >= 64 // longest and counts.max() <= -(-64 // longest)


@pytest.fixture(scope="module")
def scaled_gaussian_run():
    """A diagonal Gaussian with scales 1..4: NUTS's trajectories there are a few steps long."""
    scales = jnp.arange(1.0, 5.0)
    trace = gradmc.sample(
        lambda x: -0.5 * jnp.sum((x / scales) ** 2),
        "jittered-hmc",
        init=jnp.zeros(4),
        num_chains=4,
        num_warmup=400,
        num_draws=2000,
        seed=3,
        progress=False,
    )
    return trace, np.asarray(scales)


def test_draws_match_the_moments(scaled_gaussian_run):
    trace, scales = scaled_gaussian_run
    assert_moments_match(trace.draws, np.zeros(4), np.diag(scales**2))


def test_learned_length_is_shared_and_frozen(scaled_gaussian_run):
    trace, _ = scaled_gaussian_run
    longest = np.asarray(trace.params["max_steps"])
    assert np.all(longest == longest[0]) and 2 <= longest[0] <= 64  # one length for every chain, learned
    steps = np.asarray(trace.stats["num_integration_steps"])
    assert np.all(steps == steps[:1])  # the chains in lock step
    assert steps.min() == 1 and steps.max() == longest[0]
    # the kept draws are a fixed kernel: one step size per chain
    assert np.all(trace.stats["step_size"] == trace.stats["step_size"][:, :1])
    # the warm-up's first half is NUTS, each chain's trajectory its own; its second jittered HMC, in lock step
    warm = np.asarray(trace.warmup_stats["num_integration_steps"])
    assert np.any(warm[:, :200] != warm[:1, :200]) and np.all(warm[:, 200:] == warm[:1, 200:])


def test_a_fixed_longest_trajectory_skips_nuts():
    trace = gradmc.sample(
        lambda x: -0.5 * jnp.sum(x**2),
        gradmc.sampler("jittered-hmc", num_integration_steps=3),
        init=jnp.zeros(2),
        num_chains=2,
        num_warmup=100,
        num_draws=200,
        seed=0,
        progress=False,
    )
    assert np.all(np.asarray(trace.params["max_steps"]) == 3)
    assert np.asarray(trace.warmup_stats["num_integration_steps"]).max() <= 3


@pytest.mark.parametrize("options", [{"num_integration_steps": 0}, {"max_num_doublings": 0}, {"step_size": -1.0}])
def test_invalid_options_are_refused(options):
    with pytest.raises(ValueError):
        gradmc.sampler("jittered-hmc", **options).bind(gradmc.target("banana"), 10)
