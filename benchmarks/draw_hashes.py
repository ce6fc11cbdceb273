"""Fingerprints of seeded draws: every registered sampler on small targets of its spaces.

A restructuring of the code above the kernels must not change what a seed draws. This
script runs each registered sampler, at its defaults, on every small target below that it
accepts (2 chains, 200 warm-up steps, 50 draws, seed 0) and prints a SHA-256 of the kept
draws and the acceptance statistics. ``--record FILE`` writes them; ``--check FILE``
compares with a recording and lists every difference (bit-level: a different XLA program
for the same arithmetic can change the last bits of float32 draws, so each difference is
a place to look, and the summary's mean and acceptance say whether it is more than
rounding).

Usage::

    python benchmarks/draw_hashes.py --record benchmarks/draw_hashes.json
    python benchmarks/draw_hashes.py --check benchmarks/draw_hashes.json [--samplers ncg,avg]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import warnings
from pathlib import Path

import numpy as np

import gradmc
from gradmc.registry import samplers

#: Small targets, one per kind of space a sampler may accept.
TARGETS = {
    "gaussian-3": lambda: gradmc.target("gaussian", dim=3),
    "banana": lambda: gradmc.target("banana"),
    "ising-3x3": lambda: gradmc.target("ising", side=3, strength=0.3),
    "ising-3x3-binary": lambda: gradmc.target("ising", side=3, strength=0.3, spin=False),
    "potts-3x3": lambda: gradmc.target("potts", side=3, num_states=3),
    "quadratic-binary": lambda: gradmc.target("quadratic", d=5),
    "quadratic-ordinal": lambda: gradmc.target("quadratic", d=4, space="ordinal", num_values=4),
}

SETTINGS = {"num_chains": 2, "num_warmup": 200, "num_draws": 50, "seed": 0, "progress": False}


def fingerprint(trace) -> dict:
    """SHA-256 of the draws and acceptance rates, with their means for a reader."""
    draws = np.ascontiguousarray(np.asarray(trace.draws))
    accept = np.ascontiguousarray(np.asarray(trace.stats["acceptance_rate"], np.float32))
    digest = hashlib.sha256(draws.tobytes() + accept.tobytes()).hexdigest()[:16]
    return {"hash": digest, "mean": float(np.mean(draws)), "acceptance": float(np.nanmean(accept))}


def run_all(names: list[str] | None) -> dict:
    results = {}
    entries = [e for e in samplers() if names is None or e.name in names]
    built = {key: make() for key, make in TARGETS.items()}
    for entry in entries:
        for key, target in built.items():
            fits = entry.kind == "any" or entry.kind == ("discrete" if target.space.is_discrete else "continuous")
            if not fits:
                continue
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                try:
                    trace = gradmc.sample(target, entry.name, **SETTINGS)
                except (ValueError, TypeError) as error:
                    results[f"{entry.name} | {key}"] = {"refused": str(error).splitlines()[0][:120]}
                    continue
            results[f"{entry.name} | {key}"] = fingerprint(trace)
            print(f"{entry.name:22s} {key:20s} {results[f'{entry.name} | {key}']}", flush=True)
    return results


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--record", type=Path, help="write the fingerprints to this JSON file")
    group.add_argument("--check", type=Path, help="compare with the fingerprints in this JSON file")
    parser.add_argument("--samplers", help="comma-separated sampler names (default: all)")
    args = parser.parse_args(argv)
    names = args.samplers.split(",") if args.samplers else None
    results = run_all(names)
    if args.record:
        args.record.write_text(json.dumps(results, indent=1, sort_keys=True) + "\n")
        print(f"wrote {len(results)} fingerprints to {args.record}")
        return 0
    recorded = json.loads(args.check.read_text())
    differ = added = 0
    for key in sorted(set(recorded) | set(results)):
        if names is not None and key.split(" | ")[0] not in names:
            continue
        old, new = recorded.get(key), results.get(key)
        if old is None:
            added += 1
            print(f"NEW {key}: {new}")
        elif old != new:
            differ += 1
            print(f"DIFFERS {key}: recorded {old}, now {new}")
    print(f"{differ} of {len(results) - added} recorded fingerprints differ; {added} new")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
