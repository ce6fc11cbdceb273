"""Rhodes & Gutmann (2022) learning experiments (§5.3, §5.4, App. H.1, L, M, O) and the
textbook's Ising image denoising (Example 5.9). ``gradmc reproduce NAME``:

* ``rhodes2022-ising`` — Table 1: learn the 10×10 periodic lattice Ising J* = 0.2·A by PCD
  with NCG, AVG, PAVG (model-specific = block Gibbs with the current J; model-agnostic =
  data covariance), GWG and Gibbs at budget-matched K; ‖J − J*‖_F mean (sd) over seeds.
* ``rhodes2022-step-robustness`` — Figure 7: the same error at K = 10 (AVG units) as the
  step size is multiplied by 0.1 … 10, relative to the unperturbed error.
* ``rhodes2022-ebm`` — Table 2 (see :mod:`gradmc.learn.ebm`): a ground-truth
  sᵀJs + bᵀs + f_θ(s) EBM on digits16 (as coded; §5.4 writes ½sᵀJs), re-estimation of J by each sampler, in the same
  {0, 1} coding as Table 1 (:data:`CODINGS`).
* ``textbook-denoising`` — Example 5.9: Gibbs sweeps (and our gradient samplers) on the
  posterior of a binary image under an Ising prior; :func:`denoise` for a user's PNG.

Readings stated in the reports: the Ising data come from independent block-Gibbs chains
(exact conditional updates for a quadratic f), checked against the exact mean bond
correlation of the 10×10 torus (transfer matrix) and, in the tests, against enumeration
of a 4×4 torus; Gibbs in PCD is random-scan single-site (one coordinate per step, as
Grathwohl et al.'s per-dimension sampler), since persistent chains restart their scan.

Coordinates and metric of Table 1, as the authors' code has them: the learner samples
x ∈ {0, 1}^100 and the model maps x to spins, f(x) = (2x − 1)ᵀJ(2x − 1), so the paper's
step sizes (Table 4) and PAVG's data covariance are {0, 1} quantities (on spins the same
NCG/AVG proposal needs ε × 4); Table 2's samplers move the binary digit images the same
way. Metric: the published cells match ‖J − J*‖_F/√d (``errors(...)["per_site"]``; published /
ours 0.91–1.01 where both converge, 0.77–1.14 where both fail, Spearman 0.94 over Table 1's 30
cells), shown beside them; ‖J − J*‖_F and ‖J − J*‖²_F (the code's ``sq_err``) are reported too.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from gradmc.adapt.preconditioner import from_data
from gradmc.discrete import block_gibbs
from gradmc.learn import pcd
from gradmc.registry import register_experiment
from gradmc.report import format_table
from gradmc.spaces import Binary, Spin
from gradmc.targets.lattice import periodic_adjacency

__all__ = [
    "PUBLISHED_TABLE1",
    "PUBLISHED_TABLE2",
    "K_GRIDS",
    "EBM_K_GRIDS",
    "symmetric",
    "ising_logdensity",
    "ising_logdensity_binary",
    "Coding",
    "CODINGS",
    "get_coding",
    "ising_samples",
    "exact_bond_correlation",
    "ising_data",
    "l1_penalty",
    "l1_mle",
    "errors",
    "method_kernel",
    "ising_kernel",
    "ising_learner",
    "learn_ising",
    "run_ising",
    "run_step_robustness",
    "ebm_ground_truth",
    "data_marginals",
    "marginal_buffer",
    "learn_ebm_J",
    "run_ebm",
    "grid_bonds",
    "denoising_logdensity",
    "builtin_image",
    "load_binary_image",
    "posterior_mean",
    "denoise",
    "run_denoising",
]

# Table 1: ‖J − J*‖_F mean (sd) over 5 seeds, columns K = 1, 5, 10, 15, 20 (AVG units).
PUBLISHED_TABLE1 = {
    "NCG": [(0.837, 0.05), (0.117, 0.0003), (0.117, 0.0004), (0.117, 0.0005), (0.117, 0.0005)],
    "AVG": [(5.535, 0.002), (5.452, 0.003), (5.273, 0.007), (4.814, 0.029), (0.120, 0.0006)],
    "PAVG model-specific": [(0.120, 0.003), (0.118, 0.0003), (0.118, 0.0003), (0.118, 0.0004), (0.118, 0.0005)],
    "PAVG model-agnostic": [(5.521, 0.002), (0.124, 0.0005), (0.121, 0.0004), (0.119, 0.0004), (0.119, 0.0007)],
    "GWG": [(5.271, 0.0038), (0.163, 0.0009), (0.138, 0.0004), (0.132, 0.0002), (0.128, 0.0008)],
    "Gibbs": [(4.825, 0.002), (0.805, 0.003), (0.167, 0.0005), (0.136, 0.0003), (0.132, 0.0005)],
}
# Table 2: columns K = 5, 10, 15, 20 (AVG units).
PUBLISHED_TABLE2 = {
    "NCG": [(0.128, 0.001), (0.116, 0.0002), (0.112, 0.0009), (0.112, 0.0004)],
    "AVG": [(3.310, 0.078), (2.599, 0.051), (0.496, 0.119), (0.114, 0.0006)],
    "PAVG": [(3.212, 0.079), (0.117, 0.0004), (0.114, 0.0006), (0.112, 0.0007)],
    "GWG": [(0.732, 0.013), (0.156, 0.003), (0.120, 0.001), (0.114, 0.0005)],
    "Gibbs": [(3.121, 0.146), (2.270, 0.067), (1.637, 0.007), (1.204, 0.008)],
}
# Budget-matched K grids (experiments.md), aligned with AVG's K = 1, 5, 10, 15, 20.
K_GRIDS = {
    "NCG": [1, 6, 12, 18, 24],
    "AVG": [1, 5, 10, 15, 20],
    "PAVG model-specific": [3, 15, 30, 45, 60],
    "PAVG model-agnostic": [1, 5, 10, 15, 20],
    "GWG": [1, 6, 12, 18, 24],
    "Gibbs": [2, 10, 20, 30, 40],
}
AVG_K = K_GRIDS["AVG"]
# The paper's ε, in the {0, 1} coordinates of the authors' code (see CODINGS); block Gibbs
# (model-specific PAVG) is exact for any ε, which only adds 2/ε to the shift d_ε and makes
# it stickier: we use ε = 10 (Martens & Sutskever's minimal shift + 0.2).
STEP_SIZES = {"NCG": 0.5, "AVG": 0.2, "PAVG model-agnostic": 0.2, "PAVG model-specific": 10.0}


def _cell(mean: float, sd: float | None) -> str:
    return f"{mean:.3f}" if sd is None else f"{mean:.3f} ({sd:.3g})"


def _seeds_cell(values) -> str:
    """Mean (sd) over seeds of one cell; the mean alone for a single seed."""
    values = np.asarray(values, np.float64)
    return _cell(float(values.mean()), float(values.std(ddof=1)) if len(values) > 1 else None)


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


# --------------------------------------------------------------------------- Ising model and data


def symmetric(G):
    """J = (G + Gᵀ)/2 (the learner's parameterisation of a symmetric J)."""
    return 0.5 * (G + jnp.swapaxes(G, -1, -2))


def ising_logdensity(G, s):
    """f(s; J) = sᵀJs on spins s ∈ {−1, 1}^d, J = (G + Gᵀ)/2, b = 0 fixed (App. M, as coded: no ½)."""
    return s @ symmetric(G) @ s


class Coding(NamedTuple):
    """The coordinates the samplers move: ``space`` (a class: ``space(d)``), ``to_spin`` /
    ``from_spin`` the maps between a state and its spins, and ``scale`` = ds/dx, so that a
    Hessian in the coding is ``scale²`` × the spin Hessian."""

    space: type
    to_spin: Callable
    from_spin: Callable
    scale: float

    def model(self, logdensity):
        """``logdensity(θ, s)`` on spins as a function ``(θ, state)`` of this coding's states."""
        return lambda theta, x: logdensity(theta, self.to_spin(x))


# The authors' code samples x ∈ {0, 1}^d and maps it to spins s = 2x − 1 inside the model, so
# the paper's step sizes (Table 4) and PAVG's data covariance are {0, 1} quantities (on spins
# the same NCG/AVG proposal needs ε × scale² = 4ε); "spin" samples s directly.
CODINGS = {
    "binary": Coding(Binary, lambda x: 2.0 * x - 1.0, lambda s: (np.asarray(s, np.float32) + 1.0) / 2.0, 2.0),
    "spin": Coding(Spin, lambda s: s, lambda s: np.asarray(s, np.float32), 1.0),
}


def get_coding(name: str) -> Coding:
    """``CODINGS[name]``, with a clear error for an unknown name."""
    if name not in CODINGS:
        raise ValueError(f"coding must be one of {sorted(CODINGS)}, got {name!r}")
    return CODINGS[name]


# the Ising model on x ∈ {0, 1}^d, f(x; J) = (2x − 1)ᵀJ(2x − 1): the authors' code
ising_logdensity_binary = CODINGS["binary"].model(ising_logdensity)


def errors(J, J_star) -> dict:
    """‖J − J*‖_F, its square (the authors' ``sq_err``), ``per_site`` =
    ‖J − J*‖_F/√d (the root of the mean over the d rows of each row's summed squared error:
    the scale the published Tables 1 and 2 match) and the RMSE over all d² entries; leading axes of
    ``J`` are kept."""
    E = jnp.asarray(J) - jnp.asarray(J_star, jnp.float32)
    sq = jnp.sum(E**2, axis=(-2, -1))
    return {"frobenius": jnp.sqrt(sq), "sq_frobenius": sq, "per_site": jnp.sqrt(sq / E.shape[-2]),
            "rmse": jnp.sqrt(sq / (E.shape[-1] * E.shape[-2]))}


def ising_samples(J, n: int, key, *, num_steps: int, record_every: int = 0, step_size: float = 1e3):
    """``n`` draws of p(s) ∝ exp(sᵀJs) on spins: the final states of ``n`` independent
    block-Gibbs chains (Martens & Sutskever 2010; exact conditionals for a quadratic f)
    run ``num_steps`` steps from uniform random states.

    ``step_size`` ε only sets d_ε = max(0, −λ_min) + 2/ε of the auxiliary variable (any ε is
    exact; large ε mixes fastest). With ``record_every`` > 0 also returns, every
    ``record_every`` steps, the mean over chains of the nearest-neighbour correlation
    sᵀAs / (2 · number of bonds), as ``(steps, values)`` (the convergence record).
    """
    J = np.asarray(J, np.float64)
    d = J.shape[0]
    space = Spin(d)
    logdensity = lambda s: s @ jnp.asarray(J, jnp.float32) @ s  # noqa: E731
    alg = block_gibbs.as_top_level_api(logdensity, space, J + J.T, step_size)
    key_init, key_run = jax.random.split(key)
    start = jax.vmap(space.sample_uniform)(jax.random.split(key_init, n))
    states = jax.vmap(alg.init)(start)
    adjacency = jnp.asarray((J != 0).astype(np.float32))
    num_bonds = float(np.count_nonzero(J)) / 2

    def bond_correlation(states):
        s = states.position
        return jnp.mean(jnp.einsum("ni,ij,nj->n", s, adjacency, s)) / (2 * num_bonds)

    def one(states, key):
        return jax.vmap(alg.step)(jax.random.split(key, n), states)[0]

    block = record_every if record_every > 0 else num_steps

    @jax.jit
    def run_block(states, key):
        states = jax.lax.fori_loop(0, block, lambda i, st: one(st, jax.random.fold_in(key, i)), states)
        return states, bond_correlation(states)

    steps, values = [], []
    for b, k in enumerate(jax.random.split(key_run, -(-num_steps // block))):
        states, value = run_block(states, k)
        steps.append((b + 1) * block)
        values.append(float(value))
    draws = np.asarray(states.position)
    if record_every > 0:
        return draws, (np.asarray(steps), np.asarray(values))
    return draws


def exact_bond_correlation(side: int, strength: float) -> float:
    """Exact E[s_i s_j] of a nearest-neighbour pair for p(s) ∝ exp(sᵀ(strength·A)s) on the
    periodic ``side × side`` lattice (β = 2·strength per bond), by the row transfer matrix:
    E[Σ_bonds s_i s_j] = ∂ log Z / ∂β with Z = Tr Tˢⁱᵈᵉ."""
    beta = 2.0 * strength
    rows = 1 - 2 * ((np.arange(2**side)[:, None] >> np.arange(side)) & 1).astype(np.float64)  # (2^side, side)
    horizontal = np.sum(rows * np.roll(rows, 1, axis=1), axis=1)
    vertical = rows @ rows.T
    energy = 0.5 * horizontal[:, None] + 0.5 * horizontal[None, :] + vertical
    T = np.exp(beta * (energy - energy.max()))
    lam, U = np.linalg.eigh(T)
    weights = (lam / np.abs(lam).max()) ** side
    dT = U.T @ (T * energy) @ U
    mean_energy = side * np.sum(weights / lam * np.diag(dT)) / np.sum(weights)
    return float(mean_energy / (2 * side * side))


# --------------------------------------------------------------------------- Table 1: PCD on the Ising lattice


def l1_penalty(weight: float):
    """h(J) = weight · Σ_ij |J_ij| (App. M: 0.01)."""
    return lambda G: weight * jnp.sum(jnp.abs(symmetric(G)))


def method_kernel(method: str, step_size: float | None = None, data=None) -> pcd.Kernel:
    """The PCD kernel of a sampler of Tables 1–2: "NCG", "AVG" (``step_size``), "PAVG"
    (model-agnostic: M = the covariance of ``data``, App. F), "GWG", "Gibbs"; ``step_size``
    and ``data`` in the coding the sampler moves (:data:`CODINGS`)."""
    if method == "NCG":
        return pcd.kernel("ncg", step_size=step_size)
    if method == "AVG":
        return pcd.kernel("avg", step_size=step_size)
    if method == "PAVG":
        return pcd.kernel("pavg", step_size=step_size, M=from_data(data, "covariance"))
    if method == "GWG":
        return pcd.kernel("gwg")
    if method == "Gibbs":
        return pcd.kernel("gibbs")
    raise ValueError(f"unknown method {method!r}; valid: NCG, AVG, PAVG, GWG, Gibbs")


def ising_kernel(method: str, data, step_scale: float = 1.0) -> pcd.Kernel:
    """The PCD kernel of a Table 1 method in the {0, 1} coding (paper step sizes × ``step_scale``;
    ``data`` in {0, 1}, for the model-agnostic preconditioner)."""
    if method not in K_GRIDS:
        raise ValueError(f"unknown method {method!r}; valid: {sorted(K_GRIDS)}")
    eps = STEP_SIZES.get(method, 1.0) * step_scale
    if method == "PAVG model-specific":  # block Gibbs with the current model's Hessian ∇²f = 2²·2J = 8J (x ∈ {0, 1})
        return pcd.kernel("block-gibbs", step_size=eps, M=lambda G: CODINGS["binary"].scale**2 * 2.0 * symmetric(G))
    return method_kernel("PAVG" if method == "PAVG model-agnostic" else method, eps, data)


def ising_learner(kernel: pcd.Kernel, d: int, num_steps: int, *, batch_size=50, buffer_size=5000, l1=0.01, lr=3e-4, coding="binary") -> pcd.PCD:
    """App. M's learner: Adam(lr 3e-4, eps 1e-7), L1 penalty 0.01, batch 50, buffer 5000;
    ``coding`` "binary" (the authors' code) or "spin" (see :data:`CODINGS`)."""
    chosen = get_coding(coding)
    return pcd.PCD(
        chosen.model(ising_logdensity),
        chosen.space(d),
        kernel,
        num_steps,
        batch_size=batch_size,
        buffer_size=buffer_size,
        optimizer=optax.adam(lr, eps=1e-7),
        regulariser=l1_penalty(l1) if l1 else None,
    )


def learn_ising(method: str, K: int, data, J_star, *, seeds: int, num_updates: int, seed: int, progress: bool, step_scale=1.0, every=None, lr=3e-4):
    """PCD in the {0, 1} coding for ``seeds`` independent runs (one vmapped, jitted update),
    each with its own G ~ 0.01·N(0, 1) start, buffer and minibatches, on spin ``data``;
    returns (final :func:`errors` per seed, the fit result whose history has them every ``every``)."""
    d = J_star.shape[0]
    binary = np.asarray(CODINGS["binary"].from_spin(data))
    learner = ising_learner(ising_kernel(method, binary, step_scale), d, K, lr=lr)
    key_params, key_run = jax.random.split(jax.random.key(seed))
    G0 = 0.01 * jax.random.normal(key_params, (seeds, d, d))

    def callback(n, state):
        return {k: np.asarray(v) for k, v in errors(symmetric(state.params), J_star).items()}

    res = pcd.fit(
        learner, G0, binary, key=key_run, num_updates=num_updates, num_runs=seeds, callback=callback,
        every=every or num_updates, progress=progress, desc=f"{method} K={K}",
    )
    return {k: res.history[-1][k] for k in ("frobenius", "sq_frobenius", "per_site", "rmse")}, res


def l1_mle(data, l1: float = 0.01, *, num_iterations: int = 4000, num_chains: int = 2000, step: float = 0.01, seed: int = 0):
    """The l1-regularised maximum-likelihood estimate argmin_J −mean_data f(x; J) + log Z(J) +
    l1·Σ_{i≠j}|J_ij| of the spin model f = sᵀJs (zero diagonal): the statistical floor of
    Table 1's estimator for this data set, free of PCD's optimiser noise and budget.

    Proximal gradient on the symmetric off-diagonal J: the gradient 2(E_J[ssᵀ] − mean_data ssᵀ)
    uses the exact data moments and model moments from ``num_chains`` persistent chains of
    exact block Gibbs (two steps per iteration, started at data points); soft-thresholding at
    2·step·l1; the returned J averages the iterates of the second half. Returns J (numpy)."""
    from gradmc.discrete import block_gibbs

    data = jnp.asarray(data, jnp.float32)
    n, d = data.shape
    data_moments = data.T @ data / n
    off = 1.0 - jnp.eye(d)
    kernel, space = block_gibbs.build_kernel(), Spin(d)
    half = num_iterations // 2

    def iteration(carry, key):
        J, chains, J_sum, t = carry
        logdensity = lambda s: s @ J @ s  # noqa: E731
        precond = pcd.cholesky_preconditioner(2.0 * J, 10.0)
        states = jax.vmap(lambda s: block_gibbs.init(s, logdensity))(chains)
        for k in jax.random.split(key, 2):
            states = jax.vmap(lambda kk, c: kernel(kk, c, logdensity, space, precond)[0])(jax.random.split(k, chains.shape[0]), states)
        model_moments = states.position.T @ states.position / chains.shape[0]
        J = J - 2.0 * step * (model_moments - data_moments)
        J = jnp.sign(J) * jnp.maximum(jnp.abs(J) - 2.0 * step * l1, 0.0) * off
        return (J, states.position, J_sum + jnp.where(t >= half, J, 0.0), t + 1), None

    start = data[jax.random.choice(jax.random.key(seed), n, (num_chains,), replace=num_chains > n)]
    init = (jnp.zeros((d, d)), start, jnp.zeros((d, d)), 0)
    (_, _, J_sum, _), _ = jax.jit(lambda key: jax.lax.scan(iteration, init, jax.random.split(key, num_iterations)))(jax.random.key(seed + 1))
    return np.asarray(J_sum) / (num_iterations - half)


def _ising_budget(full: bool) -> dict:
    """The paper's per-run settings (2000 updates, 10,000 data) either way; the quick default
    runs 2 seeds (paper 5) and a shorter MLE floor."""
    if full:
        return dict(seeds=5, num_updates=2000, num_data=10_000, data_steps=2000, mle_iterations=4000, convergence_updates=8000)
    return dict(seeds=2, num_updates=2000, num_data=10_000, data_steps=1000, mle_iterations=2000)


def ising_data(side: int, strength: float, num_data: int, data_steps: int, seed: int):
    """The Table 1 data set (spins, from sᵀJ*s as coded) and its convergence record (see
    :func:`ising_samples`)."""
    J_star = strength * periodic_adjacency(side)
    data, (steps, values) = ising_samples(J_star, num_data, jax.random.key(seed), num_steps=data_steps, record_every=max(1, data_steps // 10))
    return J_star, data, steps, values


def _data_report(side, strength, data, steps, values) -> list[str]:
    exact = exact_bond_correlation(side, strength)
    A = periodic_adjacency(side)
    per_chain = np.einsum("ni,ij,nj->n", data, A, data) / A.sum()
    se = per_chain.std(ddof=1) / np.sqrt(len(per_chain))
    z = (values[-1] - exact) / se
    trail = ", ".join(f"{s}: {v:.4f}" for s, v in zip(steps, values))
    return [
        f"Data: {len(data)} states, the final states of {len(data)} independent block-Gibbs chains (exact conditional "
        f"updates of the auxiliary-variable Gibbs sampler for a quadratic f) run {steps[-1]} steps each from uniform "
        f"spins. Convergence: mean nearest-neighbour correlation across chains after n steps — {trail}; exact value "
        f"{exact:.4f} (row transfer matrix of the {side}x{side} torus); final z = {z:.2f} (MCSE {se:.4f}). "
        "The sampler itself is checked against exact enumeration of the 4x4 torus in tests/test_pcd.py.",
        "",
    ]


def _table1_agreement(ours: dict, published: dict, failed_factor: float = 3.0) -> list[str]:
    """Report lines comparing our Table 1 cells with the published ones cell by cell: a cell
    has failed when its error exceeds ``failed_factor`` × the best cell of its table; the ratio
    published / ours is summarised separately over the cells that converge and fail in both."""
    from scipy.stats import spearmanr

    best_ours, best_paper = min(ours.values()), min(published.values())
    state = lambda err, best: "failed" if err > failed_factor * best else "converged"  # noqa: E731
    groups, agreeing, disagree = {"converged": [], "failed": []}, [], []
    for cell in ours:
        mine, theirs = state(ours[cell], best_ours), state(published[cell], best_paper)
        if mine == theirs:
            groups[mine].append(published[cell] / ours[cell])
            agreeing.append(cell)
        else:
            disagree.append(f"{cell[0]} at K = {AVG_K[cell[1]]} ({theirs} in the paper, {mine} here)")
    summary = [
        f"{name} in both: {len(r)} cells, published / ours median {np.median(r):.3f} (range {min(r):.3f}–{max(r):.3f})"
        for name, r in groups.items() if r
    ]
    spread = lambda power: max(published[c] / ours[c] ** power for c in agreeing) / min(published[c] / ours[c] ** power for c in agreeing)  # noqa: E731
    return [
        f"Agreement, cell by cell (a cell has failed when its error is over {failed_factor:g}× its table's best): "
        + "; ".join(summary) + ". " + (f"Cells that disagree: {', '.join(disagree)}. " if disagree else "All cells agree on which runs fail. ")
        + f"Rank correlation of all {len(ours)} cells with the published ones: Spearman "
        f"{spearmanr(list(ours.values()), list(published.values()))[0]:.2f}. Largest / smallest ratio over the cells that "
        f"agree: {spread(1):.2f} (read as squares of ours, {spread(2):.0f}).",
        "",
    ]


def run_ising(*, out: Path, full: bool, seed: int, progress: bool, budget: dict | None = None, methods=None) -> str:
    """Table 1: ‖J − J*‖_F/√d per method and K beside the published cells and their ratio,
    ‖J − J*‖_F and ‖J − J*‖²_F, and the l1-regularised MLE's error on the same data."""
    out.mkdir(parents=True, exist_ok=True)
    b = budget or _ising_budget(full)
    t_start = time.perf_counter()
    J_star, data, steps, values = ising_data(10, 0.2, b["num_data"], b["data_steps"], seed)
    lines = [
        "# Rhodes & Gutmann (2022) §5.3, Table 1: Ising lattice estimation by PCD",
        "",
        f"10x10 periodic lattice, J* = 0.2·A, b = 0 fixed. As the authors coded it, the samplers move x ∈ {{0, 1}}^100 "
        "and f(x) = (2x − 1)ᵀJ(2x − 1), i.e. sᵀJs on spins (no ½); the paper's step sizes NCG 0.5, AVG 0.2, PAVG 0.2 "
        "are {0, 1} quantities (on spins the same proposals need ε × 4) and the model-agnostic PAVG preconditioner is the "
        "covariance of the {0, 1} data. Model-specific PAVG = block Gibbs with M = ∇²f = 8J of the current model, ε = 10 "
        f"(exact for any ε). PCD (Alg. L.6): Adam lr 3e-4 (eps 1e-7), L1 0.01·Σ|J_ij|, batch 50, buffer 5000 (uniform "
        f"start), {b['num_updates']} updates, J = (G + Gᵀ)/2 with G ~ 0.01·N(0, 1); {b['seeds']} seeds (paper 5; "
        "independent runs, vmapped). Columns are AVG's K; the budget-matched K of each method is in its row label.",
        "",
    ]
    lines += _data_report(10, 0.2, data, steps, values)
    t0 = time.perf_counter()
    floor = {k: float(v) for k, v in errors(l1_mle(data, 0.01, num_iterations=b["mle_iterations"], num_chains=1000, seed=seed), J_star).items()}
    floor_unreg = {k: float(v) for k, v in errors(l1_mle(data, 0.0, num_iterations=b["mle_iterations"], num_chains=1000, seed=seed), J_star).items()}
    lines += [
        f"Floor for this data set ({len(data)} samples): the l1-regularised (0.01) MLE — proximal gradient with exact data "
        f"moments and block-Gibbs model moments ({b['mle_iterations']} iterations, 1000 chains, iterates of the second half "
        f"averaged) — has ‖J − J*‖_F = {floor['frobenius']:.3f} (‖·‖_F/√d = {floor['per_site']:.3f}); without the L1 "
        f"term the MLE has ‖J − J*‖_F = {floor_unreg['frobenius']:.3f}. ({time.perf_counter() - t0:.0f} s)",
        "",
    ]
    tables = {"per_site": [], "frobenius": [], "sq_frobenius": []}
    ours, published, timing = {}, {}, []
    for i, method in enumerate(methods or K_GRIDS):
        grid = K_GRIDS[method][: b.get("columns", 5)]
        label = f"{method} (K={','.join(map(str, grid))})"
        rows = {k: {"method": label} for k in tables}
        paper, ratio = {"method": "  paper"}, {"method": "  paper / ours"}
        for j, K in enumerate(grid):
            t0 = time.perf_counter()
            errs, _ = learn_ising(method, K, data, J_star, seeds=b["seeds"], num_updates=b["num_updates"], seed=seed + 1000 * i + j, progress=progress)
            timing.append(time.perf_counter() - t0)
            col = f"K={AVG_K[j]}"
            for k in tables:
                rows[k][col] = _seeds_cell(errs[k])
            ours[method, j] = float(np.mean(errs["per_site"]))
            published[method, j] = PUBLISHED_TABLE1[method][j][0]
            paper[col] = _cell(*PUBLISHED_TABLE1[method][j])
            ratio[col] = f"{published[method, j] / ours[method, j]:.3f}"
        tables["per_site"] += [rows["per_site"], paper, ratio]
        tables["frobenius"].append(rows["frobenius"])
        tables["sq_frobenius"].append(rows["sq_frobenius"])
    d = J_star.shape[0]
    lines += [
        f"## ‖J − J*‖_F/√d (d = {d}), mean (sd) over seeds; `paper` = the published Table 1",
        "", "```", format_table(tables["per_site"]), "```", "",
        *_table1_agreement(ours, published),
        f"The published cells match ‖J − J*‖_F/√d — the root of the mean over the {d} sites (rows of J) of each site's "
        f"summed squared error — not ‖J − J*‖_F (every ratio would be ≈ 1/√d = {1 / np.sqrt(d):.2g}) nor ‖J − J*‖²_F (above); the "
        "code's exact expression is not in the paper, so both norms follow. At Adam 3e-4 and batch 50, PCD has not "
        "converged at 2,000 updates, here or (at this match) in the paper: the converged value is the l1-MLE above "
        f"({floor['per_site']:.3f} in this scale). A failed sampler leaves the negatives near uniform, and Adam then "
        "raises every coupling by about lr per update.",
        "",
        "## ‖J − J*‖_F, mean (sd) over seeds", "", "```", format_table(tables["frobenius"]), "```", "",
        "## ‖J − J*‖²_F (the authors' `sq_err`), mean (sd) over seeds", "", "```", format_table(tables["sq_frobenius"]), "```", "",
    ]
    if b.get("convergence_updates"):
        method, K = "PAVG model-specific", K_GRIDS["PAVG model-specific"][0]
        errs, res = learn_ising(method, K, data, J_star, seeds=b["seeds"], num_updates=b["convergence_updates"], seed=seed + 99,
                                progress=progress, every=b["num_updates"])
        trail = ", ".join(f"{h['update']}: {np.mean(h['frobenius']):.3f}" for h in res.history)
        lines += [
            f"Convergence with an exact sampler ({method}, K = {K}, {b['seeds']} seeds): ‖J − J*‖_F after n updates — {trail}.",
            "",
        ]
    lines += [
        f"Wall time: {time.perf_counter() - t_start:.0f} s in all, {sum(timing):.0f} s for {len(timing)} PCD cells (compilation included).",
    ]
    return "\n".join(lines)


@register_experiment("rhodes2022-ising", "Rhodes & Gutmann 2022 Table 1: Ising lattice estimation by PCD with NCG, AVG, PAVG, GWG, Gibbs")
def rhodes2022_ising(*, out: Path, full: bool, seed: int, progress: bool) -> str:
    return run_ising(out=Path(out), full=full, seed=seed, progress=progress)


# --------------------------------------------------------------------------- Figure 7: step-size robustness

STEP_MULTIPLIERS = (0.1, 0.3, 1.0, 3.0, 10.0)


def run_step_robustness(*, out: Path, full: bool, seed: int, progress: bool, budget: dict | None = None, multipliers=STEP_MULTIPLIERS) -> str:
    """Figure 7: error at K = 10 (AVG units: NCG/GWG K = 12) with perturbed step sizes,
    relative to the unperturbed error; GWG's error relative to each method's as a dashed line."""
    out.mkdir(parents=True, exist_ok=True)
    b = budget or _ising_budget(full)
    J_star, data, steps, values = ising_data(10, 0.2, b["num_data"], b["data_steps"], seed)
    column = AVG_K.index(10)
    gwg = learn_ising("GWG", K_GRIDS["GWG"][column], data, J_star, seeds=b["seeds"], num_updates=b["num_updates"], seed=seed + 7, progress=progress)[0]["frobenius"]
    rows, curves = [], {}
    for i, method in enumerate(("NCG", "AVG", "PAVG model-agnostic")):
        K = K_GRIDS[method][column]
        mean_error = {}
        for j, m in enumerate(multipliers):
            e = learn_ising(method, K, data, J_star, seeds=b["seeds"], num_updates=b["num_updates"], seed=seed + 100 * i + j, progress=progress, step_scale=m)[0]
            mean_error[m] = float(np.mean(e["frobenius"]))
        base = mean_error[1.0]
        curves[method] = ({m: mean_error[m] / base for m in multipliers}, float(np.mean(gwg)) / base)
        rows.append({"method": f"{method} (K={K}, ε={STEP_SIZES[method]})", **{f"x{m:g}": mean_error[m] / base for m in multipliers},
                     "error at x1": base, "GWG / x1": float(np.mean(gwg)) / base})
    plt = _pyplot()
    fig, axes = plt.subplots(1, 3, figsize=(11, 3.2))
    for ax, (method, (rel, gwg_rel)) in zip(axes, curves.items()):
        ax.plot(list(rel), list(rel.values()), "o-", label=method)
        ax.axhline(gwg_rel, ls="--", color="k", label="GWG")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("relative step size")
        ax.set_ylabel("relative error")
        ax.legend()
    fig.suptitle("Effect of step size on estimation error (Figure 7)")
    fig.tight_layout()
    fig.savefig(out / "figure7.png", dpi=110)
    plt.close(fig)
    return "\n".join([
        "# Rhodes & Gutmann (2022) App. H.1, Figure 7: step-size robustness of PCD on the Ising lattice",
        "",
        f"Error ‖J − J*‖_F (the Table 1 metric; mean over {b['seeds']} seeds, {b['num_updates']} updates) with the step size multiplied by "
        "the column factor, divided by the error at factor 1; settings as rhodes2022-ising. Paper: NCG and PAVG "
        "within ~15% of the original error for factors 0.3-10 and below GWG's error.",
        "",
        "```", format_table(rows), "```", "", "Figure: `figure7.png`.",
    ])


@register_experiment("rhodes2022-step-robustness", "Rhodes & Gutmann 2022 Fig. 7: PCD Ising error vs perturbed step size (NCG, AVG, PAVG)")
def rhodes2022_step_robustness(*, out: Path, full: bool, seed: int, progress: bool) -> str:
    return run_step_robustness(out=Path(out), full=full, seed=seed, progress=progress)


# --------------------------------------------------------------------------- textbook Example 5.9: image denoising

DENOISING_SAMPLERS = {"Gibbs (systematic sweeps)": None, "NCG": 1.0, "AVG": 1.0, "GWG": None}


def grid_bonds(shape) -> np.ndarray:
    """``(num_bonds, 2)`` index pairs of horizontally and vertically adjacent pixels (free boundary)."""
    rows, cols = shape
    index = np.arange(rows * cols).reshape(rows, cols)
    return np.concatenate([
        np.stack([index[:, :-1].ravel(), index[:, 1:].ravel()], 1),
        np.stack([index[:-1, :].ravel(), index[1:, :].ravel()], 1),
    ])


def denoising_logdensity(noisy, coupling: float = 4.0, sigma: float = 1.0):
    """log p(x | y) + const for x ∈ {−1, +1}^{m×n} (flattened): the Ising prior with full
    conditionals p(x_ij | x_−ij) ∝ exp(J x_ij W_ij), W_ij the sum of the 4 neighbours
    (free boundary), i.e. J Σ_bonds x_i x_j, plus the Gaussian likelihood
    −(y − x)²/(2σ²) = x y/σ² + const (x² = 1)."""
    y = np.asarray(noisy, np.float64)
    if y.ndim != 2 or not np.all(np.isfinite(y)):
        raise ValueError(f"the noisy image must be a finite 2-D array, got shape {y.shape}")
    if not (np.isfinite(coupling) and np.isfinite(sigma) and sigma > 0):
        raise ValueError(f"coupling J must be finite and sigma > 0, got J={coupling}, sigma={sigma}")
    bonds = jnp.asarray(grid_bonds(y.shape))
    field = jnp.asarray(y.ravel() / sigma**2, jnp.float32)

    def logdensity(x):
        return coupling * jnp.sum(x[bonds[:, 0]] * x[bonds[:, 1]]) + field @ x

    return logdensity


def builtin_image(size: int = 32) -> np.ndarray:
    """A ±1 test image: a ring and a bar on a background."""
    r, c = np.mgrid[:size, :size] / (size - 1)
    ring = np.abs(np.hypot(r - 0.4, c - 0.4) - 0.25) < 0.08
    bar = (np.abs(r - 0.8) < 0.06) & (c > 0.2) & (c < 0.9)
    return np.where(ring | bar, 1.0, -1.0)


def load_binary_image(path, max_side: int = 64) -> np.ndarray:
    """A PNG (or any PIL-readable image) as ±1: grey level above the mid-range -> +1;
    downsampled so its longer side is at most ``max_side`` pixels."""
    from PIL import Image, UnidentifiedImageError

    path = Path(path)
    if not path.is_file():
        raise ValueError(f"image {str(path)!r} does not exist")
    try:
        img = Image.open(path).convert("L")
    except UnidentifiedImageError:
        raise ValueError(f"{str(path)!r} is not an image file PIL can read") from None
    scale = max(img.size) / max_side
    if scale > 1:
        img = img.resize((max(1, round(img.size[0] / scale)), max(1, round(img.size[1] / scale))))
    grey = np.asarray(img, np.float64)
    if grey.size < 4:
        raise ValueError(f"image {str(path)!r} is too small ({grey.shape})")
    mid = 0.5 * (grey.min() + grey.max())
    return np.where(grey > mid, 1.0, -1.0)


def _kernel_for(name: str, logdensity, space, step_size):
    from gradmc.discrete import avg, gibbs, gwg, ncg

    if name.startswith("Gibbs"):
        return gibbs.as_top_level_api(logdensity, space, scan="systematic")
    if name == "NCG":
        return ncg.as_top_level_api(logdensity, space, step_size)
    if name == "AVG":
        return avg.as_top_level_api(logdensity, space, step_size)
    if name == "GWG":
        return gwg.as_top_level_api(logdensity, space)
    raise ValueError(f"unknown denoising sampler {name!r}")


def posterior_mean(logdensity, d: int, name: str, *, num_steps: int, burn_in: int, key, start, step_size=None, num_chains=None):
    """Mean of x over steps ``burn_in .. num_steps`` of one chain of sampler ``name``
    (a Gibbs "step" is one systematic sweep of d single-site updates); with ``num_chains``,
    the ``(num_chains, d)`` means of independent chains (vmapped) from the same start."""
    space = Spin(d)
    alg = _kernel_for(name, logdensity, space, step_size)
    inner = d if name.startswith("Gibbs") else 1

    def step(state, key):
        state = jax.lax.fori_loop(0, inner, lambda i, st: alg.step(jax.random.fold_in(key, i), st)[0], state)
        return state, state.position

    @jax.jit
    def run(key, start):
        _, xs = jax.lax.scan(step, alg.init(start), jax.random.split(key, num_steps))
        return jnp.mean(xs[burn_in:], axis=0)

    start = jnp.asarray(start, jnp.float32)
    if num_chains is None:
        return np.asarray(run(key, start))
    return np.asarray(jax.vmap(run, in_axes=(0, None))(jax.random.split(key, num_chains), start))


def denoise(image=None, *, out: Path | None = None, coupling: float = 4.0, sigma: float = 1.0, sweeps: int = 10,
            gradient_steps: int = 300, seed: int = 0, samplers=None, name: str = "builtin") -> dict:
    """Textbook Example 5.9 on ``image`` (a path to a PNG, a ±1 array, or None: the built-in
    image): add N(0, σ²) noise, sample p(x | y) with Gibbs sweeps (and the gradient samplers),
    and return posterior means and pixel error rates; with ``out``, write the figure
    ``denoising_<name>.png`` (original, noisy, posterior means)."""
    if image is None:
        clean = builtin_image()
    elif isinstance(image, (str, Path)):
        clean = load_binary_image(image)
        name = Path(image).stem
    else:
        clean = np.asarray(image, np.float64)
        if clean.ndim != 2 or not np.all(np.isin(clean, (-1.0, 1.0))):
            raise ValueError("an image array must be 2-D with entries in {-1, +1}")
    key_noise, key_run = jax.random.split(jax.random.key(seed))
    noisy = clean + sigma * np.asarray(jax.random.normal(key_noise, clean.shape), np.float64)
    logdensity = denoising_logdensity(noisy, coupling, sigma)
    d = clean.size
    start = np.where(noisy > 0, 1.0, -1.0).ravel()
    samplers = samplers or DENOISING_SAMPLERS
    means, errors = {}, {"noisy (sign of y)": float(np.mean(start != clean.ravel()))}
    for i, (label, eps) in enumerate(samplers.items()):
        gibbs_like = label.startswith("Gibbs")
        steps = sweeps if gibbs_like else gradient_steps
        mean = posterior_mean(logdensity, d, label, num_steps=steps, burn_in=steps // 2, key=jax.random.fold_in(key_run, i), start=start, step_size=eps)
        means[label] = mean.reshape(clean.shape)
        errors[label] = float(np.mean(np.where(mean >= 0, 1.0, -1.0) != clean.ravel()))
    figure = None
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        plt = _pyplot()
        panels = {"original": clean, f"noisy (σ={sigma:g})": noisy, **{f"{k}\nposterior mean": v for k, v in means.items()}}
        fig, axes = plt.subplots(1, len(panels), figsize=(2.3 * len(panels), 2.6))
        for ax, (title, img) in zip(axes, panels.items()):
            ax.imshow(img, cmap="gray", vmin=-1, vmax=1)
            ax.set_title(title, fontsize=8)
            ax.axis("off")
        fig.tight_layout()
        figure = out / f"denoising_{name}.png"
        fig.savefig(figure, dpi=110)
        plt.close(fig)
    return {"clean": clean, "noisy": noisy, "means": means, "errors": errors, "figure": figure}


def run_denoising(*, out: Path, full: bool, seed: int, progress: bool, image=None) -> str:
    """Example 5.9 on the built-in image and, when ``image`` (or $GRADMC_DENOISE_IMAGE) names
    a PNG, on that image too."""
    import os

    out.mkdir(parents=True, exist_ok=True)
    images = [None] + [p for p in (image or os.environ.get("GRADMC_DENOISE_IMAGE"),) if p]
    lines = [
        "# Textbook Example 5.9: Ising image denoising",
        "",
        "y = x + σ ε with σ = 1; Ising prior p(x_ij | x_−ij) ∝ exp(J x_ij W_ij), J = 4, free boundary. "
        f"Gibbs: {30 if full else 10} systematic sweeps from sign(y) (the textbook: 10), posterior mean over the second half. "
        "With J = 4 the posterior is stiff: ε ∈ {0.01, …, 3} were tried; NCG works from ε ≈ 0.3 (best 1.0), AVG "
        "(ε in the same range) rejected every proposal. "
        f"ours: NCG (ε = 1), AVG (ε = 1), GWG, {1000 if full else 300} steps each, same start and averaging. "
        "Cells: fraction of pixels whose posterior-mean sign differs from the original.",
        "",
    ]
    for img in images:
        res = denoise(img, out=out, seed=seed, sweeps=30 if full else 10, gradient_steps=1000 if full else 300)
        lines += [f"## {'built-in image' if img is None else img} ({res['clean'].shape[0]}x{res['clean'].shape[1]})", "",
                  "```", format_table([{"method": k, "pixel error": v} for k, v in res["errors"].items()]), "```", "",
                  f"Figure: `{res['figure'].name}` (original, noisy, posterior means).", ""]
    return "\n".join(lines)


@register_experiment("textbook-denoising", "Textbook Example 5.9: Ising-prior image denoising by Gibbs sweeps (and NCG, AVG, GWG)")
def textbook_denoising(*, out: Path, full: bool, seed: int, progress: bool) -> str:
    return run_denoising(out=Path(out), full=full, seed=seed, progress=progress)


# --------------------------------------------------------------------------- Table 2: convolutional EBM

EBM_K_GRIDS = {"NCG": [5, 10, 15, 20], "AVG": [5, 10, 15, 20], "PAVG": [5, 10, 15, 20], "GWG": [5, 10, 15, 20], "Gibbs": [8, 16, 24, 32]}
EBM_STEP_SIZES = {"NCG": 0.2, "AVG": 0.1, "PAVG": 0.1}  # Table 4, {0, 1} quantities like Table 1's (CODINGS)
EBM_CODING = CODINGS["binary"]  # the digits are binary images x; the model sees s = 2x − 1


def _ebm_budget(full: bool) -> dict:
    if full:  # the paper's settings (App. O), for an accelerator
        return dict(gt_updates=10_000, gt_K=50, gt_lr=3e-4, buffer=5000, data_steps=1000, updates=2000, lr=3e-4, seeds=5, columns=4)
    # ~15 min on a 2-core CPU: the cost is batched CNN value+gradient evaluations (≈ 60 ms for a
    # batch of 50 here), about gt_updates·(gt_K + 2) + buffer·data_steps/50 + Σ_cells updates·(K + 2)
    return dict(gt_updates=300, gt_K=5, gt_lr=3e-4, buffer=500, data_steps=100, updates=100, lr=1e-3, seeds=1, columns=2)


def data_marginals(x, clip: float = 0.01) -> np.ndarray:
    """Per-pixel frequencies of the {0, 1} images ``x``, clipped to [clip, 1 − clip]."""
    return np.clip(np.asarray(x, np.float64).mean(axis=0), clip, 1.0 - clip)


def marginal_buffer(p, size: int, seed: int) -> np.ndarray:
    """A PCD buffer of ``size`` images with independent Bernoulli(``p``) pixels (the data's
    marginals): the start Grathwohl et al.'s EBM code gives its persistent chains."""
    return (np.random.default_rng(seed).random((size, len(p))) < p).astype(np.float32)


def _ebm_space():
    from gradmc.learn import ebm

    return EBM_CODING.space(ebm.SIDE**2)


def ebm_ground_truth(b: dict, seed: int, progress: bool):
    """Step i: fit sᵀJs + bᵀs + net(s) to digits16 by PCD with GWG; step ii: the data set =
    the final buffer advanced ``data_steps`` more GWG steps at the fitted model. The chains
    move x ∈ {0, 1}^256 (GWG is the same sampler in either coding). As in Grathwohl et al.'s
    EBM code, the fit starts from the data's marginals: b at their log-odds (b = ½ logit p on
    spins) and the buffer drawn from them; from b = 0 and a uniform buffer the chains lag
    and the network's energies run away. Returns (params, data and digits in {0, 1},
    seconds, the fit's last history record: loss and acceptance)."""
    from gradmc.learn import ebm

    digits = EBM_CODING.from_spin(ebm.load_digits16()[0])
    marginals = data_marginals(digits)
    model, space = EBM_CODING.model(ebm.logdensity), _ebm_space()
    params = ebm.init_params(jax.random.key(seed))
    params = params._replace(b=jnp.asarray(0.5 * np.log(marginals / (1.0 - marginals)), jnp.float32))
    mask = ebm.EBMParams(False, False, jax.tree.map(lambda _: True, params.net))
    tx = optax.adamw(b["gt_lr"], weight_decay=1e-4, mask=mask)
    learner = pcd.PCD(model, space, pcd.kernel("gwg"), b["gt_K"], batch_size=50, buffer_size=b["buffer"], optimizer=tx)
    res = pcd.fit(learner, params, digits, key=jax.random.key(seed + 1), num_updates=b["gt_updates"], progress=progress,
                  buffer=marginal_buffer(marginals, b["buffer"], seed), desc="EBM ground truth (GWG)")
    truth = res.params
    sampler = pcd.kernel("gwg")
    logdensity = lambda x: model(truth, x)  # noqa: E731

    @jax.jit
    def advance(key, positions):
        states = jax.vmap(lambda x: sampler.init(x, logdensity))(positions)

        def one(states, key):
            keys = jax.random.split(key, positions.shape[0])
            return jax.vmap(lambda k, c: sampler.step(k, c, logdensity, space, **sampler.params_at(None)))(keys, states)[0], None

        return jax.lax.scan(one, states, jax.random.split(key, b["data_steps"]))[0].position

    chunks = [advance(k, chunk) for k, chunk in zip(jax.random.split(jax.random.key(seed + 2), 20), np.array_split(res.buffer, 20))]
    return truth, np.concatenate([np.asarray(c) for c in chunks]), digits, res.seconds, res.history[-1]


def learn_ebm_J(method: str, K: int, data, truth, b: dict, seed: int, progress: bool):
    """Step iii: re-estimate J only (b*, net* fixed) by PCD with ``method`` (:func:`method_kernel`,
    Table 4's ε, PAVG's M = covariance of the {0, 1} ``data``); returns (:func:`errors` per seed
    and ``start_per_site``, the error of the starting J,
    final buffers (seeds, buffer, 256) in {0, 1}, the acceptance rate of the last update per seed).
    Each run's buffer starts from the data's marginals (:func:`marginal_buffer`)."""
    J_star = symmetric(truth.J)
    net, bias = truth.net, truth.b

    def logdensity(G, s):
        return s @ symmetric(G) @ s + bias @ s + net(s)

    kernel = method_kernel(method, EBM_STEP_SIZES.get(method), data)
    learner = pcd.PCD(EBM_CODING.model(logdensity), _ebm_space(), kernel, K, batch_size=50, buffer_size=b["buffer"],
                      optimizer=optax.adam(b["lr"], eps=1e-7), regulariser=l1_penalty(0.01))
    # a stream of its own: key(seed) is also the ground truth's, whose initial J would be G0
    key_params, key_run = jax.random.split(jax.random.fold_in(jax.random.key(seed), 1))
    G0 = 0.01 * jax.random.normal(key_params, (b["seeds"],) + J_star.shape)
    marginals = data_marginals(data)
    buffers = np.stack([marginal_buffer(marginals, b["buffer"], seed + 7919 * r) for r in range(b["seeds"])])
    res = pcd.fit(learner, G0, data, key=key_run, num_updates=b["updates"], num_runs=b["seeds"], buffer=buffers, progress=progress,
                  desc=f"EBM {method} K={K}")
    errs = {k: np.asarray(v) for k, v in errors(symmetric(res.params), J_star).items()}
    errs["start_per_site"] = np.asarray(errors(symmetric(G0), J_star)["per_site"])
    return errs, np.asarray(res.buffer), np.asarray(res.history[-1]["acceptance"])


def run_ebm(*, out: Path, full: bool, seed: int, progress: bool, budget: dict | None = None, methods=None) -> str:
    """Table 2, Figure 13 (error vs MMD / marginal / covariance error) and Figure 15 (samples)."""
    from gradmc.diagnostics.mmd import mmd

    out.mkdir(parents=True, exist_ok=True)
    b = budget or _ebm_budget(full)
    t0 = time.perf_counter()
    truth, data, digits, gt_seconds, gt_last = ebm_ground_truth(b, seed, progress)
    data_mean, data_cov = data.mean(0), np.cov(data, rowvar=False)
    rng = np.random.default_rng(seed)
    rows, frobenius_rows, points, samples, timing, accept_rows, starts = [], [], [], {}, [], [], []
    for i, method in enumerate(methods or EBM_K_GRIDS):
        label = f"{method} (K={','.join(map(str, EBM_K_GRIDS[method][: b['columns']]))})"
        row, paper, frobenius_row = {"method": label}, {"method": "  paper"}, {"method": label}
        accept = {"method": method}
        for j, K in enumerate(EBM_K_GRIDS[method][: b["columns"]]):
            t_cell = time.perf_counter()
            errs, buffers, acceptance = learn_ebm_J(method, K, data, truth, b, seed + 100 * i + j, progress)
            timing.append(time.perf_counter() - t_cell)
            col = f"K={EBM_K_GRIDS['AVG'][j]}"
            row[col], frobenius_row[col] = _seeds_cell(errs["per_site"]), _seeds_cell(errs["frobenius"])
            starts.append(float(np.mean(errs["start_per_site"])))
            paper[col] = _cell(*PUBLISHED_TABLE2[method][j])
            accept[col] = f"{float(np.mean(acceptance)):.3f}"
            buf = buffers[0]
            sub = rng.choice(len(buf), min(1000, len(buf)), replace=False)
            ref = rng.choice(len(data), min(1000, len(data)), replace=False)
            points.append((float(errs["frobenius"].mean()), mmd(buf[sub], data[ref]), float(np.mean(np.abs(buf.mean(0) - data_mean))),
                           float(np.linalg.norm(np.cov(buf, rowvar=False) - data_cov))))
            samples[(method, K)] = buf[:8]
        rows += [row, paper]
        frobenius_rows.append(frobenius_row)
        accept_rows.append(accept)
    points = np.asarray(points)
    r2 = [float(np.corrcoef(points[:, 0], points[:, m])[0, 1] ** 2) for m in (1, 2, 3)]
    plt = _pyplot()
    fig, axes = plt.subplots(1, 3, figsize=(11, 3.2))
    for ax, m, name, r in zip(axes, (1, 2, 3), ("MMD", "marginal error", "covariance error"), r2):
        ax.scatter(points[:, 0], points[:, m])
        ax.set_xlabel("parameter error ‖J − J*‖_F")
        ax.set_ylabel(name)
        ax.set_title(f"R² = {r:.3f}")
    fig.tight_layout()
    fig.savefig(out / "figure13.png", dpi=110)
    plt.close(fig)
    keys = list(samples)
    fig, axes = plt.subplots(len(keys) + 2, 8, figsize=(8, 1.05 * (len(keys) + 2)))
    for r, (label, imgs) in enumerate([("digits16", digits[:8]), ("ground-truth EBM", data[:8])] + [(f"{m} K={k}", samples[(m, k)]) for m, k in keys]):
        for c in range(8):
            axes[r, c].imshow(imgs[c].reshape(16, 16), cmap="gray", vmin=0, vmax=1)
            axes[r, c].axis("off")
        axes[r, 0].set_title(label, fontsize=6, loc="left")
    fig.tight_layout()
    fig.savefig(out / "figure15.png", dpi=100)
    plt.close(fig)
    scale = (
        "the paper's settings" if full else
        f"scaled down for a 2-core CPU: ground truth {b['gt_updates']} updates with GWG K = {b['gt_K']} (paper 10,000 with K = 50), "
        f"lr {b['gt_lr']} (paper 3e-4), buffer {b['buffer']} (paper 5000); data set = the {b['buffer']} buffer chains advanced "
        f"{b['data_steps']} more GWG steps; re-estimation {b['updates']} updates (paper 2000) with lr {b['lr']}, {b['seeds']} seed(s) (paper 5), "
        f"columns K = {', '.join(map(str, EBM_K_GRIDS['AVG'][: b['columns']]))} (paper 5, 10, 15, 20). At {100 * b['updates'] / 2000:g}% of the paper's "
        "re-estimation updates the cells compare the samplers' early progress with each other, not with the published errors"
    )
    return "\n".join([
        "# Rhodes & Gutmann (2022) §5.4, Table 2: convolutional EBM on digits16",
        "",
        "Model sᵀJs + bᵀs + net(s) as the authors coded it (§5.4 writes ½sᵀJs; experiments.md: the code produced the published numbers), net the 7-layer SiLU CNN of App. O (Equinox) with a linear 128→1 read-out; "
        "data `digits16` (5000 16x16 binarised digits; the paper used USPS). Ground truth by PCD with GWG "
        "(AdamW, weight decay 1e-4 on the network); re-estimation of J only (b*, net* fixed) by PCD with each sampler, "
        "L1 0.01, batch 50. As in the authors' code (and Table 1), every sampler moves the binary image x ∈ {0, 1}^256 and "
        "the model sees s = 2x − 1, so Table 4's step sizes NCG 0.2, AVG 0.1, PAVG 0.1 are {0, 1} quantities (on spins "
        "the same proposals need 4ε) and PAVG (model-agnostic) is preconditioned by the covariance of the {0, 1} data "
        "set; GWG and Gibbs are the same samplers in either coding. "
        f"Budget: {scale}. Columns are AVG's K; Gibbs uses [8, 16, 24, 32].",
        "",
        f"Ground truth at the end of its fit: contrastive loss mean f(negatives) − mean f(data) = {float(gt_last['loss']):.3g}, "
        f"GWG acceptance {float(np.mean(gt_last['acceptance'])):.2f}; mean pixel of the data set drawn from it "
        f"{float(np.mean(data)):.3f} (digits16: {float(np.mean(digits)):.3f}); a loss of large magnitude, or a pixel mean "
        "far from the digits', would mean the fit ran away (its chains lagging the model) rather than reaching a "
        "digit-like model. The fit and every re-estimation start from the data's marginals (b at their log-odds, buffers "
        "drawn from them), as Grathwohl et al.'s EBM code starts its chains; from b = 0 and uniform buffers the quick "
        "fit's energies run away within 100 updates.",
        "",
        "## ‖J − J*‖_F/√d (d = 256; the scale Table 1's published cells match, see rhodes2022-ising), mean (sd) over seeds",
        "", "```", format_table(rows), "```", "",
        f"At the start of re-estimation (J = (G0 + G0ᵀ)/2, G0 ~ 0.01·N(0, 1)) this error is {min(starts):.3f}–{max(starts):.3f}.", "",
        "## ‖J − J*‖_F, mean (sd) over seeds", "", "```", format_table(frobenius_rows), "```", "",
        "Acceptance rate of the last PCD update (mean over chains and K steps; Gibbs and GWG included):", "",
        "```", format_table(accept_rows), "```", "",
        f"Figure 13 (`figure13.png`): R² of parameter error against MMD (exp-Hamming) {r2[0]:.3f}, marginal error {r2[1]:.3f}, "
        f"covariance error {r2[2]:.3f} over {len(points)} cells (paper 0.715, 0.698, 0.953 over 20); samples compared: {min(1000, b['buffer'])} of each method's final "
        f"buffer (seed 0) against {min(1000, b['buffer'])} of the ground-truth data set, both in {{0, 1}} (marginal and covariance errors are half and "
        "a quarter of their spin values). Figure 15 (`figure15.png`): buffer samples.",
        "",
        f"Wall time {time.perf_counter() - t0:.0f} s (ground truth {gt_seconds:.0f} s; {len(timing)} re-estimation cells "
        f"{sum(timing):.0f} s, compilation included).",
    ])


@register_experiment("rhodes2022-ebm", "Rhodes & Gutmann 2022 Table 2: convolutional EBM on digits16, J re-estimated by PCD with each sampler")
def rhodes2022_ebm(*, out: Path, full: bool, seed: int, progress: bool) -> str:
    return run_ebm(out=Path(out), full=full, seed=seed, progress=progress)
