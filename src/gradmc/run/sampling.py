"""``sample()``: the one driver for every gradmc sampler.

Chains are ``vmap``ped (axis name ``"chain"``) and, when several devices are present,
sharded over them along the chain axis; steps run as ``lax.scan`` over chunks, and the host
sees the chains only at chunk boundaries (progress bar, checkpoint, streaming). The key of
chain ``c`` at global step ``t`` is ``fold_in(chain_key[c], t)``, so the same seed gives
bit-identical draws whatever the chunk size, the device count, or a resume (except that a
model pooled over chains in warm-up, PAVG's M or PDHAMS's W, is summed over devices in an
order that depends on their number, so it agrees across device counts to rounding error).
"""

from __future__ import annotations

import functools
import math
import os
import secrets
import sys
import time
from collections.abc import Callable, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from gradmc.base import BoundSampler, Sampler, Shared, Target
from gradmc.checks import check_positive
from gradmc.compile_cache import enable_compilation_cache
from gradmc.composed import AUTO, auto_sampler, composed_sampler
from gradmc.diagnostics._common import preload_arviz
from gradmc.diagnostics.health import emit_warnings
from gradmc.extended import sample_extended
from gradmc.models import resolve_target
from gradmc.registry import Entry
from gradmc.registry import sampler as registered_sampler
from gradmc.registry import samplers as registered_samplers
from gradmc.run.loop import (
    chain_axes,
    check_num_warmup,
    chunk_function,
    chunk_lengths,
    draw_step_fn,
    finalize_fn,
    freeze_fn,
    init_states,
    per_chain_view,
    run_keys,
    shared_axes,
    warmup_step_fn,
)
from gradmc.run.store import RunStore, open_store, run_fingerprint
from gradmc.spaces import DiscreteSpace, Product
from gradmc.trace import RunningMoments, Trace

__all__ = ["sample", "initial_positions", "checkpoint_root", "RunInterrupted"]

WARMUP, DRAWS = "warmup", "draws"
_CHECKPOINT_ROOT: ContextVar[Path | None] = ContextVar("gradmc_checkpoint_root", default=None)


@contextmanager
def checkpoint_root(directory: str | os.PathLike | None):
    """Within this block every ``sample()`` call without its own ``checkpoint`` keeps one in
    ``directory/<fingerprint hash>``: rerunning the same code resumes each run where it
    stopped (what ``gradmc compare/reproduce --checkpoint DIR`` use).

    Parameters
    ----------
    directory : path or None
        The folder of the runs' checkpoints (None: no checkpoints).
    """
    token = _CHECKPOINT_ROOT.set(None if directory is None else Path(directory))
    try:
        yield
    finally:
        _CHECKPOINT_ROOT.reset(token)


def _progress_bar(total: int, initial: int, desc: str, enabled: bool):
    from tqdm.auto import tqdm

    quiet = not enabled or os.environ.get("CI") or not sys.stderr.isatty()
    return tqdm(total=total, initial=initial, desc=desc, disable=bool(quiet), leave=False, unit="step")


def _show_phase(bar, run_name: str, phase: str) -> None:
    """The progress bar reads "NAME: warm-up" or "NAME: sampling" (a hidden bar stays hidden)."""
    if not bar.disable:
        bar.set_description_str(f"{run_name}: {'warm-up' if phase == WARMUP else 'sampling'}")


@contextmanager
def _compiling(bar):
    """Within this block the progress bar reads "NAME (compiling)", so a bar that has not
    moved yet says why (a hidden bar stays hidden).
    """
    if bar.disable:
        yield
        return
    desc = bar.desc
    bar.set_description_str(f"{desc} (compiling)")
    try:
        yield
    finally:
        bar.set_description_str(desc)


#: Up to this many chains, a start that is a compiled function (``from_numpyro``'s on a model with
#: discrete sites, which it draws to read the model) is drawn one chain at a time, as compiled,
#: where drawing them all at once compiles it again, batched (about 1 s on the change point of
#: benchmarks/mixed.py); other starts, and more chains, are one batched program.
LOOPED_STARTS = 16


