"""Every continuous sampler of the registry: a kernel bound to its warm-up.

Each builder ``build(target, num_warmup, **options) -> BoundSampler`` checks the user's
options, fills in the defaults and binds a kernel of :mod:`gradmc.continuous` to its warm-up
(a step-size rule or Stan's window adaptation from :mod:`gradmc.adapt.step_size`, or the
kernel's own adaptation). Importing this module registers them all:

=======================  ==========================================================
name                     kernel module
=======================  ==========================================================
rwm                      :mod:`~gradmc.continuous.rwm`
mala, ula                :mod:`~gradmc.continuous.mala`
hmc, nuts                :mod:`~gradmc.continuous.hmc`
jittered-hmc             :mod:`~gradmc.continuous.jittered_hmc`
am                       :mod:`~gradmc.continuous.am`
ram                      :mod:`~gradmc.continuous.ram`
gadrwm, gadmala-f/-e     :mod:`~gradmc.continuous.gad`
sgld                     :mod:`~gradmc.continuous.sgld`
ct-hmc                   :mod:`~gradmc.continuous.ct_hmc`
parallel-tempering       :mod:`~gradmc.continuous.parallel_tempering`
simulated-tempering      :mod:`~gradmc.continuous.simulated_tempering`
equi-energy              :mod:`~gradmc.continuous.equi_energy`
=======================  ==========================================================
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from gradmc.adapt.step_size import robbins_monro, rule_by_name
from gradmc.adapt.warmup import Rule, WarmupKernel, bind, bind_two_phase, step_size_sampler, window_rule
from gradmc.base import BoundSampler, Target, mh_stats, reject_nonfinite, step_stats
from gradmc.checks import check_positive, check_probability
from gradmc.continuous import (
    am,
    ct_hmc,
    equi_energy,
    gad,
    hmc,
    jittered_hmc,
    mala,
    parallel_tempering,
    ram,
    rwm,
    sgld,
    simulated_tempering,
)
from gradmc.continuous.tempering import gaussian_reference, resolve_ladder
from gradmc.linalg import cholesky_factor
from gradmc.registry import TARGET_ACCEPT_OPTION, WARMUP_RULE_OPTION, Fix, Tuned, register_sampler

__all__ = [
    "build_rwm",
    "build_mala",
    "build_ula",
    "build_hmc",
    "build_nuts",
    "build_jittered_hmc",
    "build_am",
    "build_ram",
    "build_sgld",
    "build_ct_hmc",
    "build_parallel_tempering",
    "build_simulated_tempering",
    "build_equi_energy",
    "gad_sampler",
]


#: What most samplers' warm-up tunes: the step size, towards ``target_accept`` unless ``adapt=None``.
STEP_SIZE = Tuned("step_size")
#: The same for samplers whose warm-up always adapts (no ``adapt`` option).
ALWAYS_STEP_SIZE = Tuned("step_size", switch=None)
#: HMC's and NUTS's other cure for divergences.
DENSE_MASS = Fix("dense_mass", True, "for correlated coordinates")


def _cholesky(matrix, what: str, dim: int):
    """The Cholesky factor of ``matrix`` (``None`` when not given)."""
    return None if matrix is None else cholesky_factor(matrix, what, dim)


def _plain_sampler(name: str, init: Callable, one_step: Callable, params: dict, position: Callable) -> BoundSampler:
    """A sampler whose warm-up steps are its kernel steps: ``one_step(key, state) -> (state, StepStats)``."""
    return bind(
        name,
        init,
        lambda key, state, **_: one_step(key, state),
        params,
        lambda state, stats, params: stats,
        position=position,
        refresh=False,  # RAM's shape matrix, equi-energy's rings: more than the position
    )


@register_sampler(
    "rwm",
    "random-walk Metropolis, isotropic or full-covariance Gaussian proposal; step size adapted in warm-up",
    tuned=(STEP_SIZE,),
    options={
        "step_size": "The step size h, the first value of the warm-up (default 2.38/sqrt(d)).",
        "preconditioner": "The proposal covariance up to h² (default the identity); formerly ``cov``.",
        "target_accept": TARGET_ACCEPT_OPTION,
        "adapt": WARMUP_RULE_OPTION,
    },
)
def build_rwm(
    target: Target, num_warmup: int, step_size=None, preconditioner=None, target_accept=0.25, adapt="dual_averaging"
):
    """Random-walk Metropolis (:mod:`gradmc.continuous.rwm`)."""
    chol = _cholesky(preconditioner, "RWM preconditioner (proposal covariance)", target.dim)
    step_size = 2.38 / jnp.sqrt(target.dim) if step_size is None else step_size
    rule = rule_by_name(adapt, target_accept)
    return step_size_sampler(
        "rwm", rwm.init, rwm.build_kernel(), target.logdensity_fn, step_size, rule, mh_stats(0), chol=chol
    )


@register_sampler(
    "mala",
    "Metropolis-adjusted Langevin, optional constant preconditioner; step size adapted in warm-up",
    tuned=(STEP_SIZE,),
    options={
        "step_size": "The step size gamma, the first value of the warm-up (default 0.5/d^(1/3)).",
        "preconditioner": (
            "M, the positive-definite matrix of the proposal N(x + gamma M g(x), 2 gamma M) (default the identity)."
        ),
        "target_accept": TARGET_ACCEPT_OPTION,
        "adapt": WARMUP_RULE_OPTION,
    },
)
def build_mala(
    target: Target, num_warmup: int, step_size=None, preconditioner=None, target_accept=0.574, adapt="dual_averaging"
):
    """MALA (:mod:`gradmc.continuous.mala`, eq. 5.7-5.8)."""
    chol = _cholesky(preconditioner, "MALA preconditioner", target.dim)
    step_size = 0.5 / target.dim ** (1 / 3) if step_size is None else step_size
    rule = rule_by_name(adapt, target_accept)
    return step_size_sampler(
        "mala", mala.init, mala.build_kernel(), target.logdensity_fn, step_size, rule, mh_stats(1), chol=chol
    )


@register_sampler(
    "ula",
    "unadjusted Langevin (MALA's move without the MH test); fixed step size, biased",
    options={
        "step_size": "The step size gamma (fixed; the bias grows with it).",
        "preconditioner": "M, as for ``mala`` (default the identity).",
    },
)
def build_ula(target: Target, num_warmup: int, step_size=0.01, preconditioner=None):
    """ULA (:mod:`gradmc.continuous.mala` without the MH test)."""
    chol = _cholesky(preconditioner, "ULA preconditioner", target.dim)
    return step_size_sampler(
        "ula", mala.init, mala.build_kernel(False), target.logdensity_fn, step_size, None, mh_stats(1), chol=chol
    )


@register_sampler(
    "sgld",
    "stochastic gradient Langevin dynamics: minibatch gradients of K data, fixed step, no MH test",
    options={"step_size": "The step size gamma (fixed).", "batch_size": "K, drawn with replacement."},
)
def build_sgld(target: Target, num_warmup: int, step_size=1e-3, batch_size=32):
    """SGLD (:mod:`gradmc.continuous.sgld`); needs a target with ``per_datum`` terms."""
    if target.per_datum is None:
        raise ValueError(f"sgld needs a target with per-datum likelihood terms; {target.name!r} has none")
    check_positive("batch_size", batch_size, integer=True)
    kernel = sgld.build_kernel(int(batch_size))
    return step_size_sampler("sgld", sgld.init, kernel, target.per_datum, step_size, None, mh_stats(1))


# -- HMC and NUTS ----------------------------------------------------------------------------


def _window_sampler(
    name: str,
    kind: str,
    logdensity_fn: Callable,
    num_warmup: int,
    dense_mass: bool,
    target_accept,
    initial_step_size,
    **kernel_params,
) -> BoundSampler:
    """BlackJAX's ``kind`` kernel on ``logdensity_fn`` (non-finite values rejected) with Stan's window adaptation."""
    logdensity = reject_nonfinite(logdensity_fn)
    return bind(
        name,
        lambda key, position: hmc.init(position, logdensity),
        _hmc_step(kind, logdensity, **kernel_params),
        {},
        lambda state, info, params: hmc.stats(state, info, params["step_size"]),
        window_rule(num_warmup, dense_mass, target_accept, initial_step_size),
    )


def _hmc_step(kind: str, logdensity: Callable, **kernel_params) -> Callable:
    """``step(key, state, step_size, inverse_mass_matrix, **ignored)`` of BlackJAX's ``kind`` kernel."""
    kernel = hmc.build_kernel(kind)

    def step(key, state, step_size, inverse_mass_matrix, **_):
        return kernel(key, state, logdensity, step_size, inverse_mass_matrix, **kernel_params)

    return step


