"""Simulated tempering (Marinari & Parisi 1992): one chain on (x, k), k indexing a ladder.

The joint target is pi(x, k) ∝ gamma(x)^beta_k exp(c_k). One step = a local move of x at
beta_k (RWM or HMC, step size scaled by 1/sqrt(beta_k)), then a proposal k' = k ± 1
(uniform; off-ladder proposals rejected), accepted with probability
min(1, exp((beta_k' - beta_k) l(x) + c_k' - c_k)). The pseudo-prior weights c_k are learnt
in warm-up by the Wang–Landau rule c_k <- c_k - gamma_t (1[k_t = k] - 1/K), which drives
the ladder towards uniform occupation, and frozen afterwards.

The position is x at every step; the draws of the target are those with
``stats["temperature_index"] == 0``, or all of them weighted by
``stats["log_weight"]`` = log P(k = 0 | x) (importance tempering; see
:func:`gradmc.continuous.tempering.weighted_mean`).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from gradmc.adapt.step_size import check_positive
from gradmc.base import Sampler, Target, mh_accept, step_stats
from gradmc.continuous.parallel_tempering import resolve_ladder
from gradmc.continuous.tempering import TemperedPath, TemperedPoint, local_move
from gradmc.registry import register_sampler

__all__ = ["STState", "build"]


class STState(NamedTuple):
    point: TemperedPoint
    index: jax.Array  # k
    log_pseudo_prior: jax.Array  # c, (K,)
    step_size: jax.Array  # at beta = 1


@register_sampler("simulated-tempering", "simulated tempering: temperature index as a state, Wang-Landau pseudo-prior in warm-up")
def build(
    target: Target,
    num_warmup: int,
    betas=None,
    temperatures=None,
    num_temperatures=10,
    beta_min=0.01,
    local="rwm",
    step_size=None,
    num_leapfrog_steps=10,
    adapt=True,
    target_accept=None,
    wang_landau_rate=1.0,
):
    """Options: the ladder (as in ``parallel-tempering``), ``local`` in {"rwm", "hmc"},
    ``step_size`` at beta = 1, ``adapt`` (Robbins–Monro step size and Wang–Landau c_k in
    warm-up), ``target_accept``, ``wang_landau_rate`` (gamma_0; gamma_t = gamma_0 K / (K + t))."""
    ladder = jnp.asarray(resolve_ladder(betas, temperatures, num_temperatures, beta_min), jnp.float32)
    k = ladder.shape[0]
    move = local_move(local, num_leapfrog_steps)
    step0 = (2.38 if local == "rwm" else 1.0) / np.sqrt(target.dim) if step_size is None else step_size
    check_positive("step_size", step0)
    check_positive("wang_landau_rate", wang_landau_rate)
    target_accept = (0.3 if local == "rwm" else 0.7) if target_accept is None else float(target_accept)
    if not 0.0 < target_accept < 1.0:
        raise ValueError(f"target_accept must lie in (0, 1), got {target_accept}")
    path = TemperedPath(target.logdensity_fn)
    evals = 0 if local == "rwm" else int(num_leapfrog_steps) + 1  # gradient evaluations per move (RWM: none)

    def log_weight(loglik, c):
        """log P(k = 0 | x) under the joint with pseudo-prior c."""
        levels = ladder * loglik + c
        return levels[0] - jax.nn.logsumexp(levels)

    def one_step(key, state: STState):
        k_move, k_dir, k_acc = jax.random.split(key, 3)
        beta = ladder[state.index]
        point, prob, accepted, nonfinite = move(k_move, state.point, beta, path, state.step_size / jnp.sqrt(beta))
        proposal = state.index + jnp.where(jax.random.bernoulli(k_dir), 1, -1)
        inside = (proposal >= 0) & (proposal < k)
        safe = jnp.clip(proposal, 0, k - 1)
        c = state.log_pseudo_prior
        log_ratio = (ladder[safe] - beta) * point.loglik + c[safe] - c[state.index]
        accept, _, _ = mh_accept(k_acc, jnp.where(inside, log_ratio, -jnp.inf))
        index = jnp.where(accept, safe, state.index)
        new = STState(point, index, c, state.step_size)
        stats = step_stats(
            point.loglik, prob, accepted, state.step_size / jnp.sqrt(beta), evals, nonfinite=nonfinite,
            extra={"temperature_index": index, "beta": ladder[index], "log_weight": log_weight(point.loglik, c)},
        )
        return new, stats, prob

    def init(key, position):
        del key
        return STState(path.point(position), jnp.zeros((), jnp.int32), jnp.zeros(k, jnp.float32), jnp.asarray(step0, jnp.float32))

    def warmup_step(key, state, t):
        new, stats, prob = one_step(key, state)
        if adapt:
            gamma = wang_landau_rate * k / (k + t)
            visits = jax.nn.one_hot(new.index, k) - 1.0 / k
            size = new.step_size * (1.0 + 0.01 * (jnp.nan_to_num(prob) - target_accept) / target_accept)
            new = new._replace(log_pseudo_prior=new.log_pseudo_prior - gamma * visits, step_size=size)
        return new, stats

    def finalize(state):
        return state, {"log_pseudo_prior": state.log_pseudo_prior, "step_size": state.step_size, "betas": ladder}

    def step(key, state, params):
        new, stats, _ = one_step(key, state._replace(log_pseudo_prior=params["log_pseudo_prior"], step_size=params["step_size"]))
        return new, stats

    def position(state):
        return state.point.position

    return Sampler("simulated-tempering", init, warmup_step, finalize, step, position)
