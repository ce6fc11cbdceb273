"""A gradient-free fallback for discrete gradient samplers whose proposal freezes.

A gradient proposal (NCG, AVG, PAVG, GWG, the HAMS family) trusts the first-order
expansion f(s') ≈ f(s) + ∇f(s)ᵀ(s' − s). On a steep posterior that trust fails: in a
spike-and-slab regression with the coefficients integrated out and a small noise scale,
∇f is of order 10⁶ where the log-density differences of single flips are of order 10², so
the proposal puts all its mass on moves whose reverse is impossible, the Metropolis test
rejects them all, and the step size shrinks until nothing is proposed. The chains then sit
at their start for the whole run.

:func:`with_fallback` watches for that. Over warm-up steps W/4 .. W/2 − 1 it counts the
chain-steps whose position changed, pooled over chains; if fewer than
:data:`FROZEN_RATE` moved, every later step (the rest of the warm-up and the kept draws)
adds one single-site Metropolis move after the sampler's own: a uniformly chosen
coordinate proposes a uniformly chosen other value, accepted with min(1, π(s')/π(s)) (the
proposal is symmetric). Each of the two moves leaves π invariant, so their composition does;
the extra move costs two log-density evaluations (the proposal, and the sampler's state
refreshed at an accepted position), counted in ``num_grad_evals``. The decision is one flag
for all chains, held once (:class:`~gradmc.base.Shared`), so a sampler that moves pays
nothing: the move sits behind a ``lax.cond`` that the chains do not batch. The run's
``params[FALLBACK]`` says whether it was switched on, and the run's health check says so.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from gradmc.base import FALLBACK, BoundSampler, Shared, Target
from gradmc.chains import pool_chains
from gradmc.discrete.proposals import check_space, l1_jump

__all__ = [
    "FROZEN_RATE",
    "FallbackState",
    "not_judged",
    "judge_frozen",
    "single_site_proposal",
    "shifted_site",
    "single_site_move",
    "with_fallback",
]

#: The stream of the fallback move's key, folded into the step's key: the sampler's own
#: move gets the step's key unchanged, so a run without the fallback draws what it drew before.
FALLBACK_STREAM = 0x0FA11BAC

#: Below this share of moving chain-steps in the judged part of the warm-up the fallback
#: moves are switched on. A sampler that mixes at all moves in far more steps than 1 %.
FROZEN_RATE = 0.01


class FallbackState(NamedTuple):
    """A chain's warm-up state under :func:`with_fallback`.

    Parameters
    ----------
    inner : Any
        The sampler's own warm-up state.
    judged : Shared
        ``(moved, on)``: the share of chain-steps that moved, summed over the judged warm-up
        steps, and whether the fallback is on; the same for every chain.
    """

    inner: Any
    judged: Shared


def single_site_proposal(key_site, key_value, position, space):
    """``position`` with one uniformly chosen coordinate (``key_site``) set to a uniformly
    chosen other value (``key_value``): a symmetric proposal.

    Parameters
    ----------
    key_site, key_value : jax.Array
        Keys of the coordinate and of its new value.
    position : jax.Array
        The current position.
    space : gradmc.spaces.DiscreteSpace
        The space of the position.
    """
    num_sites = space.to_index(position).size
    site = jax.random.randint(key_site, (), 0, num_sites)
    shift = 1 + jax.random.randint(key_value, (), 0, space.num_values - 1)
    return shifted_site(position, site, shift, space)


def shifted_site(position, site, shift, space):
    """``position`` with coordinate ``site`` (of its value indices, flattened) moved ``shift``
    values on, cyclically: another value for ``shift`` in 1 .. K − 1.

    Parameters
    ----------
    position : jax.Array
        The current position.
    site, shift : jax.Array
        Integer scalars.
    space : gradmc.spaces.DiscreteSpace
        The space of the position.
    """
    index = space.to_index(position)
    flat = index.reshape(-1)
    flat = flat.at[site].set((flat[site] + shift) % space.num_values)
    return space.from_index(flat.reshape(index.shape)).astype(position.dtype)


def single_site_move(key, position, logdensity, logdensity_fn, space):
    """One Metropolis move of a uniformly chosen coordinate to a uniformly chosen other value.

    Returns ``(position, logdensity, accepted)`` after the move; the proposal is symmetric, so the test is
    min(1, exp(f(s') − f(s))), and a non-finite f(s') is a rejection.

    Parameters
    ----------
    key : jax.Array
        Key of the move.
    position : jax.Array
        The current position.
    logdensity : jax.Array
        f at ``position``.
    logdensity_fn : callable
        The log density f.
    space : gradmc.spaces.DiscreteSpace
        The space of the position.
    """
    key_site, key_value, key_test = jax.random.split(key, 3)
    proposed = single_site_proposal(key_site, key_value, position, space)
    proposed_logdensity = logdensity_fn(proposed)
    log_ratio = proposed_logdensity - logdensity
    accepted = jnp.log(jax.random.uniform(key_test)) < jnp.where(jnp.isfinite(log_ratio), log_ratio, -jnp.inf)
    return (
        jnp.where(accepted, proposed, position),
        jnp.where(accepted, proposed_logdensity, logdensity),
        accepted,
    )


def not_judged() -> Shared:
    """The start of :func:`judge_frozen`'s record: nothing counted, the move off."""
    return Shared((jnp.float32(0.0), jnp.bool_(False)))


def judge_frozen(judged: Shared, changed, t, judge_from: int, judge_to: int) -> Shared:
    """``judged`` = ``(moved, on)`` after warm-up step ``t``: over steps ``judge_from`` ..
    ``judge_to`` − 1, ``moved`` sums the share of chains for which ``changed``; at the last of
    them, ``on`` is set if that share stayed under :data:`FROZEN_RATE` of the steps judged.

    Parameters
    ----------
    judged : Shared
        ``(moved, on)`` before the step (:func:`not_judged` at the start).
    changed : jax.Array
        Whether this chain's watched entries changed in the step.
    t : jax.Array
        The warm-up step.
    judge_from, judge_to : int
        The steps judged (none when they are equal).
    """
    moved, on = judged.value
    in_window = (t >= judge_from) & (t < judge_to)
    moved = moved + jnp.where(in_window, pool_chains(changed.astype(jnp.float32)), 0.0)
    on = on | ((t == judge_to - 1) & (moved < FROZEN_RATE * (judge_to - judge_from)))
    return Shared((moved, on))


def _with_flag(params, on):
    if isinstance(params, Shared):
        return Shared({**params.value, FALLBACK: on})
    return {**params, FALLBACK: Shared(on)}


def _split_flag(params):
    if isinstance(params, Shared):
        value = dict(params.value)
        return Shared(value), value.pop(FALLBACK)
    params = dict(params)
    return params, params.pop(FALLBACK).value


def with_fallback(sampler: BoundSampler, target: Target, num_warmup: int) -> BoundSampler:
    """``sampler`` with the fallback move of the module doc, judged in its warm-up.

    Parameters
    ----------
    sampler : BoundSampler
        A discrete sampler; one that cannot be moved from outside (``refresh`` None) is
        returned as it is.
    target : Target
        Its target (the log density and the space of the fallback move).
    num_warmup : int
        Warm-up steps W; the judged steps are W/4 .. W/2 − 1 (none for W < 4: no fallback).
    """
    if sampler.refresh is None:
        return sampler
    space = check_space(target, sampler.name)
    logdensity_fn = target.logdensity_fn

    def add_move(key, state, stats, on):
        def move(state):
            old = sampler.position(state)
            position, logdensity, accepted = single_site_move(key, old, stats.logdensity, logdensity_fn, space)
            moved = sampler.refresh(jax.random.fold_in(key, 1), state, position)
            # the parts held once for all chains are not the chain's to change
            state = jax.tree.map(
                lambda m, s: s if isinstance(s, Shared) else jnp.where(accepted, m, s),
                moved,
                state,
                is_leaf=lambda node: isinstance(node, Shared),
            )
            return state, logdensity, jnp.where(accepted, l1_jump(position, old), 0.0).astype(jnp.float32)

        def stay(state):
            return state, jnp.asarray(stats.logdensity), jnp.float32(0.0)

        state, logdensity, jump = jax.lax.cond(on, move, stay, state)
        extra = dict(stats.extra)
        if "jump" in extra:  # the step's jump includes the fallback's
            extra["jump"] = extra["jump"] + jump
        return state, stats._replace(
            logdensity=logdensity,
            num_grad_evals=stats.num_grad_evals + jnp.where(on, 2, 0),
            extra=extra,
        )

    def init(key, position):
        return FallbackState(sampler.init(key, position), not_judged())

    def warmup_step(key, ws, t):
        inner, stats = sampler.warmup_step(key, ws.inner, t)
        changed = jnp.any(sampler.position(inner) != sampler.position(ws.inner))
        judged = judge_frozen(ws.judged, changed, t, int(num_warmup) // 4, int(num_warmup) // 2)
        inner, stats = add_move(jax.random.fold_in(key, FALLBACK_STREAM), inner, stats, judged.value[1])
        return FallbackState(inner, judged), stats

    def finalize(ws):
        state, params = sampler.finalize(ws.inner)
        return state, _with_flag(params, ws.judged.value[1])

    def step(key, state, params):
        params, on = _split_flag(params)
        state, stats = sampler.step(key, state, params)
        return add_move(jax.random.fold_in(key, FALLBACK_STREAM), state, stats, on)

    def refresh(key, state, position):
        if isinstance(state, FallbackState):
            return state._replace(inner=sampler.refresh(key, state.inner, position))
        return sampler.refresh(key, state, position)

    return sampler._replace(
        init=init,
        warmup_step=warmup_step,
        finalize=finalize,
        step=step,
        position=lambda state: sampler.position(state.inner if isinstance(state, FallbackState) else state),
        refresh=refresh,
        # after W/2 the judged flag stays as it is: frozen steps are the kept steps
        freeze=None if sampler.freeze is None else lambda ws: ws._replace(inner=sampler.freeze(ws.inner)),
    )
