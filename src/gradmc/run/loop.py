"""The pure chain loop every driver in gradmc is built on: keys, chunks, shared parameters.

* Keys: a run's root key ``key(seed)`` gives the chain keys (``fold_in(root, 0)``), the
  keys of the starting positions (``fold_in(root, 1)``) and of the samplers' ``init``
  (``fold_in(root, 2)``); the key of chain ``c`` at global step ``t`` is
  ``fold_in(chain_key[c], t)`` (:func:`step_keys`). The same seed therefore gives
  bit-identical draws whatever the chunk size, the device count, or a resume (a model pooled
  over chains in warm-up agrees across device counts to rounding error: sums over sharded
  chains are taken in an order that depends on the number of devices).
* Chains are ``vmap``ped with the axis name ``"chain"`` (:func:`init_states`,
  :func:`warmup_step_fn`, :func:`finalize_fn`, :func:`draw_step_fn`), so a warm-up may pool
  statistics with ``lax.pmean``; parts of a state wrapped in :class:`~gradmc.base.Shared`
  are held once for all chains (:func:`chain_axes`).
* :func:`chunk_function` runs ``length`` recorded iterations as one ``lax.scan``.
* :func:`shared_axes` passes parameters equal in every chain once, not per chain;
  :func:`per_chain_view` shows shared parameters per chain again, without copies.
* :func:`run_chains` is a whole run (warm-up, then kept steps) as one jittable function.

Nothing here touches the host (no timing, no progress, no files: see :mod:`gradmc.run.sampling`)
except :func:`check_num_warmup`, the warm-up length check every driver shares, and
:func:`per_chain_view`, which reads finished parameters back.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from gradmc.base import BoundSampler, Shared, StepStats

__all__ = [
    "check_num_warmup",
    "RunKeys",
    "run_keys",
    "step_keys",
    "chain_axes",
    "init_states",
    "warmup_step_fn",
    "finalize_fn",
    "freeze_fn",
    "draw_step_fn",
    "chunk_function",
    "chunk_lengths",
    "shared_axes",
    "per_chain_view",
    "run_chains",
]


def check_num_warmup(num_warmup) -> int:
    """``num_warmup`` as an int, after checking it is a non-negative integer.

    Parameters
    ----------
    num_warmup : int
        Warm-up steps per chain (0 is allowed).
    """
    if int(num_warmup) < 0 or float(num_warmup) != int(num_warmup):
        raise ValueError(f"num_warmup must be a non-negative integer, got {num_warmup!r}")
    return int(num_warmup)


class RunKeys(NamedTuple):
    """The keys of one run: per-chain step keys, the starting-position key, per-chain init keys.

    Parameters
    ----------
    chain : jax.Array
        ``(num_chains,)`` keys; chain ``c``'s step ``t`` uses ``fold_in(chain[c], t)``.
    positions : jax.Array
        The key of the starting positions.
    init : jax.Array
        ``(num_chains,)`` keys of the samplers' ``init``.
    """

    chain: jax.Array
    positions: jax.Array
    init: jax.Array


def run_keys(seed: int, num_chains: int) -> RunKeys:
    """The keys :func:`gradmc.sample` derives from ``seed`` for ``num_chains`` chains.

    Parameters
    ----------
    seed : int
        The run's seed.
    num_chains : int
        The number of chains.
    """
    root = jax.random.key(seed)
    return RunKeys(
        chain=jax.random.split(jax.random.fold_in(root, 0), num_chains),
        positions=jax.random.fold_in(root, 1),
        init=jax.random.split(jax.random.fold_in(root, 2), num_chains),
    )


def step_keys(chain_keys: jax.Array, t) -> jax.Array:
    """The keys of every chain at global step ``t``: ``fold_in(chain_key[c], t)``.

    Parameters
    ----------
    chain_keys : jax.Array
        ``(num_chains,)`` chain keys.
    t : int or jax.Array
        The global step (warm-up steps count).
    """
    return jax.vmap(jax.random.fold_in, (0, None))(chain_keys, t)


def _is_shared(node) -> bool:
    return isinstance(node, Shared)


def chain_axes(tree):
    """The ``vmap`` axes of a pytree of chain states or parameters: 0 (a leading chain axis)
    for every leaf, none for the parts wrapped in :class:`~gradmc.base.Shared`.

    Parameters
    ----------
    tree : pytree
        States or parameters of all chains (or of one chain).
    """
    return jax.tree.map(lambda node: Shared(None) if _is_shared(node) else 0, tree, is_leaf=_is_shared)


def _one_chain(tree):
    """Shapes of one chain's part of ``tree``: the chain axis dropped, shared parts as they are."""

    def shape(node):
        if _is_shared(node):
            return jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype), node)
        return jax.ShapeDtypeStruct(node.shape[1:], node.dtype)

    return jax.tree.map(shape, tree, is_leaf=_is_shared)


