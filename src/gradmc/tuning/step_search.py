"""Step-size search of Rhodes & Gutmann (2022, App. H): maximise the mean L1 jump.

Each candidate value runs ``num_chains`` chains for ``num_steps`` steps (after
``num_warmup`` warm-up steps, e.g. PAVG's preconditioner learning at that fixed ε) and
scores the average of ‖s_{t+1} − s_t‖₁ over steps and chains. Two stages:

* step sizes ε (NCG, AVG, PAVG, ...): the decades {0.05, 0.5, 5, 50, 500}, then the
  deciles of the best decade, 10^e·{0.1, 0.2, …, 1.0} (e.g. {0.1, …, 1.0} when 0.5 won;
  15 values in all, as in App. H);
* radii r (ordinal-GWG, MH-uniform): {1, 5, 10, 15, 20}, then {r*, …, r* + 4} around
  the best r* (capped at k − 1, the largest useful radius).

All values of a stage run at once on the runner's pure loop
(:func:`gradmc.run.loop.run_chains`): the sampler is built inside ``jax.vmap`` over the
values (so its builders accept traced option values) and the chains are ``vmap``ped
inside with the runner's axis name ``"chain"``. Every value runs the same chains from the
same starts: the starts and the samplers' ``init`` use the keys ``split(fold_in(key(seed),
0))``, the steps ``fold_in(chain_key, t)`` with ``chain_key`` from ``split(fold_in(key(seed), 1))``.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from gradmc.base import Target
from gradmc.checks import check_positive
from gradmc.registry import sampler as registered_sampler
from gradmc.registry import without_adaptation
from gradmc.run.loop import check_num_warmup, run_chains

__all__ = [
    "SearchResult",
    "STEP_SIZE_GRID",
    "RADIUS_GRID",
    "RADIUS_SAMPLERS",
    "decile_grid",
    "radius_grid",
    "mean_jumps",
    "search",
]

STEP_SIZE_GRID = (0.05, 0.5, 5.0, 50.0, 500.0)
RADIUS_GRID = (1, 5, 10, 15, 20)
RADIUS_SAMPLERS = ("ordinal-gwg", "mh-uniform")


class SearchResult(NamedTuple):
    """The outcome of :func:`search`.

    Parameters
    ----------
    best : float or int
        The value with the largest mean jump in the last stage.
    param : str
        The searched option, ``"step_size"`` or ``"radius"``.
    values : list of ndarray
        The values of every stage, in order.
    mean_jumps : list of ndarray
        Their mean L1 jumps.
    """

    best: float
    param: str
    values: list[np.ndarray]
    mean_jumps: list[np.ndarray]


def decile_grid(best: float) -> np.ndarray:
    """The deciles 10^e·{0.1, …, 1.0} of the decade 10^(e−1) < best ≤ 10^e (App. H).

    Parameters
    ----------
    best : float
        The best step size of the first stage.
    """
    if not best > 0:
        raise ValueError(f"best step size must be positive, got {best}")
    top = 10.0 ** np.ceil(np.log10(best) - 1e-9)
    return np.round(top * np.arange(1, 11) / 10, 12)


def radius_grid(best: int, max_radius: int) -> np.ndarray:
    """{best, …, best + 4} capped at ``max_radius``.

    Parameters
    ----------
    best : int
        The best radius of the first stage.
    max_radius : int
        The largest useful radius (k − 1 for k values per coordinate).
    """
    return np.arange(best, min(best + 4, max_radius) + 1)


def mean_jumps(
    target: Target,
    sampler: str,
    param: str,
    values,
    *,
    num_chains: int,
    num_steps: int,
    num_warmup: int = 0,
    seed: int = 0,
    **options,
) -> np.ndarray:
    """Mean L1 jump per value of ``param``, all values and chains batched in one program.

    Parameters
    ----------
    target : Target
        The target the chains run on.
    sampler : str
        A registered sampler name.
    param : str
        The option searched (``"step_size"`` or ``"radius"``).
    values : array_like
        Its candidate values.
    num_chains, num_steps : int
        Chains per value and scored steps per chain.
    num_warmup : int
        Warm-up steps before the scored ones (e.g. PAVG's preconditioner learning).
    seed : int
        Seed of the starts and of the steps (the same for every value).
    **options
        Further options of the sampler.
    """
    values = jnp.asarray(values, jnp.int32 if param == "radius" else jnp.float32)
    options = without_adaptation(sampler, options)  # the searched value stays as given
    key = jax.random.key(seed)
    init_keys = jax.random.split(jax.random.fold_in(key, 0), num_chains)
    positions = jax.vmap(target.draw_initial)(init_keys)
    target.space.validate(np.asarray(positions), what="initial position")
    chain_keys = jax.random.split(jax.random.fold_in(key, 1), num_chains)
    registered_sampler(sampler, **options, **{param: values[0]})  # checks the name and options

    def mean_jump(states, stats):
        return jnp.mean(stats.extra["jump"])

    def one_value(value):
        bound = registered_sampler(sampler, **options, **{param: value}).bind(target, num_warmup)
        return jnp.mean(run_chains(bound, chain_keys, init_keys, positions, num_warmup, num_steps, mean_jump)[2])

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
    """The App. H search for ``sampler`` on ``target``: a coarse grid, then a fine one
    around its best value.

    Parameters
    ----------
    target : Target
        The target the chains run on.
    sampler : str
        A registered sampler name.
    param : str, optional
        ``"step_size"`` or ``"radius"``; by default ``"radius"`` for ordinal-GWG / MH-uniform
        and ``"step_size"`` otherwise.
    num_chains, num_steps : int
        Chains per value and scored steps per chain.
    num_warmup : int
        Warm-up steps before the scored ones.
    seed : int
        Seed of the starts and of the steps.
    refine : bool
        Run the second (fine) stage.
    **options
        Further options of the sampler.
    """
    param = param or ("radius" if sampler in RADIUS_SAMPLERS else "step_size")
    if param not in ("step_size", "radius"):
        raise ValueError(f"param must be 'step_size' or 'radius', got {param!r}")
    check_positive("num_chains", num_chains, integer=True)
    check_positive("num_steps", num_steps, integer=True)
    check_num_warmup(num_warmup)
    run = dict(num_chains=int(num_chains), num_steps=int(num_steps), num_warmup=int(num_warmup), seed=seed, **options)
    if param == "radius":
        max_radius = max(int(getattr(target.space, "num_values", 2)) - 1, 1)
        stages = [np.unique(np.minimum(RADIUS_GRID, max_radius))]
    else:
        stages = [np.asarray(STEP_SIZE_GRID)]
    jumps = [mean_jumps(target, sampler, param, stages[0], **run)]
    if refine:
        best = stages[0][int(np.nanargmax(jumps[0]))]
        stages.append(radius_grid(int(best), max_radius) if param == "radius" else decile_grid(float(best)))
        jumps.append(mean_jumps(target, sampler, param, stages[1], **run))
    best = (int if param == "radius" else float)(stages[-1][int(np.nanargmax(jumps[-1]))])
    return SearchResult(best, param, stages, jumps)
