"""Throughput as chains and devices grow.

Draws per second (chains x steps / sampling seconds, compilation excluded) for 10, 100,
1,000 and 10,000 chains of NCG on the 100-D Ising model and of MALA on a 100-D Gaussian,
on 1 and 4 forced CPU devices (each device count runs in its own process, since XLA fixes
the device count at start-up); and a single chain of NCG on a 10^4-site Ising lattice.
Each run records one scalar per chain per step (``keep``), so memory does not grow with
chains x dimension x steps. Goal: throughput within 20% of linear in chains until the
machine's cores saturate.

Usage: ``python benchmarks/scale.py [--steps 200] [--max-chains 10000]``; on a GPU machine
the same script measures the accelerator (``--devices 1``). ``--rolls`` adds the 100-D
Ising model with ``J s`` through the neighbour rolls (``lattice.neighbour_sum``, which
lattices past ``lattice.DENSE_MATVEC_MAX`` sites use) beside its default dense mat-vec,
to check that per-size choice on the machine at hand.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

WORKER = r"""
import json, sys, jax, jax.numpy as jnp, gradmc
from gradmc.targets.lattice import neighbour_sum
from gradmc.targets.quadratic import quadratic_target
steps, chain_counts, rolls = int(sys.argv[1]), [int(c) for c in sys.argv[2].split(",")], sys.argv[3] == "1"
rows = []
ising = gradmc.target("ising", side=10, strength=0.2)
cases = [("ncg", ising, dict(step_size=0.5)),
         ("mala", gradmc.target("gaussian", dim=100), dict(step_size=0.1, adapt=None))]
if rolls:
    adjacency = neighbour_sum(10)
    cases.insert(1, ("ncg", quadratic_target(None, ising.metadata["b"], ising.space,
                                             apply_J=lambda x: 0.2 * adjacency(x),
                                             name="ising (rolls)", max_enumerate=0), dict(step_size=0.5)))
for sampler, target, opts in cases:
    for chains in chain_counts:
        if chains % len(jax.devices()):
            continue
        trace = gradmc.sample(target, gradmc.sampler(sampler, **opts), num_chains=chains, num_warmup=0, num_draws=steps,
                              seed=0, progress=False, keep=lambda x: jnp.mean(x))
        rows.append({"sampler": sampler, "target": target.name, "devices": len(jax.devices()), "chains": chains,
                     "draws_per_s": chains * steps / trace.sampling_seconds})
if len(jax.devices()) == 1:
    big = gradmc.target("ising", side=100)
    trace = gradmc.sample(big, gradmc.sampler("ncg", step_size=0.5), num_chains=1, num_warmup=0, num_draws=steps,
                          seed=0, progress=False, keep=lambda x: jnp.mean(x))
    rows.append({"sampler": "ncg", "target": "ising 100x100", "devices": 1, "chains": 1,
                 "draws_per_s": steps / trace.sampling_seconds})
print(json.dumps(rows))
"""


def run_worker(devices: int, steps: int, chains: str, rolls: bool) -> list[dict]:
    env = dict(os.environ)
    if devices > 1:
        env["XLA_FLAGS"] = f"{env.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count={devices}".strip()
    out = subprocess.run(
        [sys.executable, "-c", WORKER, str(steps), chains, str(int(rolls))],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--max-chains", type=int, default=10000)
    parser.add_argument("--devices", default="1,4", help="device counts to compare (CPU: forced host devices)")
    parser.add_argument(
        "--rolls", action="store_true", help="also run the 100-D Ising model with J s by neighbour rolls"
    )
    args = parser.parse_args()
    chains = ",".join(str(c) for c in (10, 100, 1000, 10000) if c <= args.max_chains)
    rows = [r for d in args.devices.split(",") for r in run_worker(int(d), args.steps, chains, args.rolls)]
    from gradmc.report import format_table

    base = {}
    for r in rows:
        key = (r["sampler"], r["target"], r["devices"])
        base.setdefault(key, r["draws_per_s"] / r["chains"])
        r["vs_linear"] = r["draws_per_s"] / (base[key] * r["chains"])  # 1.0 = perfectly linear in chains
    print(
        format_table(
            rows,
            ["sampler", "target", "devices", "chains", "draws_per_s", "vs_linear"],
            title=f"throughput, {args.steps} steps per chain (vs_linear: draws/s over chains x draws/s of the "
            "smallest run)",
        )
    )


if __name__ == "__main__":
    main()
