"""Whitening (gradmc.whitening): the continuous block of a mixed position moved in coordinates
fitted to its conditional given the discrete values.

The reference target is a spike-and-slab regression small enough to enumerate: three switches
``g``, each coefficient ``beta[j] ~ N(0, 3²)`` when in and ``N(0, 0.1²)`` when out, five
noisy observations. Given ``g`` everything is Gaussian, so p(g | y) and the moments of
``beta`` are exact (a mixture over the 8 values of ``g``), and a coefficient's conditional
spread changes thirtyfold with its switch: where ``"auto"`` whitens.
"""

import itertools

import jax.numpy as jnp
import numpy as np
import pytest

import gradmc
from gradmc import whitening
from gradmc.enumeration import ExactDistribution
from gradmc.spaces import Binary
from gradmc.testing import assert_moments_match, assert_tv_within_bound

X = np.array([[1.0, 0.3, -0.5], [0.2, -1.0, 0.4], [-0.7, 0.5, 1.1], [1.3, 0.8, 0.2], [-0.4, -0.6, -0.9]], np.float32)
Y = np.array([1.5, -0.4, 0.3, 2.0, -1.1], np.float32)
SLAB, SPIKE, P_IN = 3.0, 0.1, 0.3


def log_density(position):
    beta, g = position["beta"], position["g"]
    scale = g * SLAB + (1 - g) * SPIKE
    prior = jnp.sum(-0.5 * (beta / scale) ** 2 - jnp.log(scale) + g * np.log(P_IN) + (1 - g) * np.log(1 - P_IN))
    return prior - 0.5 * jnp.sum((Y - X @ beta) ** 2)


def exact():
    """p(g | y) on {0, 1}^3, and E[beta], Var[beta] (a mixture of the 8 Gaussian conditionals)."""
    probs, means, seconds = np.zeros((2, 2, 2)), [], []
    for g in itertools.product((0, 1), repeat=3):
        prior_var = np.where(np.array(g) == 1, SLAB, SPIKE) ** 2
        marginal_cov = X @ np.diag(prior_var) @ X.T + np.eye(len(Y))
        _, logdet = np.linalg.slogdet(marginal_cov)
        log_p = np.sum(np.where(np.array(g) == 1, np.log(P_IN), np.log(1 - P_IN)))
        probs[g] = np.exp(log_p - 0.5 * logdet - 0.5 * Y @ np.linalg.solve(marginal_cov, Y))
        precision = X.T @ X + np.diag(1 / prior_var)
        cov = np.linalg.inv(precision)
        mean = cov @ X.T @ Y
        means.append(mean)
        seconds.append(np.diag(cov) + mean**2)
    weights = (probs / probs.sum()).ravel()  # in the order of itertools.product, as the lists
    mean = weights @ np.array(means)
    var = weights @ np.array(seconds) - mean**2
    distribution = ExactDistribution(np.array([0.0, 1.0]), 3, (probs / probs.sum()).ravel(order="F"), 0.0)
    return distribution, mean, var


@pytest.fixture(scope="module")
def target():
    init = {"beta": jnp.zeros(3), "g": jnp.zeros(3)}
    return gradmc.from_function(log_density, init=init, space={"g": Binary(3)}, name="spike-slab-5")


def test_auto_whitens_where_a_switch_changes_the_spread_and_is_exact(target):
    assert whitening.conditional_change(target, np.arange(3)).spread > gradmc.composed.WHITEN_SPREAD
    trace = gradmc.sample(target, "auto", num_chains=4, num_warmup=400, num_draws=2500, seed=2, progress=False)
    assert trace.sampler == "beta=jittered-hmc (whitened), g=gibbs, pairs=g:beta"  # the scale: curved in g
    assert trace.options["beta"][gradmc.base.WHITEN] is True
    distribution, mean, var = exact()
    posterior = trace.posterior()
    assert_tv_within_bound(posterior["g"].astype(float), distribution, p=0.01)
    assert_moments_match(posterior["beta"], mean, var=var, p=0.01)
    # each sweep's frame costs its Newton steps, counted
    evals = np.asarray(trace.stats["num_grad_evals"])
    assert np.all(evals >= whitening.grad_evals(3))


def test_the_frame_of_a_gaussian_conditional_makes_it_standard_normal(target):
    position = jnp.array([0.0, 0.0, 0.0, 1.0, 0.0, 1.0])  # beta, then g = (1, 0, 1)
    mode, factor = whitening.conditional_frame(target.logdensity_fn, position, np.arange(3))
    g = np.array([1.0, 0.0, 1.0])
    precision = X.T @ X + np.diag(1 / np.where(g == 1, SLAB, SPIKE) ** 2)
    np.testing.assert_allclose(mode, np.linalg.solve(precision, X.T @ Y), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(factor @ factor.T, precision, rtol=1e-4)


def test_a_frame_that_is_not_concave_falls_back_to_the_identity():
    def convex(x):  # no mode: Newton heads for a minimum, whose Hessian is not negative definite
        return 0.5 * jnp.sum(x[:2] ** 2) + x[2]

    mode, factor = whitening.conditional_frame(convex, jnp.array([1.0, 2.0, 0.0]), np.arange(2))
    np.testing.assert_array_equal(mode, np.zeros(2))
    np.testing.assert_array_equal(factor, np.eye(2))


def test_auto_leaves_blocks_whose_spread_does_not_change_and_the_setting_is_checked(target):
    def equal_spread(position):
        return -0.5 * jnp.sum((position["x"] - 2 * position["g"] + 1) ** 2)

    same = gradmc.from_function(
        equal_spread, init={"x": jnp.zeros(2), "g": jnp.zeros(2)}, space={"g": Binary(2)}, name="shifted"
    )
    assert whitening.conditional_change(same, np.arange(2)).spread == pytest.approx(1.0, abs=1e-3)
    assert gradmc.composed.composed_sampler(same, "auto").name == "g=ncg, x=jittered-hmc"
    assert gradmc.composed.composed_sampler(same, {"whiten": "on"}).name == "g=ncg, x=jittered-hmc (whitened)"
    unwhitened = gradmc.composed.composed_sampler(target, {"whiten": False}).name
    assert unwhitened == "beta=jittered-hmc, g=gibbs, pairs=g:beta"
    with pytest.raises(ValueError, match=r"the whitening 'maybe' does not exist; the choices are: auto"):
        gradmc.composed.composed_sampler(target, {"whiten": "maybe"})
    two_real = gradmc.from_function(
        lambda p: equal_spread({"x": jnp.concatenate([p["a"], p["b"]]), "g": p["g"]}),
        init={"a": jnp.zeros(1), "b": jnp.zeros(1), "g": jnp.zeros(2)},
        space={"g": Binary(2)},
        name="two-real",
    )
    with pytest.raises(ValueError, match="whitening moves the one continuous block of a mixed model"):
        gradmc.composed.composed_sampler(two_real, {"a": "nuts", "b": "mala", "whiten": "on"})
