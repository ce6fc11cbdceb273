"""Tables and matplotlib figures from traces: what ``gradmc sample`` and ``compare`` show.

Plain-text tables (no extra dependency) and PNG figures written with the Agg backend, so
everything works on a machine without a display.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from gradmc.base import JOINT, PAIRS
from gradmc.compare import COMPARE_COLUMNS, COMPARE_LEGEND, COMPARE_TITLES, RANKING
from gradmc.composed import JOINT_MOVES
from gradmc.diagnostics._common import coord_names

__all__ = [
    "format_value_frequencies",
    "format_params",
    "format_table",
    "format_compare",
    "pyplot",
    "save_figure",
    "MAX_RANKED",
    "named_coordinates",
    "worst_first",
    "ACCEPTANCE_WINDOW",
    "trace_panels",
    "plot_trace",
    "plot_pairs",
    "WARNED",
    "plot_compare_bars",
    "plot_draws_over_density",
]


def _cell(value) -> str:
    if isinstance(value, (float, np.floating)):
        if not math.isfinite(value):
            return "-" if math.isnan(value) else str(value)
        if value != 0 and (abs(value) >= 1e5 or abs(value) < 1e-3):
            return f"{value:.3g}"
        return f"{value:.4g}" if abs(value) < 100 else f"{value:.1f}"
    return str(value)


def format_value_frequencies(posterior: dict, max_values: int = 5, r_hat=None, ess=None, max_lines: int = 10) -> str:
    """How often each value of the integer-valued (discrete) variables was drawn, one line
    each: a scalar's most frequent values, an array's values over all its entries; with
    ``r_hat`` and ``ess``, the largest R-hat and smallest bulk ESS of its entries. Of more than
    ``max_lines`` variables (a model written one site per time step), those with the largest
    R-hat are shown, in the model's order, and one line sums up the rest.

    Parameters
    ----------
    posterior : dict of str to ndarray
        Named draws ``(chain, draw, *shape)`` (:meth:`gradmc.Trace.posterior`).
    max_values : int
        How many of the most frequent values a line shows.
    r_hat, ess : array_like, optional
        R-hat and bulk ESS of the coordinates in :func:`named_coordinates`' order (those
        past their length are left out).
    max_lines : int
        How many variables are shown at most.
    """
    lines, worst, least, offset = [], [], [], 0

    def mixing(most_r_hat, least_ess, bounds: bool) -> str:
        at_most, at_least = ("at most ", "at least ") if bounds else ("", "")
        return f"R-hat {at_most}{most_r_hat:.3f}, bulk ESS {at_least}{least_ess:.0f}"

    for name, value in posterior.items():
        value = np.asarray(value)
        size = int(np.prod(value.shape[2:]))
        entries, offset = slice(offset, offset + size), offset + size
        if not np.issubdtype(value.dtype, np.integer):
            continue
        values, counts = np.unique(value, return_counts=True)
        order = np.argsort(-counts, kind="stable")[:max_values]
        shares = ", ".join(f"{values[i]} {100 * counts[i] / value.size:.1f}%" for i in order)
        label = name if value.ndim == 2 else f"{name} ({size} entries pooled)"
        more = f" ({len(order)} most frequent of {values.size} values)" if values.size > len(order) else ""
        mixed, worst_here, least_here = "", np.nan, np.nan
        if r_hat is not None and ess is not None:
            rhats, esses = np.asarray(r_hat, np.float64)[entries], np.asarray(ess, np.float64)[entries]
            if rhats.size and not np.all(np.isnan(rhats)) and not np.all(np.isnan(esses)):
                worst_here, least_here = np.nanmax(rhats), np.nanmin(esses)
                mixed = "; " + mixing(worst_here, least_here, value.ndim > 2)
        lines.append(f"  {label}: {shares}{more}{mixed}")
        worst.append(worst_here)
        least.append(least_here)
    if len(lines) > max_lines:
        worst_all, least_all = np.asarray(worst), np.asarray(least)
        ranked = np.argsort(-np.nan_to_num(worst_all, nan=-np.inf), kind="stable")
        shown, rest = np.sort(ranked[:max_lines]), ranked[max_lines:]
        summary = f"  and {rest.size} more"
        if not np.all(np.isnan(worst_all[rest])):
            summary += ": " + mixing(np.nanmax(worst_all[rest]), np.nanmin(least_all[rest]), True)
        lines = [lines[i] for i in shown] + [summary]
    heading = "values drawn of the discrete variables" + (
        f" ({max_lines} of {len(worst)} with the largest R-hat):" if len(worst) > max_lines else ":"
    )
    return "\n".join([heading, *lines]) if lines else ""


def format_params(params) -> str:
    """One line on what a run's warm-up learned (``trace.params``), per parameter: a value per
    chain as its median and range over chains; a switch only when it is on; a matrix as its shape and condition number
    (``(zero)`` for a zero matrix, such as the W learned on independent coordinates).

    Parameters
    ----------
    params : dict or NamedTuple or None
        ``trace.params``: arrays with a leading chain axis.
    """
    if params is None:
        return "nothing learned in warm-up"
    return "learned in warm-up: " + ("; ".join(_learned(params)) or "nothing")


def _learned(params, prefix: str = "") -> list[str]:
    """:func:`format_params`'s phrases, one per parameter; a composed sampler's blocks
    (a dict of dicts) as ``block: ...``.
    """
    items = params._asdict().items() if hasattr(params, "_asdict") else dict(params).items()
    parts = []
    joint_on = dict(items).get(JOINT)
    for name, value in items:
        if name == JOINT_MOVES and joint_on is not None and not np.asarray(joint_on).any():
            continue  # the mode shift's moves per sweep, where warm-up left it off
        if isinstance(value, dict):
            parts.append(f"{prefix}{name}: " + (", ".join(_learned(value)) or "nothing"))
            continue
        if name == PAIRS:
            parts.append(_pairs_frame(value))
            continue
        name = f"{prefix}{name}"
        if not hasattr(value, "shape"):
            continue
        x = np.asarray(value)
        if x.dtype == bool:  # a switch the warm-up may turn on (the discrete fallback): shown when on
            parts += [f"{name} on"] if x.any() else []
            continue
        # learned from all chains together: one array shown per chain without copies
        if x.ndim and (x.strides[0] == 0 or x.shape[0] == 1):
            x = x[:1]
        if x.ndim <= 1 or x[0].size == 1:
            v = x.reshape(-1).astype(np.float64)
            spread = "" if np.ptp(v) == 0 else f" ({_cell(v.min())}..{_cell(v.max())} over chains)"
            parts.append(f"{name} {_cell(float(np.median(v)))}{spread}")
        elif x.ndim == 3 and x.shape[1] == x.shape[2]:
            shared = x.shape[0] == 1 or np.array_equal(x, np.broadcast_to(x[:1], x.shape))
            matrices = x[:1] if shared else x
            what = "(zero)"  # learned from a target without interactions (independent coordinates)
            if matrices.any():
                what = f"(condition number {float(np.median(np.linalg.cond(matrices.astype(np.float64)))):.3g})"
            parts.append(f"{name} {x.shape[1]}x{x.shape[2]} {what}")
        else:
            parts.append(f"{name} shape {x.shape[1:]}")
    return parts


def _pairs_frame(frame) -> str:
    """The switch pairs' frame (``(means, sds)``, each ``(chains, pairs, 2)``, learned from all
    chains together) in a phrase: the entries' standard deviations with their switch out and in,
    as medians over the pairs.
    """
    scales = np.asarray(frame[1])[0]
    out, on = (_cell(float(np.median(scales[:, value]))) for value in (0, 1))
    return f"{PAIRS}: {scales.shape[0]} switched entries, sd {out} when out, {on} when in (medians)"


def format_table(rows: Sequence[dict], columns: Sequence[str] | None = None, title: str | None = None) -> str:
    """Rows of dicts as an aligned plain-text table (first column left-aligned).

    Parameters
    ----------
    rows : sequence of dict
        One dict per row, column name -> value; floats are printed with 4 significant digits.
    columns : sequence of str, optional
        The columns, in order (default: the keys of the first row).
    title : str, optional
        A line printed above the table.
    """
    if not rows:
        return title or ""
    columns = list(columns or rows[0].keys())
    cells = [[_cell(row.get(c, "")) for c in columns] for row in rows]
    widths = [max(len(c), *(len(r[i]) for r in cells)) for i, c in enumerate(columns)]

    def line(values):
        return "  ".join(
            v.ljust(w) if i == 0 else v.rjust(w) for i, (v, w) in enumerate(zip(values, widths, strict=False))
        )

    out = [title] if title else []
    out += [line(columns), line(["-" * w for w in widths])] + [line(r) for r in cells]
    return "\n".join(out)


#: The mark of a run with warnings in the comparison table and figure.
WARNED = "(!)"


def format_compare(rows: Sequence[dict], title: str | None = None) -> str:
    """The table of :func:`gradmc.compare.compare` with its legend underneath.

    Cells that do not apply read ``n/a (no gradients)`` (ESS per gradient evaluation of a
    sampler that evaluates none) and ``n/a (no exact truth)`` (errors on a target without
    truth); the ``nonfinite`` column shows only when some run had non-finite proposals.

    Parameters
    ----------
    rows : sequence of dict
        Rows of :func:`gradmc.compare.trace_row`.
    title : str, optional
        A line printed above the table.
    """
    extra = [c for c in ("nonfinite", "warnings") if any(r.get(c) for r in rows)]
    columns = COMPARE_COLUMNS + extra
    shown = []
    for row in rows:
        cells = dict(row)
        if row.get("warnings"):
            cells["sampler"] = f"{row['sampler']} {WARNED}"
        if row.get("grad_evals") == 0:
            cells["ess_per_grad"] = "n/a (no gradients)"
        for column in ("mean_err", "sd_err"):
            if math.isnan(row.get(column, math.nan)):
                cells[column] = "n/a (no exact truth)"
        shown.append(cells)
    width = max(len(c) for c in columns[1:])
    legend = ["columns:", *(f"  {c.ljust(width)}  {COMPARE_LEGEND[c]}" for c in columns[1:])]
    legend += [
        f"compare.png: samplers ordered by median ESS per gradient evaluation ({RANKING} in table.json),",
        f"  runs with warnings ({WARNED}, orange bars) after the clean ones, those without gradients last.",
        "  The order does not depend on the machine's load, and runs with other seeds",
        "  keep its order, where the close neighbours of ess_per_grad and min_ess_per_s can swap.",
    ]
    return "\n".join([format_table(shown, columns, title), "", *legend])


def pyplot():
    """``matplotlib.pyplot`` on the Agg backend (PNG files, no display needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig, path: Path, *, dpi: int = 110) -> Path:
    """Lay out ``fig``, write it to ``path`` and close it.

    Parameters
    ----------
    fig : matplotlib.figure.Figure
        The figure.
    path : Path
        The PNG file to write.
    dpi : int
        Resolution.

    Returns
    -------
    Path
        ``path``.
    """
    fig.tight_layout()
    fig.savefig(path, dpi=dpi)
    pyplot().close(fig)
    return path


