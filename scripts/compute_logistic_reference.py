"""Reference posterior mean and sd of the six logistic-regression targets, from long NUTS runs.

BlackJAX NUTS with window adaptation (Stan's schedule, diagonal mass matrix), in float64,
several independent chains started from N(0, I). The run is accepted only if every
coordinate has split R-hat < 1.01; the posterior mean, sd, their Monte Carlo standard
errors (ArviZ) and the settings are written to ``src/gradmc/data/logistic_reference.json``,
which the targets load as their :class:`~gradmc.base.Truth`.

    python scripts/compute_logistic_reference.py                # all six data sets
    python scripts/compute_logistic_reference.py ripley pima    # a subset (merged into the file)
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import jax

jax.config.update("jax_enable_x64", True)

import arviz as az  # noqa: E402
import blackjax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from gradmc.targets.logistic import DATASETS, _dataset_target  # noqa: E402

OUT = Path(__file__).resolve().parents[1] / "src" / "gradmc" / "data" / "logistic_reference.json"
RHAT_MAX = 1.01


def run_nuts(logdensity_fn, dim: int, num_chains: int, num_warmup: int, num_draws: int, seed: int):
    """``num_chains`` independent NUTS chains, each with its own window adaptation."""
    key_init, key_warm, key_draw = jax.random.split(jax.random.key(seed), 3)
    positions = jax.random.normal(key_init, (num_chains, dim), jnp.float64)

    def one_chain(position, key_w, key_d):
        warmup = blackjax.window_adaptation(blackjax.nuts, logdensity_fn, is_mass_matrix_diagonal=True)
        (state, params), _ = warmup.run(key_w, position, num_warmup)
        step = blackjax.nuts(logdensity_fn, **params).step

        def body(state, key):
            state, info = step(key, state)
            return state, (state.position, info.num_integration_steps, info.acceptance_rate)

        _, (draws, steps, acc) = jax.lax.scan(body, state, jax.random.split(key_d, num_draws))
        return draws, steps, acc, params["step_size"]

    run = jax.jit(jax.vmap(one_chain))
    draws, steps, acc, step_size = run(
        positions, jax.random.split(key_warm, num_chains), jax.random.split(key_draw, num_chains)
    )
    return np.asarray(draws), np.asarray(steps), np.asarray(acc), np.asarray(step_size)


def reference(name: str, num_chains: int, num_warmup: int, num_draws: int, seed: int) -> dict:
    target = _dataset_target(name, "float64")
    start = time.perf_counter()
    draws, steps, acc, step_size = run_nuts(target.logdensity_fn, target.dim, num_chains, num_warmup, num_draws, seed)
    seconds = time.perf_counter() - start
    data = az.convert_to_dataset(draws)  # (chain, draw, dim)
    summary = az.summary(data, kind="all", round_to="none")
    rhat = summary["r_hat"].to_numpy()
    entry = {
        "dim": target.dim,
        "mean": draws.mean(axis=(0, 1)).tolist(),
        "sd": draws.std(axis=(0, 1), ddof=1).tolist(),
        "mcse_mean": summary["mcse_mean"].to_numpy().tolist(),
        "mcse_sd": summary["mcse_sd"].to_numpy().tolist(),
        "rhat_max": float(rhat.max()),
        "ess_bulk_min": float(summary["ess_bulk"].min()),
        "ess_tail_min": float(summary["ess_tail"].min()),
        "mean_acceptance": float(acc.mean()),
        "mean_integration_steps": float(steps.mean()),
        "step_size": step_size.tolist(),
        "seconds": round(seconds, 1),
        "settings": {"num_chains": num_chains, "num_warmup": num_warmup, "num_draws": num_draws, "seed": seed},
    }
    print(
        f"{name:10s} d={target.dim:3d} R-hat max {entry['rhat_max']:.4f}  ESS bulk min {entry['ess_bulk_min']:.0f}  "
        f"steps {entry['mean_integration_steps']:.1f}  {seconds:.0f}s",
        flush=True,
    )
    if not entry["rhat_max"] < RHAT_MAX:
        raise SystemExit(f"{name}: R-hat {entry['rhat_max']:.4f} >= {RHAT_MAX}; run longer")
    return entry


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("datasets", nargs="*", help=f"subset of {list(DATASETS)} (default: all)")
    parser.add_argument("--chains", type=int, default=4)
    parser.add_argument("--warmup", type=int, default=2000)
    parser.add_argument("--draws", type=int, default=10000)
    parser.add_argument("--seed", type=int, default=20190)
    args = parser.parse_args()

    table = json.loads(OUT.read_text()) if OUT.exists() else {"datasets": {}}
    table["method"] = (
        "BlackJAX NUTS, window adaptation (diagonal mass matrix, target acceptance 0.8), "
        "float64, independent chains from N(0, I); accepted when split R-hat < 1.01 for "
        "every coordinate; MCSE from ArviZ"
    )
    table["versions"] = {"jax": jax.__version__, "blackjax": blackjax.__version__, "arviz": az.__version__}
    unknown = sorted(set(args.datasets) - set(DATASETS))
    if unknown:
        parser.error(f"unknown data sets {unknown}; choose from {list(DATASETS)}")
    for name in args.datasets or list(DATASETS):
        table["datasets"][name] = reference(name, args.chains, args.warmup, args.draws, args.seed)
        OUT.write_text(json.dumps(table, indent=1) + "\n")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
