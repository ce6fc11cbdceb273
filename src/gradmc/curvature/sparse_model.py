"""A sparse second-order model W learned in warm-up, for large d (the discrete-HAMS
algorithm statement, docs/discrete-hams.md §8.7).

* :func:`hessian_pattern` — which entries of W may be non-zero: the sparsity pattern of the
  Hessian of f, found once on the host by Hessian-vector products with the basis vectors
  (in vmapped chunks, never a d × d matrix) at a few random points, and stored as the index
  offsets o > 0 of the diagonals it occupies plus a mask of its edges on each diagonal.
* :func:`structured_sums` and :func:`structured_w_from_sums` — the gradient regression of
  PD eq. 38 restricted to the pattern: row i of W from least squares of γ_{t,i} on
  Δ_{t, N(i) ∪ {i}}, one small normal equation per row, then symmetrised.
* :func:`pooled_structured_fit` — the ``fit`` of :func:`gradmc.adapt.learned_model.explore_then_fit_sampler`:
  the per-row sums pooled over chains (:func:`gradmc.chains.pool_chains`),
  then W, the Gershgorin D and the factor L
  (:func:`gradmc.curvature.sparse_w.structured_preconditioner`).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from gradmc.chains import pool_chains
from gradmc.curvature.sparse_w import (
    StructuredPreconditioner,
    edge_mask,
    shift_up,
    structured_preconditioner,
)

__all__ = [
    "MAX_OFFSETS",
    "HessianPattern",
    "probe_points",
    "hessian_vector_products",
    "hessian_columns",
    "hessian_pattern",
    "slots",
    "lags",
    "structured_sums",
    "normal_matrices",
    "structured_w_from_sums",
    "pooled_structured_fit",
    "couplings_summary",
]

#: The most distinct index offsets a learned sparse W may have (64 diagonals above the main one).
MAX_OFFSETS = 64


class HessianPattern(NamedTuple):
    """The sparsity pattern of a Hessian by diagonals.

    Parameters
    ----------
    offsets : tuple of int
        The distinct positive offsets j − i of its non-zero entries (i < j), sorted.
    mask : numpy.ndarray
        (len(offsets), d) booleans: whether (i, i + offsets[k]) is non-zero.
    """

    offsets: tuple[int, ...]
    mask: np.ndarray


def probe_points(space, num_points: int, seed: int) -> list[jax.Array]:
    """Where the Hessian of f is probed: a random state of the space and random points of
    the box spanned by its values (f is differentiable on R^d), flattened, float32.

    Parameters
    ----------
    space : gradmc.spaces.DiscreteSpace
        A discrete space.
    num_points : int
        How many points.
    seed : int
        Their seed.
    """
    keys = jax.random.split(jax.random.key(seed), num_points)
    values = np.asarray(space.values, np.float32)
    lo, hi = float(values.min()), float(values.max())
    points = [space.sample_uniform(keys[0]).astype(jnp.float32).reshape(-1)]
    points += [jax.random.uniform(k, (space.dim,), jnp.float32, lo, hi) for k in keys[1:]]
    return points


def hessian_vector_products(logdensity_fn, space):
    """``products(x, vectors)``, jitted: the Hessian of f at the flat position ``x`` times each
    row of ``vectors`` (``jax.jvp`` of ``jax.grad``, vmapped), non-finite entries set to 0.

    Parameters
    ----------
    logdensity_fn : callable
        f, on positions of ``space`` (the Hessian is that of the flattened position).
    space : gradmc.spaces.DiscreteSpace
        A discrete space.
    """
    grad = jax.grad(lambda x: logdensity_fn(x.reshape(space.event_shape)))  # on the flat position

    @jax.jit
    def products(x, vectors):
        h = jax.vmap(lambda v: jax.jvp(grad, (x,), (v,))[1])(vectors)
        return jnp.where(jnp.isfinite(h), h, 0.0)

    return products


def hessian_columns(logdensity_fn, space, *, num_points: int = 3, chunk: int = 256):
    """The magnitudes of the Hessian of f, ``chunk`` columns at a time: yields ``(start,
    |H[:, start:start + chunk]|ᵀ)`` (rows past d are zero; non-finite entries are 0) at each
    of the :func:`probe_points`, by Hessian-vector products with the basis vectors
    (``jax.jvp`` of ``jax.grad``, vmapped). Memory O(chunk · d), never a d × d matrix.

    Parameters
    ----------
    logdensity_fn : callable
        f, on positions of ``space`` (the Hessian is that of the flattened position).
    space : gradmc.spaces.DiscreteSpace
        A discrete space.
    num_points : int
        How many points to probe.
    chunk : int
        Basis vectors per vmapped batch.
    """
    d = int(space.dim)
    chunk = max(1, min(int(chunk), d))
    products = hessian_vector_products(logdensity_fn, space)

    @jax.jit
    def columns(x, start):
        basis = jax.nn.one_hot(start + jnp.arange(chunk), d, dtype=x.dtype)  # past d: zero rows
        return jnp.abs(products(x, basis))  # (chunk, d): |H[:, start + r]|

    for x in probe_points(space, num_points, 0):
        for start in range(0, d, chunk):
            yield start, np.asarray(columns(x, jnp.int32(start)))


def hessian_pattern(
    logdensity_fn, space, *, max_offsets: int = MAX_OFFSETS, num_points: int = 3, chunk: int = 256, rtol: float = 1e-6
) -> HessianPattern | None:
    """The sparsity pattern of the Hessian of f, by d Hessian-vector products per point
    (``jax.jvp`` of ``jax.grad``, against the basis vectors in vmapped chunks of ``chunk``).

    The union over ``num_points`` points (one random state of the space, the others uniform
    in the box of its values: f is differentiable on R^d, §1) of the entries whose
    magnitude exceeds ``rtol`` times the largest; non-finite entries are ignored. Returns
    None when the pattern has more than ``max_offsets`` distinct offsets (it stops early
    once 4 · ``max_offsets`` have shown up). Memory O(chunk · d); host side, once.

    Parameters
    ----------
    logdensity_fn : callable
        f, on positions of ``space`` (the pattern is that of the flattened position: d·k
        entries for one-hot Categorical rows).
    space : gradmc.spaces.DiscreteSpace
        A discrete space.
    max_offsets : int
        The most distinct offsets accepted.
    num_points : int
        How many points to probe.
    chunk : int
        Basis vectors per vmapped batch.
    rtol : float
        Entries below ``rtol`` times the largest magnitude count as zero.
    """
    d = int(space.dim)
    largest = 0.0
    found: dict[int, list[tuple[np.ndarray, np.ndarray]]] = {}  # offset -> [(rows i, |h|)]
    for start, h in hessian_columns(logdensity_fn, space, num_points=num_points, chunk=chunk):
        largest = max(largest, float(h.max(initial=0.0)))
        r, i = np.nonzero(h > rtol * largest)  # the largest only grows: what is below now stays below
        j = start + r
        upper = i < j  # H[i, j] with i < j: offset j − i at row i
        i, o, value = i[upper], (j - i)[upper], h[r[upper], i[upper]]
        for offset in np.unique(o):
            pick = o == offset
            found.setdefault(int(offset), []).append((i[pick], value[pick]))
        if len(found) > 4 * max_offsets:
            return None
    threshold = rtol * largest
    kept = {}
    for offset, parts in found.items():
        rows = np.concatenate([p[0][p[1] > threshold] for p in parts])
        if rows.size:
            kept[offset] = rows
    if len(kept) > max_offsets:
        return None
    offsets = tuple(sorted(kept))
    mask = np.zeros((len(offsets), d), bool)
    for k, offset in enumerate(offsets):
        mask[k, kept[offset]] = True
    return HessianPattern(offsets, mask)


def slots(offsets) -> tuple[int, ...]:
    """The shifts of the unknowns of one row of W: 0 (the diagonal), +o (W[i, i + o]) and −o
    (W[i, i − o]) for each offset o; 2 len(offsets) + 1 of them.

    Parameters
    ----------
    offsets : tuple of int
        The positive offsets.
    """
    return (0,) + tuple(offsets) + tuple(-o for o in offsets)


def lags(offsets) -> tuple[int, ...]:
    """The distinct differences r = s_b − s_a ≥ 0 of the shifts of :func:`slots`.

    Parameters
    ----------
    offsets : tuple of int
        The positive offsets.
    """
    shifts = slots(offsets)
    return tuple(sorted({abs(b - a) for a in shifts for b in shifts}))


def _shifted(x, s):
    """y[..., i] = x[..., i + s] (0 outside) for a traced shift s of either sign."""
    d = x.shape[-1]
    index = jnp.arange(d) + s
    return jnp.where((index >= 0) & (index < d), jnp.roll(x, -s, axis=-1), 0.0)


def structured_sums(moves, gradient_changes, offsets) -> tuple[jax.Array, jax.Array]:
    """The sums of the per-row regressions of PD eq. 38 restricted to the diagonals
    ``offsets`` (traced): the lag sums Q[r, j] = Σ_t Δ_t[j] Δ_t[j + r] for r in
    :func:`lags`, and B[a, i] = Σ_t Δ_t[i + s_a] γ_t[i] for the shifts s of :func:`slots`.

    Both are linear in the records, so they pool over chains by a mean; the normal matrix
    of row i, A[a, b, i] = Σ_t Δ_t[i + s_a] Δ_t[i + s_b] = Q[|s_b − s_a|, i + min(s_a, s_b)],
    is assembled after pooling (:func:`normal_matrices`). One lag or shift at a time
    (``lax.map``), so the work memory is that of the records, whatever the number of
    offsets; the result per chain: (len(lags) + 2 len(offsets) + 1) · d floats.

    Parameters
    ----------
    moves, gradient_changes : jax.Array
        Δ and γ, (T, d) each.
    offsets : tuple of int
        The positive offsets.
    """
    Q = jax.lax.map(lambda r: jnp.sum(moves * _shifted(moves, r), axis=0), jnp.asarray(lags(offsets)))
    B = jax.lax.map(lambda s: jnp.sum(_shifted(moves, s) * gradient_changes, axis=0), jnp.asarray(slots(offsets)))
    return Q, B


def normal_matrices(Q, offsets) -> jax.Array:
    """The normal matrices A (p, p, d) of the rows from the lag sums of :func:`structured_sums`:
    A[a, b, i] = Q[|s_b − s_a|, i + min(s_a, s_b)] (0 outside), one gather.

    Parameters
    ----------
    Q : jax.Array
        (len(lags), d).
    offsets : tuple of int
        The positive offsets.
    """
    shifts = np.asarray(slots(offsets))
    index = {r: k for k, r in enumerate(lags(offsets))}
    low = np.minimum(shifts[:, None], shifts[None, :])
    lag = np.vectorize(index.__getitem__)(np.abs(shifts[:, None] - shifts[None, :]))
    d = Q.shape[-1]
    pad = int(np.abs(shifts).max(initial=0))
    padded = jnp.pad(Q, [(0, 0), (pad, pad)])  # zeros where i + min(s_a, s_b) leaves [0, d)
    return padded[lag[:, :, None], pad + low[:, :, None] + np.arange(d)]


def structured_w_from_sums(Q, B, offsets, mask, ridge: float = 1e-6) -> tuple[jax.Array, jax.Array]:
    """(W_diag, W_off) from the sums of :func:`structured_sums`: per row, the least squares
    on the unknowns of the pattern (others fixed at 0), with a ridge of ``ridge`` times the
    row's mean diagonal; then symmetrised, w_ij = (a_j W_ij + a_i W_ji) / (a_i + a_j) with
    a_i = Σ_t Δ_{t,i}²: row i learns w_ij from the moves of j (traced).

    An entry neither of whose coordinates moved gets 0.

    Parameters
    ----------
    Q, B : jax.Array
        The pooled sums of :func:`structured_sums`: (len(lags), d) and (p, d),
        p = 2 len(offsets) + 1.
    offsets : tuple of int
        The positive offsets.
    mask : array_like
        (len(offsets), d) booleans: the edges of the pattern.
    ridge : float
        The relative ridge.
    """
    A = normal_matrices(Q, offsets)
    n = len(offsets)
    d = B.shape[1]
    mask = edge_mask(offsets, d, mask)
    below = [np.concatenate([np.zeros(o, bool), m[:-o]]) for m, o in zip(mask, offsets, strict=True)]  # W[i, i − o]
    active = jnp.asarray(np.concatenate([np.ones((1, d), bool), mask, *([np.stack(below)] if n else [])]), A.dtype)
    p = 2 * n + 1
    eye = jnp.eye(p, dtype=A.dtype)[:, :, None]
    moved = jnp.einsum("aai->ai", A) * active  # Σ_t Δ_t[i + s_a]²: how much row i learns of slot a
    scale = jnp.sum(moved, axis=0) / jnp.sum(active, axis=0)
    A = A * active[:, None, :] * active[None, :, :] + eye * (1.0 - active + ridge * scale + 1e-12)[None, :, :]
    coef = jnp.linalg.solve(jnp.moveaxis(A, -1, 0), jnp.moveaxis(B * active, -1, 0)[..., None])[..., 0].T  # (p, d)
    pairs = []
    for k, o in enumerate(offsets):  # w_ij from rows i and j, weighted by the moves of j and of i
        from_i, from_j = moved[1 + k], shift_up(moved[1 + n + k], o)
        total = from_i + from_j
        both = from_i * coef[1 + k] + from_j * shift_up(coef[1 + n + k], o)
        pairs.append(jnp.where(total > 0, both / jnp.where(total > 0, total, 1.0), 0.0))
    W_off = (jnp.stack(pairs) if n else jnp.zeros((0, d), coef.dtype)) * jnp.asarray(mask, coef.dtype)
    return coef[0], W_off


def pooled_structured_fit(pattern: HessianPattern, delta, ridge: float = 1e-6):
    """``fit(moves, gradient_changes)`` for :func:`gradmc.adapt.learned_model.explore_then_fit_sampler`:
    one chain's sums of :func:`structured_sums`, pooled over chains, give W
    (:func:`structured_w_from_sums`) and the model with its Gershgorin D and factor L.

    Parameters
    ----------
    pattern : HessianPattern
        The pattern of W (:func:`hessian_pattern`).
    delta : float
        δ > 0.
    ridge : float
        The relative ridge of the per-row regressions.
    """
    offsets = pattern.offsets

    def fit(moves, gradient_changes) -> StructuredPreconditioner:
        Q, B = structured_sums(moves, gradient_changes, offsets)
        W_diag, W_off = structured_w_from_sums(pool_chains(Q), pool_chains(B), offsets, pattern.mask, ridge)
        return structured_preconditioner(W_diag, W_off, offsets, delta)

    return fit


def couplings_summary(model, couplings) -> dict:
    """The run's params for a learned sparse W (by diagonals or by edges) whose couplings
    w_ij (i < j) are the entries of ``couplings`` (zeros where there is no edge): the model
    under ``"model"``, the number of non-zero couplings, the largest |w_ij|, the range of the
    diagonal of W and of the Gershgorin D.

    Parameters
    ----------
    model : StructuredPreconditioner or GraphPreconditioner
        The fitted model (its ``W_diag`` and ``D``).
    couplings : jax.Array
        Its couplings.
    """
    return {
        "model": model,
        "W_couplings": jnp.sum(couplings != 0).astype(jnp.float32),
        "W_max_abs_coupling": jnp.max(jnp.abs(couplings), initial=0.0),
        "W_diag_min": jnp.min(model.W_diag),
        "W_diag_max": jnp.max(model.W_diag),
        "D_min": jnp.min(model.D),
        "D_max": jnp.max(model.D),
    }