def initial_positions(target: Target, num_chains: int, key: jax.Array, init=None) -> jax.Array:
    """Starting positions, shape ``(num_chains, *event_shape)``, checked against the target.

    ``init`` is ``None`` (draw from ``target.draw_initial``), one position (shared by all
    chains) or one per chain. The log density must be finite at every start.

    Parameters
    ----------
    target : Target
        The target (its space validates the starts).
    num_chains : int
        The number of chains.
    key : jax.Array
        The key of drawn starts.
    init : array_like, optional
        Given starts.
    """
    shape = target.space.event_shape
    if init is None:
        keys = jax.random.split(key, num_chains)
        start = target.initial_position
        # a jax.jit function (a NumPyro model's start) runs as compiled, not compiled again
        if start is not None and hasattr(start, "lower") and num_chains <= LOOPED_STARTS:
            positions = jnp.stack([jnp.asarray(start(k)) for k in keys])
        else:
            positions = jax.jit(jax.vmap(target.draw_initial))(keys)
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


class _Phase(NamedTuple):
    """One phase of a run (warm-up or kept draws) as :func:`chunk_function` runs it."""

    step_fn: Callable
    num: int
    first_step: int
    thinning: int
    observer: Callable | None
    state_template: object
    params_template: object
    chunk: int  # iterations per chunk

    def output_template(self, chain_keys, length):
        """Shapes of one chunk's outputs, chains first (to reload a chunk from disk)."""
        fn = chunk_function(self.step_fn, self.observer, self.thinning, length)
        shapes = jax.eval_shape(fn, chain_keys, self.state_template, self.params_template, jnp.int32(0))[1]
        return jax.tree.map(lambda s: jax.ShapeDtypeStruct((s.shape[1], s.shape[0], *s.shape[2:]), s.dtype), shapes)


def _draw_phase(
    bound: BoundSampler,
    params,
    num_draws: int,
    num_warmup: int,
    thinning: int,
    observe: Callable,
    kernel_template,
    chunk: int,
) -> tuple[_Phase, object]:
    """The kept-draw phase for these adapted parameters (``kernel_template``: the kernel
    states' shapes; ``chunk``: iterations per chunk), and the parameters its steps take.
    Parameters equal in every chain (a learned preconditioner, a shared step size) are passed
    once, not per chain, so the kernel uses one matrix for all chains instead of a batch of copies.
    """
    axes, shared = shared_axes(params)
    template = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype), shared)
    phase = _Phase(
        draw_step_fn(bound, axes), num_draws, num_warmup, thinning, observe, kernel_template, template, chunk
    )
    return phase, shared


class _ChunkPlan(NamedTuple):
    """How a run is cut into compiled chunks: iterations per chunk of the warm-up and of the
    kept draws, and whether both phases run one program (frozen warm-up steps as the kept
    draws, :attr:`~gradmc.base.BoundSampler.freeze`).
    """

    warmup: int
    draws: int
    one_program: bool


def _chunk_plan(
    bound: BoundSampler, size: Callable[..., int], num_warmup: int, num_draws: int, thinning: int, draw_bytes: int
) -> _ChunkPlan:
    """One program for both phases where the sampler can freeze its warm-up, every kept step
    is recorded, and recording the warm-up's positions too stays small; its chunks then have
    one length, a divisor of both phases' lengths where one is not much shorter (else a
    shorter last chunk compiles once more).
    """
    warmup, draws = size(num_warmup), size(num_draws, draw_bytes)
    one_program = (
        bound.freeze is not None
        and thinning == 1
        and min(num_warmup, num_draws) > 0
        and num_warmup * draw_bytes <= LARGE_RUN_BYTES
    )
    if not one_program:
        return _ChunkPlan(warmup, draws, False)
    common = min(size(min(num_warmup, num_draws)), draws)
    divisor = math.gcd(num_warmup, num_draws)
    if (num_warmup % common or num_draws % common) and divisor * 8 >= common:
        common = divisor  # chunks of one length, at most 8 times as many
    return _ChunkPlan(common, common, True)


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
    several); ``None`` leaves placement to JAX (one default device).
    """
    if devices is None:
        devices = jax.local_devices()
        if len(devices) == 1:
            return None
    devices = list(devices)
    if num_chains % len(devices):
        raise ValueError(f"num_chains ({num_chains}) must be a multiple of the number of devices ({len(devices)})")
    return NamedSharding(Mesh(np.array(devices), ("chain",)), PartitionSpec("chain"))


class _Placement(NamedTuple):
    """Which chains this process runs (all of them, or a contiguous block under
    jax.distributed, with the keys and starts they have in a single-process run) and how
    they are sharded over its devices.
    """

    chains: slice
    sharding: NamedSharding | None

    @classmethod
    def create(cls, num_chains: int, devices) -> _Placement:
        local = _process_chains(num_chains)
        return cls(local, _chain_sharding(local.stop - local.start, devices))

    def place(self, tree):
        """This process's chains of a whole-run array, on their devices."""
        return tree[self.chains] if self.sharding is None else jax.device_put(tree[self.chains], self.sharding)

    def reshard(self, tree):
        """A tree of this process's chains (e.g. reloaded from disk), on their devices; its
        :class:`~gradmc.base.Shared` parts (no chain axis) on every device.
        """
        if self.sharding is None:
            return jax.device_put(tree)
        replicated = NamedSharding(self.sharding.mesh, PartitionSpec())

        def put(node):
            return jax.device_put(node, replicated if isinstance(node, Shared) else self.sharding)

        return jax.tree.map(put, tree, is_leaf=lambda node: isinstance(node, Shared))


