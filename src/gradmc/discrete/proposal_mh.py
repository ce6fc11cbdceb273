"""What every discrete kernel shares: the chain state, the Metropolis–Hastings test, the
factorised-proposal MH step of NCG/AVG/PAVG, statistics, and the Sampler wrapper.

* :class:`DiscreteState` ``(position, logdensity, grad)``: the triple (s_t, f(s_t),
  ∇f(s_t)) that Algorithms B.1–B.3 of Rhodes & Gutmann (2022) require. The gradient is
  that of the log density extended to real inputs.
* :func:`metropolis` accepts or rejects a proposed state given the log proposal-ratio
  correction (eq. 2); a NaN/+inf ratio (non-finite density or gradient at the
  proposal) is rejected and flagged, never propagated.
* :func:`factorised_mh_step`: one step of an MH sampler whose proposal is factorised
  over coordinates, q(s' | s, z) ∝ Π_i exp(a_i s'_i + b_i s'_i²), optionally after an
  auxiliary draw z (AVG/PAVG, eqs 27–28).
* :func:`fixed_sampler`: the :class:`~gradmc.base.Sampler` of a kernel without adaptation.
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from gradmc.base import Sampler, mh_accept, step_stats
from gradmc.spaces import DiscreteSpace, factorised_logprob, factorised_sample

__all__ = [
    "DiscreteState",
    "DiscreteInfo",
    "init",
    "metropolis",
    "factorised_mh_step",
    "l1_jump",
    "stats",
    "fixed_sampler",
    "check_space",
    "check_positive_param",
    "check_radius",
    "is_concrete",
]


class DiscreteState(NamedTuple):
    position: jax.Array
    logdensity: jax.Array
    grad: jax.Array


class DiscreteInfo(NamedTuple):
    acceptance_rate: jax.Array
    is_accepted: jax.Array
    nonfinite: jax.Array
    jump: jax.Array  # ||s_{t+1} - s_t||_1 of the kept move (0 when rejected)


def init(position, logdensity_fn: Callable) -> DiscreteState:
    """State with the log density and its gradient (real-input extension) at ``position``."""
    position = jnp.asarray(position, jnp.result_type(float))
    logdensity, grad = jax.value_and_grad(logdensity_fn)(position)
    return DiscreteState(position, logdensity, grad)


def l1_jump(new_position, old_position) -> jax.Array:
    return jnp.sum(jnp.abs(new_position - old_position))


def metropolis(key, state, proposed, log_correction) -> tuple[NamedTuple, DiscreteInfo]:
    """Accept ``proposed`` with probability min(1, exp(f' - f + log_correction)).

    ``log_correction`` is log q(s | s') - log q(s' | s) (plus any auxiliary-variable
    terms). Works for any state NamedTuple with ``position`` and ``logdensity``.
    """
    accept, prob, nonfinite = mh_accept(key, proposed.logdensity - state.logdensity + log_correction)
    new_state = jax.tree.map(lambda p, s: jnp.where(accept, p, s), proposed, state)
    return new_state, DiscreteInfo(prob, accept, nonfinite, l1_jump(new_state.position, state.position))


def factorised_mh_step(
    rng_key,
    state: DiscreteState,
    logdensity_fn: Callable,
    space: DiscreteSpace,
    forward: Callable,
    reverse: Callable,
) -> tuple[DiscreteState, DiscreteInfo]:
    """One MH step with a factorised proposal q(s' | s, aux) ∝ Π_i exp(a_i s'_i + b_i s'_i²)
    (Algorithms B.1–B.3).

    ``forward(key, state) -> (a, b, aux)`` gives the forward proposal (and draws any
    auxiliary variable); ``reverse(state, proposed, aux) -> (a', b', log_aux_ratio)``
    gives the reverse proposal q(s | s', aux) and, for auxiliary-variable samplers, the
    log ratio of the auxiliary densities in eqs 27–28 (0 otherwise). The forward move is
    scored by the draw itself (:func:`~gradmc.spaces.factorised_sample`), the reverse one
    at the current position (:func:`~gradmc.spaces.factorised_logprob`, no index search).
    """
    key_fwd, key_prop, key_mh = jax.random.split(rng_key, 3)
    a, b, aux = forward(key_fwd, state)
    position, _, log_forward = factorised_sample(key_prop, a, b, space)
    proposed = init(position, logdensity_fn)
    a_rev, b_rev, log_aux_ratio = reverse(state, proposed, aux)
    log_correction = factorised_logprob(state.position, a_rev, b_rev, space) - log_forward + log_aux_ratio
    return metropolis(key_mh, state, proposed, log_correction)


def stats(state, info: DiscreteInfo, step_size=jnp.nan, num_grad_evals=1, extra: dict | None = None):
    """:class:`~gradmc.base.StepStats` of a discrete step; the L1 jump goes in ``extra``."""
    return step_stats(
        state.logdensity,
        info.acceptance_rate,
        info.is_accepted,
        step_size,
        num_grad_evals,
        nonfinite=info.nonfinite,
        extra={"jump": jnp.asarray(info.jump, jnp.float32), **(extra or {})},
    )


def fixed_sampler(name: str, kernel_init: Callable, kernel: Callable, params: dict, stats_fn: Callable) -> Sampler:
    """A :class:`~gradmc.base.Sampler` for a kernel without adaptation.

    ``kernel(key, state, **params)``; warm-up steps are ordinary steps. ``params`` may
    hold traced values, so a step-size search can ``vmap`` over them.
    """

    def step(key, state, params):
        state, info = kernel(key, state, **params)
        return state, stats_fn(state, info, params)

    return Sampler(
        name,
        init=lambda key, position: kernel_init(position),
        warmup_step=lambda key, state, t: step(key, state, params),
        finalize=lambda state: (state, params),
        step=step,
        position=lambda state: state.position,
    )


# -- input checks (host side; traced values pass through so searches can vmap) ------------


def is_concrete(x) -> bool:
    return not any(isinstance(leaf, jax.core.Tracer) for leaf in jax.tree.leaves(x))


def check_space(target, sampler: str) -> DiscreteSpace:
    space = target.space
    if not isinstance(space, DiscreteSpace):
        raise ValueError(f"{sampler} samples discrete spaces (Binary, Spin, Ordinal, Categorical); target {target.name!r} lives on {space}")
    return space


def check_positive_param(name: str, value) -> jax.Array:
    """``value`` as float32 after checking it is a finite positive scalar (if concrete)."""
    if is_concrete(value):
        v = np.asarray(value, dtype=np.float64)
        if v.shape != () or not np.isfinite(v) or v <= 0:
            raise ValueError(f"{name} must be a finite positive number, got {value!r}")
    return jnp.asarray(value, jnp.float32)


def check_radius(value) -> jax.Array:
    """A radius r >= 1 (an integer), as int32."""
    if is_concrete(value):
        v = np.asarray(value)
        if v.shape != () or not np.isfinite(v) or v < 1 or int(v) != v:
            raise ValueError(f"radius r must be an integer >= 1, got {value!r}")
    return jnp.asarray(value, jnp.int32)
