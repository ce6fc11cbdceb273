"""Gibbs-with-Gradients (Grathwohl et al. 2021; Rhodes & Gutmann 2022, eq. 6) and
ordinal-GWG (Rhodes & Gutmann 2022, App. G).

The proposal changes one coordinate: q(s' | s) ∝ exp(½∇f(s)ᵀ(s' − s)) over the states
s' ≠ s that differ from s in one coordinate i, with the new value index j within
``radius`` r of the current one, |j − c_i| ≤ r (ordinal-GWG: up to r states along one
axis). ``gwg`` is r = 1: a flip on Binary/Spin, a step to a neighbouring value on
Ordinal; on Categorical, GWG's Hamming ball of radius 1 is every other category of one
row (the radius has no meaning there). The logits of all d·k candidates come from one
gradient; the MH test uses the reverse proposal from s' (eq. 2).

Multi-flip GWG (``max_flips > 1``) changes R distinct coordinates at once, R drawn
uniformly from {1, …, L} afresh at every step, L = ``num_flips`` ≤ ``max_flips`` (the
number-of-flips idea of DISCS's adaptive locally balanced samplers; drawing R, rather than
fixing it, keeps the chain irreducible: a fixed even number of flips would preserve the
parity of a binary state). Given R, the coordinates are drawn one after another without
replacement, each with probability proportional to the total weight
Σ_j exp(½∇f(s)ᵀ(s' − s)) of its moves, and each coordinate's move from its own moves — all
weights from the one gradient at s. The ordered list of coordinates is an auxiliary
variable: the reverse proposal from s' returns the same coordinates in the same order, so
the MH ratio uses the probabilities of the two ordered lists,

    log q(s | s') − log q(s' | s) = Σ_{r<R} [ℓ'(i_r, back_r) − log Σ_{i ∉ {i_<r}} w'_i]
                                   − Σ_{r<R} [ℓ(i_r, j_r) − log Σ_{i ∉ {i_<r}} w_i],

which makes the move on (s, R, list) an involution, hence reversible for f. The ordered draw
is a Gumbel top-R of the coordinates' log weights (the Plackett–Luce order).
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
from blackjax.base import build_sampling_algorithm

from gradmc.base import SamplingAlgorithm
from gradmc.checks import check_positive, check_radius
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


def _ordered_log_probability(logits, site_weights, sites, moves, active) -> jax.Array:
    """Log probability of drawing ``(sites[r], moves[r])`` for the active r in order, each
    coordinate without replacement with weight w_i = Σ_j exp(logits[i, j]) (see module doc);
    ``site_weights`` holds log w_i.

    The normaliser of draw r, Σ over coordinates not drawn before r, is the weight of the
    coordinates never drawn plus the suffix sum of the drawn ones from r on: a sum of
    positive terms (no cancellation), O(d + R).
    """
    drawn = jnp.zeros(logits.shape[0], bool).at[jnp.where(active, sites, logits.shape[0])].set(True, mode="drop")
    never_drawn = jax.nn.logsumexp(jnp.where(drawn, -jnp.inf, site_weights))
    suffix = jax.lax.cumlogsumexp(jnp.where(active, site_weights[sites], -jnp.inf), reverse=True)
    denominators = jnp.logaddexp(never_drawn, suffix)
    return jnp.sum(jnp.where(active, logits[sites, moves] - denominators, 0.0))


def _multi_flip_step(key, state: DiscreteState, logdensity_fn, space: DiscreteSpace, radius, num_flips, max_flips):
    """One multi-flip GWG step changing R ~ U{1, …, num_flips} coordinates (module doc)."""
    key_count, key_sites, key_moves, key_mh = jax.random.split(key, 4)
    logits = move_logits(state.position, state.grad, space, radius)  # (d, m)
    d, m = logits.shape
    site_weights = jax.nn.logsumexp(logits, axis=1)
    _, sites = jax.lax.top_k(site_weights + jax.random.gumbel(key_sites, (d,), site_weights.dtype), max_flips)
    moves = jax.random.categorical(key_moves, logits[sites], axis=-1)
    active = jnp.arange(max_flips) < jax.random.randint(key_count, (), 1, num_flips + 1)
    values = jnp.asarray(space.values, state.position.dtype)
    if m == 1:
        new_values, back = values[0] + values[1] - state.position[sites], jnp.zeros_like(moves)
    else:
        new_values, back = values[moves], space.to_index(state.position[sites])
    targets = jnp.where(active, sites, d)  # inactive draws change nothing
    proposed = init(state.position.at[targets].set(new_values, mode="drop"), logdensity_fn)
    log_forward = _ordered_log_probability(logits, site_weights, sites, moves, active)
    rev_logits = move_logits(proposed.position, proposed.grad, space, radius)
    log_reverse = _ordered_log_probability(rev_logits, jax.nn.logsumexp(rev_logits, axis=1), sites, back, active)
    return proposals.metropolis(key_mh, state, proposed, log_reverse - log_forward)


def build_kernel(max_flips: int = 1):
    """``kernel(key, state, logdensity_fn, space, radius=1, num_flips=1) -> (DiscreteState, DiscreteInfo)``.

    Parameters
    ----------
    max_flips : int
        The largest ``num_flips`` the kernel takes (static; 1: the one-change GWG of the
        paper). With ``max_flips > 1`` a step changes R ~ U{1, …, num_flips} coordinates,
        ``num_flips`` an integer in [1, max_flips] (it may be traced).
    """
    check_positive("max_flips", max_flips, integer=True)
    max_flips = int(max_flips)

    def kernel(rng_key, state: DiscreteState, logdensity_fn: Callable, space: DiscreteSpace, radius=1, num_flips=1):
        if max_flips > 1:
            most = min(max_flips, space.d)  # at most every coordinate (every row of a Categorical)
            flips = jnp.clip(jnp.asarray(num_flips, jnp.int32), 1, most)
            return _multi_flip_step(rng_key, state, logdensity_fn, space, radius, flips, most)
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
    """BlackJAX-style ``SamplingAlgorithm`` of GWG (``radius`` 1) or ordinal-GWG, changing
    ``num_flips`` coordinates per step.

    Parameters
    ----------
    logdensity_fn : callable
        The target's log density f.
    space : gradmc.spaces.DiscreteSpace
        The target's space.
    radius : int
        r ≥ 1, how far along its axis one coordinate may move (no meaning on Categorical).
    num_flips : int
        A step changes R ~ U{1, …, num_flips} coordinates (1: the paper's GWG).
    """
    check_positive("num_flips", num_flips, integer=True)
    return build_sampling_algorithm(
        build_kernel(int(num_flips)), init, logdensity_fn, kernel_args=(space, check_radius(radius), num_flips)
    )
