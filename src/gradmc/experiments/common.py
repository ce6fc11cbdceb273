"""Helpers every experiment shares: budgets, figures, table cells, rank agreement.

* :class:`Budget`: chains × (warm-up + kept draws), the budget of a fixed-length run;
  experiments that need more (tuning runs, per-kind iteration counts) extend it.
* :func:`pyplot` / :func:`subplots` / :func:`save_figure`: matplotlib on the Agg backend
  (no display needed).
* :func:`mean_sd_cell` / :func:`seeds_cell`: "mean (sd)" table cells; :func:`fenced`: a
  plain-text table as a Markdown code block; :func:`markdown_table`: a Markdown table.
* :func:`spearman`, :func:`descending_ranks`, :func:`rank_agreement`: how our ranking of
  samplers agrees with a paper's.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from gradmc import registry
from gradmc.base import Sampler
from gradmc.report import format_table, pyplot, save_figure
from gradmc.run import sample

__all__ = [
    "at_budget",
    "Budget",
    "format_table",
    "fenced",
    "markdown_table",
    "pyplot",
    "subplots",
    "save_figure",
    "mean_sd_cell",
    "seeds_cell",
    "spearman",
    "descending_ranks",
    "rank_agreement",
]


@dataclass(frozen=True)
class Budget:
    """The iterations of a fixed-length run.

    Parameters
    ----------
    chains : int
        Independent chains (the papers' runs or repeats), run as one vmapped call.
    warmup : int
        Warm-up (adaptation) steps per chain.
    draws : int
        Kept draws per chain.
    """

    chains: int
    warmup: int
    draws: int

    def sample(self, target, sampler, seed: int, progress: bool = False):
        """:func:`gradmc.sample` of ``sampler`` on ``target`` at this budget (one vmapped call).

        Parameters
        ----------
        target : Target
            The target.
        sampler : Sampler or str
            The sampler.
        seed : int
            Seed.
        progress : bool
            Show a progress bar.
        """
        return sample(
            target,
            sampler,
            num_chains=self.chains,
            num_warmup=self.warmup,
            num_draws=self.draws,
            seed=seed,
            progress=progress,
        )


def subplots(*args, **kwargs):
    """``(figure, axes)`` of matplotlib's ``subplots`` on the Agg backend (:func:`pyplot`)."""
    return pyplot().subplots(*args, **kwargs)


def fenced(table: str) -> str:
    """``table`` (e.g. from :func:`format_table`) as a Markdown code block.

    Parameters
    ----------
    table : str
        Plain text.
    """
    return f"```\n{table}\n```"


def markdown_table(header, rows) -> str:
    """A Markdown table: the ``header`` cells, then one line per row of cells.

    Parameters
    ----------
    header : sequence of str
        The column titles.
    rows : iterable of sequence
        The cells of each row (any value; printed with ``str``).
    """
    lines = [f"| {' | '.join(header)} |", "|" + "---|" * len(header)]
    return "\n".join(lines + [f"| {' | '.join(map(str, row))} |" for row in rows])


def mean_sd_cell(mean: float, sd: float | None = None, fmt: str = ".3f", sd_fmt: str | None = None) -> str:
    """A "mean (sd)" table cell; the mean alone when ``sd`` is None.

    Parameters
    ----------
    mean : float
        The mean.
    sd : float, optional
        The standard deviation.
    fmt : str
        Format spec of the mean (``".3f"``: three decimals).
    sd_fmt : str, optional
        Format spec of the sd (default ``fmt``).
    """
    text = f"{mean:{fmt}}"
    return text if sd is None else f"{text} ({sd:{sd_fmt or fmt}})"


def seeds_cell(values, fmt: str = ".3f", sd_fmt: str = ".3g") -> str:
    """Mean (sd, ddof 1) of ``values`` (e.g. one cell over independent seeds); the mean alone
    for a single value.

    Parameters
    ----------
    values : array_like
        The values, one per seed.
    fmt, sd_fmt : str
        Format specs of the mean and the sd.
    """
    values = np.asarray(values, np.float64)
    return mean_sd_cell(float(values.mean()), float(values.std(ddof=1)) if len(values) > 1 else None, fmt, sd_fmt)


def spearman(ours: dict, paper: dict, keys=None) -> float:
    """Spearman rank correlation of ``ours`` and ``paper`` over the keys both have (NaN for
    fewer than two, and when either side ties them all: the correlation is undefined).

    Parameters
    ----------
    ours, paper : dict
        Method -> score (or rank).
    keys : sequence, optional
        The methods to compare, in order (default: ``paper``'s keys).
    """
    from scipy.stats import spearmanr

    names = [k for k in (paper if keys is None else keys) if k in ours and k in paper]
    a, b = [ours[n] for n in names], [paper[n] for n in names]
    if len(names) < 2 or len(set(a)) == 1 or len(set(b)) == 1:
        return float("nan")
    return float(spearmanr(a, b).statistic)


def descending_ranks(values) -> np.ndarray:
    """Ranks with 1 = the largest value; ties share the average rank.

    Parameters
    ----------
    values : array_like
        The scores.
    """
    from scipy.stats import rankdata

    return rankdata(-np.asarray(values, np.float64))


def rank_agreement(ours: dict, paper: dict, keys=None) -> dict:
    """How our scores (higher is better) rank the methods against a paper's.

    Parameters
    ----------
    ours, paper : dict
        Method -> score, higher is better (e.g. min ESS/s).
    keys : sequence, optional
        The methods to compare, in order (default: ``paper``'s keys); those missing from
        either dict are left out.

    Returns
    -------
    dict
        ``methods`` (compared), ``ours_rank`` and ``paper_rank`` (1 = best), ``spearman``
        and ``same_best`` (both put the same method first).
    """
    names = [k for k in (paper if keys is None else keys) if k in ours and k in paper]
    a, b = [ours[m] for m in names], [paper[m] for m in names]
    return {
        "methods": names,
        "ours_rank": descending_ranks(a),
        "paper_rank": descending_ranks(b),
        "spearman": spearman(ours, paper, names) if len(names) > 2 else math.nan,
        "same_best": bool(names) and names[int(np.argmax(a))] == names[int(np.argmax(b))],
    }


def paper_sampler(name: str, **options) -> Sampler:
    """The registered sampler ``name`` with a paper's settings kept as given (no warm-up
    adaptation of them: :func:`gradmc.registry.without_adaptation`).

    Parameters
    ----------
    name : str
        A registered sampler.
    **options
        Its options.
    """
    return registry.sampler(name, **registry.without_adaptation(name, options))


def at_budget(run: Callable, default=None, paper=None) -> Callable:
    """``run(out=, seed=, [budget=], [progress=])`` as the entry point ``gradmc reproduce``
    calls, ``experiment(*, out, full, seed, progress)``: at the ``default`` budget, or the
    ``paper``'s with ``full`` (no budget argument when both are None: the default is the paper's).

    Parameters
    ----------
    run : callable
        The experiment's run function.
    default, paper : object, optional
        Its budgets.
    """
    takes = inspect.signature(run).parameters

    def experiment(*, out: Path, full: bool, seed: int, progress: bool) -> str:
        kwargs: dict[str, Any] = {"progress": progress} if "progress" in takes else {}
        if default is not None:
            kwargs["budget"] = paper if full else default
        return run(out=Path(out), seed=seed, **kwargs)

    experiment.__doc__ = f":func:`{run.__name__}` at the default budget, or the paper's with ``full``."
    return experiment
