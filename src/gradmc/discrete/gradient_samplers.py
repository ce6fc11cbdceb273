"""The registered gradient samplers of Rhodes & Gutmann (2022) — NCG, ordinal NCG, AVG, PAVG
and exact block Gibbs —, block Gibbs read from the gradient and FFBS, and what every discrete
builder shares: the registration of a discrete sampler, the acceptance rate its warm-up aims
at, and the warm-up rule by name.

Each builder ``build(target, num_warmup, **options) -> BoundSampler`` checks its options,
builds the pure kernel of its module and wraps it in a :class:`~gradmc.base.BoundSampler`
(:func:`~gradmc.adapt.warmup.bind`, or PAVG's learning warm-up). The defaults of the options
are written once, in the builders' signatures (:func:`gradmc.registry.defaults` reads them).
Each registration says what the warm-up tunes (:class:`~gradmc.registry.Tuned`) and, for
the samplers whose kernel also runs outside the runner (PCD's chains, plain loops), the
kernel module and the options that set it (:func:`gradmc.registry.algorithm`).
"""

from __future__ import annotations

import functools
import warnings
from types import ModuleType

import jax.numpy as jnp

from gradmc.adapt.preconditioner import DEFAULTS as LEARNING_DEFAULTS
from gradmc.adapt.preconditioner import learning_sampler
from gradmc.adapt.step_size import bounded, rule_by_name
from gradmc.adapt.warmup import bind, step_size_sampler
from gradmc.base import RunWarning, Target
from gradmc.checks import check_positive_param, check_symmetric
from gradmc.curvature.learned_w import MAX_LEARNED_W_DIM
from gradmc.curvature.pavg_model import make_preconditioner
from gradmc.discrete import avg, block_gibbs, ffbs, linear_gibbs, ncg, ordinal_ncg, pavg
from gradmc.discrete.fallback import with_fallback
from gradmc.discrete.proposals import check_space, stats
from gradmc.registry import TARGET_ACCEPT_OPTION, WARMUP_RULE_OPTION, Tuned, register_sampler
from gradmc.spaces import Categorical

__all__ = [
    "TARGET_ACCEPT",
    "MAX_STEP_SIZE",
    "register_discrete",
    "step_size_stats",
    "warmup_rule",
    "first_order_sampler",
    "build_ncg",
    "build_ordinal_ncg",
    "build_avg",
    "build_pavg",
    "build_block_gibbs",
    "build_ffbs",
]


def register_discrete(name: str, description: str, *, gradient: bool = True, **declarations):
    """``register_sampler(name, description, kind="discrete", **declarations)``; a sampler
    whose proposal uses the gradient (``gradient``) gets the fallback move of
    :mod:`gradmc.discrete.fallback` for a proposal that freezes.
    """
    register = register_sampler(name, description, kind="discrete", **declarations)
    if not gradient:
        return register

    def decorate(build):
        @functools.wraps(build)
        def build_with_fallback(target: Target, num_warmup: int, **options):
            return with_fallback(build(target, num_warmup, **options), target, num_warmup)

        register(build_with_fallback)
        return build

    return decorate


def step_size_stats(state, info, params):
    """The step statistics of a discrete step, with the kernel's step size ε."""
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


def warmup_rule(adapt, target_accept, num_warmup):
    """The warm-up rule called ``adapt`` (:func:`~gradmc.adapt.step_size.rule_by_name`), or
    None when nothing adapts (``adapt=None`` or no warm-up steps); bad options raise
    ``ValueError`` either way.
    """
    rule = rule_by_name(adapt, target_accept)
    return rule if int(num_warmup) > 0 else None


def first_order_sampler(
    name: str, module: ModuleType, target: Target, num_warmup, step_size, adapt, target_accept, *kernel_args
):
    """NCG, AVG or ordinal NCG: ε adapted in warm-up by ``adapt`` towards ``target_accept``
    (ε ≤ :data:`MAX_STEP_SIZE`), then frozen; ``kernel_args`` follow ε in the kernel's call.
    """
    space = check_space(target, name)
    step_size = check_positive_param(f"{name.upper()} step size ε", step_size)
    rule = warmup_rule(adapt, target_accept, num_warmup)
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


