"""The second-order model of the HAMS family: W, D, L (Zhou & Tan 2025; the discrete-HAMS
algorithm statement, docs/discrete-hams.md §7–§8).

* **W** — the global second-order model f(s) ≈ f(x) + ∇f(x)ᵀ(s−x) + ½(s−x)ᵀW(s−x), fitted
  to pairs of consecutive burn-in draws (s⁽ⁱ⁾, s⁽ⁱ⁺¹⁾) of each chain (never across chains):

  - :func:`fit_w_gradients` (method 1, PD eq. 38): min over symmetric W of
    Σ_i |γ_i − W Δ_i|², Δ_i = s⁽ⁱ⁺¹⁾ − s⁽ⁱ⁾, γ_i = ∇f(s⁽ⁱ⁺¹⁾) − ∇f(s⁽ⁱ⁾); its normal equation
    is the Lyapunov equation (XᵀX) W + W (XᵀX) = XᵀY + YᵀX (PD eq. 73), solved by
    Bartels–Stewart (``scipy.linalg.solve_continuous_lyapunov``);
  - :func:`fit_w_values` (method 2, PD eq. 39): ordinary least squares of
    y_i = f(s⁽ⁱ⁺¹⁾) − f(s⁽ⁱ⁾) − ∇f(s⁽ⁱ⁾)ᵀΔ_i on ½ Δ_iᵀ W Δ_i, in θ = vech(W).

  :func:`gradmc.tuning.calibration.calibrate_w` runs the burn-in chains.
* **D** — :func:`lambda_shift`: D = (δ − λ_min(W)) I (§8.4), so λ_min(W + D) = δ.
* **L** — :func:`factor`: L Lᵀ = W + D by Cholesky when cond(W + D) < 100, else
  L = U Λ^{1/2} from the eigendecomposition (§8.5); L⁻¹ comes with it.
* :class:`HamsPreconditioner` (W, D, L, L⁻¹) as the HAMS kernel takes it:
  :func:`make_preconditioner`, :func:`pdhams_preconditioner` (PDHAMS and PAVG's variance
  form) and :func:`dhams_preconditioner` (DHAMS as PDHAMS, §7.9).

* :class:`StructuredPreconditioner` — a sparse W stored by diagonals, with the Gershgorin
  D_i = δ − W_ii + Σ_j |w_ij| and a factor L of W + D, for large d (§8.7): the non-square
  edge factor (d × K d for K diagonals) when the diagonals are few and far apart (lattices), the block
  Cholesky factor of the band when they fill it (:func:`factor_kind`):
  :func:`structured_preconditioner`, the products :func:`structured_w_product`,
  :func:`structured_shifted_product`, :func:`structured_l_product`, :func:`structured_lt_product`, and
  :func:`structured_to_dense` for checks.
* :class:`GraphPreconditioner` — a sparse W on any interaction graph, stored as its edge
  list, with the same Gershgorin D and edge factor (§8.10): products by gathers and
  scatter-adds, O(d + E); the structured products above accept it too.
* :class:`LowRankModel` — a W of low rank, V diag(λ) Vᵀ with V (d × r) orthonormal, for
  large d whose Hessian has a low-rank range (an RBM's visible units): D = (δ − min(0,
  λ_min)) I and the symmetric square root L of W + D, with L⁻¹, as
  :class:`LowRankSymmetric` operators applied in O(d r)
  (:func:`low_rank_pdhams_preconditioner`).

Everything but :func:`dhams_preconditioner` and the structured model (traced inside the
learning warm-up) runs once, on the host, outside the jitted kernels.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from scipy.linalg import solve_continuous_lyapunov

from gradmc.checks import check_symmetric, is_concrete

__all__ = [
    "MAX_CONDITION",
    "HamsPreconditioner",
    "check_w",
    "check_delta",
    "consecutive_pairs",
    "fit_w_gradients",
    "fit_w_values",
    "lambda_shift",
    "factor",
    "make_preconditioner",
    "pdhams_preconditioner",
    "dhams_preconditioner",
    "moment_sums",
    "fit_w_from_sums",
    "EigenModel",
    "eigen_model",
    "eigen_pdhams_preconditioner",
    "LowRankSymmetric",
    "LowRankModel",
    "low_rank_pdhams_preconditioner",
    "StructuredPreconditioner",
    "structured_w_product",
    "structured_shifted_product",
    "structured_l_product",
    "structured_lt_product",
    "momentum_shape",
    "factor_kind",
    "chain_factor",
    "edge_mask",
    "shift_up",
    "shift_down",
    "structured_preconditioner",
    "structured_to_dense",
    "GraphPreconditioner",
    "SPARSE_MODELS",
    "graph_preconditioner",
    "graph_to_dense",
]

#: Below this condition number of W + D, L is the Cholesky factor (§8.5).
MAX_CONDITION = 100.0


class HamsPreconditioner(NamedTuple):
    """W, D, L and L⁻¹ of the second-order model, as the HAMS kernel takes them; each
    matrix is (d, d), (d,) when diagonal, or a :class:`LowRankSymmetric` operator.

    Parameters
    ----------
    W : jax.Array
        The second-order model.
    D : jax.Array
        The diagonal shift, (d,).
    L : jax.Array
        A factor with L Lᵀ = W + D.
    L_inv : jax.Array
        L⁻¹.
    """

    W: jax.Array
    D: jax.Array
    L: jax.Array
    L_inv: jax.Array


def check_w(W, dim: int | None = None, what: str = "W") -> np.ndarray:
    """``W`` as a float64 (d, d) array after checking it is square, finite and symmetric.

    Parameters
    ----------
    W : array_like
        The second-order model.
    dim : int, optional
        The dimension it must have.
    what : str
        How the message names it.
    """
    return check_symmetric(W, what, dim, rtol=0.0)


def check_delta(delta) -> None:
    """``ValueError`` unless the step size δ is a finite number > 0 (a traced δ passes).

    Parameters
    ----------
    delta : float or tracer
        The step size δ of D = (δ − λ_min W) I, or DHAMS's δ.
    """
    if is_concrete(delta) and not (np.isfinite(float(delta)) and float(delta) > 0):
        raise ValueError(f"the step size δ must be a finite number > 0, got {delta}")


# -- W from burn-in draws -------------------------------------------------------------------


def consecutive_pairs(*arrays):
    """The consecutive pairs (t, t+1) of each chain, stacked.

    For arrays shaped (chain, draw, ...) returns, per array, ``(before, after)`` shaped
    (chain·(draw−1), ...). Pairs never cross chains. A (draw, ...) array is one chain.

    Parameters
    ----------
    *arrays : array_like
        Positions (chain, draw, d) or (draw, d), and any per-draw arrays with the same
        (chain, draw) shape (log densities, gradients).
    """
    out = [np.asarray(a, dtype=np.float64) for a in arrays]
    if out[0].ndim == 2:  # one chain of positions (draw, d)
        out = [a[None] for a in out]
    elif out[0].ndim != 3:
        raise ValueError(f"positions must be shaped (chain, draw, d) or (draw, d), got shape {out[0].shape}")
    if out[0].shape[1] < 2:
        raise ValueError("calibration needs at least 2 draws per chain")
    pairs = []
    for a in out:
        if a.shape[:2] != out[0].shape[:2]:
            raise ValueError(f"all inputs need the same (chain, draw) shape, got {a.shape[:2]} and {out[0].shape[:2]}")
        tail = a.shape[2:]
        pairs.append((a[:, :-1].reshape((-1,) + tail), a[:, 1:].reshape((-1,) + tail)))
    return pairs


def fit_w_gradients(positions, grads) -> np.ndarray:
    """Method 1 (PD eq. 38): W = argmin_{W=Wᵀ} ||Y − X W||²_F by the Lyapunov equation (eq. 73).

    Rows with Δ = 0 (rejected moves) contribute nothing. Raises ``ValueError`` unless XᵀX is
    positive definite (the moves must span R^d).

    Parameters
    ----------
    positions : array_like
        Burn-in draws (chain, draw, d) (or (draw, d)).
    grads : array_like
        ∇f at the draws, the same shape.
    """
    (s0, s1), (g0, g1) = consecutive_pairs(positions, grads)
    if s0.shape != g0.shape or s0.ndim != 2:
        raise ValueError(f"positions and grads must both be (chain, draw, d), got {s0.shape} and {g0.shape}")
    X, Y = s1 - s0, g1 - g0
    A = X.T @ X
    C = X.T @ Y + Y.T @ X
    eig = np.linalg.eigvalsh(A)
    if eig[0] <= 1e-10 * max(eig[-1], 1e-300):
        raise ValueError(
            f"the burn-in moves do not span all {A.shape[0]} directions (XᵀX is singular); "
            "use more or longer burn-in chains"
        )
    W = solve_continuous_lyapunov(A, C)
    return 0.5 * (W + W.T)


def fit_w_values(positions, logdensities, grads) -> np.ndarray:
    """Method 2 (PD eq. 39): OLS of y_i = f(s⁽ⁱ⁺¹⁾) − f(s⁽ⁱ⁾) − ∇f(s⁽ⁱ⁾)ᵀΔ_i on ½ Δ_iᵀ W Δ_i.

    The design row of pair i has Δ_ik²/2 for (k, k) and Δ_ik Δ_il for k < l (θ = vech W).
    Raises ``ValueError`` unless the design has full column rank (at least d(d+1)/2
    informative pairs).

    Parameters
    ----------
    positions : array_like
        Burn-in draws (chain, draw, d) (or (draw, d)).
    logdensities : array_like
        f at the draws, (chain, draw).
    grads : array_like
        ∇f at the draws, (chain, draw, d).
    """
    (s0, s1), (f0, f1), (g0, _) = consecutive_pairs(positions, logdensities, grads)
    if s0.ndim != 2 or f0.ndim != 1 or g0.shape != s0.shape:
        raise ValueError("positions, grads must be (chain, draw, d) and logdensities (chain, draw)")
    delta = s1 - s0
    y = f1 - f0 - np.sum(g0 * delta, axis=1)
    d = delta.shape[1]
    iu, ju = np.triu_indices(d)
    design = delta[:, iu] * delta[:, ju] * np.where(iu == ju, 0.5, 1.0)
    theta, _, rank, _ = np.linalg.lstsq(design, y, rcond=None)
    if rank < design.shape[1]:
        raise ValueError(
            f"the burn-in moves identify only {rank} of the {design.shape[1]} entries of W; "
            "use more or longer burn-in chains (or method 1, fit_w_gradients)"
        )
    W = np.zeros((d, d))
    W[iu, ju] = theta
    W[ju, iu] = theta
    return W


# -- D and L ----------------------------------------------------------------------------------


def lambda_shift(W, delta) -> np.ndarray:
    """D = (δ − λ_min(W)) I as a (d,) vector (§8.4).

    Parameters
    ----------
    W : array_like
        The second-order model, symmetric (d, d).
    delta : float
        The step size δ > 0.
    """
    W = check_w(W)
    check_delta(delta)
    delta = float(delta)
    return np.full(W.shape[0], delta - np.linalg.eigvalsh(W)[0])


def factor(W, D, max_condition: float = MAX_CONDITION) -> tuple[np.ndarray, np.ndarray, str]:
    """(L, L⁻¹, method) with L Lᵀ = W + diag(D): Cholesky if cond < ``max_condition`` else
    L = U Λ^{1/2} (§8.5). Raises ``ValueError`` if W + D is not positive definite.

    Parameters
    ----------
    W : array_like
        The second-order model, symmetric (d, d).
    D : array_like
        The diagonal shift, (d,).
    max_condition : float
        The condition number below which L is the Cholesky factor.
    """
    W = check_w(W)
    D = np.asarray(D, dtype=np.float64)
    if D.shape != (W.shape[0],) or not np.all(np.isfinite(D)):
        raise ValueError(f"D must be a finite vector of length {W.shape[0]}, got shape {D.shape}")
    P = W + np.diag(D)
    lam, U = np.linalg.eigh(P)
    if lam[0] <= 1e-12 * max(abs(lam[-1]), 1.0):
        raise ValueError(f"W + D must be positive definite (smallest eigenvalue {lam[0]:.3g}); increase D or δ")
    if lam[-1] / lam[0] < max_condition:
        L = np.linalg.cholesky(P)
        return L, np.linalg.inv(L), "cholesky"
    root = np.sqrt(lam)
    return U * root, (U / root).T, "eigen"


# -- the preconditioners of the HAMS samplers ----------------------------------------------------


def make_preconditioner(W, D, L=None) -> HamsPreconditioner:
    """The preconditioner of W (d, d), D (d,) and L with L Lᵀ = W + D (default: :func:`factor`, §8.5).

    Raises ``ValueError`` for a non-symmetric W, a W + D that is not positive definite, or
    an L that does not factor W + D.

    Parameters
    ----------
    W : array_like
        The second-order model, symmetric (d, d).
    D : array_like
        The diagonal shift, (d,).
    L : array_like, optional
        A factor of W + D; computed by :func:`factor` when omitted.
    """
    W = check_w(W)
    D = np.asarray(D, np.float64)
    if L is None:
        L, L_inv, _ = factor(W, D)
    else:
        factor(W, D)  # checks W + D ≻ 0
        L = np.asarray(L, np.float64)
        P = W + np.diag(D)
        if L.shape != W.shape or not np.allclose(L @ L.T, P, rtol=1e-5, atol=1e-5 * np.abs(P).max()):
            raise ValueError("L must satisfy L Lᵀ = W + D")
        L_inv = np.linalg.inv(L)
    f32 = lambda x: jnp.asarray(x, jnp.float32)  # noqa: E731
    return HamsPreconditioner(f32(W), f32(D), f32(L), f32(L_inv))


def pdhams_preconditioner(W, delta) -> HamsPreconditioner:
    """PDHAMS and PAVG's variance form: D = (δ − λ_min W) I (§8.4), L by §8.5.

    Parameters
    ----------
    W : array_like
        The second-order model, symmetric (d, d).
    delta : float
        The step size δ > 0.
    """
    check_delta(delta)
    return make_preconditioner(W, lambda_shift(W, delta))


def dhams_preconditioner(delta, dim: int) -> HamsPreconditioner:
    """DHAMS as PDHAMS (§7.9): W = 0, D = δ⁻² I, L = δ⁻¹ I, all diagonal.

    Parameters
    ----------
    delta : float or tracer
        DHAMS's step size δ > 0.
    dim : int
        d, the number of coordinates.
    """
    check_delta(delta)
    delta = jnp.asarray(delta, jnp.float32)
    ones = jnp.ones(int(dim), jnp.float32)
    return HamsPreconditioner(0.0 * ones, ones / delta**2, ones / delta, ones * delta)


# -- the same fits inside a traced warm-up (JAX, float32) ------------------------------------------


def moment_sums(moves, gradient_changes) -> tuple[jax.Array, jax.Array]:
    """(XᵀX, XᵀY) of PD eq. 38 from the rows Δs (moves) and Δ∇f (gradient changes), (n, d)
    each, as a traced computation; pooled across chains they give :func:`fit_w_from_sums`.

    Parameters
    ----------
    moves, gradient_changes : jax.Array
        X and Y of eq. 38, one row per step (rows of zeros, rejected moves, add nothing).
    """
    return moves.T @ moves, moves.T @ gradient_changes


def fit_w_from_sums(xtx, xty) -> jax.Array:
    """W = argmin_{W=Wᵀ} ||Y − X W||²_F (PD eq. 38) from XᵀX and XᵀY: the Lyapunov equation
    XᵀX W + W XᵀX = XᵀY + YᵀX (eq. 73) solved in the eigenbasis of XᵀX, traceable.

    A ridge of 10⁻⁶ · mean eigenvalue keeps directions the moves never took at W = 0 there.

    Parameters
    ----------
    xtx, xty : jax.Array
        XᵀX and XᵀY, (d, d).
    """
    d = xtx.shape[0]
    ridge = 1e-6 * jnp.trace(xtx) / d + 1e-12
    lam, V = jnp.linalg.eigh(xtx + ridge * jnp.eye(d, dtype=xtx.dtype))
    C = V.T @ (xty + xty.T) @ V
    W = V @ (C / (lam[:, None] + lam[None, :])) @ V.T
    return 0.5 * (W + W.T)


class EigenModel(NamedTuple):
    """A symmetric W with its eigendecomposition W = U diag(λ) Uᵀ (λ ascending): the PDHAMS
    preconditioner of any δ follows in O(d²) (:func:`eigen_pdhams_preconditioner`).

    Parameters
    ----------
    W : jax.Array
        The second-order model, (d, d).
    eigenvalues : jax.Array
        λ, ascending, (d,).
    eigenvectors : jax.Array
        U, (d, d).
    """

    W: jax.Array
    eigenvalues: jax.Array
    eigenvectors: jax.Array


def eigen_model(W) -> EigenModel:
    """The :class:`EigenModel` of a symmetric W (traceable, float32).

    Parameters
    ----------
    W : jax.Array
        Symmetric (d, d).
    """
    lam, U = jnp.linalg.eigh(W)
    return EigenModel(W, lam, U)


def eigen_pdhams_preconditioner(model: EigenModel, delta) -> HamsPreconditioner:
    """:func:`pdhams_preconditioner` inside a traced warm-up: D = (δ − λ_min W) I (§8.4) and the
    eigen factor L = U (Λ + D)^{1/2} of W + D (§8.5), from W's eigendecomposition, in
    float32 with no host checks; δ may be traced.

    Parameters
    ----------
    model : EigenModel
        W and its eigendecomposition.
    delta : float or jax.Array
        δ > 0.
    """
    shift = delta - model.eigenvalues[0]
    root = jnp.sqrt(jnp.maximum(model.eigenvalues + shift, delta * 1e-6))
    D = jnp.full(model.eigenvalues.shape, shift, model.W.dtype)
    return HamsPreconditioner(model.W, D, model.eigenvectors * root, (model.eigenvectors / root).T)


# -- a W of low rank, for large d (docs/discrete-hams.md §8.9) ---------------------------------------


@partial(jax.tree_util.register_dataclass, data_fields=("scale", "basis", "gains"), meta_fields=())
@dataclass(frozen=True)
class LowRankSymmetric:
    """The symmetric d × d matrix c I + V diag(g) Vᵀ, V with r orthonormal columns, never
    formed: a product costs O(d r).

    Parameters
    ----------
    scale : jax.Array
        c, a scalar.
    basis : jax.Array
        V, (d, r), orthonormal columns.
    gains : jax.Array
        g, (r,).
    """

    scale: jax.Array
    basis: jax.Array
    gains: jax.Array

    def apply(self, x):
        """The product with a d-vector ``x``."""
        return self.scale * x + self.basis @ (self.gains * (self.basis.T @ x))

    def to_dense(self) -> np.ndarray:
        """The d × d matrix (for checks)."""
        V = np.asarray(self.basis, np.float64)
        return float(self.scale) * np.eye(V.shape[0]) + (V * np.asarray(self.gains, np.float64)) @ V.T


class LowRankModel(NamedTuple):
    """W = V diag(λ) Vᵀ of rank r, V (d, r) with orthonormal columns: the PDHAMS
    preconditioner of any δ follows in O(d r) (:func:`low_rank_pdhams_preconditioner`).

    Parameters
    ----------
    basis : jax.Array
        V, (d, r).
    eigenvalues : jax.Array
        λ, (r,).
    """

    basis: jax.Array
    eigenvalues: jax.Array


def low_rank_pdhams_preconditioner(model: LowRankModel, delta) -> HamsPreconditioner:
    """The PDHAMS preconditioner of a low-rank W (§8.9), traceable, δ may be traced.

    W has the eigenvalues λ on span(V) and 0 on its complement, so the λ-shift of §8.4 is
    D = c I with c = δ − min(0, λ_min), and W + D = c I + V diag(λ) Vᵀ, whose eigenvalues
    λ + c and c are all ≥ δ. L is its symmetric square root and L⁻¹ its inverse,

        L = √c I + V diag(√(λ + c) − √c) Vᵀ,   L⁻¹ = I/√c + V diag(1/√(λ + c) − 1/√c) Vᵀ

    (L² = c I + V diag((√(λ+c))² − c) Vᵀ = W + D), so L Lᵀ = W + D exactly as with the dense
    eigen factor of §8.5.

    Parameters
    ----------
    model : LowRankModel
        W by its eigenpairs.
    delta : float or jax.Array
        δ > 0.
    """
    lam, V = model.eigenvalues, model.basis
    c = delta - jnp.minimum(jnp.min(lam, initial=0.0), 0.0)
    root_c = jnp.sqrt(c)
    root = jnp.sqrt(jnp.maximum(lam + c, delta * 1e-6))
    zero = jnp.zeros((), V.dtype)
    return HamsPreconditioner(
        LowRankSymmetric(zero, V, lam),
        jnp.full(V.shape[0], c, V.dtype),
        LowRankSymmetric(root_c, V, root - root_c),
        LowRankSymmetric(1.0 / root_c, V, 1.0 / root - 1.0 / root_c),
    )


# -- a sparse W stored by diagonals, with a non-square factor L (docs/discrete-hams.md §8.7) ------


@partial(
    jax.tree_util.register_dataclass,
    data_fields=("W_diag", "W_off", "D", "L_off", "L_cross", "chol_diag", "chol_sub"),
    meta_fields=("offsets",),
)
@dataclass(frozen=True)
class StructuredPreconditioner:
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
    (:func:`structured_w_product`, :func:`structured_l_product`, :func:`structured_lt_product`).

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


# The products shift by jnp.roll: the stored diagonals are 0 where i + o ≥ d, so what wraps
# around is multiplied by 0 (and XLA's CPU code for a roll vectorises where a zero-padded
# shift by a large offset, fused with the random normals, does not).


def structured_w_product(model: StructuredPreconditioner, x):
    """W x for a (d,) vector x."""
    out = model.W_diag * x
    for k, o in enumerate(model.offsets):
        out = out + model.W_off[k] * jnp.roll(x, -o, axis=-1) + jnp.roll(model.W_off[k] * x, o, axis=-1)
    return out


def structured_shifted_product(model, x):
    """(W + D) x for a (d,) vector x; with the block factor as L (Lᵀ x), four b × b products
    per block instead of the 2 len(offsets) shifts of W x (W + D = L Lᵀ, to rounding, and
    the kernel then uses L Lᵀ consistently: the law of its momentum is N(0, L Lᵀ)).
    """
    if isinstance(model, GraphPreconditioner):
        return _graph_w_product(model, x) + model.D * x
    if model.chol_diag is not None:
        return structured_l_product(model, structured_lt_product(model, x))
    return structured_w_product(model, x) + model.D * x


def _to_blocks(model: StructuredPreconditioner, x):
    """A (d,) vector as (⌈d/b⌉, b) blocks, zero-padded."""
    blocks, b = model.chol_diag.shape[:2]
    return jnp.pad(x, (0, blocks * b - x.shape[-1])).reshape(blocks, b)


def _factor_offsets(model: StructuredPreconditioner) -> tuple[int, ...]:
    """The offsets of the edge factor's rows: the model's, or (0,) for a diagonal W (one row,
    √δ I: its cross entries are 0).
    """
    return model.offsets or (0,)


def structured_l_product(model, u):
    """L u for a momentum u: shaped (max(len(offsets), 1), d) for the edge factor, (d,) for the
    block factor (L u)_k = C_k u_k + S_k u_{k−1}, (E + d,) for a :class:`GraphPreconditioner`.
    """
    if isinstance(model, GraphPreconditioner):
        edges, root = model.rows.shape[0], jnp.sqrt(jnp.abs(model.weights))
        u_edges = u[:edges]
        out = model.L_diag * u[edges:]
        out = out.at[model.rows].add(root * u_edges)
        return out.at[model.cols].add(jnp.sign(model.weights) * root * u_edges)
    if model.chol_diag is not None:
        z = _to_blocks(model, u)
        previous = jnp.concatenate([jnp.zeros_like(z[:1]), z[:-1]])
        out = jnp.einsum("kij,kj->ki", model.chol_diag, z) + jnp.einsum("kij,kj->ki", model.chol_sub, previous)
        return out.reshape(-1)[: u.shape[-1]]
    out = jnp.zeros_like(u[0])
    for k, o in enumerate(_factor_offsets(model)):
        out = out + model.L_off[k] * u[k] + jnp.roll(model.L_cross[k] * u[k], o, axis=-1)
    return out


def structured_lt_product(model: StructuredPreconditioner, y):
    """Lᵀ y for a (d,) vector y: shaped (max(len(offsets), 1), d) for the edge factor, (d,) for
    the block factor (Lᵀ y)_k = C_kᵀ y_k + S_{k+1}ᵀ y_{k+1}.
    """
    if model.chol_diag is not None:
        z = _to_blocks(model, y)
        below = jnp.einsum("kji,kj->ki", model.chol_sub, z)  # S_kᵀ y_k, owed to block k − 1
        out = jnp.einsum("kji,kj->ki", model.chol_diag, z) + jnp.concatenate([below[1:], jnp.zeros_like(below[:1])])
        return out.reshape(-1)[: y.shape[-1]]
    offsets = _factor_offsets(model)
    return jnp.stack([model.L_off[k] * y + model.L_cross[k] * jnp.roll(y, -o, axis=-1) for k, o in enumerate(offsets)])


def momentum_shape(model, dim: int) -> tuple[int, ...]:
    """The shape of the HAMS momentum for ``model``: (d,) for a square L (and the block
    factor of a :class:`StructuredPreconditioner`), (max(len(offsets), 1), d) for its edge factor.

    Parameters
    ----------
    model : HamsPreconditioner, StructuredPreconditioner or GraphPreconditioner
        The second-order model.
    dim : int
        d.
    """
    if isinstance(model, StructuredPreconditioner) and model.chol_diag is None:
        return (len(_factor_offsets(model)), int(dim))
    if isinstance(model, GraphPreconditioner):
        return (model.rows.shape[0] + int(dim),)
    return (int(dim),)


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
    shape = momentum_shape(model, d)
    basis = jnp.eye(int(np.prod(shape)), dtype=jnp.float32).reshape(-1, *shape)
    return W, np.asarray(jax.vmap(lambda e: structured_l_product(model, e), out_axes=1)(basis), np.float64)


# -- a sparse W on any graph, stored as its edge list (docs/discrete-hams.md §8.10) -----------------


@partial(
    jax.tree_util.register_dataclass, data_fields=("W_diag", "weights", "D", "L_diag", "rows", "cols"), meta_fields=()
)
@dataclass(frozen=True)
class GraphPreconditioner:
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


#: The sparse second-order models, whose HAMS momentum is v = L u (φ = 0 only).
SPARSE_MODELS = (StructuredPreconditioner, GraphPreconditioner)


def _graph_w_product(model: GraphPreconditioner, x):
    """W x for a (d,) vector x."""
    out = model.W_diag * x
    out = out.at[model.rows].add(model.weights * x[model.cols])
    return out.at[model.cols].add(model.weights * x[model.rows])


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
