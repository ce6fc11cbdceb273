"""Discrete targets with exact truth: enumeration, ordinal mixtures, sparse regression, lattices, quadratics."""

from __future__ import annotations

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats
from scipy.special import gammaln

from gradmc import registry
from gradmc.spaces import Binary, Categorical, Ordinal, Real, Spin
from gradmc.targets import lattice, ordinal, quadratic, sparse_regression
from gradmc.targets.enumerate import enumerate_target

ALPHA = 0.01  # family-wise level of every statistical test below


def _chisquare_pvalue(counts, probs):
    """Pearson chi-square p-value, pooling cells with expected count < 5 into one."""
    counts, probs = np.asarray(counts, float), np.asarray(probs, float)
    expected = probs * counts.sum()
    small = expected < 5
    obs = np.append(counts[~small], counts[small].sum())
    exp = np.append(expected[~small], expected[small].sum())
    keep = exp > 0
    return stats.chisquare(obs[keep], exp[keep]).pvalue


# ----------------------------------------------------------------------------- enumeration


def _wiggly(s):
    """A non-quadratic log density on any event shape."""
    x = jnp.reshape(s, (-1,))
    w = jnp.linspace(-1.0, 1.0, x.size)
    return jnp.sum(w * x) + 0.7 * jnp.sin(x @ x) + 0.3 * x[0] * x[-1] ** 2


@pytest.mark.parametrize(
    "space", [Binary(3), Spin(3), Ordinal([-1.0, 0.5, 2.0, 3.0], 3), Categorical(3, 3)], ids=str
)
def test_enumeration_matches_brute_force(space):
    exact = enumerate_target(_wiggly, space)
    np.testing.assert_allclose(exact.probs.sum(), 1.0, rtol=1e-12)
    # brute force, float64 numpy: itertools.product varies the LAST coordinate fastest
    values = np.asarray(space.values, np.float64)
    states = np.array([np.stack(c) for c in itertools.product(values, repeat=space.d)])
    with jax.enable_x64(True):
        logf = np.array([float(_wiggly(jnp.asarray(s))) for s in states])
    p = np.exp(logf - logf.max())
    p /= p.sum()
    idx = np.array(list(itertools.product(range(space.num_values), repeat=space.d)))
    ours = exact.probs[(idx * space.num_values ** np.arange(space.d)).sum(axis=1)]  # state number of each
    np.testing.assert_allclose(ours, p, rtol=1e-10, atol=1e-14)
    flat = states.reshape(len(states), -1)
    mean = p @ flat
    np.testing.assert_allclose(exact.mean.reshape(-1), mean, atol=1e-12)
    np.testing.assert_allclose(exact.cov, (flat * p[:, None]).T @ flat - np.outer(mean, mean), atol=1e-12)
    pair = np.zeros((space.d, space.d, space.num_values, space.num_values))
    for i, j in itertools.product(range(space.d), repeat=2):
        np.add.at(pair[i, j], (idx[:, i], idx[:, j]), p)
    np.testing.assert_allclose(exact.pairwise, pair, atol=1e-12)
    np.testing.assert_allclose(exact.marginals.sum(axis=1), 1.0, rtol=1e-12)


def test_enumeration_exact_samples_match_probabilities():
    space = Ordinal([0.0, 1.0, 2.0], 3)
    exact = enumerate_target(_wiggly, space)
    draws = np.asarray(exact.sample(jax.random.key(0), 100_000))
    assert draws.shape == (100_000, 3)
    space.validate(draws)
    state = (np.rint(draws).astype(int) * 3 ** np.arange(3)).sum(axis=1)
    assert _chisquare_pvalue(np.bincount(state, minlength=27), exact.probs) > ALPHA


def test_enumeration_bad_input():
    with pytest.raises(ValueError, match="discrete space"):
        enumerate_target(_wiggly, Real(3))
    with pytest.raises(ValueError, match="max_states"):
        enumerate_target(_wiggly, Binary(30))
    with pytest.raises(ValueError, match="NaN"):
        enumerate_target(lambda s: jnp.log(s[0] - 0.5), Binary(2))


