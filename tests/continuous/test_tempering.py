"""Tempering baselines (PT, ST, EE, RAM, CT-HMC, AIS): invariance on a small bimodal target.

Target: bimodal-1d, (1/2) N(-1, 0.1) + (1/2) N(1, 0.02); truth P(x > 0) = 1/2, E x = 0,
E x^2 = 1.06. Each sampler's draws must match within MCSE (ArviZ, |z| < the p = 0.01
normal quantile, Bonferroni over the three checks); AIS's Z-hat must be unbiased within
its standard error.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.stats import norm
from scipy.stats import t as student_t

import gradmc
import gradmc.continuous.samplers  # noqa: F401  (registers the tempering samplers)
import gradmc.targets.mixtures  # noqa: F401
from gradmc.base import Target
from gradmc.continuous import ais, ct_hmc, parallel_tempering
from gradmc.continuous.tempering import check_ladder, geometric_ladder, weighted_mean
from gradmc.diagnostics.ess import summary

Z_CRIT = norm.ppf(1 - 0.01 / (2 * 3))
CHECKS = [(lambda x: (x > 0).astype(float), 0.5), (lambda x: x, 0.0), (lambda x: x**2, 1.06)]
BUDGET = dict(num_chains=4, num_warmup=1000, num_draws=10_000, progress=False)


@pytest.fixture(scope="module")
def bimodal():
    return gradmc.target("bimodal-1d")


def assert_matches_bimodal(draws):
    for fn, truth in CHECKS:
        s = summary(fn(np.asarray(draws, np.float64)))
        z = (s["mean"][0] - truth) / s["mcse_mean"][0]
        assert abs(z) < Z_CRIT, (truth, s["mean"][0], s["mcse_mean"][0], z)
    per_chain = np.mean(np.asarray(draws)[..., 0] > 0, axis=1)
    assert np.all((per_chain > 0.1) & (per_chain < 0.9)), per_chain  # every chain crosses between modes


@pytest.mark.parametrize(
    "name, options",
    [
        ("parallel-tempering", dict(num_temperatures=6, beta_min=0.05)),
        pytest.param(
            "parallel-tempering",
            dict(temperatures=[1.0, 3.0, 10.0, 30.0], local="hmc", num_integration_steps=5),
            marks=pytest.mark.slow,
        ),
        ("ram", dict(step_size=1.0)),
        pytest.param("equi-energy", dict(step_size=0.3, buffer_size=500), marks=pytest.mark.slow),
    ],
)
def test_sampler_leaves_bimodal_invariant(bimodal, name, options):
    trace = gradmc.sample(bimodal, gradmc.sampler(name, **options), seed=1, **BUDGET)
    assert trace.num_nonfinite == 0
    assert_matches_bimodal(trace.draws)


def test_simulated_tempering_draws_at_beta_one_and_weighted(bimodal):
    trace = gradmc.sample(
        bimodal, gradmc.sampler("simulated-tempering", num_temperatures=6, beta_min=0.05), seed=2, **BUDGET
    )
    index = trace.stats["temperature_index"]
    occupancy = np.bincount(index.ravel(), minlength=6) / index.size
    assert np.all(occupancy > 0.5 / 6), occupancy  # Wang-Landau flattened the ladder
    kept = min(int(np.sum(index[c] == 0)) for c in range(trace.num_chains))
    at_one = np.stack([trace.draws[c][index[c] == 0][:kept] for c in range(trace.num_chains)])
    assert_matches_bimodal(at_one)
    # importance tempering: all draws, weights P(k = 0 | x); chain-level t-test
    est = [
        weighted_mean(trace.draws[c : c + 1], trace.stats["log_weight"][c : c + 1], lambda x: x**2)[0] for c in range(4)
    ]
    t_stat = (np.mean(est) - 1.06) / (np.std(est, ddof=1) / 2)
    assert abs(t_stat) < student_t.ppf(1 - 0.005, 3)


def test_ct_hmc_weighted_draws(bimodal):
    trace = gradmc.sample(
        bimodal,
        gradmc.sampler("ct-hmc", base_cov=[[2.0]]),
        seed=3,
        num_chains=6,
        num_warmup=1000,
        num_draws=4000,
        progress=False,
    )
    beta = trace.stats["beta"]
    assert 0.1 < beta.mean() < 0.9  # the log Z estimate balances target and base
    for fn, truth in CHECKS:
        est = [weighted_mean(trace.draws[c : c + 1], trace.stats["log_weight"][c : c + 1], fn)[0] for c in range(6)]
        t_stat = (np.mean(est) - truth) / (np.std(est, ddof=1) / np.sqrt(6))
        assert abs(t_stat) < student_t.ppf(1 - 0.01 / 6, 5), (truth, est)


def test_log_weight_formula():
    d = np.array([-30.0, -2.0, -1e-6, 0.0, 1e-6, 0.5, 40.0])
    with np.errstate(divide="ignore", invalid="ignore"):
        expected = np.where(np.abs(d) < 1e-5, d / 2, np.log(np.abs(d)) - np.log(np.abs(1 - np.exp(-d))))
    np.testing.assert_allclose(ct_hmc.log_weight(jnp.asarray(d)), expected, rtol=1e-5, atol=1e-6)


def test_ais_estimates_z_without_bias(bimodal):
    """Z = 1 for the normalised mixture and e^3 for it shifted by +3; AIS also weights draws right."""
    shifted = Target("shifted", lambda x: bimodal.logdensity_fn(x) + 3.0, bimodal.space)
    for target, log_z in ((bimodal, 0.0), (shifted, 3.0)):
        out = ais.ais(
            target,
            jax.random.key(4),
            num_particles=2000,
            num_temperatures=100,
            reference_cov=[[4.0]],
            step_size=0.5,
            num_mcmc_steps=2,
        )
        z_hat = np.exp(out.log_z - log_z)
        assert abs(z_hat - 1.0) / out.log_z_se < Z_CRIT, (out.log_z, out.log_z_se)
        assert out.ess > 100
    w = np.exp(out.log_weights - out.log_weights.max())
    w /= w.sum()
    se = np.sqrt(np.sum(w**2 * ((out.draws[:, 0] > 0) - 0.5) ** 2))  # delta-method s.e. of a self-normalised mean
    assert abs(out.weighted_mean(lambda x: (x[:, 0] > 0).astype(float)) - 0.5) / se < Z_CRIT


def test_swap_moves_preserve_the_product_of_tempered_targets():
    """Exact check: for two replicas the swap kernel satisfies detailed balance, so the
    swap probability equals min(1, ratio of the product densities)."""
    betas = jnp.array([1.0, 0.25])
    logl = jnp.array([-3.0, -0.5])
    from gradmc.continuous.tempering import TemperedPoint

    pts = TemperedPoint(jnp.array([[0.0], [1.0]]), logl, jnp.zeros(2))
    swaps = jax.vmap(lambda k: parallel_tempering.swap_neighbours(k, pts, betas, 0)[0].loglik[0])(
        jax.random.split(jax.random.key(0), 20000)
    )
    rate = float(jnp.mean(swaps == -0.5))
    expected = min(1.0, float(np.exp((1.0 - 0.25) * (-0.5 + 3.0))))
    assert expected == 1.0 and rate == 1.0
    pts = pts._replace(loglik=jnp.array([-0.5, -3.0]))
    swaps = jax.vmap(lambda k: parallel_tempering.swap_neighbours(k, pts, betas, 0)[0].loglik[0])(
        jax.random.split(jax.random.key(1), 20000)
    )
    rate = float(jnp.mean(swaps == -3.0))
    expected = float(np.exp(0.75 * -2.5))
    assert abs(rate - expected) / np.sqrt(expected * (1 - expected) / 20000) < norm.ppf(0.995)


def test_bad_input(bimodal):
    with pytest.raises(ValueError, match="start at beta = 1"):
        check_ladder([0.5, 1.0])
    with pytest.raises(ValueError, match="lie in"):
        check_ladder([1.0, 0.5, -0.1])
    with pytest.raises(ValueError, match="beta_min"):
        geometric_ladder(5, 1.5)
    with pytest.raises(ValueError, match="betas or temperatures"):
        gradmc.sampler("parallel-tempering", betas=[1, 0.5], temperatures=[1, 2]).bind(bimodal, 10)
    with pytest.raises(ValueError, match="temperatures must start at 1"):
        gradmc.sampler("equi-energy", energy_levels=[0, 1, 2], temperatures=[2, 3, 4]).bind(bimodal, 10)
    with pytest.raises(ValueError, match="energy_levels must increase"):
        gradmc.sampler("equi-energy", energy_levels=[0, 2, 1], temperatures=[1, 3, 4]).bind(bimodal, 10)
    with pytest.raises(ValueError, match="not both"):
        gradmc.sampler("ram", step_size=1.0, cov_scale=4.0).bind(bimodal, 10)
    with pytest.raises(ValueError, match="start at beta = 0"):
        ais.ais(bimodal, jax.random.key(0), betas=[0.1, 0.5, 1.0])
    with pytest.raises(ValueError, match="end at beta = 1"):
        ais.ais(bimodal, jax.random.key(0), betas=[0.0, 0.5, 0.9])
    with pytest.raises(ValueError, match="local move"):
        gradmc.sampler("simulated-tempering", local="gibbs").bind(bimodal, 10)
