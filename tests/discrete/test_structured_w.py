"""The sparse second-order model of the HAMS kernel (docs/discrete-hams.md §8.7): a W stored
by diagonals with the Gershgorin D and its factor L (the non-square edge factor or the
block Cholesky factor), its Hessian-pattern probe and its per-row fit, and the learned
sparse path of V-/O-PDHAMS.

* the products W x, (W + D) x, L u, Lᵀ y equal the dense ones, L Lᵀ = W + D and D is the
  Gershgorin shift, for both factors;
* exactness of the kernel with a given, inexact sparse W, with either factor and as an edge
  list (§8.10), on the 3 × 3 Ising model (512 states) and on the 2 × 2 Potts model with 3
  colours (81 states, one-hot rows): long runs of V- and O-PDHAMS within the TV bound; the
  same test rejects a kernel without the momentum term |u'|² − |m|² of the MH ratio (a test of the test);
* the probe finds exactly the lattice's diagonals and edges (on one-hot rows, those of the
  flat position), and the fit recovers the Hessian of the quadratic Ising and Potts targets
  from warm-up moves, through ``gradmc.sample`` with no options; kept draws use the frozen
  model (rejection-free on these quadratic targets);
* the same on the factorial HMM, whose Hessian has dense blocks (every pair of chains at a
  time step);
* φ ≠ 0 with a sparse W is refused (a Hessian with too many diagonals and a high rank: test_low_rank_w.py).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gradmc
from gradmc.curvature import learned_w, sparse_model, sparse_w
from gradmc.discrete import hams, proposals
from gradmc.enumeration import exact_distribution
from gradmc.testing import assert_tv_within_bound

# -- products and factor ---------------------------------------------------------------------------


def random_model(d=11, offsets=(1, 3), delta=0.7, seed=0, kind="edges"):
    rng = np.random.default_rng(seed)
    W_off = rng.normal(size=(len(offsets), d)) * (rng.random((len(offsets), d)) < 0.7)
    return sparse_w.structured_preconditioner(rng.normal(size=d), W_off, offsets, delta, kind)


@pytest.mark.parametrize(("kind", "offsets"), [("edges", (1, 3)), ("edges", (4,)), ("edges", ()), ("blocks", (1, 3))])
def test_products_match_the_dense_matrices(kind, offsets):
    """Both factors; for the blocks d = 11 is not a multiple of b = 3 (a padded last block).
    The edge factor has one column per coordinate and offset (K d normals): √|w_e| v_e for
    the edges of offset 1, c_i e_i + t_i e_{i+3} for the chains of offset 3; a diagonal W
    has L = √δ I; about 30 % of the pairs are no edge, so chains break.
    """
    model = random_model(kind=kind, offsets=offsets)
    W, L = sparse_w.structured_to_dense(model)
    d = W.shape[0]
    rng = np.random.default_rng(1)
    x, u = rng.normal(size=d), rng.normal(size=model.momentum_shape(d))
    np.testing.assert_allclose(model.w_product(x), W @ x, atol=1e-5)
    WD = W + np.diag(np.asarray(model.D, np.float64))
    np.testing.assert_allclose(model.shifted_product(x), WD @ x, atol=1e-5)
    np.testing.assert_allclose(model.l_product(u), L @ u.reshape(-1), atol=1e-5)
    np.testing.assert_allclose(model.lt_product(x).reshape(-1), L.T @ x, atol=1e-5)
    D = np.asarray(model.D, np.float64)
    np.testing.assert_allclose(L @ L.T, W + np.diag(D), atol=1e-5)
    if kind == "blocks":
        assert L.shape == (d, d) and np.allclose(L, np.tril(L))  # block lower bidiagonal, triangular blocks
    else:
        assert L.shape == (d, max(len(offsets), 1) * d)
        for k, o in enumerate(offsets or (0,)):  # column i of row k: entries at i and i + o only
            block = L[:, k * d : (k + 1) * d]
            allowed = np.eye(d, dtype=bool) | np.eye(d, k=-o, dtype=bool)
            assert np.all(block[~allowed] == 0.0)
    gershgorin = 0.7 - np.diag(W) + np.abs(W - np.diag(np.diag(W))).sum(axis=1)
    np.testing.assert_allclose(D, gershgorin, atol=1e-5)
    assert np.linalg.eigvalsh(W + np.diag(D))[0] >= 0.7 - 1e-5  # W + D ⪰ δ I


# -- exactness with a given sparse W: the 3 × 3 Ising model, the 2 × 2 Potts model with 3 colours --


class Case:
    """A small lattice target, its exact distribution, its Hessian on the flat position and
    an inexact sparse W on the Hessian's diagonals (the lattice's W scaled by 0.6 with a
    diagonal added: inexact on purpose, so the MH test matters)."""

    def __init__(self, target, offsets, kind, delta=0.5):
        self.target, self.offsets = target, offsets
        self.f, self.space = target.logdensity_fn, target.space
        one_hot = self.space.values.ndim == 2
        values = np.arange(self.space.num_values) if one_hot else self.space.values
        self.exact = exact_distribution(self.f, values, self.space.d, one_hot=one_hot)
        flat = lambda x: self.f(x.reshape(self.space.event_shape))  # noqa: E731
        hessian = np.asarray(jax.hessian(flat)(jnp.zeros(self.space.dim)))
        i = np.arange(self.space.dim)
        W_off = np.stack([np.where(i + o < i.size, 0.6 * hessian[i, (i + o) % i.size], 0.0) for o in offsets])
        if kind == "graph":  # the same W as an edge list (§8.10)
            k, rows = np.nonzero(W_off)
            cols = rows + np.asarray(offsets)[k]
            self.model = sparse_w.graph_preconditioner(
                np.full(i.size, -0.3), rows, cols, W_off[k, rows], jnp.float32(delta)
            )
        else:
            self.model = sparse_w.structured_preconditioner(np.full(i.size, -0.3), W_off, offsets, delta, kind)


CASES = {
    "ising": Case(gradmc.target("discs-ising", shape=3), (1, 3), "edges"),
    "ising-blocks": Case(gradmc.target("discs-ising", shape=3), (1, 3), "blocks"),
    "potts": Case(gradmc.target("discs-potts", shape=2, num_categories=3), (3, 6), "edges"),  # site · 3 + colour
    "potts-blocks": Case(gradmc.target("discs-potts", shape=2, num_categories=3), (3, 6), "blocks"),
    "ising-graph": Case(gradmc.target("discs-ising", shape=3), (1, 3), "graph"),
}
ISING = CASES["ising"].target
F, SPACE, MODEL = ISING.logdensity_fn, ISING.space, CASES["ising"].model


@functools.cache
def runner(case_name, beta, broken=False):
    """jit(run(s0, keys (C, T)) -> (positions (C, T, ...), acceptance)) of the kernel with the case's model."""
    case = CASES[case_name]
    kernel = hams.build_kernel(beta)
    original = proposals.metropolis

    def metropolis(key, state, proposed, log_correction, rejected=None):  # without Δᵀv_m − ½Δᵀ(W+D)Δ
        return original(key, state, proposed, log_correction[1:], rejected=rejected)

    def step(state, key):
        if broken:
            with pytest.MonkeyPatch.context() as patch:
                patch.setattr(hams.proposals, "metropolis", metropolis)
                new, info = kernel(key, state, case.f, case.space, case.model, 0.7, 0.0)
        else:
            new, info = kernel(key, state, case.f, case.space, case.model, 0.7, 0.0)
        return new, (new.position, info.is_accepted)

    @jax.jit
    def run(s0, init_keys, keys):
        def chain(s, init_key, keys):
            state = hams.init(s, case.f, init_key, precond=case.model)  # v ~ N(0, W + D): started in equilibrium
            return jax.lax.scan(step, state, keys)[1]

        return jax.vmap(chain)(s0, init_keys, keys)

    return run


