"""gradmc's discrete samplers at their defaults on DISCS's models, under DISCS's protocol.

Protocol (Goshvadi et al. 2023, the discrete-sampling benchmark): 100 chains from DISCS's
own starting states, 10,000 steps, the first half discarded; the statistic of a state is
its Hamming (binary) or label-L1 (categorical) distance to DISCS's reference state; ESS
per chain as TensorFlow Probability computes it, averaged over chains
(:mod:`gradmc.diagnostics.discs`). Every sampler runs with no options at all: its warm-up
(``num_warmup`` = the discarded half) is where it tunes itself, so the 10,000 steps include
the tuning. Printed per model and sampler: ESS per step (± its standard error over the
chains), ESS per 1,000 log-density (and
gradient) evaluations as our kernels count them, ESS per second of sampling (compilation
excluded), the kept acceptance rate and what the warm-up learned.

References: DISCS's own samplers measured with DISCS's own code under this protocol on the
same models, starting states and reference states (``benchmarks/discs_reference.json``;
how: ``benchmarks/discs_reference.py``): on every model DMALA (= NCG) and DLMC, GWG and PAS
where DISCS's code finished in the time the machine had (the json's ``about`` lists the
gaps), on the 25x25 Ising model also Gibbs, random walk, block Gibbs and Hamming ball. The goals,
checked per model below its table: NCG ≥ DMALA, GWG ≥ DISCS's GWG, and gradmc's best
sampler ≥ 1.3x DISCS's best (ESS per step).

Usage: ``python benchmarks/discs.py [--models ising25,potts,...] [--samplers ncg,gwg,...]
[--steps 10000] [--chains 100] [--seed 0]``; ``--quick`` runs 1,000 steps and 20 chains.
A sampler may carry options for a comparison with its defaults:
``--samplers v-pdhams,v-pdhams:epsilon=0.9`` (``name:key=value:key=value``).
Samplers that need a second-order model (W, M) the user does not have are reported as such.

``--models ising100 --samplers ncg,v-pdhams,o-pdhams``: DISCS's Ising model on a 100x100
lattice (d = 10,000), where V-/O-PDHAMS learn a sparse W (docs/discrete-hams.md §8.7); a
line per PDHAMS sampler gives its kept-phase step time, ESS per step and ESS per second
relative to NCG, all from the same run.

``--models rbm2500`` and ``rbm-categorical``: ``discs-rbm`` with 2,500 binary visible units,
and with 784 visible units of 4 categories and 50 hidden units (the shape of DISCS's
Fashion-MNIST RBM, random parameters; 3,136 one-hot entries): dense Hessians of rank 25 and
50, where V-/O-PDHAMS learn a W of low rank (docs/discrete-hams.md §8.9). Under each RBM's
table a yardstick line: the ESS per step of the RBM's own block Gibbs sampler (hidden units
given the visible ones, then visible given hidden) under the same protocol. It uses the
hidden units, which a sampler given only log p(v) and its gradient does not see, so it is not
one of the compared samplers; it shows how far the model itself allows a chain to mix.
"""

from __future__ import annotations

import argparse
import ast
import json
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

import gradmc
from gradmc.diagnostics.discs import discs_ess, discs_statistic_fn
from gradmc.report import format_params, format_table
from gradmc.targets.discs import discs_initial_states

# DISCS's samplers, ESS per step etc., measured with DISCS's code (benchmarks/discs_reference.py)
REFERENCES = json.loads((Path(__file__).parent / "discs_reference.json").read_text())
DISCS_NAMES = {
    "gibbs": "Gibbs",
    "randomwalk": "random walk",
    "blockgibbs": "block Gibbs",
    "hammingball": "Hamming ball",
    "gwg": "GWG",
    "dmala": "DMALA",
    "path_auxiliary": "PAS",
    "dlmc": "DLMC",
}

# name -> (registered target, options); DISCS's default configurations.
MODELS = {
    "ising25": ("discs-ising", {"shape": 25}),
    "ising100": ("discs-ising", {"shape": 100}),
    "ising": ("discs-ising", {}),
    "potts": ("discs-potts", {}),
    "bernoulli": ("discs-bernoulli", {}),
    "categorical": ("discs-categorical", {}),
    "fhmm": ("discs-fhmm", {}),
    "rbm": ("discs-rbm", {}),
    "rbm2500": ("discs-rbm", {"num_visible": 2500}),
    "rbm-categorical": ("discs-rbm", {"num_categories": 4, "num_hidden": 50}),
}