# ----------------------------------------------------------------------------- ordinal mixtures


@pytest.fixture(scope="module", params=["poly2", "poly4"])
def poly(request):
    return registry.target(request.param)


@pytest.mark.parametrize("make", [ordinal.poly2, ordinal.poly4])
def test_poly_closed_form_truth_equals_enumeration(make):
    """The closed-form marginals/covariance (and log p being normalised) against enumeration, d = 3."""
    small = make(d=3)
    exact = enumerate_target(small.logdensity_fn, small.space)
    assert abs(exact.log_normaliser) < 1e-10  # log p(s) is normalised on the lattice
    np.testing.assert_allclose(small.truth.marginals, exact.marginals, atol=1e-12)
    np.testing.assert_allclose(small.truth.mean, exact.mean, atol=1e-12)
    np.testing.assert_allclose(small.truth.cov, exact.cov, atol=1e-12)


def test_poly_definition_as_coded():
    t = ordinal.poly2(d=2)
    s = np.array([0.5, 1.2])
    c = np.linspace(0, 2, 50)
    v = np.asarray(t.space.values, np.float64)
    g = lambda u: 0.75 - 2 * u - 6 * u**2  # noqa: E731
    log_norm = np.log(np.exp(g(v[None, :] - c[:, None])).sum(axis=1))
    expected = np.log(np.mean(np.exp(g(s[0] - c) + g(s[1] - c) - 2 * log_norm)))
    with jax.enable_x64(True):
        assert float(t.logdensity_fn(jnp.asarray(s))) == pytest.approx(expected, abs=1e-10)
    np.testing.assert_allclose(v, np.linspace(-1.5, 3.0, 50), atol=1e-6)


def test_poly_exact_sampler_matches_truth(poly):
    n = 20_000
    draws = np.asarray(poly.truth.sample(jax.random.key(1), n))
    assert draws.shape == (n, 20)
    poly.space.validate(draws)
    idx = np.asarray(poly.space.to_index(draws))
    # each coordinate: chi-square against the exact marginal (Bonferroni over the 20)
    pvalues = [_chisquare_pvalue(np.bincount(idx[:, i], minlength=50), poly.truth.marginals[i]) for i in range(20)]
    assert min(pvalues) > ALPHA / 20
    # the dependence between coordinates: z-test of a variance and two covariances
    centred = draws - poly.truth.mean
    for i, j in [(0, 0), (0, 1), (7, 13)]:
        prod = centred[:, i] * centred[:, j]
        z = (prod.mean() - poly.truth.cov[i, j]) / (prod.std(ddof=1) / np.sqrt(n))
        assert abs(z) < stats.norm.ppf(1 - ALPHA / 6)
    # positive correlation along the diagonal of the hypercube (paper §5.1)
    assert np.all(poly.truth.cov > 0)


def test_poly_initial_position(poly):
    starts = np.asarray(jax.vmap(poly.draw_initial)(jax.random.split(jax.random.key(2), 50)))
    idx = np.asarray(poly.space.to_index(starts))
    assert set(np.unique(idx)) == {10, 11, 12}
    poly.space.validate(starts)


# ----------------------------------------------------------------------------- sparse regression


def _literal_log_posterior(s, x, y, h=sparse_regression.Hyperparameters()):
    """App. K as coded, written out literally in float64 NumPy (D x D matrices)."""
    n, dim = x.shape
    xs = x * s
    a = xs.T @ xs
    c = (1 + h.g) / h.g
    eye = np.eye(dim)
    m2 = c * a + h.lam * eye
    size = s.sum()
    return (
        gammaln(size + h.alpha_pi)
        + gammaln(dim - size + h.beta_pi)
        + 0.5 * np.linalg.slogdet(a / h.g + h.lam * eye)[1]
        - 0.5 * np.linalg.slogdet(m2)[1]
        - (h.alpha_sigma + n / 2) * np.log(2 * h.beta_sigma + y @ y - y @ xs @ np.linalg.solve(m2, xs.T @ y))
    )


@pytest.fixture(scope="module")
def sparse():
    return registry.target("sparse-regression")


