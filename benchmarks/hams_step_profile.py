"""Where a step's time goes: NCG's, V-PDHAMS's and O-PDHAMS's step on DISCS's 100x100 Ising
model (100 chains, the loops of ``hams_step_cost.py`` part (c)), traced by JAX's profiler.

Prints, per sampler, the device operations (XLA fusions and library calls) that take the
most time per step, summed over the traced steps, with the trace line each was recorded on
(a GPU's per-operation line nests inside its per-program line). On a GPU these are the kernels the GPU
ran; on a CPU, the operations the profiler records. The trace itself (Perfetto's JSON) is
written beside, for a closer look at https://ui.perfetto.dev.

Usage: ``python benchmarks/hams_step_profile.py [--steps 50] [--top 12] [--out out/profile]``.
"""

from __future__ import annotations

import argparse
import gzip
import json
import warnings
from collections import defaultdict
from pathlib import Path

import jax
from hams_step_cost import ising100_loops

from gradmc.base import RunWarning


def device_times(trace_file: Path) -> tuple[dict, str]:
    """Total duration (µs) of each operation name in a Perfetto JSON trace, from the device's
    processes (the GPU's streams when there are any, else every process), and what was read."""
    events = json.loads(gzip.open(trace_file).read())
    events = events["traceEvents"] if isinstance(events, dict) else events
    process_names = {
        e["pid"]: e["args"]["name"] for e in events if e.get("ph") == "M" and e.get("name") == "process_name"
    }
    gpu = {pid for pid, name in process_names.items() if "GPU" in name or "gpu" in name}
    chosen = gpu or set(process_names)
    threads = {
        (e["pid"], e["tid"]): e["args"]["name"] for e in events if e.get("ph") == "M" and e.get("name") == "thread_name"
    }
    totals = defaultdict(float)  # by (thread, operation): a GPU's "XLA Ops" line nests inside "XLA Modules"
    for e in events:
        if e.get("ph") == "X" and e.get("pid") in chosen:
            totals[(threads.get((e["pid"], e.get("tid")), "?"), e["name"])] += float(e.get("dur", 0.0))
    return totals, ", ".join(sorted(process_names[p] for p in chosen))


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--top", type=int, default=12)
    parser.add_argument("--out", type=Path, default=Path("out/profile"))
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore", RunWarning)  # the short warm-up that learns W warns, by design
    loops, _ = ising100_loops(args.steps)
    print(f"devices: {jax.devices()}; 100 chains; {args.steps} traced steps per sampler")
    for name, run in loops.items():
        folder = args.out / name
        jax.block_until_ready(run(jax.random.key(1)))
        with jax.profiler.trace(str(folder), create_perfetto_trace=True):
            jax.block_until_ready(run(jax.random.key(2)))
        trace_file = next(folder.rglob("perfetto_trace.json.gz"))
        totals, read = device_times(trace_file)
        print(f"\n{name}, ms per step ({read}; thread: operation):")
        for (thread, op), us in sorted(totals.items(), key=lambda item: -item[1])[: args.top]:
            print(f"  {1e-3 * us / args.steps:9.4f} ms  {thread[:24]}: {op[:90]}")


if __name__ == "__main__":
    main()
