"""Step cost of the discrete samplers, one run, 100 chains.

(a) On a target whose evaluation dominates — the dense quadratic f(s) = sᵀJs + bᵀs on
    1000 binary coordinates — time per step divided by one batched log-density+gradient
    evaluation (timed inside a ``lax.scan``). Goal <= 1.3 for the gradient samplers (the
    paper: "the predominant cost is a single function and gradient evaluation").
(b) On the 100-D Ising model (10×10 periodic, spins) and the 20-D ordinal target poly2,
    where the evaluation is cheap and random numbers and the proposal dominate: our step
    time divided by a minimal fused NCG step written inline below (one function: the
    factorised proposal, one evaluation, the MH test). Goal <= 1.2.
    Table (a) also shows the floor: the same fused step's ratio, and the parts a step
    cannot avoid, each timed alone per batched step and divided by the evaluation — the
    d uniforms of the proposal, AVG/PAVG's d normals, the proposal's exp/log1p per
    coordinate (done twice: forward draw and reverse score), and one d×d mat-vec (PAVG
    adds two: R n and M Δ). On a CPU the uniforms alone are a large fraction of an
    evaluation of this quadratic (one mat-vec).

Samplers: NCG, AVG, PAVG (M given: the Hessian 2J of the quadratic/Ising, the exact
precision of poly2 — a fixed M, as after warm-up), GWG, single-site Gibbs (systematic
scan; a sweep is d steps, its ratio is d × the step's) and MH-uniform (r = 1). Our steps
are timed as the library's kernel (``BoundSampler.step``) vmapped over chains in one jitted
``lax.scan`` — the runner's own overhead is benchmarks/overhead.py's subject.

Usage: ``python benchmarks/discrete_step_cost.py [--quick] [--clock process]``. Median of
repeats; ``--clock process`` times by this process's CPU time instead of the wall clock,
for a machine shared with other jobs.
"""

from __future__ import annotations

import argparse
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np

import gradmc
from gradmc.random import normal, uniform
from gradmc.report import format_table
from gradmc.run import loop
from gradmc.targets import lattice, ordinal, quadratic

CHAINS = 100
GRADIENT_SAMPLERS = ("ncg", "avg", "pavg", "gwg")


def samplers(target, step_size: float, M) -> dict:
    return {
        "ncg": gradmc.sampler("ncg", step_size=step_size),
        "avg": gradmc.sampler("avg", step_size=step_size),
        "pavg": gradmc.sampler("pavg", step_size=step_size, M=M, adapt_gamma=False, adapt=None),
        "gwg": gradmc.sampler("gwg"),
        "gibbs": gradmc.sampler("gibbs", scan="systematic"),
        "mh-uniform": gradmc.sampler("mh-uniform", radius=1),
    }


def step_time(target, sampler, steps: int, repeats: int) -> float:
    """Median seconds per step of the library's kernel: ``BoundSampler.step`` vmapped over the
    chains (axis "chain", as the runner does) inside one jitted ``lax.scan``, the per-step
    keys folded in as the runner does; the step statistics are returned so none of the
    kernel's work is dropped. Compilation and the first call are excluded."""
    bound = sampler.bind(target, 0)
    keys = jax.random.split(jax.random.key(0), CHAINS)
    starts = jax.vmap(target.space.sample_uniform)(jax.random.split(jax.random.key(1), CHAINS))
    states, params = jax.jit(loop.finalize_fn(bound))(loop.init_states(bound, keys, starts))
    axes, params = loop.shared_axes(params)  # fixed kernels: the same parameters in every chain
    step = jax.vmap(bound.step, in_axes=(0, 0, axes), axis_name="chain")

    @jax.jit
    def run(states):
        def body(states, t):
            states, stats = step(jax.vmap(jax.random.fold_in, (0, None))(keys, t), states, params)
            return states, stats

        return jax.lax.scan(body, states, jnp.arange(steps))

    return _median_time(run, states, steps, repeats)


CLOCK = time.perf_counter  # --clock process: this process's CPU time (robust on a shared machine)


