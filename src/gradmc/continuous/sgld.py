"""Stochastic gradient Langevin dynamics (textbook §5.5.1).

``x <- x + gamma (grad log p(x) + (n/K) sum_k grad log p(y_{i_k} | x)) + sqrt(2 gamma) V``
with K indices drawn uniformly with replacement from the n data, so the minibatch gradient
is unbiased. Needs a target with ``per_datum`` (prior + per-datum log-likelihood). Like ULA
it has no MH test; its stationary law is biased by the step size and by the minibatch
noise (see ``tests/continuous/test_continuous_samplers.py`` for the Gaussian formula).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from blackjax.base import build_sampling_algorithm

from gradmc.base import PerDatumModel, SamplingAlgorithm
from gradmc.checks import check_positive

__all__ = ["SGLDState", "SGLDInfo", "minibatch_logdensity", "init", "build_kernel", "as_top_level_api"]


class SGLDState(NamedTuple):
    """Position and the minibatch estimate of the log posterior there."""

    position: jax.Array
    logdensity: jax.Array  # prior + minibatch-scaled log-likelihood at ``position``


class SGLDInfo(NamedTuple):
    """Always 1 (no MH test), whether the move was kept (finite), and whether it was not."""

    acceptance_rate: jax.Array
    is_accepted: jax.Array
    nonfinite: jax.Array


def minibatch_logdensity(model: PerDatumModel, position, indices):
    """Unbiased estimate of the log posterior from the data at ``indices`` (the sum in §5.5.1's update).

    Parameters
    ----------
    model : PerDatumModel
        Prior, per-datum log-likelihood and data.
    position : array
        Where to evaluate.
    indices : int array
        The minibatch's data indices.
    """
    batch = jax.tree.map(lambda leaf: leaf[indices], model.data)
    loglik = jax.vmap(model.loglik_fn, in_axes=(None, 0))(position, batch)
    return model.logprior_fn(position) + model.num_data / indices.shape[0] * jnp.sum(loglik)


def init(position, model: PerDatumModel) -> SGLDState:
    """The state at ``position`` (its log density is filled in by the first step).

    Parameters
    ----------
    position : array
        The starting point.
    model : PerDatumModel
        The target, in the slot BlackJAX gives the log density.
    """
    del model
    return SGLDState(position, jnp.asarray(jnp.nan, jnp.float32))


def build_kernel(batch_size: int):
    """``kernel(key, state, model, step_size)``: one SGLD update (§5.5.1).

    Parameters
    ----------
    batch_size : int
        K, the number of data drawn (with replacement) per step.
    """

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
    """SGLD as a BlackJAX ``SamplingAlgorithm`` (the model takes the log density's place).

    Parameters
    ----------
    model : PerDatumModel
        Prior, per-datum log-likelihood and data.
    step_size : float
        gamma.
    batch_size : int
        K.
    """
    check_positive("step_size", step_size)
    check_positive("batch_size", batch_size, integer=True)
    return build_sampling_algorithm(build_kernel(int(batch_size)), init, model, kernel_args=(step_size,))
