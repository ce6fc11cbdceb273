"""Adaptive Metropolis with a Cholesky Robbins–Monro update (Titsias & Dellaportas' baseline).

The update of Titsias & Dellaportas' released code: after each step at ``x``,
``mu <- mu + 0.01 (x - mu)``,
``L <- L + rho_t L tril(L^-1 (x - mu)(x - mu)^T L^-T - I)``, ``rho_t = 0.0005 / (1 + t/5000)``,
``delta <- delta (1 + 0.01 (acc - 0.25) / 0.25)``, proposal ``y = x + sqrt(delta) L eps``,
``L_0 = I``, ``delta_0 = 0.1 / sqrt(n)``. Adaptation runs during warm-up only; the kept
chain is random-walk Metropolis with covariance ``delta L L^T`` (the RWM kernel).
An update that would make L non-finite or give it a diagonal entry below 1e-3 is skipped.

The update depends on the warm-up step ``t``, which the adaptive kernel takes as an argument
(so it has no ``as_top_level_api``: a ``SamplingAlgorithm`` step sees only a key and a state).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.scipy.linalg import solve_triangular

from gradmc.continuous import rwm

__all__ = ["AMState", "init", "am_update", "build_kernel"]


class AMState(NamedTuple):
    """The RWM state and the adapted proposal: mean ``mu``, Cholesky factor ``L``, scale ``delta``."""

    kernel: rwm.RWMState
    mean: jax.Array
    chol: jax.Array
    scale: jax.Array  # delta


def init(position, logdensity_fn: Callable, initial_scale) -> AMState:
    """The adaptation's start at ``position``: ``mu = x``, ``L = I``, ``delta = initial_scale``.

    Parameters
    ----------
    position : array
        The starting point (flat).
    logdensity_fn : callable
        The unnormalised log density.
    initial_scale : float
        delta_0.
    """
    n = position.size
    return AMState(
        rwm.init(position, logdensity_fn),
        position,
        jnp.eye(n, dtype=position.dtype),
        jnp.asarray(initial_scale, position.dtype),
    )


def am_update(
    state: AMState,
    accepted_prob,
    t,
    mean_rate=0.01,
    chol_rate=5e-4,
    chol_decay=5000.0,
    scale_rate=0.01,
    target_accept=0.25,
) -> AMState:
    """One Robbins–Monro update of (mu, L, delta) from the current position (the module docstring's formulas).

    Parameters
    ----------
    state : AMState
        The state after the step.
    accepted_prob : float
        The step's acceptance probability.
    t : int
        The warm-up step.
    mean_rate, chol_rate, chol_decay, scale_rate : float
        The gains 0.01, 0.0005, 5000 and 0.01 of the formulas.
    target_accept : float
        The acceptance probability aimed at.
    """
    x = state.kernel.position
    mean = state.mean + mean_rate * (x - state.mean)
    z = solve_triangular(state.chol, x - mean, lower=True)
    rho = chol_rate / (1.0 + t / chol_decay)
    chol = state.chol + rho * state.chol @ jnp.tril(jnp.outer(z, z) - jnp.eye(x.size))
    ok = jnp.all(jnp.isfinite(chol)) & (jnp.min(jnp.diag(chol)) >= 1e-3)
    chol = jnp.where(ok, chol, state.chol)
    scale = state.scale * (1.0 + scale_rate * (accepted_prob - target_accept) / target_accept)
    return AMState(state.kernel, mean, chol, scale)


def build_kernel(target_accept: float = 0.25):
    """``kernel(key, state, logdensity_fn, t) -> (AMState, RWMInfo)``: an RWM step with covariance
    ``delta L L^T`` followed by :func:`am_update`.

    Parameters
    ----------
    target_accept : float
        The acceptance probability the scale delta aims at.
    """
    step = rwm.build_kernel()

    def kernel(rng_key, state: AMState, logdensity_fn, t):
        new_kernel, info = step(rng_key, state.kernel, logdensity_fn, jnp.sqrt(state.scale), state.chol)
        new = am_update(
            state._replace(kernel=new_kernel), jnp.nan_to_num(info.acceptance_rate), t, target_accept=target_accept
        )
        return new, info

    return kernel
