"""Single-site Gibbs sampler with random or systematic (deterministic) scan.

One step updates one coordinate i from its exact full conditional
p(s_i = v | s_{−i}) ∝ exp f(s with s_i = v), found by evaluating the log density at all
k values of coordinate i at once (``vmap``): k − 1 evaluations, as the state carries f at
the current value. ``scan="random"`` picks i uniformly;
``scan="systematic"`` visits 0, 1, …, d−1, 0, … (d steps make one sweep). Values whose
log density is NaN/+inf get probability 0 and the step is flagged ``nonfinite``.
Gradient-free; acceptance is 1. On a space of one scalar site (a change point), the log
density at every value is read from one pass over its program
(:func:`gradmc.discrete.site_values.logdensities_at`) instead of k evaluations.

With a ``radius`` r, coordinate i draws its new value index j' from the conditional
restricted to the window W(j) = {j − r, …, j + r} of its current index j (fewer values at
the ends of the value set), q(j' | j) = p(j') / Z(W(j)), and the move is accepted with
probability min(1, Z(W(j)) / Z(W(j'))): the Metropolis–Hastings ratio p(j') q(j | j') /
(p(j) q(j' | j)), as j lies in W(j') exactly when j' lies in W(j). Both windows lie in the
4r + 1 values around j, which a step evaluates in one batch instead of k: for ordered values
with many levels (a change point's year, a count) whose conditional is local.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
from blackjax.base import build_sampling_algorithm

from gradmc.base import SamplingAlgorithm
from gradmc.discrete.proposals import DiscreteInfo, l1_jump, sample_logits
from gradmc.discrete.site_values import logdensities_at
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


def _conditional(position, site, indices, logdensity_fn: Callable, space: DiscreteSpace):
    """``(values, logits, bad)``: the values of coordinate ``site`` at the value indices
    ``indices`` and the log densities of ``position`` with the site at each, -inf outside the
    value set and where NaN/+inf (``bad``).
    """
    inside = (indices >= 0) & (indices < space.num_values)
    values = jnp.asarray(space.values, position.dtype)[jnp.clip(indices, 0, space.num_values - 1)]
    if space.d == 1 and values.ndim == 1:  # the block is one scalar site: its program read once for every value
        logits = logdensities_at(logdensity_fn, values, position.shape, position.dtype)
    else:
        logits = jax.vmap(lambda v: logdensity_fn(position.at[site].set(v)))(values)
    bad = inside & (jnp.isnan(logits) | (logits == jnp.inf))
    return values, jnp.where(inside & ~bad, logits, -jnp.inf), bad


def build_kernel(scan: str = "random", radius: int | None = None):
    """``kernel(key, state, logdensity_fn, space) -> (GibbsState, DiscreteInfo)``.

    Parameters
    ----------
    scan : {"random", "systematic"}
        Which coordinate a step updates: uniformly random, or 0, 1, …, d−1 in turn.
    radius : int, optional
        Draw from the conditional on the window of this many value indices either side of
        the current one, with the MH test of the module doc (default: every value, exactly).
    """
    check_scan(scan)

    def kernel(rng_key, state: GibbsState, logdensity_fn: Callable, space: DiscreteSpace):
        key_site, key_value = jax.random.split(rng_key)
        if scan == "random":
            site = jax.random.randint(key_site, (), 0, space.d)
        else:
            site = state.counter % space.d
        current = space.to_index(state.position[site])
        whole = radius is None or 2 * radius + 1 >= space.num_values
        if whole:  # the other k - 1 values evaluated; the current one's log density is the state's
            k = space.num_values
            others = (current + jnp.arange(1, k)) % k
            _, other_logits, bad = _conditional(state.position, site, others, logdensity_fn, space)
            current_bad = jnp.isnan(state.logdensity) | (state.logdensity == jnp.inf)
            bad = jnp.any(bad) | current_bad
            values = jnp.asarray(space.values, state.position.dtype)
            # value indices current, current + 1, ... (mod k), rolled into the values' order
            rotated = jnp.concatenate([jnp.where(current_bad, -jnp.inf, state.logdensity)[None], other_logits])
            logits = jnp.roll(rotated, current)
            stay = current
        else:  # one batch holds both windows: W(j) and every W(j') with j' in W(j)
            key_value, key_test = jax.random.split(key_value)
            span = current + jnp.arange(-2 * radius, 2 * radius + 1)
            span_values, span_logits, bad = _conditional(state.position, site, span, logdensity_fn, space)
            values, logits = span_values[radius : 3 * radius + 1], span_logits[radius : 3 * radius + 1]
            stay = radius
        any_valid = jnp.any(jnp.isfinite(logits))
        chosen = jnp.where(any_valid, sample_logits(key_value, logits), stay)
        accepted, acceptance = jnp.bool_(True), jnp.float32(1.0)
        if not whole:  # the reverse window W(j') starts at span index `chosen`: min(1, Z(W(j)) / Z(W(j')))
            back = jax.lax.dynamic_slice(span_logits, (chosen,), (2 * radius + 1,))
            log_ratio = jax.nn.logsumexp(logits) - jax.nn.logsumexp(back)
            acceptance = jnp.where(any_valid, jnp.minimum(1.0, jnp.exp(log_ratio)), 0.0).astype(jnp.float32)
            accepted = jax.random.uniform(key_test) < acceptance
        moved = any_valid & accepted
        new = GibbsState(
            jnp.where(moved, state.position.at[site].set(values[chosen]), state.position),
            jnp.where(moved, logits[chosen], state.logdensity),
            state.counter + 1,
        )
        jump = l1_jump(new.position, state.position)
        info = DiscreteInfo(acceptance, moved, jnp.any(bad), jnp.float32(0.0), jump)
        return new, info

    return kernel


def as_top_level_api(
    logdensity_fn: Callable, space: DiscreteSpace, scan: str = "random", radius: int | None = None
) -> SamplingAlgorithm:
    """BlackJAX-style ``SamplingAlgorithm`` of single-site Gibbs.

    Parameters
    ----------
    logdensity_fn : callable
        The target's log density f.
    space : gradmc.spaces.DiscreteSpace
        The target's space.
    scan : {"random", "systematic"}
        Which coordinate a step updates.
    radius : int, optional
        The window's half-width in value indices (default: every value).
    """
    return build_sampling_algorithm(build_kernel(scan, radius), init, logdensity_fn, kernel_args=(space,))
