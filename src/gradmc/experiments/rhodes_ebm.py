"""Rhodes & Gutmann (2022) §5.4, Table 2: ``gradmc reproduce rhodes2022-ebm``.

A ground-truth sᵀJs + bᵀs + f_θ(s) EBM on digits16 (:mod:`gradmc.learn.ebm`; sᵀJs as in
the authors' code, §5.4 writes ½sᵀJs), then the re-estimation of J by PCD with each sampler,
in the same {0, 1} coding as Table 1 (:data:`~gradmc.experiments.rhodes_learning.CODINGS`);
Figure 13 (parameter error against sample-quality metrics) and Figure 15 (samples).

The network needs equinox (``pip install -e '.[experiments]'`` in the repository), imported only when the
experiment runs.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from gradmc.experiments.common import fenced, format_table, mean_sd_cell, save_figure, seeds_cell, subplots
from gradmc.experiments.rhodes_learning import CODINGS, adam_l1_learner, errors, method_kernel, symmetric
from gradmc.learn import pcd
from gradmc.registry import register_experiment

__all__ = [
    "PUBLISHED_TABLE2",
    "EBM_K_GRIDS",
    "EBM_STEP_SIZES",
    "ebm_budget",
    "data_marginals",
    "marginal_buffer",
    "ebm_ground_truth",
    "learn_ebm_J",
    "EBMResult",
    "ebm_experiment",
    "run_ebm",
]

# Table 2: columns K = 5, 10, 15, 20 (AVG units).
PUBLISHED_TABLE2 = {
    "NCG": [(0.128, 0.001), (0.116, 0.0002), (0.112, 0.0009), (0.112, 0.0004)],
    "AVG": [(3.310, 0.078), (2.599, 0.051), (0.496, 0.119), (0.114, 0.0006)],
    "PAVG": [(3.212, 0.079), (0.117, 0.0004), (0.114, 0.0006), (0.112, 0.0007)],
    "GWG": [(0.732, 0.013), (0.156, 0.003), (0.120, 0.001), (0.114, 0.0005)],
    "Gibbs": [(3.121, 0.146), (2.270, 0.067), (1.637, 0.007), (1.204, 0.008)],
}

EBM_K_GRIDS = {**{m: [5, 10, 15, 20] for m in ("NCG", "AVG", "PAVG", "GWG")}, "Gibbs": [8, 16, 24, 32]}
EBM_STEP_SIZES = {"NCG": 0.2, "AVG": 0.1, "PAVG": 0.1}  # Table 4, {0, 1} quantities like Table 1's (CODINGS)
EBM_CODING = CODINGS["binary"]  # the digits are binary images x; the model sees s = 2x − 1


def ebm_budget(full: bool) -> dict:
    """The budget of the EBM experiment.

    Parameters
    ----------
    full : bool
        The paper's settings (App. O; for an accelerator) instead of the quick default.
    """
    if full:  # the paper's settings (App. O), for an accelerator
        return dict(
            gt_updates=10_000,
            gt_K=50,
            gt_lr=3e-4,
            buffer=5000,
            data_steps=1000,
            updates=2000,
            lr=3e-4,
            seeds=5,
            columns=4,
        )
    # ~15 min on a 2-core CPU: the cost is batched CNN value+gradient evaluations (≈ 60 ms for a
    # batch of 50 here), about gt_updates·(gt_K + 2) + buffer·data_steps/50 + Σ_cells updates·(K + 2)
    return dict(
        gt_updates=300, gt_K=5, gt_lr=3e-4, buffer=500, data_steps=100, updates=100, lr=1e-3, seeds=1, columns=2
    )


def data_marginals(x, clip: float = 0.01) -> np.ndarray:
    """Per-pixel frequencies of the {0, 1} images ``x``, clipped to [clip, 1 − clip].

    Parameters
    ----------
    x : array_like
        Images, shape ``(n, pixels)``.
    clip : float
        Clip to [clip, 1 − clip].
    """
    return np.clip(np.asarray(x, np.float64).mean(axis=0), clip, 1.0 - clip)


def marginal_buffer(p, size: int, seed: int) -> np.ndarray:
    """A PCD buffer of ``size`` images with independent Bernoulli(``p``) pixels (the data's
    marginals): the start Grathwohl et al.'s EBM code gives its persistent chains.

    Parameters
    ----------
    p : array_like
        Per-pixel probabilities.
    size : int
        Number of images.
    seed : int
        Seed of NumPy's generator.
    """
    return (np.random.default_rng(seed).random((size, len(p))) < p).astype(np.float32)


def _ebm_space():
    from gradmc.learn import ebm

    return EBM_CODING.space(ebm.SIDE**2)


def ebm_ground_truth(b: dict, seed: int, progress: bool):
    """Steps i and ii: the ground-truth EBM and its data set.

    Step i fits sᵀJs + bᵀs + net(s) to digits16 by PCD with GWG; step ii: the data set =
    the final buffer advanced ``data_steps`` more GWG steps at the fitted model. The chains
    move x ∈ {0, 1}^256 (GWG is the same sampler in either coding). As in Grathwohl et al.'s
    EBM code, the fit starts from the data's marginals: b at their log-odds (b = ½ logit p on
    spins) and the buffer drawn from them; from b = 0 and a uniform buffer the chains lag
    and the network's energies run away.

    Parameters
    ----------
    b : dict
        The budget (:func:`ebm_budget`).
    seed : int
        Seed.
    progress : bool
        Show a progress bar.

    Returns
    -------
    tuple
        (params, data and digits in {0, 1}, seconds, the fit's last history record: loss
        and acceptance).
    """
    from gradmc.learn import ebm

    digits = EBM_CODING.from_spin(ebm.load_digits16()[0])
    marginals = data_marginals(digits)
    model, space = EBM_CODING.model(ebm.logdensity), _ebm_space()
    params = ebm.init_params(jax.random.key(seed))
    params = params._replace(b=jnp.asarray(0.5 * np.log(marginals / (1.0 - marginals)), jnp.float32))
    mask = ebm.EBMParams(False, False, jax.tree.map(lambda _: True, params.net))
    tx = optax.adamw(b["gt_lr"], weight_decay=1e-4, mask=mask)
    learner = pcd.PCD(model, space, pcd.kernel("gwg"), b["gt_K"], batch_size=50, buffer_size=b["buffer"], optimizer=tx)
    res = pcd.fit(
        learner,
        params,
        digits,
        key=jax.random.key(seed + 1),
        num_updates=b["gt_updates"],
        progress=progress,
        buffer=marginal_buffer(marginals, b["buffer"], seed),
        desc="EBM ground truth (GWG)",
    )
    truth = res.params
    sampler = pcd.kernel("gwg")
    logdensity = lambda x: model(truth, x)  # noqa: E731

    @jax.jit
    def advance(key, positions):
        states = jax.vmap(lambda x: sampler.init(x, logdensity))(positions)

        def one(states, key):
            keys = jax.random.split(key, positions.shape[0])
            return jax.vmap(lambda k, c: sampler.step(k, c, logdensity, space, **sampler.params_at(None)))(
                keys, states
            )[0], None

        return jax.lax.scan(one, states, jax.random.split(key, b["data_steps"]))[0].position

    keys = jax.random.split(jax.random.key(seed + 2), 20)
    chunks = [advance(k, chunk) for k, chunk in zip(keys, np.array_split(res.buffer, 20), strict=False)]
    return truth, np.concatenate([np.asarray(c) for c in chunks]), digits, res.seconds, res.history[-1]


def learn_ebm_J(method: str, K: int, data, truth, b: dict, seed: int, progress: bool):
    """Step iii: re-estimate J only (b*, net* fixed) by PCD with ``method``.

    The kernel is :func:`~gradmc.experiments.rhodes_learning.method_kernel` with Table 4's
    ε and PAVG's M = covariance of the {0, 1} ``data``; each run's buffer starts from the
    data's marginals (:func:`marginal_buffer`).

    Parameters
    ----------
    method : str
        A key of :data:`EBM_K_GRIDS`.
    K : int
        Sampler steps per update.
    data : array_like
        The ground truth's data set in {0, 1}.
    truth : EBMParams
        The ground truth.
    b : dict
        The budget (:func:`ebm_budget`).
    seed : int
        Seed.
    progress : bool
        Show a progress bar.

    Returns
    -------
    tuple
        (:func:`~gradmc.experiments.rhodes_learning.errors` per seed and ``start_per_site``,
        the error of the starting J; final buffers (seeds, buffer, 256) in {0, 1}; the
        acceptance rate of the last update per seed).
    """
    J_star = symmetric(truth.J)
    net, bias = truth.net, truth.b

    def logdensity(G, s):
        return s @ symmetric(G) @ s + bias @ s + net(s)

    kernel = method_kernel(method, EBM_STEP_SIZES.get(method), data)
    learner = adam_l1_learner(EBM_CODING.model(logdensity), _ebm_space(), kernel, K, 50, b["buffer"], b["lr"], 0.01)
    # a stream of its own: key(seed) is also the ground truth's, whose initial J would be G0
    key_params, key_run = jax.random.split(jax.random.fold_in(jax.random.key(seed), 1))
    G0 = 0.01 * jax.random.normal(key_params, (b["seeds"],) + J_star.shape)
    marginals = data_marginals(data)
    buffers = np.stack([marginal_buffer(marginals, b["buffer"], seed + 7919 * r) for r in range(b["seeds"])])
    res = pcd.fit(
        learner,
        G0,
        data,
        key=key_run,
        num_updates=b["updates"],
        num_runs=b["seeds"],
        buffer=buffers,
        progress=progress,
        desc=f"EBM {method} K={K}",
    )
    errs = {k: np.asarray(v) for k, v in errors(symmetric(res.params), J_star).items()}
    errs["start_per_site"] = np.asarray(errors(symmetric(G0), J_star)["per_site"])
    return errs, np.asarray(res.buffer), np.asarray(res.history[-1]["acceptance"])


class EBMResult(NamedTuple):
    """The numbers of :func:`ebm_experiment`.

    ``budget``; ``rows`` (‖J − J*‖_F/√d, each method's row followed by the paper's),
    ``frobenius_rows`` (‖J − J*‖_F) and ``accept_rows`` (acceptance of the last update):
    mean (sd) over seeds per column; ``cells``: ``(method, K) ->`` errors per seed;
    ``starts``: the starting J's error per cell; ``points``: per cell (‖J − J*‖_F, MMD,
    marginal error, covariance error) of the final buffer against the data; ``r2``: R² of
    the parameter error against each of the three; ``samples``: ``(method, K) ->`` 8 buffer
    images; ``digits`` and ``data`` (the first 8 images of each); ``data_mean_pixel``,
    ``digits_mean_pixel``; the ground truth's last fit record ``ground_truth`` (loss and
    acceptance) and seconds; the cells' seconds and the total.
    """

    budget: dict
    rows: list
    frobenius_rows: list
    accept_rows: list
    cells: dict
    starts: list
    points: np.ndarray
    r2: list
    samples: dict
    digits: np.ndarray
    data: np.ndarray
    data_mean_pixel: float
    digits_mean_pixel: float
    ground_truth: dict
    ground_truth_seconds: float
    cell_seconds: list
    seconds: float


def ebm_experiment(*, full: bool, seed: int, progress: bool, budget: dict | None = None, methods=None) -> EBMResult:
    """Table 2 and the numbers of Figures 13 and 15.

    Parameters
    ----------
    full : bool
        The paper's settings (:func:`ebm_budget`).
    seed : int
        Seed of the ground truth and of every cell.
    progress : bool
        Show progress bars.
    budget : dict, optional
        Overrides :func:`ebm_budget`.
    methods : sequence of str, optional
        A subset of :data:`EBM_K_GRIDS`.
    """
    from gradmc.diagnostics.mmd import mmd

    b = budget or ebm_budget(full)
    t0 = time.perf_counter()
    truth, data, digits, gt_seconds, gt_last = ebm_ground_truth(b, seed, progress)
    data_mean, data_cov = data.mean(0), np.cov(data, rowvar=False)
    rng = np.random.default_rng(seed)
    rows, frobenius_rows, points, samples, timing, accept_rows, starts, cells = [], [], [], {}, [], [], [], {}
    for i, method in enumerate(methods or EBM_K_GRIDS):
        label = f"{method} (K={','.join(map(str, EBM_K_GRIDS[method][: b['columns']]))})"
        row, paper, frobenius_row = {"method": label}, {"method": "  paper"}, {"method": label}
        accept = {"method": method}
        for j, K in enumerate(EBM_K_GRIDS[method][: b["columns"]]):
            t_cell = time.perf_counter()
            errs, buffers, acceptance = learn_ebm_J(method, K, data, truth, b, seed + 100 * i + j, progress)
            timing.append(time.perf_counter() - t_cell)
            cells[method, K] = errs
            col = f"K={EBM_K_GRIDS['AVG'][j]}"
            row[col], frobenius_row[col] = seeds_cell(errs["per_site"]), seeds_cell(errs["frobenius"])
            starts.append(float(np.mean(errs["start_per_site"])))
            paper[col] = mean_sd_cell(*PUBLISHED_TABLE2[method][j], sd_fmt=".3g")
            accept[col] = f"{float(np.mean(acceptance)):.3f}"
            buf = buffers[0]
            sub = rng.choice(len(buf), min(1000, len(buf)), replace=False)
            ref = rng.choice(len(data), min(1000, len(data)), replace=False)
            marginal_error = float(np.mean(np.abs(buf.mean(0) - data_mean)))
            cov_error = float(np.linalg.norm(np.cov(buf, rowvar=False) - data_cov))
            points.append((float(errs["frobenius"].mean()), mmd(buf[sub], data[ref]), marginal_error, cov_error))
            samples[(method, K)] = buf[:8]
        rows += [row, paper]
        frobenius_rows.append(frobenius_row)
        accept_rows.append(accept)
    points = np.asarray(points)
    r2 = [float(np.corrcoef(points[:, 0], points[:, m])[0, 1] ** 2) for m in (1, 2, 3)]
    return EBMResult(
        b,
        rows,
        frobenius_rows,
        accept_rows,
        cells,
        starts,
        points,
        r2,
        samples,
        np.asarray(digits[:8]),
        np.asarray(data[:8]),
        float(np.mean(data)),
        float(np.mean(digits)),
        gt_last,
        gt_seconds,
        timing,
        time.perf_counter() - t0,
    )


def _figures(r: EBMResult, out: Path) -> None:
    """Figure 13 (parameter error against MMD, marginal and covariance error) and Figure 15 (samples)."""
    fig, axes = subplots(1, 3, figsize=(11, 3.2))
    for ax, m, name, r2 in zip(axes, (1, 2, 3), ("MMD", "marginal error", "covariance error"), r.r2, strict=False):
        ax.scatter(r.points[:, 0], r.points[:, m])
        ax.set(xlabel="parameter error ‖J − J*‖_F", ylabel=name, title=f"R² = {r2:.3f}")
    save_figure(fig, out / "figure13.png")
    keys = list(r.samples)
    fig, axes = subplots(len(keys) + 2, 8, figsize=(8, 1.05 * (len(keys) + 2)))
    panels = [("digits16", r.digits), ("ground-truth EBM", r.data)] + [
        (f"{m} K={k}", r.samples[(m, k)]) for m, k in keys
    ]
    for row, (label, imgs) in enumerate(panels):
        for c in range(8):
            axes[row, c].imshow(imgs[c].reshape(16, 16), cmap="gray", vmin=0, vmax=1)
            axes[row, c].axis("off")
        axes[row, 0].set_title(label, fontsize=6, loc="left")
    save_figure(fig, out / "figure15.png", dpi=100)


def run_ebm(*, out: Path, full: bool, seed: int, progress: bool, budget: dict | None = None, methods=None) -> str:
    """Table 2, Figure 13 (error vs MMD / marginal / covariance error) and Figure 15 (samples),
    as Markdown; the figures are written into ``out``.

    Parameters
    ----------
    out : Path
        Output folder.
    full, seed, progress, budget, methods
        As :func:`ebm_experiment`.
    """
    out.mkdir(parents=True, exist_ok=True)
    r = ebm_experiment(full=full, seed=seed, progress=progress, budget=budget, methods=methods)
    b = r.budget
    _figures(r, out)
    scale = (
        "the paper's settings"
        if full
        else f"scaled down for a 2-core CPU: ground truth {b['gt_updates']} updates with GWG K = {b['gt_K']} "
        f"(paper 10,000 with K = 50), lr {b['gt_lr']} (paper 3e-4), buffer {b['buffer']} (paper 5000); "
        f"data set = the {b['buffer']} buffer chains advanced {b['data_steps']} more GWG steps; re-estimation "
        f"{b['updates']} updates (paper 2000) with lr {b['lr']}, {b['seeds']} seed(s) (paper 5), "
        f"columns K = {', '.join(map(str, EBM_K_GRIDS['AVG'][: b['columns']]))} (paper 5, 10, 15, 20). At "
        f"{100 * b['updates'] / 2000:g}% of the paper's re-estimation updates the cells compare the samplers' "
        "early progress with each other, not with the published errors"
    )
    gt = r.ground_truth
    return "\n\n".join(
        [
            "# Rhodes & Gutmann (2022) §5.4, Table 2: convolutional EBM on digits16",
            "Model sᵀJs + bᵀs + net(s) as in the authors' code (§5.4 writes ½sᵀJs; docs/experiments.md: the code "
            "produced the published numbers), net the 7-layer SiLU CNN of App. O (Equinox) with a linear 128→1 "
            "read-out; data `digits16` (5000 16x16 binarised digits; the paper used USPS). Ground truth by PCD "
            "with GWG (AdamW, weight decay 1e-4 on the network); re-estimation of J only (b*, net* fixed) by PCD "
            "with each sampler, L1 0.01, batch 50. As in the authors' code (and Table 1), every sampler moves "
            "the binary image x ∈ {0, 1}^256 and the model sees s = 2x − 1, so Table 4's step sizes NCG 0.2, "
            "AVG 0.1, PAVG 0.1 are {0, 1} quantities (on spins the same proposals need 4ε) and PAVG (model-agnostic) "
            "is preconditioned by the covariance of the {0, 1} data set; GWG and Gibbs are the same samplers "
            f"in either coding. Budget: {scale}. Columns are AVG's K; Gibbs uses [8, 16, 24, 32].",
            "Ground truth at the end of its fit: contrastive loss mean f(negatives) − mean f(data) = "
            f"{float(gt['loss']):.3g}, GWG acceptance {float(np.mean(gt['acceptance'])):.2f}; mean pixel of the "
            f"data set drawn from it {r.data_mean_pixel:.3f} (digits16: {r.digits_mean_pixel:.3f}); a loss of "
            "large magnitude, or a pixel mean far from the digits', would mean the fit ran away (its chains "
            "lagging the model) rather than reaching a digit-like model. The fit and every re-estimation start "
            "from the data's marginals (b at their log-odds, buffers drawn from them), as Grathwohl et al.'s "
            "EBM code starts its chains; from b = 0 and uniform buffers the quick fit's energies run away "
            "within 100 updates.",
            "## ‖J − J*‖_F/√d (d = 256; the scale Table 1's published cells match, see rhodes2022-ising), mean "
            "(sd) over seeds",
            fenced(format_table(r.rows)),
            "At the start of re-estimation (J = (G0 + G0ᵀ)/2, G0 ~ 0.01·N(0, 1)) this error is "
            f"{min(r.starts):.3f}–{max(r.starts):.3f}.",
            "## ‖J − J*‖_F, mean (sd) over seeds",
            fenced(format_table(r.frobenius_rows)),
            "Acceptance rate of the last PCD update (mean over chains and K steps; Gibbs and GWG included):",
            fenced(format_table(r.accept_rows)),
            f"Figure 13 (`figure13.png`): R² of parameter error against MMD (exp-Hamming) {r.r2[0]:.3f}, "
            f"marginal error {r.r2[1]:.3f}, covariance error {r.r2[2]:.3f} over {len(r.points)} cells "
            f"(paper 0.715, 0.698, 0.953 over 20); samples compared: {min(1000, b['buffer'])} of each method's final "
            f"buffer (seed 0) against {min(1000, b['buffer'])} of the ground-truth data set, both in {{0, 1}} "
            "(marginal and covariance errors are half and a quarter of their spin values). Figure 15 "
            "(`figure15.png`): buffer samples.",
            f"Wall time {r.seconds:.0f} s (ground truth {r.ground_truth_seconds:.0f} s; {len(r.cell_seconds)} "
            f"re-estimation cells {sum(r.cell_seconds):.0f} s, compilation included).",
        ]
    )


register_experiment(
    "rhodes2022-ebm",
    "Rhodes & Gutmann 2022 Table 2: convolutional EBM on digits16, J re-estimated by PCD with each sampler",
)(run_ebm)
