"""PCD update throughput against its floor.

100-D Ising (10x10 torus, f(s) = sᵀJs), K = 10, buffer 5000, batch 50, for NCG and Gibbs:
updates per second of the jitted PCD update, and the ratio of its time to the cost of
K batched (50 chains) log-density+gradient evaluations plus one parameter-gradient step
(the contrastive loss's gradient on 2 x 50 states), both measured in this run. Goal ≤ 1.5x.

    python benchmarks/pcd_throughput.py [--updates 300]
"""

from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np

from gradmc.experiments.rhodes_learning import ising_learner, ising_logdensity
from gradmc.learn import pcd
from gradmc.targets.lattice import periodic_adjacency


def timed(fn, *args, repeats: int):
    out = fn(*args)
    jax.block_until_ready(out)
    start = time.perf_counter()
    for _ in range(repeats):
        out = fn(*args)
    jax.block_until_ready(out)
    return (time.perf_counter() - start) / repeats


def _kernel_only(learner, G, states, key):
    """The K kernel steps of one update on a batch, nothing else (for attributing the cost)."""
    logdensity = lambda s: ising_logdensity(G, s)  # noqa: E731
    chains = jax.vmap(lambda s: learner.kernel.init(s, logdensity))(states)
    params = learner.kernel.params_at(G)

    def one(chains, key):
        keys = jax.random.split(key, states.shape[0])
        return jax.vmap(lambda k, c: learner.kernel.step(k, c, logdensity, learner.space, **params))(keys, chains)[
            0
        ], None

    return jax.lax.scan(one, chains, jax.random.split(key, learner.num_steps))[0].position


def main(updates: int = 300, K: int = 10, batch: int = 50, buffer: int = 5000, rounds: int = 5) -> None:
    """Floor and the PCD updates are timed in alternating rounds (the machine is shared), and
    the median of the per-round ratios is reported."""
    d = 100
    G = jnp.asarray(0.2 * periodic_adjacency(10), jnp.float32)
    data = jnp.asarray(np.where(np.random.default_rng(0).random((2000, d)) < 0.5, -1.0, 1.0), jnp.float32)
    states = data[:batch]

    def floor(G, states, key):
        """K batched value+grad evaluations, then one parameter-gradient step."""

        def body(i, s):
            _, g = jax.vmap(jax.value_and_grad(lambda x: ising_logdensity(G, x)))(s)
            return jnp.where(g > 0, 1.0, -1.0) * jnp.where(
                jax.random.uniform(jax.random.fold_in(key, i), s.shape) < 0.5, 1.0, -1.0
            )

        s = jax.lax.fori_loop(0, K, body, states)

        def loss(G):
            return jnp.mean(jax.vmap(lambda x: ising_logdensity(G, x))(s)) - jnp.mean(
                jax.vmap(lambda x: ising_logdensity(G, x))(states)
            )  # noqa: E731

        return G - 1e-3 * jax.grad(loss)(G)

    floor_fn = jax.jit(floor)
    runners = {}
    for name in ("ncg", "gibbs"):
        learner = ising_learner(pcd.kernel(name), d, K, batch_size=batch, buffer_size=buffer, coding="spin")
        step = jax.jit(learner.update, donate_argnums=0)  # as gradmc.learn.pcd.fit does
        kernel_fn = jax.jit(lambda key, learner=learner: _kernel_only(learner, G, states, key))
        runners[name] = (step, [learner.init(jax.random.key(1), G)], kernel_fn)

    def run_updates(name):
        step, box, _ = runners[name]
        state, _ = step(box[0], data)
        jax.block_until_ready(state)
        start = time.perf_counter()
        for _ in range(updates):
            state, _ = step(state, data)
        jax.block_until_ready(state)
        box[0] = state
        return (time.perf_counter() - start) / updates

    ratios = {name: [] for name in runners}
    kernel_ratios = {name: [] for name in runners}
    per_update = {name: [] for name in runners}
    floors = []
    for _ in range(rounds):
        floor_s = timed(floor_fn, G, states, jax.random.key(0), repeats=updates)
        floors.append(floor_s)
        for name, (_, _, kernel_fn) in runners.items():
            seconds = run_updates(name)
            per_update[name].append(seconds)
            ratios[name].append(seconds / floor_s)
            kernel_ratios[name].append(timed(kernel_fn, jax.random.key(2), repeats=updates) / floor_s)
    print(
        f"floor (K={K} batched logdensity+grad on {batch} chains + 1 parameter-gradient step): median "
        f"{1e3 * np.median(floors):.3f} ms"
    )
    for name in runners:
        print(
            f"{name:6s}: {1.0 / np.median(per_update[name]):8.1f} updates/s, median ratio to floor "
            f"{np.median(ratios[name]):.2f}x (rounds: {', '.join(f'{r:.2f}' for r in ratios[name])}); K kernel "
            f"steps alone {np.median(kernel_ratios[name]):.2f}x"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--updates", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    main(args.updates, rounds=args.rounds)