#: At most this many coordinates are summarised to find the worst-converged ones.
MAX_RANKED = 2000


def named_coordinates(posterior: dict) -> tuple[np.ndarray, list[str], np.ndarray, np.ndarray]:
    """The draws as the model names them: ``(values, names, scalar, discrete)`` with values
    shaped ``(chain, draw, k)``, one name per coordinate (``mu``, ``theta[3]``), whether it is
    a scalar variable, and whether it is integer-valued (a discrete site); ``x[i]`` for a
    target without named variables.

    Parameters
    ----------
    posterior : dict of str to ndarray
        The named draws ``(chain, draw, *shape)`` of :meth:`gradmc.Trace.posterior`.
    """
    blocks, names, scalar, discrete = [], [], [], []
    for name, value in posterior.items():
        integer = np.issubdtype(np.asarray(value).dtype, np.integer)
        value = np.asarray(value, np.float64)
        blocks.append(value.reshape(*value.shape[:2], -1))
        names += coord_names(value.shape[2:], name)
        scalar += [value.ndim == 2] * blocks[-1].shape[-1]
        discrete += [integer] * blocks[-1].shape[-1]
    return np.concatenate(blocks, axis=-1), names, np.asarray(scalar, bool), np.asarray(discrete, bool)


def worst_first(r_hat, scalar, k: int, discrete=None) -> np.ndarray:
    """The indices of at most ``k`` coordinates to show: continuous scalar variables first (in
    their order), then the entries of continuous arrays by decreasing R-hat, then discrete
    scalar variables and last the entries of discrete arrays (whose values
    :func:`format_value_frequencies` also sums up), each by decreasing R-hat; NaN last in each.
    So a model's many discrete sites (one per time step, or a mixture's assignments) never
    crowd out its continuous parameters, and the discrete sites shown are the worst mixed.

    Parameters
    ----------
    r_hat : array_like
        R-hat of each coordinate.
    scalar : array_like of bool
        Whether each coordinate is a scalar variable.
    k : int
        How many to keep.
    discrete : array_like of bool, optional
        Whether each coordinate is integer-valued (default: none is).
    """
    r_hat, scalar = np.asarray(r_hat, np.float64), np.asarray(scalar, bool)
    discrete = np.zeros_like(scalar) if discrete is None else np.asarray(discrete, bool)
    order = [np.flatnonzero(scalar & ~discrete)]
    for kind, is_scalar in ((False, False), (True, True), (True, False)):
        rest = np.flatnonzero((scalar == is_scalar) & (discrete == kind))
        order.append(rest[np.argsort(-np.nan_to_num(r_hat[rest], nan=-np.inf), kind="stable")])
    return np.concatenate(order)[:k]


