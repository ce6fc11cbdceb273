"""Every continuous sampler, judged by MCSE z-tests against exact moments (p = 0.01).

``gradmc.testing.assert_moments_match`` compares each mean, variance and correlation with
the truth in units of its Monte Carlo standard error (ESS-based) and fails when any |z|
exceeds the Bonferroni-corrected normal quantile at p = 0.01.
"""

import jax.numpy as jnp
import numpy as np
import pytest

import gradmc
from gradmc.base import PerDatumModel, Target
from gradmc.spaces import Real
from gradmc.testing import assert_moments_match

BUDGET = dict(num_chains=4, num_warmup=500, num_draws=2500, progress=False)

GAUSSIAN_SAMPLERS = [
    ("rwm", {}),
    ("rwm", {"preconditioner": [[1.0, 1.6], [1.6, 4.0]]}),
    ("mala", {}),
    ("mala", {"preconditioner": [[1.0, 1.6], [1.6, 4.0]]}),
    ("hmc", {"num_integration_steps": 5}),
    ("nuts", {}),
    ("jittered-hmc", {}),
    ("am", {}),
]


@pytest.mark.parametrize(
    "name, options", GAUSSIAN_SAMPLERS, ids=[f"{n}{'-' + next(iter(o)) if o else ''}" for n, o in GAUSSIAN_SAMPLERS]
)
def test_moments_of_a_correlated_gaussian(corr_gaussian, name, options):
    trace = gradmc.sample(corr_gaussian, gradmc.sampler(name, **options), seed=11, **BUDGET)
    truth = corr_gaussian.truth
    assert_moments_match(trace.draws, truth.mean, truth.cov)
    assert trace.num_nonfinite == 0


@pytest.mark.parametrize("name", ["hmc", "nuts", "jittered-hmc"])
def test_a_log_density_nan_on_half_the_space_is_reported_as_non_finite(name):
    """NaN where x[0] > 0 is zero density there (BlackJAX's trajectories reject it): the draws
    follow the Gaussian truncated to x[0] <= 0, and the run says non-finite, not divergent."""

    def log_p(x):
        return jnp.where(x[0] > 0.0, jnp.nan, -0.5 * jnp.sum(x**2))

    with pytest.warns(gradmc.RunWarning, match="non-finite log density"):
        trace = gradmc.sample(log_p, name, init=jnp.full(2, -1.0), seed=3, **BUDGET)
    assert trace.num_nonfinite > 0 and trace.num_divergent == 0
    half_normal_var = 1.0 - 2.0 / np.pi
    assert_moments_match(trace.draws, np.array([-np.sqrt(2.0 / np.pi), 0.0]), np.diag([half_normal_var, 1.0]))


@pytest.fixture(scope="module")
def banana():
    return gradmc.target("banana")


@pytest.mark.parametrize("name", ["mala", "hmc", "nuts"])
def test_banana_reference_moments(banana, name):
    trace = gradmc.sample(banana, name, seed=5, num_chains=4, num_warmup=1000, num_draws=4000, progress=False)
    assert_moments_match(trace.draws, banana.truth.mean, banana.truth.cov)


def test_step_size_adaptation_hits_its_target(corr_gaussian):
    for name, goal in (("rwm", 0.25), ("mala", 0.574)):
        trace = gradmc.sample(corr_gaussian, name, seed=2, **BUDGET)
        assert abs(trace.acceptance_rate - goal) < 0.06, (name, trace.acceptance_rate)
        # the kept chain is a fixed kernel: one step size per chain, unchanged over draws
        assert np.all(trace.stats["step_size"] == trace.stats["step_size"][:, :1])


def _normal_1d(mu, sigma):
    return Target("normal-1d", lambda x: -0.5 * jnp.sum((x - mu) ** 2) / sigma**2, Real(1))


def test_ula_stationary_variance_is_biased_as_theory_says():
    """ULA on N(mu, s^2) with step gamma: stationary variance 2 s^4 / (2 s^2 - gamma)."""
    mu, sigma, gamma = 1.0, 1.0, 0.5
    trace = gradmc.sample(
        _normal_1d(mu, sigma),
        gradmc.sampler("ula", step_size=gamma),
        seed=3,
        num_chains=8,
        num_warmup=200,
        num_draws=5000,
        progress=False,
    )
    ula_var = 2 * sigma**4 / (2 * sigma**2 - gamma)
    assert_moments_match(trace.draws, [mu], var=[ula_var])
    with pytest.raises(AssertionError):  # the bias (4/3 vs 1) is detectable: the test can fail
        assert_moments_match(trace.draws, [mu], var=[sigma**2])


