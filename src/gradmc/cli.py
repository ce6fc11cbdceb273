"""The ``gradmc`` command: list, sample, compare, reproduce.

Exit status 2 for unknown names and invalid arguments (with the list of valid names).
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import sys
from pathlib import Path

__all__ = ["main"]


def _parse_options(pairs: list[str] | None) -> dict:
    """``["step_size=0.1", "adapt=None"]`` -> ``{"step_size": 0.1, "adapt": None}``."""
    options = {}
    for pair in pairs or []:
        if "=" not in pair:
            raise ValueError(f"--option expects KEY=VALUE, got {pair!r}")
        key, raw = pair.split("=", 1)
        try:
            options[key] = ast.literal_eval(raw)
        except (ValueError, SyntaxError):
            options[key] = raw
    return options


def _budget_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--chains", type=int, default=4, help="number of chains (default 4)")
    parser.add_argument("--warmup", type=int, default=1000, help="warm-up steps per chain (default 1000)")
    parser.add_argument("--draws", type=int, default=1000, help="kept draws per chain (default 1000)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=None, help="folder for the trace and plots")
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gradmc", description="Gradient-based MCMC on continuous and discrete spaces."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="list targets, samplers and experiments, one line each")

    p = sub.add_parser("sample", help="run one sampler on a target; summary table, trace file and plots")
    p.add_argument("target")
    p.add_argument("--sampler", required=True)
    p.add_argument("--option", action="append", metavar="KEY=VALUE", help="sampler option (repeatable)")
    p.add_argument("--target-option", action="append", metavar="KEY=VALUE", help="target option (repeatable)")
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
    p.add_argument("--checkpoint", type=Path, default=None, help="checkpoint folder: the same command resumes")
    _budget_args(p)

    p = sub.add_parser("compare", help="run several samplers on a target with the same budget")
    p.add_argument("target")
    p.add_argument("--samplers", default="rwm,mala,hmc,nuts", help="comma-separated sampler names")
    p.add_argument("--target-option", action="append", metavar="KEY=VALUE", help="target option (repeatable)")
    p.add_argument("--checkpoint", type=Path, default=None, help="checkpoint folder: the same command resumes")
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
    p.add_argument("--checkpoint", type=Path, default=None, help="checkpoint folder: the same command resumes")
    p.add_argument("--image", type=Path, default=None, help="textbook-denoising: also denoise this PNG")
    p.add_argument("--no-progress", action="store_true")
    return parser


def _cmd_list(gradmc) -> int:
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
    return 0


def _cmd_sample(gradmc, args) -> int:
    from gradmc import diagnostics, report

    target = gradmc.target(args.target, **_parse_options(args.target_option))
    recipe = gradmc.sampler(args.sampler, **_parse_options(args.option))
    if args.extended_option and args.extended is None:
        raise ValueError("--extended-option needs --extended N")
    trace = gradmc.sample(
        target,
        recipe,
        num_chains=args.chains,
        num_warmup=args.warmup,
        num_draws=args.draws,
        seed=args.seed,
        progress=not args.no_progress,
        checkpoint=args.checkpoint,
        extended=args.extended,
        extended_options=_parse_options(args.extended_option),
    )
    table = diagnostics.summary(trace.draws, target.truth, max_coords=10)
    shown = "" if target.dim <= 10 else f" (first 10 of {target.dim} coordinates)"
    print(f"{trace.sampler} on {target.name}{shown}")
    print(diagnostics.format_summary(table))
    print(
        f"acceptance {trace.acceptance_rate:.3f}  divergent {trace.num_divergent}  nonfinite {trace.num_nonfinite}  "
        f"gradient evals {trace.num_grad_evals}  sampling {trace.sampling_seconds:.2f} s  "
        f"compile {trace.timing['compile_s']:.2f} s"
    )
    print(report.format_params(trace.params))
    if trace.extended is not None:
        print(
            f"pseudo-extended, N = {args.extended}: importance-weight ESS {trace.extended.ess:.0f} of "
            f"{trace.extended.weights.size} particles ({trace.extended.ess_per_iteration:.2f} of N per iteration)"
        )
    out = args.out or Path("out") / f"{target.name}-{trace.sampler}"
    out.mkdir(parents=True, exist_ok=True)
    trace.save_netcdf(out / "trace.nc")
    report.plot_trace(trace.draws, out / "trace.png", title=f"{trace.sampler} on {target.name}")
    if target.dim == 2:
        report.plot_pairs(trace.draws, out / "pairs.png", title=f"{trace.sampler} on {target.name}")
    print(f"wrote {out}/trace.nc and plots")
    return 0


def _cmd_compare(gradmc, args) -> int:
    from gradmc import report
    from gradmc.compare import COMPARE_COLUMNS, compare
    from gradmc.run import checkpoint_root

    target = gradmc.target(args.target, **_parse_options(args.target_option))
    names = [s.strip() for s in args.samplers.split(",") if s.strip()]
    recipes = [gradmc.sampler(n) for n in names]  # fail fast on unknown names
    with checkpoint_root(args.checkpoint):
        result = compare(
            target,
            recipes,
            num_chains=args.chains,
            num_warmup=args.warmup,
            num_draws=args.draws,
            seed=args.seed,
            progress=not args.no_progress,
        )
    extra = [c for c in ("divergent", "nonfinite") if any(c in r for r in result.rows)]
    print(
        report.format_table(
            result.rows,
            COMPARE_COLUMNS + extra,
            title=f"{target.name}: {args.chains} chains x {args.draws} draws after {args.warmup} warm-up",
        )
    )
    out = args.out or Path("out") / f"compare-{target.name}"
    out.mkdir(parents=True, exist_ok=True)
    (out / "table.json").write_text(json.dumps(result.rows, indent=1, default=float))
    report.plot_compare_bars(
        result.rows, ["min_ess_per_s", "ess_per_grad", "mean_err"], out / "compare.png", title=target.name
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
    return 0


def _cmd_reproduce(gradmc, args) -> int:
    from gradmc import registry
    from gradmc.reproduce import run_all, run_experiment
    from gradmc.run import checkpoint_root

    if args.image is not None:
        if not args.image.exists():
            raise ValueError(f"no such image: {args.image}")
        os.environ["GRADMC_DENOISE_IMAGE"] = str(args.image)
    if args.all == bool(args.experiment):
        raise ValueError(
            "give one experiment name, or --all (valid names: "
            + ", ".join(e.name for e in registry.experiments())
            + ")"
        )
    with checkpoint_root(args.checkpoint):
        if args.all:
            index = run_all(args.out or Path("report"), full=args.full, seed=args.seed, progress=not args.no_progress)
            print(f"wrote {index} and {index.with_suffix('.md')}")
            return 0
        registry.experiment(args.experiment)  # unknown names fail before any work
        result = run_experiment(
            args.experiment,
            args.out or Path("out") / args.experiment,
            full=args.full,
            seed=args.seed,
            progress=not args.no_progress,
        )
    print(result["text"])
    print(f"wrote {args.out or Path('out') / args.experiment}/report.md ({result['seconds']:.0f} s)")
    return 0 if result["ok"] else 1


def _cmd_merge(args) -> int:
    from gradmc.trace import merge_netcdf

    missing = [str(p) for p in args.shards if not p.exists()]
    if missing:
        raise ValueError(f"no such shard file(s): {', '.join(missing)}")
    print(f"wrote {merge_netcdf(args.shards, args.out)}")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Run the ``gradmc`` command; returns its exit status (2 for invalid input).

    Parameters
    ----------
    argv : list of str, optional
        The arguments (default: ``sys.argv[1:]``).
    """
    args = build_parser().parse_args(argv)
    import gradmc

    commands = {
        "list": lambda: _cmd_list(gradmc),
        "sample": lambda: _cmd_sample(gradmc, args),
        "compare": lambda: _cmd_compare(gradmc, args),
        "reproduce": lambda: _cmd_reproduce(gradmc, args),
        "merge": lambda: _cmd_merge(args),
    }
    from gradmc.reproduce import MissingExtraError

    try:
        return commands[args.command]()
    except (gradmc.UnknownNameError, ValueError, TypeError, MissingExtraError) as err:
        print(f"gradmc: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
