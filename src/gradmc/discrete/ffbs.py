"""Forward filtering–backward sampling of a chain of categorical sites (an HMM's hidden states),
from the log density's second-order model.

On a Categorical(K, T) position z (one-hot rows z_t), write the second-order expansion of f at
the current z as f(z') ≈ c + Σ_t [b_t(z'_t) + ½ H_tt(z'_t, z'_t)] + Σ_t H_{t−1,t}(z'_{t−1}, z'_t),
with g = ∇f(z), H = ∇²f(z) and b = g − Hz (for one-hot rows z'_tᵀ A z'_t = A(z'_t, z'_t)). When
H couples each site only to its neighbours, this is a chain: unary terms
u_t(a) = b_t(a) + ½ H_tt(a, a) and pairwise terms W_t(a, b) = H_{t−1,t}(a, b), and the
distribution q(z') ∝ exp(Σ_t u_t(z'_t) + Σ_t W_t(z'_{t−1}, z'_t)) is drawn exactly by forward
filtering–backward sampling (Frühwirth-Schnatter 1994; Carter & Kohn 1994), which also gives
its normaliser. The H blocks come from 3K Hessian-vector products: the sites t ≡ r (mod 3)
of one category k are probed together, since a site's column of a neighbour-coupled H has no
rows in common with another's three sites away.

The draw is a Metropolis–Hastings proposal, with the reverse move scored under the model at
the proposal: log r = f(z') − f(z) + log q_{z'}(z) − log q_z(z'). Where f is quadratic in the
one-hot rows (an HMM's log joint in its states: emissions linear, transitions bilinear) the
model is f itself, and the kernel is an exact block Gibbs draw of all T states at once (the
proposals it draws are all accepted). Where f is far from quadratic the model may give
states of the target next to no probability, and a chain of model draws alone could stay in
part of the space; so a share :data:`DEFENSIVE_SHARE` of the proposals changes one uniformly
chosen site to a uniformly chosen other value instead, and both moves are scored by the
mixture q = (1 − ρ) q_model + ρ q_site (a defensive mixture, Hesterberg 1995), which reaches
every state.

Sites that enter the log density only as indices (an HMM written ``log_A[z[:-1], z[1:]]``,
``mu[z]``: no gradient) get the chain from evaluations instead (:func:`chain_model_by_values`):
with d_t(a) = f(r with r_t = a) − f(r) and e_t(a, b) = f(r with r_{t−1} = a, r_t = b) − f(r)
at a reference r, the unary terms are d_t and the pairwise terms e_t(a, b) − d_{t−1}(a) − d_t(b);
for any f that couples each site only to its neighbours, f(z') − f(r) is exactly their sum
over the chain, for every z' (an anchored decomposition), so the draw is again an exact block
Gibbs draw. The reference is fixed (every site at its first value), not the current states:
the proposal then does not depend on them (an independence proposal given the other blocks),
and the MH test scores both directions under the one chain, read with (K − 1) T +
(K − 1)² (T − 1) evaluations of f a step. Where f(r) is not finite (the reference is
impossible given the other blocks) the chain cannot be read, and the step proposes a
one-site change only: still exact, and still moving.

Most chains interact alike at every step: an HMM's transitions are one matrix, whatever the
time. With ``transitions="shared"`` the pairwise terms are read at one pair of neighbours (the
middle one, :func:`shared_pair`) and taken for every pair, which cuts the evaluations a step
to (K − 1) T + (K − 1)²: on a homogeneous chain the draw is the same exact block Gibbs draw,
and on any other the chain is a proposal that the MH test, which scores both directions under
it against f itself, corrects. ``"auto"`` asks for it where the pairwise terms read at the
start differ by no more than rounding from pair to pair (:func:`pairwise_spread`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
from blackjax.base import build_sampling_algorithm

from gradmc.base import SamplingAlgorithm
from gradmc.discrete import proposals
from gradmc.discrete.proposals import DiscreteInfo, DiscreteState
from gradmc.spaces import Categorical, DiscreteSpace

__all__ = [
    "ChainModel",
    "DiscreteInfo",
    "init",
    "chain_model",
    "chain_model_by_values",
    "shared_pair",
    "pairwise_spread",
    "coupling_outside_chain",
    "coupling_outside_chain_by_values",
    "sample_chain",
    "chain_logprob",
    "build_kernel",
    "as_top_level_api",
    "TRANSITIONS",
    "EACH",
    "SHARED",
    "check_transitions",
]

init = proposals.init

#: The values of the ``transitions`` option: the chain's pairwise terms read at every pair of
#: neighbours, or at one pair and taken for all (an HMM's transitions, the same at every step).
EACH, SHARED = TRANSITIONS = ("each", "shared")

#: ρ, the share of proposals that change one site (see the module doc).
DEFENSIVE_SHARE = 0.05

#: :func:`coupling_outside_chain_by_values` also moves this many random halves of the sites
#: (drawn with this seed): a coupling of two sites far apart escapes all of them with
#: probability (3/4)^16 = 1 %, a 2-D grid's couplings (a site with the one a row away) never.
CHAIN_HALVES, CHAIN_HALVES_SEED = 16, 0
#: A half's change may differ from a chain's prediction by this share of |f| per moved site:
#: float32 rounding of the sums of its single changes, not a coupling.
HALF_ROUNDING = 1e-6


class ChainModel(NamedTuple):
    """The chain of a second-order model: ``unary`` (T, K) and ``pairwise`` (T − 1, K, K), where
    ``pairwise[t − 1][a, b]`` couples site t − 1 at a with site t at b.
    """

    unary: jax.Array
    pairwise: jax.Array


def _hessian_columns(logdensity_fn: Callable, position):
    """``(g, Hz, probes)``: the gradient, H times the position, and H times the 3K probes
    (sites t ≡ r mod 3 of category k), shaped (3, K, T, K).
    """
    t, k = position.shape
    grad_fn = jax.grad(logdensity_fn)

    def hvp(v):
        return jax.jvp(grad_fn, (position,), (v,))[1]

    rows = (jnp.arange(t)[None, :] % 3) == jnp.arange(3)[:, None]  # (3, T)
    probes = rows[:, None, :, None] & (jnp.arange(k)[None, :, None, None] == jnp.arange(k)[None, None, None, :])
    probes = probes.astype(position.dtype)  # (3, K, T, K)
    columns = jax.vmap(jax.vmap(hvp))(probes)
    gradient, hz = jax.jvp(grad_fn, (position,), (position,))
    return gradient, hz, columns


def chain_model(logdensity_fn: Callable, position) -> ChainModel:
    """The :class:`ChainModel` of f's second-order expansion at ``position`` (module doc).

    Parameters
    ----------
    logdensity_fn : callable
        f on (T, K) one-hot positions, differentiable twice.
    position : jax.Array
        The current position, (T, K) one-hot rows.
    """
    t = position.shape[0]
    gradient, hz, columns = _hessian_columns(logdensity_fn, position)
    site = jnp.arange(t)
    # columns[r, k, s, j] = Σ_{t ≡ r} H[(s, j), (t, k)]: site t's own block, and its upper neighbour's
    own = columns[site % 3, :, site, :]  # (T, K_col, K_row): H_tt(row, col)
    diagonal = jnp.diagonal(own, axis1=1, axis2=2)
    upper = columns[site[1:] % 3, :, site[1:] - 1, :]  # (T − 1, K_col = b at t, K_row = a at t − 1)
    return ChainModel(gradient - hz + 0.5 * diagonal, jnp.swapaxes(upper, 1, 2))


def _changes(logdensity_fn: Callable, position, *moved) -> tuple[jax.Array, jax.Array]:
    """``(changes, f)``: the log density at each row of the ``moved`` batches less f at
    ``position``, and f there, all evaluated in one batch: one copy of f in the compiled program.
    """
    evaluated = jax.vmap(logdensity_fn)(jnp.concatenate([position[None], *moved]))
    return evaluated[1:] - evaluated[0], evaluated[0]


def chain_model_by_values(logdensity_fn: Callable, position, space, shared: bool = False) -> ChainModel:
    """The :class:`ChainModel` of f at ``position`` from evaluations (module doc): exact for an
    f that couples each site only to its neighbours, whatever its form.

    Parameters
    ----------
    logdensity_fn : callable
        f on (T,) positions of scalar sites (``space``'s values).
    position : jax.Array
        The current position, (T,).
    space : gradmc.spaces.DiscreteSpace
        The sites' space (scalar values: Binary, Ordinal).
    shared : bool
        Read the pairwise terms at one pair of neighbours, :func:`shared_pair`, and take them for
        every pair (module doc): exact where they are the same at every pair.
    """
    t, k = position.shape[0], space.num_values
    values = jnp.asarray(space.values, position.dtype)
    index = space.to_index(position)
    offsets = jnp.arange(1, k)  # the other values: index + j mod k

    def change(at, offset):
        return (index[at] + offset) % k

    def single(at, offset):
        return position.at[at].set(values[change(at, offset)])

    def pair(at, first, second):
        return position.at[at - 1].set(values[change(at - 1, first)]).at[at].set(values[change(at, second)])

    sites = jnp.arange(t)
    later = jnp.array([shared_pair(t)]) if shared else jnp.arange(1, t)  # the second site of each pair read
    singles = jax.vmap(jax.vmap(single, (None, 0)), (0, None))(sites, offsets)  # (T, K − 1, T)
    pairs = jax.vmap(jax.vmap(jax.vmap(pair, (None, None, 0)), (None, 0, None)), (0, None, None))(
        later, offsets, offsets
    )  # (T − 1, K − 1, K − 1, T)
    changes, _ = _changes(logdensity_fn, position, singles.reshape(-1, t), pairs.reshape(-1, t))
    changes = jnp.where(jnp.isnan(changes), -jnp.inf, changes)
    ones = changes[: t * (k - 1)].reshape(t, k - 1)
    twos = changes[t * (k - 1) :].reshape(later.size, k - 1, k - 1)
    rows = jnp.broadcast_to(sites[:, None], ones.shape)
    unary = jnp.zeros((t, k), position.dtype).at[rows, change(rows, offsets[None, :])].set(ones)
    a = change(later[:, None, None] - 1, offsets[None, :, None])
    b = change(later[:, None, None], offsets[None, None, :])
    d_a, d_b = unary[later[:, None, None] - 1, a], unary[later[:, None, None], b]
    # where a single change is impossible the pair is too, through the unary term
    interaction = jnp.where(jnp.isfinite(d_a) & jnp.isfinite(d_b), twos - d_a - d_b, 0.0)
    steps = jnp.broadcast_to(jnp.arange(later.size)[:, None, None], a.shape)
    pairwise = jnp.zeros((later.size, k, k), position.dtype).at[steps, a, b].set(interaction)
    return ChainModel(unary, jnp.broadcast_to(pairwise, (t - 1, k, k)))


def shared_pair(num_sites: int) -> int:
    """The site t whose pair (t − 1, t) a chain of ``num_sites`` shared pairwise terms is read at: the middle one."""
    return max(num_sites // 2, 1)


def pairwise_spread(model: ChainModel) -> jax.Array:
    """How far the pairwise terms of ``model`` differ, at most, from those at :func:`shared_pair`:
    zero for a chain whose pairs all interact alike (an HMM's homogeneous transitions).
    """
    at = model.pairwise[shared_pair(model.unary.shape[0]) - 1]
    return jnp.max(jnp.abs(model.pairwise - at))


def coupling_outside_chain_by_values(logdensity_fn: Callable, position, space) -> tuple[jax.Array, ...]:
    """``(outside, inside, neighbours)``: the size of what f's changes hold beyond a chain, of
    the single changes d_t, and of the interactions of neighbours; ``outside`` ≈ 0 when f
    couples each site only to its neighbours, and ``neighbours`` > 0 when it couples them at all.

    ``outside`` gathers the interactions of sites two and three apart (each site with its value
    moved on, the other's too) and, for each of :data:`CHAIN_HALVES` random halves H of the
    sites moved on together, how far its change exceeds the chain's own, Σ_{t∈H} d_t plus the
    interactions of neighbours both in H (an identity for any f of unary and neighbour terms),
    beyond :data:`HALF_ROUNDING`.

    Parameters
    ----------
    logdensity_fn : callable
        f on (T,) positions of scalar sites.
    position : jax.Array
        Where the interactions are taken.
    space : gradmc.spaces.DiscreteSpace
        The sites' space.
    """
    t, k = position.shape[0], space.num_values
    values = jnp.asarray(space.values, position.dtype)
    moved = values[(space.to_index(position) + 1) % k]
    sites = jnp.arange(t)
    singles = jax.vmap(lambda at: position.at[at].set(moved[at]))(sites)
    gaps = (1, 2, 3)
    firsts = [jnp.arange(t - gap) for gap in gaps]
    pairs = [
        jax.vmap(lambda at, gap=gap: singles[at].at[at + gap].set(moved[at + gap]))(first)
        for gap, first in zip(gaps, firsts, strict=True)
    ]
    halves = jax.random.bernoulli(jax.random.key(CHAIN_HALVES_SEED), 0.5, (CHAIN_HALVES, t))
    changes, base = _changes(logdensity_fn, position, singles, *pairs, jnp.where(halves, moved, position))
    ones, twos = changes[:t], jnp.split(changes[t:-CHAIN_HALVES], [t - 1, 2 * t - 3])  # pairs one, two, three apart
    inside, *outside = (
        both - ones[first] - ones[first + gap] for gap, first, both in zip(gaps, firsts, twos, strict=True)
    )
    chain_changes = halves @ ones + (halves[:, :-1] & halves[:, 1:]) @ inside
    rounding = HALF_ROUNDING * (jnp.sum(halves, axis=1) + 1) * jnp.abs(base)
    beyond = jnp.maximum(jnp.abs(changes[-CHAIN_HALVES:] - chain_changes) - rounding, 0.0)
    return jnp.linalg.norm(jnp.concatenate([*outside, beyond])), jnp.linalg.norm(ones), jnp.linalg.norm(inside)


def coupling_outside_chain(logdensity_fn: Callable, position, key) -> tuple[jax.Array, jax.Array]:
    """``(outside, inside)``: the size of H v beyond what the chain's blocks of H give, and of
    H v itself, for a random v; ``outside`` ≈ 0 when f couples each site only to its neighbours.

    Parameters
    ----------
    logdensity_fn : callable
        f on (T, K) one-hot positions.
    position : jax.Array
        Where H is taken.
    key : jax.Array
        Key of the random v.
    """
    t = position.shape[0]
    _, _, columns = _hessian_columns(logdensity_fn, position)
    site = jnp.arange(t)
    own = columns[site % 3, :, site, :]  # [t, col, row]
    upper = columns[site[1:] % 3, :, site[1:] - 1, :]  # [t, col at t, row at t − 1]
    v = jax.random.normal(key, position.shape, position.dtype)
    exact = jax.jvp(jax.grad(logdensity_fn), (position,), (v,))[1]
    chain = jnp.einsum("tcr,tc->tr", own, v)
    chain = chain.at[:-1].add(jnp.einsum("tcr,tc->tr", upper, v[1:]))  # row t − 1 from column t
    chain = chain.at[1:].add(jnp.einsum("tcr,tr->tc", upper, v[:-1]))  # row t from column t − 1 (symmetry)
    return jnp.linalg.norm(exact - chain), jnp.linalg.norm(exact)


def _forward(model: ChainModel):
    """Forward filtering: α_t (T, K) of the chain's log potentials, and log Z."""

    def step(alpha, inputs):
        unary, pairwise = inputs
        alpha = unary + jax.nn.logsumexp(alpha[:, None] + pairwise, axis=0)
        return alpha, alpha

    last, alphas = jax.lax.scan(step, model.unary[0], (model.unary[1:], model.pairwise))
    return jnp.concatenate([model.unary[:1], alphas]), jax.nn.logsumexp(last)


def _backward(key, alphas, model: ChainModel) -> jax.Array:
    """Backward sampling: (T,) states drawn given the forward messages ``alphas``."""
    keys = jax.random.split(key, alphas.shape[0])
    last = jax.random.categorical(keys[-1], alphas[-1])

    def step(after, inputs):
        alpha, pairwise, key = inputs
        state = jax.random.categorical(key, alpha + pairwise[:, after])
        return state, state

    _, states = jax.lax.scan(step, last, (alphas[:-1], model.pairwise, keys[:-1]), reverse=True)
    return jnp.append(states, last)


def sample_chain(key, model: ChainModel) -> tuple[jax.Array, jax.Array]:
    """``(states, log q(states))``: one exact draw of the chain by forward filtering–backward
    sampling, with its normalised log-probability.

    Parameters
    ----------
    key : jax.Array
        Key of the draw.
    model : ChainModel
        The chain.
    """
    alphas, log_z = _forward(model)
    states = _backward(key, alphas, model)
    return states, chain_logprob(states, model, log_z)


def chain_logprob(states, model: ChainModel, log_z=None) -> jax.Array:
    """The log-probability q(states) under the chain (its normaliser by forward filtering unless given).

    Parameters
    ----------
    states : jax.Array
        (T,) category indices.
    model : ChainModel
        The chain.
    log_z : jax.Array, optional
        Its log normaliser.
    """
    if log_z is None:
        log_z = _forward(model)[1]
    t = jnp.arange(states.shape[0])
    energy = jnp.sum(model.unary[t, states]) + jnp.sum(model.pairwise[t[:-1], states[:-1], states[1:]])
    return energy - log_z


def _mixture_logprob(states, model: ChainModel, log_z, start, k: int, share=DEFENSIVE_SHARE):
    """The log-probability q(states | start) of the defensive mixture: the chain model, or (a
    share ``share`` of the proposals) one site changed.
    """
    one_site = jnp.sum(states != start) == 1
    log_site = jnp.where(one_site, -jnp.log(states.shape[0] * (k - 1.0)), -jnp.inf)
    log_chain = jnp.where(share < 1, jnp.log1p(-share) + chain_logprob(states, model, log_z), -jnp.inf)
    return jnp.logaddexp(log_chain, jnp.log(share) + log_site)


def _one_site_changed(key, states, k: int):
    key_site, key_value = jax.random.split(key)
    site = jax.random.randint(key_site, (), 0, states.shape[0])
    return states.at[site].set((states[site] + 1 + jax.random.randint(key_value, (), 0, k - 1)) % k)


def build_kernel(shared: bool = False):
    """``kernel(key, state, logdensity_fn, space) -> (DiscreteState, DiscreteInfo)``; on scalar
    sites, ``shared`` reads the chain's pairwise terms at one pair (:func:`chain_model_by_values`).
    """

    def kernel(rng_key, state: DiscreteState, logdensity_fn: Callable, space: DiscreteSpace):
        key_draw, key_site, key_choice, key_mh = jax.random.split(rng_key, 4)
        current = space.to_index(state.position)
        k = space.num_values
        one_hot = isinstance(space, Categorical)
        if one_hot:  # the second-order model at the current states
            forward, share = chain_model(logdensity_fn, state.position), DEFENSIVE_SHARE
        else:  # the chain read at the fixed reference: one chain for both directions (module doc)
            reference = space.from_index(jnp.zeros_like(current)).astype(state.position.dtype)
            forward = chain_model_by_values(logdensity_fn, reference, space, shared)
            share = jnp.where(jnp.isfinite(logdensity_fn(reference)), DEFENSIVE_SHARE, 1.0)
        alphas, log_z = _forward(forward)  # filtered once: for the draw and for its score
        drawn = _backward(key_draw, alphas, forward)
        states = jnp.where(jax.random.uniform(key_choice) < share, _one_site_changed(key_site, current, k), drawn)
        proposed = init(space.from_index(states).astype(state.position.dtype), logdensity_fn)
        if one_hot:
            reverse = chain_model(logdensity_fn, proposed.position)
            reverse_log_z = _forward(reverse)[1]
        else:
            reverse, reverse_log_z = forward, log_z
        log_forward = _mixture_logprob(states, forward, log_z, current, k, share)
        log_reverse = _mixture_logprob(current, reverse, reverse_log_z, states, k, share)
        return proposals.metropolis(key_mh, state, proposed, log_reverse - log_forward)

    return kernel


def as_top_level_api(logdensity_fn: Callable, space: DiscreteSpace, transitions: str = EACH) -> SamplingAlgorithm:
    """BlackJAX-style ``SamplingAlgorithm`` of the FFBS kernel.

    Parameters
    ----------
    logdensity_fn : callable
        The target's log density f on (T, K) one-hot positions, or on (T,) scalar sites.
    space : gradmc.spaces.DiscreteSpace
        The target's space: Categorical (the chain from Hessian-vector products), or scalar
        sites (Binary, Ordinal: the chain from evaluations).
    transitions : {"each", "shared"}
        On scalar sites, read the pairwise terms at every pair, or at one pair for all
        (:data:`TRANSITIONS`).
    """
    return build_sampling_algorithm(
        build_kernel(check_transitions(transitions, space)), init, logdensity_fn, kernel_args=(space,)
    )


def check_transitions(transitions: str, space: DiscreteSpace) -> bool:
    """Whether ``transitions`` asks for shared pairwise terms; refused where it is not one of
    :data:`TRANSITIONS`, or is ``"shared"`` on one-hot rows (whose chain the Hessian gives whole).
    """
    if transitions not in TRANSITIONS:
        raise ValueError(f"ffbs transitions must be one of {', '.join(map(repr, TRANSITIONS))}, got {transitions!r}")
    if transitions == SHARED and isinstance(space, Categorical):
        raise ValueError(
            "ffbs transitions='shared' reads the chain from evaluations, on index-valued sites; on one-hot rows "
            "(Categorical) the chain's Hessian-vector products give every pair at once"
        )
    return transitions == SHARED
