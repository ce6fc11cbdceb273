"""The ``gradmc`` command: list, describe, sample, compare, reproduce, merge.

Arguments are checked before any sampling: unknown names, invalid options, a budget the
summary cannot use, an output or checkpoint folder that cannot be written all exit with
status 2 and one line ``gradmc: error: ...`` (unknown names list the valid ones). Ctrl-C
exits with status 130 and says how far the run got and whether rerunning resumes it.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import signal
import sys
import tempfile
import textwrap
import warnings
from collections.abc import Callable
from pathlib import Path

__all__ = ["main", "run_command"]

#: Draws per chain the summary table and the comparison need (ESS and R-hat of split chains).
SUMMARY_MIN_DRAWS = 4


def _parse_options(pairs: list[str] | None, flag: str = "--option") -> dict:
    """``["step_size=0.1", "adapt=None"]`` -> ``{"step_size": 0.1, "adapt": None}``."""
    options = {}
    for pair in pairs or []:
        if "=" not in pair:
            raise ValueError(f"{flag} expects KEY=VALUE, got {pair!r}")
        key, raw = pair.split("=", 1)
        try:
            options[key] = ast.literal_eval(raw)
        except (ValueError, SyntaxError):
            options[key] = raw
    return options


def _per_sampler_options(
    pairs: list[str] | None, names: list[str], what: str = "--samplers", form: str = "SAMPLER"
) -> dict[str, dict]:
    """``["hmc.num_integration_steps=5"]`` -> ``{"hmc": {"num_integration_steps": 5}, ...}`` for ``names``."""
    options: dict[str, dict] = {name: {} for name in names}
    for key, value in _parse_options(pairs, "--option").items():
        name, dot, option = key.rpartition(".")
        if not dot or not option:
            raise ValueError(f"--option with {what} expects {form}.KEY=VALUE, got {key!r}")
        if name not in options:
            raise ValueError(f"--option {key}: {name!r} is not among {what} ({', '.join(names)})")
        options[name][option] = value
    return options


def _sampler_choice(gradmc, text: str, pairs: list[str] | None):
    """What ``sample --sampler`` names: one sampler (with ``--option KEY=VALUE``), ``auto``, or
    one sampler per part of a mixed model, ``beta=nuts,gamma=pavg`` (``mu+sigma=mala`` moves
    two parts together; ``--option gamma.step_size=0.1``, and ``gamma.steps=20`` for the kernel
    steps per sweep; ``joint=mode-shift`` makes the joint move of every block, :mod:`gradmc.mode_shift`,
    in every sweep, ``joint=none`` never, ``joint=auto`` where warm-up finds it worth its cost;
    ``whiten=on``, ``off`` or ``auto`` sets :mod:`gradmc.whitening` of the continuous block;
    ``collapse=off`` keeps every discrete block in the continuous block's moves; ``pairs=off``
    leaves out :mod:`gradmc.switch_pairs`).
    """
    from gradmc.base import COLLAPSE, JOINT, PAIRS, WHITEN

    if "=" not in text:
        if text.strip() == "auto":
            if pairs:
                raise ValueError("--option needs a named sampler; 'auto' takes none")
            return "auto"
        return _sampler(gradmc, text.strip(), _parse_options(pairs))
    blocks = {}
    for pair in text.split(","):
        label, sep, name = (side.strip() for side in pair.partition("="))
        if not sep or not label or not name:
            raise ValueError(f"--sampler expects NAME or PART=NAME,PART=NAME, got {pair.strip()!r} in {text!r}")
        blocks[label] = name
    options = _per_sampler_options(pairs, list(blocks), "--sampler's parts", "PART")
    choice = {}
    for label, name in blocks.items():
        parts = tuple(part.strip() for part in label.split("+"))
        own = options[label]
        if label in (JOINT, WHITEN, COLLAPSE, PAIRS):  # a setting of the whole sweep, not a sampler of a part
            if own:
                raise ValueError(f"--option {label}.*: the {label!r} setting takes no options")
            choice[label] = name
            continue
        steps = own.pop("steps", None)
        if name == "auto" and own:
            raise ValueError(f"--option {label}.*: 'auto' takes no options but steps")
        sampler = name if name == "auto" else _sampler(gradmc, name, own)
        choice[parts if len(parts) > 1 else parts[0]] = sampler if steps is None else (sampler, steps)
    return choice


class _Version(argparse.Action):
    """``--version``: print ``gradmc VERSION`` and exit."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None):
        super().__init__(option_strings, dest, nargs=0, default=default, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        from gradmc import __version__

        print(f"gradmc {__version__}")
        parser.exit()


def _target_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "target", help="a registered target (gradmc list), or a model of yours: FILE.py:NAME or package.module:NAME"
    )
    parser.add_argument(
        "--target-option", action="append", metavar="KEY=VALUE", help="option of a registered target (repeatable)"
    )
    parser.add_argument("--dim", type=int, default=None, metavar="D", help="your model's dimension, when it needs one")
    parser.add_argument(
        "--space",
        default=None,
        metavar="TEXT",
        help="your model's space, e.g. binary:100 or categorical:4x900 (default: real, or what the model declares)",
    )
    parser.add_argument("--data", type=Path, default=None, metavar="FILE", help="data for your model, an .npz file")