@register_sampler(
    "hmc",
    "Hamiltonian Monte Carlo (BlackJAX), fixed path length; Stan window adaptation in warm-up",
    tuned=(STEP_SIZE,),
    fixes=(DENSE_MASS,),
    options={
        "num_integration_steps": "Leapfrog steps per trajectory.",
        "step_size": "The first step size (default 1 with window adaptation, else 0.5/d).",
        "target_accept": TARGET_ACCEPT_OPTION,
        "adapt": (
            'One of {"window", "dual_averaging", "robbins_monro", None}: "window": step size and mass'
            " matrix; otherwise the identity mass and this step-size rule."
        ),
        "dense_mass": "Adapt a dense mass matrix (window adaptation).",
    },
)
def build_hmc(
    target: Target,
    num_warmup: int,
    num_integration_steps=10,
    step_size=None,
    target_accept=0.8,
    adapt="window",
    dense_mass=False,
):
    """HMC (:mod:`gradmc.continuous.hmc`)."""
    check_positive("num_integration_steps", num_integration_steps, integer=True)
    if adapt == "window":
        return _window_sampler(
            "hmc",
            "hmc",
            target.logdensity_fn,
            num_warmup,
            dense_mass,
            target_accept,
            1.0 if step_size is None else step_size,
            num_integration_steps=int(num_integration_steps),
        )
    step_size = 0.5 / target.dim if step_size is None else step_size
    return step_size_sampler(
        "hmc",
        hmc.init,
        hmc.build_kernel("hmc"),
        reject_nonfinite(target.logdensity_fn),
        step_size,
        rule_by_name(adapt, target_accept),
        hmc.stats,
        inverse_mass_matrix=jnp.ones(target.dim),
        num_integration_steps=int(num_integration_steps),
    )


