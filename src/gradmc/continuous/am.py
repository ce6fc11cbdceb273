"""Adaptive Metropolis with a Cholesky Robbins–Monro update (Titsias & Dellaportas' baseline).

As coded in the released code (``experiments.md``): after each step at ``x``,
``mu <- mu + 0.01 (x - mu)``,
``L <- L + rho_t L tril(L^-1 (x - mu)(x - mu)^T L^-T - I)``, ``rho_t = 0.0005 / (1 + t/5000)``,
``delta <- delta (1 + 0.01 (acc - 0.25) / 0.25)``, proposal ``y = x + sqrt(delta) L eps``,
``L_0 = I``, ``delta_0 = 0.1 / sqrt(n)``. Adaptation runs during warm-up only; the kept
chain is random-walk Metropolis with covariance ``delta L L^T`` (the RWM kernel).
An update that would make L non-finite or give it a diagonal entry below 1e-3 is skipped.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.scipy.linalg import solve_triangular

from gradmc.adapt.step_size import check_positive
from gradmc.base import Sampler, Target, mh_stats
from gradmc.continuous import rwm
from gradmc.registry import register_sampler

__all__ = ["AMState", "am_update"]


class AMState(NamedTuple):
    kernel: rwm.RWMState
    mean: jax.Array
    chol: jax.Array
    scale: jax.Array  # delta


def am_update(state: AMState, accepted_prob, t, mean_rate=0.01, chol_rate=5e-4, chol_decay=5000.0, scale_rate=0.01, target_accept=0.25) -> AMState:
    """One Robbins–Monro update of (mu, L, delta) from the current position."""
    x = state.kernel.position
    mean = state.mean + mean_rate * (x - state.mean)
    z = solve_triangular(state.chol, x - mean, lower=True)
    rho = chol_rate / (1.0 + t / chol_decay)
    chol = state.chol + rho * state.chol @ jnp.tril(jnp.outer(z, z) - jnp.eye(x.size))
    ok = jnp.all(jnp.isfinite(chol)) & (jnp.min(jnp.diag(chol)) >= 1e-3)
    chol = jnp.where(ok, chol, state.chol)
    scale = state.scale * (1.0 + scale_rate * (accepted_prob - target_accept) / target_accept)
    return AMState(state.kernel, mean, chol, scale)


@register_sampler("am", "adaptive Metropolis (Cholesky Robbins-Monro, Titsias & Dellaportas' code); RWM after warm-up")
def build(target: Target, num_warmup: int, initial_scale=None, target_accept=0.25):
    """Options: ``initial_scale`` delta_0 (default 0.1/sqrt(n)), ``target_accept``."""
    n = target.dim
    scale0 = 0.1 / jnp.sqrt(n) if initial_scale is None else initial_scale
    check_positive("initial_scale", scale0)
    if not 0.0 < target_accept < 1.0:
        raise ValueError(f"target_accept must lie in (0, 1), got {target_accept}")
    kernel = rwm.build_kernel()
    logdensity_fn = target.logdensity_fn

    rwm_stats = mh_stats(0)

    def stats(state, info, scale):
        return rwm_stats(state, info, jnp.sqrt(scale))

    def init(key, position):
        del key
        return AMState(rwm.init(position, logdensity_fn), position, jnp.eye(n, dtype=position.dtype), jnp.asarray(scale0, position.dtype))

    def warmup_step(key, state: AMState, t):
        new_kernel, info = kernel(key, state.kernel, logdensity_fn, jnp.sqrt(state.scale), state.chol)
        new = am_update(state._replace(kernel=new_kernel), jnp.nan_to_num(info.acceptance_rate), t, target_accept=target_accept)
        return new, stats(new_kernel, info, state.scale)

    def finalize(state: AMState):
        return state.kernel, {"chol": state.chol, "scale": state.scale, "mean": state.mean}

    def step(key, state, params):
        new, info = kernel(key, state, logdensity_fn, jnp.sqrt(params["scale"]), params["chol"])
        return new, stats(new, info, params["scale"])

    def position(state):
        return state.kernel.position if isinstance(state, AMState) else state.position

    return Sampler("am", init, warmup_step, finalize, step, position)