def _index_space(target: Target, keep: Callable | None) -> DiscreteSpace | None:
    """The discrete space whose value indices the run keeps instead of positions (discrete
    targets without ``keep``), or None.
    """
    space = target.space
    return space if keep is None and isinstance(space, DiscreteSpace) else None


def _observer(bound: BoundSampler, target: Target, keep: Callable | None) -> Callable:
    """What one chain records per kept step: ``keep(position)``, the position, or (on a
    discrete space) the value index of each coordinate in the space's smallest integer dtype.
    """
    if keep is not None:
        return lambda state: keep(bound.position(state))
    space = _index_space(target, keep)
    if space is not None:
        return lambda state: space.to_index(bound.position(state)).astype(space.index_dtype)
    return bound.position


def _every_chain(observe: Callable) -> Callable:
    """``observe`` of every chain (the parts of a state held once are passed once)."""
    return lambda states: jax.vmap(observe, in_axes=(chain_axes(states),))(states)


def _bytes_per_iteration(keep: Callable | None, target: Target, num_chains: int) -> int:
    """Bytes of one iteration's kept outputs over all chains (traced, nothing runs)."""
    space = _index_space(target, keep)
    if space is not None:
        return num_chains * space.d * space.index_dtype.itemsize
    shapes = jax.ShapeDtypeStruct((num_chains, *target.space.event_shape), jnp.result_type(float))
    if keep is not None:
        shapes = jax.eval_shape(jax.vmap(keep), shapes)
    return sum(int(np.prod(s.shape, dtype=np.int64)) * s.dtype.itemsize for s in jax.tree.leaves(shapes))


@functools.cache
def _use_compilation_cache() -> None:
    """Turn on JAX's persistent compilation cache once per process, as the command line does
    (:mod:`gradmc.compile_cache`), unless the caller chose a cache folder of their own or set
    ``GRADMC_NO_COMPILE_CACHE``: a repeated script then loads its compiled programs instead of
    compiling them again.
    """
    if not jax.config.values["jax_compilation_cache_dir"]:
        enable_compilation_cache()


def _check_seed(seed) -> int:
    """``seed`` as a non-negative int, or a fresh one drawn from the operating system for None."""
    if seed is None:
        return secrets.randbits(31)
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise TypeError(f"seed must be a non-negative integer or None (a fresh seed), got {seed!r}")
    return int(seed)


def _check_arguments(num_chains, num_warmup, num_draws, thinning, chunk_size, checkpoint_every) -> tuple[int, ...]:
    """``(num_chains, num_warmup, num_draws, thinning)`` as ints, after checking them."""
    check_positive("num_chains", num_chains, integer=True)
    check_positive("num_draws", num_draws, integer=True)
    check_positive("thinning", thinning, integer=True)
    check_positive("checkpoint_every", checkpoint_every, integer=True)
    if chunk_size is not None:
        check_positive("chunk_size", chunk_size, integer=True)
    check_num_warmup(num_warmup)
    return tuple(map(int, (num_chains, num_warmup, num_draws, thinning)))


