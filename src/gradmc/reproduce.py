"""``gradmc reproduce --all``: every registered experiment into one report.

Each experiment writes its tables and figures into ``out/<name>/`` and returns Markdown;
this module runs them in turn (a failure is reported with its traceback, never a hole),
then writes ``out/index.md`` and ``out/index.html`` with, per experiment, our text (tables
beside the published numbers), its figures, its wall time, and the machine, versions and
seed of the run.
"""

from __future__ import annotations

import html
import importlib.util
import platform
import time
import traceback
from importlib import metadata
from pathlib import Path

from gradmc import registry

__all__ = ["EXTRA_MODULES", "MissingExtraError", "missing_extra", "run_experiment", "run_all"]

#: Modules only the experiments need: ``pip install -e '.[experiments]'`` in the repository installs them.
EXTRA_MODULES = ("cvxpy", "equinox", "markdown")
EXTRA_HINT = "pip install -e '.[experiments]' in the gradmc repository"


class MissingExtraError(ModuleNotFoundError):
    """A module of the ``experiments`` extra is not installed."""


def _needs(what: str, module: str) -> str:
    return f"{what} needs the optional dependencies: {EXTRA_HINT} (module {module!r} is not installed)"


def missing_extra(error: ModuleNotFoundError) -> str | None:
    """The message naming the extra when ``error`` is about one of :data:`EXTRA_MODULES`, else None.

    Parameters
    ----------
    error : ModuleNotFoundError
        The error an experiment raised.
    """
    module = (error.name or "").split(".")[0]
    return _needs("this experiment", module) if module in EXTRA_MODULES else None


def run_experiment(name: str, out: Path, *, full: bool, seed: int, progress: bool) -> dict:
    """Run one experiment and write ``out/report.md``.

    A failure is reported in place of the results (with its traceback; a missing optional
    dependency with the ``pip install`` line that provides it), never raised.

    Parameters
    ----------
    name : str
        A registered experiment.
    out : Path
        Its output folder.
    full : bool
        The papers' budgets.
    seed : int
        Seed.
    progress : bool
        Show progress bars.

    Returns
    -------
    dict
        ``name``, ``ok``, ``text`` (Markdown), ``seconds``, ``figures`` (PNG names) and
        ``description``.
    """
    entry = registry.experiment(name)
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    try:
        text, ok = entry.constructor(out=folder, full=full, seed=seed, progress=progress), True
    except Exception as error:  # the report shows the error in place of the results
        ok, message = False, (missing_extra(error) if isinstance(error, ModuleNotFoundError) else None)
        text = "**This experiment failed:**\n\n```\n" + traceback.format_exc() + "```"
        if message is not None:
            text = f"**This experiment did not run:** {message}."
    seconds = time.perf_counter() - t0
    (folder / "report.md").write_text(text + "\n")
    figures = sorted(p.name for p in folder.glob("*.png"))
    return dict(name=name, ok=ok, text=text, seconds=seconds, figures=figures, description=entry.description)


def _environment(full: bool, seed: int) -> str:
    import jax

    versions = ", ".join(f"{p} {metadata.version(p)}" for p in ("gradmc", "jax", "blackjax", "numpy", "scipy", "arviz"))
    devices = ", ".join(str(d) for d in jax.devices())
    return (
        f"- machine: {platform.machine()}, {platform.processor() or 'cpu'}, {__import__('os').cpu_count()} cores; "
        f"devices: {devices}\n- python {platform.python_version()}; {versions}\n"
        f"- budget: {'full (the papers)' if full else 'default (quick)'}; seed {seed}"
    )


def run_all(out: Path, *, full: bool = False, seed: int = 0, progress: bool = True, names=None) -> Path:
    """Run every registered experiment (or ``names``) and write ``out/index.{md,html}``.

    The HTML needs ``markdown`` (the ``experiments`` extra): without it this fails at once,
    before any experiment runs, with :class:`MissingExtraError` naming the extra.

    Parameters
    ----------
    out : Path
        Output folder: one sub-folder per experiment, and the index.
    full : bool
        The papers' budgets.
    seed : int
        Seed of every experiment.
    progress : bool
        Show progress bars.
    names : sequence of str, optional
        The experiments to run (default: all registered).

    Returns
    -------
    Path
        ``out/index.html``.
    """
    if importlib.util.find_spec("markdown") is None:  # the HTML needs it: fail before any experiment runs
        raise MissingExtraError(_needs("the reproduction report", "markdown"), name="markdown")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    names = list(names) if names else [e.name for e in registry.experiments()]
    results = [run_experiment(n, out / n, full=full, seed=seed, progress=progress) for n in names]
    lines = ["# gradmc: reproduction report", "", _environment(full, seed), ""]
    lines += ["| experiment | status | wall time |", "|---|---|---|"] + [
        f"| [{r['name']}](#{r['name']}) | {'ok' if r['ok'] else 'FAILED'} | {r['seconds']:.0f} s |" for r in results
    ]
    for r in results:
        lines += ["", f"## {r['name']}", "", f"*{r['description']}*", "", r["text"], ""]
        lines += [f"![{fig}]({r['name']}/{fig})" for fig in r["figures"]]
    markdown_text = "\n".join(lines) + "\n"
    (out / "index.md").write_text(markdown_text)
    (out / "index.html").write_text(_html(markdown_text))
    return out / "index.html"


def _html(markdown_text: str) -> str:
    import markdown

    body = markdown.markdown(markdown_text, extensions=["tables", "fenced_code", "toc"])
    style = (
        "body{font-family:sans-serif;max-width:1100px;margin:auto;padding:1em}"
        "table{border-collapse:collapse}td,th{border:1px solid #bbb;padding:2px 6px;text-align:right}"
        "img{max-width:100%}pre{background:#f4f4f4;padding:.5em;overflow:auto}"
    )
    return (
        f"<!doctype html><meta charset=utf-8><title>gradmc report</title><style>{html.escape(style)}</style>\n{body}\n"
    )
