"""A second-order model W of low rank learned in warm-up, for large d whose Hessian is dense
but of low rank (the discrete-HAMS algorithm statement, docs/discrete-hams.md §8.9).

An RBM's log density over its visible units, f(v) = bᵀv + Σ_j softplus(c_j + w_jᵀv), has
the Hessian Σ_j σ'(c_j + w_jᵀv) w_j w_jᵀ: dense, but its range is the span of the hidden
units' weights w_j at every v, whatever its dimension d.

* :func:`hessian_range` — an orthonormal basis U (d × r) of the range of the Hessian of f,
  found once on the host from Hessian-vector products with random vectors at a few points
  (a randomized range finder), or None when the rank exceeds :data:`MAX_RANK`.
* :func:`pooled_low_rank_fit` — the ``fit`` of
  :func:`gradmc.adapt.learned_model.explore_then_fit_sampler`: the gradient regression of
  PD eq. 38 in the coordinates of U, W = U A Uᵀ with A the r × r symmetric fit
  (:func:`gradmc.curvature.second_order.fit_w_from_sums` of the projected moves and
  gradient changes, pooled over chains), stored by its eigenpairs.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from gradmc.chains import pool_chains
from gradmc.curvature.second_order import HamsPreconditioner, LowRankModel, fit_w_from_sums
from gradmc.curvature.sparse_model import hessian_vector_products, probe_points

__all__ = ["MAX_RANK", "hessian_range", "pooled_low_rank_fit", "summary"]

#: The largest rank of a learned low-rank W (a step costs O(d · rank)).
MAX_RANK = 128


def hessian_range(
    logdensity_fn,
    space,
    *,
    max_rank: int = MAX_RANK,
    num_points: int = 3,
    oversample: int = 8,
    rtol: float = 1e-4,
    seed: int = 0,
) -> np.ndarray | None:
    """An orthonormal basis of the range of the Hessian of f, shape (d, r), or None when
    r > ``max_rank`` (or the Hessian is 0).

    At each of ``num_points`` points (:func:`gradmc.curvature.sparse_model.probe_points`) the
    Hessian is applied to ``max_rank + oversample`` standard normal vectors (``jax.jvp`` of
    ``jax.grad``, vmapped); r is the number of singular values of all the products above
    ``rtol`` times the largest, and the basis their leading left singular vectors. A
    Hessian of rank r ≤ ``max_rank`` at every point maps the vectors onto its range almost
    surely, so the union of the ranges at the points is found exactly. Memory
    O((max_rank + oversample) · d); host side, once.

    Parameters
    ----------
    logdensity_fn : callable
        f, on positions of ``space`` (the range is that of the flattened position).
    space : gradmc.spaces.DiscreteSpace
        A discrete space.
    max_rank : int
        The largest rank accepted.
    num_points : int
        How many points to probe.
    oversample : int
        Random vectors per point beyond ``max_rank``, so that a rank above it shows.
    rtol : float
        Singular values below ``rtol`` times the largest count as zero.
    seed : int
        Seed of the points and the random vectors.
    """
    d = int(space.dim)
    count = min(int(max_rank) + int(oversample), d)
    products = hessian_vector_products(logdensity_fn, space)
    keys = jax.random.split(jax.random.key(seed + 1), num_points)
    columns = [
        np.asarray(products(x, jax.random.normal(key, (count, d), jnp.float32)), np.float64)
        for x, key in zip(probe_points(space, num_points, seed), keys, strict=True)
    ]
    U, singular, _ = np.linalg.svd(np.concatenate(columns).T, full_matrices=False)
    if singular.size == 0 or singular[0] == 0.0:
        return None
    rank = int(np.sum(singular > rtol * singular[0]))
    return U[:, :rank].astype(np.float32) if rank <= max_rank else None


def pooled_low_rank_fit(basis):
    """``fit(moves, gradient_changes)`` for :func:`gradmc.adapt.learned_model.explore_then_fit_sampler`:
    W = U A Uᵀ, A the symmetric least-squares fit of PD eq. 38 between the projected moves
    UᵀΔ and gradient changes Uᵀγ, its sums pooled over chains; on a quadratic f whose
    Hessian H has its range in span(U), Uᵀγ = (UᵀHU) UᵀΔ and the fit returns H.

    Parameters
    ----------
    basis : array_like
        U, (d, r) with orthonormal columns (:func:`hessian_range`).
    """
    U = jnp.asarray(basis, jnp.float32)

    def fit(moves, gradient_changes) -> LowRankModel:
        p, q = moves @ U, gradient_changes @ U
        A = fit_w_from_sums(pool_chains(p.T @ p), pool_chains(p.T @ q))
        lam, Q = jnp.linalg.eigh(A)
        return LowRankModel(U @ Q, lam)

    return fit


def summary(precond: HamsPreconditioner) -> dict:
    """``params_of`` of the learning warm-up: the preconditioner under ``"model"``, the rank
    of W and the range of its non-zero eigenvalues.

    Parameters
    ----------
    precond : HamsPreconditioner
        The preconditioner of a :class:`~gradmc.curvature.second_order.LowRankModel`.
    """
    lam = precond.W.gains
    return {
        "model": precond,
        "W_rank": jnp.float32(lam.shape[0]),
        "W_eig_min": jnp.min(lam),
        "W_eig_max": jnp.max(lam),
    }
