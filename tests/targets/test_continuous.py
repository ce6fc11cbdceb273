"""Continuous targets and mixtures: log densities, stored/exact truths, bad input.

Statistical checks are z-tests at family-wise p = 0.01 (Bonferroni over the quantities
compared in one test): |estimate - truth| / MCSE < Phi^{-1}(1 - 0.01 / (2 m)).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats
from scipy.special import logsumexp

from gradmc import registry
from gradmc.targets import continuous, mixtures  # noqa: F401  (registers the targets)
from gradmc.targets.mixtures import KOU_MEANS, GaussianMixture

P_VALUE = 0.01


def assert_z(estimate, mcse, truth, what):
    """Two-sided z-test of each entry, Bonferroni over the entries (family-wise P_VALUE)."""
    estimate, mcse, truth = (np.ravel(np.asarray(a, dtype=np.float64)) for a in (estimate, mcse, truth))
    crit = stats.norm.ppf(1 - P_VALUE / (2 * estimate.size))
    z = np.abs(estimate - truth) / mcse
    assert np.all(z < crit), f"{what}: z = {z} (critical {crit:.2f}); estimate {estimate}, truth {truth}"


def second_moments(mean, cov):
    """Upper-triangular entries of E[x x^T] from a mean and covariance."""
    m = np.outer(mean, mean) + np.asarray(cov)
    return m[np.triu_indices(len(mean))]


def assert_exact_sampler_matches(target, n, seed):
    """Mean and second moments of ``n`` exact draws vs the target's exact truth (iid MCSE)."""
    x = np.asarray(target.truth.sample(jax.random.key(seed), n), dtype=np.float64)
    assert x.shape == (n, target.dim)
    iu = np.triu_indices(target.dim)
    f = np.concatenate([x, (x[:, :, None] * x[:, None, :])[:, iu[0], iu[1]]], axis=1)
    truth = np.concatenate([target.truth.mean, second_moments(target.truth.mean, target.truth.cov)])
    assert_z(f.mean(0), f.std(0, ddof=1) / np.sqrt(n), truth, f"{target.name} exact sampler")


def logdensity_at(target, points):
    return np.asarray(jax.jit(jax.vmap(target.logdensity_fn))(jnp.asarray(points, jnp.float32)), dtype=np.float64)


RNG = np.random.default_rng(0)


# --- registry ----------------------------------------------------------------------------

NAMES = [
    "gaussian", "gaussian-2d-corr", "neal-100", "gp-51", "banana", "warped-gaussian", "flower",
    "kou-mixture-a", "kou-mixture-b", "bimodal-1d",
]  # fmt: skip


@pytest.mark.parametrize("name", NAMES)
def test_registered_target_is_complete(name):
    entry = {e.name: e for e in registry.targets("continuous")}[name]
    assert entry.description
    t = registry.target(name)
    assert t.name == name and t.description and t.truth.source
    assert t.truth.mean.shape == (t.dim,) and t.truth.cov.shape == (t.dim, t.dim)
    x0 = t.draw_initial(jax.random.key(1))
    assert x0.shape == (t.dim,)
    value, grad = jax.value_and_grad(t.logdensity_fn)(x0)
    assert value.dtype == jnp.float32 and np.isfinite(value) and np.all(np.isfinite(grad))
    if t.dim == 2:
        (x_lo, x_hi), (y_lo, y_hi) = t.bounds
        m = t.truth.mean
        assert x_lo < m[0] < x_hi and y_lo < m[1] < y_hi


# --- log densities against scipy / closed forms --------------------------------------------


def _random_spd(d, rng):
    a = rng.normal(size=(d, d))
    return a @ a.T / d + 0.5 * np.eye(d)


