"""Step-size adaptation during warm-up, and the warm-up samplers built on it.

Two rules, each ``init(step) / update(state, acceptance) / current(state) / final(state)``:

* :func:`dual_averaging`: Nesterov dual averaging (Hoffman & Gelman 2014, Stan), from
  BlackJAX; the kept step size is the averaged iterate.
* :func:`robbins_monro`: the multiplicative rule of Titsias & Dellaportas' released code,
  ``delta <- delta * (1 + rate * (accepted - target) / target)``.

:func:`step_size_sampler` turns any kernel with a ``step_size`` parameter into a
:class:`~gradmc.base.BoundSampler` whose warm-up adapts the step size and whose kept chain uses
the frozen value; :func:`window_adapted_sampler` does the same for an HMC-family kernel with
Stan's windowed adaptation of the step size and the inverse mass matrix.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
from blackjax.adaptation.mass_matrix import mass_matrix_adaptation
from blackjax.adaptation.step_size import dual_averaging_adaptation
from blackjax.adaptation.window_adaptation import build_schedule

from gradmc.base import BoundSampler
from gradmc.checks import check_positive, check_probability, is_concrete

__all__ = [
    "StepSizeRule",
    "dual_averaging",
    "dual_averaging_final",
    "robbins_monro",
    "fixed_rule",
    "bounded",
    "rule_by_name",
    "StepSizeWarmupState",
    "step_size_sampler",
    "WindowState",
    "window_adapted_sampler",
]


class StepSizeRule(NamedTuple):
    """A step-size rule as four functions of its state.

    Parameters
    ----------
    init : callable
        ``init(step_size) -> state``.
    update : callable
        ``update(state, acceptance_rate) -> state`` after one warm-up step.
    current : callable
        ``current(state) -> step_size`` for the next warm-up step.
    final : callable
        ``final(state) -> step_size`` kept after warm-up.
    """

    init: Callable
    update: Callable
    current: Callable
    final: Callable


def dual_averaging(target_accept: float) -> StepSizeRule:
    """Nesterov dual averaging towards ``target_accept`` (Hoffman & Gelman 2014, eq. 6; BlackJAX's code).

    Parameters
    ----------
    target_accept : float
        The mean acceptance probability aimed at, in (0, 1).
    """
    check_probability("target acceptance rate", target_accept)
    da_init, da_update, _ = dual_averaging_adaptation(target_accept)
    return StepSizeRule(
        init=da_init,
        update=lambda s, acc: da_update(s, jnp.nan_to_num(acc)),
        current=lambda s: jnp.exp(s.log_step_size),
        final=dual_averaging_final,
    )


def dual_averaging_final(state) -> jnp.ndarray:
    """The averaged step size, or the initial one when no update has happened yet.

    Parameters
    ----------
    state : DualAveragingState
        BlackJAX's dual-averaging state.
    """
    return jnp.where(state.step > 1, jnp.exp(state.log_step_size_avg), jnp.exp(state.log_step_size))


def robbins_monro(target_accept: float, rate: float = 0.01) -> StepSizeRule:
    """Titsias & Dellaportas' rule: delta <- delta (1 + rate (acc - target) / target).

    Parameters
    ----------
    target_accept : float
        The acceptance probability aimed at, in (0, 1).
    rate : float
        The gain of each update (0.01 in the released code).
    """
    check_probability("target acceptance rate", target_accept)
    check_positive("rate", rate)

    def update(step, acc):
        return step * (1.0 + rate * (jnp.nan_to_num(acc) - target_accept) / target_accept)

    return StepSizeRule(
        init=lambda step: jnp.asarray(step, jnp.float32),
        update=update,
        current=lambda s: s,
        final=lambda s: s,
    )


def fixed_rule() -> StepSizeRule:
    """The rule that never moves: the value given stays (``adapt=None``)."""
    return StepSizeRule(lambda s: jnp.asarray(s, jnp.float32), lambda s, a: s, lambda s: s, lambda s: s)


def bounded(rule: StepSizeRule, upper: float) -> StepSizeRule:
    """``rule`` with the step size it hands out (``current``, ``final``) held at ``upper`` at
    most; its own state moves on unchanged.

    Parameters
    ----------
    rule : StepSizeRule
        The rule.
    upper : float
        The largest step size used.
    """
    return rule._replace(
        current=lambda s: jnp.minimum(rule.current(s), upper), final=lambda s: jnp.minimum(rule.final(s), upper)
    )


def rule_by_name(adapt: str | None, target_accept: float) -> StepSizeRule | None:
    """The rule called ``adapt``, or ``None`` for no adaptation.

    Parameters
    ----------
    adapt : {"dual_averaging", "robbins_monro"} or None
        The rule's name.
    target_accept : float
        The acceptance probability it aims at.
    """
    rules = {"dual_averaging": dual_averaging, "robbins_monro": robbins_monro}
    if adapt is None:
        return None
    if adapt not in rules:
        raise ValueError(f"adapt must be one of {sorted(rules)} or None, got {adapt!r}")
    return rules[adapt](target_accept)


class StepSizeWarmupState(NamedTuple):
    """Warm-up state of :func:`step_size_sampler`: the kernel's state and the rule's."""

    kernel: NamedTuple
    rule: NamedTuple


def _warmup_position(warmup_type: type) -> Callable:
    """``position(state)`` for a state that is a ``warmup_type`` (position in ``.kernel``) or a kernel state."""

    def position(state):
        return state.kernel.position if isinstance(state, warmup_type) else state.position

    return position


def step_size_sampler(
    name: str,
    kernel_init: Callable,
    kernel: Callable,
    logdensity_fn: Callable,
    initial_step_size: float,
    rule: StepSizeRule | None,
    stats_fn: Callable,
    *,
    parameter: str = "step_size",
    kept_value: Callable | None = None,
    init_with_key: bool = False,
    **kernel_params,
) -> BoundSampler:
    """A :class:`~gradmc.base.BoundSampler` for ``kernel(key, state, logdensity_fn, step_size, **kernel_params)``.

    During warm-up the step size follows ``rule`` on the acceptance probability of each
    step; ``finalize`` freezes it. Any positive parameter whose increase lowers the
    acceptance rate can be adapted the same way (GWG's number of flips): ``parameter``
    names it in the run's ``params`` and ``kept_value`` maps the rule's final value to the
    kept one (e.g. rounding to an integer).

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
        The first step size (positive).
    rule : StepSizeRule or None
        The adaptation rule; ``None``: the step size stays fixed and the warm-up steps are
        plain kernel steps (``adapts_in_warmup=False``).
    stats_fn : callable
        ``stats_fn(state, info, step_size) -> StepStats``.
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
    adapts = rule is not None
    kept_value = kept_value or (lambda value: value)
    rule = rule or fixed_rule()

    def init(key, position):
        state = kernel_init(position, logdensity_fn, key) if init_with_key else kernel_init(position, logdensity_fn)
        return StepSizeWarmupState(state, rule.init(initial_step_size))

    def warmup_step(key, wstate, t):
        del t
        step_size = rule.current(wstate.rule)
        state, info = kernel(key, wstate.kernel, logdensity_fn, step_size, **kernel_params)
        new_rule = rule.update(wstate.rule, info.acceptance_rate)
        return StepSizeWarmupState(state, new_rule), stats_fn(state, info, step_size)

    def finalize(wstate):
        return wstate.kernel, {parameter: kept_value(jnp.asarray(rule.final(wstate.rule), jnp.float32))}

    def step(key, state, params):
        state, info = kernel(key, state, logdensity_fn, params[parameter], **kernel_params)
        return state, stats_fn(state, info, params[parameter])

    return BoundSampler(name, init, warmup_step, finalize, step, _warmup_position(StepSizeWarmupState), adapts)


class WindowState(NamedTuple):
    """Warm-up state of :func:`window_adapted_sampler`."""

    kernel: NamedTuple
    step_size_state: NamedTuple
    mass_state: NamedTuple
    step_size: jax.Array
    inverse_mass_matrix: jax.Array


def window_adapted_sampler(
    name: str,
    kernel_init: Callable,
    kernel: Callable,
    logdensity_fn: Callable,
    num_warmup: int,
    *,
    dense_mass: bool,
    target_accept: float,
    initial_step_size: float,
    stats_fn: Callable,
    **kernel_params,
) -> BoundSampler:
    """Stan's window adaptation (Stan reference manual, "HMC algorithm parameters") run one step at a time.

    BlackJAX's ``build_schedule`` (fast/slow windows), dual averaging and mass-matrix
    adaptation composed into a per-step update; after warm-up the step size (the
    dual-averaging average) and the inverse mass matrix are frozen.

    Parameters
    ----------
    name : str
        The sampler's name.
    kernel_init : callable
        ``kernel_init(position, logdensity_fn) -> state`` (BlackJAX's ``hmc.init``).
    kernel : callable
        ``kernel(key, state, logdensity_fn, step_size, inverse_mass_matrix, **kernel_params)``.
    logdensity_fn : callable
        The log density the kernel samples.
    num_warmup : int
        The number of warm-up steps (the windows' schedule).
    dense_mass : bool
        Adapt a dense inverse mass matrix (else a diagonal one).
    target_accept : float
        The acceptance probability dual averaging aims at, in (0, 1).
    initial_step_size : float
        The first step size (positive).
    stats_fn : callable
        ``stats_fn(state, info, step_size) -> StepStats``.
    **kernel_params
        Further keyword arguments of ``kernel``.
    """
    check_positive("step_size", initial_step_size)
    check_probability("target_accept", target_accept)
    da_init, da_update, da_final = dual_averaging_adaptation(target_accept)
    mm_init, mm_update, mm_final = mass_matrix_adaptation(not dense_mass)
    schedule = build_schedule(num_warmup) if num_warmup > 0 else jnp.zeros((1, 2), jnp.int32)

    def init(key, position):
        del key
        mass = mm_init(position.size)
        return WindowState(
            kernel_init(position, logdensity_fn),
            da_init(initial_step_size),
            mass,
            jnp.asarray(initial_step_size, jnp.float32),
            mass.inverse_mass_matrix,
        )

    def warmup_step(key, ws: WindowState, t):
        state, info = kernel(key, ws.kernel, logdensity_fn, ws.step_size, ws.inverse_mass_matrix, **kernel_params)
        slow, window_end = schedule[t, 0] == 1, schedule[t, 1] == 1
        ss = da_update(ws.step_size_state, jnp.nan_to_num(info.acceptance_rate))
        mass = jax.lax.cond(slow, lambda m: mm_update(m, state.position), lambda m: m, ws.mass_state)

        def end_window(ss, mass):
            return da_init(da_final(ss)), mm_final(mass)

        ss, mass = jax.lax.cond(window_end, end_window, lambda s, m: (s, m), ss, mass)
        new = WindowState(state, ss, mass, jnp.exp(ss.log_step_size), mass.inverse_mass_matrix)
        return new, stats_fn(state, info, ws.step_size)

    def finalize(ws: WindowState):
        params = {"step_size": dual_averaging_final(ws.step_size_state), "inverse_mass_matrix": ws.inverse_mass_matrix}
        return ws.kernel, params

    def step(key, state, params):
        state, info = kernel(
            key, state, logdensity_fn, params["step_size"], params["inverse_mass_matrix"], **kernel_params
        )
        return state, stats_fn(state, info, params["step_size"])

    return BoundSampler(name, init, warmup_step, finalize, step, _warmup_position(WindowState))
