"""Auxiliary-variable gradient sampler, AVG (Rhodes & Gutmann 2022, eq. 13, Algorithm B.2).

The joint π(s, z) = exp(f(s)) N(z; R s, I) with RᵀR = M_ε = M + d_ε I (eqs 38–39) is
sampled block-wise: z ~ N(R s_t, I), then s from the factorised proposal of eq. 40,
accepted by the MH ratio of eq. 28 (:func:`gradmc.discrete.proposals.auxiliary_proposal`,
shared with PAVG and block Gibbs). AVG is the case M = 0, R = √(2/ε) I, d_ε = 2/ε (eq. 13).
"""

from __future__ import annotations

from collections.abc import Callable

import jax.numpy as jnp
from blackjax.base import build_sampling_algorithm

from gradmc.base import SamplingAlgorithm
from gradmc.checks import check_positive_param
from gradmc.discrete import proposals
from gradmc.discrete.proposals import DiscreteInfo, DiscreteState, auxiliary_step
from gradmc.spaces import DiscreteSpace

__all__ = ["DiscreteState", "DiscreteInfo", "init", "build_kernel", "as_top_level_api"]

init = proposals.init


def build_kernel():
    """``kernel(key, state, logdensity_fn, space, step_size) -> (DiscreteState, DiscreteInfo)``."""

    def kernel(rng_key, state: DiscreteState, logdensity_fn: Callable, space: DiscreteSpace, step_size):
        scale = jnp.sqrt(2.0 / step_size)
        return auxiliary_step(rng_key, state, logdensity_fn, space, None, lambda x: scale * x, 2.0 / step_size)

    return kernel


def as_top_level_api(logdensity_fn: Callable, space: DiscreteSpace, step_size) -> SamplingAlgorithm:
    """BlackJAX-style ``SamplingAlgorithm`` of AVG.

    Parameters
    ----------
    logdensity_fn : callable
        The target's log density f.
    space : gradmc.spaces.DiscreteSpace
        The target's space.
    step_size : float
        ε > 0.
    """
    step_size = check_positive_param("AVG step size ε", step_size)
    return build_sampling_algorithm(build_kernel(), init, logdensity_fn, kernel_args=(space, step_size))
