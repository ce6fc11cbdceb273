"""Jittered HMC: HMC whose number of leapfrog steps is drawn afresh each step, its longest
trajectory learned from NUTS in warm-up.

The first half of the warm-up runs NUTS (:mod:`gradmc.continuous.hmc`), and the length in
time (leapfrog steps × step size) of its trajectories from a quarter of the warm-up on is
averaged over every chain. From then on the steps are HMC (Neal 2011, eq. 2.28-2.30 and a
Metropolis test) with that time length's number of steps ``L`` at the current step size as
the longest: step ``k`` takes ``1 + floor(h_k L)`` leapfrog steps, ``h_k`` the ``k``-th point
of the base-2 Halton sequence (BlackJAX's dynamic HMC draws its steps so). Stan's window
adaptation of the step size and mass matrix runs through the whole warm-up; the kept draws
use its final step size and mass matrix and the ``L`` of that step size. This is the idea of
Wu, Stoehr & Robert (2018, eHMC), who draw HMC's number of steps from the No-U-Turn lengths
seen in warm-up: trajectories up to NUTS's mean length (half of it on average), without NUTS's
tree. The number of steps depends on the step counter alone, not on the state, so each step
is an HMC transition that leaves the target invariant; it is the same for every chain, so
chains run in lock step under ``vmap``.

Where this pays: as one block of a Gibbs composition (:mod:`gradmc.composed`), whose other
blocks change the block's conditional every sweep, so a U-turn found on one conditional is
not worth NUTS's cost of finding it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from blackjax.mcmc.dynamic_hmc import halton_sequence

from gradmc.adapt.warmup import window_rule
from gradmc.base import BoundSampler, Shared, StepStats, reject_nonfinite
from gradmc.continuous import hmc

__all__ = ["JitteredState", "num_steps", "jittered_hmc"]

#: the warm-up runs NUTS until this fraction of it, jittered HMC after (still adapting)
SWITCH_AT = 0.5
#: the longest trajectory where the warm-up is too short to measure NUTS's (HMC's default length)
UNMEASURED_STEPS = 10
#: NUTS's trajectories are averaged from this fraction of the warm-up until :data:`SWITCH_AT`
AVERAGED_FROM = 0.25


class JitteredState(NamedTuple):
    """A chain's state: BlackJAX's HMC state and the step counter (the same in every chain)."""

    hmc: hmc.HMCState
    count: jax.Array


class _Pooled(NamedTuple):
    """What the warm-up pools over chains: the sum of NUTS's trajectory time lengths, their
    number, and the chains' mean of the step size warm-up would keep if it ended now.
    """

    total: jax.Array
    count: jax.Array
    step_size: jax.Array


class _Warmup(NamedTuple):
    """A chain's warm-up state: the kernel's, the window rule's, what is pooled over chains
    (shared), the kept parameters, and whether the warm-up is over (shared).
    """

    kernel: JitteredState
    rule: Any
    pooled: Shared
    kept: dict
    frozen: Shared


def num_steps(count: jax.Array, max_steps: jax.Array) -> jax.Array:
    """The leapfrog steps of step ``count``: ``1 + floor(h L)``, ``h`` the Halton point of ``count``, in 1..L."""
    fraction = halton_sequence(jnp.asarray(count, jnp.int32), max_bits=20)
    return jnp.clip(1 + jnp.floor(fraction * max_steps).astype(jnp.int32), 1, max_steps)


def _stats(state: hmc.HMCState, info, step_size, num_integration_steps) -> StepStats:
    """:func:`gradmc.continuous.hmc.stats` with the same extras for NUTS's and HMC's steps."""
    stats = hmc.stats(state, info, step_size)
    extra = {"energy": stats.extra["energy"], "num_integration_steps": jnp.asarray(num_integration_steps, jnp.int32)}
    return stats._replace(extra=extra)


def jittered_hmc(
    logdensity_fn: Callable,
    num_warmup: int,
    *,
    dense_mass: bool = False,
    target_accept: float = 0.8,
    initial_step_size: float = 1.0,
    max_num_doublings: int = 10,
    num_integration_steps: int | None = None,
) -> BoundSampler:
    """The :class:`~gradmc.base.BoundSampler` of jittered HMC on ``logdensity_fn`` (module doc).

    Parameters
    ----------
    logdensity_fn : callable
        The unnormalised log density (differentiable); non-finite values are rejected.
    num_warmup : int
        Warm-up steps (the window adaptation's schedule).
    dense_mass, target_accept, initial_step_size, max_num_doublings
        The warm-up NUTS's (:func:`gradmc.continuous.samplers.build_nuts`).
    num_integration_steps : int, optional
        The longest trajectory, in leapfrog steps; None (default): learned in warm-up.
    """
    logdensity = reject_nonfinite(logdensity_fn)
    rule = window_rule(num_warmup, dense_mass, target_accept, initial_step_size)
    nuts_kernel, hmc_kernel = hmc.build_kernel("nuts"), hmc.build_kernel("hmc")
    most = 2**max_num_doublings
    # NUTS runs until switch_at, its trajectories averaged from averaged_from; jittered HMC after
    switch_at = 0 if num_integration_steps is not None else int(SWITCH_AT * num_warmup)
    averaged_from = int(AVERAGED_FROM * num_warmup)

    def refresh(key, state, position):
        if isinstance(state, _Warmup):
            return state._replace(kernel=refresh(key, state.kernel, position))
        return state._replace(hmc=hmc.init(position, logdensity))

    def hmc_step(key, state: JitteredState, step_size, inverse_mass_matrix, max_steps):
        steps = num_steps(state.count, max_steps)
        new, info = hmc_kernel(key, state.hmc, logdensity, step_size, inverse_mass_matrix, steps)
        return JitteredState(new, state.count + 1), _stats(new, info, step_size, steps)

    def nuts_step(key, state: JitteredState, step_size, inverse_mass_matrix):
        new, info = nuts_kernel(key, state.hmc, logdensity, step_size, inverse_mass_matrix, max_num_doublings)
        stats = _stats(new, info, step_size, info.num_integration_steps)
        return JitteredState(new, state.count + 1), stats, info.num_integration_steps

    def max_steps(pooled: _Pooled, step_size) -> jax.Array:
        """The longest trajectory: NUTS's mean time length at ``step_size`` (the chains' mean), in
        leapfrog steps (one for every chain, which then run in lock step).
        """
        if num_integration_steps is not None:
            return jnp.int32(num_integration_steps)
        measured = pooled.count > 0
        mean = jnp.where(measured, pooled.total / jnp.maximum(pooled.count, 1.0), UNMEASURED_STEPS * step_size)
        return jnp.clip(jnp.round(mean / step_size), 1, most).astype(jnp.int32)

    def kept(rule_state, most_steps) -> dict:
        final, current = rule.final(rule_state), rule.current(rule_state)
        values = {key: jnp.asarray(final[key], jnp.result_type(now)) for key, now in current.items()}
        return {**values, "max_steps": most_steps}

    def init(key, start):
        state = JitteredState(hmc.init(start, logdensity), jnp.int32(0))
        rule_state = rule.init(state.hmc)
        pooled = Shared(_Pooled(jnp.float32(0), jnp.float32(0), jnp.float32(initial_step_size)))
        unmeasured = kept(rule_state, jnp.int32(num_integration_steps or UNMEASURED_STEPS))
        return _Warmup(state, rule_state, pooled, unmeasured, Shared(jnp.asarray(False)))

    def warmup_step(key, ws: _Warmup, t):
        frozen = ws.frozen.value
        params = jax.lax.cond(frozen, lambda: ws.kept, lambda: {**rule.current(ws.rule), "max_steps": jnp.int32(0)})
        step_size, inverse_mass_matrix = params["step_size"], params["inverse_mass_matrix"]

        def jittered():
            learned = max_steps(ws.pooled.value, jax.lax.pmean(step_size, "chain"))
            steps = jnp.where(frozen, params["max_steps"], learned)
            state, stats = hmc_step(key, ws.kernel, step_size, inverse_mass_matrix, steps)
            return state, stats, jnp.int32(0)

        def nuts():
            return nuts_step(key, ws.kernel, step_size, inverse_mass_matrix)

        state, stats, steps = jax.lax.cond(frozen | (t >= switch_at), jittered, nuts)
        rule_state = jax.lax.cond(
            frozen, lambda: ws.rule, lambda: rule.update(ws.rule, state.hmc, _Accepted(stats.acceptance_rate), t)
        )
        time_length = jax.lax.pmean(steps * step_size, "chain")
        averaged = (t >= averaged_from) & (t < switch_at)
        pooled = ws.pooled.value
        pooled = _Pooled(
            pooled.total + jnp.where(averaged, time_length, 0.0),
            pooled.count + jnp.where(averaged, 1.0, 0.0),
            jnp.where(frozen, pooled.step_size, jax.lax.pmean(rule.final(rule_state)["step_size"], "chain")),
        )
        return ws._replace(kernel=state, rule=rule_state, pooled=Shared(pooled)), stats

    def final(ws: _Warmup) -> dict:
        pooled = ws.pooled.value
        return kept(ws.rule, max_steps(pooled, pooled.step_size))

    def finalize(ws: _Warmup):
        return ws.kernel, final(ws)

    def step(key, state, params):
        return hmc_step(key, state, params["step_size"], params["inverse_mass_matrix"], params["max_steps"])

    def freeze(ws: _Warmup):
        return ws._replace(kept=final(ws), frozen=Shared(jnp.asarray(True)))

    return BoundSampler(
        "jittered-hmc",
        init=init,
        warmup_step=warmup_step,
        finalize=finalize,
        step=step,
        position=lambda state: (state.kernel if isinstance(state, _Warmup) else state).hmc.position,
        adapts_in_warmup=True,
        refresh=refresh,
        freeze=freeze,
    )


class _Accepted(NamedTuple):
    """What the window rule reads of a step's info."""

    acceptance_rate: jax.Array