#: NUTS's options (those of jittered HMC's warm-up, too)
NUTS_OPTIONS = {
    "step_size": "The first step size.",
    "target_accept": TARGET_ACCEPT_OPTION,
    "dense_mass": "Adapt a dense mass matrix.",
    "max_num_doublings": "The largest tree depth.",
}


@register_sampler(
    "nuts",
    "No-U-Turn sampler (BlackJAX) with Stan window adaptation of step size and mass matrix",
    tuned=(ALWAYS_STEP_SIZE,),
    fixes=(DENSE_MASS,),
    options=NUTS_OPTIONS,
)
def build_nuts(
    target: Target, num_warmup: int, step_size=1.0, target_accept=0.8, dense_mass=False, max_num_doublings=10
):
    """NUTS (:mod:`gradmc.continuous.hmc`) with Stan's window adaptation."""
    check_positive("max_num_doublings", max_num_doublings, integer=True)
    return _window_sampler(
        "nuts",
        "nuts",
        target.logdensity_fn,
        num_warmup,
        dense_mass,
        target_accept,
        step_size,
        max_num_doublings=int(max_num_doublings),
    )


@register_sampler(
    "jittered-hmc",
    "HMC with 1..L leapfrog steps a step (Halton-jittered), L, step size and mass learned by NUTS in warm-up",
    tuned=(ALWAYS_STEP_SIZE,),
    fixes=(DENSE_MASS,),
    options={
        **NUTS_OPTIONS,
        "max_num_doublings": "The largest tree depth of the warm-up's NUTS.",
        "num_integration_steps": "The longest trajectory L in leapfrog steps (default: learned in warm-up).",
    },
)
def build_jittered_hmc(
    target: Target,
    num_warmup: int,
    step_size=1.0,
    target_accept=0.8,
    dense_mass=False,
    max_num_doublings=10,
    num_integration_steps=None,
):
    """Jittered HMC (:mod:`gradmc.continuous.jittered_hmc`): NUTS's trajectory length, without its tree."""
    check_positive("step_size", step_size)
    check_positive("max_num_doublings", max_num_doublings, integer=True)
    if num_integration_steps is not None:
        check_positive("num_integration_steps", num_integration_steps, integer=True)
    return jittered_hmc.jittered_hmc(
        target.logdensity_fn,
        num_warmup,
        dense_mass=dense_mass,
        target_accept=target_accept,
        initial_step_size=step_size,
        max_num_doublings=int(max_num_doublings),
        num_integration_steps=None if num_integration_steps is None else int(num_integration_steps),
    )


