"""The registered discrete samplers: one ``@register_sampler`` builder per name, and the one
table of their defaults.

Each builder ``build(target, num_warmup, **options) -> BoundSampler`` checks its options,
builds the pure kernel of its module (:mod:`~gradmc.discrete.ncg`, :mod:`~gradmc.discrete.avg`,
:mod:`~gradmc.discrete.pavg`, :mod:`~gradmc.discrete.block_gibbs`, :mod:`~gradmc.discrete.gwg`,
:mod:`~gradmc.discrete.uniform`, :mod:`~gradmc.discrete.gibbs`,
:mod:`~gradmc.discrete.lattice_metropolis`, :mod:`~gradmc.discrete.hams`) and wraps it in a
:class:`~gradmc.base.BoundSampler` (:func:`~gradmc.adapt.warmup.bind`, or
PAVG's learning warm-up).

The defaults of the options are written once, in the builders' signatures
(:func:`gradmc.registry.defaults` reads them). Each registration says what the warm-up tunes
(:class:`~gradmc.registry.Tuned`) and, for the samplers whose kernel also runs outside the
runner (PCD's chains, plain loops), the kernel module and the options that set it
(:func:`gradmc.registry.algorithm` builds its BlackJAX ``SamplingAlgorithm`` by name).
"""

from __future__ import annotations

import warnings
from types import ModuleType
from typing import Any

import jax.numpy as jnp
import numpy as np

from gradmc.adapt.learned_model import ModelTuning, explore_then_fit_sampler, pooled_dense_fit
from gradmc.adapt.preconditioner import DEFAULTS as LEARNING_DEFAULTS
from gradmc.adapt.preconditioner import learning_sampler, make_preconditioner
from gradmc.adapt.step_size import bounded, fixed_rule, rule_by_name
from gradmc.adapt.warmup import bind, step_size_sampler
from gradmc.base import BoundSampler, RunWarning, Target
from gradmc.checks import check_move_probability, check_positive_param, check_radius, check_symmetric, is_concrete
from gradmc.curvature import graph_model, low_rank_model, sparse_model
from gradmc.curvature.second_order import (
    EigenModel,
    check_w,
    dhams_preconditioner,
    eigen_model,
    eigen_pdhams_preconditioner,
    fit_w_from_sums,
    low_rank_pdhams_preconditioner,
    pdhams_preconditioner,
)
from gradmc.discrete import avg, block_gibbs, gibbs, gwg, hams, lattice_metropolis, ncg, ordinal_ncg, pavg, uniform
from gradmc.discrete.proposals import check_space, stats
from gradmc.registry import Tuned, register_sampler
from gradmc.spaces import Categorical, DiscreteSpace

__all__ = [
    "build_ncg",
    "build_ordinal_ncg",
    "build_avg",
    "build_pavg",
    "build_block_gibbs",
    "build_gwg",
    "build_ordinal_gwg",
    "build_mh_uniform",
    "build_gibbs",
    "build_lattice_metropolis",
    "build_pavg_variance",
]


def _register(name: str, description: str, **declarations):
    """``register_sampler(name, description, kind="discrete", **declarations)``."""
    return register_sampler(name, description, kind="discrete", **declarations)


def _step_size_stats(state, info, params):
    return stats(state, info, params["step_size"])


# -- Rhodes & Gutmann (2022): NCG, AVG, PAVG, block Gibbs --------------------------------------


#: The acceptance rate the discrete samplers' warm-up aims at by default: DISCS's value for
#: its adaptive DMALA and locally balanced samplers (Goshvadi et al. 2023), the optimal
#: scaling of Langevin proposals (Roberts & Rosenthal 1998).
TARGET_ACCEPT = 0.574


#: The largest step size NCG and AVG adapt to. As ε grows their proposals tend to one drawn
#: from the gradient alone (NCG's ‖s' − s‖²/(2ε) and AVG's d_ε = 2/ε vanish); where even that
#: proposal accepts more than the target (independent coordinates, or an RBM whose gradient
#: already carries most of the state's information) ε would grow without end. At 10⁶ the
#: difference from the limit is negligible for any target whose gradient is not itself that small.
MAX_STEP_SIZE = 1e6


def _warmup_rule(adapt, target_accept, num_warmup):
    """The warm-up rule called ``adapt`` (:func:`~gradmc.adapt.step_size.rule_by_name`), or
    None when nothing adapts (``adapt=None`` or no warm-up steps); bad options raise
    ``ValueError`` either way.
    """
    rule = rule_by_name(adapt, target_accept)
    return rule if int(num_warmup) > 0 else None


def _first_order_sampler(
    name: str, module: ModuleType, target: Target, num_warmup, step_size, adapt, target_accept, *kernel_args
):
    """NCG, AVG or ordinal NCG: ε adapted in warm-up by ``adapt`` towards ``target_accept``
    (ε ≤ :data:`MAX_STEP_SIZE`), then frozen; ``kernel_args`` follow ε in the kernel's call.
    """
    space = check_space(target, name)
    step_size = check_positive_param(f"{name.upper()} step size ε", step_size)
    rule = _warmup_rule(adapt, target_accept, num_warmup)
    rule = None if rule is None else bounded(rule, MAX_STEP_SIZE)
    kernel = module.build_kernel()
    return step_size_sampler(
        name,
        module.init,
        lambda key, state, logdensity_fn, eps: kernel(key, state, logdensity_fn, space, eps, *kernel_args),
        target.logdensity_fn,
        step_size,
        rule,
        stats,
    )


@_register(
    "ncg",
    "norm-constrained gradient sampler (Rhodes & Gutmann 2022, Alg. B.1); ε adapted in warm-up",
    tuned=(Tuned("step_size"),),
    kernel=ncg,
    kernel_options=("step_size",),
)
def build_ncg(target: Target, num_warmup: int, step_size=0.5, adapt="dual_averaging", target_accept=TARGET_ACCEPT):
    """NCG (:mod:`gradmc.discrete.ncg`), its step size ε adapted in warm-up.

    Parameters
    ----------
    target : gradmc.base.Target
        A target on a discrete space.
    num_warmup : int
        Warm-up steps: ε follows ``adapt`` during them and is frozen after.
    step_size : float
        ε > 0: the first value of the warm-up, or the value used throughout with
        ``adapt=None`` (0.5 is the paper's Ising value).
    adapt : {"dual_averaging", "robbins_monro", None}
        The warm-up rule (dual averaging of log ε towards ``target_accept``); None keeps ε.
    target_accept : float
        The mean acceptance probability aimed at (default 0.574, as DISCS's DMALA).
    """
    return _first_order_sampler("ncg", ncg, target, num_warmup, step_size, adapt, target_accept)


