"""Block Gibbs for quadratic log densities (Martens & Sutskever 2010), as PAVG with the
true M (Rhodes & Gutmann 2022, §3.3).

For f(s) = sᵀJs + bᵀs the second-order expansion of eq. 14 with M = ∇²f = J + Jᵀ is exact,
so the factorised q(s | z, s_t) of eq. 40 *is* the conditional π(s | z) of the joint
π(s, z) = exp(f(s)) N(z; M_ε^{1/2} s, I): alternating z ~ π(z | s) and s ~ π(s | z) is an
exact Gibbs sampler and needs no MH test (acceptance 1). Only valid for quadratic f.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
from blackjax.base import build_sampling_algorithm

from gradmc.base import SamplingAlgorithm, Target
from gradmc.checks import check_positive_param, check_symmetric
from gradmc.curvature.pavg_model import PAVGPreconditioner, make_preconditioner
from gradmc.discrete import proposals
from gradmc.discrete.proposals import (
    DiscreteInfo,
    DiscreteState,
    auxiliary_proposal,
    factorised_proposal,
    l1_jump,
)
from gradmc.spaces import DiscreteSpace

__all__ = ["DiscreteState", "DiscreteInfo", "init", "build_kernel", "as_top_level_api", "hessian_of"]

init = proposals.init


def build_kernel():
    """``kernel(key, state, logdensity_fn, space, precond) -> (DiscreteState, DiscreteInfo)``:
    z | s, then s | z, exactly.

    A non-finite log density or gradient at the new state (impossible for a quadratic
    f) keeps the old state and is flagged.
    """

    def kernel(
        rng_key, state: DiscreteState, logdensity_fn: Callable, space: DiscreteSpace, precond: PAVGPreconditioner
    ):
        key_aux, key_prop = jax.random.split(rng_key)
        forward, _ = auxiliary_proposal(precond.apply, precond.apply_root, precond.d_eps)
        a, b, _ = forward(key_aux, state)
        proposed = init(factorised_proposal(key_prop, a, b, space), logdensity_fn)
        ok = jnp.isfinite(proposed.logdensity) & jnp.all(jnp.isfinite(proposed.grad))
        new = jax.tree.map(lambda p, s: jnp.where(ok, p, s), proposed, state)
        log_ratio = jnp.where(ok, 0.0, -jnp.inf)  # rejection-free, unless the new state is not finite
        return new, DiscreteInfo(ok.astype(jnp.float32), ok, ~ok, log_ratio, l1_jump(new.position, state.position))

    return kernel


def hessian_of(target: Target) -> np.ndarray:
    """M = J + Jᵀ of a quadratic target f(s) = sᵀJs + bᵀs (``target.metadata["J"]``).

    Parameters
    ----------
    target : gradmc.base.Target
        A quadratic target with ``metadata["J"]``.
    """
    if "J" not in target.metadata:
        raise ValueError(
            f"block-gibbs needs a quadratic target f(s) = sᵀJs + bᵀs with metadata['J'], or M= (its Hessian); "
            f"target {target.name!r} has neither. It has no Metropolis test, so a learned M would make it inexact: "
            "pavg-variance learns W in warm-up and keeps the test"
        )
    J = np.asarray(target.metadata["J"], dtype=np.float64)
    return J + J.T


def as_top_level_api(logdensity_fn: Callable, space: DiscreteSpace, M, step_size=1.0) -> SamplingAlgorithm:
    """Block Gibbs for a quadratic ``logdensity_fn`` with Hessian ``M`` (any ε > 0 is exact).

    Parameters
    ----------
    logdensity_fn : callable
        The target's log density f, quadratic.
    space : gradmc.spaces.DiscreteSpace
        The target's space.
    M : array_like
        The Hessian of f, symmetric (n, n).
    step_size : float
        ε > 0 (sets d_ε = max(0, −λ_min) + 2/ε).
    """
    M = check_symmetric(M, "block-Gibbs Hessian M", space.dim, rtol=1e-5)
    precond = make_preconditioner(M, check_positive_param("step size ε", step_size))
    return build_sampling_algorithm(build_kernel(), init, logdensity_fn, kernel_args=(space, precond))