@register_discrete(
    "ncg",
    "norm-constrained gradient sampler (Rhodes & Gutmann 2022, Alg. B.1); ε adapted in warm-up",
    tuned=(Tuned("step_size"),),
    kernel=ncg,
    kernel_options=("step_size",),
    options={
        "step_size": (
            "ε > 0: the first value of the warm-up, or the value used throughout with ``adapt=None`` "
            "(0.5 is the paper's Ising value)."
        ),
        "adapt": WARMUP_RULE_OPTION,
        "target_accept": TARGET_ACCEPT_OPTION,
    },
)
def build_ncg(target: Target, num_warmup: int, step_size=0.5, adapt="dual_averaging", target_accept=TARGET_ACCEPT):
    """NCG (:mod:`gradmc.discrete.ncg`), its step size ε adapted in warm-up."""
    return first_order_sampler("ncg", ncg, target, num_warmup, step_size, adapt, target_accept)


@register_discrete(
    "linear-gibbs",
    "every site drawn at once from the log density's first-order expansion, with an MH test: an exact block Gibbs "
    "draw where the log density is linear in the sites (a mixture's assignments)",
    kernel=linear_gibbs,
    options={},
)
def build_linear_gibbs(target: Target, num_warmup: int):
    """Block Gibbs read from the gradient (:mod:`gradmc.discrete.linear_gibbs`); nothing is
    tuned. A step costs the proposal's log density and gradient.
    """
    space = check_space(target, "linear-gibbs")
    kernel = linear_gibbs.build_kernel()
    return bind(
        "linear-gibbs",
        lambda key, position: linear_gibbs.init(position, target.logdensity_fn),
        lambda key, state: kernel(key, state, target.logdensity_fn, space),
        {},
        lambda state, info, params: stats(state, info),
    )


@register_discrete(
    "ordinal-ncg",
    "NCG restricted to a window of r values around the current one, for ordered values with many levels "
    "(counts, wide integer ranges); ε adapted in warm-up",
    tuned=(Tuned("step_size"),),
    kernel=ordinal_ncg,
    kernel_options=("step_size", "radius"),
    options={
        "step_size": "ε > 0: the first value of the warm-up, or the value used throughout with ``adapt=None``.",
        "radius": (
            "r ≥ 1: a coordinate moves by at most r value indices per step (default min(k − 1, 8) for"
            " k values, :func:`gradmc.discrete.ordinal_ncg.radius_for`: on small value sets the "
            "window holds every value and this is NCG)."
        ),
        "adapt": WARMUP_RULE_OPTION,
        "target_accept": TARGET_ACCEPT_OPTION,
    },
)
def build_ordinal_ncg(
    target: Target, num_warmup: int, step_size=0.5, radius=None, adapt="dual_averaging", target_accept=TARGET_ACCEPT
):
    """Ordinal NCG (:mod:`gradmc.discrete.ordinal_ncg`), its step size ε adapted in warm-up."""
    radius = ordinal_ncg.radius_for(ordinal_ncg.check_space(check_space(target, "ordinal-ncg")), radius)
    return first_order_sampler("ordinal-ncg", ordinal_ncg, target, num_warmup, step_size, adapt, target_accept, radius)


@register_discrete(
    "avg",
    "auxiliary-variable gradient sampler (Rhodes & Gutmann 2022, Alg. B.2); ε adapted in warm-up",
    tuned=(Tuned("step_size"),),
    kernel=avg,
    kernel_options=("step_size",),
    options={
        "step_size": (
            "ε > 0: the first value of the warm-up, or the value used throughout with ``adapt=None`` "
            "(0.2 is the paper's Ising value)."
        ),
        "adapt": WARMUP_RULE_OPTION,
        "target_accept": TARGET_ACCEPT_OPTION,
    },
)
def build_avg(target: Target, num_warmup: int, step_size=0.2, adapt="dual_averaging", target_accept=TARGET_ACCEPT):
    """AVG (:mod:`gradmc.discrete.avg`), its step size ε adapted in warm-up."""
    return first_order_sampler("avg", avg, target, num_warmup, step_size, adapt, target_accept)