@_register(
    "ordinal-ncg",
    "NCG restricted to a window of r values around the current one, for ordered values with many levels "
    "(counts, wide integer ranges); ε adapted in warm-up",
    tuned=(Tuned("step_size"),),
    kernel=ordinal_ncg,
    kernel_options=("step_size", "radius"),
)
def build_ordinal_ncg(
    target: Target, num_warmup: int, step_size=0.5, radius=None, adapt="dual_averaging", target_accept=TARGET_ACCEPT
):
    """Ordinal NCG (:mod:`gradmc.discrete.ordinal_ncg`), its step size ε adapted in warm-up.

    Parameters
    ----------
    target : gradmc.base.Target
        A target on an ordered discrete space (Binary, Spin, Ordinal).
    num_warmup : int
        Warm-up steps: ε follows ``adapt`` during them and is frozen after.
    step_size : float
        ε > 0: the first value of the warm-up, or the value used throughout with ``adapt=None``.
    radius : int, optional
        r ≥ 1: a coordinate moves by at most r value indices per step (default min(k − 1, 8)
        for k values, :func:`gradmc.discrete.ordinal_ncg.radius_for`: on small value sets the
        window holds every value and this is NCG).
    adapt : {"dual_averaging", "robbins_monro", None}
        The warm-up rule (dual averaging of log ε towards ``target_accept``); None keeps ε.
    target_accept : float
        The mean acceptance probability aimed at (default 0.574, as NCG's).
    """
    radius = ordinal_ncg.radius_for(ordinal_ncg.check_space(check_space(target, "ordinal-ncg")), radius)
    return _first_order_sampler("ordinal-ncg", ordinal_ncg, target, num_warmup, step_size, adapt, target_accept, radius)


@_register(
    "avg",
    "auxiliary-variable gradient sampler (Rhodes & Gutmann 2022, Alg. B.2); ε adapted in warm-up",
    tuned=(Tuned("step_size"),),
    kernel=avg,
    kernel_options=("step_size",),
)
def build_avg(target: Target, num_warmup: int, step_size=0.2, adapt="dual_averaging", target_accept=TARGET_ACCEPT):
    """AVG (:mod:`gradmc.discrete.avg`), its step size ε adapted in warm-up.

    Parameters
    ----------
    target : gradmc.base.Target
        A target on a discrete space.
    num_warmup : int
        Warm-up steps: ε follows ``adapt`` during them and is frozen after.
    step_size : float
        ε > 0: the first value of the warm-up, or the value used throughout with
        ``adapt=None`` (0.2 is the paper's Ising value).
    adapt : {"dual_averaging", "robbins_monro", None}
        The warm-up rule (dual averaging of log ε towards ``target_accept``); None keeps ε.
    target_accept : float
        The mean acceptance probability aimed at (default 0.574).
    """
    return _first_order_sampler("avg", avg, target, num_warmup, step_size, adapt, target_accept)


@_register(
    "pavg",
    "preconditioned auxiliary-variable gradient sampler (Rhodes & Gutmann 2022, Alg. B.3); "
    "M given or learned in warm-up (Alg. F.4/F.5), ε adapted with it",
    tuned=(Tuned("step_size"),),
    kernel=pavg,
    kernel_options=("step_size", "M"),
)
def build_pavg(
    target: Target,
    num_warmup: int,
    step_size=0.2,
    M=None,
    initial_step_size=None,
    adapt_gamma: bool = True,
    num_fit: int = LEARNING_DEFAULTS["num_fit"],
    refit_interval: int = LEARNING_DEFAULTS["refit_interval"],
    adapt_rate: float = LEARNING_DEFAULTS["adapt_rate"],
    decay: float = LEARNING_DEFAULTS["decay"],
    adapt="dual_averaging",
    target_accept=TARGET_ACCEPT,
):
    """PAVG (:mod:`gradmc.discrete.pavg`) with M given or learned in warm-up (Alg. F.4/F.5)
    and ε adapted with it.

    Parameters
    ----------
    target : gradmc.base.Target
        A target on a discrete space.
    num_warmup : int
        Warm-up steps; learning M needs ``num_warmup >= 200``.
    step_size : float
        The step size ε > 0 (default 0.2): with ``adapt``, where its tuning starts after M
        is fitted (or from the first step with M given).
    M : array_like, optional
        The preconditioner, symmetric (n, n). None: learn it by Alg. F.4 from the first
        ``min(num_fit, num_warmup // 2)`` warm-up steps.
    initial_step_size : float, optional
        The ε used (or where its tuning starts) before M is fitted (default
        ``step_size``; the paper's poly2 runs use 0.02 then 1000).
    adapt_gamma : bool
        Scale γM by AdaptGamma (Alg. F.5) every ``refit_interval`` warm-up steps.
    num_fit : int
        N_M of Alg. F.4: the warm-up steps M is fitted from.
    refit_interval : int
        N_adapt of Alg. F.4: warm-up steps between two AdaptGamma updates.
    adapt_rate : float
        AdaptGamma's rate.
    decay : float
        The decay of AdaptGamma's rate per window, in (0, 1].
    adapt : {"dual_averaging", "robbins_monro", None}
        The rule ε follows at every warm-up step (dual averaging of log ε towards
        ``target_accept``, on the acceptance rate pooled over chains, ε ≤ 10⁶), one ε for
        all chains as M is; None keeps ε as given (the paper's settings).
    target_accept : float
        The mean acceptance probability ε is tuned towards (default 0.574).
    """
    space = check_space(target, "pavg")
    step_size = check_positive_param("PAVG step size ε", step_size)
    if initial_step_size is not None:
        initial_step_size = check_positive_param("PAVG initial step size ε", initial_step_size)
    if M is not None:
        M = check_symmetric(M, "PAVG preconditioner M", space.dim, rtol=1e-5)
    elif int(num_warmup) < 200:
        raise ValueError(
            f"pavg learns its preconditioner M during warm-up and needs num_warmup >= 200 (got {num_warmup}); "
            "pass M= to use a given preconditioner"
        )
    elif space.dim > MAX_LEARNED_W_DIM:
        warnings.warn(
            RunWarning(
                f"pavg learns a dense {space.dim} x {space.dim} M, with an eigendecomposition of that size at "
                f"every refit: slow above d = {MAX_LEARNED_W_DIM}. pavg-variance, v-pdhams and o-pdhams learn a "
                "sparse W on the Hessian's pattern there (much faster on lattice-like models)"
            ),
            stacklevel=2,
        )
    for name, value in (("num_fit", num_fit), ("refit_interval", refit_interval)):
        if int(value) != value or int(value) < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    if not (float(adapt_rate) > 0.0 and 0.0 < float(decay) <= 1.0):
        raise ValueError(f"adapt_rate must be > 0 and decay in (0, 1], got {adapt_rate!r}, {decay!r}")
    rule = _warmup_rule(adapt, target_accept, num_warmup)
    rule = None if rule is None else bounded(rule, MAX_STEP_SIZE)
    kernel = pavg.build_kernel()
    kernel_init = lambda key, position: pavg.init(position, target.logdensity_fn)  # noqa: E731

    def pavg_stats(state, info, gamma, eps):
        return stats(state, info, eps, extra={"gamma": jnp.asarray(gamma, jnp.float32)})

    if M is not None and not adapt_gamma and rule is None:
        # A fixed kernel: the preconditioner is a constant shared by all chains (not a
        # per-chain parameter), so its mat-vecs batch across chains.
        precond = make_preconditioner(M, step_size)
        return bind(
            "pavg",
            kernel_init,
            lambda key, state, step_size: kernel(key, state, target.logdensity_fn, space, precond),
            {"step_size": step_size},
            lambda state, info, params: pavg_stats(state, info, 1.0, step_size),
        )
    return learning_sampler(
        "pavg",
        kernel_init,
        lambda key, state, precond: kernel(key, state, target.logdensity_fn, space, precond),
        pavg_stats,
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
        step_size_rule=rule,
    )