def parse_sampler(spec: str) -> tuple[str, dict]:
    """``"v-pdhams:epsilon=0.9:delta=0.5"`` -> ``("v-pdhams", {"epsilon": 0.9, "delta": 0.5})``."""
    name, *assignments = spec.split(":")
    options = {}
    for assignment in assignments:
        key, sep, value = assignment.partition("=")
        if not sep:
            raise SystemExit(f"sampler options are key=value, got {assignment!r} in {spec!r}")
        options[key] = ast.literal_eval(value)
    return name, options


def run_one(target, spec: str, chains: int, steps: int, seed: int, start=None, reference=None) -> dict:
    """One sampler (at its defaults unless the spec gives options) on one DISCS target (or on
    another target, given the chains' ``start`` and the ``reference`` state of the statistic);
    the row of the table."""
    name, options = parse_sampler(spec)
    sampler = spec if not options else spec.replace(":", " ")
    start = discs_initial_states(target, chains) if start is None else start
    reference = target.metadata["reference"] if reference is None else reference
    statistic = discs_statistic_fn(reference, target.space)
    half = steps // 2
    began = time.perf_counter()
    try:
        trace = gradmc.sample(
            target,
            gradmc.sampler(name, **options),
            num_chains=chains,
            num_warmup=half,
            num_draws=steps - half,
            init=start,
            seed=seed,
            progress=False,
            keep=statistic,
        )
    except ValueError as error:  # e.g. a sampler that needs W= or M=
        return {"sampler": sampler, "ESS/step": "n/a", "note": str(error).split(";")[0][:70]}
    per_chain = discs_ess(np.asarray(trace.draws, np.float64))
    ess = float(per_chain.mean())
    evals = float(np.sum(trace.stats["num_grad_evals"])) / chains
    per_step, standard_error = mean_per_step(per_chain, steps - half)
    return {
        "sampler": sampler,
        "ESS/step": per_step,
        "± SE": standard_error,
        "ESS/1k evals": 1000.0 * ess / evals if evals > 0 else "n/a (no gradients)",
        "ESS/s": ess / trace.sampling_seconds,
        "accept": float(np.mean(trace.stats["acceptance_rate"])),
        "ms/step": 1000.0 * trace.sampling_seconds / (steps - half),
        "wall s": time.perf_counter() - began,
        "note": format_params(trace.params).removeprefix("learned in warm-up: "),
    }


def compare_with_discs(model: str, rows: list[dict], protocol: bool) -> None:
    """DISCS's reference values for ``model`` and, when this run followed the protocol
    (``protocol``: 100 chains, 10,000 steps), the three goals from its rows."""
    reference = {DISCS_NAMES[k]: v["ess_per_step"] for k, v in REFERENCES["models"].get(model, {}).items()}
    measured = {r["sampler"]: r["ESS/step"] for r in rows if isinstance(r["ESS/step"], float)}
    if not reference or not measured:
        return
    ranked = sorted(reference.items(), key=lambda item: -item[1])
    print("DISCS (its own code, this protocol), ESS/step: " + ", ".join(f"{k} {v:.4f}" for k, v in ranked))
    if not protocol:
        print("(DISCS's values are for 100 chains and 10,000 steps: no ratios for a shorter run)")
        return
    if "ncg" in measured and "DMALA" in reference:
        print(f"NCG / DMALA: {measured['ncg'] / reference['DMALA']:.2f}x (goal >= 1)")
    if "gwg" in measured and "GWG" in reference:
        print(f"GWG / DISCS GWG: {measured['gwg'] / reference['GWG']:.2f}x (goal >= 1)")
    best, best_discs = max(measured, key=measured.get), max(reference, key=reference.get)
    ratio = measured[best] / reference[best_discs]
    print(f"best ({best}) / DISCS best ({best_discs}): {ratio:.2f}x (goal >= 1.3)")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="ising25", help=f"comma-separated, from {', '.join(MODELS)}")
    parser.add_argument(
        "--samplers",
        default=None,
        help="comma-separated, each name or name:key=value:... (default: every discrete sampler at its defaults)",
    )
    parser.add_argument("--steps", type=int, default=10_000)
    parser.add_argument("--chains", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="1,000 steps, 20 chains")
    args = parser.parse_args(argv)
    steps, chains = (1000, 20) if args.quick else (args.steps, args.chains)
    names = args.samplers.split(",") if args.samplers else [e.name for e in gradmc.registry.samplers("discrete")]
    for model in args.models.split(","):
        registered, options = MODELS[model]
        target = gradmc.target(registered, **options)
        rows = [run_one(target, name, chains, steps, args.seed) for name in names]
        print(format_table(rows, title=f"{model} ({target.name}, d = {target.dim}): {chains} chains, {steps} steps"))
        compare_with_discs(model, rows, protocol=(steps, chains) == (10_000, 100))
        print_pdhams_against_ncg(rows)
        if registered == "discs-rbm":
            ess, se = rbm_block_gibbs_ess_per_step(target, chains, steps, args.seed)
            print(f"yardstick, the RBM's block Gibbs over visible and hidden units: {ess:.4f} ± {se:.4f} ESS/step")
        print()
    return 0


