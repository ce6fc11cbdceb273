"""Simulated tempering (Marinari & Parisi 1992): one chain on (x, k), k indexing a ladder.

The joint target is pi(x, k) ∝ gamma(x)^beta_k exp(c_k). One step = a local move of x at
beta_k (RWM or HMC, step size scaled by 1/sqrt(beta_k)), then a proposal k' = k ± 1
(uniform; off-ladder proposals rejected), accepted with probability
min(1, exp((beta_k' - beta_k) l(x) + c_k' - c_k)). The pseudo-prior weights c_k are learnt
in warm-up by the Wang–Landau rule c_k <- c_k - gamma_t (1[k_t = k] - 1/K)
(:func:`wang_landau_update`), which drives the ladder towards uniform occupation, and
frozen afterwards.

The position is x at every step; the draws of the target are those with
``stats["temperature_index"] == 0``, or all of them weighted by
``stats["log_weight"]`` = log P(k = 0 | x) (:func:`log_weight`: importance tempering; see
:func:`gradmc.continuous.tempering.weighted_mean`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
from blackjax.base import build_sampling_algorithm

from gradmc.base import SamplingAlgorithm, mh_accept
from gradmc.continuous.tempering import TemperedPath, TemperedPoint, check_ladder, local_move

__all__ = ["STState", "STInfo", "log_weight", "wang_landau_update", "init", "build_kernel", "as_top_level_api"]


class STState(NamedTuple):
    """The point x, the temperature index k, the pseudo-prior c and the step size at beta = 1."""

    point: TemperedPoint
    index: jax.Array  # k
    log_pseudo_prior: jax.Array  # c, (K,)
    step_size: jax.Array  # at beta = 1


class STInfo(NamedTuple):
    """The local move's acceptance probability, acceptance, non-finite flag and step size."""

    acceptance_rate: jax.Array
    is_accepted: jax.Array
    nonfinite: jax.Array
    step_size: jax.Array


def log_weight(betas, loglik, log_pseudo_prior):
    """Log P(k = 0 | x) under the joint with pseudo-prior c.

    Parameters
    ----------
    betas : array
        The ladder, shape (K,).
    loglik : float
        l(x).
    log_pseudo_prior : array
        c, shape (K,).
    """
    levels = betas * loglik + log_pseudo_prior
    return levels[0] - jax.nn.logsumexp(levels)


def wang_landau_update(log_pseudo_prior, index, t, rate):
    """C <- c - gamma_t (1[k_t = k] - 1/K) with gamma_t = rate K / (K + t).

    Parameters
    ----------
    log_pseudo_prior : array
        c, shape (K,).
    index : int
        k_t, the current temperature index.
    t : int
        The warm-up step.
    rate : float
        gamma_0.
    """
    k = log_pseudo_prior.shape[0]
    gamma = rate * k / (k + t)
    visits = jax.nn.one_hot(index, k) - 1.0 / k
    return log_pseudo_prior - gamma * visits


def init(position, logdensity_fn: Callable, num_temperatures: int, step_size, log_pseudo_prior=None) -> STState:
    """The state at ``position`` on the target (k = 0).

    Parameters
    ----------
    position : array
        The starting point.
    logdensity_fn : callable
        The target's l(x).
    num_temperatures : int
        K.
    step_size : float
        The local move's step size at beta = 1.
    log_pseudo_prior : array_like, optional
        c (zeros when omitted).
    """
    c = (
        jnp.zeros(num_temperatures, jnp.float32)
        if log_pseudo_prior is None
        else jnp.asarray(log_pseudo_prior, jnp.float32)
    )
    return STState(
        TemperedPath(logdensity_fn).point(position), jnp.zeros((), jnp.int32), c, jnp.asarray(step_size, jnp.float32)
    )


def build_kernel(local: str = "rwm", num_leapfrog_steps: int = 10):
    """``kernel(key, state, logdensity_fn, betas) -> (STState, STInfo)``: a local move of x, then a move of k.

    Parameters
    ----------
    local : {"rwm", "hmc"}
        The local move.
    num_leapfrog_steps : int
        Leapfrog steps of an HMC move.
    """
    move = local_move(local, num_leapfrog_steps)

    def kernel(rng_key, state: STState, logdensity_fn, betas):
        k = betas.shape[0]
        k_move, k_dir, k_acc = jax.random.split(rng_key, 3)
        beta = betas[state.index]
        step_size = state.step_size / jnp.sqrt(beta)
        point, prob, accepted, nonfinite = move(k_move, state.point, beta, TemperedPath(logdensity_fn), step_size)
        proposal = state.index + jnp.where(jax.random.bernoulli(k_dir), 1, -1)
        inside = (proposal >= 0) & (proposal < k)
        safe = jnp.clip(proposal, 0, k - 1)
        c = state.log_pseudo_prior
        log_ratio = (betas[safe] - beta) * point.loglik + c[safe] - c[state.index]
        accept, _, _ = mh_accept(k_acc, jnp.where(inside, log_ratio, -jnp.inf))
        index = jnp.where(accept, safe, state.index)
        return STState(point, index, c, state.step_size), STInfo(prob, accepted, nonfinite, step_size)

    return kernel


def as_top_level_api(
    logdensity_fn: Callable, betas, step_size, log_pseudo_prior=None, local: str = "rwm", num_leapfrog_steps: int = 10
) -> SamplingAlgorithm:
    """Simulated tempering as a BlackJAX ``SamplingAlgorithm`` (fixed c and step size).

    Parameters
    ----------
    logdensity_fn : callable
        The target's l(x).
    betas : array_like
        The ladder, from 1 down.
    step_size : float
        The local move's step size at beta = 1.
    log_pseudo_prior : array_like, optional
        c (zeros when omitted).
    local, num_leapfrog_steps
        As in :func:`build_kernel`.
    """
    ladder = jnp.asarray(check_ladder(betas), jnp.float32)
    init_args = (ladder.shape[0], step_size, log_pseudo_prior)
    return build_sampling_algorithm(
        build_kernel(local, num_leapfrog_steps), init, logdensity_fn, init_args=init_args, kernel_args=(ladder,)
    )