@_register(
    "block-gibbs",
    "exact auxiliary-variable block Gibbs for quadratic log densities (Martens & Sutskever 2010; PAVG with the true M)",
    kernel=block_gibbs,
    kernel_options=("M", "step_size"),
)
def build_block_gibbs(target: Target, num_warmup: int, M=None, step_size=1.0):
    """Block Gibbs (:mod:`gradmc.discrete.block_gibbs`), exact for quadratic f.

    Parameters
    ----------
    target : gradmc.base.Target
        A quadratic target on a discrete space.
    num_warmup : int
        Warm-up steps (ordinary steps: nothing adapts).
    M : array_like, optional
        The Hessian of f (default: J + Jᵀ from ``target.metadata["J"]``).
    step_size : float
        ε > 0; any value gives an exact sampler (it sets d_ε = max(0, −λ_min) + 2/ε).
    """
    del num_warmup
    space = check_space(target, "block-gibbs")
    M = block_gibbs.hessian_of(target) if M is None else M
    M = check_symmetric(M, "block-Gibbs Hessian M", space.dim, rtol=1e-5)
    step_size = check_positive_param("block-Gibbs step size ε", step_size)
    kernel = block_gibbs.build_kernel()
    precond = make_preconditioner(M, step_size)  # a constant shared by all chains
    return bind(
        "block-gibbs",
        lambda key, position: block_gibbs.init(position, target.logdensity_fn),
        lambda key, state, step_size: kernel(key, state, target.logdensity_fn, space, precond),
        {"step_size": step_size},
        _step_size_stats,
    )


# -- local moves: GWG, ordinal-GWG, MH-uniform, Gibbs, lattice Metropolis ------------------------


def _gwg_sampler(name: str, target: Target, num_warmup, radius, num_flips, adapt, target_accept):
    """GWG or ordinal-GWG. ``num_flips=1`` without adaptation is the paper's one-change
    kernel; otherwise the multi-flip kernel with L = ``num_flips`` expected moves drawn per
    step, adapted in warm-up towards ``target_accept`` within [1, d] and frozen after.
    """
    space = check_space(target, name)
    radius = check_radius(radius)
    num_flips = float(check_positive_param("num_flips", num_flips))
    rule = _warmup_rule(adapt, target_accept, num_warmup)
    if num_flips > space.d:
        raise ValueError(f"num_flips must be at most the number of coordinates {space.d}, got {num_flips}")
    kernel = gwg.build_kernel(multi_flip=rule is not None or num_flips != 1.0)

    def flips(value):  # beyond d draws the moves become near-certain: a chain that only oscillates
        return jnp.clip(value, 1.0, float(space.d))

    def step_stats(state, info, value):
        return stats(state, info, extra={"num_flips": flips(value).astype(jnp.float32)})

    return step_size_sampler(
        name,
        gwg.init,
        lambda key, state, logdensity_fn, value: kernel(key, state, logdensity_fn, space, radius, flips(value)),
        target.logdensity_fn,
        num_flips,
        rule,
        step_stats,
        parameter="num_flips",
        kept_value=flips,
    )


@_register(
    "gwg",
    "Gibbs-with-Gradients (Grathwohl et al. 2021; eq. 6); coordinates changed per step adapted in warm-up",
    tuned=(Tuned("num_flips"),),
    kernel=gwg,
    kernel_options=("num_flips",),
)
def build_gwg(target: Target, num_warmup: int, num_flips=1.0, adapt="dual_averaging", target_accept=TARGET_ACCEPT):
    """Gibbs-with-Gradients (:mod:`gradmc.discrete.gwg`): each step changes about L =
    ``num_flips`` coordinates, L adapted in warm-up.

    ``num_flips=1, adapt=None`` is the paper's GWG (one coordinate per step, a Hamming ball
    of radius 1). Otherwise every coordinate may change: coordinate i moves with
    probability 1 − exp(−L·w_i), w_i its probability under the one-change proposal (the
    module doc says why this is exact); a step costs the same whatever L.

    Parameters
    ----------
    target : gradmc.base.Target
        A target on a discrete space.
    num_warmup : int
        Warm-up steps: L follows ``adapt`` during them and is frozen after.
    num_flips : float
        L in (0, d], the expected number of moves drawn per step: the first value of the
        warm-up (it stays within [1, d]: at L = d and even weights each coordinate moves
        with probability 1 − e⁻¹, and a larger L would make every move near-certain, a
        chain that only oscillates), or the value used throughout with ``adapt=None``.
    adapt : {"dual_averaging", "robbins_monro", None}
        The warm-up rule for L (towards ``target_accept``); None keeps it.
    target_accept : float
        The mean acceptance probability aimed at (default 0.574, as DISCS's adaptive GWG).
    """
    return _gwg_sampler("gwg", target, num_warmup, 1, num_flips, adapt, target_accept)


