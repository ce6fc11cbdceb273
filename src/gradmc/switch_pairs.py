"""Switch pairs: a 0/1 site flipped together with the one continuous entry it switches.

In variable selection a switch ``gamma[i]`` says whether coefficient ``beta[i]`` enters the
model: when it is out, ``beta[i]`` follows its prior, spread wide; when it is in, the data pin
it. A flip of the switch alone, the coefficient held, is then rarely accepted: out → in needs
the coefficient already near where the data put it, in → out keeps it there. The mode shift
(:mod:`gradmc.mode_shift`) carries the whole continuous block with each flip, at a cost of
Newton steps over it; a switch pair carries only the switched entry, from a frame learned in
warm-up, at one log-density evaluation a flip.

For site ``i`` (values 0 and 1) paired with entry ``j``, with ``m[i, v]`` and ``s[i, v]`` the
mean and standard deviation of ``x_j`` over the warm-up's draws with ``d_i = v``, a move
proposes ``d_i' = 1 − d_i`` and

    x_j' = m[i, d_i'] + s[i, d_i'] / s[i, d_i] · (x_j − m[i, d_i]),

every other entry held, and accepts with probability
min(1, p(x', d') / p(x, d) · s[i, d_i'] / s[i, d_i]). The map is its own inverse and its
Jacobian is the scale ratio, so with ``m`` and ``s`` fixed each move leaves p invariant (the
kept draws' frame is frozen at the end of warm-up). Where the conditional of ``x_j`` given
``d_i`` and the rest is close to ``N(m[i, d_i], s[i, d_i]²)`` the move is accepted about as a
Gibbs update of ``d_i`` with ``x_j`` summed out would be. A sweep moves every pair in turn.

Which entry pairs with which site is read from the model (:func:`switch_pairs`): a 0/1 part
and a continuous part of as many entries, where flipping site ``i`` changes the conditional
curvature of entry ``i`` more than that of any other and by more than a set factor.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from gradmc.base import PAIRS
from gradmc.chains import pool_chains

__all__ = [
    "NAME",
    "MIN_SHARE",
    "SPREAD",
    "PairMoments",
    "no_moments",
    "add_draw",
    "frame",
    "pair_moves",
    "switch_pairs",
]

#: The switch pairs' key in the sampler choice, ``trace.params`` and ``trace.stats``.
NAME = PAIRS

#: A value of a site seen in less than this share of the learning sweeps (pooled over chains) gets
#: the frame of the entry over all draws instead of its own.
MIN_SHARE = 0.02

#: Sites are paired with entries only where flipping a site changes its entry's conditional
#: standard deviation by more than this factor (at the start).
SPREAD = 1.5


class PairMoments(NamedTuple):
    """Sums over learning sweeps, pooled over chains, per pair and site value: the share of
    sweeps with that value, and the mean of ``x_j`` and of ``x_j²`` times the indicator.
    """

    count: jax.Array  # (pairs, 2)
    first: jax.Array
    second: jax.Array
    sweeps: jax.Array  # ()


def no_moments(num_pairs: int, dtype) -> PairMoments:
    """Empty sums for ``num_pairs`` pairs."""
    zeros = jnp.zeros((num_pairs, 2), dtype)
    return PairMoments(zeros, zeros, zeros, jnp.zeros((), dtype))


def add_draw(moments: PairMoments, position: jax.Array, sites: np.ndarray, entries: np.ndarray) -> PairMoments:
    """``moments`` with the draw ``position`` added (pooled over the runner's chains)."""
    on = position[sites]
    indicator = jnp.stack([1 - on, on], axis=1)
    x = position[entries][:, None]
    return PairMoments(
        moments.count + pool_chains(indicator),
        moments.first + pool_chains(indicator * x),
        moments.second + pool_chains(indicator * x**2),
        moments.sweeps + 1,
    )


def frame(moments: PairMoments):
    """``(m, s)``, each ``(pairs, 2)``: each value's mean and standard deviation of its entry, or,
    for a value seen in less than :data:`MIN_SHARE` of the sweeps, the entry's over every draw.
    """
    total = jnp.maximum(jnp.sum(moments.count, axis=1), 1e-30)
    pooled_mean = jnp.sum(moments.first, axis=1) / total
    pooled_var = jnp.sum(moments.second, axis=1) / total - pooled_mean**2
    count = jnp.maximum(moments.count, 1e-30)
    mean, var = moments.first / count, moments.second / count - (moments.first / count) ** 2
    seen = moments.count >= MIN_SHARE * jnp.maximum(moments.sweeps, 1)
    mean = jnp.where(seen, mean, pooled_mean[:, None])
    var = jnp.where(seen, var, pooled_var[:, None])
    tiny = jnp.finfo(var.dtype).tiny
    return mean, jnp.sqrt(jnp.maximum(var, tiny))


def pair_moves(key, position, logdensity_fn, logdensity, sites: np.ndarray, entries: np.ndarray, pair_frame):
    """One move of every pair in turn (module doc). Returns ``(position, log density there,
    accepted moves)``; ``logdensity`` is the log density at ``position``.

    Parameters
    ----------
    key : jax.Array
        Key of the moves' tests.
    position : jax.Array
        The flat position.
    logdensity_fn : callable
        The joint log density of a flat position.
    logdensity : jax.Array
        Its value at ``position``.
    sites, entries : ndarray
        The pairs' flat indices: a 0/1 site and its continuous entry.
    pair_frame : tuple
        ``(m, s)`` of :func:`frame`.
    """
    mean, scale = pair_frame
    uniforms = jax.random.uniform(key, (sites.size,), position.dtype)

    def move(k, carry):
        x, level, accepted = carry
        site, entry = jnp.asarray(sites)[k], jnp.asarray(entries)[k]
        now = x[site].astype(jnp.int32)
        m, s = mean[k], scale[k]
        shifted = m[1 - now] + s[1 - now] / s[now] * (x[entry] - m[now])
        proposed = x.at[site].set(1 - x[site]).at[entry].set(shifted)
        new_level = logdensity_fn(proposed)
        log_ratio = new_level - level + jnp.log(s[1 - now]) - jnp.log(s[now])
        take = jnp.log(uniforms[k]) < jnp.where(jnp.isfinite(log_ratio), log_ratio, -jnp.inf)
        return jnp.where(take, proposed, x), jnp.where(take, new_level, level), accepted + take

    return jax.lax.fori_loop(0, sites.size, move, (position, logdensity, jnp.int32(0)))


def switch_pairs(
    logdensity_fn, start: jax.Array, site_parts: Mapping[str, np.ndarray], entry_parts: Mapping[str, np.ndarray]
) -> list[tuple[str, str]]:
    """The pairs of parts (module doc), read at ``start``: each 0/1 part of ``site_parts`` with
    the first continuous part of ``entry_parts`` of as many entries, not already taken, for which
    flipping each site ``i`` changes entry ``i``'s conditional curvature (the log density's second
    derivative in it) by more than a factor ``SPREAD²`` and more than any other entry's.

    Parameters
    ----------
    logdensity_fn : callable
        The joint log density of a flat position.
    start : jax.Array
        Where to read.
    site_parts, entry_parts : mapping of str to ndarray
        The 0/1 parts and the continuous parts, by name, each its flat indices.
    """

    @functools.partial(jax.jit, static_argnums=(1, 2))
    def curvatures(start, site_name, entry_name):
        site_index, entry_index = jnp.asarray(site_parts[site_name]), jnp.asarray(entry_parts[entry_name])

        def second(position):  # the diagonal of the entries' Hessian
            def along(e):
                direction = jnp.zeros_like(position).at[e].set(1.0)
                return jax.jvp(jax.grad(logdensity_fn), (position,), (direction,))[1][e]

            return jax.vmap(along)(entry_index)

        flipped = jax.vmap(lambda s: start.at[s].set(1 - start[s]))(site_index)
        return second(start), jax.vmap(second)(flipped)

    pairs: list[tuple[str, str]] = []
    for site_name, site_index in site_parts.items():
        for entry_name, entry_index in entry_parts.items():
            if entry_index.size != site_index.size or entry_name in {e for _, e in pairs}:
                continue
            base, moved = jax.device_get(curvatures(start, site_name, entry_name))
            with np.errstate(divide="ignore", invalid="ignore"):
                change = np.abs(np.log(np.abs(moved) / np.abs(base)[None]))
            change = np.where(np.isfinite(change), change, 0.0)
            if np.all(np.diag(change) > 2 * np.log(SPREAD)) and np.all(
                np.argmax(change, axis=1) == np.arange(site_index.size)
            ):
                pairs.append((site_name, entry_name))
                break
    return pairs