@register_sampler(
    "ct-hmc",
    "continuously tempered HMC (Graham & Storkey 2017): inverse temperature as a state, Gaussian base",
    tuned=(ALWAYS_STEP_SIZE,),
    options={
        "base_mean": "The mean of the Gaussian base q (default 0).",
        "base_cov": "The covariance of the Gaussian base q (default I).",
        "kernel": 'One of {"hmc", "nuts"}: the trajectory.',
        "num_integration_steps": "Leapfrog steps per HMC trajectory.",
        "target_accept": TARGET_ACCEPT_OPTION,
        "num_is_samples": "Importance draws for the estimate of c = log Z.",
    },
)
def build_ct_hmc(
    target: Target,
    num_warmup: int,
    base_mean=None,
    base_cov=None,
    kernel="hmc",
    num_integration_steps=10,
    target_accept=0.8,
    num_is_samples=2000,
):
    """Continuously tempered HMC (:mod:`gradmc.continuous.ct_hmc`) with Stan's window adaptation on (x, u)."""
    base = gaussian_reference(base_mean, base_cov, target.dim, "base_mean", "CT-HMC base covariance")
    if kernel not in hmc.KINDS:
        raise ValueError(f"kernel must be 'hmc' or 'nuts', got {kernel!r}")
    tempering = ct_hmc.continuous_tempering(target.logdensity_fn, base, target.space.event_shape, num_is_samples)
    length = {"num_integration_steps": int(num_integration_steps)} if kernel == "hmc" else {}
    logdensity = reject_nonfinite(tempering.joint)
    window = window_rule(num_warmup, False, target_accept, 1.0)
    log_z = jnp.asarray(tempering.log_z, jnp.float32)

    def stats(state, info, params):
        base_stats = hmc.stats(state, info, params["step_size"])
        return base_stats._replace(extra=dict(base_stats.extra, **tempering.weights(state.position)))

    return bind(
        "ct-hmc",
        lambda key, position: hmc.init(tempering.augment(position), logdensity),
        _hmc_step(kernel, logdensity, **length),
        {},
        stats,
        window._replace(final=lambda state: {**window.final(state), "log_z_estimate": log_z}),
        position=lambda state: tempering.split(state.position)[0],
        refresh=False,  # the state holds the temperature too
    )


# -- adaptive Metropolis ------------------------------------------------------------------


@register_sampler(
    "am",
    "adaptive Metropolis (Cholesky Robbins-Monro, Titsias & Dellaportas' code); RWM after warm-up",
    tuned=(Tuned("scale", switch=None),),
    options={
        "initial_scale": "delta_0 (default 0.1/sqrt(n)).",
        "target_accept": "The acceptance probability delta aims at.",
    },
)
def build_am(target: Target, num_warmup: int, initial_scale=None, target_accept=0.25):
    """Adaptive Metropolis (:mod:`gradmc.continuous.am`); the kept chain is RWM with covariance delta L L^T."""
    scale0 = 0.1 / jnp.sqrt(target.dim) if initial_scale is None else initial_scale
    check_positive("initial_scale", scale0)
    check_probability("target_accept", target_accept)
    kernel, logdensity_fn = rwm.build_kernel(), target.logdensity_fn
    rwm_stats = mh_stats(0)
    return bind(
        "am",
        lambda key, position: rwm.init(position, logdensity_fn),
        lambda key, state, step_size, chol, **_: kernel(key, state, logdensity_fn, step_size, chol),
        {},
        lambda state, info, params: rwm_stats(state, info, params["step_size"]),
        am.rule(scale0, target_accept),
    )