def long_run(case_name, beta, broken=False, num_chains=32, num_draws=2000, seed=0):
    exact = CASES[case_name].exact
    key_s, key_u, key_run = jax.random.split(jax.random.key(seed), 3)
    states = jnp.asarray(exact.states(one_hot=CASES[case_name].space.values.ndim == 2), jnp.float32)
    s0 = states[jax.random.categorical(key_s, jnp.log(jnp.asarray(exact.probs, jnp.float32)), shape=(num_chains,))]
    draws, accepted = runner(case_name, beta, broken)(
        s0, jax.random.split(key_u, num_chains), jax.random.split(key_run, (num_chains, num_draws))
    )
    return np.asarray(draws), float(np.mean(accepted))


@pytest.mark.parametrize("case_name", list(CASES))
@pytest.mark.parametrize("beta", [1.0, 0.3], ids=["v-pdhams", "o-pdhams"])
def test_given_sparse_w_is_exact(beta, case_name):
    draws, acceptance = long_run(case_name, beta)
    assert 0.05 < acceptance < 0.99  # a real MH test happens
    assert_tv_within_bound(draws, CASES[case_name].exact, p=0.01)


@pytest.mark.parametrize("case_name", list(CASES))
def test_exactness_test_detects_a_missing_momentum_term(case_name):
    draws, _ = long_run(case_name, 1.0, broken=True)
    with pytest.raises(AssertionError):
        assert_tv_within_bound(draws, CASES[case_name].exact, p=0.01)


