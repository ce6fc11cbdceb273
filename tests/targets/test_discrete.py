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
from gradmc.enumeration import enumerate_target
from gradmc.spaces import Binary, Categorical, Ordinal, Real, Spin
from gradmc.targets import lattice, ordinal, quadratic, sparse_regression

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


@pytest.mark.parametrize("space", [Binary(3), Spin(3), Ordinal([-1.0, 0.5, 2.0, 3.0], 3), Categorical(3, 3)], ids=str)
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
    """App. K as in the authors' code, written out literally in float64 NumPy (D x D matrices)."""
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


def _dense_value_and_grad(J, b, x):
    """sᵀJs + bᵀs and 2Js + b in float64 numpy."""
    return x @ J @ x + b @ x, 2 * J @ x + b


def _structured_matches_dense(t, J, b, points):
    """The target's value and gradient (float64 and float32) against the dense formula."""
    value_and_grad = jax.vmap(jax.value_and_grad(t.logdensity_fn))
    with jax.enable_x64(True):
        v64, g64 = jax.jit(value_and_grad)(jnp.asarray(points, jnp.float64))
    v32, g32 = jax.jit(value_and_grad)(jnp.asarray(points, jnp.float32))
    for x, a64, d64, a32, d32 in zip(points, v64, g64, v32, g32, strict=False):
        value, grad = _dense_value_and_grad(J, b, x.reshape(-1))
        assert float(a64) == pytest.approx(value, rel=1e-12, abs=1e-12)
        np.testing.assert_allclose(np.reshape(d64, -1), grad, rtol=1e-12, atol=1e-12)
        # float32: rounding the input and summing n terms errs by at most ~(n + 2)·2⁻²⁴·Σ|terms|
        tol = (x.size + 8) * 2.0**-24 * (np.abs(J).sum() * np.abs(x).max() ** 2 + np.abs(b).sum() * np.abs(x).max())
        assert float(a32) == pytest.approx(value, abs=tol)
        np.testing.assert_allclose(np.reshape(d32, -1), grad, atol=tol)


def _points(space, key, n=4):
    """Lattice states and real points near them (the gradient samplers evaluate both)."""
    k1, k2 = jax.random.split(key)
    states = np.stack([np.asarray(space.sample_uniform(k)) for k in jax.random.split(k1, n)]).astype(np.float64)
    return np.concatenate([states, states + np.asarray(jax.random.normal(k2, states.shape), np.float64)])


@pytest.mark.parametrize("side", [2, 3, 4, 5])
@pytest.mark.parametrize("categories", [1, 3])
def test_neighbour_sum_is_the_adjacency(side, categories):
    """The rolls applied to every unit vector give A ⊗ I (side 2: A_ij = 2, the double bonds)."""
    columns = jax.vmap(lattice.neighbour_sum(side, categories))(jnp.eye(side * side * categories))
    np.testing.assert_array_equal(np.asarray(columns).T, np.kron(lattice.periodic_adjacency(side), np.eye(categories)))


def _rolled(t, strength, categories=1):
    """The same target with J s through the neighbour rolls, whatever the lattice picked."""
    roll = lattice.neighbour_sum(t.metadata["side"], categories)
    return quadratic.quadratic_target(
        None, t.metadata["b"], t.space, apply_J=lambda x: strength * roll(x), max_enumerate=0
    )


@pytest.mark.parametrize("side", [2, 3, 4, 5, 17])
@pytest.mark.parametrize("spin", [True, False])
def test_ising_matches_dense_J(side, spin):
    """f and ∇f (the lattice's pick and the rolls) equal sᵀJs + bᵀs and 2Js + b with J = strength·A;
    side 17 (289 sites) is past DENSE_MATVEC_MAX, so the registered target itself rolls there."""
    field = np.linspace(-0.7, 0.9, side * side)
    t = lattice.ising(side=side, strength=-0.35, field=field, spin=spin)
    J = -0.35 * lattice.periodic_adjacency(side)
    np.testing.assert_array_equal(t.metadata["J"], J)
    points = _points(t.space, jax.random.key(side))
    _structured_matches_dense(t, J, field, points)
    _structured_matches_dense(_rolled(t, -0.35), J, field, points)