def gad_sampler(
    method: str,
    target: Target,
    num_warmup: int,
    target_accept=None,
    learning_rate=None,
    kappa: float = 0.1,
    L0=None,
    beta0: float = 1.0,
    G0: float = 0.01,
) -> BoundSampler:
    """Gradient-based adaptive MCMC (:mod:`gradmc.continuous.gad`, Titsias & Dellaportas 2019, Algorithm 1).

    Warm-up = the adaptive kernel; finalize freezes ``(L, beta)``; the kept chain is RWM/MALA
    with covariance ``L L^T``. ``params`` = ``{"L", "beta", "step_size", "num_skipped_updates"}``,
    where ``step_size`` is what the frozen :mod:`~gradmc.continuous.rwm` (1) /
    :mod:`~gradmc.continuous.mala` (1/2: ``x + 1/2 L L^T g + L eps``) kernel receives with ``chol = L``.

    Parameters
    ----------
    method : {"rwm", "mala-f", "mala-e"}
        The proposal and the gradient of the bound.
    target : Target
        The distribution (flat positions).
    num_warmup : int
        Warm-up steps (the adaptation).
    target_accept, learning_rate, kappa
        alpha*, eta and RMSProp's weight (:func:`gradmc.continuous.gad.build_kernel`).
    L0, beta0, G0
        The adaptation's start (:func:`gradmc.continuous.gad.init_adaptation`).
    """
    langevin, _, _, grads_per_warmup_step = gad.METHODS[method]
    logdensity_fn = target.logdensity_fn
    adaptive = gad.build_kernel(method, target_accept, learning_rate, kappa)
    gad.check_start(target.dim, L0, beta0, G0)
    frozen, frozen_step_size = (mala.build_kernel(), 0.5) if langevin else (rwm.build_kernel(), 1.0)

    def stats(logdensity, info, beta, skipped, grads):
        return step_stats(
            logdensity,
            info.acceptance_rate,
            info.is_accepted,
            frozen_step_size,
            grads,
            nonfinite=info.nonfinite,
            extra={"beta": jnp.asarray(beta, jnp.float32), "skipped_update": jnp.asarray(skipped, bool)},
        )

    def warmup_step(key, astate, t):
        del t
        astate, info = adaptive(key, astate, logdensity_fn)
        return astate, stats(astate.state.logdensity, info, astate.beta, info.skipped_update, grads_per_warmup_step)

    def finalize(astate):
        s = astate.state
        state = mala.MALAState(*s) if langevin else rwm.RWMState(s.position, s.logdensity)
        params = {
            "L": astate.L,
            "beta": astate.beta,
            "step_size": jnp.float32(frozen_step_size),
            "num_skipped_updates": astate.num_skipped,
        }
        return state, params

    def step(key, state, params):
        state, info = frozen(key, state, logdensity_fn, params["step_size"], params["L"])
        return state, stats(state.logdensity, info, params["beta"], False, int(langevin))

    warmup = WarmupKernel(
        init=lambda key, position: gad.adaptive_init(position, logdensity_fn, L0, beta0, G0),
        step=warmup_step,
        position=lambda astate: astate.state.position,
        refresh=lambda key, astate, position: astate._replace(state=gad.init(position, logdensity_fn)),
    )
    kernel_init = mala.init if langevin else rwm.init
    return bind_two_phase(
        f"gad{method}", warmup, finalize, lambda key, position: kernel_init(position, logdensity_fn), step
    )


def _register_gad(method: str, name: str, description: str) -> None:
    @register_sampler(
        name,
        description,
        tuned=(ALWAYS_STEP_SIZE,),
        options={
            "target_accept": (
                "alpha*, the acceptance probability the adaptation aims at (default 0.25 for RWM, 0.55 for MALA)."
            ),
            "learning_rate": "eta, the RMSProp learning rate of L (default 5e-5 for RWM, 1.5e-4 for MALA).",
            "kappa": "RMSProp's weight, in (0, 1].",
            "L0": "The first Cholesky factor of the proposal covariance (default 0.1/sqrt(n) I).",
            "beta0": "The first entropy weight.",
            "G0": "The first RMSProp accumulator (every entry).",
        },
    )
    def build(
        target: Target,
        num_warmup: int,
        target_accept=None,
        learning_rate=None,
        kappa: float = 0.1,
        L0=None,
        beta0: float = 1.0,
        G0: float = 0.01,
    ) -> BoundSampler:
        """Gradient-based adaptive MCMC (:func:`gad_sampler`); the defaults are the released code's."""
        return gad_sampler(method, target, num_warmup, target_accept, learning_rate, kappa, L0, beta0, G0)


