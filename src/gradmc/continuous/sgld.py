"""Stochastic gradient Langevin dynamics (textbook §5.5.1).

``x <- x + gamma (grad log p(x) + (n/K) sum_k grad log p(y_{i_k} | x)) + sqrt(2 gamma) V``
with K indices drawn uniformly with replacement from the n data, so the minibatch gradient
is unbiased. Needs a target with ``per_datum`` (prior + per-datum log-likelihood). Like ULA
it has no MH test; its stationary law is biased by the step size and by the minibatch
noise (see ``tests/test_continuous_samplers.py`` for the Gaussian formula).
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp

from gradmc.adapt.step_size import check_positive, step_size_sampler
from gradmc.base import PerDatumModel, SamplingAlgorithm, Target, mh_stats
from gradmc.registry import register_sampler

__all__ = ["SGLDState", "SGLDInfo", "init", "build_kernel", "as_top_level_api"]


class SGLDState(NamedTuple):
    position: jax.Array
    logdensity: jax.Array  # prior + minibatch-scaled log-likelihood at ``position``


class SGLDInfo(NamedTuple):
    acceptance_rate: jax.Array
    is_accepted: jax.Array
    nonfinite: jax.Array


def minibatch_logdensity(model: PerDatumModel, position, indices):
    """Unbiased estimate of the log posterior from the data at ``indices``."""
    batch = jax.tree.map(lambda leaf: leaf[indices], model.data)
    loglik = jax.vmap(model.loglik_fn, in_axes=(None, 0))(position, batch)
    return model.logprior_fn(position) + model.num_data / indices.shape[0] * jnp.sum(loglik)


def init(position, model: PerDatumModel) -> SGLDState:
    del model
    return SGLDState(position, jnp.asarray(jnp.nan, jnp.float32))


def build_kernel(batch_size: int):
    """``kernel(key, state, model, step_size)`` with minibatches of ``batch_size`` data."""

    def kernel(rng_key, state: SGLDState, model: PerDatumModel, step_size):
        key_batch, key_noise = jax.random.split(rng_key)
        indices = jax.random.randint(key_batch, (batch_size,), 0, model.num_data)
        value, grad = jax.value_and_grad(minibatch_logdensity, argnums=1)(model, state.position, indices)
        noise = jax.random.normal(key_noise, state.position.shape, state.position.dtype)
        proposal = state.position + step_size * grad + jnp.sqrt(2.0 * step_size) * noise
        finite = jnp.isfinite(value) & jnp.all(jnp.isfinite(proposal))
        new_state = jax.lax.cond(finite, lambda: SGLDState(proposal, value), lambda: state)
        return new_state, SGLDInfo(jnp.ones(()), finite, ~finite)

    return kernel


def as_top_level_api(model: PerDatumModel, step_size, batch_size: int) -> SamplingAlgorithm:
    check_positive("step_size", step_size)
    check_positive("batch_size", batch_size, integer=True)
    kernel = build_kernel(int(batch_size))
    return SamplingAlgorithm(
        lambda position, rng_key=None: init(position, model),
        lambda rng_key, state: kernel(rng_key, state, model, step_size),
    )



@register_sampler("sgld", "stochastic gradient Langevin dynamics: minibatch gradients of K data, fixed step, no MH test")
def build(target: Target, num_warmup: int, step_size=1e-3, batch_size=32):
    """Options: ``step_size`` gamma, ``batch_size`` K (drawn with replacement)."""
    if target.per_datum is None:
        raise ValueError(f"sgld needs a target with per-datum likelihood terms; {target.name!r} has none")
    check_positive("batch_size", batch_size, integer=True)
    kernel = build_kernel(int(batch_size))
    model = target.per_datum
    return step_size_sampler(
        "sgld", lambda x, _: init(x, model), lambda k, s, _, h: kernel(k, s, model, h), None, step_size, None, mh_stats(1)
    )
