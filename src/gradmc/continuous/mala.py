"""Langevin kernels: MALA (optionally preconditioned) and ULA (the same move, no MH test).

Textbook eq. (5.7)-(5.8) with a constant preconditioner M = L L^T:
``y = x + gamma M grad log pi(x) + sqrt(2 gamma) L eps``, i.e. the proposal
N(x + gamma M g(x), 2 gamma M) (the chapter prints the covariance as sqrt(2 gamma) I; it is
2 gamma I). MALA accepts with the Metropolis–Hastings ratio of that asymmetric proposal;
ULA keeps every finite proposal, so its stationary law is biased (on N(mu, s^2) its
variance is 2 s^4 / (2 s^2 - gamma)). The position may be a pytree (:mod:`gradmc.pytrees`):
the move is made on its flat vector, with M acting on that vector.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
from blackjax.base import build_sampling_algorithm
from jax.scipy.linalg import solve_triangular

from gradmc.base import SamplingAlgorithm, mh_accept
from gradmc.checks import check_positive
from gradmc.continuous.rwm import RWMInfo
from gradmc.linalg import cholesky_factor
from gradmc.pytrees import flat_view, ravel

__all__ = ["MALAState", "MALAInfo", "init", "build_kernel", "as_top_level_api"]


class MALAState(NamedTuple):
    """Position, its log density and the gradient of the log density."""

    position: jax.Array
    logdensity: jax.Array
    logdensity_grad: jax.Array


#: MH acceptance probability, whether the proposal was accepted, and whether it was non-finite (RWM's fields)
MALAInfo = RWMInfo


def init(position, logdensity_fn: Callable) -> MALAState:
    """The state at ``position``.

    Parameters
    ----------
    position : array or pytree
        The starting point.
    logdensity_fn : callable
        The unnormalised log density (differentiable).
    """
    logdensity, grad = jax.value_and_grad(logdensity_fn)(position)
    return MALAState(position, logdensity, grad)


def build_kernel(metropolis: bool = True):
    """``kernel(key, state, logdensity_fn, step_size, chol=None)``: one step of eq. (5.7)-(5.8), ``chol`` is L.

    Parameters
    ----------
    metropolis : bool
        Apply the MH test (MALA); ``False`` gives ULA, which keeps every proposal with a
        finite log density and gradient.
    """

    def precondition(g, chol):
        return g if chol is None else chol @ (chol.T @ g)

    def kernel(rng_key, state: MALAState, logdensity_fn, step_size, chol=None):
        key_prop, key_mh = jax.random.split(rng_key)
        x, flat_logdensity_fn, unravel = flat_view(state.position, logdensity_fn)
        g = ravel(state.logdensity_grad)
        eps = jax.random.normal(key_prop, x.shape, x.dtype)
        noise = eps if chol is None else chol @ eps
        y = x + step_size * precondition(g, chol) + jnp.sqrt(2.0 * step_size) * noise
        logdensity_y, grad_y = jax.value_and_grad(flat_logdensity_fn)(y)
        finite = jnp.isfinite(logdensity_y) & jnp.all(jnp.isfinite(grad_y))
        if metropolis:
            backward = x - y - step_size * precondition(grad_y, chol)
            whitened = backward if chol is None else solve_triangular(chol, backward, lower=True)
            log_q_ratio = -jnp.sum(whitened**2) / (4.0 * step_size) + 0.5 * jnp.sum(eps**2)
            log_ratio = jnp.where(finite, logdensity_y - state.logdensity + log_q_ratio, jnp.nan)
            accept, prob, nonfinite = mh_accept(key_mh, log_ratio)
        else:
            accept, prob, nonfinite = finite, jnp.ones(()), ~finite
        new_state = jax.lax.cond(accept, lambda: MALAState(unravel(y), logdensity_y, unravel(grad_y)), lambda: state)
        return new_state, MALAInfo(prob, accept, nonfinite)

    return kernel


def as_top_level_api(logdensity_fn: Callable, step_size, preconditioner=None, metropolis=True) -> SamplingAlgorithm:
    """MALA (or ULA) as a BlackJAX ``SamplingAlgorithm``.

    Use: ``alg = as_top_level_api(f, 0.1); alg.step(key, alg.init(x))``.

    Parameters
    ----------
    logdensity_fn : callable
        The unnormalised log density (differentiable).
    step_size : float
        gamma in eq. (5.7).
    preconditioner : array, optional
        The constant preconditioner M (identity when omitted).
    metropolis : bool
        MALA (``True``) or ULA (``False``).
    """
    check_positive("step_size", step_size)
    chol = None if preconditioner is None else cholesky_factor(preconditioner, "MALA preconditioner")
    return build_sampling_algorithm(build_kernel(metropolis), init, logdensity_fn, kernel_args=(step_size, chol))