_SPACES = {"continuous": "continuous spaces (Real)", "discrete": "discrete spaces (Binary, Spin, Ordinal, Categorical)"}


def _entry(sampler: Sampler) -> Entry:
    """The registry entry of ``sampler``; for one built by hand (not registered under its
    name), an entry with its builder and no declarations.
    """
    entry = next((e for e in registered_samplers() if e.name == sampler.name), None)
    if entry is None or entry.constructor is not sampler.build:
        return Entry(sampler.name, sampler.build, "", "any")
    return entry


def _check_fits(sampler: Sampler, target: Target) -> None:
    """A ``ValueError``, before anything is compiled, when a registered sampler is given a
    target on a space it does not sample; the message lists the samplers that fit.
    """
    kind = "discrete" if target.space.is_discrete else "continuous"
    entry = _entry(sampler)
    if entry.kind in ("any", kind):
        return
    fitting = ", ".join(e.name for e in registered_samplers(kind))
    raise ValueError(
        f"sampler {sampler.name!r} samples {_SPACES[entry.kind]}; target {target.name!r} lives on {target.space}. "
        f"Samplers for {kind} targets: {fitting}"
    )


def _as_sampler(sampler, target: Target) -> Sampler:
    """The :class:`Sampler` that ``sample`` runs: a registered name's, ``sampler`` itself, or
    on a mixed target (or for a dict of samplers, or ``"auto"``) the blocks' composition
    (:func:`gradmc.composed.composed_sampler`).
    """
    space = target.space
    if isinstance(space, Product) and (space.discrete_parts or isinstance(sampler, Mapping) or sampler == AUTO):
        return composed_sampler(target, sampler)
    if isinstance(sampler, Mapping):
        raise TypeError(
            f"a dict of samplers names parts of a mixed target; target {target.name!r} lives on {space}: "
            "give one sampler"
        )
    if sampler == AUTO:
        sampler = auto_sampler(space)
    sampler = registered_sampler(sampler) if isinstance(sampler, str) else sampler
    if not isinstance(sampler, Sampler):
        raise TypeError(f"sampler must be a name or a gradmc.sampler(...) recipe, got {type(sampler).__name__}")
    return sampler


LARGE_RUN_BYTES = 1 << 26  # kept outputs above this (64 MiB) are produced in small chunks...
MAX_CHUNK_BYTES = 1 << 28  # ...of at most 1/16 of the outputs and 256 MiB: a chunk in flight adds little memory


