"""Sparse forms of the HAMS second-order model W for large d (Zhou & Tan 2025; the
discrete-HAMS algorithm statement, docs/discrete-hams.md §8.7, §8.10), with the Gershgorin
shift D_i = δ − W_ii + Σ_j |w_ij| and a factor L of W + D that is never inverted:

* :class:`StructuredPreconditioner` — W stored by diagonals, with the non-square edge
  factor (d × K d for K diagonals) when the diagonals are few and far apart (lattices), or
  the block Cholesky factor of the band when they fill it (:func:`factor_kind`):
  :func:`structured_preconditioner`, and :func:`structured_to_dense` for checks;
* :class:`GraphPreconditioner` — W on any interaction graph, stored as its edge list:
  products by gathers and scatter-adds, O(d + E) (:func:`graph_preconditioner`,
  :func:`graph_to_dense`).

Both hold the HAMS momentum as v = L u ~ N(0, W + D) (:class:`EdgeMomentum`), so the gradient
correction, which needs L⁻¹, is not available: φ = 0 only.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from gradmc import random
from gradmc.checks import is_concrete

__all__ = [
    "EdgeMomentum",
    "StructuredPreconditioner",
    "factor_kind",
    "chain_factor",
    "edge_mask",
    "shift_up",
    "shift_down",
    "structured_preconditioner",
    "structured_to_dense",
    "GraphPreconditioner",
    "graph_preconditioner",
    "graph_to_dense",
]


class EdgeMomentum:
    """The HAMS momentum scheme of a sparse W (§8.7): the state holds v = L u ~ N(0, W + D), so
    L⁻¹ is never needed. The refresh is v_m = −ε v + √(1−ε²) L ζ (ζ ∈ R^k, k the factor's
    columns), the move v' = v_m − (W + D)Δ and |u'|² − |m|² = −2 Δᵀ v_m + Δᵀ(W + D)Δ (PD eq. 31,
    φ = 0). A form provides ``l_product``, ``shifted_product`` and ``momentum_shape``.
    """

    def check_phi(self, phi) -> None:
        """``ValueError`` unless φ = 0 (a number): the gradient correction φ L⁻¹ρ of PD eq. 32
        needs L⁻¹, which a sparse factor does not have.
        """
        if not is_concrete(phi) or float(phi) != 0.0:
            raise ValueError(
                "a sparse (structured) W has no L⁻¹, which the gradient correction needs: it runs with phi = 0 "
                f"only (got phi = {phi}); pass phi=0, or a dense W= to use phi != 0"
            )

    def initial_momentum(self, rng_key, dim: int, dtype):
        """The momentum v = L ζ ~ N(0, W + D), ζ ~ N(0, I)."""
        return self.l_product(jax.random.normal(rng_key, self.momentum_shape(dim), dtype))

    def refresh(self, rng_key, momentum, epsilon):
        """(v_m, v_m): the refreshed and negated momentum v_m = L m, m = −u⁻ in law (§7.2), which
        is also what a rejected step keeps.
        """
        zeta = random.normal(rng_key, self.momentum_shape(momentum.shape[-1]), momentum.dtype)
        Lm = -epsilon * momentum + jnp.sqrt(1.0 - epsilon**2) * self.l_product(zeta)
        return Lm, Lm

    def move(self, delta, kept, Lm, gradient_change, phi):
        """(v', L u', kinetic terms) after the move Δ = s' − s: v' = L u' = L m − (W + D)Δ and
        the kinetic energy change Δᵀ L m − ½ Δᵀ(W + D)Δ (PD eq. 31, φ = 0).
        """
        WD_delta = self.shifted_product(delta)
        Lu_new = Lm - WD_delta
        return Lu_new, Lu_new, (jnp.sum(delta * Lm) - 0.5 * jnp.sum(delta * WD_delta),)


# -- a sparse W stored by diagonals (docs/discrete-hams.md §8.7) -----------------------------------


@partial(
    jax.tree_util.register_dataclass,
    data_fields=("W_diag", "W_off", "D", "L_off", "L_cross", "chol_diag", "chol_sub"),
    meta_fields=("offsets",),
)
@dataclass(frozen=True)
class StructuredPreconditioner(EdgeMomentum):
    """A sparse symmetric W stored by diagonals (DIA format), its Gershgorin D and a factor
    L with L Lᵀ = W + D (§8.7), of one of two kinds (:func:`factor_kind`):

    * **edges** (``L_off``, ``L_cross``; the ``chol_*`` fields are None): L is d × (K d) for
      K = len(offsets) (d × d when there are none). Each offset but the chain offset
      o* = max(offsets) gives one column per edge e = (i, i + o), √|w_e| (e_i + sign(w_e)
      e_{i+o}); the chain offset's edges and δ I give the lower bidiagonal Cholesky factor
      of Σ_{e of o*} |w_e| v_e v_eᵀ + δ I, column i = c_i e_i + (w_i / c_i) e_{i+o*}
      (:func:`chain_factor`). The momentum is shaped (K, d), one row per offset; column i
      of row k is ``L_off[k, i]`` e_i + ``L_cross[k, i]`` e_{i+o_k}.
    * **blocks** (``chol_diag``, ``chol_sub``; the ``L_*`` fields are None): W + D is
      block tridiagonal in blocks of b = max(offsets) coordinates (d padded to a multiple
      of b with unit diagonal), and L is its block Cholesky factor, block lower
      bidiagonal: diagonal blocks C_k (lower triangular) and sub-diagonal blocks S_k, with
      C_k C_kᵀ + S_k S_kᵀ = (W + D)_{kk} and S_k C_{k−1}ᵀ = (W + D)_{k,k−1}. The momentum
      is a d-vector.

    ``W_off[k, i] = W[i, i + offsets[k]]`` (0 where i + o ≥ d or (i, i + o) is no edge).
    Products with W, L and Lᵀ cost O(d · len(offsets)) (edges) or O(d · b) (blocks)
    (:meth:`w_product`, :meth:`l_product`, :meth:`lt_product`).

    Parameters
    ----------
    offsets : tuple of int
        The positive index offsets of the stored diagonals (static).
    W_diag : jax.Array
        The diagonal of W, (d,).
    W_off : jax.Array
        The upper diagonals of W, (len(offsets), d).
    D : jax.Array
        The diagonal shift, (d,).
    L_off, L_cross : jax.Array or None
        The entries of the edge factor's columns at i and at i + o, (max(len(offsets), 1), d).
    chol_diag, chol_sub : jax.Array or None
        The blocks C_k and S_k of the block factor, (⌈d/b⌉, b, b) each (S_0 = 0).
    """

    offsets: tuple[int, ...]
    W_diag: jax.Array
    W_off: jax.Array
    D: jax.Array
    L_off: jax.Array | None
    L_cross: jax.Array | None
    chol_diag: jax.Array | None = None
    chol_sub: jax.Array | None = None

    # The products shift by jnp.roll: the stored diagonals are 0 where i + o ≥ d, so what
    # wraps around is multiplied by 0 (and XLA's CPU code for a roll vectorises where a
    # zero-padded shift by a large offset, fused with the random normals, does not).

    def w_product(self, x):
        """W x for a (d,) vector x."""
        out = self.W_diag * x
        for k, o in enumerate(self.offsets):
            out = out + self.W_off[k] * jnp.roll(x, -o, axis=-1) + jnp.roll(self.W_off[k] * x, o, axis=-1)
        return out

    def shifted_product(self, x):
        """(W + D) x for a (d,) vector x; with the block factor as L (Lᵀ x), four b × b products
        per block instead of the 2 len(offsets) shifts of W x (W + D = L Lᵀ, to rounding, and
        the kernel then uses L Lᵀ consistently: the law of its momentum is N(0, L Lᵀ)).
        """
        if self.chol_diag is not None:
            return self.l_product(self.lt_product(x))
        return self.w_product(x) + self.D * x

    def _to_blocks(self, x):
        """A (d,) vector as (⌈d/b⌉, b) blocks, zero-padded."""
        blocks, b = self.chol_diag.shape[:2]
        return jnp.pad(x, (0, blocks * b - x.shape[-1])).reshape(blocks, b)

    def _factor_offsets(self) -> tuple[int, ...]:
        """The offsets of the edge factor's rows: the model's, or (0,) for a diagonal W (one
        row, √δ I: its cross entries are 0).
        """
        return self.offsets or (0,)

    def l_product(self, u):
        """L u for a momentum u: shaped (max(len(offsets), 1), d) for the edge factor, (d,) for
        the block factor (L u)_k = C_k u_k + S_k u_{k−1}.
        """
        if self.chol_diag is not None:
            z = self._to_blocks(u)
            previous = jnp.concatenate([jnp.zeros_like(z[:1]), z[:-1]])
            out = jnp.einsum("kij,kj->ki", self.chol_diag, z) + jnp.einsum("kij,kj->ki", self.chol_sub, previous)
            return out.reshape(-1)[: u.shape[-1]]
        out = jnp.zeros_like(u[0])
        for k, o in enumerate(self._factor_offsets()):
            out = out + self.L_off[k] * u[k] + jnp.roll(self.L_cross[k] * u[k], o, axis=-1)
        return out

    def lt_product(self, y):
        """Lᵀ y for a (d,) vector y: shaped (max(len(offsets), 1), d) for the edge factor, (d,)
        for the block factor (Lᵀ y)_k = C_kᵀ y_k + S_{k+1}ᵀ y_{k+1}.
        """
        if self.chol_diag is not None:
            z = self._to_blocks(y)
            below = jnp.einsum("kji,kj->ki", self.chol_sub, z)  # S_kᵀ y_k, owed to block k − 1
            out = jnp.einsum("kji,kj->ki", self.chol_diag, z) + jnp.concatenate([below[1:], jnp.zeros_like(below[:1])])
            return out.reshape(-1)[: y.shape[-1]]
        rows = enumerate(self._factor_offsets())
        return jnp.stack([self.L_off[k] * y + self.L_cross[k] * jnp.roll(y, -o, axis=-1) for k, o in rows])

    def momentum_shape(self, dim: int) -> tuple[int, ...]:
        """(d,) for the block factor, (max(len(offsets), 1), d) for the edge factor."""
        if self.chol_diag is None:
            return (len(self._factor_offsets()), int(dim))
        return (int(dim),)


def shift_up(x, o: int):
    """y[..., i] = x[..., i + o], 0 beyond the end (static slice and pad: no gather)."""
    if o == 0:
        return x
    pad = [(0, 0)] * (x.ndim - 1) + [(0, o)]
    return jnp.pad(x[..., o:], pad)


def shift_down(x, o: int):
    """y[..., i] = x[..., i − o], 0 before the start."""
    if o == 0:
        return x
    pad = [(0, 0)] * (x.ndim - 1) + [(o, 0)]
    return jnp.pad(x[..., :-o], pad)


#: The block factor is used when the diagonals fill at least this fraction of the band of
#: width max(offsets): a step then draws d normals and multiplies by 2 b × b blocks per b
#: coordinates, against len(offsets) d normals for the edge factor.
BLOCK_FILL = 0.25


def factor_kind(offsets) -> str:
    """``"blocks"`` when the diagonals fill at least :data:`BLOCK_FILL` of the band of width
    max(offsets) (e.g. DISCS's factorial HMM: 50 of 50), else ``"edges"`` (a 2-d lattice:
    2 of its row length).

    Parameters
    ----------
    offsets : tuple of int
        The positive offsets.
    """
    return "blocks" if offsets and len(offsets) >= BLOCK_FILL * max(offsets) else "edges"


def _block_factor(W_diag, W_off, offsets, D):
    """The blocks (C, S) of the block Cholesky factor of W + D, in blocks of b = max(offsets)
    (traceable): a scan over the blocks, C_k = chol(A_kk − S_k S_kᵀ), S_k = A_{k,k−1} C_{k−1}^{−T}.
    """
    d, b = W_diag.shape[0], max(offsets)
    blocks = -(-d // b)
    diagonal = jnp.concatenate([W_diag + D, jnp.ones(blocks * b - d, W_diag.dtype)])
    i = np.concatenate([np.arange(d - o) for o in offsets])  # the stored entries (i, j = i + o)
    j = i + np.repeat(offsets, [d - o for o in offsets])
    w = jnp.concatenate([W_off[k, : d - o] for k, o in enumerate(offsets)])
    same = i // b == j // b  # within a diagonal block, else in the block below it
    rows, cols = np.concatenate([i[same], j[same]]), np.concatenate([j[same], i[same]])  # both triangles
    A_diag = jax.vmap(jnp.diag)(diagonal.reshape(blocks, b))
    A_diag = A_diag.at[rows // b, rows % b, cols % b].add(jnp.concatenate([w[same], w[same]]))
    A_sub = jnp.zeros((blocks, b, b), W_diag.dtype).at[j[~same] // b, j[~same] % b, i[~same] % b].add(w[~same])

    def step(previous, blocks_k):
        a_kk, a_sub = blocks_k
        S = jax.scipy.linalg.solve_triangular(previous, a_sub.T, lower=True).T
        C = jnp.linalg.cholesky(a_kk - S @ S.T)
        return C, (C, S)

    _, (C, S) = jax.lax.scan(step, jnp.eye(b, dtype=W_diag.dtype), (A_diag, A_sub))
    return C, S


def chain_factor(w, o: int, delta) -> tuple[jax.Array, jax.Array]:
    """The lower bidiagonal Cholesky factor of A = Σ_i |w_i| v_i v_iᵀ + δ I,
    v_i = e_i + sign(w_i) e_{i+o} (the Gershgorin part of one offset's edges plus δ I):
    column i of L is c_i e_i + t_i e_{i+o}, L Lᵀ = A (traceable; §8.7).

    A couples i only with i ± o, so along each chain i, i + o, i + 2o, ... it is
    tridiagonal: c_i² = A_ii − t_{i−o}², t_i = w_i / c_i, one scan over the ⌈d/o⌉ rows of o
    coordinates. c_i² ≥ δ + |w_i| (A is diagonally dominant by δ), so it never breaks down.

    Parameters
    ----------
    w : jax.Array
        ``w[i] = W[i, i + o]`` (0 where i + o ≥ d or no edge), (d,).
    o : int
        The offset (static).
    delta : float or jax.Array
        δ > 0.
    """
    d, absolute = w.shape[0], jnp.abs(w)
    rows = -(-d // o)
    pad = rows * o - d
    diagonal = jnp.pad(delta + absolute + shift_down(absolute, o), (0, pad), constant_values=1.0).reshape(rows, o)
    couplings = jnp.pad(w, (0, pad)).reshape(rows, o)

    def step(cross_above, row):
        a, w_row = row
        c = jnp.sqrt(a - cross_above**2)
        t = w_row / c
        return t, (c, t)

    _, (c, t) = jax.lax.scan(step, jnp.zeros(o, w.dtype), (diagonal, couplings))
    return c.reshape(-1)[:d], t.reshape(-1)[:d]


def edge_mask(offsets, dim: int, mask=None):
    """The (len(offsets), d) mask of the stored diagonals: (i, i + o) lies inside the matrix
    and, when ``mask`` is given, is an edge of it.

    Parameters
    ----------
    offsets : tuple of int
        The positive offsets.
    dim : int
        d.
    mask : array_like, optional
        (len(offsets), d) booleans: which (i, i + o) are edges.
    """
    inside = np.arange(int(dim))[None, :] + np.asarray(offsets, dtype=np.int64).reshape(-1, 1) < int(dim)
    return inside if mask is None else inside & np.asarray(mask, bool).reshape(inside.shape)


def structured_preconditioner(W_diag, W_off, offsets, delta, kind: str | None = None) -> StructuredPreconditioner:
    """The model of a sparse W by diagonals with the Gershgorin shift (§8.7):
    D_i = δ − W_ii + Σ_j |w_ij|, so W + D = Σ_edges |w_e| v_e v_eᵀ + δ I ⪰ δ I, and its
    factor: the edge factor (columns √|w_e| v_e, v_e = e_i + sign(w_e) e_j, for the edges of
    all offsets but the largest, and the :func:`chain_factor` of the largest one's edges
    plus δ I), or the block Cholesky factor of W + D (:class:`StructuredPreconditioner`).
    Traceable (float32).

    Parameters
    ----------
    W_diag : array_like
        The diagonal of W, (d,).
    W_off : array_like
        ``W_off[k, i] = W[i, i + offsets[k]]``, (len(offsets), d); entries with i + o ≥ d
        are ignored.
    offsets : tuple of int
        Distinct positive offsets (static).
    delta : float
        δ > 0.
    kind : {"edges", "blocks"}, optional
        The factor; default :func:`factor_kind` of the offsets.
    """
    offsets = tuple(int(o) for o in offsets)
    if any(o <= 0 for o in offsets) or len(set(offsets)) != len(offsets):
        raise ValueError(f"offsets must be distinct positive integers, got {offsets}")
    kind = factor_kind(offsets) if kind is None else kind
    if kind not in ("edges", "blocks"):
        raise ValueError(f"kind must be 'edges' or 'blocks', got {kind!r}")
    W_diag = jnp.asarray(W_diag, jnp.float32)
    d = W_diag.shape[0]
    W_off = jnp.asarray(W_off, jnp.float32).reshape(len(offsets), d) * edge_mask(offsets, d)
    absolute = jnp.abs(W_off)
    row_sums = jnp.zeros_like(W_diag)
    for k, o in enumerate(offsets):
        row_sums = row_sums + absolute[k] + shift_down(absolute[k], o)
    delta = jnp.asarray(delta, jnp.float32)
    D = delta - W_diag + row_sums
    if kind == "blocks" and offsets:
        return StructuredPreconditioner(
            offsets, W_diag, W_off, D, None, None, *_block_factor(W_diag, W_off, offsets, D)
        )
    if not offsets:
        return StructuredPreconditioner(offsets, W_diag, W_off, D, jnp.full((1, d), jnp.sqrt(delta)), jnp.zeros((1, d)))
    root = jnp.sqrt(absolute)
    L_off, L_cross = root, jnp.sign(W_off) * root
    chain = int(np.argmax(offsets))
    diagonal, cross = chain_factor(W_off[chain], offsets[chain], delta)
    return StructuredPreconditioner(
        offsets, W_diag, W_off, D, L_off.at[chain].set(diagonal), L_cross.at[chain].set(cross)
    )


def structured_to_dense(model: StructuredPreconditioner) -> tuple[np.ndarray, np.ndarray]:
    """(W, L) as dense float64 arrays, W (d, d) and L (d, max(len(offsets), 1) d) for the edge
    factor (columns row by row of the momentum), (d, d) for the block factor: for checks on
    small d.

    Parameters
    ----------
    model : StructuredPreconditioner
        The model.
    """
    W_diag = np.asarray(model.W_diag, np.float64)
    d = W_diag.shape[0]
    W = np.diag(W_diag)
    for k, o in enumerate(model.offsets):
        i = np.arange(d - o)
        W[i, i + o] = W[i + o, i] = np.asarray(model.W_off[k], np.float64)[: d - o]
    shape = model.momentum_shape(d)
    basis = jnp.eye(int(np.prod(shape)), dtype=jnp.float32).reshape(-1, *shape)
    return W, np.asarray(jax.vmap(model.l_product, out_axes=1)(basis), np.float64)


# -- a sparse W on any graph, stored as its edge list (docs/discrete-hams.md §8.10) -----------------


@partial(
    jax.tree_util.register_dataclass, data_fields=("W_diag", "weights", "D", "L_diag", "rows", "cols"), meta_fields=()
)
@dataclass(frozen=True)
class GraphPreconditioner(EdgeMomentum):
    """A sparse symmetric W on an interaction graph of any shape, its edges e = (i, j), i < j,
    listed, with the Gershgorin D and the edge factor L of §8.7,

        W + D = Σ_e |w_e| v_e v_eᵀ + δ I,   v_e = e_i + sign(w_e) e_j,

    L = [√|w_e| v_e (E columns) | √δ e_i (d columns)]. W x and L u are gathers and
    scatter-adds, O(d + E); the momentum has E + d entries.

    Parameters
    ----------
    W_diag : jax.Array
        The diagonal of W, (d,).
    weights : jax.Array
        w_e, (E,).
    D : jax.Array
        The Gershgorin shift, (d,).
    L_diag : jax.Array
        √δ, (d,).
    rows, cols : jax.Array
        i and j of each edge, int32 (E,), i < j.
    """

    W_diag: jax.Array
    weights: jax.Array
    D: jax.Array
    L_diag: jax.Array
    rows: jax.Array
    cols: jax.Array

    def w_product(self, x):
        """W x for a (d,) vector x."""
        out = self.W_diag * x
        out = out.at[self.rows].add(self.weights * x[self.cols])
        return out.at[self.cols].add(self.weights * x[self.rows])

    def shifted_product(self, x):
        """(W + D) x for a (d,) vector x."""
        return self.w_product(x) + self.D * x

    def l_product(self, u):
        """L u for a momentum u of E + d entries."""
        edges, root = self.rows.shape[0], jnp.sqrt(jnp.abs(self.weights))
        u_edges = u[:edges]
        out = self.L_diag * u[edges:]
        out = out.at[self.rows].add(root * u_edges)
        return out.at[self.cols].add(jnp.sign(self.weights) * root * u_edges)

    def momentum_shape(self, dim: int) -> tuple[int, ...]:
        """(E + d,)."""
        return (self.rows.shape[0] + int(dim),)


def graph_preconditioner(W_diag, rows, cols, weights, delta) -> GraphPreconditioner:
    """The :class:`GraphPreconditioner` of W (its diagonal and edge weights) for δ:
    D_i = δ − W_ii + Σ_{e ∋ i} |w_e| (traceable; δ may be traced).

    Parameters
    ----------
    W_diag : jax.Array
        (d,).
    rows, cols : array_like
        The edges, int (E,), i < j.
    weights : jax.Array
        w_e, (E,).
    delta : float or jax.Array
        δ > 0.
    """
    W_diag = jnp.asarray(W_diag, jnp.float32)
    weights = jnp.asarray(weights, jnp.float32)
    rows, cols = jnp.asarray(rows, jnp.int32), jnp.asarray(cols, jnp.int32)
    coupling = jnp.zeros_like(W_diag).at[rows].add(jnp.abs(weights)).at[cols].add(jnp.abs(weights))
    return GraphPreconditioner(
        W_diag, weights, delta - W_diag + coupling, jnp.full_like(W_diag, jnp.sqrt(delta)), rows, cols
    )


def graph_to_dense(model: GraphPreconditioner) -> tuple[np.ndarray, np.ndarray]:
    """(W, L) as dense float64 arrays, W (d, d) and L (d, E + d): for checks on small d.

    Parameters
    ----------
    model : GraphPreconditioner
        The model.
    """
    d, edges = model.W_diag.shape[0], model.rows.shape[0]
    rows, cols, w = np.asarray(model.rows), np.asarray(model.cols), np.asarray(model.weights, np.float64)
    W = np.diag(np.asarray(model.W_diag, np.float64))
    W[rows, cols] = W[cols, rows] = w
    L = np.zeros((d, edges + d))
    L[rows, np.arange(edges)] = np.sqrt(np.abs(w))
    L[cols, np.arange(edges)] = np.sign(w) * np.sqrt(np.abs(w))
    L[np.arange(d), edges + np.arange(d)] = np.asarray(model.L_diag, np.float64)
    return W, L