def rbm_block_gibbs_ess_per_step(target, chains: int, steps: int, seed: int) -> tuple[float, float]:
    """ESS per kept step (and its standard error over chains) of the exact block Gibbs sampler
    of a ``discs-rbm`` target with its hidden units restored: h ~ p(h | v), then v ~ p(v | h),
    from the same starting states, with the same statistic and the first half discarded."""
    meta = target.metadata
    weights = jnp.asarray(meta["weights"], jnp.float32)  # (V, H) binary, (H, V, C) categorical
    b_visible, b_hidden = jnp.asarray(meta["b_visible"], jnp.float32), jnp.asarray(meta["b_hidden"], jnp.float32)
    statistic = discs_statistic_fn(meta["reference"], target.space)
    binary = meta["num_categories"] == 2

    def step(visible, key):
        key_hidden, key_visible = jax.random.split(key)
        field = visible @ weights if binary else jnp.einsum("ic,hic->h", visible, weights)
        hidden = jax.random.bernoulli(key_hidden, jax.nn.sigmoid(field + b_hidden)).astype(jnp.float32)
        if binary:
            visible = jax.random.bernoulli(key_visible, jax.nn.sigmoid(weights @ hidden + b_visible))
        else:
            logits = jnp.einsum("h,hic->ic", hidden, weights) + b_visible
            visible = jax.nn.one_hot(jax.random.categorical(key_visible, logits), logits.shape[-1])
        visible = visible.astype(jnp.float32)
        return visible, statistic(visible)

    def chain(start, key):
        return jax.lax.scan(step, start, jax.random.split(key, steps))[1]

    starts = jnp.asarray(discs_initial_states(target, chains), jnp.float32)
    keys = jax.random.split(jax.random.key(seed), chains)
    statistics = np.asarray(jax.jit(jax.vmap(chain))(starts, keys), np.float64)[:, steps // 2 :]
    return mean_per_step(discs_ess(statistics), statistics.shape[1])


def mean_per_step(per_chain_ess: np.ndarray, kept: int) -> tuple[float, float]:
    """The chains' mean ESS per kept step and its standard error over the chains."""
    per_step = per_chain_ess / kept
    return float(per_step.mean()), float(per_step.std(ddof=1) / np.sqrt(len(per_step)))


def print_pdhams_against_ncg(rows: list[dict]) -> None:
    """A line per PDHAMS row: its kept-phase step time, ESS per step and ESS per second
    relative to NCG's row of the same run."""
    timed = {r["sampler"]: r for r in rows if isinstance(r.get("ESS/s"), float)}
    if "ncg" not in timed:
        return
    ncg_row = timed["ncg"]
    for name, row in timed.items():
        if name != "ncg" and "pdhams" in name:
            print(
                f"{name} / NCG: step time {row['ms/step'] / ncg_row['ms/step']:.2f}x, "
                f"ESS per step {row['ESS/step'] / ncg_row['ESS/step']:.2f}x, "
                f"ESS per second {row['ESS/s'] / ncg_row['ESS/s']:.2f}x"
            )


if __name__ == "__main__":
    raise SystemExit(main())
