"""Accelerator speed-up of the Ising, ordinal and logistic-regression workloads.

Runs the same sampling job on the CPU and on the default accelerator (when JAX sees one)
and prints draws per second and the ratio. Nothing in gradmc changes between the two:
``gradmc.sample(..., devices=[device])`` places the chains on the chosen device.

Usage: ``python benchmarks/gpu_speedup.py [--chains 1000] [--steps 500] [--cpu-steps N]``
(fewer CPU steps keep a run with many chains short; draws per second do not depend on it). On a machine
without an accelerator it measures the CPU alone and says so.
"""

from __future__ import annotations

import argparse
import warnings

import jax
import jax.numpy as jnp

import gradmc
from gradmc.base import RunWarning
from gradmc.report import format_table

WORKLOADS = [
    ("ising 10x10, NCG", "ising", {"side": 10}, "ncg", {"step_size": 0.5}),
    ("ising 32x32, block Gibbs", "ising", {"side": 32}, "block-gibbs", {}),
    ("poly2 ordinal, NCG", "poly2", {}, "ncg", {"step_size": 0.05}),
    ("logistic caravan, MALA", "logistic-caravan", {}, "mala", {"step_size": 1e-3, "adapt": None}),
]


def throughput(device, target, sampler, chains: int, steps: int) -> float:
    trace = gradmc.sample(
        target,
        sampler,
        num_chains=chains,
        num_warmup=0,
        num_draws=steps,
        seed=0,
        progress=False,
        devices=[device],
        keep=lambda x: jnp.mean(x),
    )
    return chains * steps / trace.sampling_seconds


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--chains", type=int, default=1000)
    parser.add_argument("--steps", type=int, default=500)
    parser.add_argument("--cpu-steps", type=int, default=None, help="steps of the CPU runs (default: --steps)")
    args = parser.parse_args()
    # Throughput runs without warm-up: the convergence checks' warnings say nothing here.
    warnings.simplefilter("ignore", RunWarning)
    cpu = jax.devices("cpu")[0]
    accelerator = jax.devices()[0] if jax.default_backend() != "cpu" else None
    print(f"CPU: {cpu}; accelerator: {accelerator or 'none found (CPU only)'}")
    rows = []
    for label, target_name, target_opts, sampler_name, opts in WORKLOADS:
        target = gradmc.target(target_name, **target_opts)
        sampler = gradmc.sampler(sampler_name, **opts)
        cpu_steps = args.cpu_steps or args.steps
        row = {"workload": label, "cpu_draws_per_s": throughput(cpu, target, sampler, args.chains, cpu_steps)}
        if accelerator is not None:
            row["accel_draws_per_s"] = throughput(accelerator, target, sampler, args.chains, args.steps)
            row["speedup"] = row["accel_draws_per_s"] / row["cpu_draws_per_s"]
        rows.append(row)
    print(format_table(rows, title=f"{args.chains} chains x {args.steps} steps (compilation excluded)"))


if __name__ == "__main__":
    main()
