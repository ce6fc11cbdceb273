"""Step cost of the HAMS family, one run, 100 chains.

(a) Time per step of V-PDHAMS and O-PDHAMS divided by PAVG's, on the 7-state clock Potts
    model (20×20, W calibrated-like: the lattice adjacency scaled, dense 400×400) and on the
    discrete Gaussian (d = 8, exact W). PAVG is timed in both forms: Rhodes & Gutmann's
    (``pavg``, two mat-vecs per step) and Zhou & Tan's variance form (``pavg-variance``, the
    PDHAMS kernel with ε = 0, φ = 0, β = 1). Goal <= 1.3x.
(b) On a dense quadratic f(s) = bᵀs + ½ sᵀWs over {−2..2}^d, time per step divided by one
    batched f+∇f evaluation (timed inside a ``lax.scan`` too), for d = 100..2000. Goal <= 1.5
    at d = 1000. A PDHAMS step needs three d×d mat-vecs (L m, W Δ, L⁻¹(L u'); the fewest for
    dense W and L, see ``hams.build_kernel``) besides f+∇f, whose own cost here is about two
    (W s and its transpose in the gradient). The table times the three products alone
    (``3 matvec``), their share of a V-PDHAMS step, and the floor (f+∇f + 3 mat-vecs) / f+∇f
    that no kernel with three products beats; the last lines state the smallest d at which
    the O(d²) work (the products, and the products with f+∇f) takes over half of the step.

(c) With a sparse W by diagonals (docs/discrete-hams.md §8.7) on DISCS's 100×100 Ising
    model (d = 10,000, the W that V-PDHAMS learns in a short warm-up, δ = 1, ε = 0.5): the step time of V- and O-PDHAMS
    divided by NCG's, and the share of the 2d Gaussian draws (one per coordinate and diagonal) a step makes for its
    momentum (``normals``: the draws alone, timed in the same kind of loop). The goal of
    the DISCS benchmark is <= 2x NCG's step time. Two more rows time O-PDHAMS's over-relaxed
    proposal alone (its forward CDF, draw and the transition probabilities of both
    directions, β = 0.1) in float64, as the kernel computes it, and in float32, to show what
    the float64 arithmetic costs (large on a GPU, whose float64 units are few).

Kernels are timed directly (``jit(scan(vmap(kernel)))``, compilation excluded), the
samplers of one comparison in turn, and each time is the minimum over repeats (the
machine is shared). Usage: ``python benchmarks/hams_step_cost.py [--quick] [--parts abc]``.
"""

from __future__ import annotations

import argparse
import time
import warnings

import jax
import jax.numpy as jnp
import numpy as np

import gradmc
from gradmc import random as gradmc_random
from gradmc.base import Target
from gradmc.curvature import second_order
from gradmc.curvature.pavg_model import make_preconditioner as rg_preconditioner
from gradmc.discrete import hams, ncg, pavg
from gradmc.report import format_table
from gradmc.spaces import Ordinal
from gradmc.targets import hams_targets, lattice

CHAINS = 100


def kernel_loop(kernel_step, init, target, steps: int):
    """jit(scan over ``steps`` of the vmapped kernel), 100 chains, returning the acceptance
    (so nothing is dead code); compiled here."""
    s0 = jax.vmap(target.space.sample_uniform)(jax.random.split(jax.random.key(0), CHAINS))

    @jax.jit
    def run(key, s0):
        states = jax.vmap(init)(jax.random.split(key, CHAINS), s0)

        def body(states, k):
            states, info = jax.vmap(kernel_step)(jax.random.split(k, CHAINS), states)
            return states, info.acceptance_rate

        return jax.lax.scan(body, states, jax.random.split(key, steps))[1]

    jax.block_until_ready(run(jax.random.key(1), s0))
    return lambda key: run(key, s0)