def init_states(bound: BoundSampler, init_keys, positions):
    """The warm-up states of all chains, ``bound.init`` ``vmap``ped (shared parts made once).

    Parameters
    ----------
    bound : BoundSampler
        The sampler bound to its target.
    init_keys : jax.Array
        ``(num_chains,)`` keys of ``bound.init``.
    positions : jax.Array
        ``(num_chains, *event_shape)`` starts.
    """
    single = jax.eval_shape(bound.init, init_keys[0], positions[0])
    return jax.vmap(bound.init, out_axes=chain_axes(single))(init_keys, positions)


def warmup_step_fn(bound: BoundSampler) -> Callable:
    """``step(keys, states, t, params) -> (states, stats)``: one warm-up step of every chain
    (``params`` is unused: warm-up states carry what they adapt; their shared parts are
    passed once).

    Parameters
    ----------
    bound : BoundSampler
        The sampler bound to its target.
    """

    def step(keys, states, t, params):
        del params
        axes = chain_axes(states)
        return jax.vmap(bound.warmup_step, in_axes=(0, axes, None), out_axes=(axes, 0), axis_name="chain")(
            keys, states, t
        )

    return step


def finalize_fn(bound: BoundSampler) -> Callable:
    """``finalize(states) -> (kernel states, params)``: ``bound.finalize`` of every chain, with
    the shared parts of the warm-up states and of the parameters held once.

    Parameters
    ----------
    bound : BoundSampler
        The sampler bound to its target.
    """

    def finalize(states):
        out_axes = chain_axes(jax.eval_shape(bound.finalize, _one_chain(states)))
        return jax.vmap(bound.finalize, in_axes=(chain_axes(states),), out_axes=out_axes, axis_name="chain")(states)

    return finalize


def freeze_fn(bound: BoundSampler) -> Callable:
    """``freeze(states) -> states``: ``bound.freeze`` of every chain (the warm-up is over;
    further warm-up steps are the kept kernel's, with the kept parameters).

    Parameters
    ----------
    bound : BoundSampler
        The sampler bound to its target (with a ``freeze``).
    """
    if bound.freeze is None:
        raise ValueError(f"sampler {bound.name!r} cannot freeze its warm-up in place")
    one_chain = bound.freeze

    def freeze(states):
        axes = chain_axes(states)
        return jax.vmap(one_chain, in_axes=(axes,), out_axes=axes, axis_name="chain")(states)

    return freeze


def draw_step_fn(bound: BoundSampler, axes) -> Callable:
    """``step(keys, states, t, params) -> (states, stats)``: one fixed-kernel step of every
    chain; ``axes`` (from :func:`shared_axes`) says which parameters are per chain.

    Parameters
    ----------
    bound : BoundSampler
        The sampler bound to its target.
    axes : pytree or int
        ``vmap`` axes of the parameters (``None`` for shared ones).
    """

    def step(keys, states, t, params):
        del t
        return jax.vmap(bound.step, in_axes=(0, 0, axes), axis_name="chain")(keys, states, params)

    return step


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