@_register(
    "ordinal-gwg",
    "ordinal Gibbs-with-Gradients: one coordinate moves up to r values (Rhodes & Gutmann 2022, App. G)",
    tuned=(Tuned("num_flips"),),
    kernel=gwg,
    kernel_options=("radius", "num_flips"),
)
def build_ordinal_gwg(
    target: Target, num_warmup: int, radius=1, num_flips=1.0, adapt="dual_averaging", target_accept=TARGET_ACCEPT
):
    """Ordinal Gibbs-with-Gradients (:mod:`gradmc.discrete.gwg`) on ordered values.

    ``num_flips=1, adapt=None`` is the paper's ordinal-GWG.

    Parameters
    ----------
    target : gradmc.base.Target
        A target on Binary, Spin or Ordinal values.
    num_warmup : int
        Warm-up steps: the number of coordinates moved follows ``adapt`` during them.
    radius : int
        r ≥ 1 (the paper tunes it, e.g. 16 / 8 for poly2 / poly4).
    num_flips : float
        L > 0, the expected number of moves drawn per step (as for ``gwg``): the first
        value of the warm-up, or the value used throughout with ``adapt=None``.
    adapt : {"dual_averaging", "robbins_monro", None}
        The warm-up rule for L; None keeps it.
    target_accept : float
        The mean acceptance probability aimed at (default 0.574).
    """
    if isinstance(target.space, Categorical):
        raise ValueError("ordinal-gwg needs ordered values (Binary, Spin, Ordinal); use gwg on Categorical spaces")
    return _gwg_sampler("ordinal-gwg", target, num_warmup, radius, num_flips, adapt, target_accept)


#: The acceptance rate MH-uniform's move scale aims at in warm-up: many coordinates move at
#: once, a random walk in many dimensions, whose optimal acceptance tends to 0.234 as d grows
#: (Roberts, Gelman & Gilks 1997).
RANDOM_WALK_ACCEPT = 0.234
#: The acceptance rate the lattice Metropolis's radius aims at: one coordinate moves, a
#: one-dimensional random walk, whose optimal acceptance is 0.44 (Gelman, Roberts & Gilks 1996).
SINGLE_SITE_ACCEPT = 0.44


def _radius_sampler(name: str, module: ModuleType, target: Target, space, num_warmup, radius, adapt, target_accept):
    """The lattice Metropolis with radius r; with ``adapt`` the radius is
    adapted in warm-up as a real value towards ``target_accept`` (a larger radius is
    accepted less often) and frozen, rounded to an integer in {1, …, k − 1}, after; the
    kernel takes the rounded radius as a traced value.
    """
    radius = check_radius(radius)
    rule = _warmup_rule(adapt, target_accept, num_warmup)
    kernel = module.build_kernel()
    largest = space.num_values - 1

    def rounded(value):
        return jnp.clip(jnp.round(value), 1, largest).astype(jnp.int32)

    def radius_stats(state, info, radius):
        return stats(state, info, num_grad_evals=0, extra={"radius": jnp.asarray(radius, jnp.float32)})

    if rule is None:
        return bind(
            name,
            lambda key, position: module.init(position, target.logdensity_fn),
            lambda key, state, radius: kernel(key, state, target.logdensity_fn, space, radius),
            {"radius": radius},
            lambda state, info, params: radius_stats(state, info, params["radius"]),
        )
    return step_size_sampler(
        name,
        module.init,
        lambda key, state, logdensity_fn, value: kernel(key, state, logdensity_fn, space, rounded(value)),
        target.logdensity_fn,
        float(radius),
        rule,
        lambda state, info, value: radius_stats(state, info, rounded(value)),
        parameter="radius",
        kept_value=rounded,
    )


def _uniform_move(scale, space: DiscreteSpace):
    """``(radius, move_probability)`` of MH-uniform's move scale u: u ≥ 1 moves every
    coordinate within radius round(u) (the paper's proposal, r ≤ k − 1), u < 1 moves each
    coordinate with probability u (at least 1/d) within radius 1. A larger u makes a
    larger move, so it is adapted like a step size.
    """
    radius = jnp.clip(jnp.round(scale), 1, space.num_values - 1).astype(jnp.int32)
    return radius, jnp.clip(scale, 1.0 / space.d, 1.0).astype(jnp.float32)


def _kept_move_scale(scale, space: DiscreteSpace):
    """The move scale u as the kernel uses it (:func:`_uniform_move`): r at or above 1, p below."""
    radius, probability = _uniform_move(scale, space)
    return jnp.where(scale < 1.0, probability, radius.astype(jnp.float32))