def _median_time(run, state, steps: int, repeats: int) -> float:
    jax.block_until_ready(run(state))
    times = []
    for _ in range(repeats):
        t0 = CLOCK()
        jax.block_until_ready(run(state))
        times.append((CLOCK() - t0) / steps)
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
    """A minimal NCG step for all chains at once, written inline (eq. 8, Alg. B.1):
    q(s'_i = v) ∝ exp((½g_i + s_i/ε)v − v²/(2ε)), one f+∇f evaluation, the MH test.

    On two-valued spaces each coordinate is v₁ with probability σ(δ_i) (one uniform, one
    exp, one log1p); otherwise the k values are drawn by inverse CDF from the
    log-sum-exp-normalised logits. Uniforms from :func:`gradmc.random.uniform` (the
    fastest way to draw them here), so this is the floor of the library's step."""
    v = jnp.asarray(target.space.values, jnp.float32)
    grad_fn = jax.vmap(jax.value_and_grad(target.logdensity_fn))
    k = v.size

    if k == 2:

        def gap(s, g):  # log q(v1) - log q(v0)
            return (0.5 * g + s / step_size) * (v[1] - v[0]) - (v[1] ** 2 - v[0] ** 2) / (2 * step_size)

        def draw(key, s, g):
            dl = gap(s, g)
            e = jnp.exp(-jnp.abs(dl))
            upper = uniform(key, s.shape) * (1 + e) < jnp.where(dl >= 0, 1.0, e)
            return upper.astype(jnp.int32), jnp.sum(jnp.minimum(jnp.where(upper, dl, -dl), 0) - jnp.log1p(e), -1)

        def score(idx, s, g):
            return jnp.sum(jax.nn.log_sigmoid(jnp.where(idx == 1, 1, -1) * gap(s, g)), -1)
    else:

        def log_q(s, g):  # (chains, d, k), normalised
            logits = (0.5 * g + s / step_size)[..., None] * v - v * v / (2 * step_size)
            return logits - jax.nn.logsumexp(logits, -1, keepdims=True)

        def pick(lq, idx):
            return jnp.take_along_axis(lq, idx[..., None], -1)[..., 0].sum(-1)

        def draw(key, s, g):
            lq = log_q(s, g)
            u = uniform(key, s.shape + (1,))
            idx = jnp.minimum(jnp.sum(jnp.cumsum(jnp.exp(lq), -1) < u, -1), k - 1)
            return idx, pick(lq, idx)

        def score(idx, s, g):
            return pick(log_q(s, g), idx)

    def step(carry, key):
        s, f, g, idx = carry
        k_prop, k_mh = jax.random.split(key)
        new_idx, log_forward = draw(k_prop, s, g)
        s_new = v[new_idx]
        f_new, g_new = grad_fn(s_new)
        log_ratio = f_new - f + score(idx, s_new, g_new) - log_forward
        accept = jnp.log(jax.random.uniform(k_mh, f.shape)) < log_ratio
        a = accept[:, None]
        return (
            jnp.where(a, s_new, s),
            jnp.where(accept, f_new, f),
            jnp.where(a, g_new, g),
            jnp.where(a, new_idx, idx),
        ), None

    @jax.jit
    def run(carry):
        return jax.lax.scan(step, carry, jax.random.split(jax.random.key(1), steps))[0]

    idx0 = jax.random.randint(jax.random.key(0), (CHAINS, target.space.d), 0, k)
    s0 = v[idx0]
    f0, g0 = grad_fn(s0)
    return _median_time(run, (s0, f0, g0, idx0), steps, repeats)


def op_time(op, d: int, steps: int, repeats: int) -> float:
    """Seconds per call of ``op(key, x) -> (CHAINS, d)`` inside a lax.scan (x the previous
    output, so nothing is hoisted): the floor's parts."""

    @jax.jit
    def run(x):
        def body(x, key):
            return op(key, x), None

        return jax.lax.scan(body, x, jax.random.split(jax.random.key(2), steps))[0]

    return _median_time(run, jnp.zeros((CHAINS, d), jnp.float32), steps, repeats)


def part_a(steps: int, repeats: int) -> list[dict]:
    target = quadratic.quadratic(space="binary", d=1000, seed=0)
    d, J = target.dim, jnp.asarray(target.metadata["J"], jnp.float32)
    evaluation = evaluation_time(target, steps, repeats)

    def row(name, t, goal=""):
        return {
            "sampler": name,
            "us_per_step": 1e6 * t,
            "us_per_eval": 1e6 * evaluation,
            "ratio": t / evaluation,
            "goal": goal,
        }

    floor = {  # what a step is made of, each per batched step of all chains
        "  part: d uniforms, jax.random.uniform": lambda key, x: x + jax.random.uniform(key, x.shape),
        "  part: d uniforms, gradmc uniform": lambda key, x: x + uniform(key, x.shape),
        "  part: d normals (AVG/PAVG's z)": lambda key, x: x + normal(key, x.shape),
        "  part: exp + log1p of d values": lambda key, x: jnp.log1p(jnp.exp(-jnp.abs(x))) - 0.5,
        "  part: one d×d mat-vec (PAVG: 2)": lambda key, x: 1e-3 * (x @ J),
    }
    rows = [row("f+grad evaluation", evaluation)]
    rows += [row(name, op_time(op, d, steps, repeats)) for name, op in floor.items()]
    rows.append(row("fused NCG (inline)", fused_ncg_time(target, 0.5, steps, repeats)))
    for name, sampler in samplers(target, 0.5, 2 * np.asarray(target.metadata["J"])).items():
        t = step_time(target, sampler, steps, repeats)
        rows.append(row(name, t, "<= 1.3" if name in GRADIENT_SAMPLERS else ""))
        if name == "gibbs":
            rows.append(row("gibbs sweep (d steps)", t * d))
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
        for name, sampler in samplers(target, eps, M).items():
            t = step_time(target, sampler, steps, repeats)
            rows.append(
                {
                    "target": f"{target.name} (d={target.dim})",
                    "sampler": name,
                    "us_per_step": 1e6 * t,
                    "us_fused_ncg": 1e6 * fused,
                    "ratio": t / fused,
                    "goal": "<= 1.2",
                }
            )
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer steps and repeats")
    parser.add_argument(
        "--clock",
        choices=("wall", "process"),
        default="wall",
        help="wall-clock time (default) or this process's CPU time (for a machine shared with other jobs; "
        "counts every thread of XLA's CPU runtime)",
    )
    args = parser.parse_args(argv)
    global CLOCK
    CLOCK = time.process_time if args.clock == "process" else time.perf_counter
    steps, repeats = (50, 1) if args.quick else (200, 3)
    print(f"devices: {jax.devices()}; {CHAINS} chains; {steps} steps; median of {repeats}; {args.clock} clock\n")
    print(
        format_table(
            part_a(steps, repeats), title="(a) step time / one batched f+grad evaluation, dense quadratic, 1000 binary"
        )
    )
    print()
    print(format_table(part_b(steps, repeats), title="(b) step time / minimal fused NCG step"))


if __name__ == "__main__":
    main()
