"""A sparse second-order model W on an interaction graph of any shape, learned in warm-up, for
large d (the discrete-HAMS algorithm statement, docs/discrete-hams.md §8.10).

A model whose couplings follow no few diagonals (an Ising model on a random graph, a
Markov random field on a mesh) has a sparse Hessian that the diagonal storage of
:mod:`gradmc.curvature.sparse_model` cannot hold. Here W lives on the graph's edge list:

* :func:`hessian_graph` — the Hessian's non-zero pattern as an edge list and, for each
  coordinate, its neighbours (at most :data:`MAX_DEGREE`), from the Hessian-vector products
  of :func:`gradmc.curvature.sparse_model.hessian_columns`.
* :func:`pooled_graph_fit` — the gradient regression of PD eq. 38 restricted to the graph:
  row i of W from the least squares of γ_{t,i} on Δ_{t, N(i) ∪ {i}}, one small normal
  equation per row, its sums pooled over chains, and the two estimates of each coupling
  combined as in §8.7; then the Gershgorin D and the edge factor
  (:func:`gradmc.curvature.sparse_w.graph_preconditioner`).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from gradmc.chains import pool_chains
from gradmc.curvature.sparse_model import hessian_columns
from gradmc.curvature.sparse_w import GraphPreconditioner, graph_preconditioner

__all__ = [
    "MAX_DEGREE",
    "HessianGraph",
    "hessian_graph",
    "pooled_graph_fit",
]

#: The most neighbours a coordinate may have in a learned graph W (the fit holds a
#: (degree + 1)² normal matrix per coordinate and chain).
MAX_DEGREE = 16


class HessianGraph(NamedTuple):
    """The non-zero pattern of a Hessian as a graph.

    Parameters
    ----------
    rows, cols : numpy.ndarray
        The edges (i, j), i < j, int32 (E,).
    neighbours : numpy.ndarray
        (d, K) int32: the neighbours of each coordinate, padded with d.
    slot_of_col, slot_of_row : numpy.ndarray
        (E,) int32: where j stands among the neighbours of i, and i among those of j.
    """

    rows: np.ndarray
    cols: np.ndarray
    neighbours: np.ndarray
    slot_of_col: np.ndarray
    slot_of_row: np.ndarray


def hessian_graph(
    logdensity_fn, space, *, max_degree: int = MAX_DEGREE, num_points: int = 3, chunk: int = 256, rtol: float = 1e-6
) -> HessianGraph | None:
    """The graph of the Hessian of f: the union over the probe points of the entries whose
    magnitude exceeds ``rtol`` times the largest, or None when a coordinate has more than
    ``max_degree`` neighbours (it stops early then). Host side, once.

    Parameters
    ----------
    logdensity_fn : callable
        f, on positions of ``space``.
    space : gradmc.spaces.DiscreteSpace
        A discrete space.
    max_degree : int
        The most neighbours accepted.
    num_points : int
        How many points to probe.
    chunk : int
        Basis vectors per vmapped batch.
    rtol : float
        Entries below ``rtol`` times the largest magnitude count as zero.
    """
    d = int(space.dim)
    largest = 0.0
    pairs, values = [], []
    degree = np.zeros(d, np.int64)
    for start, h in hessian_columns(logdensity_fn, space, num_points=num_points, chunk=chunk):
        largest = max(largest, float(h.max(initial=0.0)))
        r, i = np.nonzero(h > rtol * largest)
        j = start + r
        upper = i < j
        pairs.append(np.stack([i[upper], j[upper]], 1))
        values.append(h[r[upper], i[upper]])
        degree += np.bincount(i[~(i == j)], minlength=d)  # counted once per point: a bound
        if degree.max() > num_points * max_degree:
            return None
    edges, value = np.concatenate(pairs), np.concatenate(values)
    edges = np.unique(edges[value > rtol * largest], axis=0)
    rows, cols = edges[:, 0].astype(np.int32), edges[:, 1].astype(np.int32)
    degree = np.bincount(rows, minlength=d) + np.bincount(cols, minlength=d)
    if degree.max(initial=0) > max_degree:
        return None
    K = max(int(degree.max(initial=0)), 1)
    source, target = np.concatenate([rows, cols]), np.concatenate([cols, rows])  # each edge both ways
    order = np.argsort(source, kind="stable")
    first = np.concatenate([[0], np.cumsum(degree)[:-1]])  # where each coordinate's run starts in the order
    slot = np.empty(source.size, np.int32)
    slot[order] = np.arange(source.size) - first[source[order]]
    neighbours = np.full((d, K), d, np.int32)
    neighbours[source, slot] = target
    return HessianGraph(rows, cols, neighbours, slot[: rows.size], slot[rows.size :])


def pooled_graph_fit(graph: HessianGraph, delta, ridge: float = 1e-6):
    """``fit(moves, gradient_changes)`` for :func:`gradmc.adapt.learned_model.explore_then_fit_sampler`:
    per-row normal equations on the graph, pooled over chains, give W; with the Gershgorin D
    and the edge factor for ``delta``.

    Row i regresses γ_{t,i} on (Δ_{t,i}, Δ_{t,N(i)}) (padded neighbours contribute zero
    columns, held at 0 by a unit diagonal), with a ridge of ``ridge`` times the row's mean
    diagonal; on a quadratic f, γ_t = H Δ_t and the fit returns H. A coupling w_ij is
    learned twice, from row i (W_ij) and from row j (W_ji), and combined as
    (a_j W_ij + a_i W_ji) / (a_i + a_j), a_i = Σ_t Δ_{t,i}² (row i learns w_ij from the moves
    of j; a coupling neither end of which moved is 0).

    Parameters
    ----------
    graph : HessianGraph
        The graph of W (:func:`hessian_graph`).
    delta : float
        δ > 0.
    ridge : float
        The relative ridge of the per-row regressions.
    """
    d = graph.neighbours.shape[0]
    columns = jnp.asarray(np.concatenate([np.arange(d, dtype=np.int32)[:, None], graph.neighbours], 1))  # (d, K+1)
    present = jnp.asarray(columns < d, jnp.float32)
    rows, cols = jnp.asarray(graph.rows), jnp.asarray(graph.cols)
    slot_of_col, slot_of_row = jnp.asarray(graph.slot_of_col) + 1, jnp.asarray(graph.slot_of_row) + 1

    def sums(moves, gradient_changes):
        def add(total, step):
            move, change = step
            x = jnp.append(move, 0.0)[columns]  # (d, K+1): Δ_i and Δ of its neighbours
            Q, B = total
            return (Q + x[:, :, None] * x[:, None, :], B + x * change[:, None]), None

        K1 = columns.shape[1]
        zeros = (jnp.zeros((d, K1, K1), jnp.float32), jnp.zeros((d, K1), jnp.float32))
        return jax.lax.scan(add, zeros, (moves, gradient_changes))[0]

    def fit(moves, gradient_changes) -> GraphPreconditioner:
        Q, B = sums(moves, gradient_changes)
        Q, B = pool_chains(Q), pool_chains(B)
        diagonal = jnp.diagonal(Q, axis1=1, axis2=2)
        scale = jnp.sum(diagonal * present, 1) / jnp.maximum(jnp.sum(present, 1), 1.0)
        lift = ridge * scale + 1e-12
        Q = Q + jax.vmap(jnp.diag)(lift[:, None] * present + (1.0 - present))  # padded slots: unit diagonal
        coef = jnp.linalg.solve(Q, B[..., None])[..., 0] * present  # (d, K+1)
        a = diagonal[:, 0]  # Σ_t Δ_{t,i}²
        from_i, from_j = coef[rows, slot_of_col], coef[cols, slot_of_row]  # W_ij (row i), W_ji (row j)
        total = a[cols] + a[rows]
        weights = jnp.where(total > 0, (a[cols] * from_i + a[rows] * from_j) / jnp.where(total > 0, total, 1.0), 0.0)
        return graph_preconditioner(coef[:, 0], rows, cols, weights, delta)

    return fit
