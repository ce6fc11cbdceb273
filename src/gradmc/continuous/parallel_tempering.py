"""Parallel tempering (Geyer 1991): K replicas on pi_beta_k ∝ gamma^beta_k, neighbour swaps.

One step = a local move of every replica (``vmap``; RWM or HMC at its own beta and step
size) followed by swap proposals between neighbours (k, k+1), accepted with probability
min(1, exp((beta_k - beta_{k+1}) (l(x_{k+1}) - l(x_k)))). The pairs alternate between even
and odd k from step to step (the deterministic even-odd scheme); each set of disjoint
swaps leaves the product of tempered targets invariant. The chain's position is replica
0 (beta = 1). Ladder: given (``betas`` or ``temperatures``, starting at 1) or geometric
(``num_temperatures``, ``beta_min``); see :func:`gradmc.continuous.tempering.resolve_ladder`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
from blackjax.base import build_sampling_algorithm

from gradmc.base import SamplingAlgorithm, mh_accept
from gradmc.continuous.tempering import TemperedPath, TemperedPoint, check_ladder, local_move, resolve_ladder

__all__ = ["PTState", "PTInfo", "resolve_ladder", "swap_neighbours", "init", "build_kernel", "as_top_level_api"]


class PTState(NamedTuple):
    """The replicas (leading axis K), their step sizes, and which neighbour pairs swap next."""

    replicas: TemperedPoint  # leading axis K
    step_sizes: jax.Array  # (K,)
    parity: jax.Array  # which neighbour pairs swap next: 0 -> (0,1),(2,3)...; 1 -> (1,2),...


class PTInfo(NamedTuple):
    """Per replica: the local move's acceptance probability, acceptance, non-finite flag; the swap rate."""

    acceptance_rate: jax.Array  # (K,)
    is_accepted: jax.Array  # (K,)
    nonfinite: jax.Array  # (K,)
    swap_rate: jax.Array


def swap_neighbours(key, replicas: TemperedPoint, betas, parity):
    """Propose swaps for the disjoint neighbour pairs (k, k+1) with k % 2 == parity.

    Parameters
    ----------
    key : PRNGKey
        The swaps' key.
    replicas : TemperedPoint
        The replicas, leading axis K.
    betas : array
        The ladder, shape (K,).
    parity : int
        0: pairs (0, 1), (2, 3), ...; 1: pairs (1, 2), (3, 4), ...
    """
    k = betas.shape[0]
    log_ratio = (betas[:-1] - betas[1:]) * (replicas.loglik[1:] - replicas.loglik[:-1])
    accept, prob, _ = jax.vmap(mh_accept)(jax.random.split(key, k - 1), log_ratio)
    active = (jnp.arange(k - 1) % 2) == parity
    swap = accept & active
    take_next = jnp.concatenate([swap, jnp.zeros(1, bool)])  # replica j takes j+1's state
    take_prev = jnp.concatenate([jnp.zeros(1, bool), swap])  # replica j takes j-1's state
    idx = jnp.arange(k) + take_next.astype(jnp.int32) - take_prev.astype(jnp.int32)
    swapped = jax.tree.map(lambda a: a[idx], replicas)
    rate = jnp.sum(jnp.where(active, prob, 0.0)) / jnp.maximum(jnp.sum(active), 1)
    return swapped, rate


def init(position, logdensity_fn: Callable, betas, step_sizes) -> PTState:
    """Every replica at ``position``, even pairs to swap first.

    Parameters
    ----------
    position : array
        The starting point.
    logdensity_fn : callable
        The target's l(x).
    betas : array
        The ladder, shape (K,).
    step_sizes : float or array
        The local moves' step sizes, one or one per replica.
    """
    k = betas.shape[0]
    points = jax.vmap(TemperedPath(logdensity_fn).point)(jnp.broadcast_to(position, (k, *position.shape)))
    return PTState(points, jnp.broadcast_to(jnp.asarray(step_sizes, jnp.float32), (k,)), jnp.zeros((), jnp.int32))


def build_kernel(local: str = "rwm", num_leapfrog_steps: int = 10):
    """``kernel(key, state, logdensity_fn, betas) -> (PTState, PTInfo)``: local moves, then neighbour swaps.

    Parameters
    ----------
    local : {"rwm", "hmc"}
        The replicas' local move.
    num_leapfrog_steps : int
        Leapfrog steps of an HMC move.
    """
    move = local_move(local, num_leapfrog_steps)

    def kernel(rng_key, state: PTState, logdensity_fn, betas):
        k = betas.shape[0]
        k_move, k_swap = jax.random.split(rng_key)
        moved, prob, accepted, nonfinite = jax.vmap(move, in_axes=(0, 0, 0, None, 0))(
            jax.random.split(k_move, k), state.replicas, betas, TemperedPath(logdensity_fn), state.step_sizes
        )
        swapped, swap_rate = swap_neighbours(k_swap, moved, betas, state.parity)
        return PTState(swapped, state.step_sizes, 1 - state.parity), PTInfo(prob, accepted, nonfinite, swap_rate)

    return kernel


def as_top_level_api(
    logdensity_fn: Callable,
    betas,
    step_sizes,
    local: str = "rwm",
    num_leapfrog_steps: int = 10,
) -> SamplingAlgorithm:
    """Parallel tempering as a BlackJAX ``SamplingAlgorithm`` (fixed step sizes).

    Parameters
    ----------
    logdensity_fn : callable
        The target's l(x).
    betas : array_like
        The ladder, from 1 down.
    step_sizes : float or array_like
        The local moves' step sizes, one or one per replica.
    local, num_leapfrog_steps
        As in :func:`build_kernel`.
    """
    ladder = jnp.asarray(check_ladder(betas), jnp.float32)
    kernel = build_kernel(local, num_leapfrog_steps)
    return build_sampling_algorithm(kernel, init, logdensity_fn, init_args=(ladder, step_sizes), kernel_args=(ladder,))
