"""The forms a second-order model W learned in warm-up takes, each described the same way
(:class:`LearnedW`), and the rule that picks one for a target (:func:`choose`; the
discrete-HAMS algorithm statement, docs/discrete-hams.md §8.4–§8.10):

* dense, by its eigendecomposition (§8.4–§8.5) — :func:`dense`;
* of low rank on the Hessian's range (§8.9, :mod:`~gradmc.curvature.low_rank_model`) —
  :func:`low_rank`;
* sparse on the Hessian's diagonals (§8.7, :mod:`~gradmc.curvature.sparse_model`) or on its
  graph (§8.10, :mod:`~gradmc.curvature.graph_model`), φ = 0 only — :func:`sparse`,
  :func:`graph`.

The learning warm-up (:func:`gradmc.adapt.learned_model.explore_then_fit_sampler`) and the
PDHAMS builders take any of them through the same fields and never ask which they hold.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax.numpy as jnp

from gradmc.chains import pool_chains
from gradmc.curvature import graph_model, low_rank_model, sparse_model
from gradmc.curvature.second_order import (
    EigenModel,
    LowRankModel,
    eigen_model,
    eigen_pdhams_preconditioner,
    fit_w_from_sums,
    low_rank_pdhams_preconditioner,
    moment_sums,
)
from gradmc.curvature.sparse_w import graph_preconditioner, structured_preconditioner

__all__ = [
    "MAX_LEARNED_W_DIM",
    "MIN_LOW_RANK_DIM",
    "W_HISTORY",
    "SPARSE_W_HISTORY",
    "LearnedW",
    "dense",
    "low_rank",
    "sparse",
    "graph",
    "choose",
]

#: The largest dimension for which PAVG's M and PDHAMS's W are learned dense: a dense
#: matrix, its factors and the move history take about 4 d² + 2 · 500 d floats per chain.
#: Above it PDHAMS learns a sparse W (§8.7) and PAVG warns.
MAX_LEARNED_W_DIM = 2000
#: From this dimension on, a learned W is of low rank when the Hessian's range is (rank ≤ d/4).
MIN_LOW_RANK_DIM = 256
#: Exploring steps whose moves a dense W is fitted from (per chain, pooled over chains).
W_HISTORY = 500
#: Exploring steps a sparse or low-rank W is fitted from: 50 · 100 chains give 5,000 moves
#: for the few unknowns of each row (or the r(r + 1)/2 of a rank-r W), in 2 · 50 · d floats
#: per chain.
SPARSE_W_HISTORY = 50


class LearnedW(NamedTuple):
    """One form of a learned W, as the learning warm-up uses it.

    Parameters
    ----------
    form : str
        ``"dense"``, ``"low-rank"``, ``"sparse"`` or ``"graph"`` (for messages).
    num_history : int
        The exploring steps per chain whose moves the fit reads.
    fit : callable
        ``fit(moves, gradient_changes) -> model``, its sums pooled over chains (PD eq. 38).
    placeholder : Any
        A model of the fitted one's structure with W = 0, used before the fit.
    preconditioner : callable
        ``preconditioner(model, delta)``: what the HAMS kernel takes at δ (δ may be traced).
    summary : callable
        ``summary(preconditioner) -> dict``: the run's params, the preconditioner under
        ``"model"`` beside scalars on what was learned.
    first_momentum : Any
        The preconditioner the first momentum is drawn from (None: u ~ N(0, I)).
    phi_zero_only : bool
        Whether the form runs with φ = 0 only (momentum v = L u, §8.7).
    """

    form: str
    num_history: int
    fit: Callable
    placeholder: Any
    preconditioner: Callable
    summary: Callable
    first_momentum: Any = None
    phi_zero_only: bool = False


def dense(dim: int) -> LearnedW:
    """A dense W by its eigendecomposition: the Lyapunov fit of PD eq. 73 on the pooled sums
    XᵀX and XᵀY, D and L for any δ from W's eigenpairs (§8.4–§8.5).

    Parameters
    ----------
    dim : int
        d.
    """

    def fit(moves, gradient_changes) -> EigenModel:
        xtx, xty = moment_sums(moves, gradient_changes)
        return eigen_model(fit_w_from_sums(pool_chains(xtx), pool_chains(xty)))

    eye = jnp.eye(dim, dtype=jnp.float32)
    placeholder = EigenModel(0.0 * eye, jnp.zeros(dim, jnp.float32), eye)
    return LearnedW("dense", W_HISTORY, fit, placeholder, eigen_pdhams_preconditioner, lambda p: {"model": p, "W": p.W})


def low_rank(basis) -> LearnedW:
    """A W of low rank on the span of ``basis`` (U, d × r, orthonormal; §8.9).

    Parameters
    ----------
    basis : array_like
        U (:func:`gradmc.curvature.low_rank_model.hessian_range`).
    """
    U = jnp.asarray(basis, jnp.float32)
    placeholder = LowRankModel(U, jnp.zeros(U.shape[1], jnp.float32))
    fit = low_rank_model.pooled_low_rank_fit(basis)
    return LearnedW(
        "low-rank", SPARSE_W_HISTORY, fit, placeholder, low_rank_pdhams_preconditioner, low_rank_model.summary
    )


def sparse(pattern: sparse_model.HessianPattern, dim: int, delta) -> LearnedW:
    """A sparse W on the Hessian's diagonals, with the Gershgorin D and the factor L (§8.7).

    Parameters
    ----------
    pattern : HessianPattern
        The pattern (:func:`gradmc.curvature.sparse_model.hessian_pattern`).
    dim : int
        d.
    delta : float
        The starting δ > 0.
    """
    zeros = jnp.zeros(dim, jnp.float32), jnp.zeros((len(pattern.offsets), dim), jnp.float32)
    placeholder = structured_preconditioner(*zeros, pattern.offsets, delta)
    return LearnedW(
        "sparse",
        SPARSE_W_HISTORY,
        sparse_model.pooled_structured_fit(pattern, delta),
        placeholder,
        lambda model, delta: structured_preconditioner(model.W_diag, model.W_off, model.offsets, delta),
        lambda model: sparse_model.couplings_summary(model, model.W_off),
        first_momentum=placeholder,
        phi_zero_only=True,
    )


def graph(hessian_graph: graph_model.HessianGraph, delta) -> LearnedW:
    """A sparse W on the edges of the Hessian's graph, with the Gershgorin D and the edge
    factor (§8.10).

    Parameters
    ----------
    hessian_graph : HessianGraph
        The graph (:func:`gradmc.curvature.graph_model.hessian_graph`).
    delta : float
        The starting δ > 0.
    """
    rows, cols = hessian_graph.rows, hessian_graph.cols
    d = hessian_graph.neighbours.shape[0]
    placeholder = graph_preconditioner(jnp.zeros(d, jnp.float32), rows, cols, jnp.zeros(rows.size, jnp.float32), delta)
    return LearnedW(
        "graph",
        SPARSE_W_HISTORY,
        graph_model.pooled_graph_fit(hessian_graph, delta),
        placeholder,
        lambda model, delta: graph_preconditioner(model.W_diag, model.rows, model.cols, model.weights, delta),
        lambda model: sparse_model.couplings_summary(model, model.weights),
        first_momentum=placeholder,
        phi_zero_only=True,
    )


def choose(name: str, logdensity_fn: Callable, space, delta) -> LearnedW:
    """The form a learned W takes on ``space``, probed once on the host.

    Below d = :data:`MIN_LOW_RANK_DIM` W is dense. Above it the Hessian's range is probed: a
    rank r ≤ d/4 (and ≤ :data:`~gradmc.curvature.low_rank_model.MAX_RANK`) makes W low-rank,
    O(d r) a step instead of O(d²). Above d = :data:`MAX_LEARNED_W_DIM` a dense W is not
    learned: W is low-rank when r is also below the number of the Hessian's diagonals (or
    the Hessian has too many diagonals), else sparse on its pattern by diagonals, else sparse
    on its graph (at most :data:`~gradmc.curvature.graph_model.MAX_DEGREE` neighbours per
    coordinate); a Hessian that is none of these is refused.

    Parameters
    ----------
    name : str
        The sampler's name, for the message.
    logdensity_fn : callable
        f, on positions of ``space``.
    space : gradmc.spaces.DiscreteSpace
        The target's space.
    delta : float
        The starting δ > 0.
    """
    d = space.dim
    max_rank = min(low_rank_model.MAX_RANK, d // 4)
    if d <= MAX_LEARNED_W_DIM:
        basis = None if d < MIN_LOW_RANK_DIM else low_rank_model.hessian_range(logdensity_fn, space, max_rank=max_rank)
        return dense(d) if basis is None else low_rank(basis)
    pattern = sparse_model.hessian_pattern(logdensity_fn, space)
    if pattern is not None:
        max_rank = min(max_rank, len(pattern.offsets) - 1)
    basis = low_rank_model.hessian_range(logdensity_fn, space, max_rank=max_rank) if max_rank >= 1 else None
    if basis is not None:
        return low_rank(basis)
    if pattern is not None:
        return sparse(pattern, d, delta)
    hessian_graph = graph_model.hessian_graph(logdensity_fn, space)
    if hessian_graph is not None:
        return graph(hessian_graph, delta)
    raise ValueError(
        f"{name} learns a dense second-order model W only up to d = {MAX_LEARNED_W_DIM}, and above it a sparse "
        f"W (at most {graph_model.MAX_DEGREE} neighbours per coordinate) or a W of rank at most "
        f"{low_rank_model.MAX_RANK}; this target's Hessian (d = {d}) is none of these. Pass W= (e.g. from "
        "gradmc.tuning.calibration.calibrate_w) or use ncg, gwg or pavg"
    )
