"""Step-size adaptation during warm-up, and the warm-up sampler built on it.

Two rules, each ``init(step) / update(state, acceptance) / current(state) / final(state)``:

* :func:`dual_averaging` — Nesterov dual averaging (Hoffman & Gelman 2014, Stan), from
  BlackJAX; the kept step size is the averaged iterate.
* :func:`robbins_monro` — the multiplicative rule of Titsias & Dellaportas' released code,
  ``delta <- delta * (1 + rate * (accepted - target) / target)``.

:func:`step_size_sampler` turns any kernel with a ``step_size`` parameter into a
:class:`~gradmc.base.Sampler` whose warm-up adapts the step size and whose kept chain uses
the frozen value.
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import jax.numpy as jnp
from blackjax.adaptation.step_size import dual_averaging_adaptation

from gradmc.base import Sampler

__all__ = ["StepSizeRule", "dual_averaging", "robbins_monro", "step_size_sampler", "check_positive", "rule_by_name", "dual_averaging_final"]


class StepSizeRule(NamedTuple):
    init: Callable
    update: Callable
    current: Callable
    final: Callable


def check_positive(name: str, value, *, integer: bool = False) -> None:
    """Raise ``ValueError`` unless ``value`` is a positive (integer) number."""
    ok = value is not None and jnp.all(jnp.asarray(value) > 0)
    if integer:
        ok = ok and float(value) == int(value)
    if not ok:
        kind = "a positive integer" if integer else "positive"
        raise ValueError(f"{name} must be {kind}, got {value!r}")


def _check_target(target_accept: float) -> None:
    if not 0.0 < float(target_accept) < 1.0:
        raise ValueError(f"target acceptance rate must lie in (0, 1), got {target_accept}")


def dual_averaging(target_accept: float) -> StepSizeRule:
    """Nesterov dual averaging towards ``target_accept`` (BlackJAX's implementation)."""
    _check_target(target_accept)
    da_init, da_update, _ = dual_averaging_adaptation(target_accept)
    return StepSizeRule(
        init=da_init,
        update=lambda s, acc: da_update(s, jnp.nan_to_num(acc)),
        current=lambda s: jnp.exp(s.log_step_size),
        final=dual_averaging_final,
    )


def dual_averaging_final(state) -> jnp.ndarray:
    """The averaged step size, or the initial one when no update has happened yet."""
    return jnp.where(state.step > 1, jnp.exp(state.log_step_size_avg), jnp.exp(state.log_step_size))


def robbins_monro(target_accept: float, rate: float = 0.01) -> StepSizeRule:
    """Titsias & Dellaportas' rule: delta <- delta (1 + rate (acc - target) / target)."""
    _check_target(target_accept)
    check_positive("rate", rate)

    def update(step, acc):
        return step * (1.0 + rate * (jnp.nan_to_num(acc) - target_accept) / target_accept)

    return StepSizeRule(
        init=lambda step: jnp.asarray(step, jnp.float32),
        update=update,
        current=lambda s: s,
        final=lambda s: s,
    )


def rule_by_name(adapt: str | None, target_accept: float) -> StepSizeRule | None:
    """``"dual_averaging"``, ``"robbins_monro"`` or ``None`` (no adaptation)."""
    rules = {"dual_averaging": dual_averaging, "robbins_monro": robbins_monro}
    if adapt is None:
        return None
    if adapt not in rules:
        raise ValueError(f"adapt must be one of {sorted(rules)} or None, got {adapt!r}")
    return rules[adapt](target_accept)


class StepSizeWarmupState(NamedTuple):
    kernel: NamedTuple
    rule: NamedTuple


def step_size_sampler(
    name: str,
    kernel_init: Callable,
    kernel: Callable,
    logdensity_fn: Callable,
    initial_step_size: float,
    rule: StepSizeRule | None,
    stats_fn: Callable,
    **kernel_params,
) -> Sampler:
    """A :class:`Sampler` for ``kernel(key, state, logdensity_fn, step_size, **kernel_params)``.

    During warm-up the step size follows ``rule`` on the acceptance probability of each
    step (``rule=None``: no adaptation); ``finalize`` freezes it. ``stats_fn(state, info,
    step_size)`` maps the kernel's info to :class:`~gradmc.base.StepStats`.
    """
    check_positive("step_size", initial_step_size)
    rule = rule or StepSizeRule(lambda s: jnp.asarray(s, jnp.float32), lambda s, a: s, lambda s: s, lambda s: s)

    def init(key, position):
        del key
        return StepSizeWarmupState(kernel_init(position, logdensity_fn), rule.init(initial_step_size))

    def warmup_step(key, wstate, t):
        del t
        step_size = rule.current(wstate.rule)
        state, info = kernel(key, wstate.kernel, logdensity_fn, step_size, **kernel_params)
        new_rule = rule.update(wstate.rule, info.acceptance_rate)
        return StepSizeWarmupState(state, new_rule), stats_fn(state, info, step_size)

    def finalize(wstate):
        return wstate.kernel, {"step_size": jnp.asarray(rule.final(wstate.rule), jnp.float32)}

    def step(key, state, params):
        state, info = kernel(key, state, logdensity_fn, params["step_size"], **kernel_params)
        return state, stats_fn(state, info, params["step_size"])

    def position(state):
        return state.kernel.position if isinstance(state, StepSizeWarmupState) else state.position

    return Sampler(name, init, warmup_step, finalize, step, position)

