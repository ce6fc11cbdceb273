"""Pseudo-extended target (Nemeth et al. 2022): definition, Prop. 3.1 resampling, bad input."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.stats import norm

import gradmc
import gradmc.targets.mixtures  # noqa: F401  (registers the mixture targets)
from gradmc.base import Target
from gradmc.diagnostics.ess import summary
from gradmc.extended import pseudo_extended, resample_extended
from gradmc.spaces import Real

Z_CRIT = norm.ppf(1 - 0.01 / 2)  # two-sided p = 0.01


def log_jacobian(u, lo=0.001, hi=1.0):
    return np.log(hi - lo) + jax.nn.log_sigmoid(u) + jax.nn.log_sigmoid(-u)


@pytest.fixture(scope="module")
def bimodal():
    return gradmc.target("bimodal-1d")


@pytest.fixture(scope="module")
def kou_a():
    return gradmc.target("kou-mixture-a")


def log_normal(x, var):
    return -0.5 * x**2 / var - 0.5 * np.log(2 * np.pi * var)


@pytest.mark.slow  # a whole extended run
def test_n1_extended_density_equals_original(bimodal, kou_a):
    """N = 1: pi^1(x, u) = pi(x) x (uniform beta density in logit coordinates)."""
    for target in (bimodal, kou_a):
        d = target.dim
        xs = np.random.default_rng(0).normal(size=(5, d)).astype(np.float32) + 3.0
        us = np.linspace(-3, 3, 5, dtype=np.float32)
        ext = pseudo_extended(target, 1)
        fixed = pseudo_extended(target, 1, fixed_beta=0.3)
        with_q = pseudo_extended(target, 1, proposal=lambda x: -0.5 * jnp.sum(x**2))
        zs = jnp.concatenate([xs, us[:, None]], axis=1)
        original = jax.vmap(target.logdensity_fn)(xs)

        def batch(f):
            return jax.jit(jax.vmap(f))

        np.testing.assert_allclose(batch(ext.logdensity_fn)(zs) - log_jacobian(us), original, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(batch(fixed.logdensity_fn)(xs), original, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(batch(with_q.logdensity_fn)(xs), original, rtol=1e-5, atol=1e-5)
        grads = batch(jax.grad(ext.logdensity_fn))(zs)[:, :d]
        np.testing.assert_allclose(grads, batch(jax.grad(target.logdensity_fn))(xs), rtol=1e-4, atol=1e-5)


def test_extended_density_is_eq4_and_eq8(bimodal):
    """Eq. 4 with a normalised q: pi^N = (1/N) sum_i pi(x_i) prod_{j != i} q(x_j), exactly;
    eq. 8 (tempered, uniform pi(beta) and g(beta)) in its product form, plus the Jacobian."""
    rng = np.random.default_rng(1)

    def pdf(x):
        return 0.5 * norm.pdf(x, -1, np.sqrt(0.1)) + 0.5 * norm.pdf(x, 1, np.sqrt(0.02))

    n = 3
    ext_q = jax.jit(pseudo_extended(bimodal, n, proposal=lambda x: jnp.sum(log_normal(x, 2.0))).logdensity_fn)
    ext_t = jax.jit(pseudo_extended(bimodal, n).logdensity_fn)
    for _ in range(5):
        x = rng.normal(size=n)
        q = norm.pdf(x, 0, np.sqrt(2.0))
        direct = np.mean([pdf(x[i]) * np.prod(np.delete(q, i)) for i in range(n)])
        np.testing.assert_allclose(ext_q(jnp.asarray(x, jnp.float32)), np.log(direct), rtol=1e-5)
        u = rng.normal(size=n)
        beta = 0.001 + 0.999 / (1 + np.exp(-u))
        g = pdf(x)
        eq8 = np.mean([g[i] / g[i] ** beta[i] for i in range(n)]) * np.prod(g**beta)
        z = jnp.asarray(np.concatenate([x, u]), jnp.float32)
        np.testing.assert_allclose(ext_t(z) - np.sum(log_jacobian(u)), np.log(eq8), rtol=1e-5)


def test_resampling_exact_extended_draws_gives_exact_target_draws(bimodal):
    """Prop. 3.1 / App. B: draw pi^N exactly (I uniform, x_I ~ pi, x_j ~ q), resample, and
    the kept particle is an exact draw of pi: mode occupation and moments within i.i.d. error."""
    n_iter, n = 40_000, 4
    key = jax.random.key(3)
    k_i, k_pi, k_q, k_res = jax.random.split(key, 4)
    which = jax.random.randint(k_i, (n_iter,), 0, n)
    exact = bimodal.truth.sample(k_pi, n_iter)[:, 0]
    xs = jnp.sqrt(2.0) * jax.random.normal(k_q, (n_iter, n))
    xs = jnp.where(jax.nn.one_hot(which, n, dtype=bool), exact[:, None], xs)
    ext = pseudo_extended(bimodal, n, proposal=lambda x: jnp.sum(log_normal(x, 2.0)))
    out = resample_extended(xs[None], ext, k_res)
    draws = out.draws.reshape(-1)
    p_hat = np.mean(draws > 0)
    assert abs(p_hat - 0.5) / np.sqrt(0.25 / n_iter) < Z_CRIT
    for f, true in ((lambda x: x, 0.0), (lambda x: x**2, 1.06)):
        v = f(draws)
        assert abs(v.mean() - true) / (v.std() / np.sqrt(n_iter)) < Z_CRIT
    # the weighted (Rao-Blackwellised) estimate is at least as precise as the resampled one
    second = out.weighted_mean(lambda x: x**2)
    assert abs(float(second[0]) - 1.06) / ((draws**2).std() / np.sqrt(n_iter)) < Z_CRIT
    assert 1.0 <= out.ess_per_iteration <= n and 0 < out.ess <= n_iter * n


def test_weights_that_all_underflow_are_handled_in_log_space(bimodal):
    """Particles at x = 300 have log gamma ~ -2e6: every exp(weight) underflows in float32."""
    ext = pseudo_extended(bimodal, 3)
    z = jnp.array([[[300.0, 310.0, 305.0, 0.0, 0.0, 0.0]]], jnp.float32)
    out = resample_extended(z, ext, jax.random.key(0))
    assert np.all(np.isfinite(out.log_weights)) and np.all(out.log_weights < -1e5)
    np.testing.assert_allclose(out.weights.sum(-1), 1.0)
    assert out.draws[0, 0, 0] == 300.0  # the least improbable particle dominates
    assert np.isfinite(out.ess)


def test_bad_input(bimodal):
    for n in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="pseudo-samples N"):
            pseudo_extended(bimodal, n)
    for bounds in ((0.0, 1.0), (0.5, 0.2), (0.1, 1.2), (0.3, 0.3), (0.1,)):
        with pytest.raises(ValueError, match="beta_bounds"):
            pseudo_extended(bimodal, 2, beta_bounds=bounds)
    for beta in (0.0, 1.5, -0.1):
        with pytest.raises(ValueError, match="fixed_beta"):
            pseudo_extended(bimodal, 2, fixed_beta=beta)
    with pytest.raises(ValueError, match="not both"):
        pseudo_extended(bimodal, 2, fixed_beta=0.5, proposal=lambda x: -jnp.sum(x**2))

    # finite log density, NaN gradient (the classic jnp.where trap)
    def not_differentiable(x):
        return jnp.sum(jnp.where(x > 1e9, jnp.sqrt(-x), -(x**2)))

    bad = Target("nan-grad", not_differentiable, Real(2))
    with pytest.raises(ValueError, match="gradient of the log density is not finite"):
        pseudo_extended(bad, 2)
    ext = pseudo_extended(bimodal, 2)
    with pytest.raises(ValueError, match="pseudo_extended"):
        resample_extended(np.zeros((1, 3, 4)), bimodal, jax.random.key(0))
    with pytest.raises(ValueError, match="expected extended draws"):
        resample_extended(np.zeros((1, 3, 5)), ext, jax.random.key(0))


def _mode_and_moment_z(draws, indicator_truths, moment_fns):
    """|z| of mode occupations and moments against the truth, MCSE from ArviZ (bulk)."""
    zs = []
    for ind, p in indicator_truths:
        s = summary(ind(draws)[..., None].astype(float))
        zs.append((s["mean"][0] - p) / s["mcse_mean"][0])
    for fn, true in moment_fns:
        s = summary(fn(draws))
        zs.extend((s["mean"] - true) / s["mcse_mean"])
    return np.abs(np.asarray(zs))


@pytest.mark.slow
def test_pe_nuts_on_bimodal_matches_mixture(bimodal):
    """PE (N = 2, tempered q, NUTS) resampled draws: P(x > 0) = 1/2, E x = 0, E x^2 = 1.06.
    Plain NUTS from the same starts sticks to one mode per chain (the paper's Fig. 2)."""
    trace = gradmc.sample(
        bimodal, "nuts", extended=2, num_chains=8, num_warmup=500, num_draws=2500, seed=11, progress=False
    )
    draws = trace.extended.draws  # (chain, draw, 1)
    zs = _mode_and_moment_z(draws, [(lambda x: x[..., 0] > 0, 0.5)], [(lambda x: x, 0.0), (lambda x: x**2, 1.06)])
    assert np.all(zs < Z_CRIT), zs
    per_chain = np.mean(draws[..., 0] > 0, axis=1)
    assert np.all((per_chain > 0.05) & (per_chain < 0.95)), per_chain  # every chain visits both modes


@pytest.mark.slow
def test_pe_nuts_on_kou_a_matches_mixture(kou_a):
    """Kou (a), N = 5: each of the 20 modes holds 1/20 (Bonferroni over modes) and the four
    moments of Table 1 match the truth within MCSE."""
    out = gradmc.sample(
        kou_a, "nuts", extended=5, num_chains=8, num_warmup=1000, num_draws=5000, seed=5, progress=False
    ).extended
    means = kou_a.metadata["means"]

    def nearest(x):
        return np.argmin(((x[..., None, :] - means) ** 2).sum(-1), axis=-1)

    modes = [(lambda x, j=j: nearest(x) == j, 0.05) for j in range(20)]
    truth = kou_a.truth
    zs = _mode_and_moment_z(out.draws, modes, [(lambda x: x, truth.mean), (lambda x: x**2, truth.second_moment)])
    assert np.all(zs[:20] < norm.ppf(1 - 0.01 / 40)), zs[:20]
    assert np.all(zs[20:] < norm.ppf(1 - 0.01 / 8)), zs[20:]
