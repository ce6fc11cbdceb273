"""Switch pairs (gradmc.switch_pairs): a 0/1 site flipped with the coefficient it switches.

The reference target is a variable selection small enough to enumerate, a Gaussian regression
on the switched coefficients, with coefficients the data pin when in and the prior spreads
when out:

    gamma_j ~ Bernoulli(1/2), beta_j ~ N(0, 5²), y ~ N(X (gamma * beta), 0.5² I).

Given gamma the coefficients in the model are Gaussian and those out of it follow the prior,
so p(gamma | y) (the regression's marginal likelihood per pattern) and the posterior moments
of beta are exact.
"""

import itertools

import jax.numpy as jnp
import numpy as np
import pytest

import gradmc
from gradmc import switch_pairs
from gradmc.composed import composed_sampler
from gradmc.diagnostics._common import ess_mean
from gradmc.enumeration import ExactDistribution
from gradmc.report import _cell, format_params
from gradmc.spaces import Binary
from gradmc.testing import assert_moments_match, assert_tv_within_bound

P, N, PRIOR_SCALE, NOISE = 3, 20, 5.0, 0.5
RNG = np.random.default_rng(3)
X = RNG.normal(size=(N, P))
Y = X @ np.array([0.2, 0.15, -0.15]) + NOISE * RNG.normal(size=N)


def log_density(position):
    beta, gamma = position["beta"], position["gamma"]
    fit = jnp.asarray(X, jnp.float32) @ (gamma * beta)
    misfit = jnp.asarray(Y, jnp.float32) - fit
    return -0.5 * jnp.sum((beta / PRIOR_SCALE) ** 2) - 0.5 * jnp.sum(misfit**2) / NOISE**2


def exact():
    """p(gamma | y) (inclusion 0.86, 0.51, 0.86) in the enumeration's state order (the first site
    fastest), E[beta], Var[beta].
    """
    log_weights, means, seconds = [], [], []
    for pattern in itertools.product((0, 1), repeat=P):
        inside = np.flatnonzero(pattern)
        cov = NOISE**2 * np.eye(N) + PRIOR_SCALE**2 * X[:, inside] @ X[:, inside].T
        _, logdet = np.linalg.slogdet(cov)
        log_weights.append(-0.5 * (logdet + Y @ np.linalg.solve(cov, Y)))
        mean, second = np.zeros(P), np.full(P, PRIOR_SCALE**2)
        if inside.size:
            precision = X[:, inside].T @ X[:, inside] / NOISE**2 + np.eye(inside.size) / PRIOR_SCALE**2
            posterior_cov = np.linalg.inv(precision)
            mean[inside] = posterior_cov @ X[:, inside].T @ Y / NOISE**2
            second[inside] = np.diag(posterior_cov) + mean[inside] ** 2
        means.append(mean)
        seconds.append(second)
    weights = np.exp(np.array(log_weights) - max(log_weights))
    weights /= weights.sum()
    order = [sum(g << j for j, g in enumerate(pattern)) for pattern in itertools.product((0, 1), repeat=P)]
    probs = np.zeros(2**P)
    probs[order] = weights
    mean = weights @ np.array(means)
    return ExactDistribution(np.array([0.0, 1.0]), P, probs, 0.0), mean, weights @ np.array(seconds) - mean**2


@pytest.fixture(scope="module")
def target():
    init = {"beta": jnp.zeros(P), "gamma": jnp.zeros(P)}
    return gradmc.from_function(log_density, init=init, space={"gamma": Binary(P)}, name="selection")


RUN = {"num_chains": 4, "num_warmup": 400, "num_draws": 2000, "progress": False, "seed": 1}


@pytest.fixture(scope="module")
def paired_trace(target):
    return gradmc.sample(target, {"joint": "none"}, **RUN)


