"""Preconditioned auxiliary-variable gradient sampler, PAVG (Rhodes & Gutmann 2022,
eqs 14–17, 38–40, Algorithm B.3).

The AVG step with a global second-order term M (eq. 14): z ~ N(R s_t, I) with
R = M_ε^{1/2}, M_ε = M + d_ε I, d_ε = max(0, −λ_min) + 2/ε (eq. 39), then
q(s | z, s_t) ∝ Π_i exp([∇f(s_t) − M s_t + R z]_i s_i − (d_ε/2) s_i²) (eq. 40) and the MH
test of eq. 28 (:func:`gradmc.discrete.proposals.auxiliary_proposal`). M = 0 recovers AVG;
for a quadratic f with Hessian M the proposal is exact and every proposal is accepted
(Martens & Sutskever 2010). M acts on the flattened position (``d·k`` for one-hot
categorical rows).

M is given (e.g. the model's J + Jᵀ, or a data covariance via
:func:`gradmc.curvature.pavg_model.from_data`) or learned during warm-up by Algorithm
F.4/F.5 (:func:`gradmc.adapt.preconditioner.learning_sampler`, used by the registered
``pavg`` sampler).
"""

from __future__ import annotations

from collections.abc import Callable

from blackjax.base import build_sampling_algorithm

from gradmc.base import SamplingAlgorithm
from gradmc.checks import check_positive_param, check_symmetric
from gradmc.curvature.pavg_model import PAVGPreconditioner, make_preconditioner
from gradmc.discrete import proposals
from gradmc.discrete.proposals import DiscreteInfo, DiscreteState, auxiliary_step
from gradmc.spaces import DiscreteSpace

__all__ = ["DiscreteState", "DiscreteInfo", "PAVGPreconditioner", "init", "build_kernel", "as_top_level_api"]

init = proposals.init


def build_kernel():
    """``kernel(key, state, logdensity_fn, space, precond) -> (DiscreteState, DiscreteInfo)``
    with a :class:`~gradmc.curvature.pavg_model.PAVGPreconditioner` (or its eigen form).
    """

    def kernel(
        rng_key, state: DiscreteState, logdensity_fn: Callable, space: DiscreteSpace, precond: PAVGPreconditioner
    ):
        return auxiliary_step(rng_key, state, logdensity_fn, space, precond.apply, precond.apply_root, precond.d_eps)

    return kernel


def as_top_level_api(logdensity_fn: Callable, space: DiscreteSpace, step_size, M) -> SamplingAlgorithm:
    """BlackJAX-style ``SamplingAlgorithm`` of PAVG with a fixed M.

    Parameters
    ----------
    logdensity_fn : callable
        The target's log density f.
    space : gradmc.spaces.DiscreteSpace
        The target's space.
    step_size : float
        ε > 0.
    M : array_like
        Symmetric (n, n), n the flattened dimension.
    """
    step_size = check_positive_param("PAVG step size ε", step_size)
    precond = make_preconditioner(check_symmetric(M, "PAVG preconditioner M", space.dim, rtol=1e-5), step_size)
    return build_sampling_algorithm(build_kernel(), init, logdensity_fn, kernel_args=(space, precond))