def test_sparse_regression_log_posterior_matches_literal_formula(sparse):
    x, y = sparse_regression.make_data(0)
    rng = np.random.default_rng(3)
    states = np.concatenate([rng.integers(0, 2, (6, 20)), rng.uniform(-0.5, 1.5, (4, 20))]).astype(np.float64)
    states[0] = 0.0  # the empty mask
    extra = rng.integers(0, 2, (10, 80)) * (rng.uniform(size=(10, 80)) < 0.05)
    full = np.concatenate([states, extra], axis=1)
    log_extra = (extra * np.log(1e-3) + (1 - extra) * np.log1p(-1e-3)).sum(axis=1)
    literal = np.array([_literal_log_posterior(s, x, y) for s in states]) + log_extra
    batched = jax.jit(jax.vmap(sparse.logdensity_fn))
    with jax.enable_x64(True):
        ours64 = np.asarray(batched(jnp.asarray(full)))
    ours32 = np.asarray(batched(jnp.asarray(full, jnp.float32)))
    np.testing.assert_allclose(ours64, literal, rtol=0, atol=1e-8)
    np.testing.assert_allclose(ours32, literal, rtol=0, atol=2e-3)


def test_sparse_regression_cache_is_this_problem(sparse):
    cache = sparse_regression.load_cache()
    x, y = sparse_regression.make_data(int(cache["seed"]))
    np.testing.assert_array_equal(cache["x"], x)
    np.testing.assert_array_equal(cache["y"], y)
    np.testing.assert_array_equal(cache["hyper"], np.asarray(sparse_regression.Hyperparameters()))
    assert "cached" in sparse.truth.source
    pair = sparse.metadata["pairwise_marginals"]
    assert pair.shape == (100, 100, 2, 2)
    np.testing.assert_allclose(pair.sum(axis=(2, 3)), 1.0, atol=1e-12)
    np.testing.assert_allclose(pair.sum(axis=3)[np.arange(100), np.arange(100)], sparse.truth.marginals, atol=1e-12)
    np.testing.assert_allclose(sparse.truth.marginals[20:, 1], 1e-3)
    np.testing.assert_allclose(pair[0, 50], np.outer(sparse.truth.marginals[0], [0.999, 0.001]), rtol=1e-12)
    # the duplicated covariates are exchangeable: copies share their marginal
    m = sparse.truth.marginals[:20, 1]
    np.testing.assert_allclose(m.reshape(4, 5), np.tile(m[:5], (4, 1)), atol=1e-10)
    start = np.asarray(sparse.draw_initial(jax.random.key(0)))
    np.testing.assert_array_equal(start, np.eye(100)[1])


def test_sparse_regression_enumeration_on_a_10_dim_problem():
    """The enumeration code behind the cache, against a literal brute force on 2^10 states."""
    x, y = sparse_regression.make_data(5, num_rows=12, num_base=5, copies=2)
    exact = sparse_regression.enumerate_posterior(x, y)
    states = np.array(list(itertools.product([0.0, 1.0], repeat=10)))[:, ::-1]  # coordinate 0 fastest
    logf = np.array([_literal_log_posterior(s, x, y) for s in states])
    p = np.exp(logf - logf.max())
    p /= p.sum()
    np.testing.assert_allclose(exact.probs, p, rtol=1e-8)
    pair11 = np.einsum("n,ni,nj->ij", p, states, states)
    np.testing.assert_allclose(exact.pairwise[..., 1, 1], pair11, atol=1e-12)
    target = sparse_regression.sparse_regression_target(x, y, num_extra=3)
    assert "cached" not in target.truth.source
    np.testing.assert_allclose(target.truth.marginals[:10], exact.marginals, atol=1e-12)


@pytest.mark.slow
def test_sparse_regression_cache_matches_fresh_full_enumeration(sparse):
    x, y = sparse_regression.make_data(0)
    fresh = sparse_regression.enumerate_posterior(x, y)
    np.testing.assert_allclose(sparse.metadata["pairwise_marginals"][:20, :20], fresh.pairwise, atol=1e-12)


# ----------------------------------------------------------------------------- lattices


