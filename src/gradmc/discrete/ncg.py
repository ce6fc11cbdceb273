"""Norm-constrained gradient sampler, NCG (Rhodes & Gutmann 2022, eq. 8, Algorithm B.1).

Proposal q_ε(s | s_t) ∝ exp(½∇f(s_t)ᵀ(s − s_t) − ‖s − s_t‖² / (2ε)), factorised as
Π_i σ([½∇f(s_t)_i + s_{t,i}/ε] s_i − s_i²/(2ε)) (eq. 8; one-hot categorical rows by
eq. 25), then a Metropolis–Hastings test (eq. 26). Same as DMALA (Zhang et al. 2022).
"""

from __future__ import annotations

from typing import Callable


from gradmc.base import SamplingAlgorithm, Target
from gradmc.discrete import proposal_mh
from gradmc.discrete.proposal_mh import DiscreteInfo, DiscreteState, check_positive_param, check_space
from gradmc.registry import register_sampler
from gradmc.spaces import DiscreteSpace

__all__ = ["DiscreteState", "DiscreteInfo", "init", "build_kernel", "as_top_level_api", "coefficients"]

init = proposal_mh.init


def coefficients(state: DiscreteState, step_size):
    """(a, b) of eq. 8: q(s | s_t) ∝ Π_i exp([½∇f(s_t)_i + s_{t,i}/ε] s_i − s_i²/(2ε))."""
    inverse = 1.0 / step_size
    return 0.5 * state.grad + inverse * state.position, -0.5 * inverse


def build_kernel():
    """``kernel(key, state, logdensity_fn, space, step_size)``."""

    def kernel(rng_key, state: DiscreteState, logdensity_fn: Callable, space: DiscreteSpace, step_size):
        def forward(key, state):
            return (*coefficients(state, step_size), None)

        def reverse(state, proposed, aux):
            return (*coefficients(proposed, step_size), 0.0)

        return proposal_mh.factorised_mh_step(rng_key, state, logdensity_fn, space, forward, reverse)

    return kernel


def as_top_level_api(logdensity_fn: Callable, space: DiscreteSpace, step_size) -> SamplingAlgorithm:
    step_size = check_positive_param("NCG step size ε", step_size)
    kernel = build_kernel()
    return SamplingAlgorithm(
        lambda position, rng_key=None: init(position, logdensity_fn),
        lambda rng_key, state: kernel(rng_key, state, logdensity_fn, space, step_size),
    )


@register_sampler("ncg", "norm-constrained gradient sampler (Rhodes & Gutmann 2022, Alg. B.1), step size ε", kind="discrete")
def build(target: Target, num_warmup: int, step_size=0.5):
    """Options: ``step_size`` ε > 0 (default 0.5, the paper's Ising value; tune with
    :func:`gradmc.adapt.step_search.search`)."""
    del num_warmup
    space = check_space(target, "ncg")
    step_size = check_positive_param("NCG step size ε", step_size)
    kernel = build_kernel()
    return proposal_mh.fixed_sampler(
        "ncg",
        lambda position: init(position, target.logdensity_fn),
        lambda key, state, step_size: kernel(key, state, target.logdensity_fn, space, step_size),
        {"step_size": step_size},
        lambda state, info, params: proposal_mh.stats(state, info, params["step_size"]),
    )