_register_gad(
    "rwm", "gadrwm", "gradient-based adaptive RWM (Titsias & Dellaportas 2019): full L adapted in warm-up, alpha* 0.25"
)
_register_gad(
    "mala-f",
    "gadmala-f",
    "gradient-based adaptive MALA, fast Hessian-free gradient (Titsias & Dellaportas 2019), alpha* 0.55",
)
_register_gad(
    "mala-e",
    "gadmala-e",
    "gradient-based adaptive MALA, exact reparameterisation gradient via autodiff (Titsias & Dellaportas 2019)",
)


# -- multimodal: RAM, tempering, equi-energy -----------------------------------------------


@register_sampler(
    "ram",
    "repelling-attracting Metropolis (Tak et al. 2016): forced downhill then uphill moves between modes",
    options={
        "step_size": "The proposal's standard deviation (default 1).",
        "cov_scale": "Or its covariance ``cov_scale * I`` (4 for Kou scenario (a), 3.5 for (b)).",
        "max_tries": "The cap of each forced loop.",
    },
)
def build_ram(target: Target, num_warmup: int, step_size=None, cov_scale=None, max_tries=10_000):
    """Repelling-attracting Metropolis (:mod:`gradmc.continuous.ram`)."""
    if step_size is not None and cov_scale is not None:
        raise ValueError("give step_size or cov_scale, not both")
    if cov_scale is not None:
        check_positive("cov_scale", cov_scale)
        sd = float(cov_scale) ** 0.5
    else:
        sd = 1.0 if step_size is None else step_size
    check_positive("step_size", sd)
    check_positive("max_tries", max_tries, integer=True)
    kernel = ram.build_kernel(int(max_tries))
    logdensity_fn = target.logdensity_fn

    def one_step(key, state):
        new, info = kernel(key, state, logdensity_fn, sd)
        return new, step_stats(
            new.logdensity,
            info.acceptance_rate,
            info.is_accepted,
            sd,
            0,
            nonfinite=info.nonfinite,
            extra={"num_evals": info.num_evals},
        )

    return _plain_sampler(
        "ram",
        lambda key, position: ram.init(position, logdensity_fn),
        one_step,
        {"step_size": jnp.asarray(sd, jnp.float32)},
        lambda state: state.position,
    )


class _Tempering(NamedTuple):
    """What parallel and simulated tempering set up alike from their options."""

    ladder: jax.Array
    kernel: Callable
    default_step: float
    target_accept: float
    evals: int  # gradient evaluations per local move (RWM: none)


def _tempering(
    module, target: Target, betas, temperatures, num_temperatures, beta_min, local, num_integration_steps, target_accept
) -> _Tempering:
    """The ladder, ``module``'s kernel, the default step size at beta = 1 and the target
    acceptance (0.3 RWM, 0.7 HMC).
    """
    ladder = jnp.asarray(resolve_ladder(betas, temperatures, num_temperatures, beta_min), jnp.float32)
    kernel = module.build_kernel(local, num_integration_steps)
    default_step = (2.38 if local == "rwm" else 1.0) / np.sqrt(target.dim)
    target_accept = (0.3 if local == "rwm" else 0.7) if target_accept is None else float(target_accept)
    evals = 0 if local == "rwm" else int(num_integration_steps) + 1
    return _Tempering(ladder, kernel, default_step, target_accept, evals)


#: What the options that set a temperature ladder and its local move mean.
LADDER_OPTIONS = {
    "betas": "The ladder's inverse temperatures, from 1 (the target) down.",
    "temperatures": "Or its temperatures T = 1 / beta, from 1 up (not with ``betas``).",
    "num_temperatures": (
        "K >= 2, the rungs of the geometric ladder used when neither ``betas`` nor ``temperatures`` is given."
    ),
    "beta_min": "The smallest inverse temperature of that geometric ladder, in (0, 1).",
    "local": 'One of {"rwm", "hmc"}: the local move.',
    "num_integration_steps": 'Leapfrog steps of an HMC move (``local="hmc"``); formerly ``num_leapfrog_steps``.',
    "target_accept": "The acceptance probability the step sizes aim at (default 0.3 for RWM, 0.7 for HMC).",
}


