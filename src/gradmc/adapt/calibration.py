"""Calibration of the PDHAMS preconditioner W, D, L and the tuning procedures of
Zhou & Tan (2025) (``specs/discrete-hams.md`` §8–§9).

* **W** — the global second-order model f(s) ≈ f(x) + ∇f(x)ᵀ(s−x) + ½(s−x)ᵀW(s−x), fitted
  to pairs of consecutive burn-in draws (s⁽ⁱ⁾, s⁽ⁱ⁺¹⁾) of each chain (never across chains):

  - :func:`fit_w_gradients` (method 1, PD eq. 38): min over symmetric W of
    Σ_i |γ_i − W Δ_i|², Δ_i = s⁽ⁱ⁺¹⁾ − s⁽ⁱ⁾, γ_i = ∇f(s⁽ⁱ⁺¹⁾) − ∇f(s⁽ⁱ⁾); its normal equation
    is the Lyapunov equation (XᵀX) W + W (XᵀX) = XᵀY + YᵀX (PD eq. 73), solved by
    Bartels–Stewart (``scipy.linalg.solve_continuous_lyapunov``);
  - :func:`fit_w_values` (method 2, PD eq. 39): ordinary least squares of
    y_i = f(s⁽ⁱ⁺¹⁾) − f(s⁽ⁱ⁾) − ∇f(s⁽ⁱ⁾)ᵀΔ_i on ½ Δ_iᵀ W Δ_i, in θ = vech(W);
  - :func:`calibrate_w` runs burn-in chains of any sampler and applies either method.

* **D** — :func:`lambda_shift`: D = (δ − λ_min(W)) I (§8.4), so λ_min(W + D) = δ.
* **L** — :func:`factor`: L Lᵀ = W + D by Cholesky when cond(W + D) < 100, else
  L = U Λ^{1/2} from the eigendecomposition (§8.5); L⁻¹ comes with it.
* **Tuning** (§9) — :func:`grid_search` runs batched chains of one kernel for every point
  of a parameter grid at once (``vmap`` over grid and chains) and scores each point by the
  Zhou & Tan ESS of f(s) (§10.1); :func:`tune_pavg` is Algorithm 4 (bracket δ by
  acceptance, then the best ESS of f inside the bracket) and :func:`tune_pdhams`
  Algorithm 5 (ε and β fixed, δ by ESS of f at φ = 0, then φ).

Calibration runs once, on the host, outside the jitted kernels.
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from scipy.linalg import solve_continuous_lyapunov

from gradmc.diagnostics.batch_means import zhoutan_ess
from gradmc.linalg import check_square

__all__ = [
    "MAX_CONDITION",
    "check_w",
    "consecutive_pairs",
    "fit_w_gradients",
    "fit_w_values",
    "calibrate_w",
    "lambda_shift",
    "factor",
    "GridResult",
    "grid_search",
    "pick_in_bracket",
    "tune_scalar",
    "tune_pavg",
    "tune_pdhams",
]

#: Below this condition number of W + D, L is the Cholesky factor (§8.5).
MAX_CONDITION = 100.0


def check_w(W, dim: int | None = None, what: str = "W") -> np.ndarray:
    """``W`` as a float64 (d, d) array after checking it is square, finite and symmetric."""
    w = check_square(W, what, dim)
    scale = max(1.0, float(np.abs(w).max()))
    if not np.allclose(w, w.T, rtol=0.0, atol=1e-6 * scale):
        raise ValueError(f"{what} must be symmetric (max |W - Wᵀ| = {np.abs(w - w.T).max():.3g})")
    return 0.5 * (w + w.T)


# -- W from burn-in draws -------------------------------------------------------------------


def consecutive_pairs(*arrays):
    """Stack the consecutive pairs (t, t+1) of each chain: for arrays shaped (chain, draw, ...)
    returns, per array, ``(before, after)`` shaped (chain·(draw−1), ...). Pairs never cross
    chains. A (draw, ...) array is one chain."""
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

    ``positions`` and ``grads`` (chain, draw, d) (or (draw, d)): burn-in draws and ∇f there.
    Rows with Δ = 0 (rejected moves) contribute nothing. Raises ``ValueError`` unless XᵀX is
    positive definite (the moves must span R^d).
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


def calibrate_w(target, recipe, method: str = "gradients", *, num_chains: int = 25, num_draws: int = 500,
                seed: int = 0, progress: bool = False) -> np.ndarray:
    """W from ``num_draws`` burn-in draws per chain of any sampler ``recipe`` (a name or
    ``gradmc.sampler(...)``; e.g. a tuned NCG, or a PDHAMS started with a rough W), by
    ``method`` "gradients" (§8.1) or "values" (§8.2). f and ∇f are re-evaluated at the draws."""
    from gradmc.run import sample  # the runner (not needed by the fitting functions above)

    if method not in ("gradients", "values"):
        raise ValueError(f"method must be 'gradients' (§8.1) or 'values' (§8.2), got {method!r}")
    trace = sample(target, recipe, num_chains=num_chains, num_warmup=0, num_draws=num_draws, seed=seed, progress=progress)
    s = jnp.asarray(trace.draws)
    f, g = jax.jit(jax.vmap(jax.vmap(jax.value_and_grad(target.logdensity_fn))))(s)
    s, f, g = (np.asarray(x, np.float64) for x in (s, f, g))
    return fit_w_gradients(s, g) if method == "gradients" else fit_w_values(s, f, g)


# -- D and L ----------------------------------------------------------------------------------


def lambda_shift(W, delta) -> np.ndarray:
    """D = (δ − λ_min(W)) I as a (d,) vector (§8.4); δ > 0 is the step size."""
    W = check_w(W)
    delta = float(delta)
    if not np.isfinite(delta) or delta <= 0:
        raise ValueError(f"the step size δ must be a finite number > 0, got {delta}")
    return np.full(W.shape[0], delta - np.linalg.eigvalsh(W)[0])


def factor(W, D, max_condition: float = MAX_CONDITION) -> tuple[np.ndarray, np.ndarray, str]:
    """(L, L⁻¹, method) with L Lᵀ = W + diag(D): Cholesky if cond < ``max_condition`` else
    L = U Λ^{1/2} (§8.5). Raises ``ValueError`` if W + D is not positive definite."""
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


# -- tuning (§9) -------------------------------------------------------------------------------


class GridResult(NamedTuple):
    """Per grid point: ESS of f (§10.1), mean acceptance, and the index of the best point."""

    ess_f: np.ndarray
    acceptance: np.ndarray
    best: int


def grid_search(
    kernel: Callable,
    init: Callable,
    positions,
    params: dict,
    *,
    num_warmup: int,
    num_draws: int,
    seed: int = 0,
) -> GridResult:
    """Run the chains of ``kernel`` for every grid point at once and score by ESS of f.

    ``kernel(key, state, **params) -> (state, info)`` with ``info.acceptance_rate`` and
    ``state.logdensity``; ``init(key, position) -> state``; ``positions`` (chain, d) starting
    points (shared by all grid points); ``params`` maps names to arrays with a leading grid
    axis G. Returns the Zhou & Tan ESS of f over the ``num_draws`` kept draws of every grid
    point and its mean acceptance over them.
    """
    leaves = jax.tree.leaves(params)
    if not leaves:
        raise ValueError("params must hold at least one array with a leading grid axis")
    G = int(np.shape(leaves[0])[0])
    if any(np.shape(x)[0] != G for x in leaves):
        raise ValueError("every grid parameter needs the same leading grid length")
    positions = jnp.asarray(positions)
    C = positions.shape[0]
    total = int(num_warmup) + int(num_draws)

    def run_one(key, position, p):
        k_init, k_run = jax.random.split(key)
        state = init(k_init, position)

        def step(state, key):
            state, info = kernel(key, state, **p)
            return state, (state.logdensity, info.acceptance_rate)

        _, (f, acc) = jax.lax.scan(step, state, jax.random.split(k_run, total))
        return f[num_warmup:], acc[num_warmup:]

    keys = jax.random.split(jax.random.key(seed), C)
    run = jax.jit(jax.vmap(jax.vmap(run_one, in_axes=(0, 0, None)), in_axes=(None, None, 0)))
    f, acc = run(keys, positions, jax.tree.map(jnp.asarray, params))
    f = np.asarray(f, np.float64)  # (G, C, n)
    ess = np.array([_finite_ess(f[g]) for g in range(G)])
    return GridResult(ess, np.asarray(acc, np.float64).mean(axis=(1, 2)), int(np.nanargmax(ess)))


def _finite_ess(f):
    ess = zhoutan_ess(f)
    return 0.0 if not np.isfinite(ess) else float(ess)


def pick_in_bracket(result: GridResult, acceptance=(0.3, 0.95)) -> tuple[int, np.ndarray]:
    """Algorithm 4's choice: among grid points whose mean acceptance lies in ``acceptance``
    (all points if none does), the index of the best ESS of f; and the kept mask."""
    lo, hi = acceptance
    kept = (result.acceptance >= lo) & (result.acceptance <= hi)
    if not np.any(kept):
        kept = np.ones_like(kept)
    return int(np.argmax(np.where(kept, result.ess_f, -np.inf))), kept


def tune_scalar(kernel, init, positions, name: str, grid, *, num_warmup: int, num_draws: int,
                acceptance=(0.3, 0.95), seed: int = 0) -> dict:
    """Algorithm 4 for a kernel with one parameter ``name`` (a step size, a radius): run the
    ``grid``, bracket by acceptance, keep the best ESS of f. Returns ``{name, "grid", "ess_f",
    "acceptance", "kept"}``."""
    grid = np.asarray(grid).reshape(-1)
    result = grid_search(kernel, init, positions, {name: jnp.asarray(grid)}, num_warmup=num_warmup,
                         num_draws=num_draws, seed=seed)
    best, kept = pick_in_bracket(result, acceptance)
    return {name: grid[best].item(), "grid": grid, "ess_f": result.ess_f, "acceptance": result.acceptance, "kept": kept}


def tune_pavg(
    target,
    W,
    deltas,
    positions,
    *,
    num_warmup: int,
    num_draws: int,
    acceptance=(0.3, 0.95),
    seed: int = 0,
) -> dict:
    """Algorithm 4: run every δ in ``deltas`` (PAVG = PDHAMS(0, 0, 1)), keep those whose mean
    acceptance lies in ``acceptance`` (all of them if none does), and return the best ESS of f.

    Returns ``{"delta", "grid", "ess_f", "acceptance", "kept"}``.
    """
    return tune_pdhams(
        target, W, deltas, positions, epsilon=0.0, beta=1.0, phis=(0.0,),
        num_warmup=num_warmup, num_draws=num_draws, acceptance=acceptance, seed=seed,
    )


def tune_pdhams(
    target,
    W,
    deltas,
    positions,
    *,
    epsilon: float = 0.9,
    beta: float = 1.0,
    phis=tuple(round(x, 2) + 0.0 for x in np.arange(-1.0, 0.01, 0.1)),
    num_warmup: int,
    num_draws: int,
    acceptance=(0.3, 0.95),
    seed: int = 0,
) -> dict:
    """Algorithm 5: ε and β fixed; δ by best ESS of f at φ = 0 among the δ whose acceptance
    lies in ``acceptance`` (Algorithm 4's bracket); then φ ∈ ``phis`` at that δ.

    ``W`` is the calibrated (or exact) W, or None for DHAMS (W = 0, D = δ⁻² I, L = δ⁻¹ I,
    with φ in the DHAMS parametrisation). Returns ``{"delta", "phi", "grid", "ess_f",
    "acceptance", "kept", "phi_grid", "phi_ess_f"}``.
    """
    from gradmc.discrete import hams  # the kernel (imports this module for D and L)

    space = hams.check_space(target)
    deltas = np.asarray(deltas, dtype=np.float64).reshape(-1)
    if deltas.size == 0 or np.any(~np.isfinite(deltas)) or np.any(deltas <= 0):
        raise ValueError(f"deltas must be finite numbers > 0, got {deltas}")
    hams.check_hyper(epsilon, beta)
    dhams = W is None
    stacked = [hams.dhams_preconditioner(x, space.dim) if dhams else hams.pdhams_preconditioner(W, x) for x in deltas]
    precond = jax.tree.map(lambda *xs: jnp.stack(xs), *stacked)
    kernel = hams.build_kernel(beta)

    def step(key, state, precond, phi):
        return kernel(key, state, target.logdensity_fn, space, precond, epsilon, phi)

    init = lambda key, position: hams.init(position, target.logdensity_fn, key)  # noqa: E731
    phi0 = jnp.zeros(deltas.size, jnp.float32)
    scale = (1.0 / deltas) if dhams else np.ones_like(deltas)  # DHAMS φ → PDHAMS φ/δ
    first = grid_search(step, init, positions, {"precond": precond, "phi": phi0},
                        num_warmup=num_warmup, num_draws=num_draws, seed=seed)
    best, kept = pick_in_bracket(first, acceptance)
    out = {"delta": float(deltas[best]), "phi": 0.0, "grid": deltas, "ess_f": first.ess_f,
           "acceptance": first.acceptance, "kept": kept}
    phis = np.asarray(phis, dtype=np.float64).reshape(-1)
    if phis.size > 1 or (phis.size == 1 and phis[0] != 0.0):
        one = jax.tree.map(lambda x: jnp.broadcast_to(x[best], (phis.size,) + x.shape[1:]), precond)
        second = grid_search(step, init, positions,
                             {"precond": one, "phi": jnp.asarray(phis * scale[best], jnp.float32)},
                             num_warmup=num_warmup, num_draws=num_draws, seed=seed + 1)
        out.update(phi=float(phis[second.best]), phi_grid=phis, phi_ess_f=second.ess_f,
                   phi_acceptance=second.acceptance)
    return out
