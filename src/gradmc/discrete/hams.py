"""Discrete Hamiltonian-assisted Metropolis sampling: V-/O-DHAMS and V-/O-PDHAMS
(Zhou & Tan 2025; ``specs/discrete-hams.md`` §2, §3, §5, §7), one kernel for all four.

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
5. accept (s', u') with probability min(1, r), else (s, m) = (s, −u⁻): the momentum flips.
   A NaN/+inf log r (non-finite f or ∇f at s') is a rejection, flagged ``nonfinite``.

Special cases of the one kernel (§7.9, §11):

* **V-/O-PDHAMS**: W calibrated (:mod:`gradmc.adapt.calibration`), D = (δ − λ_min W) I,
  L L^T = W + D; β = 1 (V) or β < 1 (O);
* **V-/O-DHAMS**: W = 0, D = δ⁻² I, L = δ⁻¹ I and φ_PDHAMS = φ_DHAMS / δ;
* **PAVG** (variance form, §6.3): ε = 0, φ = 0, β = 1.

The vanilla proposal and its score use the shared factorised-proposal routine
(:func:`gradmc.spaces.factorised_sample`, ``factorised_logprob``) and ζ is drawn with
:func:`gradmc.random.normal`, as PAVG draws them, so the §7.9 reductions hold with the same
random numbers. The over-relaxation CDFs and transition probability T_β (§2.2) and its
sampling are computed in float64 inside the jitted kernel (``jax.enable_x64`` locally) even
when the chain runs in float32; the rest of the step stays in the chain's dtype. The module
also has the symmetric lattice Metropolis of §4 (``lattice-metropolis``).
Scalar-valued spaces only (Binary, Spin, Ordinal): W acts on the position vector.
"""

from __future__ import annotations

import itertools
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from gradmc.adapt import calibration
from gradmc.base import Sampler, SamplingAlgorithm, Target, mh_accept, step_stats
from gradmc.discrete import proposal_mh, uniform
from gradmc.discrete.proposal_mh import check_radius, is_concrete
from gradmc.registry import register_sampler
from gradmc import random
from gradmc.spaces import Categorical, DiscreteSpace, factorised_logits, factorised_logprob, factorised_sample

__all__ = [
    "HamsState",
    "HamsInfo",
    "Preconditioner",
    "check_hyper",
    "check_space",
    "make_preconditioner",
    "pdhams_preconditioner",
    "dhams_preconditioner",
    "reference_cdf",
    "or_transition",
    "or_sample",
    "init",
    "build_kernel",
    "as_top_level_api",
    "metropolis_kernel",
    "DHAMS_SETTINGS",
]

#: The DHAMS code's tuned settings on the discrete Gaussian (spec §5): (δ, ε, β, φ).
DHAMS_SETTINGS = {"v-dhams": (0.9, 0.9, 1.0, -0.5), "o-dhams": (0.75, 0.9, 0.1, -0.7)}


class HamsState(NamedTuple):
    position: jax.Array
    momentum: jax.Array
    logdensity: jax.Array
    grad: jax.Array


class HamsInfo(NamedTuple):
    acceptance_rate: jax.Array
    is_accepted: jax.Array
    nonfinite: jax.Array
    log_ratio: jax.Array
    jump: jax.Array  # ||s_{t+1} - s_t||_1 (0 when rejected)


class Preconditioner(NamedTuple):
    """W, D, L and L⁻¹ of the second-order model; each matrix is (d, d), or (d,) when diagonal."""

    W: jax.Array
    D: jax.Array
    L: jax.Array
    L_inv: jax.Array


def _apply(matrix, x):
    return matrix @ x if matrix.ndim == 2 else matrix * x


# -- input checks and preconditioners (host side) --------------------------------------------


def check_hyper(epsilon=0.0, beta=1.0, delta=None) -> None:
    """``ValueError`` unless ε ∈ [0, 1), β ∈ (0, 1] and δ > 0 (traced values pass)."""
    if is_concrete(epsilon) and not (0.0 <= float(epsilon) < 1.0):
        raise ValueError(f"the auto-regression ε must lie in [0, 1), got {epsilon}")
    if not (0.0 < float(beta) <= 1.0):
        raise ValueError(f"the over-relaxation β must lie in (0, 1] (1 = no over-relaxation), got {beta}")
    if delta is not None and is_concrete(delta) and not (np.isfinite(float(delta)) and float(delta) > 0):
        raise ValueError(f"the step size δ must be a finite number > 0, got {delta}")


