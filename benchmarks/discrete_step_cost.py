"""Step cost of the discrete samplers (issue 3's benchmark), one run, 100 chains.

(a) On a target whose evaluation dominates — the dense quadratic f(s) = sᵀJs + bᵀs on
    1000 binary coordinates — time per step divided by one batched log-density+gradient
    evaluation (timed inside a ``lax.scan``). Goal <= 1.3 for the gradient samplers (the
    paper: "the predominant cost is a single function and gradient evaluation").
(b) On the 100-D Ising model (10×10 periodic, spins) and the 20-D ordinal target poly2,
    where the evaluation is cheap and random numbers and the proposal dominate: our step
    time divided by a minimal fused NCG step written inline below (one function: the
    factorised proposal, one evaluation, the MH test). Goal <= 1.2.
    Table (a) shows the same fused step's ratio: on a CPU the proposal's d·k
    exponentials and logarithms cost about as much as the 1000×1000 matrix products.

Samplers: NCG, AVG, PAVG (M given: the Hessian 2J of the quadratic/Ising, the exact
precision of poly2 — a fixed M, as after warm-up), GWG, single-site Gibbs (systematic
scan; a sweep is d steps, its ratio is d × the step's) and MH-uniform (r = 1). Our steps
are timed as the library's kernel (``Sampler.step``) vmapped over chains in one jitted
``lax.scan`` — the runner's own overhead is benchmarks/overhead.py's subject.

Usage: ``python benchmarks/discrete_step_cost.py [--quick]``. Median of repeats.
"""

from __future__ import annotations

import argparse
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np

import gradmc
from gradmc.report import format_table
from gradmc.targets import lattice, ordinal, quadratic

CHAINS = 100
GRADIENT_SAMPLERS = ("ncg", "avg", "pavg", "gwg")


def recipes(target, step_size: float, M) -> dict:
    return {
        "ncg": gradmc.sampler("ncg", step_size=step_size),
        "avg": gradmc.sampler("avg", step_size=step_size),
        "pavg": gradmc.sampler("pavg", step_size=step_size, M=M, adapt_gamma=False),
        "gwg": gradmc.sampler("gwg"),
        "gibbs": gradmc.sampler("gibbs", scan="systematic"),
        "mh-uniform": gradmc.sampler("mh-uniform", radius=1),
    }


def step_time(target, recipe, steps: int, repeats: int) -> float:
    """Median seconds per step of the library's kernel: ``Sampler.step`` vmapped over the
    chains (axis "chain", as the runner does) inside one jitted ``lax.scan``, the per-step
    keys folded in as the runner does; the step statistics are returned so none of the
    kernel's work is dropped. Compilation and the first call are excluded."""
    bound = recipe.bind(target, 0)
    keys = jax.random.split(jax.random.key(0), CHAINS)
    starts = jax.vmap(target.space.sample_uniform)(jax.random.split(jax.random.key(1), CHAINS))
    states, params = jax.jit(jax.vmap(bound.finalize))(jax.jit(jax.vmap(bound.init))(keys, starts))
    params = jax.tree.map(lambda x: x[0], params)  # fixed kernels: the same parameters in every chain
    step = jax.vmap(bound.step, in_axes=(0, 0, None), axis_name="chain")

    @jax.jit
    def run(states):
        def body(states, t):
            states, stats = step(jax.vmap(jax.random.fold_in, (0, None))(keys, t), states, params)
            return states, stats

        return jax.lax.scan(body, states, jnp.arange(steps))

    return _median_time(run, states, steps, repeats)


def _median_time(run, state, steps: int, repeats: int) -> float:
    jax.block_until_ready(run(state))
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(run(state))
        times.append((time.perf_counter() - t0) / steps)
    return statistics.median(times)


def evaluation_time(target, steps: int, repeats: int) -> float:
    """Seconds per batched f+∇f evaluation of 100 chains inside a lax.scan (the positions
    move every iteration so nothing is hoisted)."""
    values = jnp.asarray(target.space.values, jnp.float32)
    grad_fn = jax.vmap(jax.value_and_grad(target.logdensity_fn))

    @jax.jit
    def run(s):
        def body(s, i):
            f, g = grad_fn(s)
            shift = (jnp.sign(g) * (i % 2)).astype(s.dtype)
            return jnp.clip(s + shift, values[0], values[-1]), f[0]

        return jax.lax.scan(body, s, jnp.arange(steps))

    s0 = jax.vmap(target.space.sample_uniform)(jax.random.split(jax.random.key(0), CHAINS))
    return _median_time(run, s0, steps, repeats)


