"""``sample()``: the one driver for every gradmc sampler.

Chains are ``vmap``ped (axis name ``"chain"``); steps run as ``lax.scan`` over chunks, and
the host sees the chains only at chunk boundaries (progress bar). The key of chain ``c``
at global step ``t`` is ``fold_in(chain_key[c], t)``, so the same seed gives bit-identical
draws whatever the chunk size.
"""

from __future__ import annotations

import math
import os
import sys
import time
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np

from gradmc.adapt.step_size import check_positive
from gradmc.base import Recipe, Sampler, StepStats, Target
from gradmc.registry import sampler as sampler_recipe
from gradmc.trace import Trace

__all__ = ["sample", "initial_positions"]


def _progress_bar(total: int, desc: str, enabled: bool):
    from tqdm.auto import tqdm

    quiet = not enabled or os.environ.get("CI") or not sys.stderr.isatty()
    return tqdm(total=total, desc=desc, disable=bool(quiet), leave=False, unit="step")


def initial_positions(target: Target, num_chains: int, key: jax.Array, init=None) -> jax.Array:
    """Starting positions, shape ``(num_chains, *event_shape)``, checked against the target.

    ``init`` is ``None`` (draw from ``target.draw_initial``), one position (shared by all
    chains) or one per chain. The log density must be finite at every start.
    """
    shape = target.space.event_shape
    if init is None:
        positions = jax.vmap(target.draw_initial)(jax.random.split(key, num_chains))
    else:
        arr = np.asarray(init)
        if arr.shape == shape:
            arr = np.broadcast_to(arr, (num_chains, *shape))
        elif arr.shape != (num_chains, *shape):
            raise ValueError(
                f"init has shape {arr.shape}; expected {shape} (one position for all chains) "
                f"or {(num_chains, *shape)} (one per chain) for target {target.name!r}"
            )
        positions = jnp.asarray(arr, dtype=jnp.result_type(float) if not target.space.is_discrete else None)
    target.space.validate(np.asarray(positions), what=f"initial position for target {target.name!r}")
    logdensity = np.asarray(jax.jit(jax.vmap(target.logdensity_fn))(positions))
    bad = np.flatnonzero(~np.isfinite(logdensity))
    if bad.size:
        c = int(bad[0])
        raise ValueError(
            f"target {target.name!r}: log density is {logdensity[c]} at the initial position of chain {c} "
            f"({bad.size} chain(s) affected); choose a start inside the support"
        )
    return positions