def check_space(target: Target) -> DiscreteSpace:
    space = proposal_mh.check_space(target, "HAMS")
    if isinstance(space, Categorical):
        raise ValueError("HAMS samplers need a scalar-valued space (Binary, Spin, Ordinal), not one-hot Categorical")
    return space


def make_preconditioner(W, D, L=None) -> Preconditioner:
    """Preconditioner from W (d, d), D (d,) and optionally L with L Lᵀ = W + D (default: §8.5).

    Raises ``ValueError`` for a non-symmetric W, a W + D that is not positive definite, or
    an L that does not factor W + D.
    """
    W = calibration.check_w(W)
    D = np.asarray(D, np.float64)
    if L is None:
        L, L_inv, _ = calibration.factor(W, D)
    else:
        calibration.factor(W, D)  # checks W + D ≻ 0
        L = np.asarray(L, np.float64)
        P = W + np.diag(D)
        if L.shape != W.shape or not np.allclose(L @ L.T, P, rtol=1e-5, atol=1e-5 * np.abs(P).max()):
            raise ValueError("L must satisfy L Lᵀ = W + D")
        L_inv = np.linalg.inv(L)
    f32 = lambda x: jnp.asarray(x, jnp.float32)  # noqa: E731
    return Preconditioner(f32(W), f32(D), f32(L), f32(L_inv))


def pdhams_preconditioner(W, delta) -> Preconditioner:
    """PDHAMS/PAVG: D = (δ − λ_min W) I (§8.4), L by §8.5."""
    check_hyper(delta=delta)
    return make_preconditioner(W, calibration.lambda_shift(W, delta))


def dhams_preconditioner(delta, dim: int) -> Preconditioner:
    """DHAMS as PDHAMS (§7.9): W = 0, D = δ⁻² I, L = δ⁻¹ I (diagonal)."""
    check_hyper(delta=delta)
    delta = jnp.asarray(delta, jnp.float32)
    ones = jnp.ones(int(dim), jnp.float32)
    return Preconditioner(0.0 * ones, ones / delta**2, ones / delta, ones * delta)


# -- discrete over-relaxation (§2), float64 -----------------------------------------------------
#
# The value axis comes first and is unrolled (K is small and static): the float64 CDF is one
# (K, ...) array, and the cell bounds and counts are chains of selects and compares over its
# K rows, elementwise over the coordinates (and chains), so they fuse into a few loops
# instead of materialising a masked (..., K) float64 array per pick.


def _cumulative64(logits):
    """W (K, ...) with W_k = Σ_{j≤k} w_j, w = exp(logits − max) over the last axis of the
    logits (..., K): the unnormalised CDF, float64, value axis first.

    The exponentials are taken in the logits' dtype after the max-shift: a cell that
    underflows there (p < 1e-38 in float32) is far below what float64 CDF differences
    resolve anyway (~1e-16 / β, spec §2.2). Only the sums are float64; they keep T_β
    accurate down to that resolution. F = W / W_K is formed only for picked cells.
    """
    rows = jnp.moveaxis(logits, -1, 0)  # value axis first: the K rows are contiguous
    weights = jnp.exp(rows - jnp.max(rows, axis=0)).astype(jnp.float64)
    return jnp.stack(list(itertools.accumulate(weights)))  # K static: unrolled (XLA's CPU cumsum is slower)


def _bounds(W, k):
    """(F_{k−1}, F_k): the normalised bounds of cell k (F_{−1} = 0, F_K = 1), picked by
    one chain of selects over the K rows (no gather: XLA's CPU gather is slow under vmap)."""
    lower, upper = jnp.zeros_like(W[0]), jnp.zeros_like(W[0])
    for j in range(len(W)):
        lower, upper = jnp.where(k == j, W[j - 1] if j else 0.0, lower), jnp.where(k == j, W[j], upper)
    return lower / W[-1], upper / W[-1]


