"""The registered samplers of Zhou & Tan (2025): V-/O-DHAMS, V-/O-PDHAMS and PAVG's
variance form (:mod:`gradmc.discrete.hams`), with δ adapted in warm-up and, for PDHAMS, the
second-order model W given or learned — dense, of low rank, by diagonals or on a graph,
chosen from the target's size and its Hessian's sparsity (:mod:`gradmc.curvature`).
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from gradmc.adapt.learned_model import ModelTuning, explore_then_fit_sampler
from gradmc.adapt.step_size import fixed_rule, rule_by_name
from gradmc.adapt.warmup import bind, step_size_sampler
from gradmc.base import BoundSampler, Target
from gradmc.checks import is_concrete
from gradmc.curvature import learned_w
from gradmc.curvature.second_order import check_w, dhams_preconditioner, pdhams_preconditioner
from gradmc.discrete import hams, ncg
from gradmc.discrete.gradient_samplers import TARGET_ACCEPT, first_order_sampler, register_discrete, warmup_rule
from gradmc.discrete.proposals import stats
from gradmc.registry import TARGET_ACCEPT_OPTION, Tuned

__all__ = ["DELTA", "build_pavg_variance"]


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
        """DHAMS (:mod:`gradmc.discrete.hams` with W = 0, D = δ⁻² I, L = δ⁻¹ I), δ adapted in warm-up.

        The warm-up runs Zhou & Tan's Algorithm 5 (PD Supplement G; docs/discrete-hams.md §9)
        as far as it can run online: ε and β stay fixed, δ follows dual averaging of log δ
        towards ``target_accept`` (a larger δ is accepted less often) and is frozen after, and
        φ/δ — the PDHAMS φ of §7.9, the size of the gradient correction relative to D — is
        held at its starting value. Algorithm 5 chooses φ by the ESS of whole runs, which a
        warm-up cannot compare, so φ/δ keeps the DHAMS code's calibrated ratio
        (:data:`gradmc.discrete.hams.DHAMS_SETTINGS`) unless ``phi`` or ``delta`` are given: a
        compromise, as ``phi=0`` does better on DISCS's Ising model and worse on the discrete
        Gaussian and poly2 (docs/samplers.md, "Tuning in warm-up"). ``adapt=None`` runs the
        values given (by default the DHAMS code's discrete-Gaussian settings) throughout.
        """
        space = hams.check_space(target)
        hams.check_hyper(epsilon, beta, delta)
        phi_pdhams = float(phi) / float(delta)
        rule = warmup_rule(adapt, target_accept, num_warmup)
        if rule is None:
            precond = dhams_preconditioner(delta, space.dim)
            return _hams_sampler(name, target, space, precond, epsilon, phi_pdhams, beta, delta)
        return _adapted_dhams_sampler(name, target, space, rule, delta, epsilon, phi_pdhams, beta)

    return build


#: What the options of the HAMS samplers mean (PDHAMS's first five; DHAMS's all but ``W``).
HAMS_OPTIONS = {
    "W": (
        "The second-order model (default: the target's ``metadata['W']``, else learned in warm-up: dense up "
        "to d = 2,000 or of low rank on the Hessian's range where that is small, above d = 2,000 sparse on "
        "the Hessian's diagonals or graph with φ = 0 only; docs/discrete-hams.md §8.7–§8.10). A learned W: "
        "the first half of the warm-up (at least 200 steps) explores with a self-tuning NCG, W is fitted "
        "from the moves of all chains (PD eq. 38) and the second half runs the sampler; with a given W the "
        "warm-up steps are ordinary steps."
    ),
    "delta": (
        "The step size δ > 0: D = (δ − λ_min W) I (a learned sparse W: the Gershgorin D_i = δ − W_ii + "
        "Σ_j |w_ij|); the first value of its tuning, or the value used throughout with ``adapt=None``."
    ),
    "epsilon": "The auto-regression ε ∈ [0, 1).",
    "phi": "The gradient correction φ (DHAMS: in its own parametrisation, at the starting δ; φ/δ is held).",
    "beta": "The over-relaxation β ∈ (0, 1].",
    "adapt": (
        'One of {"dual_averaging", "robbins_monro", None}: the rule that tunes δ (with a learned W, after '
        "the fit: one δ for all chains, the acceptance rate pooled, δ ≥ δ₀/4), frozen after; None keeps "
        "``delta``. A given W runs with the ``delta`` given."
    ),
    "target_accept": TARGET_ACCEPT_OPTION,
}
DHAMS_OPTIONS = {
    **{option: meaning for option, meaning in HAMS_OPTIONS.items() if option != "W"},
    "delta": "The step size δ > 0 (D = δ⁻² I): the first value of its tuning, or the value used throughout.",
}

register_discrete(
    "v-dhams",
    "vanilla discrete HAMS (Zhou & Tan, DHAMS): δ adapted in warm-up; ε, φ/δ fixed; β = 1",
    tuned=(DELTA,),
    options=DHAMS_OPTIONS,
)(_dhams_builder("v-dhams", 1.0, hams.DHAMS_SETTINGS["v-dhams"]))
register_discrete(
    "o-dhams",
    "over-relaxed discrete HAMS (Zhou & Tan, DHAMS): δ adapted in warm-up; ε, φ/δ, β < 1 fixed",
    tuned=(DELTA,),
    options=DHAMS_OPTIONS,
)(_dhams_builder("o-dhams", 0.1, hams.DHAMS_SETTINGS["o-dhams"]))


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


def _learned_w_sampler(
    name, target: Target, num_warmup, delta, epsilon, phi, beta, adapt, target_accept
) -> BoundSampler:
    """PDHAMS whose W is learned in warm-up (:mod:`gradmc.adapt.learned_model`): NCG, adapting
    its step size, explores the first half; W is the gradient regression of PD eq. 38 on the
    pooled moves of all chains, D and L follow; the second half runs PDHAMS and tunes δ (one
    for all chains) towards ``target_accept``. The form W takes — dense, of low rank, sparse
    on the Hessian's diagonals or on its graph — is chosen once, from the target's size and
    its Hessian (:func:`gradmc.curvature.learned_w.choose`).
    """
    if int(num_warmup) < 200:
        raise ValueError(
            f"{name} learns its second-order model W during warm-up and needs num_warmup >= 200 "
            f"(got {num_warmup}); pass W= to use a given W"
        )
    space = hams.check_space(target)
    f = target.logdensity_fn
    learned = learned_w.choose(name, f, space, delta)
    if learned.phi_zero_only and (not is_concrete(phi) or float(phi) != 0.0):
        raise ValueError(
            f"{name} learns a sparse W for d = {space.dim} > {learned_w.MAX_LEARNED_W_DIM}, which runs with phi = 0 "
            f"only (got phi = {phi}); pass phi=0, or a dense W= to use phi != 0"
        )
    explorer = first_order_sampler("ncg", ncg, target, num_warmup, 0.5, "dual_averaging", TARGET_ACCEPT)
    hams_kernel = hams.build_kernel(beta)
    return explore_then_fit_sampler(
        name,
        explorer,
        lambda explorer_state: explorer_state.kernel.grad,
        num_warmup,
        space.dim,
        num_history=learned.num_history,
        fit=learned.fit,
        placeholder_model=learned.placeholder,
        kernel_init=lambda key, position: hams.init(position, f, key, precond=learned.first_momentum),
        kernel=lambda key, state, precond: hams_kernel(key, state, f, space, precond, epsilon, phi),
        stats_fn=stats,
        params_of=learned.summary,
        tuning=_delta_tuning(adapt, target_accept, delta, learned.preconditioner),
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
        """PDHAMS (:mod:`gradmc.discrete.hams` with a second-order model W, given or learned in
        warm-up); on one-hot Categorical rows W acts on the flat position.
        """
        return _pdhams_sampler(name, target, num_warmup, W, delta, epsilon, phi, beta, adapt, target_accept)

    return build


#: PDHAMS's default auto-regression ε with φ = 0. Zhou & Tan's tuning fixes ε = 0.9 together
#: with a calibrated φ; with φ = 0, ε = 0.5 mixes better on every DISCS model measured
#: (docs/samplers.md, "Tuning in warm-up").
PDHAMS_EPSILON = 0.5

register_discrete(
    "v-pdhams",
    "vanilla preconditioned discrete HAMS (Zhou & Tan 2025, Alg. 1): W given or learned in warm-up; δ, ε, φ",
    tuned=(DELTA,),
    options=HAMS_OPTIONS,
)(_pdhams_builder("v-pdhams", 1.0, PDHAMS_EPSILON, 0.0))
register_discrete(
    "o-pdhams",
    "over-relaxed preconditioned discrete HAMS (Zhou & Tan 2025, Alg. 3): W given or learned; δ, ε, φ, β",
    tuned=(DELTA,),
    options=HAMS_OPTIONS,
)(_pdhams_builder("o-pdhams", 0.1, PDHAMS_EPSILON, 0.0))


@register_discrete(
    "pavg-variance",
    "PAVG in Zhou & Tan's variance form = PDHAMS with ε = 0, φ = 0, β = 1; W given or learned",
    tuned=(DELTA,),
    options={option: HAMS_OPTIONS[option] for option in ("W", "delta", "adapt", "target_accept")},
)
def build_pavg_variance(
    target: Target, num_warmup: int, W=None, delta=1.0, adapt="dual_averaging", target_accept=TARGET_ACCEPT
):
    """PAVG in Zhou & Tan's variance form: :mod:`gradmc.discrete.hams` with ε = 0, φ = 0, β = 1."""
    return _pdhams_sampler("pavg-variance", target, num_warmup, W, delta, 0.0, 0.0, 1.0, adapt, target_accept)