def _bonds(side):
    """Each nearest-neighbour bond of the periodic lattice once, by explicit loops."""
    out = []
    for r in range(side):
        for c in range(side):
            out.append((r * side + c, ((r + 1) % side) * side + c))
            out.append((r * side + c, r * side + (c + 1) % side))
    return out


@pytest.mark.parametrize("spin", [True, False])
def test_ising_log_density_hand_computed(spin):
    side, strength, field = 3, 0.3, -0.2
    t = registry.target("ising", side=side, strength=strength, field=field, spin=spin)
    assert t.space == (Spin(9) if spin else Binary(9))
    ones = jnp.ones(9)
    # every site has 4 neighbours: sᵀAs = 9 * 4 = 36 at s = 1, and no ½
    assert float(t.logdensity_fn(ones)) == pytest.approx(36 * strength + 9 * field, rel=1e-6)
    s = np.array(t.space.sample_uniform(jax.random.key(4)), np.float64)
    expected = sum(2 * strength * s[i] * s[j] for i, j in _bonds(side)) + field * s.sum()
    assert float(t.logdensity_fn(jnp.asarray(s))) == pytest.approx(expected, rel=1e-5, abs=1e-5)
    np.testing.assert_allclose(t.metadata["J"], strength * lattice.periodic_adjacency(side))


def test_ising_truth_by_enumeration_only_when_small():
    small = lattice.ising(side=4, strength=0.2)
    assert small.truth is not None and "enumeration" in small.truth.source
    np.testing.assert_allclose(small.truth.mean, 0.0, atol=1e-12)  # spin-flip symmetry
    assert np.all(small.truth.cov[0, lattice.periodic_adjacency(4)[0] > 0] > 0)  # ferromagnetic
    assert small.metadata["pairwise_marginals"].shape == (16, 16, 2, 2)
    assert lattice.ising(side=5).truth is None
    field = np.linspace(-1, 1, 9)
    np.testing.assert_array_equal(lattice.ising(side=3, field=field, spin=False).metadata["b"], field)
    with pytest.raises(ValueError, match="field"):
        lattice.ising(side=3, field=np.zeros(4))
    assert registry.target("ising").dim == 100


def test_periodic_adjacency():
    a = lattice.periodic_adjacency(4)
    np.testing.assert_array_equal(a, a.T)
    np.testing.assert_array_equal(a.sum(axis=1), 4)
    assert np.all(np.diag(a) == 0)
    np.testing.assert_array_equal(lattice.periodic_adjacency(2).sum(axis=1), 4)  # side 2: double bonds
    with pytest.raises(ValueError, match="side"):
        lattice.periodic_adjacency(1)


def test_potts_log_density_and_truth():
    t = registry.target("potts", side=2, num_states=3, strength=0.4, field=[0.1, 0.0, -0.3])
    assert t.space == Categorical(3, 4)
    idx = np.array([0, 2, 2, 1])
    s = np.eye(3)[idx]
    expected = sum(2 * 0.4 * (idx[i] == idx[j]) for i, j in _bonds(2)) + np.array([0.1, 0.0, -0.3])[idx].sum()
    assert float(t.logdensity_fn(jnp.asarray(s))) == pytest.approx(expected, rel=1e-6)
    assert t.truth is not None
    np.testing.assert_allclose(t.truth.marginals.sum(axis=1), 1.0)
    assert t.truth.marginals[0, 0] > t.truth.marginals[0, 2]  # the field favours category 0
    assert registry.target("potts").truth is not None  # default 3x3, k = 3: 19683 states
    with pytest.raises(ValueError, match="field"):
        lattice.potts(side=2, num_states=3, field=np.zeros(4))


