"""PDHAMS with a learned W on a model whose couplings follow a random graph (docs/discrete-hams.md §8.10).

A model nobody has tuned for: an Ising model on a random graph with d = 10,000 spins, each
joined to two others drawn at random (about 20,000 couplings of strength λ = 0.2, a random
field of scale 0.1), f(x) = λ Σ_(i,j) s_i s_j + Σ_i b_i s_i with s = 2x − 1 on Binary(d).
Its Hessian has neither a few diagonals (§8.7) nor a low rank (§8.9), so V-/O-PDHAMS learn
W on the graph's edges. Every sampler runs at its defaults under DISCS's protocol (100
chains, 10,000 steps, the first half warm-up; ESS per step of the Hamming distance to a
random reference state, ``benchmarks/discs.py``), from uniformly random starting states;
a line per PDHAMS sampler gives its step time, ESS per step and ESS per second relative to
NCG's, all from the same run.

Usage: ``python benchmarks/graph_w.py [--samplers ncg,gwg,v-pdhams,o-pdhams] [--quick]``
(``--quick``: d = 3,000, 20 chains, 1,000 steps).
"""

from __future__ import annotations

import argparse

import jax
import jax.numpy as jnp
import numpy as np
from discs import print_pdhams_against_ncg, run_one

from gradmc.base import Target
from gradmc.report import format_table
from gradmc.spaces import Binary


def random_graph_ising(d: int, strength: float = 0.2, field: float = 0.1, seed: int = 0) -> Target:
    """The Ising model of the module doc on a random graph of d spins."""
    rng = np.random.default_rng(seed)
    i = np.repeat(np.arange(d), 2)
    j = rng.integers(0, d, 2 * d)
    keep = i != j
    edges = np.unique(np.sort(np.stack([i[keep], j[keep]], 1), axis=1), axis=0)
    rows, cols = jnp.asarray(edges[:, 0]), jnp.asarray(edges[:, 1])
    b = jnp.asarray(field * rng.standard_normal(d), jnp.float32)

    def logdensity(x):
        s = 2.0 * x - 1.0
        return strength * jnp.sum(s[rows] * s[cols]) + b @ s

    return Target("random-graph-ising", logdensity, Binary(d), description=f"Ising on a random graph, d={d}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samplers", default="ncg,gwg,v-pdhams,o-pdhams")
    parser.add_argument("--quick", action="store_true", help="d = 3,000, 20 chains, 1,000 steps")
    args = parser.parse_args(argv)
    d, chains, steps = (3000, 20, 1000) if args.quick else (10_000, 100, 10_000)
    target = random_graph_ising(d)
    key_start, key_reference = jax.random.split(jax.random.key(0))
    start = jax.random.bernoulli(key_start, 0.5, (chains, d)).astype(jnp.float32)
    reference = jax.random.bernoulli(key_reference, 0.5, (d,)).astype(jnp.float32)
    rows = [run_one(target, name, chains, steps, 0, start, reference) for name in args.samplers.split(",")]
    print(format_table(rows, title=f"{target.description}: {chains} chains, {steps} steps"))
    print_pdhams_against_ncg(rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
