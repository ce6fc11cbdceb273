"""Repelling-attracting Metropolis (Tak, Meng & van Dyk 2016/2018).

From x, with a symmetric Gaussian proposal q of scale ``step_size`` and
pi_e(x) = pi(x) + eps (eps = 1e-308, i.e. ``logaddexp(l, log eps)``):

1. downhill: x' ~ q(. | x), repeated until accepted w.p. min(1, pi_e(x) / pi_e(x'));
2. uphill: x* ~ q(. | x'), repeated until accepted w.p. min(1, pi_e(x*) / pi_e(x'));
3. auxiliary downhill: z ~ q(. | x*), repeated until accepted w.p. min(1, pi_e(x*) / pi_e(z));
4. accept x* w.p. min(1, pi(x*) min(1, pi_e(x)/pi_e(z)) / (pi(x) min(1, pi_e(x*)/pi_e(z)))).

The forced loops are ``lax.while_loop``s capped at ``max_tries`` proposals each; a capped
loop rejects the whole step and is flagged ``nonfinite`` (never seen at sane step sizes).
``stats.extra["num_evals"]`` counts log-density evaluations (no gradients are used).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from blackjax.base import build_sampling_algorithm

from gradmc.base import SamplingAlgorithm, mh_accept
from gradmc.pytrees import flat_view

__all__ = ["RAMState", "RAMInfo", "init", "build_kernel", "as_top_level_api"]

LOG_EPS = -708.0  # log(1e-308): the paper's eps


class RAMState(NamedTuple):
    """Position and its log density."""

    position: jax.Array
    logdensity: jax.Array


class RAMInfo(NamedTuple):
    """MH acceptance probability, acceptance, non-finite or capped step, and log-density evaluations."""

    acceptance_rate: jax.Array
    is_accepted: jax.Array
    nonfinite: jax.Array
    num_evals: jax.Array


def init(position, logdensity_fn) -> RAMState:
    """The state at ``position``.

    Parameters
    ----------
    position : array or pytree
        The starting point (a pytree moves as its flat vector, :mod:`gradmc.pytrees`).
    logdensity_fn : callable
        The unnormalised log density.
    """
    return RAMState(position, logdensity_fn(position))


def _forced(key, start, start_logdensity, logdensity_fn, step_size, log_accept_fn, max_tries):
    """Propose from N(start, step^2 I) until accepted w.p. exp(log_accept_fn(l(proposal)))."""

    def cond(carry):
        _, _, _, done, tries = carry
        return ~done & (tries < max_tries)

    def body(carry):
        key, y, ly, _, tries = carry
        key, k_prop, k_acc = jax.random.split(key, 3)
        y = start + step_size * jax.random.normal(k_prop, start.shape, start.dtype)
        ly = logdensity_fn(y)
        ly = jnp.where(jnp.isnan(ly), -jnp.inf, ly)
        done = jnp.log(jax.random.uniform(k_acc)) < jnp.minimum(log_accept_fn(ly), 0.0)
        return key, y, ly, done, tries + 1

    carry = (key, start, start_logdensity, jnp.zeros((), bool), jnp.zeros((), jnp.int32))
    _, y, ly, done, tries = jax.lax.while_loop(cond, body, carry)
    return y, ly, done, tries


def build_kernel(max_tries: int = 10_000):
    """``kernel(key, state, logdensity_fn, step_size)``: steps 1-4 of the module docstring.

    Parameters
    ----------
    max_tries : int
        The most proposals each forced loop makes before the step is rejected.
    """

    def kernel(rng_key, state: RAMState, logdensity_fn, step_size):
        k1, k2, k3, k_mh = jax.random.split(rng_key, 4)
        x, logdensity_fn, unravel = flat_view(state.position, logdensity_fn)
        lx = state.logdensity

        def le(logdensity):
            return jnp.logaddexp(logdensity, LOG_EPS)

        xd, lxd, ok1, n1 = _forced(k1, x, lx, logdensity_fn, step_size, lambda ly: le(lx) - le(ly), max_tries)
        xs, lxs, ok2, n2 = _forced(k2, xd, lxd, logdensity_fn, step_size, lambda ly: le(ly) - le(lxd), max_tries)
        _, lz, ok3, n3 = _forced(k3, xs, lxs, logdensity_fn, step_size, lambda ly: le(lxs) - le(ly), max_tries)
        log_ratio = lxs + jnp.minimum(0.0, le(lx) - le(lz)) - lx - jnp.minimum(0.0, le(lxs) - le(lz))
        capped = ~(ok1 & ok2 & ok3)
        accept, prob, nonfinite = mh_accept(k_mh, jnp.where(capped, -jnp.inf, log_ratio))
        new = jax.lax.cond(accept, lambda: RAMState(unravel(xs), lxs), lambda: state)
        return new, RAMInfo(prob, accept, nonfinite | capped, n1 + n2 + n3)

    return kernel


def as_top_level_api(logdensity_fn, step_size, max_tries: int = 10_000) -> SamplingAlgorithm:
    """RAM as a BlackJAX ``SamplingAlgorithm``.

    Parameters
    ----------
    logdensity_fn : callable
        The unnormalised log density.
    step_size : float
        The standard deviation of the Gaussian proposal q.
    max_tries : int
        The cap of each forced loop.
    """
    return build_sampling_algorithm(build_kernel(max_tries), init, logdensity_fn, kernel_args=(step_size,))
