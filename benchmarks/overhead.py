"""Runner overhead and step cost, measured in one run.

(a) ``gradmc.sample`` against a hand-written ``lax.scan(vmap(blackjax step))`` for RWM,
    MALA, HMC-10 and NUTS on Neal's 100-D Gaussian, 100 chains, same fixed step size
    and no warm-up, so both run the same transitions. Goal <= 1.05x.
(b) Time per step of RWM, MALA and AM divided by one batched log-density+gradient
    evaluation (also timed inside a ``lax.scan``), on a target whose evaluation
    dominates (logistic regression, 5,000 data x 100 features) and on the cheap Neal
    Gaussian, where random numbers dominate. Goal <= 1.3 for RWM/MALA on the former.
(c) Wall time of the README's ``gradmc compare banana`` in a fresh process: without
    JAX's compilation cache (goal < 30 s), and with it, first in an empty cache folder
    and then repeated. Goal: the repeated run takes <= 50 % of the first.

Usage: ``python benchmarks/overhead.py [--quick] [--parts abc]``. Timings are the median of repeats.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import blackjax
import jax
import jax.numpy as jnp
import numpy as np

import gradmc
from gradmc.report import format_table


def median_time(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(fn())
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def blackjax_loop(step, states, num_steps: int, chains: int):
    """The hand-written baseline: scan over steps of vmapped BlackJAX steps, keeping draws."""

    @jax.jit
    def run(key, states):
        def body(states, key):
            states, _ = jax.vmap(step)(jax.random.split(key, chains), states)
            return states, states.position

        return jax.lax.scan(body, states, jax.random.split(key, num_steps))

    run(jax.random.key(0), states)  # compile
    # like gradmc.sample, bring the draws to the host (numpy), where users analyse them
    return lambda: np.asarray(run(jax.random.key(1), states)[1])


def gradmc_run(target, sampler, num_steps: int, chains: int, init=None):
    def go():
        return gradmc.sample(
            target, sampler, num_chains=chains, num_warmup=0, num_draws=num_steps, seed=1, progress=False, init=init
        )

    def timed():
        return go().timing["sampling_s"]

    return timed


def part_a(steps: int, chains: int, repeats: int) -> list[dict]:
    target = gradmc.target("neal-100")
    logdensity = target.logdensity_fn
    x0 = jax.random.normal(jax.random.key(0), (chains, target.dim)) * 0.1
    d = target.dim
    imm = jnp.ones(d)
    cases = [
        (
            "rwm",
            gradmc.sampler("rwm", step_size=0.02, adapt=None),
            blackjax.additive_step_random_walk.normal_random_walk(logdensity, 0.02 * jnp.ones(d)),
        ),
        ("mala", gradmc.sampler("mala", step_size=2e-4, adapt=None), blackjax.mala(logdensity, 2e-4)),
        (
            "hmc-10",
            gradmc.sampler("hmc", step_size=0.01, adapt=None, num_integration_steps=10),
            blackjax.hmc(logdensity, 0.01, imm, 10),
        ),
        ("nuts", gradmc.sampler("nuts", step_size=0.01), blackjax.nuts(logdensity, 0.01, imm)),
    ]
    rows = []
    for name, sampler, alg in cases:
        n = steps // 10 if name == "nuts" else steps  # a NUTS step is ~100x dearer here
        states = jax.vmap(alg.init)(x0)
        baseline = blackjax_loop(alg.step, states, n, chains)
        ours = gradmc_run(target, sampler, n, chains, init=x0)  # same starts as the baseline
        ours()  # warm the compilation cache path once
        t_ours = statistics.median(ours() for _ in range(repeats))
        t_bj = median_time(baseline, repeats)
        rows.append({"sampler": name, "steps": n, "gradmc_s": t_ours, "blackjax_s": t_bj, "ratio": t_ours / t_bj})
    return rows


def evaluation_time(target, chains: int, steps: int, repeats: int, with_grad: bool) -> float:
    """Seconds per batched (vmapped over chains) evaluation, measured inside a scan."""
    fn = jax.value_and_grad(target.logdensity_fn) if with_grad else target.logdensity_fn

    @jax.jit
    def run(x):
        def body(x, _):
            out = jax.vmap(fn)(x)
            # feed the results back (value and gradient) so XLA can neither hoist the
            # evaluation out of the loop nor drop the gradient as dead code
            feedback = out[0][:, None] + out[1] if with_grad else out[:, None]
            return x + 1e-30 * feedback, None

        return jax.lax.scan(body, x, None, length=steps)[0]

    x = jax.vmap(target.draw_initial)(jax.random.split(jax.random.key(0), chains)) * 0.01
    run(x)
    return median_time(lambda: run(x), repeats) / steps


def part_b(steps: int, chains: int, repeats: int, num_data: int) -> list[dict]:
    rows = []
    targets = [
        gradmc.target("logistic-synthetic", num_data=num_data, num_features=100, seed=0),
        gradmc.target("neal-100"),
    ]
    for target in targets:
        eval_grad = evaluation_time(target, chains, steps, repeats, True)
        eval_only = evaluation_time(target, chains, steps, repeats, False)
        for name, sampler in [
            ("rwm", gradmc.sampler("rwm", step_size=1e-3, adapt=None)),
            ("mala", gradmc.sampler("mala", step_size=1e-5, adapt=None)),
            ("am", gradmc.sampler("am")),
        ]:
            run = gradmc_run(target, sampler, steps, chains)
            run()
            per_step = statistics.median(run() for _ in range(repeats)) / steps
            rows.append(
                {
                    "target": target.name,
                    "sampler": name,
                    "step_ms": 1e3 * per_step,
                    "eval+grad_ms": 1e3 * eval_grad,
                    "eval_ms": 1e3 * eval_only,
                    "step/(eval+grad)": per_step / eval_grad,
                    "step/eval": per_step / eval_only,
                }
            )
    return rows


#: The main job of the README, without progress output.
COMPARE_BANANA = [
    "compare",
    "banana",
    "--samplers",
    "rwm,mala,am,hmc,nuts",
    "--warmup",
    "1000",
    "--draws",
    "4000",
    "--option",
    "nuts.target_accept=0.95",
    "--no-progress",
]


def part_c(repeats: int) -> dict:
    """Seconds of ``gradmc compare banana`` in fresh processes, wall clock and the process's
    CPU time (steadier on a shared machine): without the compilation cache, with an empty
    cache (a fresh folder), then again with the cache that run filled. The three run in
    turn, ``repeats`` times; medians.
    """

    def run(cache: Path, *flags: str) -> tuple[float, float]:
        env = {k: v for k, v in os.environ.items() if k != "GRADMC_NO_COMPILE_CACHE"}
        env["XDG_CACHE_HOME"] = str(cache)
        cmd = [sys.executable, "-m", "gradmc.cli", *flags, *COMPARE_BANANA, "--out", str(cache / "out")]
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True, capture_output=True, env=env)
        wall = time.perf_counter() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        return wall, (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)

    times: dict[str, list] = {"no_cache": [], "first": [], "repeated": []}
    with tempfile.TemporaryDirectory() as folder:
        for i in range(repeats):
            cache = Path(folder) / f"run{i}"
            times["no_cache"].append(run(cache, "--no-compile-cache"))
            times["first"].append(run(cache))
            times["repeated"].append(run(cache))
    return {
        f"{name}_{clock}": statistics.median(t[k] for t in runs)
        for name, runs in times.items()
        for k, clock in enumerate(("wall_s", "cpu_s"))
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="fewer steps and repeats")
    parser.add_argument("--parts", default="abc", help="which parts to run (default abc)")
    args = parser.parse_args()
    steps, repeats = (200, 2) if args.quick else (1000, 3)
    chains = 100
    print(
        f"jax {jax.__version__}, blackjax {blackjax.__version__}, devices {jax.devices()}, {chains} chains, "
        f"{steps} steps"
    )
    if "a" in args.parts:
        print(
            format_table(
                part_a(steps, chains, repeats),
                title="(a) runner overhead on Neal's 100-D Gaussian: gradmc.sample vs lax.scan(vmap(blackjax step))",
            )
        )
    if "b" in args.parts:
        print(
            format_table(
                part_b(steps // 4 if not args.quick else 50, chains, repeats, 5000),
                title="\n(b) time per step / one batched evaluation (100 chains)",
            )
        )
    if "c" in args.parts:
        n = 1 if args.quick else 3
        c = part_c(n)
        print(f"\n(c) `gradmc {' '.join(COMPARE_BANANA)}` in a fresh process, median of {n}:")
        for clock in ("wall_s", "cpu_s"):
            print(
                f"    {clock}: without the compilation cache {c['no_cache_' + clock]:.1f}, first run (empty cache) "
                f"{c['first_' + clock]:.1f}, repeated run {c['repeated_' + clock]:.1f}; "
                f"repeated / first = {c['repeated_' + clock] / c['first_' + clock]:.2f} (goal <= 0.5)"
            )


if __name__ == "__main__":
    main()
