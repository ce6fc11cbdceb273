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

* :class:`LowRankModel` — a W of low rank, V diag(λ) Vᵀ with V (d × r) orthonormal, for
  large d whose Hessian has a low-rank range (an RBM's visible units): D = (δ − min(0,
  λ_min)) I and the symmetric square root L of W + D, with L⁻¹, as
  :class:`LowRankSymmetric` operators applied in O(d r)
  (:func:`low_rank_pdhams_preconditioner`).

The sparse forms of W (by diagonals, on a graph) are :mod:`gradmc.curvature.sparse_w`. Every
form gives the HAMS kernel the same few operations — ``check_phi``, ``initial_momentum``,
``refresh`` and ``move`` — so the kernel never asks which form it holds.

Everything but :func:`dhams_preconditioner` and the eigen and low-rank forms (traced inside
the learning warm-up) runs once, on the host, outside the jitted kernels.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from scipy.linalg import solve_continuous_lyapunov

from gradmc import random
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

    def check_phi(self, phi) -> None:
        """Any φ: with L⁻¹ at hand the gradient correction of PD eq. 32 is available."""

    def initial_momentum(self, rng_key, dim: int, dtype):
        """The momentum u ~ N(0, I)."""
        return jax.random.normal(rng_key, (dim,), dtype)

    def refresh(self, rng_key, momentum, epsilon):
        """(m, L m) with m = −ε u + √(1−ε²) ζ = −u⁻ in law (§7.3–7.4); ζ ~ N(0, I) is drawn as
        PAVG draws its noise, so the §7.9 reductions hold with the same random numbers. A
        rejected step keeps m (the momentum flips).
        """
        zeta = random.normal(rng_key, momentum.shape, momentum.dtype)
        m = -epsilon * momentum + jnp.sqrt(1.0 - epsilon**2) * zeta
        return m, _product(self.L, m)

    def move(self, delta, kept, Lm, gradient_change, phi):
        """(u', L u', kinetic terms) after the move Δ = s' − s, with ρ = ∇f(s') − ∇f(s) − WΔ:
        L u' = −(W + D)Δ + L m + φ ρ (PD eq. 32), u' = L⁻¹(L u'), and the terms −|u'|²/2, |m|²/2.
        """
        W_delta = _product(self.W, delta)
        rho = gradient_change - W_delta
        Lu_new = -(W_delta + self.D * delta) + Lm + phi * rho
        u_new = _product(self.L_inv, Lu_new)
        return u_new, Lu_new, (-0.5 * jnp.sum(u_new**2), 0.5 * jnp.sum(kept**2))


def _product(matrix, x):
    """A matrix of :class:`HamsPreconditioner` times x: (d, d) or a :class:`LowRankSymmetric`, or (d,) diagonal."""
    return matrix @ x if matrix.ndim == 2 else matrix * x


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

    ndim = 2

    def __matmul__(self, x):
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
