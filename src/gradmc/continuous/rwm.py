"""Random-walk Metropolis with an isotropic or full-covariance Gaussian proposal.

Proposal ``y = x + h L eps``, ``eps ~ N(0, I)``, ``L L^T = cov`` (identity when no
covariance is given); accepted with probability min(1, pi(y)/pi(x)) (textbook eq. for
symmetric proposals). Non-finite log densities at ``y`` are rejected and flagged.
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp

from gradmc.adapt.step_size import rule_by_name, step_size_sampler
from gradmc.base import SamplingAlgorithm, Target, mh_accept, mh_stats
from gradmc.linalg import cholesky_factor
from gradmc.registry import register_sampler

__all__ = ["RWMState", "RWMInfo", "init", "build_kernel", "as_top_level_api"]


class RWMState(NamedTuple):
    position: jax.Array
    logdensity: jax.Array


class RWMInfo(NamedTuple):
    acceptance_rate: jax.Array
    is_accepted: jax.Array
    nonfinite: jax.Array


def init(position, logdensity_fn: Callable) -> RWMState:
    return RWMState(position, logdensity_fn(position))


def build_kernel():
    """``kernel(key, state, logdensity_fn, step_size, chol=None)``; ``chol`` is L."""

    def kernel(rng_key, state: RWMState, logdensity_fn, step_size, chol=None):
        key_prop, key_mh = jax.random.split(rng_key)
        eps = jax.random.normal(key_prop, state.position.shape, state.position.dtype)
        move = eps if chol is None else chol @ eps
        proposal = state.position + step_size * move
        new_logdensity = logdensity_fn(proposal)
        accept, prob, nonfinite = mh_accept(key_mh, new_logdensity - state.logdensity)
        new_state = jax.lax.cond(accept, lambda: RWMState(proposal, new_logdensity), lambda: state)
        return new_state, RWMInfo(prob, accept, nonfinite)

    return kernel


def as_top_level_api(logdensity_fn: Callable, step_size, cov=None) -> SamplingAlgorithm:
    """``rwm = as_top_level_api(logdensity_fn, 0.5); state = rwm.init(x); rwm.step(key, state)``."""
    kernel = build_kernel()
    chol = None if cov is None else cholesky_factor(cov, "RWM proposal covariance")
    return SamplingAlgorithm(
        lambda position, rng_key=None: init(position, logdensity_fn),
        lambda rng_key, state: kernel(rng_key, state, logdensity_fn, step_size, chol),
    )



@register_sampler("rwm", "random-walk Metropolis, isotropic or full-covariance Gaussian proposal; step size adapted in warm-up")
def build(target: Target, num_warmup: int, step_size=None, cov=None, target_accept=0.25, adapt="dual_averaging"):
    """Options: ``step_size`` (default 2.38/sqrt(d)), ``cov`` (proposal covariance),
    ``target_accept``, ``adapt`` in {"dual_averaging", "robbins_monro", None}."""
    chol = None if cov is None else cholesky_factor(cov, "RWM proposal covariance", target.dim)
    step_size = 2.38 / jnp.sqrt(target.dim) if step_size is None else step_size
    rule = rule_by_name(adapt, target_accept)
    kernel = build_kernel()
    return step_size_sampler("rwm", init, kernel, target.logdensity_fn, step_size, rule, mh_stats(0), chol=chol)

