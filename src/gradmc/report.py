"""Tables and matplotlib figures from traces: what ``gradmc sample`` and ``compare`` show.

Plain-text tables (no extra dependency) and PNG figures written with the Agg backend, so
everything works on a machine without a display.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from gradmc.compare import COMPARE_COLUMNS, COMPARE_LEGEND, RANKING

__all__ = [
    "format_params",
    "format_table",
    "format_compare",
    "pyplot",
    "save_figure",
    "plot_trace",
    "plot_pairs",
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


def format_params(params) -> str:
    """One line on what a run's warm-up learned (``trace.params``), per parameter: a value per
    chain as its median and range over chains; a matrix as its shape and condition number
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
    for name, value in items:
        if isinstance(value, dict):
            inner = _learned(value)
            parts.append(f"{prefix}{name}: " + (", ".join(inner) if inner else "nothing"))
            continue
        name = f"{prefix}{name}"
        if not hasattr(value, "shape"):
            continue
        x = np.asarray(value)
        # learned from all chains together: one array shown per chain without copies
        if x.ndim and (x.strides[0] == 0 or x.shape[0] == 1):
            x = x[:1]
        if x.ndim <= 1 or x[0].size == 1:
            v = x.reshape(-1).astype(np.float64) if x.ndim else x.reshape(1).astype(np.float64)
            spread = "" if np.ptp(v) == 0 else f" ({_cell(v.min())}..{_cell(v.max())} over chains)"
            parts.append(f"{name} {_cell(float(np.median(v)))}{spread}")
        elif x.ndim == 3 and x.shape[1] == x.shape[2]:
            shared = x.shape[0] == 1 or np.array_equal(x, np.broadcast_to(x[:1], x.shape))
            matrices = x[:1] if shared else x
            if not matrices.any():  # learned from a target without interactions (independent coordinates)
                parts.append(f"{name} {x.shape[1]}x{x.shape[2]} (zero)")
                continue
            cond = float(np.median(np.linalg.cond(matrices.astype(np.float64))))
            parts.append(f"{name} {x.shape[1]}x{x.shape[2]} (condition number {cond:.3g})")
        else:
            parts.append(f"{name} shape {x.shape[1:]}")
    return parts


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


NO_GRADIENTS = "n/a (no gradients)"
NO_TRUTH = "n/a (no exact truth)"


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
    columns = COMPARE_COLUMNS + (["nonfinite"] if any(r.get("nonfinite") for r in rows) else [])
    shown = []
    for row in rows:
        cells = dict(row)
        if row.get("grad_evals") == 0:
            cells["ess_per_grad"] = NO_GRADIENTS
        for column in ("mean_err", "sd_err"):
            if math.isnan(row.get(column, math.nan)):
                cells[column] = NO_TRUTH
        shown.append(cells)
    width = max(len(c) for c in columns[1:])
    legend = ["columns:", *(f"  {c.ljust(width)}  {COMPARE_LEGEND[c]}" for c in columns[1:])]
    legend += [
        f"compare.png: samplers ordered by median ESS per gradient evaluation ({RANKING} in table.json),",
        "  those without gradients last. It does not depend on the machine's load, and runs with other seeds",
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


def plot_trace(draws: np.ndarray, path: Path, *, max_coords: int = 4, title: str = "") -> Path:
    """Trace lines of the first coordinates, one colour per chain.

    Parameters
    ----------
    draws : np.ndarray
        Draws shaped ``(chain, draw, *event)``.
    path : Path
        The PNG file to write.
    max_coords : int
        How many leading coordinates to plot (one panel each).
    title : str
        The figure's title.
    """
    plt = pyplot()
    flat = draws.reshape(draws.shape[0], draws.shape[1], -1)
    k = min(max_coords, flat.shape[-1])
    fig, axes = plt.subplots(k, 1, figsize=(8, 1.8 * k), sharex=True, squeeze=False)
    for i in range(k):
        ax = axes[i, 0]
        for c in range(flat.shape[0]):
            ax.plot(flat[c, :, i], lw=0.5, alpha=0.8)
        ax.set_ylabel(f"x[{i}]")
    axes[-1, 0].set_xlabel("draw")
    fig.suptitle(title)
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
    plt = pyplot()
    flat = draws.reshape(-1, draws.shape[-1])
    step = max(1, flat.shape[0] // max_points)
    fig, ax = plt.subplots(figsize=(5, 5))
    ax.scatter(flat[::step, 0], flat[::step, 1], s=3, alpha=0.4)
    ax.set_xlabel("x[0]")
    ax.set_ylabel("x[1]")
    ax.set_title(title)
    return save_figure(fig, path)


def plot_compare_bars(rows: Sequence[dict], metrics: Sequence[str], path: Path, *, title: str = "") -> Path:
    """One bar panel per metric, one bar per sampler in the order of ``rows`` (log scale
    where values span decades; "n/a" where a value is NaN).

    Parameters
    ----------
    rows : sequence of dict
        One row per sampler, with a ``"sampler"`` name and the ``metrics``
        (:func:`gradmc.compare.ranked` orders them best first).
    metrics : sequence of str
        The keys of ``rows`` to plot, one panel each.
    path : Path
        The PNG file to write.
    title : str
        The figure's title.
    """
    plt = pyplot()
    names = [r["sampler"] for r in rows]
    fig, axes = plt.subplots(1, len(metrics), figsize=(4 * len(metrics), 3.5), squeeze=False)
    for ax, metric in zip(axes[0], metrics, strict=False):
        values = np.array([float(r.get(metric, np.nan)) for r in rows])
        ax.bar(names, np.nan_to_num(values), color="tab:blue")
        for i in np.flatnonzero(np.isnan(values)):  # a column that does not apply to this sampler
            ax.text(i, 0.02, "n/a", ha="center", va="bottom", transform=ax.get_xaxis_transform())
        positive = values[np.isfinite(values) & (values > 0)]
        if positive.size and positive.max() / positive.min() > 100:
            ax.set_yscale("log")
        ax.set_title(metric)
        ax.tick_params(axis="x", rotation=45)
    fig.suptitle(title)
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

    plt = pyplot()
    (x0, x1), (y0, y1) = bounds
    gx, gy = np.meshgrid(np.linspace(x0, x1, 200), np.linspace(y0, y1, 200))
    grid = jnp.stack([gx.ravel(), gy.ravel()], axis=-1)
    logp = np.asarray(jax.jit(jax.vmap(logdensity_fn))(grid), dtype=np.float64).reshape(gx.shape)
    logp = np.ma.masked_invalid(logp)
    levels = logp.max() - np.array([12.0, 8.0, 5.0, 3.0, 2.0, 1.0, 0.5])  # log-density contours
    n = len(draws_by_name)
    cols = min(n, 3)
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4 * cols, 4 * rows), squeeze=False)
    for ax in axes.ravel()[n:]:
        ax.axis("off")
    for ax, (name, draws) in zip(axes.ravel(), draws_by_name.items(), strict=False):
        flat = draws.reshape(-1, draws.shape[-1])
        step = max(1, flat.shape[0] // max_points)
        ax.contour(gx, gy, logp, levels=levels, colors="0.5", linewidths=0.7, linestyles="solid")
        ax.scatter(flat[::step, 0], flat[::step, 1], s=2, alpha=0.5, color="tab:red")
        ax.set_xlim(x0, x1)
        ax.set_ylim(y0, y1)
        ax.set_title(name)
    fig.suptitle(title)
    return save_figure(fig, path)