@register_sampler(
    "parallel-tempering",
    "parallel tempering: vmapped replicas on a temperature ladder, even-odd neighbour swaps",
    tuned=(Tuned("step_sizes"),),
    options={
        **LADDER_OPTIONS,
        "step_size": (
            "The local move's step size at beta = 1 (replica k starts at step_size / sqrt(beta_k)), or one per replica."
        ),
        "adapt": "Adapt the step sizes in warm-up.",
    },
)
def build_parallel_tempering(
    target: Target,
    num_warmup: int,
    betas=None,
    temperatures=None,
    num_temperatures=5,
    beta_min=0.01,
    local="rwm",
    step_size=None,
    num_integration_steps=10,
    adapt=True,
    target_accept=None,
):
    """Parallel tempering (:mod:`gradmc.continuous.parallel_tempering`); each replica's step size follows the
    Robbins–Monro rule towards ``target_accept`` in warm-up and is frozen afterwards.
    """
    ladder, kernel, default_step, target_accept, evals = _tempering(
        parallel_tempering,
        target,
        betas,
        temperatures,
        num_temperatures,
        beta_min,
        local,
        num_integration_steps,
        target_accept,
    )
    k = ladder.shape[0]
    step0 = np.asarray(default_step if step_size is None else step_size, np.float64)
    if step0.ndim == 0:
        step0 = step0 / np.sqrt(np.asarray(ladder))
    if step0.shape != (k,):
        raise ValueError(f"step_size must be a scalar or one per replica ({k}), got shape {step0.shape}")
    check_positive("step_size", step0)
    check_probability("target_accept", target_accept)
    rule = robbins_monro(target_accept)
    logdensity_fn = target.logdensity_fn

    def stats(new, info, params):
        return step_stats(
            new.replicas.loglik[0],
            info.acceptance_rate[0],
            info.is_accepted[0],
            params["step_sizes"][0],
            evals * k,
            nonfinite=jnp.any(info.nonfinite),
            extra={"swap_rate": info.swap_rate, "mean_local_accept": jnp.mean(info.acceptance_rate)},
        )

    step_sizes = Rule(  # one Robbins–Monro rule per replica
        init=lambda state: state.step_sizes,
        update=lambda sizes, state, info, t: rule.update(sizes, info.acceptance_rate) if adapt else sizes,
        current=lambda sizes: {"step_sizes": sizes},
        final=lambda sizes: {"step_sizes": sizes, "betas": ladder},
    )
    return bind(
        "parallel-tempering",
        lambda key, position: parallel_tempering.init(position, logdensity_fn, ladder, step0),
        lambda key, state, step_sizes, **_: kernel(key, state._replace(step_sizes=step_sizes), logdensity_fn, ladder),
        {},
        stats,
        step_sizes,
        adapts_in_warmup=bool(adapt),
        position=lambda state: state.replicas.position[0],
        refresh=False,  # the state holds every replica
    )


