"""One way to bind a kernel to its warm-up: :func:`bind` and the rules it takes.

A kernel is ``kernel(key, state, **params) -> (state, info)``; a :class:`Rule` adapts some of
its ``params`` during warm-up, in the shape of an Optax transformation:

* ``init(kernel_state) -> rule_state`` at the chain's start;
* ``update(rule_state, kernel_state, info, t) -> rule_state`` after warm-up step ``t``
  (a rule that pools over chains uses ``jax.lax.pmean(x, "chain")`` here);
* ``current(rule_state) -> params`` the next warm-up step uses (they override the fixed
  ``params`` of the same names);
* ``final(rule_state) -> params`` kept after warm-up.

:func:`step_rule` makes a rule of one scalar from a :class:`~gradmc.adapt.step_size.StepSizeRule`
(a step size, GWG's number of flips, HAMS's δ), :func:`window_rule` Stan's windowed adaptation of
HMC's step size and inverse mass matrix. :func:`bind` turns a kernel, its fixed parameters and
its rule into the :class:`~gradmc.base.BoundSampler` the runner drives; without a rule the
warm-up steps are ordinary kernel steps. A warm-up that runs a kernel of its own (gad's
adaptive kernel, PAVG learning its M, PDHAMS exploring before it fits W) is a
:class:`WarmupKernel`, which :func:`bind_two_phase` joins to the kept kernel.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from blackjax.adaptation.mass_matrix import mass_matrix_adaptation
from blackjax.adaptation.step_size import dual_averaging_adaptation
from blackjax.adaptation.window_adaptation import build_schedule

from gradmc.adapt.step_size import StepSizeRule, dual_averaging_final, fixed_rule
from gradmc.base import BoundSampler, Shared
from gradmc.checks import check_positive, check_probability, is_concrete

__all__ = [
    "Rule",
    "WarmupState",
    "WarmupKernel",
    "step_rule",
    "window_rule",
    "bind",
    "bind_two_phase",
    "step_size_sampler",
]


class Rule(NamedTuple):
    """What a warm-up adapts, as four functions of its state (see the module doc).

    Parameters
    ----------
    init : callable
        ``init(kernel_state) -> rule_state`` at the chain's start.
    update : callable
        ``update(rule_state, kernel_state, info, t) -> rule_state``.
    current : callable
        ``current(rule_state) -> dict`` of the parameters of the next warm-up step.
    final : callable
        ``final(rule_state) -> dict`` of the parameters kept after warm-up.
    """

    init: Callable
    update: Callable
    current: Callable
    final: Callable


class WarmupState(NamedTuple):
    """A chain's warm-up state under :func:`bind`: the kernel's state, the rule's, the
    parameters kept after warm-up and whether the warm-up is over (a
    :class:`~gradmc.base.Shared` flag, the same for every chain).
    """

    kernel: Any
    rule: Any
    kept: dict
    frozen: Shared


class WarmupKernel(NamedTuple):
    """A warm-up that runs a kernel of its own, with a state of its own (see :func:`bind_two_phase`).

    Parameters
    ----------
    init : callable
        ``init(key, position) -> warmup_state``.
    step : callable
        ``step(key, warmup_state, t) -> (warmup_state, StepStats)`` for t = 0..W-1.
    position : callable
        ``position(warmup_state)``.
    refresh : callable or None
        ``refresh(key, warmup_state, position) -> warmup_state`` moved to ``position``, with
        the cached log density and gradient computed again (None: the warm-up cannot be
        moved from outside, e.g. as one block of a composed sampler).
    """

    init: Callable
    step: Callable
    position: Callable
    refresh: Callable | None


class _WarmingUp(NamedTuple):
    """A chain's state during a :class:`WarmupKernel`'s warm-up."""

    state: Any


def step_rule(parameter: str, rule: StepSizeRule, initial, kept_value: Callable | None = None) -> Rule:
    """The :class:`Rule` adapting the one scalar ``parameter`` by ``rule`` on each step's
    acceptance probability, from ``initial``; ``kept_value`` maps the rule's final value to
    the kept one (e.g. rounding to an integer).

    Parameters
    ----------
    parameter : str
        The kernel's keyword (and the key in the run's ``params``).
    rule : StepSizeRule
        The scalar rule (dual averaging, Robbins–Monro, or the fixed rule).
    initial : float
        The first value.
    kept_value : callable, optional
        ``kept_value(final) -> value`` after warm-up (default: as is).
    """
    kept_value = kept_value or (lambda value: value)
    return Rule(
        init=lambda kernel_state: rule.init(initial),
        update=lambda state, kernel_state, info, t: rule.update(state, info.acceptance_rate),
        current=lambda state: {parameter: rule.current(state)},
        final=lambda state: {parameter: kept_value(jnp.asarray(rule.final(state), jnp.float32))},
    )


class _WindowRuleState(NamedTuple):
    step_size_state: NamedTuple
    mass_state: NamedTuple
    step_size: jax.Array
    inverse_mass_matrix: jax.Array


def window_rule(num_warmup: int, dense_mass: bool, target_accept: float, initial_step_size) -> Rule:
    """Stan's window adaptation (Stan reference manual, "HMC algorithm parameters") of
    ``step_size`` and ``inverse_mass_matrix``, one step at a time: BlackJAX's schedule of
    fast and slow windows, dual averaging and mass-matrix estimation; after warm-up the
    dual-averaging average and the last window's matrix are kept.

    Parameters
    ----------
    num_warmup : int
        The number of warm-up steps (the windows' schedule).
    dense_mass : bool
        Adapt a dense inverse mass matrix (else a diagonal one).
    target_accept : float
        The acceptance probability dual averaging aims at, in (0, 1).
    initial_step_size : float
        The first step size.
    """
    check_positive("step_size", initial_step_size)
    check_probability("target_accept", target_accept)
    da_init, da_update, da_final = dual_averaging_adaptation(target_accept)
    mm_init, mm_update, mm_final = mass_matrix_adaptation(not dense_mass)
    schedule = build_schedule(num_warmup) if num_warmup > 0 else jnp.zeros((1, 2), jnp.int32)

    def init(kernel_state):
        mass = mm_init(sum(jnp.size(leaf) for leaf in jax.tree.leaves(kernel_state.position)))
        step_size = jnp.asarray(initial_step_size, jnp.float32)
        return _WindowRuleState(da_init(initial_step_size), mass, step_size, mass.inverse_mass_matrix)

    def update(rs: _WindowRuleState, kernel_state, info, t):
        slow, window_end = schedule[t, 0] == 1, schedule[t, 1] == 1
        ss = da_update(rs.step_size_state, jnp.nan_to_num(info.acceptance_rate))
        mass = jax.lax.cond(slow, lambda m: mm_update(m, kernel_state.position), lambda m: m, rs.mass_state)

        def end_window(ss, mass):
            return da_init(da_final(ss)), mm_final(mass)

        ss, mass = jax.lax.cond(window_end, end_window, lambda s, m: (s, m), ss, mass)
        return _WindowRuleState(ss, mass, jnp.exp(ss.log_step_size), mass.inverse_mass_matrix)

    return Rule(
        init=init,
        update=update,
        current=lambda rs: {"step_size": rs.step_size, "inverse_mass_matrix": rs.inverse_mass_matrix},
        final=lambda rs: {
            "step_size": dual_averaging_final(rs.step_size_state),
            "inverse_mass_matrix": rs.inverse_mass_matrix,
        },
    )


def _identity(state):
    """The ``freeze`` of a sampler whose warm-up steps are already its kept steps."""
    return state


def bind(
    name: str,
    kernel_init: Callable,
    kernel: Callable,
    params: dict,
    stats_fn: Callable,
    rule: Rule | None = None,
    *,
    adapts_in_warmup: bool | None = None,
    position: Callable | None = None,
    refresh: bool = True,
) -> BoundSampler:
    """The :class:`~gradmc.base.BoundSampler` of ``kernel`` with fixed ``params`` and a warm-up ``rule``.

    The warm-up state also holds the kept values of the parameters the rule sets (``rule.final``'s,
    in the shapes of ``rule.current``'s), so that the kept draws can run as frozen warm-up steps
    (:attr:`~gradmc.base.BoundSampler.freeze`): one compiled program for the whole run.

    Parameters
    ----------
    name : str
        The sampler's name.
    kernel_init : callable
        ``kernel_init(key, position) -> kernel_state`` (the key draws, e.g., HAMS's momentum).
    kernel : callable
        ``kernel(key, state, **params) -> (state, info)``.
    params : dict
        The kernel's fixed parameters (a rule's parameters override those of the same
        name). Without a rule they may hold traced values, so a step-size search can
        ``vmap`` over them; constants shared by all chains (a preconditioner) belong in
        ``kernel``'s closure instead, so their mat-vecs batch across chains.
    stats_fn : callable
        ``stats_fn(kernel_state, info, params) -> StepStats``.
    rule : Rule, optional
        What the warm-up adapts; None: warm-up steps are ordinary steps.
    adapts_in_warmup : bool, optional
        Whether the warm-up learns anything (default: whether a rule is given; a rule that
        never moves, such as a fixed step size, may say False).
    position : callable, optional
        ``position(kernel_state)`` (default: ``kernel_state.position``).
    refresh : bool
        True (default): the kernel state holds nothing but what ``kernel_init`` makes from a
        position, so :class:`~gradmc.base.BoundSampler`'s ``refresh`` is ``kernel_init`` at the
        new position; False: the state holds more (replicas, a temperature), and the sampler
        cannot be moved from outside (one block of a composed sampler, the discrete fallback).
    """
    read = position or (lambda state: state.position)

    def refresh_state(key, state, position):
        if isinstance(state, WarmupState):
            return state._replace(kernel=kernel_init(key, position))
        return kernel_init(key, position)

    def step(key, state, params):
        state, info = kernel(key, state, **params)
        return state, stats_fn(state, info, params)

    def kept(rule_state, frozen: bool) -> dict:
        """The kept values of the parameters the rule sets, as it sets them, and the flag."""
        current, final = rule.current(rule_state), rule.final(rule_state)
        values = {
            key: jax.tree.map(lambda f, c: jnp.asarray(f, jnp.result_type(c)), final[key], now)
            for key, now in current.items()
        }
        return {"kept": values, "frozen": Shared(jnp.asarray(frozen))}

    def init(key, start):
        state = kernel_init(key, start)
        if rule is None:
            return state
        rule_state = rule.init(state)
        return WarmupState(state, rule_state, **kept(rule_state, False))

    def warmup_step(key, ws, t):
        if rule is None:
            return step(key, ws, params)
        frozen = ws.frozen.value
        current = {**params, **jax.lax.cond(frozen, lambda: ws.kept, lambda: rule.current(ws.rule))}
        state, info = kernel(key, ws.kernel, **current)
        rule_state = jax.lax.cond(frozen, lambda: ws.rule, lambda: rule.update(ws.rule, state, info, t))
        return ws._replace(kernel=state, rule=rule_state), stats_fn(state, info, current)

    def finalize(ws):
        return (ws, params) if rule is None else (ws.kernel, {**params, **rule.final(ws.rule)})

    return BoundSampler(
        name,
        init=init,
        warmup_step=warmup_step,
        finalize=finalize,
        step=step,
        position=lambda state: read(state.kernel) if isinstance(state, WarmupState) else read(state),
        adapts_in_warmup=(rule is not None) if adapts_in_warmup is None else adapts_in_warmup,
        refresh=refresh_state if refresh else None,
        freeze=_identity if rule is None else lambda ws: ws._replace(**kept(ws.rule, True)),
    )


def bind_two_phase(
    name: str,
    warmup: WarmupKernel,
    finalize: Callable,
    kernel_init: Callable,
    step: Callable,
) -> BoundSampler:
    """The :class:`~gradmc.base.BoundSampler` that runs ``warmup`` and then a fixed kernel.

    Parameters
    ----------
    name : str
        The sampler's name.
    warmup : WarmupKernel
        The warm-up, which learns what the kept kernel runs with.
    finalize : callable
        ``finalize(warmup_state) -> (kernel_state, params)``: adaptation stops here.
    kernel_init : callable
        ``kernel_init(key, position) -> kernel_state`` of the kept kernel (what a composed
        sampler calls after another block moved).
    step : callable
        ``step(key, kernel_state, params) -> (kernel_state, StepStats)``.
    """

    def warmup_step(key, state, t):
        new, stats = warmup.step(key, state.state, t)
        return _WarmingUp(new), stats

    def position(state):
        return warmup.position(state.state) if isinstance(state, _WarmingUp) else state.position

    def refresh(key, state, position):
        if isinstance(state, _WarmingUp):
            return _WarmingUp(warmup.refresh(key, state.state, position))
        return kernel_init(key, position)

    return BoundSampler(
        name,
        init=lambda key, start: _WarmingUp(warmup.init(key, start)),
        warmup_step=warmup_step,
        finalize=lambda state: finalize(state.state),
        step=step,
        position=position,
        adapts_in_warmup=True,
        refresh=None if warmup.refresh is None else refresh,
    )


def step_size_sampler(
    name: str,
    kernel_init: Callable,
    kernel: Callable,
    logdensity_fn: Callable,
    initial_step_size,
    rule: StepSizeRule | None,
    stats_fn: Callable,
    *,
    parameter: str = "step_size",
    kept_value: Callable | None = None,
    init_with_key: bool = False,
    **kernel_params,
) -> BoundSampler:
    """:func:`bind` for a BlackJAX-style ``kernel(key, state, logdensity_fn, step_size,
    **kernel_params)`` whose one scalar ``parameter`` follows ``rule`` in warm-up
    (:func:`step_rule`) and is frozen after; ``rule=None`` keeps ``initial_step_size``.

    Parameters
    ----------
    name : str
        The sampler's name.
    kernel_init : callable
        ``kernel_init(position, logdensity_fn) -> state``, or
        ``kernel_init(position, logdensity_fn, key)`` with ``init_with_key``.
    kernel : callable
        The kernel, BlackJAX's signature.
    logdensity_fn : callable
        What ``kernel_init`` and ``kernel`` receive as the log density.
    initial_step_size : float
        The first value (positive).
    rule : StepSizeRule or None
        The adaptation rule; None: the value stays fixed and the warm-up steps are plain
        kernel steps (``adapts_in_warmup=False``).
    stats_fn : callable
        ``stats_fn(state, info, value) -> StepStats``.
    parameter : str
        The name of the adapted parameter in ``params`` (default ``"step_size"``).
    kept_value : callable, optional
        ``kept_value(final) -> value`` of the parameter after warm-up (default: as is).
    init_with_key : bool
        Pass the chain's key to ``kernel_init`` (a state that starts with a random draw,
        e.g. HAMS's momentum).
    **kernel_params
        Further keyword arguments of ``kernel``.
    """
    if is_concrete(initial_step_size):  # a step-size search passes traced values
        check_positive(parameter, initial_step_size)

    def init(key, position):
        return kernel_init(position, logdensity_fn, key) if init_with_key else kernel_init(position, logdensity_fn)

    return bind(
        name,
        init,
        lambda key, state, **params: kernel(key, state, logdensity_fn, params[parameter], **kernel_params),
        {},
        lambda state, info, params: stats_fn(state, info, params[parameter]),
        step_rule(parameter, rule or fixed_rule(), initial_step_size, kept_value),
        adapts_in_warmup=rule is not None,
    )
