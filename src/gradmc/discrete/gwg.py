"""Gibbs-with-Gradients (Grathwohl et al. 2021; Rhodes & Gutmann 2022, eq. 6) and
ordinal-GWG (Rhodes & Gutmann 2022, App. G).

The proposal changes one coordinate: q(s' | s) ∝ exp(½∇f(s)ᵀ(s' − s)) over the states
s' ≠ s that differ from s in one coordinate i, with the new value index j within
``radius`` r of the current one, |j − c_i| ≤ r (ordinal-GWG: up to r states along one
axis). ``gwg`` is r = 1: a flip on Binary/Spin, a step to a neighbouring value on
Ordinal; on Categorical, GWG's Hamming ball of radius 1 is every other category of one
row (the radius has no meaning there). The logits of all d·k candidates come from one
gradient; the MH test uses the reverse proposal from s' (eq. 2).
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
from blackjax.base import build_sampling_algorithm

from gradmc.base import SamplingAlgorithm
from gradmc.checks import check_radius
from gradmc.discrete import proposals
from gradmc.discrete.proposals import DiscreteInfo, DiscreteState, sample_logits_scored
from gradmc.spaces import Categorical, DiscreteSpace

__all__ = ["DiscreteState", "DiscreteInfo", "init", "build_kernel", "as_top_level_api", "move_logits"]

init = proposals.init


def move_logits(position, grad, space: DiscreteSpace, radius) -> jax.Array:
    """Logits ``(d, m)`` of the moves, ½∇f(s)ᵀ(s' − s) of moving coordinate i by move j.

    Two-valued scalar spaces (Binary, Spin, two-point Ordinal): the one move per
    coordinate is the flip to v₀ + v₁ − s_i (m = 1). Otherwise move j sets the value
    index to j (m = k), −inf where not allowed (j = c_i, or |j − c_i| > r on ordered
    spaces).

    Parameters
    ----------
    position : jax.Array
        The current position s.
    grad : jax.Array
        ∇f(s).
    space : gradmc.spaces.DiscreteSpace
        The target's space.
    radius : int or jax.Array
        r, the largest move along an ordered axis.
    """
    if space.is_two_valued:
        v0, v1 = (float(v) for v in space.values)
        return (0.5 * grad * (v0 + v1 - 2.0 * position))[:, None]
    index = space.to_index(position)
    j = jnp.arange(space.num_values)
    if isinstance(space, Categorical):
        change = grad - jnp.take_along_axis(grad, index[:, None], axis=1)
        allowed = j != index[:, None]
    else:
        change = grad[:, None] * (jnp.asarray(space.values, grad.dtype) - position[:, None])
        distance = jnp.abs(j - index[:, None])
        allowed = (distance >= 1) & (distance <= radius)
    return jnp.where(allowed, 0.5 * change, -jnp.inf)


def build_kernel():
    """``kernel(key, state, logdensity_fn, space, radius=1) -> (DiscreteState, DiscreteInfo)``."""

    def kernel(rng_key, state: DiscreteState, logdensity_fn: Callable, space: DiscreteSpace, radius=1):
        key_prop, key_mh = jax.random.split(rng_key)
        logits = move_logits(state.position, state.grad, space, radius)
        m = logits.shape[1]
        # Flat (d·m,) logits: XLA's CPU reductions over a (d, 1) array are many times slower.
        flat, log_forward = sample_logits_scored(key_prop, logits.reshape(-1))
        site, move = flat // m, flat % m
        values = jnp.asarray(space.values, state.position.dtype)
        if m == 1:  # the flip; its reverse is the flip back
            new_value, back = values[0] + values[1] - state.position[site], 0
        else:  # move j sets value index j; the reverse move returns to the current index
            new_value, back = values[move], space.to_index(state.position[site])
        proposed = init(state.position.at[site].set(new_value), logdensity_fn)
        rev_logits = move_logits(proposed.position, proposed.grad, space, radius).reshape(-1)
        log_reverse = rev_logits[site * m + back] - jax.nn.logsumexp(rev_logits)
        return proposals.metropolis(key_mh, state, proposed, log_reverse - log_forward)

    return kernel


def as_top_level_api(logdensity_fn: Callable, space: DiscreteSpace, radius=1) -> SamplingAlgorithm:
    """BlackJAX-style ``SamplingAlgorithm`` of GWG (``radius`` 1) or ordinal-GWG.

    Parameters
    ----------
    logdensity_fn : callable
        The target's log density f.
    space : gradmc.spaces.DiscreteSpace
        The target's space.
    radius : int
        r ≥ 1, how far along its axis one coordinate may move (no meaning on Categorical).
    """
    return build_sampling_algorithm(build_kernel(), init, logdensity_fn, kernel_args=(space, check_radius(radius)))