@_register(
    "mh-uniform",
    "Metropolis-Hastings, uniform proposal on the hypercube of radius r (Rhodes & Gutmann 2022, App. G); "
    "radius or share of coordinates moved adapted in warm-up",
    tuned=(Tuned("move_scale"),),
    kernel=uniform,
    kernel_options=("radius", "move_probability"),
)
def build_mh_uniform(
    target: Target,
    num_warmup: int,
    radius=1,
    move_probability=1.0,
    adapt="dual_averaging",
    target_accept=RANDOM_WALK_ACCEPT,
):
    """MH-uniform (:mod:`gradmc.discrete.uniform`): each coordinate moves with probability p
    to a uniform value within radius r; the size of the move adapted in warm-up.

    One number sets the size of the move, the move scale u: u ≥ 1 is the paper's proposal
    with r = round(u) (every coordinate moves), u < 1 moves each coordinate with probability
    p = u within r = 1. The warm-up adapts u (``trace.params["move_scale"]``); on a binary
    model, where r = 1 already spans both values, only p can make the move smaller.

    Parameters
    ----------
    target : gradmc.base.Target
        A target on a discrete space.
    num_warmup : int
        Warm-up steps: u follows ``adapt`` during them and is frozen after.
    radius : int
        r ≥ 1: with ``adapt=None`` the radius used throughout (2 / 1 for poly2 / poly4 in
        the paper); with adaptation the warm-up starts from u = r·p.
    move_probability : float
        p in (0, 1], the probability that a coordinate moves: with ``adapt=None`` used
        throughout (1, every coordinate, is the paper's proposal).
    adapt : {"dual_averaging", "robbins_monro", None}
        The warm-up rule (dual averaging of log u towards ``target_accept``, u kept in
        [1/d, k − 1] for k values per coordinate); None keeps r and p.
    target_accept : float
        The mean acceptance probability aimed at (default 0.234, the optimal acceptance of
        a random walk that moves many coordinates at once, Roberts, Gelman & Gilks 1997).
    """
    space = check_space(target, "mh-uniform")
    radius = check_radius(radius)
    move_probability = check_move_probability(move_probability)
    rule = _warmup_rule(adapt, target_accept, num_warmup)
    kernel = uniform.build_kernel(partial=rule is not None or uniform.is_partial(move_probability))

    def move_stats(state, info, radius, move_probability, **scale):
        extra = {"radius": jnp.asarray(radius, jnp.float32), "move_probability": move_probability, **scale}
        return stats(state, info, num_grad_evals=0, extra=extra)

    def adapted_stats(state, info, scale):
        return move_stats(state, info, *_uniform_move(scale, space), move_scale=_kept_move_scale(scale, space))

    if rule is None:
        return bind(
            "mh-uniform",
            lambda key, position: uniform.init(position, target.logdensity_fn),
            lambda key, state, radius, move_probability: kernel(
                key, state, target.logdensity_fn, space, radius, move_probability
            ),
            {"radius": radius, "move_probability": move_probability},
            lambda state, info, params: move_stats(state, info, params["radius"], params["move_probability"]),
        )
    return step_size_sampler(
        "mh-uniform",
        uniform.init,
        lambda key, state, logdensity_fn, scale: kernel(key, state, logdensity_fn, space, *_uniform_move(scale, space)),
        target.logdensity_fn,
        float(radius) * float(move_probability),
        rule,
        adapted_stats,
        parameter="move_scale",
        kept_value=lambda scale: _kept_move_scale(scale, space),
    )


@_register(
    "gibbs",
    "single-site Gibbs from exact full conditionals, random or systematic scan (one coordinate per step)",
    kernel=gibbs,
    kernel_options=("scan",),
)
def build_gibbs(target: Target, num_warmup: int, scan: str = "random"):
    """Single-site Gibbs (:mod:`gradmc.discrete.gibbs`). One step = one coordinate update
    (k log-density evaluations, batched); d steps make a sweep.

    Parameters
    ----------
    target : gradmc.base.Target
        A target on a discrete space.
    num_warmup : int
        Warm-up steps (ordinary steps: nothing adapts).
    scan : {"random", "systematic"}
        Which coordinate a step updates.
    """
    del num_warmup
    space = check_space(target, "gibbs")
    kernel = gibbs.build_kernel(gibbs.check_scan(scan))
    k = space.num_values
    return bind(
        "gibbs",
        lambda key, position: gibbs.init(position, target.logdensity_fn),
        lambda key, state: kernel(key, state, target.logdensity_fn, space),
        {},
        lambda state, info, params: stats(state, info, num_grad_evals=0, extra={"logdensity_evals": jnp.float32(k)}),
    )


@_register(
    "lattice-metropolis",
    "Metropolis on a lattice (Zhou & Tan 2025): one random coordinate moves by k ~ U{-r..r}; off-lattice rejected; "
    "r adapted in warm-up",
    tuned=(Tuned("radius"),),
    kernel=lattice_metropolis,
    kernel_options=("radius",),
)
def build_lattice_metropolis(
    target: Target, num_warmup: int, radius=2, adapt="dual_averaging", target_accept=SINGLE_SITE_ACCEPT
):
    """The lattice Metropolis (:mod:`gradmc.discrete.lattice_metropolis`), its radius r
    adapted in warm-up.

    Parameters
    ----------
    target : gradmc.base.Target
        A target on Binary, Spin or Ordinal values.
    num_warmup : int
        Warm-up steps: r follows ``adapt`` during them and is frozen, rounded, after.
    radius : int
        r ≥ 1: the first value of the warm-up, or the value used throughout with
        ``adapt=None`` (the papers' tuned r = 2 on the discrete Gaussian).
    adapt : {"dual_averaging", "robbins_monro", None}
        The warm-up rule (dual averaging of log r towards ``target_accept``, r kept in
        {1, …, k − 1} for k values per coordinate); None keeps r.
    target_accept : float
        The mean acceptance probability aimed at (default 0.44, the optimal acceptance of
        a one-dimensional random walk, Gelman, Roberts & Gilks 1996: a step moves one
        coordinate).
    """
    space = hams.check_space(target)
    return _radius_sampler(
        "lattice-metropolis", lattice_metropolis, target, space, num_warmup, radius, adapt, target_accept
    )


# -- Zhou & Tan (2025): DHAMS, PDHAMS, PAVG's variance form ---------------------------------------


def _hams_sampler(name, target, space, precond, epsilon, phi, beta, delta) -> BoundSampler:
    """The HAMS kernel without adaptation; the preconditioner is a constant shared by all
    chains, so its mat-vecs batch across chains.
    """
    kernel = hams.build_kernel(beta)
    return bind(
        name,
        lambda key, position: hams.init(position, target.logdensity_fn, key),
        lambda key, state, epsilon, phi: kernel(key, state, target.logdensity_fn, space, precond, epsilon, phi),
        {"epsilon": jnp.float32(epsilon), "phi": jnp.float32(phi)},
        lambda state, info, params: _hams_stats(state, info, delta),
    )


def _hams_stats(state, info, delta):
    """A HAMS step's statistics: δ as its step size, and the log MH ratio."""
    return stats(state, info, delta, extra={"log_ratio": jnp.asarray(info.log_ratio, jnp.float32)})


def _given_w(target: Target, W) -> np.ndarray | None:
    """The W given as an option, else the target's ``metadata['W']``, else None (learn it)."""
    W = target.metadata.get("W") if W is None else W
    return None if W is None else check_w(W, hams.check_space(target).dim)


