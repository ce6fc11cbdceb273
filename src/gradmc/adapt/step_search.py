"""Step-size search of Rhodes & Gutmann (2022, App. H): maximise the mean L1 jump.

Each candidate value runs ``num_chains`` chains for ``num_steps`` steps (after
``num_warmup`` warm-up steps, e.g. PAVG's preconditioner learning at that fixed ε) and
scores the average of ‖s_{t+1} − s_t‖₁ over steps and chains. Two stages:

* step sizes ε (NCG, AVG, PAVG, ...): the decades {0.05, 0.5, 5, 50, 500}, then the
  deciles of the best decade, 10^e·{0.1, 0.2, …, 1.0} (e.g. {0.1, …, 1.0} when 0.5 won;
  15 values in all, as in App. H);
* radii r (ordinal-GWG, MH-uniform): {1, 5, 10, 15, 20}, then {r*, …, r* + 4} around
  the best r* (capped at k − 1, the largest useful radius).

All values of a stage run at once: the sampler is built inside ``jax.vmap`` over the
values (so its builders accept traced option values) and the chains are ``vmap``ped
inside with the runner's axis name ``"chain"``.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from gradmc.base import Target
from gradmc.registry import sampler as sampler_recipe
from gradmc.run import run_chains

__all__ = ["SearchResult", "STEP_SIZE_GRID", "RADIUS_GRID", "RADIUS_SAMPLERS", "decile_grid", "radius_grid", "mean_jumps", "search"]

STEP_SIZE_GRID = (0.05, 0.5, 5.0, 50.0, 500.0)
RADIUS_GRID = (1, 5, 10, 15, 20)
RADIUS_SAMPLERS = ("ordinal-gwg", "mh-uniform")


class SearchResult(NamedTuple):
    """``best`` value; ``values`` and ``mean_jumps`` of every stage, in order."""

    best: float
    param: str
    values: list[np.ndarray]
    mean_jumps: list[np.ndarray]


def decile_grid(best: float) -> np.ndarray:
    """The deciles 10^e·{0.1, …, 1.0} of the decade 10^(e−1) < best ≤ 10^e (App. H)."""
    if not best > 0:
        raise ValueError(f"best step size must be positive, got {best}")
    top = 10.0 ** np.ceil(np.log10(best) - 1e-9)
    return np.round(top * np.arange(1, 11) / 10, 12)


def radius_grid(best: int, max_radius: int) -> np.ndarray:
    """{best, …, best + 4} capped at ``max_radius``."""
    return np.arange(best, min(best + 4, max_radius) + 1)


def mean_jumps(target: Target, sampler: str, param: str, values, *, num_chains: int, num_steps: int,
               num_warmup: int = 0, seed: int = 0, **options) -> np.ndarray:
    """Mean L1 jump per value of ``param``, all values and chains batched in one program."""
    values = jnp.asarray(values, jnp.int32 if param == "radius" else jnp.float32)
    key = jax.random.key(seed)
    init_keys = jax.random.split(jax.random.fold_in(key, 0), num_chains)
    positions = jax.vmap(target.draw_initial)(init_keys)
    target.space.validate(np.asarray(positions), what="initial position")
    chain_keys = jax.random.split(jax.random.fold_in(key, 1), num_chains)
    sampler_recipe(sampler, **options, **{param: values[0]})  # checks the name and options

    def one_value(value):
        bound = sampler_recipe(sampler, **options, **{param: value}).bind(target, num_warmup)
        _, _, jumps = run_chains(bound, chain_keys, init_keys, positions, num_warmup, num_steps,
                                 lambda states, stats: jnp.mean(stats.extra["jump"]))
        return jnp.mean(jumps)

    return np.asarray(jax.jit(jax.vmap(one_value))(values), np.float64)


def search(
    target: Target,
    sampler: str,
    *,
    param: str | None = None,
    num_chains: int = 20,
    num_steps: int = 1000,
    num_warmup: int = 0,
    seed: int = 0,
    refine: bool = True,
    **options,
) -> SearchResult:
    """App. H search for ``sampler`` on ``target``; ``param`` defaults to ``"radius"`` for
    ordinal-GWG / MH-uniform and ``"step_size"`` otherwise. ``options`` go to the sampler."""
    param = param or ("radius" if sampler in RADIUS_SAMPLERS else "step_size")
    if param not in ("step_size", "radius"):
        raise ValueError(f"param must be 'step_size' or 'radius', got {param!r}")
    for name, value in (("num_chains", num_chains), ("num_steps", num_steps)):
        if int(value) != value or int(value) < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    if int(num_warmup) != num_warmup or int(num_warmup) < 0:
        raise ValueError(f"num_warmup must be a non-negative integer, got {num_warmup!r}")
    run = dict(num_chains=int(num_chains), num_steps=int(num_steps), num_warmup=int(num_warmup), seed=seed, **options)
    if param == "radius":
        max_radius = max(int(getattr(target.space, "num_values", 2)) - 1, 1)
        stages = [np.unique(np.minimum(RADIUS_GRID, max_radius))]
    else:
        stages = [np.asarray(STEP_SIZE_GRID)]
    jumps = [mean_jumps(target, sampler, param, stages[0], **run)]
    best = stages[0][int(np.nanargmax(jumps[0]))]
    if refine:
        stages.append(radius_grid(int(best), max_radius) if param == "radius" else decile_grid(float(best)))
        jumps.append(mean_jumps(target, sampler, param, stages[1], **run))
        best = stages[1][int(np.nanargmax(jumps[1]))]
    best = int(best) if param == "radius" else float(best)
    return SearchResult(best, param, stages, jumps)
