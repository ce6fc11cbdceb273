"""What the discrete kernels share: chain states, the Metropolis–Hastings test, the
factorised proposal, AVG's auxiliary proposal, statistics and the fixed-kernel sampler.

* :class:`DiscreteState` ``(position, logdensity, grad)``: the triple (s_t, f(s_t),
  ∇f(s_t)) that Algorithms B.1–B.3 of Rhodes & Gutmann (2022) require; the gradient is
  that of the log density extended to real inputs. :class:`ValueState` is the
  gradient-free ``(position, logdensity)`` of MH-uniform and the lattice Metropolis.
* :func:`metropolis` accepts or rejects a proposed state (eq. 2); every discrete kernel
  with an MH test uses it, HAMS included. A NaN/+inf log ratio (non-finite density or
  gradient at the proposal) is a rejection, flagged, never propagated.
* The factorised proposal q(s) ∝ Π_i exp(a_i s_i + b_i s_i²) over the value set
  (eqs 8, 13, 17, 25, 40): :func:`factorised_sample` (the draw, its index and its
  log-probability), :func:`factorised_logprob` (the score of any position, e.g. the
  reverse move), :func:`factorised_proposal` and :func:`factorised_logits`;
  :func:`sample_logits` is the one categorical draw (inverse CDF) of every discrete
  kernel. Two-valued scalar spaces (Binary, Spin, two-point Ordinal) take a logistic
  fast path: σ of one logit gap per coordinate instead of a log-sum-exp over the values.
  The uniforms come from :func:`gradmc.random.uniform` (random numbers dominate a
  step's cost on cheap targets).
* :func:`factorised_mh_step`: one MH step with a factorised proposal, optionally after
  an auxiliary draw z (AVG/PAVG, eqs 27–28), whose forward and reverse proposals
  :func:`auxiliary_proposal` gives (eqs 38–40) from maps that apply PAVG's M and its root
  (the ``apply`` and ``apply_root`` of :mod:`gradmc.curvature.pavg_model`'s forms).
* :func:`stats`: the step statistics of a discrete kernel.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp

from gradmc.base import StepStats, Target, mh_accept, step_stats
from gradmc.random import normal, uniform
from gradmc.spaces import Categorical, DiscreteSpace

__all__ = [
    "DiscreteState",
    "ValueState",
    "DiscreteInfo",
    "init",
    "init_value",
    "l1_jump",
    "metropolis",
    "check_space",
    "sample_logits_scored",
    "sample_logits",
    "factorised_logits",
    "factorised_sample",
    "factorised_proposal",
    "factorised_logprob",
    "factorised_mh_step",
    "auxiliary_proposal",
    "auxiliary_step",
    "stats",
]


class DiscreteState(NamedTuple):
    """Position s, log density f(s) and its gradient ∇f(s) (real-input extension)."""

    position: jax.Array
    logdensity: jax.Array
    grad: jax.Array


class ValueState(NamedTuple):
    """Position s and log density f(s), for gradient-free kernels."""

    position: jax.Array
    logdensity: jax.Array


class DiscreteInfo(NamedTuple):
    """What one discrete step reports.

    ``acceptance_rate`` the MH probability min(1, r) (1 for rejection-free kernels),
    ``is_accepted``, ``nonfinite`` (the proposal's log density or gradient was NaN/inf),
    ``log_ratio`` log r of the MH test (0 for rejection-free kernels) and ``jump`` the
    L1 distance ||s_{t+1} − s_t||₁ of the kept move (0 when rejected).
    """

    acceptance_rate: jax.Array
    is_accepted: jax.Array
    nonfinite: jax.Array
    log_ratio: jax.Array
    jump: jax.Array


def init(position, logdensity_fn: Callable) -> DiscreteState:
    """State with the log density and its gradient (real-input extension) at ``position``.

    Parameters
    ----------
    position : array_like
        A position of the space (cast to the default float dtype).
    logdensity_fn : callable
        The target's log density f.
    """
    position = jnp.asarray(position, jnp.result_type(float))
    logdensity, grad = jax.value_and_grad(logdensity_fn)(position)
    return DiscreteState(position, logdensity, grad)


def init_value(position, logdensity_fn: Callable) -> ValueState:
    """Gradient-free state: the log density at ``position``.

    Parameters
    ----------
    position : array_like
        A position of the space (cast to the default float dtype).
    logdensity_fn : callable
        The target's log density f.
    """
    position = jnp.asarray(position, jnp.result_type(float))
    return ValueState(position, logdensity_fn(position))


def l1_jump(new_position, old_position) -> jax.Array:
    """||new − old||₁, the L1 jump of a move.

    Parameters
    ----------
    new_position, old_position : jax.Array
        Positions of the same shape.
    """
    return jnp.sum(jnp.abs(new_position - old_position))


def metropolis(key, state, proposed, log_correction, *, rejected=None) -> tuple[NamedTuple, DiscreteInfo]:
    """Accept ``proposed`` with probability min(1, r), log r = f(s') − f(s) + log_correction (eq. 2);
    r = 0 where f(s') = −∞, even where the correction (a gradient there) is not finite.

    Works for any state NamedTuple with ``position`` and ``logdensity``.

    Parameters
    ----------
    key : jax.Array
        Key of the MH uniform.
    state, proposed : NamedTuple
        The current and the proposed state.
    log_correction : jax.Array or sequence of jax.Array
        log q(s | s') − log q(s' | s) plus any auxiliary-variable terms; a sequence of
        terms is added to f(s') − f(s) one by one, in order (HAMS: −|u'|²/2, |m|²/2 and
        the proposal ratio, PD eq. 37).
    rejected : NamedTuple, optional
        The state kept on rejection (default ``state``; HAMS keeps the negated momentum).
    """
    log_ratio = proposed.logdensity - state.logdensity
    for term in log_correction if isinstance(log_correction, (tuple, list)) else (log_correction,):
        log_ratio = log_ratio + term
    # a proposal outside the support (f = -inf) is a plain rejection, whatever its gradient there
    log_ratio = jnp.where(proposed.logdensity == -jnp.inf, -jnp.inf, log_ratio)
    accept, prob, nonfinite = mh_accept(key, log_ratio)
    kept = state if rejected is None else rejected
    new_state = jax.tree.map(lambda p, s: jnp.where(accept, p, s), proposed, kept)
    return new_state, DiscreteInfo(prob, accept, nonfinite, log_ratio, l1_jump(new_state.position, state.position))


def check_space(target: Target, sampler: str) -> DiscreteSpace:
    """The target's space after checking it is discrete.

    Parameters
    ----------
    target : gradmc.base.Target
        The target a sampler is bound to.
    sampler : str
        The sampler's name, for the message.
    """
    space = target.space
    if not isinstance(space, DiscreteSpace):
        raise ValueError(
            f"{sampler} samples discrete spaces (Binary, Spin, Ordinal, Categorical); "
            f"target {target.name!r} lives on {space}"
        )
    return space


# ---------------------------------------------------------------------------------------
# The factorised proposal q(s) ∝ Π_i exp(a_i s_i + b_i s_i²) over the value set
# ---------------------------------------------------------------------------------------


_BLOCK = 32  # rows longer than 4 blocks are drawn in two levels (a block, then within it)


def sample_logits_scored(key, logits) -> tuple[jax.Array, jax.Array]:
    """``(index, log-probability of index)``: an index drawn from softmax(``logits``) along
    the last axis by inverse CDF, scored from the same normaliser (see :func:`sample_logits`).

    One exp per entry serves the draw and the score. Long rows (GWG's d·k moves) are
    drawn in two levels: a block of ``_BLOCK`` entries by the cumulative block sums, then
    the entry within it; a cumulative sum over the whole row costs far more on a CPU.

    Parameters
    ----------
    key : jax.Array
        Key of the one uniform per row.
    logits : jax.Array
        Unnormalised log-probabilities ``(..., n)``.
    """
    logits = jnp.asarray(logits)
    n = logits.shape[-1]
    top = jnp.max(logits, axis=-1, keepdims=True)
    top = jnp.where(jnp.isfinite(top), top, 0.0)
    weights = jnp.exp(logits - top)
    if n <= 4 * _BLOCK:
        cdf = jnp.cumsum(weights, axis=-1)
        total = cdf[..., -1:]
        u = (1.0 - uniform(key, logits.shape[:-1] + (1,), cdf.dtype)) * total  # in (0, total]
        index = jnp.minimum(jnp.sum(cdf < u, axis=-1), n - 1).astype(jnp.int32)
    else:
        num_blocks = -(-n // _BLOCK)
        padding = [(0, 0)] * (logits.ndim - 1) + [(0, num_blocks * _BLOCK - n)]
        blocks = jnp.pad(weights, padding).reshape(logits.shape[:-1] + (num_blocks, _BLOCK))
        block_cdf = jnp.cumsum(jnp.sum(blocks, axis=-1), axis=-1)
        total = block_cdf[..., -1:]
        u = (1.0 - uniform(key, logits.shape[:-1] + (1,), block_cdf.dtype)) * total  # in (0, total]
        block = jnp.minimum(jnp.sum(block_cdf < u, axis=-1), num_blocks - 1)
        below = jnp.take_along_axis(block_cdf, block[..., None], axis=-1) - jnp.take_along_axis(
            jnp.sum(blocks, axis=-1), block[..., None], axis=-1
        )
        cdf = jnp.cumsum(jnp.take_along_axis(blocks, block[..., None, None], axis=-2)[..., 0, :], axis=-1)
        # Rounding may put u − below just outside (0, block sum]: clip, so that only an
        # entry of positive weight can be chosen.
        within = jnp.clip(u - below, jnp.finfo(cdf.dtype).tiny, cdf[..., -1:])
        index = (block * _BLOCK + jnp.minimum(jnp.sum(cdf < within, axis=-1), _BLOCK - 1)).astype(jnp.int32)
    chosen = jnp.take_along_axis(logits, index[..., None], axis=-1)
    return index, (chosen - top - jnp.log(total))[..., 0]


def sample_logits(key, logits) -> jax.Array:
    """Index drawn from softmax(``logits``) along the last axis, by inverse CDF.

    One uniform per row (the Gumbel-max trick needs one per entry, and random numbers
    dominate the cost of a step on cheap targets). The log-softmax is computed stably,
    so logits of any size work; −inf logits are never drawn; a row with a NaN logit
    gives an arbitrary index (its proposal is scored NaN and rejected by the MH test).

    Parameters
    ----------
    key : jax.Array
        Key of the one uniform per row.
    logits : jax.Array
        Unnormalised log-probabilities ``(..., n)``.
    """
    return sample_logits_scored(key, logits)[0]


def factorised_logits(a, b, space: DiscreteSpace) -> jax.Array:
    """Unnormalised log-probabilities ``(d, k)`` of each coordinate's ``k`` values.

    Scalar spaces: ``logits[i, j] = a_i v_j + b_i v_j²`` (eqs 8, 13, 17, 40). Categorical
    (eq. 25): ``a`` is ``(d, k)`` scores per category and, since one-hot entries satisfy
    s⊙s = s, ``logits = a + b``.

    Parameters
    ----------
    a : jax.Array
        Linear coefficients, ``(d,)`` (or ``(d, k)`` on Categorical).
    b : jax.Array, float or None
        Quadratic coefficients: a scalar or ``(d,)`` (or ``(d, k)`` on Categorical);
        None means 0.
    space : gradmc.spaces.DiscreteSpace
        The space whose value set the proposal ranges over.
    """
    a = jnp.asarray(a)
    b = jnp.zeros((), a.dtype) if b is None else jnp.asarray(b, a.dtype)
    if isinstance(space, Categorical):
        if b.ndim == 1:
            b = b[:, None]
        return a + b
    v = jnp.asarray(space.values, a.dtype)
    b = b[..., None] if b.ndim >= 1 else b
    return a[..., None] * v + b * v * v


def _logit_gap(a, b, space: DiscreteSpace) -> jax.Array:
    """δ_i = log q(s_i = v₁) − log q(s_i = v₀) = a_i (v₁ − v₀) + b_i (v₁² − v₀²), so that
    q(s_i = v₁) = σ(δ_i): no stacking over k and no log-sum-exp.
    """
    v0, v1 = (float(v) for v in space.values)
    a = jnp.asarray(a)
    gap = a * (v1 - v0)
    if b is not None and v1 * v1 != v0 * v0:
        gap = gap + jnp.asarray(b, a.dtype) * (v1 * v1 - v0 * v0)
    return gap


def _log_sigmoid(y, e) -> jax.Array:
    """Log σ(y) given e = exp(−|y|) (shared with the draw): min(y, 0) − log1p(e)."""
    return jnp.minimum(y, 0.0) - jnp.log1p(e)


def factorised_sample(key, a, b, space: DiscreteSpace) -> tuple[jax.Array, jax.Array, jax.Array]:
    """``(position, index, log q(position))``: one draw from ``q(s) ∝ Π_i exp(a_i s_i + b_i s_i²)``
    (see :func:`factorised_logits`) with its normalised log-probability, so a sampler
    scores its forward move without recomputing the logits.

    Two-valued scalar spaces draw each coordinate as v₁ with probability σ(δ_i) by
    comparing one uniform, and score it by log σ(±δ_i), sharing one exp(−|δ_i|); other
    spaces draw by inverse CDF from the log-sum-exp-normalised logits. Both are stable
    for logits of any size (step sizes from 1e-2 to 1e3).

    Parameters
    ----------
    key : jax.Array
        Key of the draw.
    a, b : jax.Array
        The coefficients, as for :func:`factorised_logits`.
    space : gradmc.spaces.DiscreteSpace
        The space of the draw.
    """
    if space.is_two_valued:
        gap = _logit_gap(a, b, space)
        e = jnp.exp(-jnp.abs(gap))
        u = uniform(key, gap.shape, gap.dtype)
        upper = u * (1.0 + e) < jnp.where(gap >= 0, 1.0, e)  # u < σ(δ)
        v0, v1 = (float(v) for v in space.values)
        position = jnp.where(upper, v1, v0).astype(jnp.result_type(float))  # no gather
        logq = jnp.sum(_log_sigmoid(jnp.where(upper, gap, -gap), e))
        return position, upper.astype(jnp.int32), logq
    index, logq = sample_logits_scored(key, factorised_logits(a, b, space))
    return space.from_index(index), index, jnp.sum(logq)


def factorised_proposal(key, a, b, space: DiscreteSpace) -> jax.Array:
    """Draw a position from ``q(s) ∝ Π_i exp(a_i s_i + b_i s_i²)`` (:func:`factorised_sample`).

    Parameters
    ----------
    key : jax.Array
        Key of the draw.
    a, b : jax.Array
        The coefficients, as for :func:`factorised_logits`.
    space : gradmc.spaces.DiscreteSpace
        The space of the draw.
    """
    return factorised_sample(key, a, b, space)[0]


def factorised_logprob(s, a, b, space: DiscreteSpace) -> jax.Array:
    """``log q(s)`` of the normalised factorised proposal at a position ``s`` of the space.

    The unnormalised term is evaluated at ``s`` itself (a_i s_i + b_i s_i², or the
    one-hot row's logit), so no search for the index of ``s`` is needed; two-valued
    scalar spaces use log σ(±δ_i), the others a per-coordinate log-sum-exp.

    Parameters
    ----------
    s : jax.Array
        A position of ``space``.
    a, b : jax.Array
        The coefficients, as for :func:`factorised_logits`.
    space : gradmc.spaces.DiscreteSpace
        The space of ``s``.
    """
    s = jnp.asarray(s)
    if space.is_two_valued:
        gap = _logit_gap(a, b, space)
        y = jnp.where(space.to_index(s) == 1, gap, -gap)
        return jnp.sum(_log_sigmoid(y, jnp.exp(-jnp.abs(y))))
    logits = factorised_logits(a, b, space)
    if isinstance(space, Categorical):
        chosen = jnp.sum(jnp.where(s > 0.5, logits, 0.0), axis=-1)
    else:  # the same arithmetic as factorised_logits, so the chosen logit is bit-identical
        a = jnp.asarray(a)
        b = jnp.zeros((), a.dtype) if b is None else jnp.asarray(b, a.dtype)
        chosen = a * s + b * s * s
    return jnp.sum(chosen - jax.nn.logsumexp(logits, axis=-1))


# ---------------------------------------------------------------------------------------
# MH steps with a factorised proposal (NCG, AVG, PAVG)
# ---------------------------------------------------------------------------------------


def factorised_mh_step(
    rng_key,
    state: DiscreteState,
    logdensity_fn: Callable,
    space: DiscreteSpace,
    forward: Callable,
    reverse: Callable,
) -> tuple[DiscreteState, DiscreteInfo]:
    """One MH step with a factorised proposal q(s' | s, aux) ∝ Π_i exp(a_i s'_i + b_i s'_i²)
    (Algorithms B.1–B.3).

    The forward move is scored by the draw itself (:func:`factorised_sample`), the
    reverse one at the current position (:func:`factorised_logprob`, no index search).

    Parameters
    ----------
    rng_key : jax.Array
        Key of the step.
    state : DiscreteState
        The current state.
    logdensity_fn : callable
        The target's log density f.
    space : gradmc.spaces.DiscreteSpace
        The target's space.
    forward : callable
        ``forward(key, state) -> (a, b, aux)``: the forward proposal (drawing any
        auxiliary variable).
    reverse : callable
        ``reverse(state, proposed, aux) -> (a', b', log_aux_ratio)``: the reverse proposal
        q(s | s', aux) and, for auxiliary-variable samplers, the log ratio of the
        auxiliary densities in eqs 27–28 (0 otherwise).
    """
    key_fwd, key_prop, key_mh = jax.random.split(rng_key, 3)
    a, b, aux = forward(key_fwd, state)
    position, _, log_forward = factorised_sample(key_prop, a, b, space)
    proposed = init(position, logdensity_fn)
    a_rev, b_rev, log_aux_ratio = reverse(state, proposed, aux)
    log_correction = factorised_logprob(state.position, a_rev, b_rev, space) - log_forward + log_aux_ratio
    return metropolis(key_mh, state, proposed, log_correction)


def auxiliary_proposal(apply_M: Callable | None, apply_root: Callable, d_eps):
    """``(forward, reverse)`` of AVG/PAVG (eqs 38–40) for :func:`factorised_mh_step`.

    The joint π(s, z) = exp(f(s)) N(z; R s, I) with RᵀR = M_ε = M + d_ε I is sampled
    block-wise: z ~ N(R s_t, I), then s from q(s | z, s_t) ∝ Π_i exp([∇f(s_t) − M s_t +
    Rᵀz]_i s_i − (d_ε/2) s_i²), accepted by the MH ratio of eq. 28. Writing z = R s_t + n,
    n ~ N(0, I), and Δ = s' − s_t, every term needs only Rᵀn and M Δ: the forward
    coefficient is ∇f(s_t) + d_ε s_t + Rᵀn, the reverse one ∇f(s') − M Δ + d_ε s_t + Rᵀn,
    and log N(z; R s', I) − log N(z; R s_t, I) = (Rᵀn)ᵀΔ − ½ ΔᵀMΔ − ½ d_ε ΔᵀΔ: two
    mat-vecs per step instead of five. The auxiliary variable carried from forward to
    reverse is (d_ε s_t + Rᵀn, Rᵀn).

    Parameters
    ----------
    apply_M : callable or None
        ``x -> M x`` on position-shaped arrays; None for M = 0 (AVG), whose terms in
        M Δ are then skipped.
    apply_root : callable
        ``x -> Rᵀx`` for a root with RᵀR = M_ε (R x when R is symmetric).
    d_eps : float or jax.Array
        The diagonal shift d_ε of eq. 39.
    """

    def forward(key, state):
        root_noise = apply_root(normal(key, state.position.shape, state.position.dtype))
        shift = d_eps * state.position + root_noise
        return state.grad + shift, -0.5 * d_eps, (shift, root_noise)

    def reverse(state, proposed, aux):
        shift, root_noise = aux
        delta = proposed.position - state.position
        log_aux_ratio = jnp.sum((root_noise - 0.5 * d_eps * delta) * delta)
        if apply_M is None:
            return proposed.grad + shift, -0.5 * d_eps, log_aux_ratio
        m_delta = apply_M(delta)
        return proposed.grad - m_delta + shift, -0.5 * d_eps, log_aux_ratio - 0.5 * jnp.sum(delta * m_delta)

    return forward, reverse


def auxiliary_step(rng_key, state, logdensity_fn, space, apply_M, apply_root, d_eps):
    """One AVG/PAVG step (Algorithms B.2/B.3): :func:`factorised_mh_step` with
    :func:`auxiliary_proposal`.

    Parameters
    ----------
    rng_key, state, logdensity_fn, space
        As for :func:`factorised_mh_step`.
    apply_M, apply_root, d_eps
        As for :func:`auxiliary_proposal`.
    """
    forward, reverse = auxiliary_proposal(apply_M, apply_root, d_eps)
    return factorised_mh_step(rng_key, state, logdensity_fn, space, forward, reverse)


# ---------------------------------------------------------------------------------------
# Statistics and the fixed-kernel sampler
# ---------------------------------------------------------------------------------------


def stats(state, info: DiscreteInfo, step_size=jnp.nan, num_grad_evals=1, extra: dict | None = None) -> StepStats:
    """:class:`~gradmc.base.StepStats` of a discrete step; the L1 jump goes in ``extra``.

    Parameters
    ----------
    state : NamedTuple
        The state after the step (its ``logdensity`` is recorded).
    info : DiscreteInfo
        The step's report.
    step_size : float or jax.Array
        The step size to record (NaN for kernels without one).
    num_grad_evals : int
        Log-density(+gradient) evaluations of the step.
    extra : dict, optional
        Further scalars, recorded after ``"jump"``.
    """
    return step_stats(
        state.logdensity,
        info.acceptance_rate,
        info.is_accepted,
        step_size,
        num_grad_evals,
        nonfinite=info.nonfinite,
        extra={"jump": jnp.asarray(info.jump, jnp.float32), **(extra or {})},
    )