#: DHAMS's δ in warm-up stays below this multiple of the span of the values: beyond it
#: the reference's quadratic term (x − y)²/(2δ²) is negligible, so a larger δ changes
#: nothing, and an acceptance rate that stays above the target cannot push δ to overflow.
MAX_DELTA_PER_SPAN = 100.0


def _adapted_dhams_sampler(name, target: Target, space, rule, delta, epsilon, phi_pdhams, beta) -> BoundSampler:
    """DHAMS whose δ follows ``rule`` in warm-up (from ``delta``) and is frozen after; ε, β
    and the PDHAMS φ (= φ_DHAMS / δ, §7.9) stay fixed. The preconditioner of the current δ
    (diagonal, :func:`~gradmc.curvature.second_order.dhams_preconditioner`) is rebuilt each
    step.
    """
    kernel = hams.build_kernel(beta)
    largest = MAX_DELTA_PER_SPAN * float(np.ptp(np.asarray(space.values)))  # one-hot entries: span 1

    def capped(delta):
        return jnp.minimum(delta, largest)

    def step(key, state, logdensity_fn, delta):
        precond = dhams_preconditioner(capped(delta), space.dim)
        return kernel(key, state, logdensity_fn, space, precond, epsilon, phi_pdhams)

    return step_size_sampler(
        name,
        hams.init,
        step,
        target.logdensity_fn,
        float(delta),
        rule,
        lambda state, info, delta: _hams_stats(state, info, capped(delta)),
        parameter="delta",
        kept_value=capped,
        init_with_key=True,
    )


#: What the HAMS samplers' warm-up tunes: the step size δ.
DELTA = Tuned("delta")


def _dhams_builder(name, beta_default, settings):
    delta0, eps0, _, phi0 = settings

    def build(
        target: Target,
        num_warmup: int,
        delta=delta0,
        epsilon=eps0,
        phi=phi0,
        beta=beta_default,
        adapt="dual_averaging",
        target_accept=TARGET_ACCEPT,
    ):
        space = hams.check_space(target)
        hams.check_hyper(epsilon, beta, delta)
        phi_pdhams = float(phi) / float(delta)
        rule = _warmup_rule(adapt, target_accept, num_warmup)
        if rule is None:
            precond = dhams_preconditioner(delta, space.dim)
            return _hams_sampler(name, target, space, precond, epsilon, phi_pdhams, beta, delta)
        return _adapted_dhams_sampler(name, target, space, rule, delta, epsilon, phi_pdhams, beta)

    build.__doc__ = f"""{name.upper()} (:mod:`gradmc.discrete.hams` with W = 0, D = δ⁻² I, L = δ⁻¹ I), δ adapted in
    warm-up.

    The warm-up runs Zhou & Tan's Algorithm 5 (PD Supplement G; docs/discrete-hams.md §9) as
    far as it can run online: ε and β stay fixed, δ follows dual averaging of log δ towards
    ``target_accept`` (a larger δ is accepted less often) and is frozen after, and φ/δ — the
    PDHAMS φ of §7.9, the size of the gradient correction relative to D — is held at its
    starting value. Algorithm 5 chooses φ by the ESS of whole runs, which a warm-up cannot
    compare, so φ/δ keeps the DHAMS code's calibrated ratio ({phi0} / {delta0}) unless ``phi``
    or ``delta`` are given: a compromise, as ``phi=0`` does better on DISCS's Ising model and
    worse on the discrete Gaussian and poly2 (docs/samplers.md, "Tuning in warm-up").
    ``adapt=None`` runs the values given (by default the DHAMS code's discrete-Gaussian
    settings) throughout.

    Parameters
    ----------
    target : gradmc.base.Target
        A target on a discrete space.
    num_warmup : int
        Warm-up steps: δ follows ``adapt`` during them and is frozen after.
    delta : float
        The step size δ > 0: the first value of the warm-up, or the value used throughout
        with ``adapt=None`` (default {delta0}).
    epsilon : float
        The auto-regression ε ∈ [0, 1) (default {eps0}).
    phi : float
        The gradient correction φ in the DHAMS parametrisation, at the starting δ (default
        {phi0}); while δ adapts, φ/δ is held.
    beta : float
        The over-relaxation β ∈ (0, 1] (default {beta_default}).
    adapt : {{"dual_averaging", "robbins_monro", None}}
        The warm-up rule for δ (towards ``target_accept``); None keeps δ.
    target_accept : float
        The mean acceptance probability aimed at (default 0.574, as NCG's).
    """
    return build


_register(
    "v-dhams", "vanilla discrete HAMS (Zhou & Tan, DHAMS): δ adapted in warm-up; ε, φ/δ fixed; β = 1", tuned=(DELTA,)
)(_dhams_builder("v-dhams", 1.0, hams.DHAMS_SETTINGS["v-dhams"]))
_register(
    "o-dhams",
    "over-relaxed discrete HAMS (Zhou & Tan, DHAMS): δ adapted in warm-up; ε, φ/δ, β < 1 fixed",
    tuned=(DELTA,),
)(_dhams_builder("o-dhams", 0.1, hams.DHAMS_SETTINGS["o-dhams"]))


#: Exploring steps whose moves the learned W is fitted from (per chain, pooled over chains).
W_HISTORY = 500
#: The largest dimension for which W is learned dense: a dense W, its factors and the move
#: history take about 4 d² + 2 · 500 d floats per chain. Above it W is learned sparse (§8.7).
MAX_LEARNED_W_DIM = 2000
#: From this dimension on, a learned W is of low rank when the Hessian's range is (rank ≤ d/4).
MIN_LOW_RANK_DIM = 256
#: Exploring steps a sparse or low-rank W is fitted from: 50 · 100 chains give 5,000 moves
#: for the few unknowns of each row (or the r(r + 1)/2 of a rank-r W), in 2 · 50 · d floats
#: per chain.
SPARSE_W_HISTORY = 50


#: The smallest δ the warm-up of a learned W may reach, as a fraction of the starting δ: on a
#: quadratic target the learned W makes PDHAMS rejection-free at every δ, so the acceptance
#: rate keeps pushing δ down; on DISCS's Ising models δ = 1/4 and 1/10 of the default mix
#: alike, and better than the default (docs/samplers.md, "Tuning in warm-up").
MIN_DELTA_FRACTION = 0.25


