"""Auxiliary-variable gradient sampler, AVG (Rhodes & Gutmann 2022, eq. 13, Algorithm B.2),
and the auxiliary-variable step it shares with PAVG and block Gibbs.

The joint π(s, z) = exp(f(s)) N(z; R s, I) with RᵀR = M_ε = M + d_ε I (eqs 38–39; R the
symmetric root, or any other), is sampled block-wise: z ~ N(R s_t, I), then s from the
factorised proposal of eq. 40, q(s | z, s_t) ∝ Π_i exp([∇f(s_t) − M s_t + Rᵀz]_i s_i −
(d_ε/2) s_i²), accepted by the MH ratio of eq. 28. AVG is the case M = 0, R = √(2/ε) I,
d_ε = 2/ε (eq. 13); PAVG passes a general M and its root.

Writing z = R s_t + n, n ~ N(0, I), and Δ = s' − s_t, every term needs only Rᵀn and M Δ
(RᵀR = M_ε): the forward coefficient is ∇f(s_t) + d_ε s_t + Rᵀn, the reverse one
∇f(s') − M Δ + d_ε s_t + Rᵀn, and log N(z; R s', I) − log N(z; R s_t, I) =
(Rᵀn)ᵀΔ − ½ Δᵀ M Δ − ½ d_ε ΔᵀΔ — two mat-vecs per step instead of five.
"""

from __future__ import annotations

from typing import Callable

import jax.numpy as jnp

from gradmc.base import SamplingAlgorithm, Target
from gradmc.discrete import proposal_mh
from gradmc.discrete.proposal_mh import DiscreteInfo, DiscreteState, check_positive_param, check_space
from gradmc.registry import register_sampler
from gradmc.random import normal
from gradmc.spaces import DiscreteSpace

__all__ = ["DiscreteState", "DiscreteInfo", "init", "build_kernel", "as_top_level_api", "auxiliary_proposal", "auxiliary_step"]

init = proposal_mh.init


def auxiliary_proposal(apply_M: Callable | None, apply_root: Callable, d_eps):
    """``(forward, reverse)`` of eqs 38–40 for :func:`~gradmc.discrete.proposal_mh.factorised_mh_step`.

    ``apply_M(x)`` and ``apply_root(x)`` map a position-shaped array to M x and Rᵀx, for
    a root with RᵀR = M_ε (R x when R is symmetric; z = R s_t + n then has the joint of
    eq. 38) (``apply_M=None``: M = 0, AVG, whose terms in M Δ are then skipped);
    ``d_eps`` is the diagonal shift of eq. 39. The auxiliary variable carried from
    forward to reverse is (d_ε s_t + Rᵀn, Rᵀn).
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
    """One AVG/PAVG step (Algorithms B.2/B.3)."""
    forward, reverse = auxiliary_proposal(apply_M, apply_root, d_eps)
    return proposal_mh.factorised_mh_step(rng_key, state, logdensity_fn, space, forward, reverse)


def build_kernel():
    """``kernel(key, state, logdensity_fn, space, step_size)``."""

    def kernel(rng_key, state: DiscreteState, logdensity_fn: Callable, space: DiscreteSpace, step_size):
        scale = jnp.sqrt(2.0 / step_size)
        return auxiliary_step(
            rng_key, state, logdensity_fn, space, None, lambda x: scale * x, 2.0 / step_size
        )

    return kernel


def as_top_level_api(logdensity_fn: Callable, space: DiscreteSpace, step_size) -> SamplingAlgorithm:
    step_size = check_positive_param("AVG step size ε", step_size)
    kernel = build_kernel()
    return SamplingAlgorithm(
        lambda position, rng_key=None: init(position, logdensity_fn),
        lambda rng_key, state: kernel(rng_key, state, logdensity_fn, space, step_size),
    )


@register_sampler("avg", "auxiliary-variable gradient sampler (Rhodes & Gutmann 2022, Alg. B.2), step size ε", kind="discrete")
def build(target: Target, num_warmup: int, step_size=0.2):
    """Options: ``step_size`` ε > 0 (default 0.2, the paper's Ising value)."""
    del num_warmup
    space = check_space(target, "avg")
    step_size = check_positive_param("AVG step size ε", step_size)
    kernel = build_kernel()
    return proposal_mh.fixed_sampler(
        "avg",
        lambda position: init(position, target.logdensity_fn),
        lambda key, state, step_size: kernel(key, state, target.logdensity_fn, space, step_size),
        {"step_size": step_size},
        lambda state, info, params: proposal_mh.stats(state, info, params["step_size"]),
    )
