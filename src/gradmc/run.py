"""``sample()``: the one driver for every gradmc sampler.

Chains are ``vmap``ped (axis name ``"chain"``) and, when several devices are present,
sharded over them along the chain axis; steps run as ``lax.scan`` over chunks, and the host
sees the chains only at chunk boundaries (progress bar, checkpoint, streaming). The key of
chain ``c`` at global step ``t`` is ``fold_in(chain_key[c], t)``, so the same seed gives
bit-identical draws whatever the chunk size, the device count, or a resume.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import sys
import time
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from gradmc.adapt.step_size import check_positive
from gradmc.base import Recipe, Sampler, StepStats, Target
from gradmc.checkpoint import RunStore
from gradmc.registry import sampler as sampler_recipe
from gradmc.trace import RunningMoments, Trace

__all__ = ["sample", "initial_positions", "checkpoint_root", "run_chains"]

WARMUP, DRAWS = "warmup", "draws"
_CHECKPOINT_ROOT: ContextVar[Path | None] = ContextVar("gradmc_checkpoint_root", default=None)


@contextmanager
def checkpoint_root(directory: str | os.PathLike | None):
    """Within this block every ``sample()`` call without its own ``checkpoint`` keeps one in
    ``directory/<fingerprint hash>``: rerunning the same code resumes each run where it
    stopped (what ``gradmc compare/reproduce --checkpoint DIR`` use)."""
    token = _CHECKPOINT_ROOT.set(None if directory is None else Path(directory))
    try:
        yield
    finally:
        _CHECKPOINT_ROOT.reset(token)


def _progress_bar(total: int, initial: int, desc: str, enabled: bool):
    from tqdm.auto import tqdm

    quiet = not enabled or os.environ.get("CI") or not sys.stderr.isatty()
    return tqdm(total=total, initial=initial, desc=desc, disable=bool(quiet), leave=False, unit="step")


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
        positions = jnp.asarray(arr, dtype=jnp.result_type(float))
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


def run_chains(bound: Sampler, chain_keys, init_keys, positions, num_warmup: int, num_steps: int, observe: Callable):
    """Warm-up then ``num_steps`` kept steps of ``bound`` on vmapped chains, as one pure,
    jittable function with the runner's keys (``fold_in(chain_key, t)``).

    For callers that batch whole runs, e.g. the step-size search over a grid of values.
    ``observe(states, stats)`` is recorded at each kept step. Returns
    ``(final states, params, observations)``; observations are stacked step-first.
    """
    states = jax.vmap(bound.init)(init_keys, positions)

    def warm(states, t):
        keys = jax.vmap(jax.random.fold_in, (0, None))(chain_keys, t)
        states, _ = jax.vmap(bound.warmup_step, (0, 0, None), axis_name="chain")(keys, states, t)
        return states, None

    states, _ = jax.lax.scan(warm, states, jnp.arange(num_warmup))
    states, params = jax.vmap(bound.finalize)(states)

    def draw(states, t):
        keys = jax.vmap(jax.random.fold_in, (0, None))(chain_keys, num_warmup + t)
        states, stats = jax.vmap(bound.step, axis_name="chain")(keys, states, params)
        return states, observe(states, stats)

    states, observations = jax.lax.scan(draw, states, jnp.arange(num_steps))
    return states, params, observations


def _chunk_lengths(total: int, size: int) -> list[int]:
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


def _chunk_function(chain_step: Callable, observe: Callable | None, thinning: int, length: int):
    """``chunk(chain_keys, states, params, first_step) -> (states, outputs)`` for ``length``
    recorded iterations of ``thinning`` steps each (``observe(states)`` recorded if given)."""

    def chunk(chain_keys, states, params, first_step):
        def one_iteration(carry, i):
            def one_step(carry, j):
                t = first_step + i * thinning + j
                keys = jax.vmap(jax.random.fold_in, (0, None))(chain_keys, t)
                return chain_step(keys, carry, t, params)

            carry, stats = jax.lax.scan(one_step, carry, jnp.arange(thinning))
            stats = _merge_thinned(stats) if thinning > 1 else jax.tree.map(lambda x: x[0], stats)
            return carry, (stats if observe is None else (observe(carry), stats))

        return jax.lax.scan(one_iteration, states, jnp.arange(length))

    return chunk


class _Phase(NamedTuple):
    step_fn: Callable
    num: int
    first_step: int
    thinning: int
    observer: Callable | None
    state_template: object
    params_template: object

    def output_template(self, chain_keys, length):
        """Shapes of one chunk's outputs, chains first (to reload a chunk from disk)."""
        fn = _chunk_function(self.step_fn, self.observer, self.thinning, length)
        shapes = jax.eval_shape(fn, chain_keys, self.state_template, self.params_template, jnp.int32(0))[1]
        return jax.tree.map(lambda s: jax.ShapeDtypeStruct((s.shape[1], s.shape[0], *s.shape[2:]), s.dtype), shapes)