def _delta_tuning(adapt, target_accept, delta, build) -> ModelTuning:
    """The tuning of PDHAMS's δ after the fit: the rule ``adapt`` on x = 1/δ (the acceptance
    rate falls as x grows), pooled over chains; δ ≥ :data:`MIN_DELTA_FRACTION` · ``delta``.
    ``adapt=None`` keeps δ.
    """
    rule = rule_by_name(adapt, target_accept) or fixed_rule()
    smallest = MIN_DELTA_FRACTION * float(delta)

    def delta_of(x):
        return jnp.maximum(1.0 / x, smallest)

    return ModelTuning(rule, 1.0 / float(delta), lambda fitted, x: build(fitted, delta_of(x)), "delta", delta_of)


def _learned_w_form(name: str, f, space) -> tuple[str, Any]:
    """Which form the learned W takes, with what it needs: ``("dense", None)``,
    ``("low-rank", basis)``, ``("sparse", pattern)`` or ``("graph", graph)`` (module docs of
    :mod:`gradmc.curvature.low_rank_model`, :mod:`gradmc.curvature.sparse_model` and
    :mod:`gradmc.curvature.graph_model`).

    Below d = :data:`MIN_LOW_RANK_DIM` W is dense. Above it the Hessian's range is probed: a
    rank r ≤ d/4 (and ≤ :data:`~gradmc.curvature.low_rank_model.MAX_RANK`) makes W low-rank,
    O(d r) a step instead of O(d²). Above d = :data:`MAX_LEARNED_W_DIM` a dense W is not
    learned: W is low-rank when r is also below the number of the Hessian's diagonals (or
    the Hessian has too many diagonals), else sparse on its pattern by diagonals, else sparse
    on its graph (at most :data:`~gradmc.curvature.graph_model.MAX_DEGREE` neighbours per
    coordinate); a Hessian that is none of these is refused.
    """
    d = space.dim
    max_rank = min(low_rank_model.MAX_RANK, d // 4)
    if d <= MAX_LEARNED_W_DIM:
        if d < MIN_LOW_RANK_DIM:
            return "dense", None
        basis = low_rank_model.hessian_range(f, space, max_rank=max_rank)
        return ("dense", None) if basis is None else ("low-rank", basis)
    pattern = sparse_model.hessian_pattern(f, space)
    if pattern is not None:
        max_rank = min(max_rank, len(pattern.offsets) - 1)
    basis = low_rank_model.hessian_range(f, space, max_rank=max_rank) if max_rank >= 1 else None
    if basis is not None:
        return "low-rank", basis
    if pattern is not None:
        return "sparse", pattern
    graph = graph_model.hessian_graph(f, space)
    if graph is not None:
        return "graph", graph
    raise ValueError(
        f"{name} learns a dense second-order model W only up to d = {MAX_LEARNED_W_DIM}, and above it a sparse "
        f"W (at most {graph_model.MAX_DEGREE} neighbours per coordinate) or a W of rank at most "
        f"{low_rank_model.MAX_RANK}; this target's Hessian (d = {d}) is none of these. Pass W= (e.g. from "
        "gradmc.tuning.calibration.calibrate_w) or use ncg, gwg or pavg"
    )


def _learned_w_sampler(
    name, target: Target, num_warmup, delta, epsilon, phi, beta, adapt, target_accept
) -> BoundSampler:
    """PDHAMS whose W is learned in warm-up (:mod:`gradmc.adapt.learned_model`): NCG, adapting
    its step size, explores the first half; W is the gradient regression of PD eq. 38 on the
    pooled moves of all chains, D and L follow; the second half runs PDHAMS and tunes δ (one
    for all chains) towards ``target_accept``.

    W takes one of four forms (:func:`_learned_w_form`): dense (D by §8.4, L by §8.5, both
    from W's eigendecomposition for any δ); of low rank on the Hessian's range
    (:mod:`gradmc.curvature.low_rank_model`, §8.9), where that rank is small; sparse on the
    Hessian's pattern above d = :data:`MAX_LEARNED_W_DIM` (:mod:`gradmc.curvature.sparse_model`,
    at most :data:`~gradmc.curvature.sparse_model.MAX_OFFSETS` diagonals) or on its graph
    (:mod:`gradmc.curvature.graph_model`, §8.10), with the Gershgorin D and the edge or block
    factor L (§8.7; φ = 0 only).
    """
    if int(num_warmup) < 200:
        raise ValueError(
            f"{name} learns its second-order model W during warm-up and needs num_warmup >= 200 "
            f"(got {num_warmup}); pass W= to use a given W"
        )
    space = hams.check_space(target)
    f = target.logdensity_fn
    d = space.dim
    form, structure = _learned_w_form(name, f, space)
    if form in ("sparse", "graph") and (not is_concrete(phi) or float(phi) != 0.0):
        raise ValueError(
            f"{name} learns a sparse W for d = {d} > {MAX_LEARNED_W_DIM}, which runs with phi = 0 only "
            f"(got phi = {phi}); pass phi=0, or a dense W= to use phi != 0"
        )
    explorer = _first_order_sampler("ncg", ncg, target, num_warmup, 0.5, "dual_averaging", TARGET_ACCEPT)
    hams_kernel = hams.build_kernel(beta)
    common = dict(
        name=name,
        explorer=explorer,
        gradient=lambda explorer_state: explorer_state.kernel.grad,
        num_warmup=num_warmup,
        dim=d,
        kernel=lambda key, state, precond: hams_kernel(key, state, f, space, precond, epsilon, phi),
        stats_fn=stats,
    )
    if form == "dense":
        eye = jnp.eye(d, dtype=jnp.float32)
        return explore_then_fit_sampler(
            num_history=W_HISTORY,
            fit=pooled_dense_fit(lambda xtx, xty: eigen_model(fit_w_from_sums(xtx, xty))),
            placeholder_model=EigenModel(0.0 * eye, jnp.zeros(d, jnp.float32), eye),
            kernel_init=lambda key, position: hams.init(position, f, key),
            params_of=lambda precond: {"model": precond, "W": precond.W},
            tuning=_delta_tuning(adapt, target_accept, delta, eigen_pdhams_preconditioner),
            **common,
        )
    if form == "low-rank":
        return explore_then_fit_sampler(
            num_history=SPARSE_W_HISTORY,
            fit=low_rank_model.pooled_low_rank_fit(structure),
            placeholder_model=low_rank_model.placeholder_model(structure),
            kernel_init=lambda key, position: hams.init(position, f, key),
            params_of=low_rank_model.summary,
            tuning=_delta_tuning(adapt, target_accept, delta, low_rank_pdhams_preconditioner),
            **common,
        )
    if form == "graph":
        placeholder = graph_model.placeholder_model(structure, delta)
        fit, with_delta = graph_model.pooled_graph_fit(structure, delta), graph_model.with_delta
        summary = graph_model.summary
    else:
        placeholder = sparse_model.placeholder_model(structure, d, delta)
        fit, with_delta = sparse_model.pooled_structured_fit(structure, delta), sparse_model.with_delta
        summary = sparse_model.summary
    return explore_then_fit_sampler(
        num_history=SPARSE_W_HISTORY,
        fit=fit,
        placeholder_model=placeholder,
        kernel_init=lambda key, position: hams.init(position, f, key, precond=placeholder),
        params_of=summary,
        tuning=_delta_tuning(adapt, target_accept, delta, with_delta),
        **common,
    )


def _pdhams_sampler(
    name, target: Target, num_warmup, W, delta, epsilon, phi, beta, adapt, target_accept
) -> BoundSampler:
    """PDHAMS with the given W (``W=`` or the target's ``metadata['W']``) at the given δ,
    else with W learned and δ tuned in warm-up (:func:`_learned_w_sampler`).
    """
    space = hams.check_space(target)
    hams.check_hyper(epsilon, beta, delta)
    W = _given_w(target, W)
    if W is None:
        return _learned_w_sampler(name, target, num_warmup, delta, epsilon, phi, beta, adapt, target_accept)
    rule_by_name(adapt, target_accept)  # bad options raise either way
    return _hams_sampler(name, target, space, pdhams_preconditioner(W, delta), epsilon, phi, beta, delta)


def _pdhams_builder(name, beta_default, eps_default, phi_default):
    def build(
        target: Target,
        num_warmup: int,
        W=None,
        delta=1.0,
        epsilon=eps_default,
        phi=phi_default,
        beta=beta_default,
        adapt="dual_averaging",
        target_accept=TARGET_ACCEPT,
    ):
        return _pdhams_sampler(name, target, num_warmup, W, delta, epsilon, phi, beta, adapt, target_accept)

    build.__doc__ = f"""{name.upper()} (:mod:`gradmc.discrete.hams` with a second-order model W).

    Parameters
    ----------
    target : gradmc.base.Target
        A target on a discrete space (one-hot Categorical rows: W acts on the flat position).
    num_warmup : int
        Warm-up steps: when W is learned (no ``W`` given and none in the target's
        metadata), the first half explores with a self-tuning NCG, W is fitted from the
        moves of all chains (PD eq. 38) and the second half runs {name}; at least 200.
        With a given W the warm-up steps are ordinary steps.
    W : array_like, optional
        The second-order model (default: the target's ``metadata['W']``, else learned in
        warm-up: dense up to d = 2,000 or of low rank on the Hessian's range where that
        is small, above d = 2,000 sparse on the Hessian's diagonals or graph with φ = 0
        only; docs/discrete-hams.md §8.7–§8.10).
    delta : float
        The step size δ > 0: D = (δ − λ_min W) I (a learned sparse W: the Gershgorin
        D_i = δ − W_ii + Σ_j |w_ij|). With a learned W, the first value of its tuning.
    epsilon : float
        The auto-regression ε ∈ [0, 1) (default {eps_default}).
    phi : float
        The gradient correction φ (default {phi_default}).
    beta : float
        The over-relaxation β ∈ (0, 1] (default {beta_default}).
    adapt : {{"dual_averaging", "robbins_monro", None}}
        With a learned W, the rule that tunes δ after the fit (one δ for all chains, the
        acceptance rate pooled; δ ≥ δ₀/4), then frozen; None keeps ``delta``. A given W
        runs with the ``delta`` given.
    target_accept : float
        The mean acceptance probability δ is tuned towards (default 0.574).
    """
    return build


#: PDHAMS's default auto-regression ε with φ = 0. Zhou & Tan's tuning fixes ε = 0.9 together
#: with a calibrated φ; with φ = 0, ε = 0.5 mixes better on every DISCS model measured
#: (docs/samplers.md, "Tuning in warm-up").
PDHAMS_EPSILON = 0.5

_register(
    "v-pdhams",
    "vanilla preconditioned discrete HAMS (Zhou & Tan 2025, Alg. 1): W given or learned in warm-up; δ, ε, φ",
    tuned=(DELTA,),
)(_pdhams_builder("v-pdhams", 1.0, PDHAMS_EPSILON, 0.0))
_register(
    "o-pdhams",
    "over-relaxed preconditioned discrete HAMS (Zhou & Tan 2025, Alg. 3): W given or learned; δ, ε, φ, β",
    tuned=(DELTA,),
)(_pdhams_builder("o-pdhams", 0.1, PDHAMS_EPSILON, 0.0))


@_register(
    "pavg-variance",
    "PAVG in Zhou & Tan's variance form = PDHAMS with ε = 0, φ = 0, β = 1; W given or learned",
    tuned=(DELTA,),
)
def build_pavg_variance(
    target: Target, num_warmup: int, W=None, delta=1.0, adapt="dual_averaging", target_accept=TARGET_ACCEPT
):
    """PAVG in Zhou & Tan's variance form: :mod:`gradmc.discrete.hams` with ε = 0, φ = 0, β = 1.

    Parameters
    ----------
    target : gradmc.base.Target
        A target on a discrete space (one-hot Categorical rows: W acts on the flat position).
    num_warmup : int
        Warm-up steps: W is learned in them as for the PDHAMS samplers when no W is given
        (at least 200); with a given W they are ordinary steps.
    W : array_like, optional
        The second-order model (default: the target's ``metadata['W']``, else learned).
    delta : float
        The step size δ > 0: D = (δ − λ_min W) I; with a learned W, the first value of its
        tuning.
    adapt : {"dual_averaging", "robbins_monro", None}
        With a learned W, the rule that tunes δ after the fit (as for ``v-pdhams``); None
        keeps ``delta``.
    target_accept : float
        The mean acceptance probability δ is tuned towards (default 0.574).
    """
    return _pdhams_sampler("pavg-variance", target, num_warmup, W, delta, 0.0, 0.0, 1.0, adapt, target_accept)
