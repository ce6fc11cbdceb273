"""Langevin kernels: MALA (optionally preconditioned) and ULA (the same move, no MH test).

Textbook eq. (5.7)-(5.8) with a constant preconditioner M = L L^T:
``y = x + gamma M grad log pi(x) + sqrt(2 gamma) L eps``, i.e. the proposal
N(x + gamma M g(x), 2 gamma M) (the chapter prints the covariance as sqrt(2 gamma) I; it is
2 gamma I). MALA accepts with the Metropolis–Hastings ratio of that asymmetric proposal;
ULA keeps every finite proposal, so its stationary law is biased (on N(mu, s^2) its
variance is 2 s^4 / (2 s^2 - gamma)).
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
from jax.scipy.linalg import solve_triangular

from gradmc.adapt.step_size import check_positive, rule_by_name, step_size_sampler
from gradmc.base import SamplingAlgorithm, Target, mh_accept, mh_stats
from gradmc.linalg import cholesky_factor
from gradmc.registry import register_sampler

__all__ = ["MALAState", "MALAInfo", "init", "build_kernel", "as_top_level_api"]


class MALAState(NamedTuple):
    position: jax.Array
    logdensity: jax.Array
    logdensity_grad: jax.Array


class MALAInfo(NamedTuple):
    acceptance_rate: jax.Array
    is_accepted: jax.Array
    nonfinite: jax.Array


def init(position, logdensity_fn: Callable) -> MALAState:
    logdensity, grad = jax.value_and_grad(logdensity_fn)(position)
    return MALAState(position, logdensity, grad)


def build_kernel(metropolis: bool = True):
    """``kernel(key, state, logdensity_fn, step_size, chol=None)``; ``chol`` is L (M = L L^T).

    ``metropolis=False`` gives ULA: every proposal with a finite log density and
    gradient is kept.
    """

    def precondition(g, chol):
        return g if chol is None else chol @ (chol.T @ g)

    def kernel(rng_key, state: MALAState, logdensity_fn, step_size, chol=None):
        key_prop, key_mh = jax.random.split(rng_key)
        x, g = state.position, state.logdensity_grad
        eps = jax.random.normal(key_prop, x.shape, x.dtype)
        noise = eps if chol is None else chol @ eps
        y = x + step_size * precondition(g, chol) + jnp.sqrt(2.0 * step_size) * noise
        logdensity_y, grad_y = jax.value_and_grad(logdensity_fn)(y)
        finite = jnp.isfinite(logdensity_y) & jnp.all(jnp.isfinite(grad_y))
        if metropolis:
            backward = x - y - step_size * precondition(grad_y, chol)
            whitened = backward if chol is None else solve_triangular(chol, backward, lower=True)
            log_q_ratio = -jnp.sum(whitened**2) / (4.0 * step_size) + 0.5 * jnp.sum(eps**2)
            log_ratio = jnp.where(finite, logdensity_y - state.logdensity + log_q_ratio, jnp.nan)
            accept, prob, nonfinite = mh_accept(key_mh, log_ratio)
        else:
            accept, prob, nonfinite = finite, jnp.ones(()), ~finite
        new_state = jax.lax.cond(accept, lambda: MALAState(y, logdensity_y, grad_y), lambda: state)
        return new_state, MALAInfo(prob, accept, nonfinite)

    return kernel


def as_top_level_api(logdensity_fn: Callable, step_size, preconditioner=None, metropolis=True) -> SamplingAlgorithm:
    """``alg = as_top_level_api(logdensity_fn, 0.1); alg.step(key, alg.init(x))``."""
    check_positive("step_size", step_size)
    kernel = build_kernel(metropolis)
    chol = None if preconditioner is None else cholesky_factor(preconditioner, "MALA preconditioner")
    return SamplingAlgorithm(
        lambda position, rng_key=None: init(position, logdensity_fn),
        lambda rng_key, state: kernel(rng_key, state, logdensity_fn, step_size, chol),
    )



@register_sampler("mala", "Metropolis-adjusted Langevin, optional constant preconditioner; step size adapted in warm-up")
def build(target: Target, num_warmup: int, step_size=None, preconditioner=None, target_accept=0.574, adapt="dual_averaging"):
    """Options: ``step_size`` gamma (default 0.5/d^(1/3)), ``preconditioner`` M,
    ``target_accept``, ``adapt`` in {"dual_averaging", "robbins_monro", None}."""
    chol = None if preconditioner is None else cholesky_factor(preconditioner, "MALA preconditioner", target.dim)
    step_size = 0.5 / target.dim ** (1 / 3) if step_size is None else step_size
    rule = rule_by_name(adapt, target_accept)
    return step_size_sampler("mala", init, build_kernel(), target.logdensity_fn, step_size, rule, mh_stats(1), chol=chol)


@register_sampler("ula", "unadjusted Langevin (MALA's move without the MH test); fixed step size, biased")
def build_ula(target: Target, num_warmup: int, step_size=0.01, preconditioner=None):
    """Options: ``step_size`` gamma (fixed; the bias grows with it), ``preconditioner`` M."""
    chol = None if preconditioner is None else cholesky_factor(preconditioner, "ULA preconditioner", target.dim)
    return step_size_sampler("ula", init, build_kernel(False), target.logdensity_fn, step_size, None, mh_stats(1), chol=chol)
