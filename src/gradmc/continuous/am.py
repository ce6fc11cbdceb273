"""Adaptive Metropolis with a Cholesky Robbins–Monro update (Titsias & Dellaportas' baseline).

The update of Titsias & Dellaportas' released code: after each step at ``x``,
``mu <- mu + 0.01 (x - mu)``,
``L <- L + rho_t L tril(L^-1 (x - mu)(x - mu)^T L^-T - I)``, ``rho_t = 0.0005 / (1 + t/5000)``,
``delta <- delta (1 + 0.01 (acc - 0.25) / 0.25)``, proposal ``y = x + sqrt(delta) L eps``,
``L_0 = I``, ``delta_0 = 0.1 / sqrt(n)``. Adaptation runs during warm-up only; the kept
chain is random-walk Metropolis with covariance ``delta L L^T`` (the RWM kernel).
An update that would make L non-finite or give it a diagonal entry below 1e-3 is skipped.

The kernel is RWM's (:mod:`gradmc.continuous.rwm`, step size ``sqrt(delta)``, factor ``L``,
on the flat vector of a pytree position);
what is adaptive is its warm-up rule (:func:`rule`, a :class:`gradmc.adapt.warmup.Rule`):
the update depends on the warm-up step ``t``, which a ``SamplingAlgorithm`` step does not see.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.scipy.linalg import solve_triangular

from gradmc.adapt.warmup import Rule
from gradmc.pytrees import ravel

__all__ = ["AMAdaptation", "init", "am_update", "rule"]


class AMAdaptation(NamedTuple):
    """The adapted proposal: mean ``mu``, Cholesky factor ``L``, scale ``delta``."""

    mean: jax.Array
    chol: jax.Array
    scale: jax.Array  # delta


def init(position, initial_scale) -> AMAdaptation:
    """The adaptation's start at ``position``: ``mu = x``, ``L = I``, ``delta = initial_scale``.

    Parameters
    ----------
    position : array
        The starting point (flat).
    initial_scale : float
        delta_0.
    """
    n = position.size
    return AMAdaptation(position, jnp.eye(n, dtype=position.dtype), jnp.asarray(initial_scale, position.dtype))


def am_update(
    state: AMAdaptation,
    x,
    accepted_prob,
    t,
    mean_rate=0.01,
    chol_rate=5e-4,
    chol_decay=5000.0,
    scale_rate=0.01,
    target_accept=0.25,
) -> AMAdaptation:
    """One Robbins–Monro update of (mu, L, delta) from the position ``x`` after a step (the
    module docstring's formulas).

    Parameters
    ----------
    state : AMAdaptation
        The adaptation before the update.
    x : array
        The position after the step.
    accepted_prob : float
        The step's acceptance probability.
    t : int
        The warm-up step.
    mean_rate, chol_rate, chol_decay, scale_rate : float
        The gains 0.01, 0.0005, 5000 and 0.01 of the formulas.
    target_accept : float
        The acceptance probability aimed at.
    """
    mean = state.mean + mean_rate * (x - state.mean)
    z = solve_triangular(state.chol, x - mean, lower=True)
    rho = chol_rate / (1.0 + t / chol_decay)
    chol = state.chol + rho * state.chol @ jnp.tril(jnp.outer(z, z) - jnp.eye(x.size))
    ok = jnp.all(jnp.isfinite(chol)) & (jnp.min(jnp.diag(chol)) >= 1e-3)
    chol = jnp.where(ok, chol, state.chol)
    scale = state.scale * (1.0 + scale_rate * (accepted_prob - target_accept) / target_accept)
    return AMAdaptation(mean, chol, scale)


def rule(initial_scale, target_accept: float = 0.25) -> Rule:
    """The warm-up rule of RWM's ``step_size`` (``sqrt(delta)``) and ``chol`` (``L``): after
    each step, :func:`am_update`; kept after warm-up with ``scale`` and ``mean``.

    Parameters
    ----------
    initial_scale : float
        delta_0.
    target_accept : float
        The acceptance probability the scale delta aims at.
    """

    def kernel_params(state: AMAdaptation) -> dict:
        return {"step_size": jnp.sqrt(state.scale), "chol": state.chol}

    return Rule(
        init=lambda kernel_state: init(ravel(kernel_state.position), initial_scale),
        update=lambda state, kernel_state, info, t: am_update(
            state, ravel(kernel_state.position), jnp.nan_to_num(info.acceptance_rate), t, target_accept=target_accept
        ),
        current=kernel_params,
        final=lambda state: {**kernel_params(state), "scale": state.scale, "mean": state.mean},
    )