@register_sampler(
    "simulated-tempering",
    "simulated tempering: temperature index as a state, Wang-Landau pseudo-prior in warm-up",
    tuned=(STEP_SIZE,),
    options={
        **LADDER_OPTIONS,
        "step_size": "The local move's step size at beta = 1.",
        "adapt": "Robbins–Monro step size and Wang–Landau c_k in warm-up.",
        "wang_landau_rate": "gamma_0 (gamma_t = gamma_0 K / (K + t)).",
    },
)
def build_simulated_tempering(
    target: Target,
    num_warmup: int,
    betas=None,
    temperatures=None,
    num_temperatures=10,
    beta_min=0.01,
    local="rwm",
    step_size=None,
    num_integration_steps=10,
    adapt=True,
    target_accept=None,
    wang_landau_rate=1.0,
):
    """Simulated tempering (:mod:`gradmc.continuous.simulated_tempering`)."""
    ladder, kernel, default_step, target_accept, evals = _tempering(
        simulated_tempering,
        target,
        betas,
        temperatures,
        num_temperatures,
        beta_min,
        local,
        num_integration_steps,
        target_accept,
    )
    k = ladder.shape[0]
    step0 = default_step if step_size is None else step_size
    check_positive("step_size", step0)
    check_positive("wang_landau_rate", wang_landau_rate)
    check_probability("target_accept", target_accept)
    rule = robbins_monro(target_accept)
    logdensity_fn = target.logdensity_fn

    def stats(new, info, params):
        log_weight = simulated_tempering.log_weight(ladder, new.point.loglik, new.log_pseudo_prior)
        return step_stats(
            new.point.loglik,
            info.acceptance_rate,
            info.is_accepted,
            info.step_size,
            evals,
            nonfinite=info.nonfinite,
            extra={"temperature_index": new.index, "beta": ladder[new.index], "log_weight": log_weight},
        )

    def update(tuned, state, info, t):  # the Wang-Landau pseudo-prior and the Robbins–Monro step size
        if not adapt:
            return tuned
        log_pseudo_prior, step_size = tuned
        c = simulated_tempering.wang_landau_update(log_pseudo_prior, state.index, t, wang_landau_rate)
        return c, rule.update(step_size, info.acceptance_rate)

    pseudo_prior_and_step = Rule(
        init=lambda state: (state.log_pseudo_prior, state.step_size),
        update=update,
        current=lambda tuned: {"log_pseudo_prior": tuned[0], "step_size": tuned[1]},
        final=lambda tuned: {"log_pseudo_prior": tuned[0], "step_size": tuned[1], "betas": ladder},
    )

    def tempered_step(key, state, log_pseudo_prior, step_size, **_):
        current = state._replace(log_pseudo_prior=log_pseudo_prior, step_size=step_size)
        return kernel(key, current, logdensity_fn, ladder)

    return bind(
        "simulated-tempering",
        lambda key, position: simulated_tempering.init(position, logdensity_fn, k, step0),
        tempered_step,
        {},
        stats,
        pseudo_prior_and_step,
        adapts_in_warmup=bool(adapt),
        position=lambda state: state.point.position,
        refresh=False,  # the state holds the temperature level too
    )


@register_sampler(
    "equi-energy",
    "equi-energy sampler (Kou et al. 2006): energy rings, temperature ladder, bounded ring histories",
    options={
        "energy_levels": (
            "H_0 < ... < H_{K-1}, the energies that split each level's history into rings (default Kou et al.'s)."
        ),
        "temperatures": "T_0 = 1 < ... < T_{K-1}, one per level (default Kou et al.'s).",
        "p_ee": "The equi-energy jump probability.",
        "step_size": "tau, the Metropolis standard deviation at T = 1 (level i uses tau sqrt(T_i)).",
        "buffer_size": "Points kept per level and ring.",
        "stagger": "Steps between the starts of successive levels (default num_warmup // K).",
    },
)
def build_equi_energy(
    target: Target,
    num_warmup: int,
    energy_levels=equi_energy.KOU_ENERGY_LEVELS,
    temperatures=equi_energy.KOU_TEMPERATURES,
    p_ee=0.1,
    step_size=0.25,
    buffer_size=2000,
    stagger=None,
):
    """The equi-energy sampler (:mod:`gradmc.continuous.equi_energy`)."""
    levels, temps = equi_energy.check_ladder(energy_levels, temperatures)
    k = levels.size
    kernel = equi_energy.build_kernel(
        levels, temps, p_ee, step_size, buffer_size, num_warmup // k if stagger is None else stagger
    )
    scale = equi_energy.level_scales(step_size, temps)[0]
    params = {"energy_levels": jnp.asarray(levels, jnp.float32), "temperatures": jnp.asarray(temps, jnp.float32)}
    logdensity_fn = target.logdensity_fn

    def one_step(key, state):
        new, info = kernel(key, state, logdensity_fn)
        return new, step_stats(
            -new.energies[0],
            info.acceptance_rate[0],
            info.is_accepted[0],
            scale,
            0,
            nonfinite=info.nonfinite[0],
            extra={"ee_jump": info.ee_jump[0] & info.is_accepted[0]},
        )

    return _plain_sampler(
        "equi-energy",
        lambda key, position: equi_energy.init(position, logdensity_fn, k, int(buffer_size)),
        one_step,
        params,
        lambda state: state.positions[0],
    )
