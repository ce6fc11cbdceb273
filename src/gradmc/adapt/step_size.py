"""Step-size adaptation during warm-up, and the warm-up samplers built on it.

Two rules, each ``init(step) / update(state, acceptance) / current(state) / final(state)``:

* :func:`dual_averaging`: Nesterov dual averaging (Hoffman & Gelman 2014, Stan), from
  BlackJAX; the kept step size is the averaged iterate.
* :func:`robbins_monro`: the multiplicative rule of Titsias & Dellaportas' released code,
  ``delta <- delta * (1 + rate * (accepted - target) / target)``.

:func:`gradmc.adapt.warmup.step_rule` makes a warm-up rule of any of them, for any scalar
parameter of a kernel (:func:`gradmc.adapt.warmup.bind`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax.numpy as jnp
from blackjax.adaptation.step_size import dual_averaging_adaptation

from gradmc.checks import check_positive, check_probability

__all__ = [
    "StepSizeRule",
    "dual_averaging",
    "dual_averaging_final",
    "robbins_monro",
    "fixed_rule",
    "bounded",
    "rule_by_name",
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