# -- the probe, the fit and the learned path --------------------------------------------------------

LATTICE = gradmc.target("discs-ising", shape=(5, 6))  # d = 30: diagonals 1 and 6


def test_probe_finds_the_lattice():
    pattern = sparse_model.hessian_pattern(LATTICE.logdensity_fn, LATTICE.space)
    assert pattern.offsets == (1, 6)
    J = np.asarray(LATTICE.metadata["J"])
    d = J.shape[0]
    for k, o in enumerate(pattern.offsets):
        i = np.arange(d - o)
        np.testing.assert_array_equal(pattern.mask[k, : d - o], J[i, i + o] != 0)
        assert not pattern.mask[k, d - o :].any()


POTTS_LATTICE = gradmc.target("discs-potts", shape=(3, 4), num_categories=3)  # 12 sites: d·k = 36


def test_probe_finds_the_one_hot_lattice():
    """On one-hot rows the pattern is that of the flat position (site · k + colour): a bond
    couples the same colour at its two sites, k and k · W apart."""
    pattern = sparse_model.hessian_pattern(POTTS_LATTICE.logdensity_fn, POTTS_LATTICE.space)
    assert pattern.offsets == (3, 12)
    site = np.arange(36) // 3
    np.testing.assert_array_equal(pattern.mask[0], (site % 4 < 3) & (np.arange(36) + 3 < 36))  # right neighbours
    np.testing.assert_array_equal(pattern.mask[1], np.arange(36) + 12 < 36)  # lower neighbours


@pytest.fixture(scope="module")
def learned_potts():
    """V-PDHAMS with no options on the 3 × 4 Potts lattice, the sparse path forced."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(learned_w, "MAX_LEARNED_W_DIM", 10)
        patch.setattr(learned_w, "SPARSE_W_HISTORY", 200)
        return gradmc.sample(
            POTTS_LATTICE, "v-pdhams", num_chains=8, num_warmup=400, num_draws=200, seed=3, progress=False
        )


@pytest.mark.slow
def test_learned_sparse_w_on_one_hot_rows(learned_potts):
    """The gradient of the Potts model is linear in the one-hot position: the fit returns its
    Hessian and the kept draws, made with the frozen model, are rejection-free."""
    model = jax.tree.map(lambda x: np.asarray(x)[0], learned_potts.params["model"])
    assert model.offsets == (3, 12)
    W, _ = sparse_w.structured_to_dense(model)
    flat = lambda x: POTTS_LATTICE.logdensity_fn(x.reshape(12, 3))  # noqa: E731
    hessian = np.asarray(jax.hessian(flat)(jnp.zeros(36)))
    np.testing.assert_allclose(W, hessian, atol=1e-4 * np.abs(hessian).max())
    assert np.all(learned_potts.stats["acceptance_rate"] > 0.999)
    draws = np.asarray(learned_potts.draws)
    assert draws.shape == (8, 200, 12, 3) and np.all(draws.sum(axis=-1) == 1)  # one-hot rows


@pytest.fixture(scope="module")
def learned():
    """V-PDHAMS with no options on the 5 × 6 lattice, the sparse path forced by a low threshold;
    the fit sees all 200 exploring steps, so every bond has an end that moved."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(learned_w, "MAX_LEARNED_W_DIM", 10)
        patch.setattr(learned_w, "SPARSE_W_HISTORY", 200)
        return gradmc.sample(LATTICE, "v-pdhams", num_chains=8, num_warmup=400, num_draws=200, seed=3, progress=False)


