"""``compare()``: several samplers on one target with the same budget, judged alike.

Each row holds the run's times (end to end, and the kept draws alone), acceptance,
min/median bulk ESS over coordinates, ESS per second of the kept draws, ESS per gradient
evaluation, divergences of warm-up and of the kept draws apart, and the error of the means
and standard deviations against the target's truth when it has one. :data:`COMPARE_LEGEND`
says what each column means; rows hold numbers only (NaN where a column does not apply).
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable, Sequence
from typing import NamedTuple

import numpy as np

from gradmc import diagnostics
from gradmc.base import Sampler, Target
from gradmc.models import resolve_target
from gradmc.run import sample
from gradmc.trace import Trace

__all__ = [
    "CompareResult",
    "compare",
    "trace_row",
    "ranked",
    "rows_as_json",
    "COMPARE_COLUMNS",
    "COMPARE_LEGEND",
    "COMPARE_TITLES",
    "RANKING",
]

#: What the columns mean, one line each (printed under the table).
COMPARE_LEGEND = {
    "wall_s": "seconds of the whole run, end to end: compilation + warm-up + kept draws (compile_s in table.json)",
    "sampling_s": "seconds of the kept draws alone (compiled code; no compilation, no warm-up)",
    "accept": "mean acceptance probability of the kept draws",
    "ess_min": "smallest bulk effective sample size over the coordinates, chains pooled",
    "ess_median": "median bulk ESS over the coordinates (above the number of draws where successive draws are "
    "anticorrelated, as with HMC's antithetic moves on Gaussian-like targets)",
    "min_ess_per_s": "ess_min / sampling_s",
    "ess_per_grad": "ess_min / gradient evaluations of the kept draws, all chains",
    "mean_err": "largest |mean - true mean| over the coordinates",
    "sd_err": "largest |sd - true sd| over the coordinates",
    "div_warmup": "divergent transitions in warm-up (common while the step size is tuned)",
    "div_kept": "divergent transitions in the kept draws (a warning: the draws may be biased)",
    "nonfinite": "proposals rejected for a non-finite log density or gradient, warm-up and kept draws",
    "warnings": "the run's warnings (printed below the table); a run with warnings is ranked after the clean ones",
}

#: The columns of the printed table, in order: ``sampler``, then those of :data:`COMPARE_LEGEND` but
#: ``nonfinite`` and ``warnings``, which show only when some run has them (a row also holds
#: ``compile_s``, ``warmup_s``, ``grad_evals`` and ``median_ess_per_grad``).
COMPARE_COLUMNS = ["sampler", *(column for column in COMPARE_LEGEND if column not in ("nonfinite", "warnings"))]

#: What each plotted column is, as a figure's panel title and axis label.
COMPARE_TITLES = {
    "median_ess_per_grad": ("median ESS per gradient evaluation", "ESS / gradient evaluation"),
    "min_ess_per_s": ("smallest ESS per second of sampling", "ESS / s"),
    "mean_err": ("largest error of a mean", "|mean - true mean|"),
}

#: The quantity :func:`ranked` orders by: median ESS per gradient evaluation.
RANKING = "median_ess_per_grad"


class CompareResult(NamedTuple):
    """The outcome of :func:`compare`.

    Parameters
    ----------
    rows : list of dict
        One :func:`trace_row` per sampler, in the order run.
    traces : dict of str to Trace
        The runs, by sampler name (``name#i`` when a name repeats).
    """

    rows: list[dict]
    traces: dict[str, Trace]


def _largest_error(estimate: np.ndarray, truth) -> float:
    """``max |estimate - truth|``; inf (not NaN) when the draws are not finite, so that NaN
    in a row always means "no truth to compare with".
    """
    error = float(np.max(np.abs(estimate - np.ravel(truth))))
    return math.inf if math.isnan(error) else error


def trace_row(trace: Trace, target: Target, wall_seconds: float | None = None) -> dict:
    """The comparison row of one run: numbers, NaN where a column does not apply.

    ``ess_per_grad`` and ``median_ess_per_grad`` are NaN for a sampler that evaluates no
    gradients (``grad_evals`` 0); ``mean_err`` and ``sd_err`` are NaN when the target has
    no truth (and inf when the draws are not finite). :data:`COMPARE_LEGEND` defines the
    columns.

    Parameters
    ----------
    trace : Trace
        The run.
    target : Target
        Its target (for the errors against the truth).
    wall_seconds : float, optional
        The run's end-to-end seconds (default: its compilation, warm-up and sampling
        seconds added up).
    """
    ess, timing, grads = diagnostics.ess_stats(trace.draws), trace.timing, trace.num_grad_evals
    if wall_seconds is None:
        wall_seconds = timing["compile_s"] + timing["warmup_s"] + timing["sampling_s"]
    row = {
        "sampler": trace.sampler,
        "wall_s": float(wall_seconds),
        "compile_s": float(timing["compile_s"]),
        "warmup_s": float(timing["warmup_s"]),
        "sampling_s": trace.sampling_seconds,
        "accept": trace.acceptance_rate,
        "ess_min": ess["min"],
        "ess_median": ess["median"],
        "min_ess_per_s": diagnostics.ess_per_second(ess["min"], trace.sampling_seconds),
        "grad_evals": grads,
        "ess_per_grad": ess["min"] / grads if grads > 0 else math.nan,
        RANKING: ess["median"] / grads if grads > 0 else math.nan,
        "mean_err": math.nan,
        "sd_err": math.nan,
        "div_warmup": int(np.sum(trace.warmup_stats.get("diverging", 0))),
        "div_kept": trace.num_divergent,
        "nonfinite": trace.num_nonfinite,
        "warnings": len(trace.warnings),
    }
    if (truth := target.truth) is not None and truth.mean is not None:
        flat = trace.draws.reshape(-1, target.dim)
        row["mean_err"] = _largest_error(flat.mean(0), truth.mean)
        if truth.variance is not None:
            row["sd_err"] = _largest_error(flat.std(0), np.sqrt(np.ravel(truth.variance)))
    return row


def ranked(rows: Sequence[dict]) -> list[dict]:
    """The rows ordered best first by :data:`RANKING`, median ESS per gradient evaluation;
    runs with warnings come after the clean ones (their numbers may not mean what they
    say), and samplers without gradients last, in their given order.

    Median ESS per gradient evaluation depends neither on the machine's load nor on timing
    a phase of a few milliseconds, and the median over coordinates varies less from one
    seed to the next than the minimum: on the banana target at 4 chains x 1000 draws,
    repeated runs with other seeds keep the order, where ``min_ess_per_s`` and
    ``ess_per_grad`` can swap neighbours.

    Parameters
    ----------
    rows : sequence of dict
        Rows of :func:`trace_row`.
    """

    def key(indexed):
        index, row = indexed
        value = row.get(RANKING, math.nan)
        warned = row.get("warnings", 0) > 0
        return (warned, 0, -value, index) if math.isfinite(value) else (warned, 1, 0.0, index)

    return [row for _, row in sorted(enumerate(rows), key=key)]


def rows_as_json(rows: Sequence[dict]) -> list[dict]:
    """The rows with plain Python numbers and ``None`` for NaN or infinite values, which
    JSON has no number for.

    Parameters
    ----------
    rows : sequence of dict
        Rows of :func:`trace_row`.
    """

    def plain(value):
        if isinstance(value, (bool, np.bool_)):
            return bool(value)
        if isinstance(value, (int, np.integer)):
            return int(value)
        if isinstance(value, (float, np.floating)):
            return float(value) if math.isfinite(value) else None
        return value

    return [{key: plain(value) for key, value in row.items()} for row in rows]


def compare(
    target: Target | str | Callable,
    samplers: Sequence[str | Sampler],
    *,
    num_chains: int = 4,
    num_warmup: int = 1000,
    num_draws: int = 1000,
    seed: int = 0,
    progress: bool = True,
    init=None,
    space=None,
) -> CompareResult:
    """Run every sampler on ``target`` with the same chains, warm-up, draws and seed.

    Parameters
    ----------
    target : Target, str or callable
        The target: a Target, a registered name, or a log-density function (with ``init``
        or ``space``, as for :func:`gradmc.sample`).
    samplers : sequence of str or Sampler
        The samplers, by name or as ``gradmc.sampler(...)``.
    num_chains, num_warmup, num_draws, seed : int
        The budget and seed every sampler gets.
    progress : bool
        Show progress bars (on a terminal), and a line on stderr as each sampler finishes
        (``nuts: done in 3.2 s (compile 2.1 s)``).
    init : array or pytree, optional
        The chains' start, as for :func:`gradmc.sample`.
    space : Space or str, optional
        The space of a log-density function's positions.
    """
    target, init = resolve_target(target, init=init, space=space)
    rows, traces = [], {}
    budget = {"num_chains": num_chains, "num_warmup": num_warmup, "num_draws": num_draws, "seed": seed}
    for spec in samplers:
        start = time.perf_counter()
        trace = sample(target, spec, progress=progress, init=init, **budget)
        wall = time.perf_counter() - start
        name = trace.sampler if trace.sampler not in traces else f"{trace.sampler}#{len(traces)}"
        traces[name] = trace
        rows.append({**trace_row(trace, target, wall), "sampler": name})
        if progress:
            print(
                f"{name}: done in {wall:.1f} s (compile {trace.timing['compile_s']:.1f} s)", file=sys.stderr, flush=True
            )
    return CompareResult(rows, traces)
