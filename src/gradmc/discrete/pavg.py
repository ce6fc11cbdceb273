"""Preconditioned auxiliary-variable gradient sampler, PAVG (Rhodes & Gutmann 2022,
eqs 14–17, 38–40, Algorithm B.3).

The AVG step of :mod:`gradmc.discrete.avg` with a global second-order term M (eq. 14):
z ~ N(R s_t, I) with R = M_ε^{1/2}, M_ε = M + d_ε I, d_ε = max(0, −λ_min) + 2/ε
(eq. 39), then q(s | z, s_t) ∝ Π_i exp([∇f(s_t) − M s_t + R z]_i s_i − (d_ε/2) s_i²)
(eq. 40) and the MH test of eq. 28. M = 0 recovers AVG; for a quadratic f with Hessian
M the proposal is exact and every proposal is accepted (Martens & Sutskever 2010).
M acts on the flattened position (``d·k`` for one-hot categorical rows).

The builder's M is given (e.g. the model's J + Jᵀ, or a data covariance via
:func:`gradmc.adapt.preconditioner.from_data`) or learned during warm-up by
Algorithm F.4/F.5 (:func:`gradmc.adapt.preconditioner.learning_sampler`).
"""

from __future__ import annotations

from typing import Callable

import jax.numpy as jnp

from gradmc.adapt.preconditioner import DEFAULTS, Preconditioner, check_matrix, learning_sampler, make_preconditioner
from gradmc.base import SamplingAlgorithm, Target
from gradmc.discrete import proposal_mh
from gradmc.discrete.avg import auxiliary_step
from gradmc.discrete.proposal_mh import DiscreteInfo, DiscreteState, check_positive_param, check_space
from gradmc.registry import register_sampler
from gradmc.spaces import DiscreteSpace

__all__ = ["DiscreteState", "DiscreteInfo", "Preconditioner", "init", "build_kernel", "as_top_level_api", "matrix_maps"]

init = proposal_mh.init


def matrix_maps(precond: Preconditioner):
    """``(apply_M, apply_root)`` on position-shaped arrays (flattened for the mat-vec).

    Applied as row-vector products ``x @ A`` = Aᵀx, which keeps the chains' batch axis
    first when vmapped (no transpose of the result): M is symmetric, and the root R is
    any matrix with RᵀR = M_ε (see :class:`~gradmc.adapt.preconditioner.Preconditioner`),
    so the noise ``n @ R`` has covariance M_ε."""

    def apply(matrix):
        return lambda x: (x.reshape(-1) @ matrix).reshape(x.shape)

    return apply(precond.matrix), apply(precond.root)


def build_kernel():
    """``kernel(key, state, logdensity_fn, space, precond)`` with a :class:`Preconditioner`."""

    def kernel(rng_key, state: DiscreteState, logdensity_fn: Callable, space: DiscreteSpace, precond: Preconditioner):
        apply_M, apply_root = matrix_maps(precond)
        return auxiliary_step(rng_key, state, logdensity_fn, space, apply_M, apply_root, precond.d_eps)

    return kernel


def as_top_level_api(logdensity_fn: Callable, space: DiscreteSpace, step_size, M) -> SamplingAlgorithm:
    """PAVG with a fixed M (n×n, n = the flattened dimension)."""
    step_size = check_positive_param("PAVG step size ε", step_size)
    precond = make_preconditioner(check_matrix(M, space.dim), step_size)
    kernel = build_kernel()
    return SamplingAlgorithm(
        lambda position, rng_key=None: init(position, logdensity_fn),
        lambda rng_key, state: kernel(rng_key, state, logdensity_fn, space, precond),
    )


@register_sampler(
    "pavg",
    "preconditioned auxiliary-variable gradient sampler (Rhodes & Gutmann 2022, Alg. B.3); "
    "M given or learned in warm-up (Alg. F.4/F.5)",
    kind="discrete",
)
def build(
    target: Target,
    num_warmup: int,
    step_size=0.2,
    M=None,
    initial_step_size=None,
    adapt_gamma: bool = True,
    num_fit: int = DEFAULTS["num_fit"],
    refit_interval: int = DEFAULTS["refit_interval"],
    adapt_rate: float = DEFAULTS["adapt_rate"],
    decay: float = DEFAULTS["decay"],
):
    """Options: ``step_size`` ε (default 0.2); ``M`` the preconditioner (None: learn it by
    Alg. F.4 from the first ``min(num_fit, num_warmup // 2)`` warm-up steps, needs
    ``num_warmup >= 200``); ``initial_step_size`` the ε used before M is fitted (default
    ``step_size``; the paper's poly2 runs use 0.02 then 1000); ``adapt_gamma`` scale γM by AdaptGamma (Alg. F.5) every
    ``refit_interval`` warm-up steps with rate ``adapt_rate`` decaying by ``decay``."""
    space = check_space(target, "pavg")
    step_size = check_positive_param("PAVG step size ε", step_size)
    if initial_step_size is not None:
        initial_step_size = check_positive_param("PAVG initial step size ε", initial_step_size)
    if M is not None:
        M = check_matrix(M, space.dim)
    elif int(num_warmup) < 200:
        raise ValueError(
            f"pavg learns its preconditioner M during warm-up and needs num_warmup >= 200 (got {num_warmup}); "
            "pass M= to use a given preconditioner"
        )
    for name, value in (("num_fit", num_fit), ("refit_interval", refit_interval)):
        if int(value) != value or int(value) < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    if not (float(adapt_rate) > 0.0 and 0.0 < float(decay) <= 1.0):
        raise ValueError(f"adapt_rate must be > 0 and decay in (0, 1], got {adapt_rate!r}, {decay!r}")
    kernel = build_kernel()
    kernel_init = lambda position: init(position, target.logdensity_fn)  # noqa: E731

    def stats(state, info, gamma):
        return proposal_mh.stats(state, info, step_size, extra={"gamma": jnp.asarray(gamma, jnp.float32)})

    if M is not None and not adapt_gamma:
        # A fixed kernel: the preconditioner is a constant shared by all chains (not a
        # per-chain parameter), so its mat-vecs batch across chains.
        precond = make_preconditioner(M, step_size)
        return proposal_mh.fixed_sampler(
            "pavg",
            kernel_init,
            lambda key, state, step_size: kernel(key, state, target.logdensity_fn, space, precond),
            {"step_size": step_size},
            lambda state, info, params: stats(state, info, 1.0),
        )
    return learning_sampler(
        "pavg",
        kernel_init,
        lambda key, state, precond: kernel(key, state, target.logdensity_fn, space, precond),
        stats,
        space.dim,
        step_size,
        num_warmup,
        M=M,
        initial_step_size=initial_step_size,
        adapt=bool(adapt_gamma),
        num_fit=int(num_fit),
        refit_interval=int(refit_interval),
        adapt_rate=float(adapt_rate),
        decay=float(decay),
    )