@pytest.mark.parametrize("antiferromagnetic", [False, True])
def test_clock_potts_log_density_and_gradient(antiferromagnetic):
    side, q, kappa = 3, 7, 1.3
    t = registry.target("clock-potts", side=side, q=q, kappa=kappa, antiferromagnetic=antiferromagnetic)
    coupling = -kappa if antiferromagnetic else kappa
    s = np.asarray(t.space.sample_uniform(jax.random.key(5)), np.float64)
    expected = coupling * sum(np.cos(2 * np.pi * (s[i] - s[j]) / q) for i, j in _bonds(side))
    assert float(t.logdensity_fn(jnp.asarray(s))) == pytest.approx(expected, rel=1e-5, abs=1e-5)
    # ∂f/∂s_i = -(J/T)(2π/q) Σ_{j~i} sin(2π(s_i - s_j)/q)   (spec §10.4)
    a = lattice.periodic_adjacency(side)
    grad = -coupling * (2 * np.pi / q) * (a * np.sin(2 * np.pi * (s[:, None] - s[None, :]) / q)).sum(axis=1)
    np.testing.assert_allclose(jax.grad(t.logdensity_fn)(jnp.asarray(s, jnp.float32)), grad, atol=1e-4)
    assert t.truth is None  # 7^9 states
    assert float(t.logdensity_fn(jnp.zeros(9))) == pytest.approx(2 * 9 * coupling)


def test_clock_potts_truth_and_bad_input():
    t = lattice.clock_potts(side=2, q=3)
    assert t.truth is not None and t.truth.marginals.shape == (4, 3)
    np.testing.assert_allclose(t.truth.marginals, 1 / 3, atol=1e-12)  # rotation symmetry
    with pytest.raises(ValueError, match="kappa"):
        lattice.clock_potts(side=3, kappa=-1.0)
    with pytest.raises(ValueError, match="q"):
        lattice.clock_potts(side=3, q=1)


# ----------------------------------------------------------------------------- quadratic


@pytest.mark.parametrize("space", ["binary", "spin", "ordinal", "categorical"])
def test_quadratic_on_every_space(space):
    t = registry.target("quadratic", space=space, d=3, num_values=3, seed=1)
    J, b = t.metadata["J"], t.metadata["b"]
    s = np.asarray(t.space.sample_uniform(jax.random.key(6)), np.float64)
    x = s.reshape(-1)
    assert float(t.logdensity_fn(jnp.asarray(s))) == pytest.approx(x @ J @ x + b @ x, rel=1e-5, abs=1e-5)
    assert t.truth is not None and t.truth.cov.shape == (t.dim, t.dim)
    np.testing.assert_allclose(t.truth.marginals.sum(axis=1), 1.0)


def test_quadratic_bad_input():
    with pytest.raises(ValueError, match="shape"):
        quadratic.quadratic_target(np.eye(3), None, Binary(4))
    with pytest.raises(ValueError, match="symmetric"):
        quadratic.quadratic_target(np.triu(np.ones((3, 3))), None, Binary(3))
    with pytest.raises(ValueError, match="space"):
        registry.target("quadratic", space="complex")
    with pytest.raises(ValueError, match="discrete"):
        quadratic.quadratic_target(np.eye(2), None, Real(2))


# ----------------------------------------------------------------------------- all of them


ALL = {
    "poly2": {},
    "poly4": {},
    "sparse-regression": {},
    "ising": {"side": 4},
    "potts": {"side": 2},
    "clock-potts": {"side": 4},
    "quadratic": {"space": "categorical", "d": 3},
}


def test_registered_as_discrete():
    names = {e.name for e in registry.targets("discrete")}
    assert set(ALL) <= names


@pytest.mark.parametrize("name", sorted(ALL))
def test_gradients_finite_at_real_points_and_space_rejects_outside(name):
    t = registry.target(name, **ALL[name])
    key = jax.random.key(7)
    s = np.asarray(t.draw_initial(key))
    t.space.validate(s)
    real = jnp.asarray(s) + 0.3 * jax.random.uniform(key, s.shape, minval=-1.0, maxval=1.0)
    value, grad = jax.jit(jax.value_and_grad(t.logdensity_fn))(real)
    assert np.isfinite(value) and np.all(np.isfinite(grad)) and grad.shape == t.space.event_shape
    assert np.isfinite(jax.jit(t.logdensity_fn)(jnp.asarray(s)))
    bad = np.array(s, np.float64)
    bad.reshape(-1)[0] += 0.37  # off the value set / no longer one-hot
    with pytest.raises(ValueError):
        t.space.validate(bad)
