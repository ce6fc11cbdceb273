"""Metropolis–Hastings with a uniform proposal over the hypercube of radius r
(Rhodes & Gutmann 2022, App. G, "MH-uniform").

Every coordinate's value index moves to a uniform draw from {c_i − r, …, c_i + r}
clipped to the value set, independently (the current value included). At the edges of
the value set the box is smaller, so q is not symmetric: the MH test carries the
Hastings correction Σ_i log n_i(s) − Σ_i log n_i(s'), n_i the box size per coordinate.
On Categorical spaces the box is over category indices. Gradient-free.

With a move probability p < 1 each coordinate joins the move independently with
probability p and the others keep their values; the set of moving coordinates does not
depend on the state, so it is the same in the reverse move and the correction is the
same sum (a coordinate that keeps its value has the same box both ways). p = 1 is the
paper's proposal. On two-valued coordinates (binary models) r = 1 already spans every
value, so p is the only way to make the move smaller.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
from blackjax.base import build_sampling_algorithm

from gradmc import random
from gradmc.base import SamplingAlgorithm
from gradmc.checks import check_move_probability, check_radius, is_concrete
from gradmc.discrete import proposals
from gradmc.discrete.proposals import DiscreteInfo, ValueState
from gradmc.spaces import DiscreteSpace

__all__ = [
    "ValueState",
    "DiscreteInfo",
    "init",
    "build_kernel",
    "is_partial",
    "as_top_level_api",
]

init = proposals.init_value


def _box(index, radius, k):
    """``(low, size)`` of the clipped boxes {c_i − r, …, c_i + r} of each coordinate."""
    low = jnp.maximum(index - radius, 0)
    return low, jnp.minimum(index + radius, k - 1) - low + 1


def build_kernel(partial: bool = False):
    """``kernel(key, state, logdensity_fn, space, radius=1, move_probability=1.0) -> (ValueState, DiscreteInfo)``.

    Parameters
    ----------
    partial : bool
        False: every coordinate moves (the paper's proposal; ``move_probability`` is
        ignored). True: each coordinate moves with probability ``move_probability``.
        ``radius`` and ``move_probability`` may be traced (a warm-up adapts them).
    """

    def kernel(
        rng_key, state: ValueState, logdensity_fn: Callable, space: DiscreteSpace, radius=1, move_probability=1.0
    ):
        key_prop, key_moving, key_mh = jax.random.split(rng_key, 3)
        k = space.num_values
        index = space.to_index(state.position)
        low, size = _box(index, radius, k)
        # One 32-bit word per coordinate (gradmc.random.bits: both words of a threefry
        # block), reduced modulo the box size: relative bias below size / 2^32, far under
        # float32 resolution (jax.random.randint draws two words per value).
        offset = random.bits(key_prop, index.shape) % size.astype(jnp.uint32)
        new_index = low + offset.astype(jnp.int32)
        if partial:
            new_index = jnp.where(random.uniform(key_moving, index.shape) < move_probability, new_index, index)
        proposed = init(space.from_index(new_index), logdensity_fn)
        _, size_rev = _box(new_index, radius, k)
        # a coordinate that keeps its value has the same box both ways: its term is 0
        log_correction = jnp.sum(jnp.log(size.astype(jnp.float32) / size_rev.astype(jnp.float32)))
        return proposals.metropolis(key_mh, state, proposed, log_correction)

    return kernel


def is_partial(move_probability) -> bool:
    """Whether a move probability may be below 1 (a traced one may), i.e. needs ``build_kernel(partial=True)``."""
    return not is_concrete(move_probability) or float(move_probability) < 1.0


def as_top_level_api(
    logdensity_fn: Callable, space: DiscreteSpace, radius=1, move_probability=1.0
) -> SamplingAlgorithm:
    """BlackJAX-style ``SamplingAlgorithm`` of MH-uniform.

    Parameters
    ----------
    logdensity_fn : callable
        The target's log density f.
    space : gradmc.spaces.DiscreteSpace
        The target's space.
    radius : int
        r ≥ 1, the half-width of the box.
    move_probability : float
        p in (0, 1], the probability that a coordinate moves (1: all of them, the paper's).
    """
    move_probability = check_move_probability(move_probability)
    kernel = build_kernel(is_partial(move_probability))
    kernel_args = (space, check_radius(radius), move_probability)
    return build_sampling_algorithm(kernel, init, logdensity_fn, kernel_args=kernel_args)
