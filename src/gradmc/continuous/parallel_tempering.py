"""Parallel tempering (Geyer 1991): K replicas on pi_beta_k ∝ gamma^beta_k, neighbour swaps.

One step = a local move of every replica (``vmap``; RWM or HMC at its own beta and step
size) followed by swap proposals between neighbours (k, k+1), accepted with probability
min(1, exp((beta_k - beta_{k+1}) (l(x_{k+1}) - l(x_k)))). The pairs alternate between even
and odd k from step to step (the deterministic even-odd scheme); each set of disjoint
swaps leaves the product of tempered targets invariant. The chain's position is replica
0 (beta = 1). Ladder: given (``betas`` or ``temperatures``, starting at 1) or geometric
(``num_temperatures``, ``beta_min``). During warm-up each replica's step size follows the
Robbins–Monro rule towards ``target_accept``; it is frozen afterwards.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from gradmc.adapt.step_size import check_positive
from gradmc.base import Sampler, Target, mh_accept, step_stats
from gradmc.continuous.tempering import TemperedPath, TemperedPoint, check_ladder, geometric_ladder, local_move
from gradmc.registry import register_sampler

__all__ = ["PTState", "resolve_ladder", "swap_neighbours", "build"]


class PTState(NamedTuple):
    replicas: TemperedPoint  # leading axis K
    step_sizes: jax.Array  # (K,)
    parity: jax.Array  # which neighbour pairs swap next: 0 -> (0,1),(2,3)...; 1 -> (1,2),...


def resolve_ladder(betas=None, temperatures=None, num_temperatures=5, beta_min=0.01) -> np.ndarray:
    """The ladder from ``betas``, ``temperatures`` (T = 1 / beta) or a geometric default."""
    if betas is not None and temperatures is not None:
        raise ValueError("give betas or temperatures, not both")
    if temperatures is not None:
        t = np.asarray(temperatures, np.float64)
        if np.any(t <= 0):
            raise ValueError(f"temperatures must be positive, got {t}")
        return check_ladder(1.0 / t)
    if betas is not None:
        return check_ladder(betas)
    return geometric_ladder(num_temperatures, beta_min)


def swap_neighbours(key, replicas: TemperedPoint, betas, parity):
    """Propose swaps for the disjoint neighbour pairs (k, k+1) with k % 2 == parity."""
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


@register_sampler("parallel-tempering", "parallel tempering: vmapped replicas on a temperature ladder, even-odd neighbour swaps")
def build(
    target: Target,
    num_warmup: int,
    betas=None,
    temperatures=None,
    num_temperatures=5,
    beta_min=0.01,
    local="rwm",
    step_size=None,
    num_leapfrog_steps=10,
    adapt=True,
    target_accept=None,
):
    """Options: the ladder (``betas`` | ``temperatures`` | ``num_temperatures`` +
    ``beta_min``); ``local`` in {"rwm", "hmc"}; ``step_size`` at beta = 1 (scalar; replica k
    starts at step_size / sqrt(beta_k)) or one per replica; ``adapt`` (per-replica
    Robbins–Monro in warm-up); ``target_accept`` (default 0.3 RWM, 0.7 HMC)."""
    ladder = jnp.asarray(resolve_ladder(betas, temperatures, num_temperatures, beta_min), jnp.float32)
    k = ladder.shape[0]
    move = local_move(local, num_leapfrog_steps)
    default_step = (2.38 if local == "rwm" else 1.0) / np.sqrt(target.dim)
    step0 = np.asarray(default_step if step_size is None else step_size, np.float64)
    if step0.ndim == 0:
        step0 = step0 / np.sqrt(np.asarray(ladder))
    if step0.shape != (k,):
        raise ValueError(f"step_size must be a scalar or one per replica ({k}), got shape {step0.shape}")
    check_positive("step_size", step0)
    target_accept = (0.3 if local == "rwm" else 0.7) if target_accept is None else float(target_accept)
    if not 0.0 < target_accept < 1.0:
        raise ValueError(f"target_accept must lie in (0, 1), got {target_accept}")
    path = TemperedPath(target.logdensity_fn)
    evals = 0 if local == "rwm" else int(num_leapfrog_steps) + 1  # gradient evaluations per move (RWM: none)

    def one_step(key, state: PTState):
        k_move, k_swap = jax.random.split(key)
        moved, prob, accepted, nonfinite = jax.vmap(move, in_axes=(0, 0, 0, None, 0))(
            jax.random.split(k_move, k), state.replicas, ladder, path, state.step_sizes
        )
        swapped, swap_rate = swap_neighbours(k_swap, moved, ladder, state.parity)
        new = PTState(swapped, state.step_sizes, 1 - state.parity)
        stats = step_stats(
            swapped.loglik[0], prob[0], accepted[0], state.step_sizes[0], evals * k,
            nonfinite=jnp.any(nonfinite), extra={"swap_rate": swap_rate, "mean_local_accept": jnp.mean(prob)},
        )
        return new, stats, prob

    def init(key, position):
        del key
        points = jax.vmap(path.point)(jnp.broadcast_to(position, (k, *position.shape)))
        return PTState(points, jnp.asarray(step0, jnp.float32), jnp.zeros((), jnp.int32))

    def warmup_step(key, state, t):
        del t
        new, stats, prob = one_step(key, state)
        if adapt:
            sizes = state.step_sizes * (1.0 + 0.01 * (jnp.nan_to_num(prob) - target_accept) / target_accept)
            new = new._replace(step_sizes=sizes)
        return new, stats

    def finalize(state):
        return state, {"step_sizes": state.step_sizes, "betas": ladder}

    def step(key, state, params):
        new, stats, _ = one_step(key, state._replace(step_sizes=params["step_sizes"]))
        return new, stats

    def position(state):
        return state.replicas.position[0]

    return Sampler("parallel-tempering", init, warmup_step, finalize, step, position)