def test_auto_pairs_each_switch_with_its_coefficient_and_stays_exact(paired_trace):
    trace = paired_trace
    assert trace.sampler.endswith(", pairs=gamma:beta")
    assert trace.options["pairs"] == {"gamma": "beta"}
    distribution, mean, var = exact()
    assert trace.warnings == []
    posterior = trace.posterior()
    assert_tv_within_bound(posterior["gamma"].astype(float), distribution, p=0.01)
    assert_moments_match(posterior["beta"], mean, var=var, p=0.01)
    accepted = np.asarray(trace.stats["pairs.acceptance_rate"]).mean()
    assert 0.05 < accepted < 1.0  # the pairs move, and a flip to a less probable pattern is refused at times


def test_the_frame_is_learned_in_warmup_and_frozen_for_the_kept_draws(paired_trace):
    trace = paired_trace
    warm = np.asarray(trace.warmup_stats["pairs.acceptance_rate"])
    assert np.all(warm[:, : RUN["num_warmup"] // 2] == 0) and warm[:, RUN["num_warmup"] // 2 :].mean() > 0.05
    means, scales = (np.asarray(a) for a in trace.params["pairs"])
    assert means.shape == scales.shape == (RUN["num_chains"], P, 2)
    assert np.all(means == means[:1]) and np.all(scales == scales[:1])  # learned from every chain at once
    # out of the model a coefficient follows its prior (sd 5), in it the data pin it
    assert np.all(np.abs(scales[0, :, 0] / PRIOR_SCALE - 1) < 0.35) and np.all(scales[0, :, 1] < 1.0)
    # the command line's summary names what the pairs learned
    out, on = (float(np.median(scales[0, :, value])) for value in (0, 1))
    line = format_params(trace.params)
    assert f"pairs: {P} switched entries, sd {_cell(out)} when out, {_cell(on)} when in" in line


@pytest.mark.slow  # the power check of the tests above: a second run
def test_the_switch_pairs_make_the_switches_mix(target, paired_trace):
    """The power check: the same sweeps without pairs (and without the mode shift) leave the switches
    of the pinned coefficients stuck for long stretches."""
    without = gradmc.sample(target, {"joint": "none", "pairs": "off"}, **RUN)
    assert "pairs" not in without.sampler
    with_pairs = ess_mean(paired_trace.posterior()["gamma"].astype(float))
    alone = ess_mean(without.posterior()["gamma"].astype(float))
    assert np.min(with_pairs) > 3 * np.min(alone)


def test_the_frame_falls_back_to_every_draw_for_a_value_seldom_seen():
    moments = switch_pairs.no_moments(1, jnp.float32)
    for value, x in [(1.0, 2.0)] * 99 + [(0.0, -4.0)]:
        moments = switch_pairs.add_draw(moments, jnp.array([value, x]), np.array([0]), np.array([1]))
    means, scales = switch_pairs.frame(moments)
    # value 0 seen once in 100 draws (below MIN_SHARE): the entry's mean and spread over all draws
    assert np.allclose(means, [[1.94, 2.0]], atol=1e-5)
    assert np.allclose(scales[0, 0], np.sqrt(0.01 * 36 * 0.99), atol=1e-4) and scales[0, 1] < 1e-3


def test_no_pairs_where_a_switch_moves_a_mean_and_bad_values_are_refused(target):
    def shifted(position):  # g shifts x's mean: the curvature in x does not change
        x, g = position["x"], position["g"]
        return -0.5 * jnp.sum((x - 4.0 * g) ** 2)

    shift = gradmc.from_function(shifted, init={"x": jnp.zeros(2), "g": jnp.zeros(2)}, space={"g": Binary(2)})
    assert "pairs" not in composed_sampler(shift).name
    with pytest.raises(ValueError, match="the switch pairs 'on' do not exist"):
        composed_sampler(target, {"pairs": "on"})


def test_the_command_line_leaves_the_pairs_out_by_name():
    from gradmc.cli import _sampler_choice

    choice = _sampler_choice(gradmc, "beta=nuts,pairs=off", None)
    assert choice["pairs"] == "off" and choice["beta"].name == "nuts"
