"""Blocked Gibbs for conditionally independent discrete sites (a plate of latent labels).

When the log density splits as f(s) = Σ_n g_n(s_n) + c, each g_n depending on site n alone
(given the other blocks of a mixed model: a mixture's assignments z_n beside its component
parameters), the sites are independent given everything else and

    p(s_n = v | rest) ∝ exp g_n(v).

The target supplies the *site terms* (g_1(s_1), ..., g_d(s_d)) as a function of the
position (``site_terms_fn``; :func:`gradmc.from_numpyro` builds it from a NumPyro plate).
Setting every site to the same value v gives the column g_n(v) for all n at once, so one
step evaluates the terms at the k values (``vmap``), draws every site from its exact
conditional and evaluates f once at the new position: k + 1 evaluations for all d sites,
where single-site Gibbs (:mod:`gradmc.discrete.gibbs`) spends k on one site. Values whose
term is NaN/+inf get probability 0 and the step is flagged ``nonfinite``. Rejection-free:
acceptance is 1.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
from blackjax.base import build_sampling_algorithm

from gradmc.base import SamplingAlgorithm
from gradmc.discrete.proposals import DiscreteInfo, ValueState, init_value, l1_jump, sample_logits
from gradmc.spaces import DiscreteSpace

__all__ = ["SITE_TERMS", "ValueState", "DiscreteInfo", "init", "check_space", "build_kernel", "as_top_level_api"]

#: The key of ``Target.metadata`` holding the site terms: for a target on one discrete space,
#: ``site_terms_fn(position) -> (d,)``; for a target on a Product space, a dict from a
#: discrete part's name to ``site_terms_fn(full position) -> (size of the part,)``.
SITE_TERMS = "site_terms"

init = init_value


def check_space(space: DiscreteSpace) -> DiscreteSpace:
    """``space`` after checking its sites are scalar (Binary, Spin, Ordinal; not one-hot rows).

    Parameters
    ----------
    space : gradmc.spaces.DiscreteSpace
        The block's space.
    """
    if space.values.ndim != 1:
        raise ValueError(f"plate-gibbs draws scalar sites (Binary, Spin, Ordinal), not one-hot rows: got {space}")
    return space


def build_kernel():
    """``kernel(key, state, logdensity_fn, site_terms_fn, space) -> (ValueState, DiscreteInfo)``."""

    def kernel(rng_key, state: ValueState, logdensity_fn: Callable, site_terms_fn: Callable, space: DiscreteSpace):
        values = jnp.asarray(space.values, state.position.dtype)
        table = jax.vmap(lambda v: site_terms_fn(jnp.full(state.position.shape, v)))(values)  # (k, d): g_n(v)
        bad = jnp.isnan(table) | (table == jnp.inf)
        logits = jnp.where(bad, -jnp.inf, table).T  # (d, k)
        valid = jnp.any(jnp.isfinite(logits), axis=-1)
        index = jnp.where(valid, sample_logits(rng_key, logits), space.to_index(state.position))
        position = values[index]
        new = ValueState(position, logdensity_fn(position))
        info = DiscreteInfo(
            jnp.float32(1.0), jnp.bool_(True), jnp.any(bad), jnp.float32(0.0), l1_jump(position, state.position)
        )
        return new, info

    return kernel


def as_top_level_api(logdensity_fn: Callable, site_terms_fn: Callable, space: DiscreteSpace) -> SamplingAlgorithm:
    """BlackJAX-style ``SamplingAlgorithm`` of the blocked Gibbs step.

    Parameters
    ----------
    logdensity_fn : callable
        The target's log density f.
    site_terms_fn : callable
        ``site_terms_fn(position) -> (d,)``: the terms g_n(s_n) of f, one per site.
    space : gradmc.spaces.DiscreteSpace
        The target's space (scalar sites).
    """
    return build_sampling_algorithm(
        build_kernel(), init, logdensity_fn, kernel_args=(site_terms_fn, check_space(space))
    )