@pytest.mark.parametrize("force_dense", [False, True])
def test_gaussian_logdensity_matches_scipy(force_dense):
    rng = np.random.default_rng(1)
    mean, cov = rng.normal(size=4), _random_spd(4, rng)
    for c in (cov, np.diag(np.diag(cov))):  # dense path and (unless forced dense) diagonal path
        t = continuous.gaussian(mean, c, force_dense=force_dense)
        x = rng.normal(size=(5, 4)) * 2
        ref = stats.multivariate_normal(mean, c).logpdf(x)
        np.testing.assert_allclose(logdensity_at(t, x), ref, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("name", ["gaussian-2d-corr", "neal-100", "gp-51"])
def test_named_gaussians_match_scipy(name):
    t = registry.target(name)
    x = np.asarray(t.truth.sample(jax.random.key(2), 4))
    ref = stats.multivariate_normal(t.truth.mean, t.truth.cov).logpdf(x)
    np.testing.assert_allclose(logdensity_at(t, x), ref, rtol=1e-4, atol=1e-3)


def test_named_gaussian_parameters():
    np.testing.assert_allclose(registry.target("gaussian-2d-corr").truth.cov, [[1, 0.99], [0.99, 1]])
    np.testing.assert_allclose(np.sqrt(np.diag(registry.target("neal-100").truth.cov)), np.arange(1, 101) / 100)
    gp = registry.target("gp-51")
    t = np.linspace(0, 4, 51)
    assert gp.dim == 51
    np.testing.assert_allclose(gp.truth.cov[3, 7], np.exp(-((t[3] - t[7]) ** 2) / (2 * 0.16)))
    np.testing.assert_allclose(np.diag(gp.truth.cov), 1.01)
    assert "squared length scale" in gp.description


def test_dense_1000d_gaussian_gradient():
    rng = np.random.default_rng(3)
    d = 1000
    a = rng.normal(size=(d, d)) / np.sqrt(d)
    cov = a @ a.T + np.eye(d)
    mean = rng.normal(size=d)
    t = continuous.gaussian(mean, cov, name="gauss-1000")
    x = rng.normal(size=d)
    grad = np.asarray(jax.jit(jax.grad(t.logdensity_fn))(jnp.asarray(x, jnp.float32)))
    expected = -np.linalg.solve(cov, x - mean)
    np.testing.assert_allclose(grad, expected, rtol=2e-3, atol=2e-3 * np.abs(expected).max())


def test_gaussian_hessian_is_minus_precision():
    cov = np.array([[2.0, 0.5, 0.1], [0.5, 1.0, 0.2], [0.1, 0.2, 0.5]])
    t = continuous.gaussian([1.0, 2.0, 3.0], cov)
    hess = np.asarray(jax.hessian(t.logdensity_fn)(jnp.zeros(3)))
    np.testing.assert_allclose(hess, -np.linalg.inv(cov), rtol=1e-5, atol=1e-5)


def test_warped_gaussian_logdensity_matches_scipy():
    t = registry.target("warped-gaussian")
    x = np.column_stack([RNG.normal(0, 10, 6), RNG.normal(0, 10, 6)])
    ref = stats.norm(0, 10).logpdf(x[:, 0]) + stats.norm(0.1 * (x[:, 0] ** 2 - 100), 1).logpdf(x[:, 1])
    np.testing.assert_allclose(logdensity_at(t, x), ref, rtol=1e-5, atol=1e-4)


def test_banana_and_flower_logdensity_formulas():
    x = RNG.uniform(-3, 3, size=(8, 2))
    ref = -(x[:, 0] ** 2) / 10 - x[:, 1] ** 4 / 10 - 2 * (x[:, 1] - x[:, 0] ** 2) ** 2
    np.testing.assert_allclose(logdensity_at(registry.target("banana"), x), ref, rtol=1e-5, atol=1e-5)
    x = RNG.uniform(-18, 18, size=(8, 2))
    resid = np.hypot(x[:, 0], x[:, 1]) - 10 - 6 * np.cos(6 * np.arctan2(x[:, 1], x[:, 0]))
    np.testing.assert_allclose(logdensity_at(registry.target("flower"), x), -0.5 * resid**2, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("name", ["kou-mixture-a", "kou-mixture-b", "bimodal-1d"])
def test_mixture_logdensity_matches_scipy(name):
    t = registry.target(name)
    w, mu, cov = (t.metadata[k] for k in ("weights", "means", "covs"))
    x = np.asarray(t.truth.sample(jax.random.key(4), 6)) + RNG.normal(0, 0.3, size=(6, t.dim))
    comps = np.stack([stats.multivariate_normal(m, c).logpdf(x) for m, c in zip(mu, cov, strict=False)], axis=-1)
    ref = logsumexp(comps + np.log(w), axis=-1)
    np.testing.assert_allclose(logdensity_at(t, x), ref, rtol=1e-5, atol=1e-4)


def test_bimodal_reading():
    t = registry.target("bimodal-1d")
    x = np.linspace(-2, 2, 9)[:, None]
    ref = np.log(0.5 * stats.norm(-1, np.sqrt(0.1)).pdf(x[:, 0]) + 0.5 * stats.norm(1, np.sqrt(0.02)).pdf(x[:, 0]))
    np.testing.assert_allclose(logdensity_at(t, x), ref, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(t.truth.mean, [0.0], atol=1e-12)
    np.testing.assert_allclose(t.truth.cov, [[0.5 * 0.1 + 0.5 * 0.02 + 1.0]])


# --- exact truths ------------------------------------------------------------------------


def test_kou_a_published_truth():
    t = registry.target("kou-mixture-a")
    got = np.concatenate([t.truth.mean, t.truth.second_moment])
    np.testing.assert_array_equal(np.round(got, 3), [4.478, 4.905, 25.605, 33.920])


def test_kou_b_readings():
    sd = registry.target("kou-mixture-b")  # default reading
    assert "standard deviation" in sd.description
    got = np.concatenate([sd.truth.mean, sd.truth.second_moment])
    np.testing.assert_array_equal(np.round(got, 3), [4.688, 5.030, 25.558, 31.378])
    var = registry.target("kou-mixture-b", variance_reading="var")
    np.testing.assert_array_equal(np.round(var.truth.second_moment, 3), [25.668, 31.488])
    np.testing.assert_allclose(var.truth.mean, sd.truth.mean)  # weights and means do not depend on it
    d = np.linalg.norm(KOU_MEANS - 5, axis=1)
    np.testing.assert_allclose(sd.metadata["covs"][:, 0, 0], (d / 20) ** 2)
    np.testing.assert_allclose(var.metadata["covs"][:, 0, 0], d / 20)


@pytest.mark.parametrize(
    "name, options",
    [
        ("kou-mixture-a", {}),
        ("kou-mixture-b", {}),
        ("kou-mixture-b", {"variance_reading": "var"}),
        ("bimodal-1d", {}),
        ("warped-gaussian", {}),
        ("gaussian-2d-corr", {}),
    ],
)
def test_exact_sampler_matches_exact_moments(name, options):
    assert_exact_sampler_matches(registry.target(name, **options), n=200_000, seed=5)


def test_general_mixture_full_covariances():
    rng = np.random.default_rng(6)
    mix = GaussianMixture([1.0, 2.0, 3.0], rng.normal(0, 2, (3, 3)), np.stack([_random_spd(3, rng) for _ in range(3)]))
    np.testing.assert_allclose(mix.weights, [1 / 6, 2 / 6, 3 / 6])
    t = mix.to_target("mix3", "a 3-D test mixture")
    assert_exact_sampler_matches(t, n=200_000, seed=7)
    x = rng.normal(size=(4, 3))
    comps = np.stack(
        [stats.multivariate_normal(m, c).logpdf(x) for m, c in zip(mix.means, mix.covs, strict=False)], axis=-1
    )
    ref = logsumexp(comps + np.log(mix.weights), axis=-1)
    np.testing.assert_allclose(logdensity_at(t, x), ref, rtol=1e-5, atol=1e-4)


def test_warped_gaussian_closed_form():
    t = registry.target("warped-gaussian")
    np.testing.assert_allclose(t.truth.cov, np.diag([100.0, 201.0]))


# --- stored quadrature moments reproduced independently -------------------------------------


def _snis_check(log_w, f, target, what):
    """Self-normalised importance sampling of E[f] and Z, with delta-method MCSE, vs the stored truth."""
    n = log_w.size
    shift = log_w.max()
    w = np.exp(log_w - shift)
    wn = w / w.sum()
    est = wn @ f
    mcse = np.sqrt(((wn[:, None] * (f - est)) ** 2).sum(0))
    log_z = np.log(w.mean()) + shift
    log_z_mcse = w.std(ddof=1) / np.sqrt(n) / w.mean()
    truth = np.concatenate([target.truth.mean, second_moments(target.truth.mean, target.truth.cov)])
    assert_z(
        np.append(est, log_z),
        np.append(mcse, log_z_mcse),
        np.append(truth, target.metadata["log_normalizer"]),
        what,
    )
    assert 1.0 / (wn**2).sum() > n / 20  # the proposal is reasonable: weight ESS above 5%


def _features(x, y):
    return np.column_stack([x, y, x * x, x * y, y * y])


def test_banana_moments_by_importance_sampling():
    # q(x, y) = N(x | 0, 1) N(y | x^2, 1/4): the -2(y - x^2)^2 term of the banana cancels.
    rng = np.random.default_rng(8)
    n = 1_000_000
    x = rng.normal(0, 1, n)
    y = x**2 + 0.5 * rng.normal(size=n)
    log_q = stats.norm.logpdf(x) + stats.norm(x**2, 0.5).logpdf(y)
    log_p = -(x**2) / 10 - y**4 / 10 - 2 * (y - x**2) ** 2
    _snis_check(log_p - log_q, _features(x, y), registry.target("banana"), "banana")


def test_flower_moments_by_importance_sampling():
    # q: uniform angle, radius N(10, 4^2) truncated to r > 0 (Cartesian density q(r, theta) / r).
    rng = np.random.default_rng(9)
    n = 1_000_000
    theta = rng.uniform(0, 2 * np.pi, n)
    r = stats.truncnorm(-2.5, np.inf, loc=10, scale=4).rvs(n, random_state=rng)
    x, y = r * np.cos(theta), r * np.sin(theta)
    log_q = stats.truncnorm(-2.5, np.inf, loc=10, scale=4).logpdf(r) - np.log(2 * np.pi) - np.log(r)
    log_p = -0.5 * (r - 10 - 6 * np.cos(6 * np.arctan2(y, x))) ** 2
    _snis_check(log_p - log_q, _features(x, y), registry.target("flower"), "flower")


def _cartesian_flower_moments(h):
    g = np.arange(-24.0, 24.0 + h / 2, h)
    x, y = np.meshgrid(g, g, indexing="ij")
    p = np.exp(-0.5 * (np.hypot(x, y) - 10 - 6 * np.cos(6 * np.arctan2(y, x))) ** 2)
    z = p.sum()
    mean = np.array([(x * p).sum(), (y * p).sum()]) / z
    second = np.array([(x * x * p).sum(), (x * y * p).sum(), (y * y * p).sum()]) / z
    return np.concatenate([[np.log(z * h * h)], mean, second])


def test_flower_moments_by_cartesian_grid():
    """An independent quadrature (Cartesian grid, not polar): the stored values must agree
    within the grid's own discretisation error, estimated by halving the spacing."""
    coarse, fine = _cartesian_flower_moments(0.1), _cartesian_flower_moments(0.05)
    t = registry.target("flower")
    stored = np.concatenate([[t.metadata["log_normalizer"]], t.truth.mean, second_moments(t.truth.mean, t.truth.cov)])
    tol = np.abs(fine - coarse) + 1e-9 * np.maximum(1.0, np.abs(fine))
    assert np.all(np.abs(stored - fine) <= tol), (stored, fine, tol)


# --- bad input ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"mean": [0.0, 0.0], "cov": [[1.0, 2.0], [2.0, 1.0]]}, "positive definite"),
        ({"mean": [0.0, 0.0], "cov": [[1.0, 0.5], [0.0, 1.0]]}, "symmetric"),
        ({"mean": [0.0, 0.0, 0.0], "cov": np.eye(2)}, "3x3"),
        ({"mean": [0.0, 0.0], "cov": [1.0, 1.0]}, "square"),
        ({"mean": [[0.0, 0.0]], "cov": np.eye(2)}, "1-D"),
        ({"mean": [0.0, np.nan], "cov": np.eye(2)}, "finite"),
        ({"cov": [1.0, 2.0]}, "square"),
        ({"mean": [0.0, 0.0], "dim": 3}, "dim"),
    ],
)
def test_gaussian_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        continuous.gaussian(**kwargs)


@pytest.mark.parametrize(
    "weights, means, covs, match",
    [
        ([1.0, -1.0], [[0.0], [1.0]], [1.0, 1.0], "non-negative"),
        ([1.0, 1.0, 1.0], [[0.0], [1.0]], [1.0, 1.0], "weights"),
        ([1.0, 1.0], [0.0, 1.0], [1.0, 1.0], r"\(K, d\)"),
        ([1.0, 1.0], [[0.0, 0.0], [1.0, 1.0]], np.ones((2, 3)), "covs must have shape"),
        ([1.0, 1.0], [[0.0, 0.0], [1.0, 1.0]], [1.0, -1.0], "component 1 covariance must be positive definite"),
        ([1.0, 1.0], [[0.0, 0.0], [1.0, 1.0]], [np.eye(2), [[1.0, 2.0], [2.0, 1.0]]], "positive definite"),
    ],
)
def test_mixture_bad_input(weights, means, covs, match):
    with pytest.raises(ValueError, match=match):
        GaussianMixture(weights, means, covs)


@pytest.mark.parametrize(
    "name, options",
    [
        ("kou-mixture-b", {"variance_reading": "variance"}),
        ("gaussian-2d-corr", {"rho": 1.0}),
        ("gp-51", {"length_scale_sq": -0.16}),
        ("warped-gaussian", {"nu": 0.0}),
    ],
)
def test_named_target_bad_options(name, options):
    with pytest.raises(ValueError):
        registry.target(name, **options)
