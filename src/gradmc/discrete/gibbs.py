"""Single-site Gibbs sampler with random or systematic (deterministic) scan.

One step updates one coordinate i from its exact full conditional
p(s_i = v | s_{−i}) ∝ exp f(s with s_i = v), found by evaluating the log density at all
k values of coordinate i at once (``vmap``). ``scan="random"`` picks i uniformly;
``scan="systematic"`` visits 0, 1, …, d−1, 0, … (d steps make one sweep). Values whose
log density is NaN/+inf get probability 0 and the step is flagged ``nonfinite``.
Gradient-free; acceptance is 1.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
from blackjax.base import build_sampling_algorithm

from gradmc.base import SamplingAlgorithm
from gradmc.discrete.proposals import DiscreteInfo, l1_jump, sample_logits
from gradmc.spaces import DiscreteSpace

__all__ = ["GibbsState", "DiscreteInfo", "init", "build_kernel", "as_top_level_api", "check_scan", "SCANS"]

SCANS = ("random", "systematic")


class GibbsState(NamedTuple):
    """Position s, log density f(s) and the number of steps taken."""

    position: jax.Array
    logdensity: jax.Array
    counter: jax.Array  # steps taken: the systematic scan updates coordinate counter mod d


def init(position, logdensity_fn: Callable) -> GibbsState:
    """State at ``position`` with its log density and a step counter of 0.

    Parameters
    ----------
    position : array_like
        A position of the space.
    logdensity_fn : callable
        The target's log density f.
    """
    position = jnp.asarray(position, jnp.result_type(float))
    return GibbsState(position, logdensity_fn(position), jnp.zeros((), jnp.int32))


def check_scan(scan: str) -> str:
    """``scan`` after checking it is one of :data:`SCANS`.

    Parameters
    ----------
    scan : str
        "random" or "systematic".
    """
    if scan not in SCANS:
        raise ValueError(f"scan must be one of {SCANS}, got {scan!r}")
    return scan


def build_kernel(scan: str = "random"):
    """``kernel(key, state, logdensity_fn, space) -> (GibbsState, DiscreteInfo)``.

    Parameters
    ----------
    scan : {"random", "systematic"}
        Which coordinate a step updates: uniformly random, or 0, 1, …, d−1 in turn.
    """
    check_scan(scan)

    def kernel(rng_key, state: GibbsState, logdensity_fn: Callable, space: DiscreteSpace):
        key_site, key_value = jax.random.split(rng_key)
        if scan == "random":
            site = jax.random.randint(key_site, (), 0, space.d)
        else:
            site = state.counter % space.d
        values = jnp.asarray(space.values, state.position.dtype)
        candidates = jax.vmap(lambda v: state.position.at[site].set(v))(values)
        logits = jax.vmap(logdensity_fn)(candidates)
        bad = jnp.isnan(logits) | (logits == jnp.inf)
        logits = jnp.where(bad, -jnp.inf, logits)
        any_valid = jnp.any(jnp.isfinite(logits))
        current = space.to_index(state.position[site])
        value = jnp.where(any_valid, sample_logits(key_value, logits), current)
        new = GibbsState(
            candidates[value],
            jnp.where(any_valid, logits[value], state.logdensity),
            state.counter + 1,
        )
        jump = l1_jump(new.position, state.position)
        info = DiscreteInfo(jnp.float32(1.0), jnp.bool_(True), jnp.any(bad), jnp.float32(0.0), jump)
        return new, info

    return kernel


def as_top_level_api(logdensity_fn: Callable, space: DiscreteSpace, scan: str = "random") -> SamplingAlgorithm:
    """BlackJAX-style ``SamplingAlgorithm`` of single-site Gibbs.

    Parameters
    ----------
    logdensity_fn : callable
        The target's log density f.
    space : gradmc.spaces.DiscreteSpace
        The target's space.
    scan : {"random", "systematic"}
        Which coordinate a step updates.
    """
    return build_sampling_algorithm(build_kernel(scan), init, logdensity_fn, kernel_args=(space,))