def fused_ncg_time(target, step_size: float, steps: int, repeats: int) -> float:
    """A minimal NCG step for all chains at once: q(s'_i = v) ∝ exp((½g_i + s_i/ε)v − v²/(2ε))
    drawn by inverse CDF, one f+∇f evaluation, the MH test (eq. 8, Alg. B.1)."""
    v = jnp.asarray(target.space.values, jnp.float32)
    grad_fn = jax.vmap(jax.value_and_grad(target.logdensity_fn))
    k = v.size

    def log_q(s, g):  # (chains, d, k), normalised
        logits = (0.5 * g + s / step_size)[..., None] * v - v * v / (2 * step_size)
        return logits - jax.nn.logsumexp(logits, -1, keepdims=True)

    def pick(lq, idx):
        return jnp.take_along_axis(lq, idx[..., None], -1)[..., 0].sum(-1)

    def step(carry, key):
        s, f, g, idx = carry
        k_prop, k_mh = jax.random.split(key)
        lq = log_q(s, g)
        u = jax.random.uniform(k_prop, s.shape + (1,))
        new_idx = jnp.minimum(jnp.sum(jnp.cumsum(jnp.exp(lq), -1) < u, -1), k - 1)
        s_new = v[new_idx]
        f_new, g_new = grad_fn(s_new)
        log_ratio = f_new - f + pick(log_q(s_new, g_new), idx) - pick(lq, new_idx)
        accept = jnp.log(jax.random.uniform(k_mh, f.shape)) < log_ratio
        a = accept[:, None]
        return (jnp.where(a, s_new, s), jnp.where(accept, f_new, f), jnp.where(a, g_new, g),
                jnp.where(a, new_idx, idx)), None

    @jax.jit
    def run(carry):
        return jax.lax.scan(step, carry, jax.random.split(jax.random.key(1), steps))[0]

    idx0 = jax.random.randint(jax.random.key(0), (CHAINS, target.space.d), 0, k)
    s0 = v[idx0]
    f0, g0 = grad_fn(s0)
    return _median_time(run, (s0, f0, g0, idx0), steps, repeats)


def part_a(steps: int, repeats: int) -> list[dict]:
    target = quadratic.quadratic(space="binary", d=1000, seed=0)
    J = target.metadata["J"]
    evaluation = evaluation_time(target, steps, repeats)
    fused = fused_ncg_time(target, 0.5, steps, repeats)  # the floor of a factorised-proposal step
    rows = [{"sampler": "fused NCG (inline)", "us_per_step": 1e6 * fused, "us_per_eval": 1e6 * evaluation,
             "ratio": fused / evaluation, "goal": ""}]
    for name, recipe in recipes(target, 0.5, 2 * J).items():
        t = step_time(target, recipe, steps, repeats)
        rows.append({"sampler": name, "us_per_step": 1e6 * t, "us_per_eval": 1e6 * evaluation, "ratio": t / evaluation,
                     "goal": "<= 1.3" if name in GRADIENT_SAMPLERS else ""})
        if name == "gibbs":
            rows.append({"sampler": "gibbs sweep (d steps)", "us_per_step": 1e6 * t * target.dim,
                         "us_per_eval": 1e6 * evaluation, "ratio": t * target.dim / evaluation, "goal": ""})
    return rows


def part_b(steps: int, repeats: int) -> list[dict]:
    ising = lattice.ising(side=10, strength=0.2)
    poly2 = ordinal.poly2()
    cases = (
        (ising, 0.5, 2 * np.asarray(ising.metadata["J"])),
        (poly2, 0.05, -np.linalg.inv(np.asarray(poly2.truth.cov))),
    )
    rows = []
    for target, eps, M in cases:
        fused = fused_ncg_time(target, eps, steps, repeats)
        for name, recipe in recipes(target, eps, M).items():
            t = step_time(target, recipe, steps, repeats)
            rows.append({"target": f"{target.name} (d={target.dim})", "sampler": name, "us_per_step": 1e6 * t,
                         "us_fused_ncg": 1e6 * fused, "ratio": t / fused, "goal": "<= 1.2"})
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer steps and repeats")
    args = parser.parse_args(argv)
    steps, repeats = (50, 1) if args.quick else (200, 3)
    print(f"devices: {jax.devices()}; {CHAINS} chains; {steps} steps; median of {repeats}\n")
    print(format_table(part_a(steps, repeats), title="(a) step time / one batched f+grad evaluation, dense quadratic, 1000 binary"))
    print()
    print(format_table(part_b(steps, repeats), title="(b) step time / minimal fused NCG step"))


if __name__ == "__main__":
    main()
