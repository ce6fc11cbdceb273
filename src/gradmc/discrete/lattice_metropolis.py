"""Symmetric Metropolis on a lattice (Zhou & Tan 2025; the discrete-HAMS algorithm statement,
docs/discrete-hams.md §4).

One coordinate j, drawn uniformly, moves its value index by an offset k drawn uniformly
from {−r, …, r} (0 allowed); a move off the value set is rejected. The proposal is
symmetric, so the MH test needs no correction. Gradient-free.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
from blackjax.base import build_sampling_algorithm

from gradmc.base import SamplingAlgorithm
from gradmc.checks import check_radius
from gradmc.discrete import proposals
from gradmc.discrete.proposals import DiscreteInfo, ValueState
from gradmc.spaces import DiscreteSpace

__all__ = ["ValueState", "DiscreteInfo", "init", "build_kernel", "as_top_level_api"]

init = proposals.init_value


def build_kernel():
    """``kernel(key, state, logdensity_fn, space, radius) -> (ValueState, DiscreteInfo)``.

    ``radius`` r ≥ 1 may be traced (a search vmaps over it).
    """

    def kernel(rng_key, state: ValueState, logdensity_fn: Callable, space: DiscreteSpace, radius):
        key_j, key_k, key_mh = jax.random.split(rng_key, 3)
        index = space.to_index(state.position)
        j = jax.random.randint(key_j, (), 0, index.shape[0])
        new_index = index.at[j].add(jax.random.randint(key_k, (), -radius, radius + 1))
        inside = (new_index[j] >= 0) & (new_index[j] < space.num_values)
        proposed = init(space.from_index(jnp.clip(new_index, 0, space.num_values - 1)), logdensity_fn)
        return proposals.metropolis(key_mh, state, proposed, jnp.where(inside, 0.0, -jnp.inf))

    return kernel


def as_top_level_api(logdensity_fn: Callable, space: DiscreteSpace, radius=2) -> SamplingAlgorithm:
    """BlackJAX-style ``SamplingAlgorithm`` of the lattice Metropolis.

    Parameters
    ----------
    logdensity_fn : callable
        The target's log density f.
    space : gradmc.spaces.DiscreteSpace
        The target's space.
    radius : int
        r ≥ 1, the largest offset of a move.
    """
    return build_sampling_algorithm(build_kernel(), init, logdensity_fn, kernel_args=(space, check_radius(radius)))
