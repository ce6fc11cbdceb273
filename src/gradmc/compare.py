"""``compare()``: several samplers on one target with the same budget, judged alike.

Each row holds the wall time (warm-up + sampling, compilation excluded), acceptance,
min/median bulk ESS over coordinates, min ESS per second of sampling, min ESS per
gradient evaluation, and the error of the means and standard deviations against the
target's truth when it has one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from gradmc import diagnostics
from gradmc.base import Sampler, Target
from gradmc.run import sample
from gradmc.trace import Trace

__all__ = ["CompareResult", "compare", "trace_row", "COMPARE_COLUMNS"]

COMPARE_COLUMNS = [
    "sampler",
    "time_s",
    "accept",
    "ess_min",
    "ess_median",
    "min_ess_per_s",
    "ess_per_grad",
    "mean_err",
    "sd_err",
]


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


def trace_row(trace: Trace, target: Target) -> dict:
    """The comparison row of one run (see module docstring).

    Parameters
    ----------
    trace : Trace
        The run.
    target : Target
        Its target (for the errors against the truth).
    """
    ess = diagnostics.ess_stats(trace.draws)
    seconds = trace.timing["warmup_s"] + trace.timing["sampling_s"]
    grads = trace.num_grad_evals
    row = {
        "sampler": trace.sampler,
        "time_s": seconds,
        "accept": trace.acceptance_rate,
        "ess_min": ess["min"],
        "ess_median": ess["median"],
        "min_ess_per_s": diagnostics.ess_per_second(ess["min"], trace.sampling_seconds),
        "ess_per_grad": ess["min"] / grads if grads > 0 else float("nan"),
        "mean_err": float("nan"),
        "sd_err": float("nan"),
    }
    truth = target.truth
    if truth is not None and truth.mean is not None:
        flat = trace.draws.reshape(-1, target.dim)
        row["mean_err"] = float(np.max(np.abs(flat.mean(0) - np.ravel(truth.mean))))
        if truth.variance is not None:
            row["sd_err"] = float(np.max(np.abs(flat.std(0) - np.sqrt(np.ravel(truth.variance)))))
    if trace.num_divergent:
        row["divergent"] = trace.num_divergent
    if trace.num_nonfinite:
        row["nonfinite"] = trace.num_nonfinite
    return row


def compare(
    target: Target,
    samplers: Sequence[str | Sampler],
    *,
    num_chains: int = 4,
    num_warmup: int = 1000,
    num_draws: int = 1000,
    seed: int = 0,
    progress: bool = True,
) -> CompareResult:
    """Run every sampler on ``target`` with the same chains, warm-up, draws and seed.

    Parameters
    ----------
    target : Target
        The target.
    samplers : sequence of str or Sampler
        The samplers, by name or as ``gradmc.sampler(...)``.
    num_chains, num_warmup, num_draws, seed : int
        The budget and seed every sampler gets.
    progress : bool
        Show progress bars.
    """
    rows, traces = [], {}
    for spec in samplers:
        trace = sample(
            target,
            spec,
            num_chains=num_chains,
            num_warmup=num_warmup,
            num_draws=num_draws,
            seed=seed,
            progress=progress,
        )
        name = trace.sampler if trace.sampler not in traces else f"{trace.sampler}#{len(traces)}"
        traces[name] = trace
        rows.append({**trace_row(trace, target), "sampler": name})
    return CompareResult(rows, traces)