def test_sgld_minibatch_variance_inflation():
    """SGLD on the posterior of a Gaussian mean (y_k ~ N(theta, s^2), theta ~ N(0, tau^2)).

    With precision P = 1/tau^2 + n/s^2, data variance S^2 (population) and K indices drawn
    with replacement, the iterate is theta' = (1 - gamma P) theta + gamma (n/s^2) ybar_K
    + sqrt(2 gamma) xi, so its stationary law has the posterior mean and variance
    (2 gamma + gamma^2 n^2 S^2 / (s^4 K)) / (gamma P (2 - gamma P)).
    """
    rng = np.random.default_rng(0)
    n, s, tau, batch, gamma = 100, 1.0, 1.0, 10, 0.005
    y = rng.normal(0.7, s, size=n).astype(np.float32)
    model = PerDatumModel(
        logprior_fn=lambda th: -0.5 * jnp.sum(th**2) / tau**2,
        loglik_fn=lambda th, yk: -0.5 * jnp.sum((yk - th) ** 2) / s**2,
        data=jnp.asarray(y),
    )
    precision = 1 / tau**2 + n / s**2
    post_mean = (y.sum() / s**2) / precision
    target = Target(
        "gauss-mean", lambda th: model.logprior_fn(th) + jnp.sum(-0.5 * (y - th) ** 2), Real(1), per_datum=model
    )
    trace = gradmc.sample(
        target,
        gradmc.sampler("sgld", step_size=gamma, batch_size=batch),
        seed=4,
        num_chains=8,
        num_warmup=200,
        num_draws=5000,
        progress=False,
    )
    noise = 2 * gamma + gamma**2 * n**2 * y.var() / (s**4 * batch)
    sgld_var = noise / (gamma * precision * (2 - gamma * precision))
    assert_moments_match(trace.draws, [post_mean], var=[sgld_var])
    with pytest.raises(AssertionError):  # inflation is ~4.7x the posterior variance: detectable
        assert_moments_match(trace.draws, [post_mean], var=[1 / precision])


def test_sgld_needs_per_datum_terms(corr_gaussian):
    with pytest.raises(ValueError, match="per-datum"):
        gradmc.sample(corr_gaussian, "sgld", num_chains=1, num_warmup=0, num_draws=1, progress=False)


# -- kernels on pytree positions --------------------------------------------------------------

#: A dict position {"mu": scalar, "theta": (3,)}; ravel_pytree orders it mu, theta[0..2].
DICT_START = {"mu": jnp.float32(0.3), "theta": jnp.array([0.1, -0.2, 0.5], jnp.float32)}
_CENTRE = jnp.array([1.0, -1.0, 0.5], jnp.float32)


def _dict_logdensity(p):
    return -0.5 * p["mu"] ** 2 - 0.5 * jnp.sum((p["theta"] - _CENTRE) ** 2) / 4.0


def _flat_logdensity(x):
    return _dict_logdensity({"mu": x[0], "theta": x[1:]})


def _kernel_apis():
    from gradmc.continuous import hmc, mala, ram, rwm

    mass = jnp.ones(4)
    return {
        "mala": lambda f: mala.as_top_level_api(f, 0.2, preconditioner=np.diag([1.0, 2.0, 2.0, 2.0])),
        "rwm": lambda f: rwm.as_top_level_api(f, 0.8),
        "ram": lambda f: ram.as_top_level_api(f, 0.8),
        "hmc": lambda f: hmc.as_top_level_api(f, 0.3, mass, num_integration_steps=5),
        "nuts": lambda f: hmc.as_top_level_api(f, 0.3, mass, kind="nuts"),
    }


@pytest.mark.parametrize("name", ["mala", "rwm", "ram", "hmc", "nuts"])
def test_kernels_run_on_a_dict_position(name):
    """The kernel moves a dict position as it moves its flat vector: the same keys give the
    same chain (so the flat kernels' statistical tests carry over), and every state keeps the
    dict's structure and shapes."""
    import jax

    api = _kernel_apis()[name]
    on_dict, on_flat = api(_dict_logdensity), api(_flat_logdensity)

    def run(alg, start):
        def body(state, key):
            state, _ = alg.step(key, state)
            return state, state.position

        return jax.lax.scan(body, alg.init(start), jax.random.split(jax.random.key(4), 300))[1]

    dict_draws = jax.jit(lambda: run(on_dict, DICT_START))()
    flat_draws = jax.jit(lambda: run(on_flat, jnp.concatenate([DICT_START["mu"][None], DICT_START["theta"]])))()
    assert set(dict_draws) == {"mu", "theta"}
    assert dict_draws["mu"].shape == (300,) and dict_draws["theta"].shape == (300, 3)
    np.testing.assert_allclose(dict_draws["mu"], flat_draws[:, 0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(dict_draws["theta"], flat_draws[:, 1:], rtol=1e-5, atol=1e-6)
    assert np.ptp(np.asarray(dict_draws["theta"][:, 0])) > 0  # the chain moved