def _to_chain_major(outputs):
    """Scan outputs are (iteration, chain, ...): move chains first."""
    return jax.tree.map(lambda x: np.swapaxes(np.asarray(x), 0, 1), outputs)


def _concat(outputs):
    if not outputs:
        return None
    return jax.tree.map(lambda *xs: np.concatenate(xs, axis=1), *outputs)


def _process_chains(num_chains: int) -> slice:
    """The chains of this process: all of them, or a contiguous block under jax.distributed."""
    count, index = jax.process_count(), jax.process_index()
    if num_chains % count:
        raise ValueError(f"num_chains ({num_chains}) must be a multiple of the number of processes ({count})")
    per = num_chains // count
    return slice(index * per, (index + 1) * per)


def _chain_sharding(num_chains: int, devices) -> NamedSharding | None:
    """Shard the chain axis over ``devices`` (default: all local devices, when there are
    several); ``None`` leaves placement to JAX (one default device)."""
    if devices is None:
        devices = jax.local_devices()
        if len(devices) == 1:
            return None
    devices = list(devices)
    if num_chains % len(devices):
        raise ValueError(f"num_chains ({num_chains}) must be a multiple of the number of devices ({len(devices)})")
    return NamedSharding(Mesh(np.array(devices), ("chain",)), PartitionSpec("chain"))


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
    keep: Callable | None = None,
    keep_draws: bool = True,
    checkpoint: str | os.PathLike | None = None,
    checkpoint_every: int = 1,
    devices=None,
    extended: int | None = None,
    extended_options: dict | None = None,
) -> Trace:
    """Run ``num_chains`` chains of ``sampler`` on ``target``: warm-up, then kept draws.

    ``sampler`` is a registered name (``"mala"``) or a recipe from
    ``gradmc.sampler("mala", step_size=0.1)``. Warm-up adapts the sampler's parameters;
    the kept draws come from the frozen kernel, every ``thinning``-th step.

    Scale and durability options (none changes the draws):

    * ``chunk_size`` — iterations per compiled chunk (default: about 20 chunks when a
      progress bar shows or a checkpoint is kept, else one).
    * ``keep`` — a function of one position recorded instead of the position (e.g.
      ``lambda x: x[:5]`` or a statistic), to bound memory.
    * ``keep_draws=False`` — keep no draws in memory, only running means and variances of
      the kept quantity (``trace.moments``); with ``checkpoint`` the draws still stream to
      disk chunk by chunk and ``trace.save_netcdf`` assembles them in bounded memory.
    * ``checkpoint`` — a folder: the state is saved atomically every ``checkpoint_every``
      chunks and the chunks' outputs as they finish; rerunning the same call resumes.
    * ``devices`` — devices to shard the chains over (default: all local devices).

    ``extended=N`` samples the pseudo-extended target with N particles instead (Nemeth et
    al.; ``extended_options`` go to :func:`gradmc.extended.pseudo_extended`) and returns
    draws of ``target`` resampled by importance weights; ``trace.extended`` keeps the
    particles, weights and the weights' effective sample size.

    Returns a :class:`~gradmc.trace.Trace` with draws shaped ``(chain, draw, *event)``.
    """
    if extended is not None:
        from gradmc.extended import pseudo_extended, resample_extended

        extended_target = pseudo_extended(target, extended, **(extended_options or {}))
        trace = sample(extended_target, sampler, num_chains=num_chains, num_warmup=num_warmup, num_draws=num_draws,
                       seed=seed, thinning=thinning, init=init, progress=progress, chunk_size=chunk_size,
                       checkpoint=checkpoint, checkpoint_every=checkpoint_every, devices=devices)
        weighted = resample_extended(trace, extended_target, jax.random.fold_in(jax.random.key(seed), 3))
        return dataclasses.replace(trace, target=target.name, draws=weighted.draws, extended=weighted)
    check_positive("num_chains", num_chains, integer=True)
    check_positive("num_draws", num_draws, integer=True)
    check_positive("thinning", thinning, integer=True)
    check_positive("checkpoint_every", checkpoint_every, integer=True)
    if chunk_size is not None:
        check_positive("chunk_size", chunk_size, integer=True)
    if int(num_warmup) < 0 or float(num_warmup) != int(num_warmup):
        raise ValueError(f"num_warmup must be a non-negative integer, got {num_warmup!r}")
    num_chains, num_warmup, num_draws, thinning = map(int, (num_chains, num_warmup, num_draws, thinning))
    recipe = sampler_recipe(sampler) if isinstance(sampler, str) else sampler
    if not isinstance(recipe, Recipe):
        raise TypeError(f"sampler must be a name or a gradmc.sampler(...) recipe, got {type(sampler).__name__}")
    bound: Sampler = recipe.bind(target, num_warmup)
    observe_one = bound.position if keep is None else (lambda s: keep(bound.position(s)))
    observe = jax.vmap(observe_one)

    # Many hosts (jax.distributed): each process runs its own contiguous block of chains,
    # with the keys and starts those chains have in a single-process run.
    local = _process_chains(num_chains)
    sharding = _chain_sharding(local.stop - local.start, devices)
    place = (lambda tree: tree[local]) if sharding is None else (lambda tree: jax.device_put(tree[local], sharding))
    root = jax.random.key(seed)
    chain_keys = place(jax.random.split(jax.random.fold_in(root, 0), num_chains))
    positions = place(initial_positions(target, num_chains, jax.random.fold_in(root, 1), init))
    init_keys = place(jax.random.split(jax.random.fold_in(root, 2), num_chains))
    warm_states = jax.jit(jax.vmap(bound.init))(init_keys, positions)
    finalize = jax.jit(jax.vmap(bound.finalize))

    many_chunks = (progress and sys.stderr.isatty()) or checkpoint is not None or _CHECKPOINT_ROOT.get() is not None

    def size(total):
        return chunk_size or (math.ceil(max(total, 1) / 20) if many_chunks else max(total, 1))

    store = None
    root_dir = _CHECKPOINT_ROOT.get()
    if checkpoint is not None or root_dir is not None:
        fingerprint = {
            "target": target.name, "sampler": recipe.name, "options": repr(sorted(recipe.options.items())),
            "num_chains": num_chains, "num_warmup": num_warmup, "num_draws": num_draws, "seed": seed,
            "thinning": thinning, "chunk_size": [size(num_warmup), size(num_draws)],
            # the log density at the starts tells targets of one name but other data apart
            "start_logdensity": float(np.sum(np.asarray(jax.vmap(target.logdensity_fn)(positions), np.float64))),
            "keep": None if keep is None else getattr(keep, "__qualname__", repr(keep)),
        }
        if checkpoint is None:
            digest = hashlib.sha1(json.dumps(fingerprint, sort_keys=True, default=str).encode()).hexdigest()[:16]
            checkpoint = root_dir / f"{target.name}-{recipe.name}-{digest}"
        if jax.process_count() > 1:
            checkpoint = Path(checkpoint) / f"process_{jax.process_index()}"
        store = RunStore(checkpoint, fingerprint)

    def warm_step(keys, states, t, params):
        del params
        return jax.vmap(bound.warmup_step, in_axes=(0, 0, None), axis_name="chain")(keys, states, t)

    def draw_phase(params):
        """The kept-draw phase for these adapted parameters. Parameters equal in every chain
        (a learned preconditioner, a shared step size) are passed once, not per chain, so
        the kernel uses one matrix for all chains instead of a batch of copies."""
        axes = jax.tree.map(lambda x: None if x.ndim and np.all(np.asarray(x) == np.asarray(x)[:1]) else 0, params)
        shared = jax.tree.map(lambda x, a: x[0] if a is None else x, params, axes)

        def draw_step(keys, states, t, step_params):
            del t
            return jax.vmap(bound.step, in_axes=(0, 0, axes), axis_name="chain")(keys, states, step_params)

        template = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype), shared)
        return _Phase(draw_step, num_draws, num_warmup, thinning, observe, kernel_template, template), shared

    kernel_template, params_template = jax.eval_shape(finalize, warm_states)
    phases = {WARMUP: _Phase(warm_step, num_warmup, 0, 1, None, warm_states, None)}
    phase, done, states, params = WARMUP, 0, warm_states, None
    timing = {"compile_s": 0.0, "warmup_s": 0.0, "sampling_s": 0.0}
    if store is not None and (saved := store.load_state({WARMUP: warm_states, DRAWS: kernel_template}, params_template)):
        phase, done, states, params, saved_timing = saved
        timing.update(saved_timing)
        reshard = (lambda t: t) if sharding is None else (lambda t: jax.device_put(t, sharding))
        states, params = reshard(states), None if params is None else reshard(params)

    total_steps = num_warmup + num_draws * thinning
    bar = _progress_bar(total_steps, done if phase == WARMUP else num_warmup + done * thinning,
                        f"{recipe.name} on {target.name}", progress)
    collected: dict[str, list] = {WARMUP: [], DRAWS: []}
    moments = RunningMoments()

    def collect(name, out):
        if name == DRAWS:
            draws, stats = out
            moments.update(draws)
            out = (draws if keep_draws else None, stats)
        collected[name].append(out)

    def run_phase(name, states, step_params, already_done, saved_params=None):
        """Run (or, for chunks finished before a resume, reload) one phase's chunks."""
        spec = phases[name]
        params = step_params
        compiled: dict[int, Callable] = {}
        iterations = 0
        for index, length in enumerate(_chunk_lengths(spec.num, size(spec.num)) if spec.num else []):
            if iterations < already_done:
                collect(name, store.load_chunk(name, index, spec.output_template(chain_keys, length)))
                iterations += length
                continue
            if length not in compiled:
                t0 = time.perf_counter()
                fn = jax.jit(_chunk_function(spec.step_fn, spec.observer, spec.thinning, length))
                compiled[length] = fn.lower(chain_keys, states, params, jnp.int32(0)).compile()
                timing["compile_s"] += time.perf_counter() - t0
            t0 = time.perf_counter()
            first = jnp.int32(spec.first_step + iterations * spec.thinning)
            states, out = compiled[length](chain_keys, states, params, first)
            out = _to_chain_major(jax.device_get(out))
            timing["warmup_s" if name == WARMUP else "sampling_s"] += time.perf_counter() - t0
            iterations += length
            if store is not None:
                store.save_chunk(name, index, out)
                if (index + 1) % checkpoint_every == 0 or iterations == spec.num:
                    store.save_state(name, iterations, states, saved_params, timing)
            collect(name, out)
            bar.update(length * spec.thinning)
        return states

    if phase == WARMUP:
        states = run_phase(WARMUP, states, None, done)
        states, params = finalize(states)
        if store is not None:
            store.save_state(DRAWS, 0, states, params, timing)
        done = 0
    else:  # resumed in the draw phase: the warm-up statistics come back from disk
        run_phase(WARMUP, None, None, num_warmup)
    phases[DRAWS], step_params = draw_phase(params)
    states = run_phase(DRAWS, states, step_params, done, params)
    bar.close()

    draw_stats = _concat([s for _, s in collected[DRAWS]])
    warm_stats = _concat(collected[WARMUP])
    return Trace(
        target=target.name,
        sampler=recipe.name,
        options=dict(recipe.options),
        draws=_concat([d for d, _ in collected[DRAWS]]) if keep_draws else None,
        stats=Trace.flatten_stats(draw_stats),
        warmup_stats=Trace.flatten_stats(warm_stats) if warm_stats is not None else {},
        params=jax.device_get(params),
        seed=int(seed),
        thinning=thinning,
        timing=timing,
        final_state=jax.device_get(states),
        moments=moments.result(),
        directory=None if store is None else Path(checkpoint),
        first_chain=local.start,
    )

