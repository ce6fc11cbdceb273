"""Norm-constrained gradient sampler, NCG (Rhodes & Gutmann 2022, eq. 8, Algorithm B.1).

Proposal q_ε(s | s_t) ∝ exp(½∇f(s_t)ᵀ(s − s_t) − ‖s − s_t‖² / (2ε)), factorised as
Π_i σ([½∇f(s_t)_i + s_{t,i}/ε] s_i − s_i²/(2ε)) (eq. 8; one-hot categorical rows by
eq. 25), then a Metropolis–Hastings test (eq. 26). Same as DMALA (Zhang et al. 2022).
"""

from __future__ import annotations

from collections.abc import Callable

from blackjax.base import build_sampling_algorithm

from gradmc.base import SamplingAlgorithm
from gradmc.checks import check_positive_param
from gradmc.discrete import proposals
from gradmc.discrete.proposals import DiscreteInfo, DiscreteState
from gradmc.spaces import DiscreteSpace

__all__ = ["DiscreteState", "DiscreteInfo", "init", "build_kernel", "as_top_level_api", "coefficients"]

init = proposals.init


def coefficients(state: DiscreteState, step_size):
    """(a, b) of eq. 8: q(s | s_t) ∝ Π_i exp([½∇f(s_t)_i + s_{t,i}/ε] s_i − s_i²/(2ε)).

    Parameters
    ----------
    state : gradmc.discrete.proposals.DiscreteState
        The current state s_t (with its gradient).
    step_size : float or jax.Array
        ε > 0.
    """
    inverse = 1.0 / step_size
    return 0.5 * state.grad + inverse * state.position, -0.5 * inverse


def build_kernel():
    """``kernel(key, state, logdensity_fn, space, step_size) -> (DiscreteState, DiscreteInfo)``."""

    def kernel(rng_key, state: DiscreteState, logdensity_fn: Callable, space: DiscreteSpace, step_size):
        def forward(key, state):
            return (*coefficients(state, step_size), None)

        def reverse(state, proposed, aux):
            return (*coefficients(proposed, step_size), 0.0)

        return proposals.factorised_mh_step(rng_key, state, logdensity_fn, space, forward, reverse)

    return kernel


def as_top_level_api(logdensity_fn: Callable, space: DiscreteSpace, step_size) -> SamplingAlgorithm:
    """BlackJAX-style ``SamplingAlgorithm`` of NCG.

    Parameters
    ----------
    logdensity_fn : callable
        The target's log density f.
    space : gradmc.spaces.DiscreteSpace
        The target's space.
    step_size : float
        ε > 0.
    """
    step_size = check_positive_param("NCG step size ε", step_size)
    return build_sampling_algorithm(build_kernel(), init, logdensity_fn, kernel_args=(space, step_size))
