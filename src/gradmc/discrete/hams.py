"""Discrete Hamiltonian-assisted Metropolis sampling: V-/O-DHAMS and V-/O-PDHAMS
(Zhou & Tan 2025; the discrete-HAMS algorithm statement, docs/discrete-hams.md §2, §3, §5,
§7), one kernel for all four.

State (s, u, f(s), ∇f(s)) with momentum u ~ N(0, I); the extended target
Π(s, u) ∝ exp(f(s) − |u|²/2). One iteration (Algorithms 1 and 3, §7.6–7.7):

1. auto-regression and momentum negation: m = −u⁻ with u⁻ = ε u + √(1−ε²) ξ, drawn as
   m = −ε u + √(1−ε²) ζ, ζ ~ N(0, I) (the same law; with ε = 0 this is PAVG's noise);
2. forward reference Q(·; a_f, D), a_f = ∇f(s) + D s + L m (PD eq. 30), and
   s'_j = OR(s_j; p^f_j, β) per coordinate (§2.1; β = 1 is an independent draw);
3. gradient correction (PD eq. 32): ρ = ∇f(s') − ∇f(s) − W(s' − s),
   u' = Lᵀ(s − s') + m + φ L⁻¹ρ, computed as u' = L⁻¹[−(W + D)(s' − s) + L m + φ ρ];
4. backward reference a_b = ∇f(s') + D s' + L u', and the generalised MH ratio
   log r = f' − f − |u'|²/2 + |m|²/2 + Σ_j [log T_β(s_j | s'_j; p^b_j) − log T_β(s'_j | s_j; p^f_j)]
   (PD eqs 37, 58; T_1(l|i; p) = p_l);
5. accept (s', u') with probability min(1, r), else (s, m) = (s, −u⁻): the momentum flips
   (:func:`gradmc.discrete.proposals.metropolis` with the negated momentum as the rejected
   state). A NaN/+inf log r (non-finite f or ∇f at s') is a rejection, flagged ``nonfinite``.

Special cases of the one kernel (§7.9, §11), with the preconditioner W, D, L of
:mod:`gradmc.curvature.second_order`:

* **V-/O-PDHAMS**: W calibrated (:func:`gradmc.tuning.calibration.calibrate_w`),
  D = (δ − λ_min W) I, L Lᵀ = W + D; β = 1 (V) or β < 1 (O);
* **V-/O-DHAMS**: W = 0, D = δ⁻² I, L = δ⁻¹ I and φ_PDHAMS = φ_DHAMS / δ;
* **PAVG** (variance form, §6.3): ε = 0, φ = 0, β = 1.

With a sparse W by diagonals (:class:`~gradmc.curvature.sparse_w.StructuredPreconditioner`,
§8.7) or by edges (:class:`~gradmc.curvature.sparse_w.GraphPreconditioner`, §8.10; φ = 0
only) L is d × k (k = K d for K diagonals, E + d for E edges) and the state holds
v = L u ~ N(0, W + D) instead of u: v_m = −ε v + √(1−ε²) L ζ (ζ ∈ R^k), v' = v_m − (W + D)Δ and
|u'|² − |m|² = −2 Δᵀ v_m + Δᵀ(W + D)Δ, so L⁻¹ is never needed.

The vanilla proposal and its score use the shared factorised-proposal routine
(:func:`gradmc.discrete.proposals.factorised_sample`, ``factorised_logprob``) and ζ is drawn
with :func:`gradmc.random.normal`, as PAVG draws them, so the §7.9 reductions hold with the
same random numbers. The over-relaxation CDFs and transition probability T_β (§2.2) and its
sampling are computed in float64 inside the jitted kernel (``jax.enable_x64`` locally) even
when the chain runs in float32; the rest of the step stays in the chain's dtype.

Every discrete space: on Binary, Spin and Ordinal W acts on the position vector; on
one-hot Categorical rows (d, k) the momentum, W, D and L act on the flattened position
(d·k entries, as PAVG's M does), the reference of each variable is the softmax of its k
logits a + b (s⊙s = s on one-hot rows), and over-relaxation orders the categories by index
(§8.8).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
from blackjax.base import build_sampling_algorithm

from gradmc import random
from gradmc.base import SamplingAlgorithm, Target
from gradmc.checks import is_concrete
from gradmc.curvature.second_order import HamsPreconditioner, check_delta
from gradmc.discrete import proposals
from gradmc.discrete.proposals import DiscreteInfo, factorised_logits, factorised_logprob, factorised_sample
from gradmc.spaces import Categorical, DiscreteSpace

__all__ = [
    "HamsState",
    "DiscreteInfo",
    "check_hyper",
    "check_space",
    "reference_cdf",
    "or_transition",
    "or_sample",
    "init",
    "build_kernel",
    "as_top_level_api",
    "DHAMS_SETTINGS",
]

#: The DHAMS code's tuned settings on the discrete Gaussian (§5): (δ, ε, β, φ).
DHAMS_SETTINGS = {"v-dhams": (0.9, 0.9, 1.0, -0.5), "o-dhams": (0.75, 0.9, 0.1, -0.7)}


class HamsState(NamedTuple):
    """Position s, momentum u, log density f(s) and its gradient ∇f(s)."""

    position: jax.Array
    momentum: jax.Array
    logdensity: jax.Array
    grad: jax.Array


# -- input checks (host side) ------------------------------------------------------------------


def check_hyper(epsilon=0.0, beta=1.0, delta=None) -> None:
    """``ValueError`` unless ε ∈ [0, 1), β ∈ (0, 1] and δ > 0 (traced ε and δ pass).

    Parameters
    ----------
    epsilon : float
        The auto-regression ε.
    beta : float
        The over-relaxation β (1 = none).
    delta : float, optional
        The step size δ (not checked when None).
    """
    if is_concrete(epsilon) and not (0.0 <= float(epsilon) < 1.0):
        raise ValueError(f"the auto-regression ε must lie in [0, 1), got {epsilon}")
    if not (0.0 < float(beta) <= 1.0):
        raise ValueError(f"the over-relaxation β must lie in (0, 1] (1 = no over-relaxation), got {beta}")
    if delta is not None:
        check_delta(delta)


def check_space(target: Target) -> DiscreteSpace:
    """The target's space after checking it is discrete.

    Parameters
    ----------
    target : gradmc.base.Target
        The target a HAMS sampler is bound to.
    """
    return proposals.check_space(target, "HAMS")


# -- discrete over-relaxation (§2), float64 -----------------------------------------------------
#
# The value axis comes first and is unrolled (K is small and static): the float64 CDF is one
# (K, ...) array, and the cell bounds and counts are chains of selects and compares over its
# K rows, elementwise over the coordinates (and chains), so they fuse into a few loops
# instead of materialising a masked (..., K) float64 array per pick.


def _cumulative64(logits):
    """The CDF F (K, ...), F_k = S_k / S_K with S_k = Σ_{j≤k} w_j and w = exp(logits − max)
    over the last axis of the logits (..., K): float64, value axis first, F_K = 1 exactly.

    The exponentials are taken in the logits' dtype after the max-shift: a cell that
    underflows there (p < 1e-38 in float32) is far below what float64 CDF differences
    resolve anyway (~1e-16 / β, §2.2). Only the sums and the K − 1 divisions are float64;
    they keep T_β accurate down to that resolution.
    """
    return _cumulative64_rows(jnp.moveaxis(logits, -1, 0))  # value axis first: the K rows are contiguous


def _cumulative64_rows(rows):
    """:func:`_cumulative64` of the logits given value axis first, (K, ...).

    F is normalised once here, so the bounds of the picked cells are selects only (XLA's CPU
    code makes each float64 division over the cells a separate pass over memory).
    """
    weights = jnp.exp(rows - jnp.max(rows, axis=0)).astype(jnp.float64)
    sums = list(itertools.accumulate(weights))  # K static: unrolled (XLA's CPU cumsum is slower)
    return jnp.stack([S_k / sums[-1] for S_k in sums[:-1]] + [jnp.ones_like(sums[-1])])


def _logit_rows(a, b, space: DiscreteSpace):
    """The logits of :func:`~gradmc.discrete.proposals.factorised_logits` value axis first,
    (K, d), row k = a v_k + b v_k² with the same operations, so the same numbers: built this
    way they need no transpose (which XLA's CPU code makes several times slower than the
    float64 CDF itself). On Categorical (a, b shaped (d, K)) the rows are a + b transposed.
    """
    if isinstance(space, Categorical):
        return jnp.moveaxis(factorised_logits(a, b, space), -1, 0)
    v = jnp.asarray(space.values, a.dtype)
    b = jnp.asarray(b, a.dtype)
    return jnp.stack([a * v[k] + b * v[k] * v[k] for k in range(space.num_values)])


def _bounds(cumulative, k):
    """(F_{k−1}, F_k): the bounds of cell k (F_{−1} = 0, F_K = 1) from the CDF F, picked by
    one chain of selects over the K rows (no gather: XLA's CPU gather is slow under vmap).
    """
    lower, upper = jnp.zeros_like(cumulative[0]), jnp.zeros_like(cumulative[0])
    for j in range(len(cumulative)):
        lower = jnp.where(k == j, cumulative[j - 1] if j else 0.0, lower)
        upper = jnp.where(k == j, cumulative[j], upper)
    return lower, upper


def _transition64(lower_i, upper_i, lower_l, upper_l, beta):
    """T_β(l | i) (closed form of §2.2) from the bounds of cells i and l, float64:
    A(x) = G_h(x − F_{i−1} − F_{l−1}) − G_h(x − F_{i−1} − F_l), h = F_i − F_{i−1}.
    """
    h = upper_i - lower_i
    safe_h = jnp.where(h > 0, h, 1.0)

    def A(x):
        G = lambda y: jnp.where(y >= h, y - 0.5 * h, jnp.where(y > 0, 0.5 * y * y / safe_h, 0.0))  # noqa: E731
        return G(x - lower_i - lower_l) - G(x - lower_i - upper_l)

    return jnp.maximum(0.0, (A(beta) + A(1.0 + beta) - A(1.0)) / beta)


def _uniform64(bits):
    """Float64 uniforms on [0, 1) with 53 random bits, from uint32 bits shaped (2, ...)."""
    # via int32: a vectorised conversion (uint32 -> float64 is not, on x86)
    hi = jnp.right_shift(bits[0], 5).astype(jnp.int32).astype(jnp.float64)
    lo = jnp.right_shift(bits[1], 6).astype(jnp.int32).astype(jnp.float64)
    return (hi * 2.0**26 + lo) / 2.0**53


def _or_bits(key, shape):
    """Two uint32 words per coordinate: one 53-bit uniform (drawn outside x64: keys stay 32-bit)."""
    return random.bits(key, (2,) + tuple(shape))


def _reflect_and_jitter(q, lower, upper, beta):
    """W' = (−w + β ũ) mod 1 for w ~ U[F_{i−1}, F_i), ũ ~ U[0, 1), from one uniform ``q``.

    −w + βũ = Y − F_i with Y = (F_i − w) + βũ the sum of U[0, h) and U[0, β): a
    trapezoid on [0, h + β) (m₁ = min(h, β), m₂ = max(h, β)), drawn by inverting its CDF
    (quadratic, linear, quadratic). One 53-bit uniform instead of two; inverse-CDF
    sampling resolves probabilities to 2⁻⁵³, so the law of l matches T_β to float64.
    """
    h = upper - lower
    m1, m2 = jnp.minimum(h, beta), jnp.maximum(h, beta)
    ramp = 0.5 * m1 / m2  # CDF of Y at m₁ (and 1 − CDF at m₂)
    y = jnp.where(
        q < ramp,
        jnp.sqrt(2.0 * m1 * m2 * q),
        jnp.where(q <= 1.0 - ramp, m2 * q + 0.5 * m1, h + beta - jnp.sqrt(2.0 * m1 * m2 * jnp.maximum(1.0 - q, 0.0))),
    )
    return jnp.mod(y - upper, 1.0)


def _or_propose64(bits, i, cumulative, beta):
    """Algorithm 2 (§2.1) from indices ``i`` with the CDF F of the reference: the new
    indices l and T_β(l | i), float64.
    """
    lower_i, upper_i = _bounds(cumulative, i)
    w_new = _reflect_and_jitter(_uniform64(bits), lower_i, upper_i, beta)
    below = sum((F_k <= w_new).astype(jnp.int32) for F_k in cumulative)
    l = jnp.minimum(below, len(cumulative) - 1)  # noqa: E741
    return l, _transition64(lower_i, upper_i, *_bounds(cumulative, l), beta)


def reference_cdf(logits):
    """(p, F) of §2 for reference logits (..., K), float64, as :func:`or_sample` and
    :func:`or_transition` use them: F = S / S_K (F_K = 1) for the unnormalised CDF S, p its
    increments (:func:`_cumulative64`).

    Parameters
    ----------
    logits : jax.Array
        Unnormalised log-probabilities of the reference, (..., K).
    """
    with jax.enable_x64(True):
        F = jnp.moveaxis(_cumulative64(jnp.asarray(logits)), 0, -1)
        return jnp.diff(F, axis=-1, prepend=0.0), F


def or_transition(i, l, logits, beta):  # noqa: E741  (l: the paper's new index)
    """T_β(l | i; softmax(logits)) per row, computed in float64 (a float64 array).

    Parameters
    ----------
    i, l : array_like
        Current and new value indices, one per row.
    logits : jax.Array
        The reference's logits (..., K).
    beta : float
        The over-relaxation β ∈ (0, 1].
    """
    with jax.enable_x64(True):
        cumulative = _cumulative64(jnp.asarray(logits))
        i, l = jnp.asarray(i), jnp.asarray(l)  # noqa: E741
        return _transition64(*_bounds(cumulative, i), *_bounds(cumulative, l), jnp.float64(beta))


def or_sample(key, i, logits, beta):
    """Algorithm 2 (§2.1): new value indices l by discrete over-relaxation.

    From current indices ``i`` (d,), draw w ~ U[F_{i−1}, F_i), reflect and jitter it,
    w' = (−w + β ũ) mod 1, and return l with F_{l−1} ≤ w' < F_l, for the reference
    softmax(``logits``) (d, K); CDFs and the (one, 53-bit) uniform in float64.

    Parameters
    ----------
    key : jax.Array
        Key of the uniform.
    i : array_like
        Current value indices (d,).
    logits : jax.Array
        The reference's logits (d, K).
    beta : float
        The over-relaxation β ∈ (0, 1].
    """
    i = jnp.asarray(i)
    bits = _or_bits(key, i.shape)
    with jax.enable_x64(True):
        return _or_propose64(bits, i, _cumulative64(jnp.asarray(logits)), jnp.float64(beta))[0]


# -- the kernel ----------------------------------------------------------------------------------


def init(position, logdensity_fn: Callable, rng_key=None, momentum=None, precond=None) -> HamsState:
    """State at ``position`` with the momentum drawn from ``rng_key`` as ``precond`` holds it
    (u ~ N(0, I) for a dense W, v = L u ~ N(0, W + D) for a sparse one, §8.7), or the given
    ``momentum``.

    Parameters
    ----------
    position : array_like
        A position of the space.
    logdensity_fn : callable
        The target's log density f.
    rng_key : jax.Array, optional
        Key of the momentum draw (needed unless ``momentum`` is given).
    momentum : array_like, optional
        The momentum u.
    precond : HamsPreconditioner, StructuredPreconditioner or GraphPreconditioner, optional
        The second-order model (default: u ~ N(0, I), as for any dense one).
    """
    position = jnp.asarray(position, jnp.result_type(float))
    logdensity, grad = jax.value_and_grad(logdensity_fn)(position)
    if momentum is None:
        if rng_key is None:
            raise ValueError("init needs rng_key (to draw the momentum) or momentum")
        if precond is None:
            momentum = jax.random.normal(rng_key, (position.size,), position.dtype)
        else:
            momentum = precond.initial_momentum(rng_key, position.size, position.dtype)
    return HamsState(position, jnp.asarray(momentum, position.dtype).reshape(-1), logdensity, grad)


def build_kernel(beta: float = 1.0):
    """``kernel(key, state, logdensity_fn, space, precond, epsilon, phi) -> (HamsState, DiscreteInfo)``.

    ε, φ and the :class:`~gradmc.curvature.second_order.HamsPreconditioner` may be traced
    (grid searches vmap over them).

    Three d×d products per step — L m, W Δ and L⁻¹(L u') — the fewest for a dense L and W:
    the refresh needs both m and L m (a fresh ζ each step), the backward reference needs
    W Δ, and the stored momentum one more (u' = L⁻¹(L u'); m − LᵀΔ + φL⁻¹ρ would take two).
    The product with the stored L⁻¹ beats a triangular solve with a Cholesky L (half the
    flops, but XLA's CPU solve is ~10× slower for 100 chains). Everything else is O(d K).

    The momentum's refresh and move are the preconditioner's (``refresh``, ``move``): with a
    sparse W (:mod:`gradmc.curvature.sparse_w`, φ = 0 only, §8.7) the state's momentum is
    v = L u, and L ζ and (W + D)Δ are shifted elementwise products, O(d · len(offsets)).

    Parameters
    ----------
    beta : float
        The over-relaxation β ∈ (0, 1], static: 1 gives the vanilla proposal, β < 1 the
        over-relaxed one.
    """
    check_hyper(beta=beta)
    beta = float(beta)

    def kernel(
        rng_key,
        state: HamsState,
        logdensity_fn: Callable,
        space: DiscreteSpace,
        precond: HamsPreconditioner,
        epsilon,
        phi,
    ):
        precond.check_phi(phi)
        key_ref, key_prop, key_mh = jax.random.split(rng_key, 3)
        shape = state.position.shape  # (d,), or (d, k) one-hot rows: the algebra runs on the flat s
        s, grad = state.position.reshape(-1), state.grad.reshape(-1)
        kept, Lm = precond.refresh(key_ref, state.momentum, epsilon)  # m = −u⁻ in law, and L m (§7.3–7.4)
        a_f = (grad + precond.D * s + Lm).reshape(shape)  # Q(·; a, D): a_j x − D_j x²/2 (§1)
        b = jnp.broadcast_to(-0.5 * precond.D, s.shape).reshape(shape)
        if beta == 1.0:
            s_new, _, log_q_f = factorised_sample(key_prop, a_f, b, space)
        else:
            index = space.to_index(state.position)
            bits = _or_bits(key_prop, index.shape)
            with jax.enable_x64(True):
                cumulative_f = _cumulative64_rows(_logit_rows(a_f, b, space))
                new_index, t_f = _or_propose64(bits, index, cumulative_f, jnp.float64(beta))
            # computed once: fused into the shifted reads of a sparse W's products and the
            # target's gradient, XLA's GPU code would redo this float64 draw for each shift
            new_index, t_f = jax.lax.optimization_barrier((new_index, t_f))
            s_new = space.from_index(new_index)
        s_new = s_new.astype(s.dtype)
        f_new, g_new = jax.value_and_grad(logdensity_fn)(s_new)
        s_new, g_flat = s_new.reshape(-1), g_new.reshape(-1)
        u_new, Lu_new, kinetic = precond.move(s_new - s, kept, Lm, g_flat - grad, phi)  # PD eqs 31–32
        a_b = (g_flat + precond.D * s_new + Lu_new).reshape(shape)
        if beta == 1.0:
            log_proposal = factorised_logprob(state.position, a_b, b, space) - log_q_f
        else:  # PD eq. 37: T_β in float64, T_β(i | l) in the backward reference; the log of
            # each ratio in the chain's dtype (XLA's CPU float64 log is ~10× slower)
            with jax.enable_x64(True):
                cumulative_b = _cumulative64_rows(_logit_rows(a_b, b, space))
                t_b = _transition64(*_bounds(cumulative_b, new_index), *_bounds(cumulative_b, index), jnp.float64(beta))
                log_proposal = jnp.sum(jnp.log((t_b / t_f).astype(s.dtype)))
        proposed = HamsState(s_new.reshape(shape), u_new, f_new, g_new)
        # kept on rejection: the momentum flips
        flipped = HamsState(state.position, kept, state.logdensity, state.grad)
        log_correction = (*kinetic, log_proposal)  # PD eq. 37, in this order
        return proposals.metropolis(key_mh, state, proposed, log_correction, rejected=flipped)

    return kernel


def as_top_level_api(
    logdensity_fn: Callable, space: DiscreteSpace, precond: HamsPreconditioner, epsilon=0.9, phi=0.0, beta=1.0
) -> SamplingAlgorithm:
    """BlackJAX-style ``SamplingAlgorithm``; ``init(position, rng_key)`` draws the momentum.

    Parameters
    ----------
    logdensity_fn : callable
        The target's log density f.
    space : gradmc.spaces.DiscreteSpace
        The target's discrete space.
    precond : HamsPreconditioner, StructuredPreconditioner or GraphPreconditioner
        W, D, L, L⁻¹; or a sparse W by diagonals or by edges (φ = 0 only).
    epsilon : float
        The auto-regression ε ∈ [0, 1).
    phi : float
        The gradient-correction φ (PDHAMS parametrisation).
    beta : float
        The over-relaxation β ∈ (0, 1].
    """
    check_hyper(epsilon, beta)
    precond.check_phi(phi)

    def start(position, logdensity_fn, rng_key=None):
        return init(position, logdensity_fn, rng_key, precond=precond)

    return build_sampling_algorithm(
        build_kernel(beta), start, logdensity_fn, kernel_args=(space, precond, epsilon, phi), pass_rng_key_to_init=True
    )
