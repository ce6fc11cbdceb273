"""Metropolis–Hastings with a uniform proposal over the hypercube of radius r
(Rhodes & Gutmann 2022, App. G, "MH-uniform").

Every coordinate's value index moves to a uniform draw from {c_i − r, …, c_i + r}
clipped to the value set, independently (the current value included). At the edges of
the value set the box is smaller, so q is not symmetric: the MH test carries the
Hastings correction Σ_i log n_i(s) − Σ_i log n_i(s'), n_i the box size per coordinate.
On Categorical spaces the box is over category indices. Gradient-free.
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp

from gradmc.base import SamplingAlgorithm, Target
from gradmc.discrete import proposal_mh
from gradmc import random
from gradmc.discrete.proposal_mh import DiscreteInfo, check_radius, check_space
from gradmc.registry import register_sampler
from gradmc.spaces import DiscreteSpace

__all__ = ["UniformState", "DiscreteInfo", "init", "build_kernel", "as_top_level_api"]


class UniformState(NamedTuple):
    position: jax.Array
    logdensity: jax.Array


def init(position, logdensity_fn: Callable) -> UniformState:
    position = jnp.asarray(position, jnp.result_type(float))
    return UniformState(position, logdensity_fn(position))


def _box(index, radius, k):
    """``(low, size)`` of the clipped boxes {c_i − r, …, c_i + r} of each coordinate."""
    low = jnp.maximum(index - radius, 0)
    return low, jnp.minimum(index + radius, k - 1) - low + 1


def build_kernel():
    """``kernel(key, state, logdensity_fn, space, radius=1)``."""

    def kernel(rng_key, state: UniformState, logdensity_fn: Callable, space: DiscreteSpace, radius=1):
        key_prop, key_mh = jax.random.split(rng_key)
        k = space.num_values
        index = space.to_index(state.position)
        low, size = _box(index, radius, k)
        # One 32-bit word per coordinate (gradmc.random.bits: both words of a threefry
        # block), reduced modulo the box size: relative bias below size / 2^32, far under
        # float32 resolution (jax.random.randint draws two words per value).
        offset = random.bits(key_prop, index.shape) % size.astype(jnp.uint32)
        new_index = low + offset.astype(jnp.int32)
        proposed = init(space.from_index(new_index), logdensity_fn)
        _, size_rev = _box(new_index, radius, k)
        log_correction = jnp.sum(jnp.log(size.astype(jnp.float32) / size_rev.astype(jnp.float32)))
        return proposal_mh.metropolis(key_mh, state, proposed, log_correction)

    return kernel


def as_top_level_api(logdensity_fn: Callable, space: DiscreteSpace, radius=1) -> SamplingAlgorithm:
    radius = check_radius(radius)
    kernel = build_kernel()
    return SamplingAlgorithm(
        lambda position, rng_key=None: init(position, logdensity_fn),
        lambda rng_key, state: kernel(rng_key, state, logdensity_fn, space, radius),
    )


@register_sampler("mh-uniform", "Metropolis-Hastings, uniform proposal on the hypercube of radius r (Rhodes & Gutmann 2022, App. G)", kind="discrete")
def build(target: Target, num_warmup: int, radius=1):
    """Options: ``radius`` r >= 1 (integer; 2 / 1 for poly2 / poly4 in the paper)."""
    del num_warmup
    space = check_space(target, "mh-uniform")
    radius = check_radius(radius)
    kernel = build_kernel()
    return proposal_mh.fixed_sampler(
        "mh-uniform",
        lambda position: init(position, target.logdensity_fn),
        lambda key, state, radius: kernel(key, state, target.logdensity_fn, space, radius),
        {"radius": radius},
        lambda state, info, params: proposal_mh.stats(
            state, info, num_grad_evals=0, extra={"radius": params["radius"].astype(jnp.float32)}
        ),
    )
