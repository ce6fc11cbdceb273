"""HMC and NUTS: BlackJAX's kernels on a log density whose non-finite values are rejected.

The kernels are BlackJAX's (``blackjax.hmc``: Neal 2011, leapfrog steps eq. 2.28-2.30 and a
Metropolis test; ``blackjax.nuts``: Hoffman & Gelman 2014 with multinomial sampling). gradmc
only maps NaN and +inf log densities to -inf (:func:`gradmc.base.reject_nonfinite`) and reads
the kernels' info into :class:`~gradmc.base.StepStats` (:func:`stats`). Their warm-up (Stan's
window adaptation, or a step-size rule alone) is in :mod:`gradmc.adapt.step_size`.
"""

from __future__ import annotations

from collections.abc import Callable

import blackjax
import jax.numpy as jnp
from blackjax.base import build_sampling_algorithm
from blackjax.mcmc.hmc import HMCInfo, HMCState
from blackjax.mcmc.nuts import NUTSInfo

from gradmc.base import SamplingAlgorithm, StepStats, reject_nonfinite, step_stats

__all__ = ["HMCState", "HMCInfo", "NUTSInfo", "KINDS", "init", "build_kernel", "as_top_level_api", "stats"]

#: the trajectory of each kind: ``"hmc"`` a fixed number of leapfrog steps, ``"nuts"`` the No-U-Turn rule
KINDS = ("hmc", "nuts")

#: ``init(position, logdensity_fn) -> HMCState`` (BlackJAX's, shared by HMC and NUTS)
init = blackjax.hmc.init


def build_kernel(kind: str = "hmc") -> Callable:
    """BlackJAX's kernel ``kernel(key, state, logdensity_fn, step_size, inverse_mass_matrix, n)``.

    Parameters
    ----------
    kind : {"hmc", "nuts"}
        ``"hmc"``: ``n`` is the number of leapfrog steps; ``"nuts"``: ``n`` is the maximum
        number of trajectory doublings.
    """
    if kind not in KINDS:
        raise ValueError(f"kind must be 'hmc' or 'nuts', got {kind!r}")
    return blackjax.hmc.build_kernel() if kind == "hmc" else blackjax.nuts.build_kernel()


def as_top_level_api(
    logdensity_fn: Callable,
    step_size,
    inverse_mass_matrix,
    *,
    kind: str = "hmc",
    num_integration_steps: int = 10,
    max_num_doublings: int = 10,
) -> SamplingAlgorithm:
    """HMC or NUTS as a BlackJAX ``SamplingAlgorithm`` on ``logdensity_fn`` with non-finite values rejected.

    Parameters
    ----------
    logdensity_fn : callable
        The unnormalised log density (differentiable).
    step_size : float
        The leapfrog step size.
    inverse_mass_matrix : array
        Diagonal (1-D) or dense (2-D) inverse mass matrix.
    kind : {"hmc", "nuts"}
        The trajectory.
    num_integration_steps : int
        Leapfrog steps per HMC trajectory.
    max_num_doublings : int
        The largest NUTS tree depth.
    """
    length = num_integration_steps if kind == "hmc" else max_num_doublings
    kernel_args = (step_size, jnp.asarray(inverse_mass_matrix), int(length))
    return build_sampling_algorithm(build_kernel(kind), init, reject_nonfinite(logdensity_fn), kernel_args=kernel_args)


def stats(state: HMCState, info, step_size) -> StepStats:
    """:class:`~gradmc.base.StepStats` of one HMC or NUTS transition.

    The extras are ``energy`` (the Hamiltonian at the kept state, what ``arviz.bfmi``
    reads) and, for NUTS, ``tree_depth`` (the number of trajectory doublings).

    Parameters
    ----------
    state : HMCState
        The state after the transition.
    info : HMCInfo or NUTSInfo
        The kernel's info. A trajectory that reached a non-finite log density (NaN or +inf,
        which :func:`~gradmc.base.reject_nonfinite` makes -inf: HMC's proposal, or an end of
        NUTS's trajectory) is flagged ``nonfinite`` rather than ``diverging``: the cure is
        the log density, not the step size.
    step_size : float
        The step size used.
    """
    extra = {"energy": jnp.asarray(info.energy, jnp.float32)}
    if hasattr(info, "num_trajectory_expansions"):
        extra["tree_depth"] = jnp.asarray(info.num_trajectory_expansions, jnp.int32)
        ends = (info.trajectory_leftmost_state.logdensity, info.trajectory_rightmost_state.logdensity)
    else:
        ends = (info.proposal.logdensity,)
    nonfinite = ~jnp.isfinite(info.energy)
    for logdensity in ends:
        nonfinite = nonfinite | ~jnp.isfinite(logdensity)
    return step_stats(
        state.logdensity,
        info.acceptance_rate,
        getattr(info, "is_accepted", True),
        step_size,
        info.num_integration_steps,
        diverging=info.is_divergent & ~nonfinite,
        nonfinite=nonfinite,
        extra=extra,
    )