def _r_hat(values: np.ndarray) -> np.ndarray:
    """R-hat of each coordinate of (chain, draw, k) values; NaN for one chain or few draws."""
    from gradmc.diagnostics import summary

    if values.shape[0] < 2 or values.shape[1] < 4:
        return np.full(values.shape[-1], np.nan)
    return np.asarray(summary(values)["r_hat"], np.float64)


#: The acceptance rate in trace plots is a running mean over this many iterations.
ACCEPTANCE_WINDOW = 50


def _running_mean(values: np.ndarray, window: int) -> np.ndarray:
    """The mean of the last ``window`` values along the draw axis of (chain, draw) values."""
    total = np.cumsum(np.pad(values, ((0, 0), (1, 0))), axis=1)
    ends = np.arange(1, values.shape[1] + 1)
    starts = np.maximum(ends - window, 0)
    return (total[:, ends] - total[:, starts]) / (ends - starts)


def trace_panels(trace, max_panels: int = 6, posterior: dict | None = None) -> list[tuple[str, np.ndarray]]:
    """What :func:`plot_trace` draws: ``(label, (chain, draw) values)`` per panel.

    For a model with continuous unknowns, its scalar variables first, then the entries of its
    arrays with the largest R-hat (:func:`worst_first`), named as the model names them (each label gives its
    R-hat); for a discrete target, the statistics that tell mixing (mean value of the
    coordinates, share of coordinates changed since the first draw). Then the log density,
    and the acceptance rate as a running mean over :data:`ACCEPTANCE_WINDOW` iterations.

    Parameters
    ----------
    trace : gradmc.Trace
        A run.
    max_panels : int
        How many variables or statistics at most (besides the log density and acceptance).
    posterior : dict, optional
        ``trace.posterior()``, when the caller has it already.
    """
    from gradmc.spaces import DiscreteSpace

    posterior = trace.posterior() if posterior is None else posterior
    panels: list[tuple[str, np.ndarray]] = []
    values, names, scalar, discrete = named_coordinates(posterior)
    if isinstance(trace.space, DiscreteSpace):  # mean value: the magnetisation of spins, categories by index
        panels += [
            ("mean value of the coordinates", values.mean(axis=-1)),
            ("share of coordinates changed since the first draw", (values != values[:, :1]).mean(axis=-1)),
        ][:max_panels]
    else:
        ranked = values[:, :, :MAX_RANKED]
        r_hat = _r_hat(ranked)
        for i in worst_first(r_hat, scalar[:MAX_RANKED], max_panels, discrete[:MAX_RANKED]):
            label = names[i] if np.isnan(r_hat[i]) else f"{names[i]}  (R-hat {r_hat[i]:.3f})"
            panels.append((label, ranked[:, :, i]))
    if "logdensity" in trace.stats:
        panels.append(("log density", np.asarray(trace.stats["logdensity"], np.float64)))
    if "acceptance_rate" in trace.stats:
        window = min(ACCEPTANCE_WINDOW, trace.draws.shape[1])
        accept = _running_mean(np.asarray(trace.stats["acceptance_rate"], np.float64), window)
        panels.append((f"acceptance rate (mean of the last {window} iterations)", accept))
    return panels


