"""Auxiliary-variable gradient sampler, AVG (Rhodes & Gutmann 2022, eq. 13, Algorithm B.2),
and the auxiliary-variable step it shares with PAVG and block Gibbs.

The joint π(s, z) = exp(f(s)) N(z; R s, I) with RᵀR = M_ε = M + d_ε I (eqs 38–39) is
sampled block-wise: z ~ N(R s_t, I), then s from the factorised proposal of eq. 40,
q(s | z, s_t) ∝ Π_i exp([∇f(s_t) − M s_t + Rᵀz]_i s_i − (d_ε/2) s_i²),
accepted by the MH ratio of eq. 28. AVG is the case M = 0, R = √(2/ε) I, d_ε = 2/ε
(eq. 13); PAVG passes a general M and its root.
"""

from __future__ import annotations

from typing import Callable

import jax
import jax.numpy as jnp

from gradmc.base import SamplingAlgorithm, Target
from gradmc.discrete import proposal_mh
from gradmc.discrete.proposal_mh import DiscreteInfo, DiscreteState, check_positive_param, check_space
from gradmc.registry import register_sampler
from gradmc.spaces import DiscreteSpace

__all__ = ["DiscreteState", "DiscreteInfo", "init", "build_kernel", "as_top_level_api", "auxiliary_family", "auxiliary_step"]

init = proposal_mh.init


def auxiliary_family(apply_M: Callable, apply_root: Callable, d_eps):
    """``(draw_aux, coefficients, aux_logpdf)`` of eqs 38–40.

    ``apply_M(x)`` and ``apply_root(x)`` map a position-shaped array to M x and R x
    (R symmetric, so Rᵀz = R z); ``d_eps`` is the diagonal shift of eq. 39.
    """

    def draw_aux(key, position):
        return apply_root(position) + jax.random.normal(key, position.shape, position.dtype)

    def coefficients(position, grad, z):
        return grad - apply_M(position) + apply_root(z), -0.5 * d_eps

    def aux_logpdf(z, position):
        return -0.5 * jnp.sum(jnp.square(z - apply_root(position)))

    return draw_aux, coefficients, aux_logpdf


def auxiliary_step(rng_key, state, logdensity_fn, space, apply_M, apply_root, d_eps):
    """One AVG/PAVG step (Algorithms B.2/B.3)."""
    draw_aux, coefficients, aux_logpdf = auxiliary_family(apply_M, apply_root, d_eps)
    return proposal_mh.factorised_mh_step(rng_key, state, logdensity_fn, space, coefficients, draw_aux, aux_logpdf)


def build_kernel():
    """``kernel(key, state, logdensity_fn, space, step_size)``."""

    def kernel(rng_key, state: DiscreteState, logdensity_fn: Callable, space: DiscreteSpace, step_size):
        scale = jnp.sqrt(2.0 / step_size)
        return auxiliary_step(
            rng_key, state, logdensity_fn, space, jnp.zeros_like, lambda x: scale * x, 2.0 / step_size
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