def _transition64(lower_i, upper_i, lower_l, upper_l, beta):
    """T_β(l | i) (closed form of §2.2) from the bounds of cells i and l, float64:
    A(x) = G_h(x − F_{i−1} − F_{l−1}) − G_h(x − F_{i−1} − F_l), h = F_i − F_{i−1}."""
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
    """w' = (−w + β ũ) mod 1 for w ~ U[F_{i−1}, F_i), ũ ~ U[0, 1), from one uniform ``q``.

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


def _or_propose64(bits, i, W, beta):
    """Algorithm 2 (§2.1) from indices ``i`` with the cumulative W of the reference:
    the new indices l and T_β(l | i), float64."""
    lower_i, upper_i = _bounds(W, i)
    w_new = _reflect_and_jitter(_uniform64(bits), lower_i, upper_i, beta)
    threshold = w_new * W[-1]
    l = jnp.minimum(sum((Wk <= threshold).astype(jnp.int32) for Wk in W), len(W) - 1)
    return l, _transition64(lower_i, upper_i, *_bounds(W, l), beta)


def reference_cdf(logits):
    """(p, F) of §2 for reference logits (..., K), float64, as :func:`or_sample` and
    :func:`or_transition` use them: F = W / W_K (F_K = 1), p its increments."""
    with jax.enable_x64(True):
        W = _cumulative64(jnp.asarray(logits))
        F = jnp.moveaxis(W / W[-1], 0, -1)
        return jnp.diff(F, axis=-1, prepend=0.0), F


def or_transition(i, l, logits, beta):
    """T_β(l | i; softmax(logits)) per row, logits (..., K), computed in float64 (a float64 array)."""
    with jax.enable_x64(True):
        W = _cumulative64(jnp.asarray(logits))
        i, l = jnp.asarray(i), jnp.asarray(l)
        return _transition64(*_bounds(W, i), *_bounds(W, l), jnp.float64(beta))


def or_sample(key, i, logits, beta):
    """Algorithm 2 (§2.1): from current indices ``i`` (d,), draw w ~ U[F_{i−1}, F_i), reflect
    and jitter it, w' = (−w + β ũ) mod 1, and return l with F_{l−1} ≤ w' < F_l, for the
    reference softmax(``logits``) (d, K); CDFs and the (one, 53-bit) uniform in float64."""
    i = jnp.asarray(i)
    bits = _or_bits(key, i.shape)
    with jax.enable_x64(True):
        return _or_propose64(bits, i, _cumulative64(jnp.asarray(logits)), jnp.float64(beta))[0]


# -- the kernel ----------------------------------------------------------------------------------


def init(position, logdensity_fn: Callable, rng_key=None, momentum=None) -> HamsState:
    """State at ``position`` with u ~ N(0, I) from ``rng_key`` (or the given ``momentum``)."""
    position = jnp.asarray(position, jnp.result_type(float))
    logdensity, grad = jax.value_and_grad(logdensity_fn)(position)
    if momentum is None:
        if rng_key is None:
            raise ValueError("init needs rng_key (to draw the momentum) or momentum")
        momentum = jax.random.normal(rng_key, position.shape, position.dtype)
    return HamsState(position, jnp.asarray(momentum, position.dtype), logdensity, grad)


def build_kernel(beta: float = 1.0):
    """``kernel(key, state, logdensity_fn, space, precond, epsilon, phi) -> (HamsState, HamsInfo)``.

    ``beta`` (a Python float, static) selects the vanilla (β = 1) or over-relaxed proposal;
    ε, φ and the :class:`Preconditioner` may be traced (grid searches vmap over them).

    Three d×d products per step — L m, W Δ and L⁻¹(L u') — the fewest for a dense L and W:
    the refresh needs both m and L m (a fresh ζ each step), the backward reference needs
    W Δ, and the stored momentum one more (u' = L⁻¹(L u'); m − LᵀΔ + φL⁻¹ρ would take two).
    The product with the stored L⁻¹ beats a triangular solve with a Cholesky L (half the
    flops, but XLA's CPU solve is ~10× slower for 100 chains). Everything else is O(d K).
    """
    check_hyper(beta=beta)
    beta = float(beta)

    def kernel(rng_key, state: HamsState, logdensity_fn: Callable, space: DiscreteSpace, precond: Preconditioner, epsilon, phi):
        key_ref, key_prop, key_mh = jax.random.split(rng_key, 3)
        s, u = state.position, state.momentum
        zeta = random.normal(key_ref, s.shape, s.dtype)  # PAVG's generator: the same random numbers (§7.9)
        m = -epsilon * u + jnp.sqrt(1.0 - epsilon**2) * zeta  # = −u⁻ in law (§7.3–7.4)
        Lm = _apply(precond.L, m)
        a_f, b = state.grad + precond.D * s + Lm, -0.5 * precond.D  # Q(·; a, D): a_j x − D_j x²/2 (§1)
        if beta == 1.0:
            s_new, _, log_q_f = factorised_sample(key_prop, a_f, b, space)
        else:
            index = space.to_index(s)
            bits = _or_bits(key_prop, index.shape)
            with jax.enable_x64(True):
                W_f = _cumulative64(factorised_logits(a_f, b, space))
                new_index, t_f = _or_propose64(bits, index, W_f, jnp.float64(beta))
            s_new = space.from_index(new_index)
        s_new = s_new.astype(s.dtype)
        f_new, g_new = jax.value_and_grad(logdensity_fn)(s_new)
        delta = s_new - s
        W_delta = _apply(precond.W, delta)
        rho = g_new - state.grad - W_delta
        Lu_new = -(W_delta + precond.D * delta) + Lm + phi * rho  # = L u' (PD eq. 32)
        u_new = _apply(precond.L_inv, Lu_new)
        a_b = g_new + precond.D * s_new + Lu_new
        if beta == 1.0:
            log_proposal = factorised_logprob(s, a_b, b, space) - log_q_f
        else:  # PD eq. 37, in float64; T_β(i | l) in the backward reference
            with jax.enable_x64(True):
                W_b = _cumulative64(factorised_logits(a_b, b, space))
                t_b = _transition64(*_bounds(W_b, new_index), *_bounds(W_b, index), jnp.float64(beta))
                log_proposal = jnp.sum(jnp.log(t_b) - jnp.log(t_f)).astype(s.dtype)
        log_ratio = f_new - state.logdensity - 0.5 * jnp.sum(u_new**2) + 0.5 * jnp.sum(m**2) + log_proposal
        accept, prob, nonfinite = mh_accept(key_mh, log_ratio)
        proposed = HamsState(s_new, u_new, f_new, g_new)
        stay = HamsState(s, m, state.logdensity, state.grad)
        new_state = jax.tree.map(lambda a, b: jnp.where(accept, a, b), proposed, stay)
        jump = jnp.where(accept, jnp.sum(jnp.abs(delta)), 0.0)
        return new_state, HamsInfo(prob, accept, nonfinite, log_ratio, jump)

    return kernel


def as_top_level_api(logdensity_fn: Callable, space: DiscreteSpace, precond: Preconditioner, epsilon=0.9, phi=0.0, beta=1.0) -> SamplingAlgorithm:
    """BlackJAX-style ``SamplingAlgorithm``; ``init(position, rng_key)`` draws the momentum."""
    check_hyper(epsilon, beta)
    kernel = build_kernel(beta)
    return SamplingAlgorithm(
        lambda position, rng_key=None: init(position, logdensity_fn, rng_key),
        lambda rng_key, state: kernel(rng_key, state, logdensity_fn, space, precond, epsilon, phi),
    )


def _stats(state, info, delta):
    return step_stats(
        state.logdensity, info.acceptance_rate, info.is_accepted, delta, 1, nonfinite=info.nonfinite,
        extra={"jump": jnp.asarray(info.jump, jnp.float32), "log_ratio": jnp.asarray(info.log_ratio, jnp.float32)},
    )


def _sampler(name, target, space, precond, epsilon, phi, beta, delta) -> Sampler:
    """Fixed kernel (no adaptation): warm-up steps are ordinary steps; the preconditioner is a
    constant shared by all chains, so its mat-vecs batch across chains."""
    kernel = build_kernel(beta)
    params = {"epsilon": jnp.float32(epsilon), "phi": jnp.float32(phi)}

    def step(key, state, params):
        state, info = kernel(key, state, target.logdensity_fn, space, precond, params["epsilon"], params["phi"])
        return state, _stats(state, info, delta)

    return Sampler(
        name,
        init=lambda key, position: init(position, target.logdensity_fn, key),
        warmup_step=lambda key, state, t: step(key, state, params),
        finalize=lambda state: (state, params),
        step=step,
        position=lambda state: state.position,
    )


def _w_of(target: Target, W, name: str):
    if W is None:
        W = target.metadata.get("W")
    if W is None:
        raise ValueError(
            f"{name} needs W (the second-order model): pass W=, e.g. from "
            "gradmc.adapt.calibration.fit_w_gradients / fit_w_values on burn-in draws"
        )
    return calibration.check_w(W, check_space(target).dim)


def _dhams_builder(name, beta_default, settings):
    delta0, eps0, _, phi0 = settings

    def build(target: Target, num_warmup: int, delta=delta0, epsilon=eps0, phi=phi0, beta=beta_default):
        del num_warmup
        space = check_space(target)
        check_hyper(epsilon, beta, delta)
        precond = dhams_preconditioner(delta, space.dim)
        return _sampler(name, target, space, precond, epsilon, float(phi) / float(delta), beta, delta)

    build.__doc__ = (
        f"Options: δ (default {delta0}), ε (default {eps0}), φ in the DHAMS parametrisation "
        f"(default {phi0}), β (default {beta_default}); defaults = the DHAMS code's discrete-Gaussian values."
    )
    return build


register_sampler(
    "v-dhams", "vanilla discrete HAMS (Zhou & Tan, DHAMS; spec §5): δ, ε, φ; β = 1", kind="discrete"
)(_dhams_builder("v-dhams", 1.0, DHAMS_SETTINGS["v-dhams"]))
register_sampler(
    "o-dhams", "over-relaxed discrete HAMS (Zhou & Tan, DHAMS; spec §5, §2): δ, ε, φ, β < 1", kind="discrete"
)(_dhams_builder("o-dhams", 0.1, DHAMS_SETTINGS["o-dhams"]))


def _pdhams_builder(name, beta_default, eps_default, phi_default):
    def build(target: Target, num_warmup: int, W=None, delta=1.0, epsilon=eps_default, phi=phi_default, beta=beta_default):
        del num_warmup
        space = check_space(target)
        check_hyper(epsilon, beta, delta)
        precond = pdhams_preconditioner(_w_of(target, W, name), delta)
        return _sampler(name, target, space, precond, epsilon, phi, beta, delta)

    build.__doc__ = (
        "Options: ``W`` the second-order model (default: the target's ``metadata['W']``; else "
        "calibrate with gradmc.adapt.calibration), δ > 0 (D = (δ − λ_min W) I), "
        f"ε (default {eps_default}), φ (default {phi_default}), β (default {beta_default})."
    )
    return build


register_sampler(
    "v-pdhams", "vanilla preconditioned discrete HAMS (Zhou & Tan 2025, Alg. 1): W, δ, ε, φ; β = 1", kind="discrete"
)(_pdhams_builder("v-pdhams", 1.0, 0.9, 0.0))
register_sampler(
    "o-pdhams", "over-relaxed preconditioned discrete HAMS (Zhou & Tan 2025, Alg. 3): W, δ, ε, φ, β", kind="discrete"
)(_pdhams_builder("o-pdhams", 0.1, 0.9, 0.0))


@register_sampler(
    "pavg-variance",
    "PAVG in Zhou & Tan's variance form (spec §6.3) = PDHAMS with ε = 0, φ = 0, β = 1: W, δ",
    kind="discrete",
)
def build_pavg(target: Target, num_warmup: int, W=None, delta=1.0):
    """Options: ``W`` (default: the target's ``metadata['W']``), δ > 0 (D = (δ − λ_min W) I)."""
    del num_warmup
    space = check_space(target)
    check_hyper(delta=delta)
    precond = pdhams_preconditioner(_w_of(target, W, "pavg-variance"), delta)
    return _sampler("pavg-variance", target, space, precond, 0.0, 0.0, 1.0, delta)


# -- Metropolis on lattices (§4) ---------------------------------------------------------------


def metropolis_kernel(rng_key, state, logdensity_fn: Callable, space: DiscreteSpace, radius):
    """Symmetric lattice Metropolis (§4): one uniform coordinate j, offset k uniform in
    {−r, …, r} (0 allowed); a move off the value set is rejected."""
    key_j, key_k, key_mh = jax.random.split(rng_key, 3)
    index = space.to_index(state.position)
    j = jax.random.randint(key_j, (), 0, index.shape[0])
    new_index = index.at[j].add(jax.random.randint(key_k, (), -radius, radius + 1))
    inside = (new_index[j] >= 0) & (new_index[j] < space.num_values)
    proposed = uniform.init(space.from_index(jnp.clip(new_index, 0, space.num_values - 1)), logdensity_fn)
    return proposal_mh.metropolis(key_mh, state, proposed, jnp.where(inside, 0.0, -jnp.inf))


@register_sampler(
    "lattice-metropolis",
    "Metropolis on a lattice (Zhou & Tan spec §4): one random coordinate moves by k ~ U{-r..r}; off-lattice rejected",
    kind="discrete",
)
def build_metropolis(target: Target, num_warmup: int, radius=2):
    """Options: ``radius`` r >= 1 (integer; the papers' tuned r = 2 on the discrete Gaussian)."""
    del num_warmup
    space = check_space(target)
    radius = check_radius(radius)

    return proposal_mh.fixed_sampler(
        "lattice-metropolis",
        lambda position: uniform.init(position, target.logdensity_fn),
        lambda key, state, radius: metropolis_kernel(key, state, target.logdensity_fn, space, radius),
        {"radius": radius},
        lambda state, info, params: proposal_mh.stats(state, info, num_grad_evals=0),
    )