def _checkpoint_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--checkpoint", type=Path, default=None, metavar="DIR", help="checkpoint folder: the same command resumes"
    )
    parser.add_argument(
        "--restart", action="store_true", help="discard what --checkpoint holds and start again (e.g. a damaged file)"
    )


def _budget_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--chains", type=int, default=4, help="number of chains (default 4)")
    parser.add_argument("--warmup", type=int, default=1000, help="warm-up steps per chain (default 1000)")
    parser.add_argument(
        "--draws", type=int, default=1000, help=f"kept draws per chain, at least {SUMMARY_MIN_DRAWS} (default 1000)"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=None, metavar="DIR", help="folder for the trace and plots")
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")


def build_parser() -> argparse.ArgumentParser:
    """The ``gradmc`` argument parser."""
    parser = argparse.ArgumentParser(
        prog="gradmc", description="Gradient-based MCMC on continuous and discrete spaces."
    )
    parser.add_argument("--version", action=_Version, help="print the version and exit")
    parser.add_argument("--no-compile-cache", action="store_true", help="compile afresh, without JAX's disk cache")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("list", help="list targets, samplers and experiments, one line each")
    p.add_argument("--options", action="store_true", help="also every option of each sampler: default and meaning")

    p = sub.add_parser("describe", help="a sampler's options: default and meaning of each")
    p.add_argument("sampler")

    p = sub.add_parser("sample", help="run one sampler on a target; summary table, trace file and plots")
    _target_args(p)
    p.add_argument(
        "--sampler",
        default="auto",
        metavar="NAME",
        help=(
            "a sampler (gradmc list), auto (the default), or for a mixed model one per part: beta=nuts,gamma=pavg "
            "(parts not named: auto; joint=mode-shift moves every block together before each sweep, joint=none "
            "never, joint=auto, the default, where warm-up finds it worth its cost; whiten=on|off|auto moves the "
            "continuous block in coordinates fitted to its conditional; pairs=off leaves out the switch pairs)"
        ),
    )
    p.add_argument(
        "--option",
        action="append",
        metavar="KEY=VALUE",
        help="sampler option (repeatable; gradmc describe SAMPLER); PART.KEY=VALUE with one sampler per part",
    )
    p.add_argument(
        "--extended",
        type=int,
        default=None,
        metavar="N",
        help=(
            "sample the pseudo-extended target with N particles (Nemeth et al.); draws are resampled back to the target"
        ),
    )
    p.add_argument(
        "--extended-option",
        action="append",
        metavar="KEY=VALUE",
        help="pseudo-extended option, e.g. beta_bounds=[0.001,1] (repeatable)",
    )
    _checkpoint_args(p)
    _budget_args(p)

    p = sub.add_parser("compare", help="run several samplers on a target with the same budget")
    _target_args(p)
    p.add_argument("--samplers", default="rwm,mala,hmc,nuts", help="comma-separated sampler names")
    p.add_argument(
        "--option",
        action="append",
        metavar="SAMPLER.KEY=VALUE",
        help="option of one of the samplers, e.g. hmc.num_integration_steps=20 (repeatable)",
    )
    _checkpoint_args(p)
    _budget_args(p)

    p = sub.add_parser("merge", help="join the per-process NetCDF traces of a multi-host run along chains")
    p.add_argument("out", type=Path)
    p.add_argument("shards", nargs="+", type=Path)

    p = sub.add_parser("reproduce", help="rerun a published experiment (gradmc list shows them), or --all")
    p.add_argument("experiment", nargs="?", help="experiment name (omit with --all)")
    p.add_argument("--all", action="store_true", help="every experiment, into one report (report/index.html)")
    p.add_argument("--full", action="store_true", help="the paper's budget instead of the quick default")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--out", type=Path, default=None, help="output folder (default out/EXPERIMENT, or report/ with --all)"
    )
    _checkpoint_args(p)
    p.add_argument("--image", type=Path, default=None, help="textbook-denoising: also denoise this PNG")
    p.add_argument("--no-progress", action="store_true")
    return parser