def evaluation_loop(target, steps: int):
    """jit(scan over ``steps`` batched f+∇f evaluations of 100 chains); positions are moved
    by the result every iteration so nothing is hoisted."""
    values = jnp.asarray(target.space.values)
    grad_fn = jax.vmap(jax.value_and_grad(target.logdensity_fn))
    s0 = jax.vmap(target.space.sample_uniform)(jax.random.split(jax.random.key(0), CHAINS))

    @jax.jit
    def run(s0):
        def body(s, i):
            f, g = grad_fn(s)
            return jnp.clip(s + jnp.sign(g) * (i % 2), values[0], values[-1]), f[0]

        return jax.lax.scan(body, s0, jnp.arange(steps))

    jax.block_until_ready(run(s0))
    return lambda key: run(s0)


def matvec_loop(W, steps: int):
    """jit(scan over ``steps`` of the kernel's three batched d×d products, L(W(L x))-shaped
    with the target's own W, 100 chains): the O(d²) part of a step on its own."""
    d = W.shape[0]
    M = jnp.asarray(W, jnp.float32) / d
    x0 = jax.random.normal(jax.random.key(0), (CHAINS, d))

    @jax.jit
    def run(x0):
        def body(x, _):
            y = jax.vmap(lambda v: M @ (M @ (M @ v)))(x)
            return x + 1e-3 * y, ()

        return jax.lax.scan(body, x0, None, length=steps)[0]

    jax.block_until_ready(run(x0))
    return lambda key: run(x0)


def interleaved_times(loops: dict, steps: int, repeats: int) -> dict:
    """Seconds per step of each loop: the minimum over ``repeats`` runs taken in turn (the
    machine is shared; the minimum is the least disturbed run)."""
    times = {name: [] for name in loops}
    for r in range(repeats):
        for name, run in loops.items():
            t0 = time.perf_counter()
            jax.block_until_ready(run(jax.random.key(r)))
            times[name].append(time.perf_counter() - t0)
    return {name: min(v) / steps for name, v in times.items()}


def pdhams_loops(target, W, delta, steps):
    f, space = target.logdensity_fn, target.space
    precond = second_order.pdhams_preconditioner(W, delta)
    rg = rg_preconditioner(W, 2.0 / delta)  # the same W + D for Rhodes & Gutmann's PAVG
    loops = {}
    for name, beta, eps, phi in (
        ("pavg-variance", 1.0, 0.0, 0.0),
        ("v-pdhams", 1.0, 0.9, -0.5),
        ("o-pdhams", 0.1, 0.9, -0.5),
    ):
        kernel = hams.build_kernel(beta)
        loops[name] = kernel_loop(
            lambda key, st, kernel=kernel, eps=eps, phi=phi: kernel(key, st, f, space, precond, eps, phi),
            lambda key, s: hams.init(s, f, key),
            target,
            steps,
        )
    rg_kernel = pavg.build_kernel()
    loops["pavg (R&G)"] = kernel_loop(
        lambda key, st: rg_kernel(key, st, f, space, rg), lambda key, s: pavg.init(s, f), target, steps
    )
    return loops


def part_a(steps: int, repeats: int) -> list[dict]:
    potts = lattice.clock_potts(side=20, q=7)
    W_potts = -0.3 * lattice.periodic_adjacency(20) - 0.5 * np.eye(400)  # a dense stand-in for the calibrated W
    gauss = hams_targets.discrete_gaussian()
    rows = []
    for target, W, delta in ((potts, W_potts, 1.0), (gauss, gauss.metadata["W"], 0.05)):
        times = interleaved_times(pdhams_loops(target, W, delta, steps), steps, repeats)
        for name in ("v-pdhams", "o-pdhams"):
            rows.append(
                {
                    "target": f"{target.name} (d={target.dim})",
                    "sampler": name,
                    "us_per_step": 1e6 * times[name],
                    "vs_pavg_RG": times[name] / times["pavg (R&G)"],
                    "vs_pavg_variance": times[name] / times["pavg-variance"],
                    "goal": "<= 1.3",
                }
            )
    return rows