def chunk_function(chain_step: Callable, observe: Callable | None, thinning: int, length: int) -> Callable:
    """``chunk(chain_keys, states, params, first_step) -> (states, outputs)``.

    Runs ``length`` recorded iterations of ``thinning`` steps of ``chain_step(keys, states,
    t, params)`` each; an iteration records its (merged) statistics, preceded by
    ``observe(states)`` when ``observe`` is given. Outputs are stacked iteration-first.

    Parameters
    ----------
    chain_step : callable
        ``chain_step(keys, states, t, params) -> (states, stats)`` (:func:`warmup_step_fn`,
        :func:`draw_step_fn`).
    observe : callable or None
        ``observe(states)``: what to record besides the statistics.
    thinning : int
        Steps per recorded iteration.
    length : int
        Recorded iterations per chunk.
    """

    def chunk(chain_keys, states, params, first_step):
        def one_iteration(carry, i):
            def one_step(carry, j):
                t = first_step + i * thinning + j
                return chain_step(step_keys(chain_keys, t), carry, t, params)

            carry, stats = jax.lax.scan(one_step, carry, jnp.arange(thinning))
            stats = _merge_thinned(stats) if thinning > 1 else jax.tree.map(lambda x: x[0], stats)
            return carry, (stats if observe is None else (observe(carry), stats))

        return jax.lax.scan(one_iteration, states, jnp.arange(length))

    return chunk


def chunk_lengths(total: int, size: int) -> list[int]:
    """``total`` iterations cut into chunks of ``size`` (the last one shorter).

    Parameters
    ----------
    total : int
        Iterations of the phase.
    size : int
        Iterations per chunk.
    """
    return [size] * (total // size) + ([total % size] if total % size else [])


def shared_axes(params):
    """``(axes, params)`` with parameters equal in every chain (a shared step size) taken once
    (axis ``None``) instead of per chain (0), so the kernel uses one value for all chains
    instead of a batch of copies; parts wrapped in :class:`~gradmc.base.Shared` are already
    held once.

    Parameters
    ----------
    params : pytree
        Adapted parameters with a leading chain axis (shared parts without).
    """

    def axis(node):
        if _is_shared(node):
            return Shared(None)
        return None if node.ndim and np.all(np.asarray(node) == np.asarray(node)[:1]) else 0

    axes = jax.tree.map(axis, params, is_leaf=_is_shared)
    return axes, jax.tree.map(lambda x, a: x[0] if a is None else x, params, axes, is_leaf=_is_shared)


def per_chain_view(params, num_chains: int):
    """``params`` on the host with every :class:`~gradmc.base.Shared` part shown per chain:
    each of its arrays broadcast to a leading chain axis without copying (a read-only view).

    Parameters
    ----------
    params : pytree
        Adapted parameters, shared parts wrapped in :class:`~gradmc.base.Shared`.
    num_chains : int
        The length of the chain axis to show.
    """

    def view(node):
        if not _is_shared(node):
            return node
        return jax.tree.map(lambda x: np.broadcast_to(np.asarray(x), (num_chains, *np.shape(x))), node.value)

    return jax.tree.map(view, jax.device_get(params), is_leaf=_is_shared)


def run_chains(
    bound: BoundSampler, chain_keys, init_keys, positions, num_warmup: int, num_steps: int, observe: Callable
):
    """Warm-up then ``num_steps`` kept steps of ``bound`` on vmapped chains, as one pure,
    jittable function with the runner's keys (``fold_in(chain_key, t)``).

    For callers that batch whole runs, e.g. the step-size search over a grid of values.
    ``observe(states, stats)`` is recorded at each kept step. Returns
    ``(final states, params, observations)``; observations are stacked step-first.

    Parameters
    ----------
    bound : BoundSampler
        The sampler bound to its target.
    chain_keys, init_keys : jax.Array
        ``(num_chains,)`` keys of the steps and of ``bound.init``.
    positions : jax.Array
        ``(num_chains, *event_shape)`` starts.
    num_warmup, num_steps : int
        Warm-up and kept steps.
    observe : callable
        ``observe(states, stats)``, recorded at each kept step.
    """
    states = init_states(bound, init_keys, positions)
    warm = warmup_step_fn(bound)

    def warm_one(states, t):
        return warm(step_keys(chain_keys, t), states, t, None)[0], None

    states, _ = jax.lax.scan(warm_one, states, jnp.arange(num_warmup))
    states, params = finalize_fn(bound)(states)
    draw = draw_step_fn(bound, chain_axes(params))

    def draw_one(states, t):
        states, stats = draw(step_keys(chain_keys, num_warmup + t), states, t, params)
        return states, observe(states, stats)

    states, observations = jax.lax.scan(draw_one, states, jnp.arange(num_steps))
    return states, params, observations