# -- checks before any sampling -------------------------------------------------------------


def _writable_folder(folder: Path, flag: str) -> Path:
    """Create ``folder`` and check a file can be written in it; a ``ValueError`` naming it if not."""
    if folder.exists() and not folder.is_dir():
        raise ValueError(f"{flag} {folder} is a file, not a folder")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as error:
        raise ValueError(f"{flag} {folder}: cannot write there ({error.strerror or error})") from None
    return folder


def _check_draws(draws: int) -> None:
    if draws < SUMMARY_MIN_DRAWS:
        raise ValueError(
            f"--draws {draws}: the summary needs at least {SUMMARY_MIN_DRAWS} draws per chain (ESS and R-hat)"
        )


def _run_length(args) -> dict:
    """The options ``sample`` and ``compare`` share: chains, warm-up, draws, seed, progress."""
    return dict(
        num_chains=args.chains,
        num_warmup=args.warmup,
        num_draws=args.draws,
        seed=args.seed,
        progress=not args.no_progress,
    )


def _check_checkpoint(args) -> None:
    """``--restart`` needs ``--checkpoint``; the checkpoint folder must be writable."""
    if args.restart and args.checkpoint is None:
        raise ValueError("--restart discards a checkpoint: give its folder with --checkpoint DIR")
    if args.checkpoint is not None:
        _writable_folder(args.checkpoint, "--checkpoint")


def _load_target(gradmc, args):
    """A registered target (with ``--target-option``), or a model ``FILE.py:NAME`` / ``module:NAME``
    (with ``--dim``, ``--space``, ``--data``).
    """
    model_options = {"--dim": args.dim, "--space": args.space, "--data": args.data}
    if ":" in args.target or args.target.endswith(".py"):
        if args.target_option:
            raise ValueError(
                f"--target-option sets a registered target's options; {args.target} takes --dim, --space, --data"
            )
        if args.data is not None and not args.data.is_file():
            raise ValueError(f"--data {args.data}: no such file")
        from gradmc.models import load_target

        return load_target(args.target, dim=args.dim, space=args.space, data=args.data)
    given = [flag for flag, value in model_options.items() if value is not None]
    if given:
        raise ValueError(
            f"{' and '.join([', '.join(given[:-1]), given[-1]] if len(given) > 1 else given)} "
            f"{'applies' if len(given) == 1 else 'apply'} to a model given as FILE.py:NAME or "
            f"module:NAME, not to the registered target "
            f"{args.target!r} (its options: --target-option KEY=VALUE)"
        )
    return gradmc.target(args.target, **_parse_options(args.target_option, "--target-option"))


