"""Calibration of the PDHAMS second-order model W and the tuning procedures of Zhou & Tan
(2025) (the discrete-HAMS algorithm statement, docs/discrete-hams.md §8–§9): the tools
that *run chains* to choose a sampler's settings. The model itself (fitting W from pairs
of draws, D, L) is :mod:`gradmc.curvature.second_order`.

* :func:`calibrate_w` runs burn-in chains of any sampler and fits W by either method
  (:func:`~gradmc.curvature.second_order.fit_w_gradients`, §8.1, or
  :func:`~gradmc.curvature.second_order.fit_w_values`, §8.2).
* :func:`grid_search` runs batched chains of one kernel for every point of a parameter
  grid at once (``vmap`` over grid points, on the runner's pure loop
  :func:`gradmc.run.loop.run_chains`: every grid point gets the same keys, derived by the
  runner's ``fold_in``) and scores each point by the Zhou & Tan ESS of f(s) (§10.1).
* :func:`tune_scalar` and :func:`tune_pavg` are Algorithm 4 (bracket a parameter by
  acceptance, then the best ESS of f inside the bracket); :func:`tune_pdhams` is
  Algorithm 5 (ε and β fixed, δ by ESS of f at φ = 0, then φ).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from gradmc.adapt.warmup import bind
from gradmc.base import Sampler, Target
from gradmc.curvature.second_order import dhams_preconditioner, fit_w_gradients, fit_w_values, pdhams_preconditioner
from gradmc.diagnostics.batch_means import zhoutan_ess
from gradmc.discrete import hams
from gradmc.run import sample
from gradmc.run.loop import run_chains, run_keys
from gradmc.spaces import Categorical

__all__ = [
    "PHIS",
    "calibrate_w",
    "GridResult",
    "grid_search",
    "pick_in_bracket",
    "tune_scalar",
    "tune_pavg",
    "tune_pdhams",
]


def calibrate_w(
    target: Target,
    sampler: Sampler | str,
    method: str = "gradients",
    *,
    num_chains: int = 25,
    num_draws: int = 500,
    seed: int = 0,
    progress: bool = False,
) -> np.ndarray:
    """W from burn-in draws of any sampler (e.g. a tuned NCG, or a PDHAMS started with a rough W).

    f and ∇f are re-evaluated at the draws.

    Parameters
    ----------
    target : gradmc.base.Target
        The target on a scalar-valued discrete space (on one-hot Categorical rows the
        moves never span all d·k directions, so the fit is refused; the PDHAMS samplers
        learn W in warm-up there instead).
    sampler : gradmc.base.Sampler or str
        The sampler that makes the burn-in draws (a name or ``gradmc.sampler(...)``).
    method : {"gradients", "values"}
        Gradient matching (§8.1) or function values (§8.2).
    num_chains, num_draws : int
        Burn-in chains and draws per chain (no warm-up).
    seed : int
        The run's seed.
    progress : bool
        Show the runner's progress bar.
    """
    if method not in ("gradients", "values"):
        raise ValueError(f"method must be 'gradients' (§8.1) or 'values' (§8.2), got {method!r}")
    if isinstance(target.space, Categorical):
        raise ValueError(
            "calibrate_w cannot fit W on one-hot Categorical rows: each row sums to 1, so the moves never span "
            "all d·k directions; v-pdhams, o-pdhams and pavg-variance learn W in warm-up on such spaces "
            "(gradmc.sample(target, 'o-pdhams'))"
        )
    trace = sample(
        target, sampler, num_chains=num_chains, num_warmup=0, num_draws=num_draws, seed=seed, progress=progress
    )
    s = jnp.asarray(trace.draws)
    f, g = jax.jit(jax.vmap(jax.vmap(jax.value_and_grad(target.logdensity_fn))))(s)
    s, f, g = (np.asarray(x, np.float64) for x in (s, f, g))
    return fit_w_gradients(s, g) if method == "gradients" else fit_w_values(s, f, g)


#: Algorithm 5's default grid of φ: −1.0, −0.9, …, 0.0.
PHIS = tuple(round(x, 2) + 0.0 for x in np.arange(-1.0, 0.01, 0.1))


# -- tuning (§9) -------------------------------------------------------------------------------


class GridResult(NamedTuple):
    """What :func:`grid_search` finds.

    Parameters
    ----------
    ess_f : numpy.ndarray
        Per grid point, the Zhou & Tan ESS of f (§10.1; 0 where not finite).
    acceptance : numpy.ndarray
        Per grid point, the mean acceptance over the kept draws.
    best : int
        The index of the largest ESS of f.
    """

    ess_f: np.ndarray
    acceptance: np.ndarray
    best: int


def grid_search(
    kernel: Callable, init: Callable, positions, params: dict, *, num_warmup: int, num_draws: int, seed: int = 0
) -> GridResult:
    """Run the chains of ``kernel`` for every grid point at once and score by ESS of f.

    The chains of every grid point start from ``positions`` and use the same keys: those
    :func:`gradmc.run.loop.run_keys` derives from ``seed`` (step t of chain c:
    ``fold_in(chain_key[c], t)``), so grid points differ only by their parameters.

    Parameters
    ----------
    kernel : callable
        ``kernel(key, state, **params) -> (state, info)`` with ``state.logdensity`` and
        ``info.acceptance_rate``.
    init : callable
        ``init(key, position) -> state``.
    positions : array_like
        (chain, d) starting points, shared by all grid points.
    params : dict
        Names to arrays (or pytrees of arrays) with a leading grid axis G.
    num_warmup : int
        Steps run before the kept draws.
    num_draws : int
        Kept draws per chain: the ESS of f and the mean acceptance are over them.
    seed : int
        The seed of the keys.
    """
    leaves = jax.tree.leaves(params)
    if not leaves:
        raise ValueError("params must hold at least one array with a leading grid axis")
    G = int(np.shape(leaves[0])[0])
    if any(np.shape(x)[0] != G for x in leaves):
        raise ValueError("every grid parameter needs the same leading grid length")
    positions = jnp.asarray(positions)
    keys = run_keys(seed, positions.shape[0])

    def run_point(point):  # a fixed kernel at one grid point; its steps record (f(s), acceptance)
        step = lambda key, state, **_: kernel(key, state, **point)  # noqa: E731
        bound = bind("grid-point", init, step, {}, lambda state, info, params: (state.logdensity, info.acceptance_rate))
        return run_chains(bound, keys.chain, keys.init, positions, int(num_warmup), int(num_draws), lambda _, r: r)[2]

    f, acc = jax.jit(jax.vmap(run_point))(jax.tree.map(jnp.asarray, params))  # (G, draw, chain)
    f = np.swapaxes(np.asarray(f, np.float64), 1, 2)  # (G, chain, draw)
    ess = np.array([zhoutan_ess(f[g]) for g in range(G)], np.float64)
    ess[~np.isfinite(ess)] = 0.0
    return GridResult(ess, np.asarray(acc, np.float64).mean(axis=(1, 2)), int(np.nanargmax(ess)))


def pick_in_bracket(result: GridResult, acceptance=(0.3, 0.95)) -> tuple[int, np.ndarray]:
    """Algorithm 4's choice: among grid points whose mean acceptance lies in ``acceptance``
    (all points if none does), the index of the best ESS of f; and the kept mask.

    Parameters
    ----------
    result : GridResult
        A grid search.
    acceptance : tuple of float
        The bracket (low, high) of mean acceptance.
    """
    lo, hi = acceptance
    kept = (result.acceptance >= lo) & (result.acceptance <= hi)
    if not np.any(kept):
        kept = np.ones_like(kept)
    return int(np.argmax(np.where(kept, result.ess_f, -np.inf))), kept


def tune_scalar(
    kernel, init, positions, name: str, grid, *, num_warmup: int, num_draws: int, acceptance=(0.3, 0.95), seed: int = 0
) -> dict:
    """Algorithm 4 for a kernel with one parameter (a step size, a radius): run the grid,
    bracket by acceptance, keep the best ESS of f.

    Returns ``{name, "grid", "ess_f", "acceptance", "kept"}``.

    Parameters
    ----------
    kernel, init, positions
        As for :func:`grid_search`.
    name : str
        The kernel's keyword for the parameter.
    grid : array_like
        The values to try.
    num_warmup, num_draws, seed
        As for :func:`grid_search`.
    acceptance : tuple of float
        The bracket of mean acceptance (:func:`pick_in_bracket`).
    """
    grid = np.asarray(grid).reshape(-1)
    result = grid_search(
        kernel, init, positions, {name: jnp.asarray(grid)}, num_warmup=num_warmup, num_draws=num_draws, seed=seed
    )
    best, kept = pick_in_bracket(result, acceptance)
    return {name: grid[best].item(), "grid": grid, "ess_f": result.ess_f, "acceptance": result.acceptance, "kept": kept}


def tune_pavg(
    target: Target, W, deltas, positions, *, num_warmup: int, num_draws: int, acceptance=(0.3, 0.95), seed: int = 0
) -> dict:
    """Algorithm 4 for PAVG (= PDHAMS(0, 0, 1)): run every δ, keep those whose mean acceptance
    lies in ``acceptance`` (all of them if none does), and return the best ESS of f.

    Returns ``{"delta", "grid", "ess_f", "acceptance", "kept"}``.

    Parameters
    ----------
    target : gradmc.base.Target
        A target on a discrete space.
    W : array_like
        The second-order model.
    deltas : array_like
        The δ to try.
    positions : array_like
        (chain, d) starting points.
    num_warmup, num_draws, seed
        As for :func:`grid_search`.
    acceptance : tuple of float
        The bracket of mean acceptance.
    """
    budget = {"num_warmup": num_warmup, "num_draws": num_draws, "acceptance": acceptance, "seed": seed}
    return tune_pdhams(target, W, deltas, positions, epsilon=0.0, beta=1.0, phis=(0.0,), **budget)


def tune_pdhams(
    target: Target,
    W,
    deltas,
    positions,
    *,
    epsilon: float = 0.9,
    beta: float = 1.0,
    phis=PHIS,
    num_warmup: int,
    num_draws: int,
    acceptance=(0.3, 0.95),
    seed: int = 0,
) -> dict:
    """Algorithm 5: ε and β fixed; δ by best ESS of f at φ = 0 among the δ whose acceptance
    lies in ``acceptance`` (Algorithm 4's bracket); then φ ∈ ``phis`` at that δ.

    Returns ``{"delta", "phi", "grid", "ess_f", "acceptance", "kept"}`` and, when φ is
    searched, ``"phi_grid", "phi_ess_f", "phi_acceptance"``.

    Parameters
    ----------
    target : gradmc.base.Target
        A target on a discrete space (W, if given, acts on the flattened position).
    W : array_like or None
        The calibrated (or exact) W, or None for DHAMS (W = 0, D = δ⁻² I, L = δ⁻¹ I, with φ
        in the DHAMS parametrisation).
    deltas : array_like
        The δ to try.
    positions : array_like
        (chain, d) starting points.
    epsilon : float
        The auto-regression ε ∈ [0, 1).
    beta : float
        The over-relaxation β ∈ (0, 1].
    phis : sequence of float
        The φ to try at the chosen δ (the second grid uses ``seed + 1``).
    num_warmup, num_draws, seed
        As for :func:`grid_search`.
    acceptance : tuple of float
        The bracket of mean acceptance.
    """
    space = hams.check_space(target)
    deltas = np.asarray(deltas, dtype=np.float64).reshape(-1)
    if deltas.size == 0 or np.any(~np.isfinite(deltas)) or np.any(deltas <= 0):
        raise ValueError(f"deltas must be finite numbers > 0, got {deltas}")
    hams.check_hyper(epsilon, beta)
    dhams = W is None
    stacked = [dhams_preconditioner(x, space.dim) if dhams else pdhams_preconditioner(W, x) for x in deltas]
    precond = jax.tree.map(lambda *xs: jnp.stack(xs), *stacked)
    kernel = hams.build_kernel(beta)

    def step(key, state, precond, phi):
        return kernel(key, state, target.logdensity_fn, space, precond, epsilon, phi)

    init = lambda key, position: hams.init(position, target.logdensity_fn, key)  # noqa: E731

    def search(precond, phi, seed):
        point = {"precond": precond, "phi": jnp.asarray(phi, jnp.float32)}
        return grid_search(step, init, positions, point, num_warmup=num_warmup, num_draws=num_draws, seed=seed)

    scale = (1.0 / deltas) if dhams else np.ones_like(deltas)  # DHAMS φ → PDHAMS φ/δ
    first = search(precond, np.zeros(deltas.size), seed)
    best, kept = pick_in_bracket(first, acceptance)
    out = dict(
        delta=float(deltas[best]), phi=0.0, grid=deltas, ess_f=first.ess_f, acceptance=first.acceptance, kept=kept
    )
    phis = np.asarray(phis, dtype=np.float64).reshape(-1)
    if phis.size > 1 or (phis.size == 1 and phis[0] != 0.0):
        one = jax.tree.map(lambda x: jnp.broadcast_to(x[best], (phis.size,) + x.shape[1:]), precond)
        second = search(one, phis * scale[best], seed + 1)
        out.update(
            phi=float(phis[second.best]), phi_grid=phis, phi_ess_f=second.ess_f, phi_acceptance=second.acceptance
        )
    return out