def dense_quadratic(d: int) -> tuple[Target, np.ndarray]:
    rng = np.random.default_rng(d)
    A = rng.normal(size=(d, d)) / np.sqrt(d)
    W = -(A @ A.T) - 0.5 * np.eye(d)
    b = rng.normal(size=d)
    Wj, bj = jnp.asarray(W, jnp.float32), jnp.asarray(b, jnp.float32)
    target = Target(f"dense-quadratic-{d}", lambda s: bj @ s + 0.5 * s @ (Wj @ s), Ordinal(np.arange(-2.0, 3.0), d))
    return target, W


def part_b(dims, steps: int, repeats: int) -> list[dict]:
    rows = []
    for d in dims:
        target, W = dense_quadratic(d)
        steps = max(20, steps * 100 // d)  # the same work per run at every d
        loops = pdhams_loops(target, W, 0.5, steps)
        loops = {
            "f+grad": evaluation_loop(target, steps),
            "3 matvec": matvec_loop(W, steps),
            "pavg (R&G)": loops["pavg (R&G)"],
            "v-pdhams": loops["v-pdhams"],
            "o-pdhams": loops["o-pdhams"],
        }
        times = interleaved_times(loops, steps, repeats)
        for name in ("pavg (R&G)", "v-pdhams", "o-pdhams"):
            rows.append(
                {
                    "d": d,
                    "sampler": name,
                    "us_per_step": 1e6 * times[name],
                    "us_per_eval": 1e6 * times["f+grad"],
                    "us_3_matvec": 1e6 * times["3 matvec"],
                    "ratio": times[name] / times["f+grad"],
                    "floor": (times["f+grad"] + times["3 matvec"]) / times["f+grad"],
                    "matvec_share": times["3 matvec"] / times[name],
                    "goal": "<= 1.5" if d == 1000 else "",
                }
            )
    return rows


def dominance_line(rows: list[dict]) -> str:
    """The smallest measured d at which O(d²) work takes over half of a V-PDHAMS step: the
    kernel's three d×d products alone, and with the dense target's own f+∇f (also O(d²))."""
    rows = sorted((row for row in rows if row["sampler"] == "v-pdhams"), key=lambda row: row["d"])
    lines = []
    for what, share in (
        ("its three d×d products", lambda r: r["us_3_matvec"] / r["us_per_step"]),
        ("those and f+∇f", lambda r: (r["us_3_matvec"] + r["us_per_eval"]) / r["us_per_step"]),
    ):
        above = [r["d"] for r in rows if share(r) > 0.5]
        where = f"from d ≈ {above[0]}" if above else f"at none of the measured d (up to {rows[-1]['d']})"
        text = ", ".join(f"d={r['d']}: {100 * share(r):.0f}%" for r in rows)
        lines.append(f"share of a V-PDHAMS step in {what}: {text}; over half {where}")
    return "\n".join(lines)


def normals_loop(shape, steps: int):
    """jit(scan over ``steps`` of 100 chains' Gaussian draws of ``shape``, as the kernel draws
    them (:func:`gradmc.random.normal`), summed into the carry so none is dead code)."""

    @jax.jit
    def run(key):
        def body(total, k):
            z = jax.vmap(lambda kk: gradmc_random.normal(kk, shape))(jax.random.split(k, CHAINS))
            return total + jnp.sum(z[:, 0, :1]), ()

        return jax.lax.scan(body, jnp.zeros(()), jax.random.split(key, steps))[0]

    jax.block_until_ready(run(jax.random.key(0)))
    return run


def over_relaxation_loop(space, d: int, steps: int, x64: bool = True):
    """jit(scan over ``steps`` of O-PDHAMS's over-relaxed proposal alone for 100 chains: the
    forward CDF, the draw and T_β of both directions (β = 0.1), in float64 as the kernel
    computes them, or with ``x64=False`` in float32 (not exact at small T_β: a measure of
    what the float64 arithmetic costs, nothing more)."""
    values = jnp.asarray(space.values, jnp.float32)

    def propose(key, index, a):
        bits = hams._or_bits(key, index.shape)
        with jax.enable_x64(x64):
            forward = hams._cumulative64_rows(jnp.stack([a * v for v in values]))
            new, t_f = hams._or_propose64(bits, index, forward, jnp.float64(0.1))
            backward = hams._cumulative64_rows(jnp.stack([-a * v for v in values]))
            t_b = hams._transition64(*hams._bounds(backward, new), *hams._bounds(backward, index), jnp.float64(0.1))
            return new, jnp.sum(jnp.log((t_b / t_f).astype(jnp.float32)))

    @jax.jit
    def run(key):
        a = jax.random.normal(key, (CHAINS, d))

        def body(index, k):
            new, log_ratio = jax.vmap(propose)(jax.random.split(k, CHAINS), index, a)
            return new, log_ratio

        index = jnp.zeros((CHAINS, d), jnp.int32)
        return jax.lax.scan(body, index, jax.random.split(key, steps))[1]

    with warnings.catch_warnings():  # x64=False: float64 requests become float32, with a warning each
        warnings.simplefilter("ignore", UserWarning)
        jax.block_until_ready(run(jax.random.key(0)))
    return run


def ising100_loops(steps: int) -> tuple[dict, object]:
    """NCG's, V-PDHAMS's and O-PDHAMS's step loops on DISCS's 100x100 Ising model, with the
    sparse W that V-PDHAMS learns in a short warm-up; and that model."""
    target = gradmc.target("discs-ising", shape=100)
    f, space = target.logdensity_fn, target.space
    # the sparse model the sampler learns (a short warm-up), as one chain's view
    learned = gradmc.sample(target, "v-pdhams", num_chains=4, num_warmup=200, num_draws=1, seed=0, progress=False)
    model = jax.tree.map(lambda x: x[0], learned.params["model"])
    ncg_kernel = ncg.build_kernel()
    loops = {
        "ncg": kernel_loop(
            lambda key, st: ncg_kernel(key, st, f, space, 0.15), lambda key, s: ncg.init(s, f), target, steps
        )
    }
    for name, beta in (("v-pdhams", 1.0), ("o-pdhams", 0.1)):
        kernel = hams.build_kernel(beta)
        loops[name] = kernel_loop(
            lambda key, st, kernel=kernel: kernel(key, st, f, space, model, 0.5, 0.0),
            lambda key, s: hams.init(s, f, key, precond=model),
            target,
            steps,
        )
    return loops, model


def part_c(steps: int, repeats: int) -> list[dict]:
    loops, model = ising100_loops(steps)
    target = gradmc.target("discs-ising", shape=100)
    space, d = target.space, target.dim
    loops["normals"] = normals_loop(model.momentum_shape(d), steps)
    loops["over-relaxation"] = over_relaxation_loop(space, d, steps)
    loops["over-relaxation, float32"] = over_relaxation_loop(space, d, steps, x64=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        times = interleaved_times(loops, steps, repeats)
    return [
        {
            "sampler": name,
            "ms_per_step": 1e3 * times[name],
            "vs_ncg": times[name] / times["ncg"],
            "normals_share": times["normals"] / times[name] if "pdhams" in name else "",
        }
        for name in loops
    ]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer steps and repeats")
    parser.add_argument("--parts", default="abc", help="which of the parts (a), (b), (c) to run, e.g. c")
    args = parser.parse_args(argv)
    steps, repeats = (100, 3) if args.quick else (300, 7)
    print(f"devices: {jax.devices()}; {CHAINS} chains; {steps} steps; minimum of {repeats} interleaved runs\n")
    if "a" in args.parts:
        print(format_table(part_a(steps, repeats), title="(a) PDHAMS step time / PAVG step time"))
        print()
    if "b" in args.parts:
        rows = part_b((100, 250, 500, 1000, 2000), steps, repeats)
        print(format_table(rows, title="(b) step time / one batched f+grad evaluation, dense quadratic"))
        print(dominance_line(rows))
        print()
    if "c" in args.parts:
        title = "(c) sparse W on DISCS's 100x100 Ising model: step time / NCG's"
        print(format_table(part_c(steps, repeats), title=title))


if __name__ == "__main__":
    main()
