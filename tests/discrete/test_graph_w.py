"""The sparse second-order model on an interaction graph of any shape (docs/discrete-hams.md
§8.10): W stored as an edge list with the Gershgorin D and the edge factor, its probe and its
per-row fit, and the learned graph path of V-/O-PDHAMS.

* the products W x, (W + D) x and L u equal the dense ones, L Lᵀ = W + D and D is the
  Gershgorin shift (the kernel's exactness with a given graph W: the ``ising-graph`` case of
  test_structured_w.py);
* the probe finds exactly the edges of a random graph, and refuses a coordinate with more
  neighbours than allowed;
* on a quadratic target over a random graph (too many diagonals for §8.7, full rank) the fit
  returns the Hessian through ``gradmc.sample`` with no options, and the kept draws are
  rejection-free.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gradmc
from gradmc.base import Target
from gradmc.curvature import graph_model, learned_w, sparse_model, sparse_w
from gradmc.spaces import Binary


@functools.cache
def random_graph(d=200, draws=400, seed=0):
    """A quadratic f(x) = ½ xᵀHx + bᵀx on Binary(d), H = J + Jᵀ on a random graph, and H."""
    rng = np.random.default_rng(seed)
    i, j = rng.integers(0, d, draws), rng.integers(0, d, draws)
    keep = i != j
    edges = np.unique(np.stack([np.minimum(i, j)[keep], np.maximum(i, j)[keep]], 1), axis=0)
    H = np.zeros((d, d))
    H[edges[:, 0], edges[:, 1]] = 0.5 * rng.normal(size=len(edges))
    H = H + H.T
    H32, b = jnp.asarray(H, jnp.float32), jnp.asarray(0.3 * rng.normal(size=d), jnp.float32)
    return Target("random-graph", lambda x: 0.5 * x @ H32 @ x + b @ x, Binary(d)), H, edges


def test_products_match_the_dense_matrices():
    rng = np.random.default_rng(1)
    d, edges = 12, np.array([[0, 5], [1, 2], [2, 11], [3, 7], [4, 9], [0, 11]])
    weights = rng.normal(size=len(edges)).astype(np.float32)
    model = sparse_w.graph_preconditioner(
        rng.normal(size=d).astype(np.float32), edges[:, 0], edges[:, 1], weights, jnp.float32(0.7)
    )
    W, L = sparse_w.graph_to_dense(model)
    D = np.asarray(model.D, np.float64)
    np.testing.assert_allclose(L @ L.T, W + np.diag(D), atol=1e-5)
    off = np.abs(W - np.diag(np.diag(W))).sum(axis=1)
    np.testing.assert_allclose(D, 0.7 - np.diag(W) + off, atol=1e-5)  # the Gershgorin shift
    x = jnp.asarray(rng.normal(size=d), jnp.float32)
    u = jnp.asarray(rng.normal(size=len(edges) + d), jnp.float32)
    assert model.momentum_shape(d) == (len(edges) + d,)
    np.testing.assert_allclose(model.shifted_product(x), (W + np.diag(D)) @ x, atol=1e-5)
    np.testing.assert_allclose(model.l_product(u), L @ u, atol=1e-5)


def test_probe_finds_the_graph():
    target, H, edges = random_graph()
    assert sparse_model.hessian_pattern(target.logdensity_fn, target.space) is None  # too many diagonals
    graph = graph_model.hessian_graph(target.logdensity_fn, target.space)
    np.testing.assert_array_equal(np.stack([graph.rows, graph.cols], 1), edges)
    for e, (i, j) in enumerate(edges):
        assert graph.neighbours[i, graph.slot_of_col[e]] == j and graph.neighbours[j, graph.slot_of_row[e]] == i
    degree = np.bincount(edges.ravel(), minlength=200).max()
    assert graph_model.hessian_graph(target.logdensity_fn, target.space, max_degree=degree - 1) is None


@pytest.mark.slow
def test_learned_graph_w_is_the_hessian(monkeypatch):
    """On a quadratic f, γ = H Δ exactly: the per-row regressions on the graph return H, and
    the kept draws, made with the frozen model, are rejection-free (§7.10)."""
    monkeypatch.setattr(learned_w, "MAX_LEARNED_W_DIM", 10)
    monkeypatch.setattr(learned_w, "SPARSE_W_HISTORY", 200)
    target, H, edges = random_graph()
    trace = gradmc.sample(target, "o-pdhams", num_chains=8, num_warmup=400, num_draws=200, seed=3, progress=False)
    model = jax.tree.map(lambda x: np.asarray(x)[0], trace.params["model"])
    assert isinstance(model, sparse_w.GraphPreconditioner)
    W, _ = sparse_w.graph_to_dense(model)
    np.testing.assert_allclose(W, H, atol=1e-4 * np.abs(H).max())
    assert np.all(trace.stats["acceptance_rate"] > 0.999)
    assert f"W_couplings {len(edges)}" in gradmc.report.format_params(trace.params)
    with pytest.raises(ValueError, match="phi = 0 only"):
        gradmc.sampler("v-pdhams", phi=-0.5).bind(target, 400)