def _suptitle(fig, text: str) -> None:
    """The figure's title, wrapped to its width (a mixed model's sampler name runs long)."""
    fig.suptitle(textwrap.fill(text, max(40, int(10 * fig.get_figwidth()))))


def plot_trace(trace, path: Path, *, max_panels: int = 6, title: str = "", posterior: dict | None = None) -> Path:
    """Trace lines of :func:`trace_panels`, one colour per chain, against the iteration
    after warm-up.

    Parameters
    ----------
    trace : gradmc.Trace
        A run.
    path : Path
        The PNG file to write.
    max_panels : int
        How many variables or statistics at most (besides the log density and acceptance).
    title : str
        The figure's title.
    posterior : dict, optional
        ``trace.posterior()``, when the caller has it already.
    """
    panels = trace_panels(trace, max_panels, posterior)
    fig, axes = pyplot().subplots(len(panels), 1, figsize=(8, 1.7 * len(panels)), sharex=True, squeeze=False)
    steps = np.arange(1, trace.draws.shape[1] + 1) * trace.thinning
    for ax, (label, value) in zip(axes[:, 0], panels, strict=True):
        for chain in value:
            ax.plot(steps, chain, lw=0.5, alpha=0.8)
        ax.set_title(label, fontsize=9, loc="left")
    kept = "" if trace.thinning == 1 else f" (every {trace.thinning}th kept)"
    axes[-1, 0].set_xlabel(f"iteration after warm-up{kept}")
    _suptitle(fig, f"{title}: one colour per chain" if title else "one colour per chain")
    return save_figure(fig, path)