def _chunk_size_fn(chunk_size: int | None, progress: bool, checkpoint) -> Callable[..., int]:
    """``size(total, bytes_per_iteration=0)``: iterations per chunk of a phase of ``total``
    iterations (``chunk_size``; by default about 20 chunks when a progress bar shows or a
    checkpoint is kept, else one; for outputs above :data:`LARGE_RUN_BYTES`, chunks of at
    most a sixteenth of them and :data:`MAX_CHUNK_BYTES`, so the draws' peak memory stays
    close to their own size).
    """
    many_chunks = (progress and sys.stderr.isatty()) or checkpoint is not None or _CHECKPOINT_ROOT.get() is not None

    def size(total, bytes_per_iteration=0):
        if chunk_size:
            return chunk_size
        default = math.ceil(max(total, 1) / 20) if many_chunks else max(total, 1)
        total_bytes = total * bytes_per_iteration
        if total_bytes <= LARGE_RUN_BYTES:
            return default
        return max(1, min(default, min(MAX_CHUNK_BYTES, total_bytes // 16) // bytes_per_iteration))

    return size


class _DrawBuffer:
    """The kept draws ``(chain, draw, *event)``, written chunk by chunk into one array
    allocated at the first chunk, so the draws exist once in memory (no concatenation).
    """

    def __init__(self, total: int):
        self.total = total
        self.array: np.ndarray | None = None
        self.filled = 0

    def add(self, chunk: np.ndarray) -> None:
        """Append a chunk ``(chain, draw, *event)`` after the draws written so far."""
        if self.array is None:
            self.array = np.empty((chunk.shape[0], self.total, *chunk.shape[2:]), chunk.dtype)
        self.array[:, self.filled : self.filled + chunk.shape[1]] = chunk
        self.filled += chunk.shape[1]


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C (``KeyboardInterrupt``) during :func:`sample`, with how far the run got.

    With a checkpoint, the same call resumes from it; the draws are the same.

    Parameters
    ----------
    run : str
        The run (``"mala on banana"``).
    done : int
        Steps finished (warm-up steps, then draw-phase steps, thinned ones included).
    total : int
        The run's steps.
    checkpoint : Path or None
        The folder a rerun resumes from; None when nothing was saved.
    """

    def __init__(self, run: str, done: int, total: int, checkpoint: Path | None):
        super().__init__(run, done, total, checkpoint)
        self.run, self.done, self.total, self.checkpoint = run, done, total, checkpoint

    def __str__(self) -> str:
        kept = "nothing was saved" if self.checkpoint is None else f"checkpoint in {self.checkpoint}"
        return f"{self.run}: interrupted after {self.done} of {self.total} steps; {kept}"


class _PhaseRunner:
    """Runs the phases of one :func:`sample` call chunk by chunk: compiles, times, stores
    (when ``store`` is given) and collects each chunk's outputs.
    """

    def __init__(
        self,
        chain_keys,
        store: RunStore | None,
        plan: _ChunkPlan,
        checkpoint_every: int,
        keep_draws: bool,
        decode: Callable | None = None,
    ):
        self.chain_keys = chain_keys
        self.store = store
        self.plan = plan
        self.compiled: dict[tuple, tuple] = {}  # (step function, observer, thinning, length) -> (program, placement)
        self.checkpoint_every = checkpoint_every
        self.keep_draws = keep_draws
        self.draw_buffer: _DrawBuffer | None = None  # made by run() when draws are kept
        self.timing = {"compile_s": 0.0, "warmup_s": 0.0, "sampling_s": 0.0}
        self.collected: dict[str, list] = {WARMUP: [], DRAWS: []}
        self.moments = RunningMoments(decode)  # decode: value indices -> positions
        self.bar: Any = None  # the progress bar, made by run()
        self.run_name = ""  # "SAMPLER on TARGET", the bar's label

    def collect(self, name: str, out) -> None:
        """Keep one chunk's outputs (for the draws: update the running moments, and drop
        the draws themselves when ``keep_draws`` is False).
        """
        if name == DRAWS:
            draws, stats = out
            self.moments.update(draws)
            if self.draw_buffer is not None:
                self.draw_buffer.add(draws)
            out = stats  # the draws live in the buffer (or nowhere, without keep_draws)
        elif self.plan.one_program:
            out = out[1]  # the warm-up's positions, recorded only to share the draws' program
        self.collected[name].append(out)

    def resume(self, placement: _Placement, warm_states, kernel_template, params_template):
        """``(phase, iterations done, states, params)``: from the store's last save, or a fresh start."""
        saved = (
            None
            if self.store is None
            else self.store.load_state({WARMUP: warm_states, DRAWS: kernel_template}, params_template)
        )
        if not saved:
            return WARMUP, 0, warm_states, None
        phase, done, states, params, saved_timing = saved
        self.timing.update(saved_timing)
        return phase, done, placement.reshard(states), None if params is None else placement.reshard(params)

    def run_phase(self, name: str, spec: _Phase, states, params, already_done: int, saved_params=None):
        """Run (or, for chunks finished before a resume, reload) the chunks of one phase."""
        iterations = 0
        templates = {}  # one trace of the chunk per length: a composed sampler's takes a second or more
        _show_phase(self.bar, self.run_name, name)
        for index, length in enumerate(chunk_lengths(spec.num, spec.chunk) if spec.num else []):
            if iterations < already_done:  # only after a resume, so from a store
                assert self.store is not None
                if length not in templates:
                    templates[length] = spec.output_template(self.chain_keys, length)
                self.collect(name, self.store.load_chunk(name, index, templates[length]))
                iterations += length
                continue
            program = (spec.step_fn, spec.observer, spec.thinning, length)
            if program not in self.compiled:
                t0 = time.perf_counter()
                with _compiling(self.bar):
                    fn = jax.jit(chunk_function(spec.step_fn, spec.observer, spec.thinning, length))
                    compiled = fn.lower(self.chain_keys, states, params, jnp.int32(0)).compile()
                self.compiled[program] = compiled, jax.tree.map(lambda x: x.sharding, states)
                self.timing["compile_s"] += time.perf_counter() - t0
            compiled, shardings = self.compiled[program]
            # the placement the chunk was compiled for (a no-op unless the compiler moved a part)
            states = jax.device_put(states, shardings)
            t0 = time.perf_counter()
            first = jnp.int32(spec.first_step + iterations * spec.thinning)
            states, out = compiled(self.chain_keys, states, params, first)
            out = _to_chain_major(jax.device_get(out))
            self.timing["warmup_s" if name == WARMUP else "sampling_s"] += time.perf_counter() - t0
            iterations += length
            if self.store is not None:
                self.store.save_chunk(name, index, out)
                if (index + 1) % self.checkpoint_every == 0 or iterations == spec.num:
                    self.store.save_state(name, iterations, states, saved_params, self.timing)
            self.collect(name, out)
            self.bar.update(length * spec.thinning)
        return states

    def run(
        self,
        bound: BoundSampler,
        placement: _Placement,
        warm_states,
        observe: Callable,
        num_warmup: int,
        num_draws: int,
        thinning: int,
        progress: tuple[str, bool],
    ):
        """Warm-up, then the kept draws (resuming from the store when it holds a state);
        returns the final kernel states and the adapted parameters. Ctrl-C raises
        :class:`RunInterrupted`, which says how far the run got, instead of ``KeyboardInterrupt``.
        """
        try:
            plan = self.plan
            finalize = jax.jit(finalize_fn(bound))
            kernel_template, params_template = jax.eval_shape(finalize, warm_states)
            warm_step = warmup_step_fn(bound)
            recorded = observe if plan.one_program else None
            warmup = _Phase(warm_step, num_warmup, 0, 1, recorded, warm_states, None, plan.warmup)
            draw_template = warm_states if plan.one_program else kernel_template
            phase, done, states, params = self.resume(placement, warm_states, draw_template, params_template)
            self.run_name = progress[0]
            self.bar = _progress_bar(
                num_warmup + num_draws * thinning, done if phase == WARMUP else num_warmup + done * thinning, *progress
            )
            if phase == WARMUP:
                states = self.run_phase(WARMUP, warmup, states, None, done)
                if plan.one_program:
                    states = jax.jit(freeze_fn(bound))(states)
                    params = finalize(states)[1]
                else:
                    states, params = finalize(states)
                if self.store is not None:
                    self.store.save_state(DRAWS, 0, states, params, self.timing)
                done = 0
            else:  # resumed in the draw phase: the warm-up statistics come back from disk
                self.run_phase(WARMUP, warmup, None, None, num_warmup)
            if plan.one_program:  # frozen warm-up steps: the warm-up's compiled program
                draws = _Phase(warm_step, num_draws, num_warmup, 1, observe, warm_states, None, plan.draws)
                step_params = None
            else:
                draws, step_params = _draw_phase(
                    bound, params, num_draws, num_warmup, thinning, observe, kernel_template, plan.draws
                )
            self.draw_buffer = _DrawBuffer(num_draws) if self.keep_draws else None
            states = self.run_phase(DRAWS, draws, states, step_params, done, params)
            if plan.one_program:
                states = finalize(states)[0]
            self.bar.close()
            return states, params
        except KeyboardInterrupt:
            if self.bar is not None:
                self.bar.close()
            done = sum(jax.tree.leaves(out)[0].shape[1] for out in self.collected[WARMUP])
            done += thinning * sum(jax.tree.leaves(out)[0].shape[1] for out in self.collected[DRAWS])
            total = num_warmup + num_draws * thinning
            checkpoint = None if self.store is None else self.store.directory
            raise RunInterrupted(progress[0], done, total, checkpoint) from None


def _trace(
    target: Target,
    sampler: Sampler,
    runner: _PhaseRunner,
    states,
    params,
    *,
    seed: int,
    thinning: int,
    indices: bool,
    first_chain: int,
    named: bool,
) -> Trace:
    """The :class:`~gradmc.trace.Trace` of a finished run from its collected chunks
    (``indices``: the kept draws are value indices of a discrete space; ``named``: they
    are positions, which the target's variables name).
    """
    draw_stats = _concat(runner.collected[DRAWS])
    warm_stats = _concat(runner.collected[WARMUP])
    return Trace(
        target=target.name,
        sampler=sampler.name,
        options=dict(sampler.options),
        draws=None if runner.draw_buffer is None or indices else runner.draw_buffer.array,
        indices=runner.draw_buffer.array if runner.draw_buffer is not None and indices else None,
        space=target.space if indices or named else None,
        stats=Trace.flatten_stats(draw_stats),
        warmup_stats=Trace.flatten_stats(warm_stats) if warm_stats is not None else {},
        params=per_chain_view(params, runner.chain_keys.shape[0]),
        seed=int(seed),
        thinning=thinning,
        timing=runner.timing,
        final_state=jax.device_get(states),
        moments=runner.moments.result(),
        directory=None if runner.store is None else runner.store.directory,
        first_chain=first_chain,
        variables=target.variables if named else None,
    )


def sample(
    target: Target | str | Callable,
    sampler: str | Sampler | Mapping = AUTO,
    *,
    num_chains: int = 4,
    num_warmup: int = 1000,
    num_draws: int = 1000,
    seed: int | None = 0,
    thinning: int = 1,
    init=None,
    space=None,
    progress: bool = True,
    chunk_size: int | None = None,
    keep: Callable | None = None,
    keep_draws: bool = True,
    checkpoint: str | os.PathLike | None = None,
    checkpoint_every: int = 1,
    restart: bool = False,
    devices=None,
    extended: int | None = None,
    extended_options: dict | None = None,
) -> Trace:
    """Run ``num_chains`` chains of ``sampler`` on ``target``: warm-up, then kept draws.

    Warm-up adapts the sampler's parameters; the kept draws come from the frozen kernel,
    every ``thinning``-th step. The scale and durability options (``chunk_size``, ``keep``,
    ``keep_draws``, ``checkpoint``, ``devices``) never change the draws.

    Parameters
    ----------
    target : Target, str or callable
        The distribution to sample: a Target, a registered target name (``"banana"``), or
        a log-density function of one position (with ``init`` or ``space``, see
        :func:`gradmc.models.resolve_target`).
    sampler : str, Sampler or dict
        A registered name (``"mala"``), ``gradmc.sampler("mala", step_size=0.1)`` or
        ``"auto"``, the default (NUTS on real targets; :func:`gradmc.composed.auto_sampler`). On a mixed
        target (``space`` a dict) one sampler per block, moved in turn: a dict from an
        entry (or a tuple of entries) to its sampler, entries not named ``"auto"``
        (:mod:`gradmc.composed`); one name applies to every block of its kind.
    num_chains, num_warmup, num_draws : int
        Chains, warm-up steps per chain and kept draws per chain.
    seed : int or None
        The run's seed; the key of chain ``c`` at step ``t`` is ``fold_in(chain_key[c], t)``.
        None draws a fresh seed, kept in ``trace.seed`` so that the run can be repeated.
    thinning : int
        Keep every ``thinning``-th step.
    init : array or pytree, optional
        One starting position for all chains, or one per chain (default: drawn from the
        target). For a log-density function without ``space``: one position, an array or
        a pytree (dict, NamedTuple, tuple of arrays and scalars) that the function takes;
        the space is then ``Real`` of its size.
    space : Space, str or dict, optional
        The space of a log-density function's positions (``gradmc.spaces.Binary(100)``
        or ``"categorical:4x900"``); needed for discrete models. A dict names the spaces of
        some entries of a pytree ``init`` (``{"gamma": gradmc.spaces.Binary(10)}``), the
        rest real: a mixed model.
    progress : bool
        Show a progress bar (only on a terminal, never under ``CI``).
    chunk_size : int, optional
        Iterations per compiled chunk (default: about 20 chunks when a progress bar shows or
        a checkpoint is kept, else one).
    keep : callable, optional
        A function of one position recorded instead of the position (e.g. ``lambda x: x[:5]``
        or a statistic), to bound memory.
    keep_draws : bool
        False keeps no draws in memory, only running means and variances of the kept quantity
        (``trace.moments``); with ``checkpoint`` the draws still stream to disk chunk by chunk
        and ``trace.save_netcdf`` assembles them in bounded memory.
    checkpoint : path, optional
        A folder: the state is saved atomically every ``checkpoint_every`` chunks and the
        chunks' outputs as they finish; rerunning the same call resumes.
    checkpoint_every : int
        Chunks between two saves of the state.
    restart : bool
        Discard what ``checkpoint`` holds and start again (the way out of a checkpoint that
        cannot be resumed: a damaged file, another configuration).
    devices : sequence of jax.Device, optional
        Devices to shard the chains over (default: all local devices).
    extended : int, optional
        Sample the pseudo-extended target with this many particles instead (Nemeth et al.
        2022, eqs 4 and 8) and return draws of ``target`` resampled by importance weights
        (Prop. 3.1); ``trace.extended`` keeps the particles, weights and the weights'
        effective sample size.
    extended_options : dict, optional
        Options of :func:`gradmc.extended.pseudo_extended` (``beta_bounds``, ``fixed_beta``,
        ``proposal``).

    Returns
    -------
    Trace
        Draws shaped ``(chain, draw, *event)``, statistics, adapted parameters and timings;
        ``trace.posterior()`` and ``trace.to_arviz()`` name the model's variables.
    """
    seed = _check_seed(seed)
    _use_compilation_cache()
    target, init = resolve_target(target, init=init, space=space)
    if extended is not None:  # the pseudo-extended run calls this function on its own target
        return sample_extended(
            sample,
            target,
            sampler,
            extended,
            extended_options,
            seed=seed,
            num_chains=num_chains,
            num_warmup=num_warmup,
            num_draws=num_draws,
            thinning=thinning,
            init=init,
            progress=progress,
            chunk_size=chunk_size,
            checkpoint=checkpoint,
            checkpoint_every=checkpoint_every,
            restart=restart,
            devices=devices,
        )
    num_chains, num_warmup, num_draws, thinning = _check_arguments(
        num_chains, num_warmup, num_draws, thinning, chunk_size, checkpoint_every
    )
    sampler = _as_sampler(sampler, target)
    _check_fits(sampler, target)
    preload_arviz()  # for the checks after the run, while it compiles
    bound: BoundSampler = sampler.bind(target, num_warmup)
    observe = _every_chain(_observer(bound, target, keep))
    placement = _Placement.create(num_chains, devices)
    keys = run_keys(seed, num_chains)
    chain_keys = placement.place(keys.chain)
    positions = placement.place(initial_positions(target, num_chains, keys.positions, init))
    warm_states = placement.reshard(
        jax.jit(lambda init_keys, starts: init_states(bound, init_keys, starts))(placement.place(keys.init), positions)
    )
    size = _chunk_size_fn(chunk_size, progress, checkpoint)
    draw_bytes = _bytes_per_iteration(keep, target, num_chains)
    plan = _chunk_plan(bound, size, num_warmup, num_draws, thinning, draw_bytes)
    store = None
    if checkpoint is not None or _CHECKPOINT_ROOT.get() is not None:
        fingerprint = run_fingerprint(
            target,
            sampler,
            positions,
            num_chains=num_chains,
            num_warmup=num_warmup,
            num_draws=num_draws,
            seed=seed,
            thinning=thinning,
            keep=keep,
            chunk_sizes=(plan.warmup, plan.draws),
        )
        store = open_store(checkpoint, _CHECKPOINT_ROOT.get(), fingerprint, restart=restart)
    index_space = _index_space(target, keep)
    decode = None if index_space is None else index_space.decode
    runner = _PhaseRunner(chain_keys, store, plan, checkpoint_every, keep_draws, decode)
    states, params = runner.run(
        bound,
        placement,
        warm_states,
        observe,
        num_warmup,
        num_draws,
        thinning,
        (f"{sampler.name} on {target.name}", progress),
    )
    trace = _trace(
        target,
        sampler,
        runner,
        states,
        params,
        seed=seed,
        thinning=thinning,
        indices=_index_space(target, keep) is not None,
        first_chain=placement.chains.start,
        named=keep is None,
    )
    return emit_warnings(trace, _entry(sampler))