def _sampler(gradmc, name: str, options: dict):
    """``gradmc.sampler(name, **options)``; a former option name prints one ``gradmc: warning:`` line."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", DeprecationWarning)
        recipe = gradmc.sampler(name, **options)
    for w in caught:
        print(f"gradmc: warning: {w.message}", file=sys.stderr)
    return recipe


# -- after the run ----------------------------------------------------------------------------


def _sampling(run: Callable):
    """``run()`` without Python's display of the run's :class:`~gradmc.diagnostics.health.RunWarning`:
    :func:`_report_warnings` prints them, one line each.
    """
    from gradmc.diagnostics.health import RunWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RunWarning)
        return run()


def _report_warnings(traces) -> None:
    """Each of the traces' warnings (which start with the sampler's name) as one line
    ``gradmc: warning: ...`` on stderr.
    """
    for trace in traces:
        for line in trace.warnings:
            print(f"gradmc: warning: {line}", file=sys.stderr)


# -- commands ---------------------------------------------------------------------------------


_ROLE = re.compile(r":\w+:`~?([^`]+)`")  # :func:`name` -> name, in docstrings shown as plain text


def _format_default(value) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _option_lines(name: str, indent: str) -> list[str]:
    """One entry per option of the sampler ``name``: ``name = default  (type)`` and its meaning."""
    from gradmc import registry

    lines = []
    for option in registry.sampler_options(name):
        kind = f"  ({option.type})" if option.type else ""
        lines.append(f"{indent}{option.name} = {_format_default(option.default)}{kind}")
        doc = _ROLE.sub(r"\1", option.doc).replace("``", "") or "(undocumented)"
        lines.extend(textwrap.wrap(doc, 100, initial_indent=indent + "    ", subsequent_indent=indent + "    "))
    return lines


def _cmd_list(args) -> int:
    from gradmc import registry

    for title, entries in (
        ("targets", registry.targets()),
        ("samplers", registry.samplers()),
        ("experiments", registry.experiments()),
    ):
        print(f"{title}:")
        width = max((len(e.name) for e in entries), default=0)
        for e in entries:
            print(f"  {e.name.ljust(width)}  [{e.kind}] {e.description}")
            if args.options and title == "samplers":
                print("\n".join(_option_lines(e.name, "      ")))
    return 0


def _cmd_describe(args) -> int:
    from gradmc import registry

    options = _option_lines(args.sampler, "  ")  # an unknown name fails here, listing the valid ones
    entry = next(e for e in registry.samplers() if e.name == args.sampler)
    print(f"{entry.name} [{entry.kind}]: {entry.description}")
    print("options (--option KEY=VALUE):" if options else "options: none")
    if options:
        print("\n".join(options))
    return 0


def _cmd_sample(gradmc, args) -> int:
    import numpy as np

    from gradmc import diagnostics, report

    if args.extended_option and args.extended is None:
        raise ValueError("--extended-option needs --extended N")
    _check_draws(args.draws)
    recipe = _sampler_choice(gradmc, args.sampler, args.option)  # a bad choice fails before the model loads
    target = _load_target(gradmc, args)
    extended_options = _parse_options(args.extended_option, "--extended-option")
    _check_checkpoint(args)
    run_name = recipe.name if hasattr(recipe, "name") else re.sub(r"[^\w+.-]+", "_", args.sampler)
    out = _writable_folder(args.out or Path("out") / f"{target.name}-{run_name}", "--out")
    trace = _sampling(
        lambda: gradmc.sample(
            target,
            recipe,
            **_run_length(args),
            checkpoint=args.checkpoint,
            restart=args.restart,
            extended=args.extended,
            extended_options=extended_options,
        )
    )
    posterior = trace.posterior()  # the model's names (NumPyro: constrained values), computed once
    values, names, scalar, discrete = report.named_coordinates(posterior)
    with_truth = target.truth is not None and target.truth.mean is not None and values.shape[-1] == target.dim
    table = diagnostics.summary(values[:, :, : report.MAX_RANKED], target.truth if with_truth else None)
    table["name"] = names[: report.MAX_RANKED]
    rows = report.worst_first(table["r_hat"], scalar[: report.MAX_RANKED], 10, discrete[: report.MAX_RANKED])
    mixing = {"r_hat": table["r_hat"], "ess": table["ess_bulk"]}  # every coordinate's, for the discrete sites' line
    table = {column: [v[i] for i in rows] if column == "name" else np.asarray(v)[rows] for column, v in table.items()}
    order = (
        "continuous scalars first, then the largest R-hat, continuous entries before discrete ones"
        if discrete.any()
        else "scalars first, then the largest R-hat"
    )
    shown = "" if len(names) <= 10 else f" (10 of {len(names)} coordinates: {order})"
    print(f"{trace.sampler} on {target.name}{shown}")
    print(diagnostics.format_summary(table))
    print(
        f"acceptance {trace.acceptance_rate:.3f}  divergent {trace.num_divergent}  nonfinite {trace.num_nonfinite}  "
        f"gradient evals {trace.num_grad_evals}  sampling {trace.sampling_seconds:.2f} s  "
        f"compile {trace.timing['compile_s']:.2f} s"
    )
    frequencies = report.format_value_frequencies(posterior, **mixing) if trace.variables is not None else ""
    if frequencies:
        print(frequencies)
    print(report.format_params(trace.params))
    if trace.extended is not None:
        print(
            f"pseudo-extended, N = {args.extended}: importance-weight ESS {trace.extended.ess:.0f} of "
            f"{trace.extended.weights.size} particles ({trace.extended.ess_per_iteration:.2f} of N per iteration)"
        )
    trace.save_netcdf(out / "trace.nc")
    report.plot_trace(trace, out / "trace.png", title=f"{trace.sampler} on {target.name}", posterior=posterior)
    if target.dim == 2:
        report.plot_pairs(trace.draws, out / "pairs.png", title=f"{trace.sampler} on {target.name}")
    print(f"wrote {out}/trace.nc and plots")
    _report_warnings([trace])
    return 0


def _cmd_compare(gradmc, args) -> int:
    from gradmc import report
    from gradmc.compare import compare, ranked, rows_as_json
    from gradmc.run import checkpoint_root
    from gradmc.run.store import discard_checkpoint

    _check_draws(args.draws)
    names = [s.strip() for s in args.samplers.split(",") if s.strip()]
    if not names:
        raise ValueError("--samplers names no sampler")
    options = _per_sampler_options(args.option, names)
    target = _load_target(gradmc, args)
    recipes = [_sampler(gradmc, n, options[n]) for n in names]  # unknown names and options fail here
    _check_checkpoint(args)
    out = _writable_folder(args.out or Path("out") / f"compare-{target.name}", "--out")
    if args.restart:
        discard_checkpoint(args.checkpoint)
    with checkpoint_root(args.checkpoint):
        result = _sampling(
            lambda: compare(
                target,
                recipes,
                **_run_length(args),
            )
        )
    print(
        report.format_compare(
            ranked(result.rows),
            title=f"{target.name}: {args.chains} chains x {args.draws} draws after {args.warmup} warm-up",
        )
    )
    (out / "table.json").write_text(json.dumps(rows_as_json(result.rows), indent=1, allow_nan=False))
    report.plot_compare_bars(
        ranked(result.rows),
        ["median_ess_per_grad", "min_ess_per_s", "mean_err"],
        out / "compare.png",
        title=target.name,
    )
    if target.dim == 2 and target.bounds is not None:
        report.plot_draws_over_density(
            target.logdensity_fn,
            target.bounds,
            {k: t.draws for k, t in result.traces.items()},
            out / "draws.png",
            title=target.name,
        )
    print(f"wrote {out}/table.json, compare.png" + (", draws.png" if target.dim == 2 and target.bounds else ""))
    _report_warnings(result.traces.values())
    return 0


def _cmd_reproduce(args) -> int:
    from gradmc import registry
    from gradmc.reproduce import run_all, run_experiment
    from gradmc.run import checkpoint_root
    from gradmc.run.store import discard_checkpoint

    if args.image is not None and not args.image.is_file():
        raise ValueError(f"--image {args.image}: no such file")
    if args.all == bool(args.experiment):
        raise ValueError(
            "give one experiment name, or --all (valid names: "
            + ", ".join(e.name for e in registry.experiments())
            + ")"
        )
    if not args.all:
        registry.experiment(args.experiment)  # unknown names fail before any work
    _check_checkpoint(args)
    out = _writable_folder(args.out or (Path("report") if args.all else Path("out") / args.experiment), "--out")
    if args.image is not None:
        os.environ["GRADMC_DENOISE_IMAGE"] = str(args.image)
    if args.restart:
        discard_checkpoint(args.checkpoint)
    with checkpoint_root(args.checkpoint):
        if args.all:
            index = run_all(out, full=args.full, seed=args.seed, progress=not args.no_progress)
            print(f"wrote {index} and {index.with_suffix('.md')}")
            return 0
        result = run_experiment(args.experiment, out, full=args.full, seed=args.seed, progress=not args.no_progress)
    print(result["text"])
    print(f"wrote {out}/report.md ({result['seconds']:.0f} s)")
    return 0 if result["ok"] else 1


def _cmd_merge(args) -> int:
    from gradmc.trace import merge_netcdf

    missing = [str(p) for p in args.shards if not p.exists()]
    if missing:
        raise ValueError(f"no such shard file(s): {', '.join(missing)}")
    _writable_folder(args.out.parent, "output folder of")
    print(f"wrote {merge_netcdf(args.shards, args.out)}")
    return 0


def _interrupted(stop: KeyboardInterrupt) -> str:
    """The line Ctrl-C prints: how far the run got, and whether the same command resumes it."""
    from gradmc.run.sampling import RunInterrupted

    if not isinstance(stop, RunInterrupted):
        return "gradmc: interrupted"
    where = f"gradmc: {stop.run}: interrupted after {stop.done} of {stop.total} steps"
    if stop.checkpoint is None:
        return f"{where}; nothing was saved (with --checkpoint DIR a rerun of the same command resumes)"
    return f"{where}; rerun the same command to resume (checkpoint in {stop.checkpoint})"


def main(argv: list[str] | None = None) -> int:
    """Run the ``gradmc`` command; returns its exit status (2 for invalid input, 130 after Ctrl-C).

    Parameters
    ----------
    argv : list of str, optional
        The arguments (default: ``sys.argv[1:]``).
    """
    args = build_parser().parse_args(argv)
    if args.command in ("sample", "compare", "reproduce") and not args.no_progress and sys.stderr.isatty():
        print(f"gradmc {args.command}: loading JAX and the samplers...", file=sys.stderr, flush=True)  # ~1 s
    if not args.no_compile_cache:
        from gradmc.compile_cache import enable_compilation_cache

        enable_compilation_cache()
    import gradmc

    commands = {
        "list": lambda: _cmd_list(args),
        "describe": lambda: _cmd_describe(args),
        "sample": lambda: _cmd_sample(gradmc, args),
        "compare": lambda: _cmd_compare(gradmc, args),
        "reproduce": lambda: _cmd_reproduce(args),
        "merge": lambda: _cmd_merge(args),
    }
    from gradmc.reproduce import MissingExtraError

    try:
        return commands[args.command]()
    except (gradmc.UnknownNameError, ValueError, TypeError, MissingExtraError) as err:
        print(f"gradmc: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as stop:
        print(_interrupted(stop), file=sys.stderr)
        return 130


def run_command() -> None:
    """The ``gradmc`` console script: :func:`main`, then the process's exit with its status.

    A Ctrl-C that arrives once the command has returned (while Python and JAX shut down) is
    ignored, so a finished run exits with its own status instead of a stray
    ``KeyboardInterrupt`` traceback.
    """
    status = main()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    sys.exit(status)


if __name__ == "__main__":
    run_command()
