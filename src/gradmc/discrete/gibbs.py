"""Single-site Gibbs sampler with random or systematic (deterministic) scan.

One step updates one coordinate i from its exact full conditional
p(s_i = v | s_{−i}) ∝ exp f(s with s_i = v), found by evaluating the log density at all
k values of coordinate i at once (``vmap``). ``scan="random"`` picks i uniformly;
``scan="systematic"`` visits 0, 1, …, d−1, 0, … (d steps make one sweep). Values whose
log density is NaN/+inf get probability 0 and the step is flagged ``nonfinite``.
Gradient-free; acceptance is 1.
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp

from gradmc.base import SamplingAlgorithm, Target
from gradmc.discrete import proposal_mh
from gradmc.discrete.proposal_mh import DiscreteInfo, check_space, l1_jump
from gradmc.registry import register_sampler
from gradmc.spaces import DiscreteSpace, sample_logits

__all__ = ["GibbsState", "DiscreteInfo", "init", "build_kernel", "as_top_level_api", "SCANS"]

SCANS = ("random", "systematic")


class GibbsState(NamedTuple):
    position: jax.Array
    logdensity: jax.Array
    counter: jax.Array  # steps taken: the systematic scan updates coordinate counter mod d


def init(position, logdensity_fn: Callable) -> GibbsState:
    position = jnp.asarray(position, jnp.result_type(float))
    return GibbsState(position, logdensity_fn(position), jnp.zeros((), jnp.int32))


def _check_scan(scan: str) -> str:
    if scan not in SCANS:
        raise ValueError(f"scan must be one of {SCANS}, got {scan!r}")
    return scan


def build_kernel(scan: str = "random"):
    """``kernel(key, state, logdensity_fn, space)`` for ``scan`` in {"random", "systematic"}."""
    _check_scan(scan)

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
        info = DiscreteInfo(jnp.float32(1.0), jnp.bool_(True), jnp.any(bad), l1_jump(new.position, state.position))
        return new, info

    return kernel


def as_top_level_api(logdensity_fn: Callable, space: DiscreteSpace, scan: str = "random") -> SamplingAlgorithm:
    kernel = build_kernel(scan)
    return SamplingAlgorithm(
        lambda position, rng_key=None: init(position, logdensity_fn),
        lambda rng_key, state: kernel(rng_key, state, logdensity_fn, space),
    )


@register_sampler("gibbs", "single-site Gibbs from exact full conditionals, random or systematic scan (one coordinate per step)", kind="discrete")
def build(target: Target, num_warmup: int, scan: str = "random"):
    """Options: ``scan`` "random" (default) or "systematic". One step = one coordinate update
    (k log-density evaluations, batched); d steps make a sweep."""
    del num_warmup
    space = check_space(target, "gibbs")
    kernel = build_kernel(_check_scan(scan))
    k = space.num_values
    return proposal_mh.fixed_sampler(
        "gibbs",
        lambda position: init(position, target.logdensity_fn),
        lambda key, state: kernel(key, state, target.logdensity_fn, space),
        {},
        lambda state, info, params: proposal_mh.stats(
            state, info, num_grad_evals=0, extra={"logdensity_evals": jnp.float32(k)}
        ),
    )
