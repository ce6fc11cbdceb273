"""Block Gibbs for quadratic log densities (Martens & Sutskever 2010), as PAVG with the
true M (Rhodes & Gutmann 2022, §3.3).

For f(s) = sᵀJs + bᵀs the second-order expansion of eq. 14 with M = ∇²f = J + Jᵀ is exact,
so the factorised q(s | z, s_t) of eq. 40 *is* the conditional π(s | z) of the joint
π(s, z) = exp(f(s)) N(z; M_ε^{1/2} s, I): alternating z ~ π(z | s) and s ~ π(s | z) is an
exact Gibbs sampler and needs no MH test (acceptance 1). Only valid for quadratic f.
"""

from __future__ import annotations

from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np

from gradmc.adapt.preconditioner import Preconditioner, check_matrix, make_preconditioner
from gradmc.base import SamplingAlgorithm, Target
from gradmc.discrete import proposal_mh
from gradmc.discrete.avg import auxiliary_proposal
from gradmc.discrete.pavg import matrix_maps
from gradmc.discrete.proposal_mh import DiscreteInfo, DiscreteState, check_positive_param, check_space, l1_jump
from gradmc.registry import register_sampler
from gradmc.spaces import DiscreteSpace, factorised_proposal

__all__ = ["DiscreteState", "DiscreteInfo", "init", "build_kernel", "as_top_level_api", "hessian_of"]

init = proposal_mh.init


def build_kernel():
    """``kernel(key, state, logdensity_fn, space, precond)``: z | s, then s | z, exactly.

    A non-finite log density or gradient at the new state (impossible for a quadratic
    f) keeps the old state and is flagged.
    """

    def kernel(rng_key, state: DiscreteState, logdensity_fn: Callable, space: DiscreteSpace, precond: Preconditioner):
        key_aux, key_prop = jax.random.split(rng_key)
        forward, _ = auxiliary_proposal(*matrix_maps(precond), precond.d_eps)
        a, b, _ = forward(key_aux, state)
        proposed = init(factorised_proposal(key_prop, a, b, space), logdensity_fn)
        ok = jnp.isfinite(proposed.logdensity) & jnp.all(jnp.isfinite(proposed.grad))
        new = jax.tree.map(lambda p, s: jnp.where(ok, p, s), proposed, state)
        return new, DiscreteInfo(ok.astype(jnp.float32), ok, ~ok, l1_jump(new.position, state.position))

    return kernel


def hessian_of(target: Target) -> np.ndarray:
    """M = J + Jᵀ of a quadratic target f(s) = sᵀJs + bᵀs (``target.metadata["J"]``)."""
    if "J" not in target.metadata:
        raise ValueError(
            f"block-gibbs needs a quadratic target f(s) = sᵀJs + bᵀs with metadata['J'], or M= (its Hessian); "
            f"target {target.name!r} has neither"
        )
    J = np.asarray(target.metadata["J"], dtype=np.float64)
    return J + J.T


def as_top_level_api(logdensity_fn: Callable, space: DiscreteSpace, M, step_size=1.0) -> SamplingAlgorithm:
    """Block Gibbs for a quadratic ``logdensity_fn`` with Hessian ``M`` (any ε > 0 is exact)."""
    precond = make_preconditioner(check_matrix(M, space.dim, "block-Gibbs Hessian M"), check_positive_param("step size ε", step_size))
    kernel = build_kernel()
    return SamplingAlgorithm(
        lambda position, rng_key=None: init(position, logdensity_fn),
        lambda rng_key, state: kernel(rng_key, state, logdensity_fn, space, precond),
    )


@register_sampler(
    "block-gibbs",
    "exact auxiliary-variable block Gibbs for quadratic log densities (Martens & Sutskever 2010; PAVG with the true M)",
    kind="discrete",
)
def build(target: Target, num_warmup: int, M=None, step_size=1.0):
    """Options: ``M`` the Hessian of f (default: J + Jᵀ from ``target.metadata["J"]``);
    ``step_size`` ε > 0 (any value gives an exact sampler; it sets d_ε = max(0, −λ_min) + 2/ε)."""
    del num_warmup
    space = check_space(target, "block-gibbs")
    M = check_matrix(hessian_of(target) if M is None else M, space.dim, "block-Gibbs Hessian M")
    step_size = check_positive_param("block-Gibbs step size ε", step_size)
    kernel = build_kernel()
    precond = make_preconditioner(M, step_size)  # a constant shared by all chains
    return proposal_mh.fixed_sampler(
        "block-gibbs",
        lambda position: init(position, target.logdensity_fn),
        lambda key, state, step_size: kernel(key, state, target.logdensity_fn, space, precond),
        {"step_size": step_size},
        lambda state, info, params: proposal_mh.stats(state, info, params["step_size"]),
    )