@pytest.mark.slow
def test_learned_sparse_w_is_the_hessian(learned):
    """On a quadratic f, γ = H Δ exactly: the per-row regressions return the Hessian J + Jᵀ."""
    model = jax.tree.map(lambda x: np.asarray(x)[0], learned.params["model"])
    assert isinstance(model, sparse_w.StructuredPreconditioner) and model.offsets == (1, 6)
    W, _ = sparse_w.structured_to_dense(model)
    J = np.asarray(LATTICE.metadata["J"])
    np.testing.assert_allclose(W, J + J.T, atol=1e-4 * np.abs(J).max())
    line = gradmc.report.format_params(learned.params)
    assert "W_couplings 49" in line and "D_min" in line, line  # 5 · 5 + 4 · 6 bonds


FHMM = gradmc.target("discs-fhmm", shape=(6, 5))  # 6 time steps of 5 binary chains: d = 30


@pytest.mark.slow
def test_learned_sparse_w_with_dense_blocks():
    """The factorial HMM's Hessian couples every pair of chains at one time step (a rank-one
    block from the Gaussian likelihood: diagonals 1-4) and each chain to its next step
    (diagonal 5): the probe finds all five diagonals, the fit returns the Hessian of this
    quadratic target, and the kept draws are rejection-free."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(learned_w, "MAX_LEARNED_W_DIM", 10)
        patch.setattr(learned_w, "SPARSE_W_HISTORY", 200)
        trace = gradmc.sample(FHMM, "o-pdhams", num_chains=8, num_warmup=400, num_draws=200, seed=3, progress=False)
    model = jax.tree.map(lambda x: np.asarray(x)[0], trace.params["model"])
    assert model.offsets == (1, 2, 3, 4, 5)
    W, _ = sparse_w.structured_to_dense(model)
    hessian = np.asarray(jax.hessian(FHMM.logdensity_fn)(jnp.full(30, 0.5)))
    np.testing.assert_allclose(W, hessian, atol=1e-4 * np.abs(hessian).max())
    assert np.all(trace.stats["acceptance_rate"] > 0.999)


@pytest.mark.slow
def test_kept_draws_use_the_frozen_model(learned):
    """With the exact W the kernel is rejection-free on this quadratic target (§7.10): a kept
    step that still explored (NCG, acceptance ≈ 0.57) or used another model would reject."""
    assert np.all(learned.stats["acceptance_rate"] > 0.999)
    delta = np.asarray(learned.params["delta"]).reshape(-1, 1)  # δ, tuned after the fit, then frozen
    np.testing.assert_array_equal(learned.stats["step_size"], np.broadcast_to(delta, learned.stats["step_size"].shape))
    assert np.ptp(learned.warmup_stats["step_size"]) > 0  # the explorer and δ adapted in warm-up


def test_phi_needs_a_dense_w(monkeypatch):
    monkeypatch.setattr(learned_w, "MAX_LEARNED_W_DIM", 10)
    with pytest.raises(ValueError, match="phi = 0 only"):
        gradmc.sampler("v-pdhams", phi=-0.5).bind(LATTICE, 400)
    with pytest.raises(ValueError, match="phi = 0 only"):
        hams.as_top_level_api(F, SPACE, MODEL, phi=-0.5)
    state = hams.init(jnp.zeros(SPACE.dim), F, jax.random.key(0), precond=MODEL)
    with pytest.raises(ValueError, match="phi = 0 only"):  # a traced φ cannot be checked to be 0
        jax.jit(lambda phi: hams.build_kernel(1.0)(jax.random.key(1), state, F, SPACE, MODEL, 0.7, phi))(0.0)