@register_discrete(
    "pavg",
    "preconditioned auxiliary-variable gradient sampler (Rhodes & Gutmann 2022, Alg. B.3); "
    "M given or learned in warm-up (Alg. F.4/F.5), ε adapted with it",
    tuned=(Tuned("step_size"),),
    kernel=pavg,
    kernel_options=("step_size", "M"),
    options={
        "step_size": (
            "The step size ε > 0 (default 0.2): with ``adapt``, where its tuning starts after M is "
            "fitted (or from the first step with M given)."
        ),
        "M": (
            "The preconditioner, symmetric (n, n). None: learn it by Alg. F.4 from the first "
            "``min(num_fit, num_warmup // 2)`` warm-up steps."
        ),
        "initial_step_size": (
            "The ε used (or where its tuning starts) before M is fitted (default ``step_size``; the "
            "paper's poly2 runs use 0.02 then 1000)."
        ),
        "adapt_gamma": "Scale γM by AdaptGamma (Alg. F.5) every ``refit_interval`` warm-up steps.",
        "num_fit": "N_M of Alg. F.4: the warm-up steps M is fitted from.",
        "refit_interval": "N_adapt of Alg. F.4: warm-up steps between two AdaptGamma updates.",
        "adapt_rate": "AdaptGamma's rate.",
        "decay": "The decay of AdaptGamma's rate per window, in (0, 1].",
        "adapt": (
            'One of {"dual_averaging", "robbins_monro", None}: the rule ε follows at every warm-up '
            "step (dual averaging of log ε towards ``target_accept``, on the acceptance rate pooled "
            "over chains, ε ≤ 10⁶), one ε for all chains as M is; None keeps ε as given (the paper's "
            "settings)."
        ),
        "target_accept": TARGET_ACCEPT_OPTION,
    },
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
    rule = warmup_rule(adapt, target_accept, num_warmup)
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


@register_discrete(
    "block-gibbs",
    "exact auxiliary-variable block Gibbs for quadratic log densities (Martens & Sutskever 2010; PAVG with the true M)",
    gradient=False,
    kernel=block_gibbs,
    kernel_options=("M", "step_size"),
    options={
        "M": 'The Hessian of f (default: J + Jᵀ from ``target.metadata["J"]``).',
        "step_size": "ε > 0; any value gives an exact sampler (it sets d_ε = max(0, −λ_min) + 2/ε).",
    },
)
def build_block_gibbs(target: Target, num_warmup: int, M=None, step_size=1.0):
    """Block Gibbs (:mod:`gradmc.discrete.block_gibbs`), exact for quadratic f."""
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
        step_size_stats,
    )


@register_discrete(
    "ffbs",
    "forward filtering-backward sampling of a chain of discrete sites (an HMM's states) from the log density's "
    "second-order model (one-hot rows) or its evaluations (index-valued sites), with an MH test; an exact block "
    "Gibbs draw where the log density couples only neighbours",
    kernel=ffbs,
    kernel_options=("transitions",),
    options={
        "transitions": (
            "On index-valued sites: 'each' reads the chain's pairwise terms at every pair of neighbours (exact for"
            " any chain); 'shared' reads them at one pair and takes them for all ((K − 1)² evaluations for the pairs"
            " instead of (K − 1)² (T − 1)), exact block Gibbs where the chain interacts alike at every step (an"
            " HMM's transitions), an MH-corrected proposal where not."
        ),
    },
)
def build_ffbs(target: Target, num_warmup: int, transitions=ffbs.EACH):
    """FFBS (:mod:`gradmc.discrete.ffbs`); nothing is tuned. A step costs, on one-hot rows, the
    proposal's log density and gradient and twice 3K + 1 Hessian-vector products (about two
    gradients each); on scalar sites (K − 1) T + (K − 1)² (T − 1) + 2 evaluations, or
    (K − 1) T + (K − 1)² + 2 with ``transitions="shared"``.
    """
    space = check_space(target, "ffbs")
    if space.d < 2 or not (isinstance(space, Categorical) or space.values.ndim == 1):
        raise ValueError(f"ffbs draws a chain of discrete sites; target {target.name!r} lives on {space}")
    shared = ffbs.check_transitions(transitions, space)
    kernel = ffbs.build_kernel(shared)
    k, t = space.num_values, space.d
    if isinstance(space, Categorical):
        cost, extra = 1 + 4 * (3 * k + 1), {}
    else:
        pairs = 1 if shared else t - 1
        cost, extra = 1, {"logdensity_evals": jnp.float32((k - 1) * t + (k - 1) ** 2 * pairs + 2)}
    return bind(
        "ffbs",
        lambda key, position: ffbs.init(position, target.logdensity_fn),
        lambda key, state: kernel(key, state, target.logdensity_fn, space),
        {},
        lambda state, info, params: stats(state, info, num_grad_evals=cost, extra=extra),
    )