def _chunks(total: int, chunk_size: int | None) -> list[int]:
    if total == 0:
        return []
    size = total if chunk_size is None else max(1, min(int(chunk_size), total))
    return [size] * (total // size) + ([total % size] if total % size else [])


def _merge_thinned(stats: StepStats) -> StepStats:
    """Summarise the ``thinning`` steps between two kept draws (leading axis)."""
    return StepStats(
        logdensity=stats.logdensity[-1],
        acceptance_rate=stats.acceptance_rate.mean(0),
        is_accepted=stats.is_accepted.any(0),
        step_size=stats.step_size[-1],
        num_grad_evals=stats.num_grad_evals.sum(0),
        diverging=stats.diverging.any(0),
        nonfinite=stats.nonfinite.any(0),
        extra=jax.tree.map(lambda x: x.mean(0) if jnp.issubdtype(x.dtype, jnp.floating) else x[-1], stats.extra),
    )


def _phase_runner(chain_step: Callable, position: Callable, thinning: int, record_draws: bool):
    """jit(chunk) for one phase: ``chain_step(keys, states, t) -> (states, stats)``."""

    def body(chain_keys, first_step):
        def one_draw(carry, i):
            def one_step(carry, j):
                t = first_step + i * thinning + j
                keys = jax.vmap(jax.random.fold_in, (0, None))(chain_keys, t)
                return chain_step(keys, carry, t)

            carry, stats = jax.lax.scan(one_step, carry, jnp.arange(thinning))
            stats = _merge_thinned(stats) if thinning > 1 else jax.tree.map(lambda x: x[0], stats)
            out = (jax.vmap(position)(carry), stats) if record_draws else stats
            return carry, out

        return one_draw

    return body


def _run_phase(sampler_step, position, chain_keys, states, first_step, num, thinning, chunk_size, record, bar):
    """Run ``num`` recorded iterations in chunks; returns (states, outputs, compile_s, run_s)."""
    runner = _phase_runner(sampler_step, position, thinning, record)
    compiled: dict[int, Callable] = {}
    outputs, compile_s, run_s, done = [], 0.0, 0.0, 0
    for length in _chunks(num, chunk_size):
        if length not in compiled:
            def chunk_fn(keys, carry, start, length=length):
                return jax.lax.scan(runner(keys, start), carry, jnp.arange(length))

            t0 = time.perf_counter()
            start0 = jnp.asarray(first_step, jnp.int32)
            compiled[length] = jax.jit(chunk_fn).lower(chain_keys, states, start0).compile()
            compile_s += time.perf_counter() - t0
        t0 = time.perf_counter()
        start = jnp.asarray(first_step + done * thinning, jnp.int32)
        states, out = compiled[length](chain_keys, states, start)
        jax.block_until_ready(out)
        run_s += time.perf_counter() - t0
        outputs.append(jax.device_get(out))
        done += length
        bar.update(length * thinning)
    return states, outputs, compile_s, run_s


def _concat(outputs):
    """Join chunk outputs along the draw axis and move chains first: (chain, draw, ...)."""
    if not outputs:
        return None
    joined = jax.tree.map(lambda *xs: np.concatenate(xs, axis=0), *outputs)
    return jax.tree.map(lambda x: np.swapaxes(x, 0, 1), joined)


def sample(
    target: Target,
    sampler: str | Recipe,
    *,
    num_chains: int = 4,
    num_warmup: int = 1000,
    num_draws: int = 1000,
    seed: int = 0,
    thinning: int = 1,
    init=None,
    progress: bool = True,
    chunk_size: int | None = None,
) -> Trace:
    """Run ``num_chains`` chains of ``sampler`` on ``target``: warm-up, then kept draws.

    ``sampler`` is a registered name (``"mala"``) or a recipe from
    ``gradmc.sampler("mala", step_size=0.1)``. Warm-up adapts the sampler's parameters;
    the kept draws come from the frozen kernel, every ``thinning``-th step. ``chunk_size``
    (kept draws per compiled chunk; default: about 20 chunks when a progress bar shows,
    else one) changes nothing in the draws. Returns a :class:`~gradmc.trace.Trace` with
    draws shaped ``(chain, draw, *event)``; ``trace.to_arviz()`` converts it.
    """
    check_positive("num_chains", num_chains, integer=True)
    check_positive("num_draws", num_draws, integer=True)
    check_positive("thinning", thinning, integer=True)
    if int(num_warmup) < 0 or float(num_warmup) != int(num_warmup):
        raise ValueError(f"num_warmup must be a non-negative integer, got {num_warmup!r}")
    num_chains, num_warmup, num_draws, thinning = map(int, (num_chains, num_warmup, num_draws, thinning))
    recipe = sampler_recipe(sampler) if isinstance(sampler, str) else sampler
    if not isinstance(recipe, Recipe):
        raise TypeError(f"sampler must be a name or a gradmc.sampler(...) recipe, got {type(sampler).__name__}")
    bound: Sampler = recipe.bind(target, num_warmup)

    root = jax.random.key(seed)
    chain_keys = jax.random.split(jax.random.fold_in(root, 0), num_chains)
    positions = initial_positions(target, num_chains, jax.random.fold_in(root, 1), init)
    init_keys = jax.random.split(jax.random.fold_in(root, 2), num_chains)
    states = jax.jit(jax.vmap(bound.init))(init_keys, positions)

    show = progress and chunk_size is None
    default_chunks = 20 if show else 1
    bar = _progress_bar(num_warmup + num_draws * thinning, f"{recipe.name} on {target.name}", progress)

    def warm_step(keys, states, t):
        return jax.vmap(bound.warmup_step, in_axes=(0, 0, None), axis_name="chain")(keys, states, t)

    warm_chunk = chunk_size if chunk_size is not None else math.ceil(max(num_warmup, 1) / default_chunks)
    states, warm_out, compile_w, warm_s = _run_phase(
        warm_step, bound.position, chain_keys, states, 0, num_warmup, 1, warm_chunk, False, bar
    )
    kernel_states, params = jax.jit(jax.vmap(bound.finalize))(states)

    def draw_step(keys, states, t):
        del t
        new, stats = jax.vmap(bound.step, axis_name="chain")(keys, states, params)
        return new, stats

    draw_chunk = chunk_size if chunk_size is not None else math.ceil(num_draws / default_chunks)
    kernel_states, draw_out, compile_d, draw_s = _run_phase(
        draw_step, bound.position, chain_keys, kernel_states, num_warmup, num_draws, thinning, draw_chunk, True, bar
    )
    bar.close()
    draws, stats = _concat(draw_out)
    warm_stats = _concat(warm_out)
    return Trace(
        target=target.name,
        sampler=recipe.name,
        options=dict(recipe.options),
        draws=np.asarray(draws),
        stats=Trace.flatten_stats(stats),
        warmup_stats=Trace.flatten_stats(warm_stats) if warm_stats is not None else {},
        params=jax.device_get(params),
        seed=int(seed),
        thinning=thinning,
        timing={"compile_s": compile_w + compile_d, "warmup_s": warm_s, "sampling_s": draw_s},
        final_state=jax.device_get(kernel_states),
    )
