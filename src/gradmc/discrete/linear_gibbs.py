"""Block Gibbs read from the gradient: every discrete site drawn at once from the first-order
expansion of the log density, with a Metropolis–Hastings test.

Where f is linear in the sites s (given the other blocks of a mixed model: a mixture's
one-hot assignments z_n enter its log joint as z_nᵀ g_n), f(s') = f(s) + ∇f(s)ᵀ(s' − s)
exactly, so the sites are independent given the rest with p(s'_i = v | rest) ∝
exp(∇f(s)_i v) (one-hot rows: ∝ exp ∇f(s)_{i,k}). The proposal draws every site from that
product, q(s' | s) ∝ exp(∇f(s)ᵀ s') (the factorised proposal of
:mod:`gradmc.discrete.proposals` with a = ∇f(s), b = 0), and the MH test scores the reverse
move with ∇f(s'): where f is linear ∇f(s') = ∇f(s) and log r = 0, an exact block Gibbs draw
of all sites for one gradient; where it is not, the test keeps the chain exact. It is NCG
(Rhodes & Gutmann 2022, eq. 8) at ε → ∞ with the whole gradient in place of half of it.
"""

from __future__ import annotations

from collections.abc import Callable

from blackjax.base import build_sampling_algorithm

from gradmc.base import SamplingAlgorithm
from gradmc.discrete import proposals
from gradmc.discrete.proposals import DiscreteInfo, DiscreteState
from gradmc.spaces import DiscreteSpace

__all__ = ["DiscreteState", "DiscreteInfo", "init", "build_kernel", "as_top_level_api"]

init = proposals.init


def build_kernel():
    """``kernel(key, state, logdensity_fn, space) -> (DiscreteState, DiscreteInfo)``."""

    def kernel(rng_key, state: DiscreteState, logdensity_fn: Callable, space: DiscreteSpace):
        def forward(key, state):
            return state.grad, 0.0, None

        def reverse(state, proposed, aux):
            return proposed.grad, 0.0, 0.0

        return proposals.factorised_mh_step(rng_key, state, logdensity_fn, space, forward, reverse)

    return kernel


def as_top_level_api(logdensity_fn: Callable, space: DiscreteSpace) -> SamplingAlgorithm:
    """BlackJAX-style ``SamplingAlgorithm`` of the kernel.

    Parameters
    ----------
    logdensity_fn : callable
        The target's log density f.
    space : gradmc.spaces.DiscreteSpace
        The target's space.
    """
    return build_sampling_algorithm(build_kernel(), init, logdensity_fn, kernel_args=(space,))