@pytest.mark.parametrize("side,num_states", [(2, 3), (3, 2), (4, 4), (5, 3)])
def test_potts_matches_dense_J(side, num_states):
    field = np.linspace(-1.0, 0.5, side * side * num_states).reshape(side * side, num_states)
    t = lattice.potts(side=side, num_states=num_states, strength=0.45, field=field)
    J = np.kron(0.45 * lattice.periodic_adjacency(side), np.eye(num_states))
    np.testing.assert_array_equal(t.metadata["J"], J)
    _structured_matches_dense(t, J, field.reshape(-1), _points(t.space, jax.random.key(10 + side)))


def test_dense_J_kept_only_when_small():
    """metadata["J"] up to DENSE_J_MAX rows (or on request); beyond, block Gibbs asks for M."""
    assert lattice.DENSE_MATVEC_MAX <= lattice.DENSE_J_MAX == 1024
    assert "J" in lattice.ising(side=32).metadata and "J" not in lattice.ising(side=33).metadata
    assert "J" in lattice.potts(side=18, num_states=3).metadata  # 972 rows
    assert "J" not in lattice.potts(side=19, num_states=3).metadata  # 1083 rows
    forced = lattice.ising(side=33, dense_J=True)
    np.testing.assert_array_equal(forced.metadata["J"], 0.2 * lattice.periodic_adjacency(33))
    with pytest.raises(ValueError, match="dense_J"):
        lattice.ising(side=3, dense_J="yes")
    with pytest.raises(ValueError, match="M="):
        registry.sampler("block-gibbs").bind(lattice.ising(side=33), 0)
    big = registry.target("ising", side=100, strength=0.2, field=0.1)  # 10^4 sites, no 10^4 x 10^4 matrix
    assert set(big.metadata) >= {"b", "side", "strength"} and big.truth is None
    assert float(big.logdensity_fn(jnp.ones(10_000))) == pytest.approx(4 * 10_000 * 0.2 + 10_000 * 0.1, rel=1e-6)


@pytest.mark.parametrize("antiferromagnetic", [False, True])
def test_clock_potts_log_density_and_gradient(antiferromagnetic):
    side, q, kappa = 3, 7, 1.3
    t = registry.target("clock-potts", side=side, q=q, kappa=kappa, antiferromagnetic=antiferromagnetic)
    coupling = -kappa if antiferromagnetic else kappa
    s = np.asarray(t.space.sample_uniform(jax.random.key(5)), np.float64)
    expected = coupling * sum(np.cos(2 * np.pi * (s[i] - s[j]) / q) for i, j in _bonds(side))
    assert float(t.logdensity_fn(jnp.asarray(s))) == pytest.approx(expected, rel=1e-5, abs=1e-5)
    # ∂f/∂s_i = -(J/T)(2π/q) Σ_{j~i} sin(2π(s_i - s_j)/q)   (docs/discrete-hams.md §10.4)
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


def test_quadratic_structured_apply_J_and_derivatives():
    """apply_J gives the same target as the dense J; the custom JVP's gradient is 2Js + b
    and its Hessian 2J (second derivatives go through the JVP rule)."""
    dense = registry.target("quadratic", space="spin", d=5, seed=3)
    J, b = dense.metadata["J"], dense.metadata["b"]
    structured = quadratic.quadratic_target(None, b, Spin(5), apply_J=lambda x: jnp.asarray(J, x.dtype) @ x)
    assert "J" not in structured.metadata
    np.testing.assert_allclose(structured.truth.marginals, dense.truth.marginals, atol=1e-12)
    np.testing.assert_allclose(structured.truth.cov, dense.truth.cov, atol=1e-12)
    x = np.random.default_rng(0).normal(size=5)
    with jax.enable_x64(True):
        f = dense.logdensity_fn
        np.testing.assert_allclose(jax.grad(f)(jnp.asarray(x)), 2 * J @ x + b, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(jax.hessian(f)(jnp.asarray(x)), 2 * J, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(jax.jacfwd(jax.grad(structured.logdensity_fn))(jnp.asarray(x)), 2 * J, atol=1e-12)
    with pytest.raises(ValueError, match="apply_J"):
        quadratic.quadratic_target(None, None, Binary(3))


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
