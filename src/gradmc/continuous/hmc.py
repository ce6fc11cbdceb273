"""HMC and NUTS from BlackJAX, with Stan's window adaptation run one step at a time.

The kernels are BlackJAX's (``blackjax.hmc``, ``blackjax.nuts``). The warm-up composes
BlackJAX's public pieces — ``build_schedule`` (Stan's fast/slow windows),
``dual_averaging_adaptation`` and ``mass_matrix_adaptation`` — into a per-step update, so
the runner can chunk it, show progress and checkpoint it like any other warm-up. After
warm-up the step size (the dual-averaging average) and the inverse mass matrix are frozen.

HMC may instead keep the identity mass matrix and adapt only its step size with
``adapt="robbins_monro"`` (the Titsias & Dellaportas baseline).
"""

from __future__ import annotations

from typing import NamedTuple

import blackjax
import jax
import jax.numpy as jnp
from blackjax.adaptation.mass_matrix import mass_matrix_adaptation
from blackjax.adaptation.step_size import dual_averaging_adaptation
from blackjax.adaptation.window_adaptation import build_schedule

from gradmc.adapt.step_size import check_positive, dual_averaging_final, rule_by_name, step_size_sampler
from gradmc.base import Sampler, Target, reject_nonfinite, step_stats
from gradmc.registry import register_sampler

__all__ = ["WindowState", "window_adapted_sampler"]


class WindowState(NamedTuple):
    kernel: NamedTuple
    step_size_state: NamedTuple
    mass_state: NamedTuple
    step_size: jax.Array
    inverse_mass_matrix: jax.Array


def _stats(state, info, step_size):
    energy_ok = jnp.isfinite(info.energy) if hasattr(info, "energy") else True
    return step_stats(
        state.logdensity,
        info.acceptance_rate,
        getattr(info, "is_accepted", True),
        step_size,
        info.num_integration_steps,
        diverging=info.is_divergent,
        nonfinite=~energy_ok,
    )


def window_adapted_sampler(name, kernel, logdensity_fn, num_warmup, *, dense_mass, target_accept, initial_step_size, **kernel_params) -> Sampler:
    """Stan's window adaptation of step size and inverse mass matrix for ``kernel``."""
    check_positive("step_size", initial_step_size)
    if not 0.0 < target_accept < 1.0:
        raise ValueError(f"target_accept must lie in (0, 1), got {target_accept}")
    da_init, da_update, da_final = dual_averaging_adaptation(target_accept)
    mm_init, mm_update, mm_final = mass_matrix_adaptation(not dense_mass)
    schedule = build_schedule(num_warmup) if num_warmup > 0 else jnp.zeros((1, 2), jnp.int32)

    def init(key, position):
        del key
        mass = mm_init(position.size)
        return WindowState(
            blackjax.hmc.init(position, logdensity_fn),
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
        return new, _stats(state, info, ws.step_size)

    def finalize(ws: WindowState):
        params = {"step_size": dual_averaging_final(ws.step_size_state), "inverse_mass_matrix": ws.inverse_mass_matrix}
        return ws.kernel, params

    def step(key, state, params):
        state, info = kernel(key, state, logdensity_fn, params["step_size"], params["inverse_mass_matrix"], **kernel_params)
        return state, _stats(state, info, params["step_size"])

    def position(state):
        return state.kernel.position if isinstance(state, WindowState) else state.position

    return Sampler(name, init, warmup_step, finalize, step, position)


@register_sampler("hmc", "Hamiltonian Monte Carlo (BlackJAX), fixed path length; Stan window adaptation in warm-up")
def build_hmc(
    target: Target,
    num_warmup: int,
    num_integration_steps=10,
    step_size=None,
    target_accept=0.8,
    adapt="window",
    dense_mass=False,
):
    """Options: ``num_integration_steps``, ``step_size`` (initial), ``target_accept``,
    ``adapt`` in {"window" (step size + mass matrix), "dual_averaging", "robbins_monro",
    None (identity mass, fixed or step-size-only adaptation)}, ``dense_mass``."""
    check_positive("num_integration_steps", num_integration_steps, integer=True)
    kernel = blackjax.hmc.build_kernel()
    if adapt == "window":
        return window_adapted_sampler(
            "hmc", kernel, reject_nonfinite(target.logdensity_fn), num_warmup, dense_mass=dense_mass, target_accept=target_accept,
            initial_step_size=1.0 if step_size is None else step_size, num_integration_steps=int(num_integration_steps),
        )
    step_size = 0.5 / target.dim if step_size is None else step_size
    return step_size_sampler(
        "hmc", blackjax.hmc.init, kernel, reject_nonfinite(target.logdensity_fn), step_size, rule_by_name(adapt, target_accept), _stats,
        inverse_mass_matrix=jnp.ones(target.dim), num_integration_steps=int(num_integration_steps),
    )


@register_sampler("nuts", "No-U-Turn sampler (BlackJAX) with Stan window adaptation of step size and mass matrix")
def build_nuts(target: Target, num_warmup: int, step_size=1.0, target_accept=0.8, dense_mass=False, max_num_doublings=10):
    """Options: ``step_size`` (initial), ``target_accept``, ``dense_mass``, ``max_num_doublings``."""
    check_positive("max_num_doublings", max_num_doublings, integer=True)
    return window_adapted_sampler(
        "nuts", blackjax.nuts.build_kernel(), reject_nonfinite(target.logdensity_fn), num_warmup, dense_mass=dense_mass,
        target_accept=target_accept, initial_step_size=step_size, max_num_doublings=int(max_num_doublings),
    )
