"""Gibbs-with-Gradients (Grathwohl et al. 2021; Rhodes & Gutmann 2022, eq. 6) and
ordinal-GWG (Rhodes & Gutmann 2022, App. G).

The proposal changes one coordinate: q(s' | s) ∝ exp(½∇f(s)ᵀ(s' − s)) over the states
s' ≠ s that differ from s in one coordinate i, with the new value index j within
``radius`` r of the current one, |j − c_i| ≤ r (ordinal-GWG: up to r states along one
axis). ``gwg`` is r = 1: a flip on Binary/Spin, a step to a neighbouring value on
Ordinal; on Categorical, GWG's Hamming ball of radius 1 is every other category of one
row (the radius has no meaning there). The logits of all d·k candidates come from one
gradient; the MH test uses the reverse proposal from s' (eq. 2).

Multi-flip GWG (``multi_flip=True``) changes many coordinates at once, their expected
number set by L = ``num_flips``, a real number that the warm-up adapts (the idea of DISCS's
adaptive locally balanced samplers, which draw L moves with replacement). With p_ij the
one-flip proposal's probability of move j of coordinate i (all logits from the one
gradient at s) and w_i = Σ_j p_ij, every coordinate moves independently,

    coordinate i keeps its value with probability exp(−L·w_i), and otherwise takes move j
    with probability (1 − exp(−L·w_i))·p_ij / w_i.

On two-valued coordinates this is exactly drawing N ~ Poisson(L) moves with replacement
from p and flipping every coordinate drawn at least once (Poisson thinning). The proposal
factorises over coordinates, so the reverse move from s' is scored the same way with the
gradient at s' and the MH ratio needs no auxiliary variable; the number of changes is
random, so no parity is preserved. A step costs O(d·k) whatever L is.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
from blackjax.base import build_sampling_algorithm

from gradmc.base import SamplingAlgorithm
from gradmc.checks import check_positive_param, check_radius, is_concrete
from gradmc.discrete import proposals
from gradmc.discrete.proposals import DiscreteInfo, DiscreteState, sample_logits_scored
from gradmc.random import uniform
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


def _multi_flip_logits(logits, num_flips) -> jax.Array:
    """Logits ``(d, m + 1)`` of each coordinate's options in a multi-flip step (module doc):
    option 0 keeps the value, option 1 + j takes move j. ``logits`` are the one-flip
    proposal's ``(d, m)`` move logits, ``num_flips`` is L.
    """
    log_p = logits - jax.nn.logsumexp(logits)  # log p_ij over all d·m moves
    log_w = jax.nn.logsumexp(log_p, axis=1, keepdims=True)
    rate = num_flips * jnp.exp(log_w)  # L·w_i
    return jnp.concatenate([-rate, _log_move(rate) + log_p - log_w], axis=1)


def _log_move(rate) -> jax.Array:
    """log(1 − exp(−rate)): the log-probability that a coordinate with rate L·w_i moves."""
    return jnp.log(-jnp.expm1(-rate))


def _multi_flip_step(key, state: DiscreteState, logdensity_fn, space: DiscreteSpace, radius, num_flips):
    """One multi-flip GWG step: each coordinate moves independently (module doc)."""
    key_prop, key_mh = jax.random.split(key)
    logits = move_logits(state.position, state.grad, space, radius)
    values = jnp.asarray(space.values, state.position.dtype)
    if logits.shape[1] == 1:  # two-valued: coordinate i flips with probability 1 − exp(−L·p_i)

        def flip_rates(logits):
            return num_flips * jax.nn.softmax(logits[:, 0])

        rate = flip_rates(logits)
        flip = uniform(key_prop, rate.shape, rate.dtype) < -jnp.expm1(-rate)
        proposed = init(jnp.where(flip, values[0] + values[1] - state.position, state.position), logdensity_fn)
        rev_rate = flip_rates(move_logits(proposed.position, proposed.grad, space, radius))
        log_ratio = jnp.where(flip, _log_move(rev_rate) - _log_move(rate), rate - rev_rate)
        return proposals.metropolis(key_mh, state, proposed, jnp.sum(log_ratio))
    options = _multi_flip_logits(logits, num_flips)
    chosen, log_forward = sample_logits_scored(key_prop, options)  # (d,): 0 keeps, 1 + j moves
    # move j sets value index j (a one-hot row on Categorical); the reverse returns
    moved = (chosen > 0).reshape(chosen.shape + (1,) * (state.position.ndim - 1))
    proposed = init(jnp.where(moved, values[jnp.maximum(chosen - 1, 0)], state.position), logdensity_fn)
    rev_options = _multi_flip_logits(move_logits(proposed.position, proposed.grad, space, radius), num_flips)
    rev_chosen = jnp.where(chosen > 0, 1 + space.to_index(state.position), 0)
    log_reverse = jnp.take_along_axis(rev_options, rev_chosen[:, None], axis=1)[:, 0]
    log_reverse = log_reverse - jax.nn.logsumexp(rev_options, axis=1)
    return proposals.metropolis(key_mh, state, proposed, jnp.sum(log_reverse) - jnp.sum(log_forward))


def build_kernel(multi_flip: bool = False):
    """``kernel(key, state, logdensity_fn, space, radius=1, num_flips=1.0) -> (DiscreteState, DiscreteInfo)``.

    Parameters
    ----------
    multi_flip : bool
        False: the one-change GWG of the paper (``num_flips`` is ignored). True: every
        coordinate may move, L = ``num_flips`` > 0 the expected number of moves drawn
        (module doc; it may be traced).
    """

    def kernel(rng_key, state: DiscreteState, logdensity_fn: Callable, space: DiscreteSpace, radius=1, num_flips=1.0):
        if multi_flip:
            return _multi_flip_step(rng_key, state, logdensity_fn, space, radius, num_flips)
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


def as_top_level_api(logdensity_fn: Callable, space: DiscreteSpace, radius=1, num_flips=1) -> SamplingAlgorithm:
    """BlackJAX-style ``SamplingAlgorithm`` of GWG (``radius`` 1) or ordinal-GWG.

    Parameters
    ----------
    logdensity_fn : callable
        The target's log density f.
    space : gradmc.spaces.DiscreteSpace
        The target's space.
    radius : int
        r ≥ 1, how far along its axis one coordinate may move (no meaning on Categorical).
    num_flips : float
        1: the paper's one-change GWG; otherwise the multi-flip proposal with L =
        ``num_flips`` expected moves drawn per step.
    """
    num_flips = check_positive_param("num_flips", num_flips)
    multi_flip = not is_concrete(num_flips) or float(num_flips) != 1.0
    return build_sampling_algorithm(
        build_kernel(multi_flip), init, logdensity_fn, kernel_args=(space, check_radius(radius), num_flips)
    )
