"""Random-walk Metropolis with an isotropic or full-covariance Gaussian proposal.

Proposal ``y = x + h L eps``, ``eps ~ N(0, I)``, ``L L^T = cov`` (identity when no
covariance is given); accepted with probability min(1, pi(y)/pi(x)) (Metropolis et al.
1953, the acceptance ratio of a symmetric proposal). Non-finite log densities at ``y`` are
rejected and flagged. The position may be a pytree (:mod:`gradmc.pytrees`): the move is
made on its flat vector.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
from blackjax.base import build_sampling_algorithm

from gradmc.base import SamplingAlgorithm, mh_accept
from gradmc.linalg import cholesky_factor
from gradmc.pytrees import flat_view

__all__ = ["RWMState", "RWMInfo", "init", "build_kernel", "as_top_level_api"]


class RWMState(NamedTuple):
    """Position and its log density."""

    position: jax.Array
    logdensity: jax.Array


class RWMInfo(NamedTuple):
    """MH acceptance probability, whether the proposal was accepted, and whether it was non-finite."""

    acceptance_rate: jax.Array
    is_accepted: jax.Array
    nonfinite: jax.Array


def init(position, logdensity_fn: Callable) -> RWMState:
    """The state at ``position``.

    Parameters
    ----------
    position : array or pytree
        The starting point.
    logdensity_fn : callable
        The unnormalised log density.
    """
    return RWMState(position, logdensity_fn(position))


def build_kernel():
    """``kernel(key, state, logdensity_fn, step_size, chol=None)``: one RWM step, ``chol`` is L."""

    def kernel(rng_key, state: RWMState, logdensity_fn, step_size, chol=None):
        key_prop, key_mh = jax.random.split(rng_key)
        x, flat_logdensity_fn, unravel = flat_view(state.position, logdensity_fn)
        eps = jax.random.normal(key_prop, x.shape, x.dtype)
        move = eps if chol is None else chol @ eps
        proposal = x + step_size * move
        new_logdensity = flat_logdensity_fn(proposal)
        accept, prob, nonfinite = mh_accept(key_mh, new_logdensity - state.logdensity)
        new_state = jax.lax.cond(accept, lambda: RWMState(unravel(proposal), new_logdensity), lambda: state)
        return new_state, RWMInfo(prob, accept, nonfinite)

    return kernel


def as_top_level_api(logdensity_fn: Callable, step_size, cov=None) -> SamplingAlgorithm:
    """RWM as a BlackJAX ``SamplingAlgorithm``: ``rwm = as_top_level_api(f, 0.5); rwm.step(key, rwm.init(x))``.

    Parameters
    ----------
    logdensity_fn : callable
        The unnormalised log density.
    step_size : float
        The scale h of the proposal.
    cov : array, optional
        The proposal covariance ``L L^T`` (identity when omitted).
    """
    chol = None if cov is None else cholesky_factor(cov, "RWM proposal covariance")
    return build_sampling_algorithm(build_kernel(), init, logdensity_fn, kernel_args=(step_size, chol))