def plot_pairs(draws: np.ndarray, path: Path, *, title: str = "", max_points: int = 4000) -> Path:
    """Scatter of the first two coordinates with the chains pooled.

    Parameters
    ----------
    draws : np.ndarray
        Draws shaped ``(chain, draw, d)``, ``d >= 2``.
    path : Path
        The PNG file to write.
    title : str
        The figure's title.
    max_points : int
        At most about this many points are drawn (evenly thinned).
    """
    fig, ax = pyplot().subplots(figsize=(5, 5))
    _scatter(ax, draws, max_points, s=3, alpha=0.4)
    ax.set_title(title)
    return save_figure(fig, path)


def _scatter(ax, draws: np.ndarray, max_points: int, **style) -> None:
    """The first two coordinates of (chain, draw, d) ``draws``, chains pooled, thinned to about ``max_points``."""
    flat = draws.reshape(-1, draws.shape[-1])
    step = max(1, flat.shape[0] // max_points)
    ax.scatter(flat[::step, 0], flat[::step, 1], **style)
    ax.set(xlabel="x[0]", ylabel="x[1]")


def plot_compare_bars(rows: Sequence[dict], metrics: Sequence[str], path: Path, *, title: str = "") -> Path:
    """One bar panel per metric, one bar per sampler in the order of ``rows`` (log scale
    where values span decades; "n/a" where a value is NaN); runs with warnings are orange
    and marked :data:`WARNED`.

    Parameters
    ----------
    rows : sequence of dict
        One row per sampler, with a ``"sampler"`` name and the ``metrics``
        (:func:`gradmc.compare.ranked` orders them best first).
    metrics : sequence of str
        The keys of ``rows`` to plot, one panel each (titled by
        :data:`gradmc.compare.COMPARE_TITLES`).
    path : Path
        The PNG file to write.
    title : str
        The figure's title.
    """
    warned = [bool(r.get("warnings")) for r in rows]
    names = [f"{r['sampler']} {WARNED}" if w else r["sampler"] for r, w in zip(rows, warned, strict=True)]
    colours = ["tab:orange" if w else "tab:blue" for w in warned]
    fig, axes = pyplot().subplots(1, len(metrics), figsize=(4 * len(metrics), 3.8), squeeze=False)
    for ax, metric in zip(axes[0], metrics, strict=False):
        values = np.array([float(r.get(metric, np.nan)) for r in rows])
        ax.bar(names, np.nan_to_num(values), color=colours)
        for i in np.flatnonzero(np.isnan(values)):  # a column that does not apply to this sampler
            ax.text(i, 0.02, "n/a", ha="center", va="bottom", transform=ax.get_xaxis_transform())
        positive = values[np.isfinite(values) & (values > 0)]
        if positive.size and positive.max() / positive.min() > 100:
            ax.set_yscale("log")
        heading, unit = COMPARE_TITLES.get(metric, (metric, metric))
        ax.set_title(heading, fontsize=10)
        ax.set(ylabel=unit, xlabel="sampler, best first")
        ax.tick_params(axis="x", rotation=45)
    note = f"; {WARNED} orange: the run warned, ranked after the clean ones" if any(warned) else ""
    _suptitle(fig, f"{title}{note}" if title else note.lstrip("; "))
    return save_figure(fig, path)


def plot_draws_over_density(
    logdensity_fn, bounds, draws_by_name: dict, path: Path, *, max_points: int = 2000, title: str = ""
) -> Path:
    """A panel per sampler: its draws (chains pooled) over the target's density contours.

    Parameters
    ----------
    logdensity_fn : callable
        The target's log density of one 2-D position.
    bounds : tuple
        The plotting box ``((x_lo, x_hi), (y_lo, y_hi))``.
    draws_by_name : dict
        Sampler name -> draws shaped ``(chain, draw, 2)``.
    path : Path
        The PNG file to write.
    max_points : int
        At most about this many points per panel (evenly thinned).
    title : str
        The figure's title.
    """
    import jax
    import jax.numpy as jnp

    (x0, x1), (y0, y1) = bounds
    gx, gy = np.meshgrid(np.linspace(x0, x1, 200), np.linspace(y0, y1, 200))
    grid = jnp.stack([gx.ravel(), gy.ravel()], axis=-1)
    logp = np.ma.masked_invalid(np.asarray(jax.jit(jax.vmap(logdensity_fn))(grid), np.float64).reshape(gx.shape))
    levels = logp.max() - np.array([12.0, 8.0, 5.0, 3.0, 2.0, 1.0, 0.5])  # log-density contours
    n = len(draws_by_name)
    cols = min(n, 3)
    rows = math.ceil(n / cols)
    fig, axes = pyplot().subplots(rows, cols, figsize=(4 * cols, 4 * rows), squeeze=False)
    for ax in axes.ravel()[n:]:
        ax.axis("off")
    for ax, (name, draws) in zip(axes.ravel(), draws_by_name.items(), strict=False):
        ax.contour(gx, gy, logp, levels=levels, colors="0.5", linewidths=0.7, linestyles="solid")
        _scatter(ax, draws, max_points, s=2, alpha=0.5, color="tab:red")
        ax.set(xlim=(x0, x1), ylim=(y0, y1), title=name)
    _suptitle(fig, f"{title}: draws (chains pooled) over the log density's contours, 0.5 to 12 below its peak")
    return save_figure(fig, path)
