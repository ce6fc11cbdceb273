"""The registered samplers of local moves: Gibbs-with-Gradients and its ordinal form
(Grathwohl et al. 2021; Rhodes & Gutmann 2022, App. G), Metropolis–Hastings with a uniform
proposal, single-site Gibbs and Zhou & Tan's lattice Metropolis, each with what its warm-up
adapts (the number of coordinates changed, a radius or share of coordinates moved).
"""

from __future__ import annotations

from types import ModuleType

import jax.numpy as jnp

from gradmc.adapt.warmup import bind, step_size_sampler
from gradmc.base import Target
from gradmc.checks import check_move_probability, check_positive_param, check_radius
from gradmc.discrete import gibbs, gwg, hams, lattice_metropolis, plate_gibbs, uniform
from gradmc.discrete.gradient_samplers import (
    TARGET_ACCEPT,
    register_discrete,
    warmup_rule,
)
from gradmc.discrete.proposals import check_space, stats
from gradmc.registry import TARGET_ACCEPT_OPTION, WARMUP_RULE_OPTION, Tuned
from gradmc.spaces import Categorical, DiscreteSpace, Ordinal

__all__ = [
    "RANDOM_WALK_ACCEPT",
    "SINGLE_SITE_ACCEPT",
    "build_gwg",
    "build_ordinal_gwg",
    "build_mh_uniform",
    "build_gibbs",
    "build_plate_gibbs",
    "build_lattice_metropolis",
]


def _gwg_sampler(name: str, target: Target, num_warmup, radius, num_flips, adapt, target_accept):
    """GWG or ordinal-GWG. ``num_flips=1`` without adaptation is the paper's one-change
    kernel; otherwise the multi-flip kernel with L = ``num_flips`` expected moves drawn per
    step, adapted in warm-up towards ``target_accept`` within [1, d] and frozen after.
    """
    space = check_space(target, name)
    radius = check_radius(radius)
    num_flips = float(check_positive_param("num_flips", num_flips))
    rule = warmup_rule(adapt, target_accept, num_warmup)
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


@register_discrete(
    "gwg",
    "Gibbs-with-Gradients (Grathwohl et al. 2021; eq. 6); coordinates changed per step adapted in warm-up",
    tuned=(Tuned("num_flips"),),
    kernel=gwg,
    kernel_options=("num_flips",),
    options={
        "num_flips": (
            "L in (0, d], the expected number of moves drawn per step: the first value of the warm-up"
            " (it stays within [1, d]: at L = d and even weights each coordinate moves with "
            "probability 1 − e⁻¹, and a larger L would make every move near-certain, a chain that "
            "only oscillates), or the value used throughout with ``adapt=None``."
        ),
        "adapt": WARMUP_RULE_OPTION,
        "target_accept": TARGET_ACCEPT_OPTION,
    },
)
def build_gwg(target: Target, num_warmup: int, num_flips=1.0, adapt="dual_averaging", target_accept=TARGET_ACCEPT):
    """Gibbs-with-Gradients (:mod:`gradmc.discrete.gwg`): each step changes about L =
    ``num_flips`` coordinates, L adapted in warm-up.

    ``num_flips=1, adapt=None`` is the paper's GWG (one coordinate per step, a Hamming ball
    of radius 1). Otherwise every coordinate may change: coordinate i moves with
    probability 1 − exp(−L·w_i), w_i its probability under the one-change proposal (the
    module doc says why this is exact); a step costs the same whatever L.
    """
    return _gwg_sampler("gwg", target, num_warmup, 1, num_flips, adapt, target_accept)


@register_discrete(
    "ordinal-gwg",
    "ordinal Gibbs-with-Gradients: one coordinate moves up to r values (Rhodes & Gutmann 2022, App. G)",
    tuned=(Tuned("num_flips"),),
    kernel=gwg,
    kernel_options=("radius", "num_flips"),
    options={
        "radius": "r ≥ 1 (the paper tunes it, e.g. 16 / 8 for poly2 / poly4).",
        "num_flips": (
            "L > 0, the expected number of moves drawn per step (as for ``gwg``): the first value of "
            "the warm-up, or the value used throughout with ``adapt=None``."
        ),
        "adapt": WARMUP_RULE_OPTION,
        "target_accept": TARGET_ACCEPT_OPTION,
    },
)
def build_ordinal_gwg(
    target: Target, num_warmup: int, radius=1, num_flips=1.0, adapt="dual_averaging", target_accept=TARGET_ACCEPT
):
    """Ordinal Gibbs-with-Gradients (:mod:`gradmc.discrete.gwg`) on ordered values.

    ``num_flips=1, adapt=None`` is the paper's ordinal-GWG.
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
    rule = warmup_rule(adapt, target_accept, num_warmup)
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


@register_discrete(
    "mh-uniform",
    "Metropolis-Hastings, uniform proposal on the hypercube of radius r (Rhodes & Gutmann 2022, App. G); "
    "radius or share of coordinates moved adapted in warm-up",
    tuned=(Tuned("move_scale"),),
    kernel=uniform,
    kernel_options=("radius", "move_probability"),
    gradient=False,
    options={
        "radius": (
            "r ≥ 1: with ``adapt=None`` the radius used throughout (2 / 1 for poly2 / poly4 in the "
            "paper); with adaptation the warm-up starts from u = r·p."
        ),
        "move_probability": (
            "p in (0, 1], the probability that a coordinate moves: with ``adapt=None`` used "
            "throughout (1, every coordinate, is the paper's proposal)."
        ),
        "adapt": (
            'One of {"dual_averaging", "robbins_monro", None}: the warm-up rule (dual averaging of '
            "log u towards ``target_accept``, u kept in [1/d, k − 1] for k values per coordinate); "
            "None keeps r and p."
        ),
        "target_accept": (
            "The mean acceptance probability aimed at (default 0.234, the optimal acceptance of a "
            "random walk that moves many coordinates at once, Roberts, Gelman & Gilks 1997)."
        ),
    },
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
    """
    space = check_space(target, "mh-uniform")
    radius = check_radius(radius)
    move_probability = check_move_probability(move_probability)
    rule = warmup_rule(adapt, target_accept, num_warmup)
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


@register_discrete(
    "gibbs",
    "single-site Gibbs from exact full conditionals, random or systematic scan (one coordinate per step); "
    "on ordered values optionally from a window of values around the current one, with an MH test",
    kernel=gibbs,
    kernel_options=("scan", "radius"),
    gradient=False,
    exact_conditionals=True,
    options={
        "scan": 'One of {"random", "systematic"}: which coordinate a step updates.',
        "radius": "On an Ordinal or Count space: draw from the conditional on the window of this many values either "
        "side of the current one, with an MH test (4r + 1 evaluations a step); default every value.",
    },
)
def build_gibbs(target: Target, num_warmup: int, scan: str = "random", radius: int | None = None):
    """Single-site Gibbs (:mod:`gradmc.discrete.gibbs`). One step = one coordinate update
    (k − 1 log-density evaluations, batched, or 4r + 1 with a window of radius r); d steps
    make a sweep.
    """
    del num_warmup
    space = check_space(target, "gibbs")
    if radius is not None:
        if not isinstance(space, Ordinal):
            raise ValueError(f"gibbs's radius moves along ordered values: an Ordinal or Count space, got {space}")
        radius = int(check_radius(radius))
    kernel = gibbs.build_kernel(gibbs.check_scan(scan), radius)
    k = space.num_values - 1 if radius is None or 2 * radius + 1 >= space.num_values else 4 * radius + 1
    return bind(
        "gibbs",
        lambda key, position: gibbs.init(position, target.logdensity_fn),
        lambda key, state: kernel(key, state, target.logdensity_fn, space),
        {},
        lambda state, info, params: stats(state, info, num_grad_evals=0, extra={"logdensity_evals": jnp.float32(k)}),
    )


@register_discrete(
    "plate-gibbs",
    "blocked Gibbs for conditionally independent discrete sites (a NumPyro plate of labels): every site drawn "
    "from its exact conditional at once",
    gradient=False,
    exact_conditionals=True,
    options={},
)
def build_plate_gibbs(target: Target, num_warmup: int):
    """Blocked Gibbs (:mod:`gradmc.discrete.plate_gibbs`) on a target that gives its site terms
    (``target.metadata["site_terms"]``, which :func:`gradmc.from_numpyro` builds for a discrete
    site in a plate). One step = every site drawn from its exact conditional (k + 1
    log-density evaluations, batched).
    """
    del num_warmup
    space = plate_gibbs.check_space(check_space(target, "plate-gibbs"))
    site_terms = target.metadata.get(plate_gibbs.SITE_TERMS)
    if not callable(site_terms):
        raise ValueError(
            "plate-gibbs needs the log density's terms of each site (conditionally independent sites, as in a plate), "
            f"which target {target.name!r} does not give: gradmc.from_numpyro gives them for a discrete site in a "
            "plate; otherwise use gibbs"
        )
    kernel = plate_gibbs.build_kernel()
    k = space.num_values
    return bind(
        "plate-gibbs",
        lambda key, position: plate_gibbs.init(position, target.logdensity_fn),
        lambda key, state: kernel(key, state, target.logdensity_fn, site_terms, space),
        {},
        lambda state, info, params: stats(
            state, info, num_grad_evals=0, extra={"logdensity_evals": jnp.float32(k + 1)}
        ),
    )


@register_discrete(
    "lattice-metropolis",
    "Metropolis on a lattice (Zhou & Tan 2025): one random coordinate moves by k ~ U{-r..r}; off-lattice rejected; "
    "r adapted in warm-up",
    tuned=(Tuned("radius"),),
    kernel=lattice_metropolis,
    kernel_options=("radius",),
    gradient=False,
    options={
        "radius": (
            "r ≥ 1: the first value of the warm-up, or the value used throughout with ``adapt=None`` "
            "(the papers' tuned r = 2 on the discrete Gaussian)."
        ),
        "adapt": (
            'One of {"dual_averaging", "robbins_monro", None}: the warm-up rule (dual averaging of '
            "log r towards ``target_accept``, r kept in {1, …, k − 1} for k values per coordinate); "
            "None keeps r."
        ),
        "target_accept": (
            "The mean acceptance probability aimed at (default 0.44, the optimal acceptance of a "
            "one-dimensional random walk, Gelman, Roberts & Gilks 1996: a step moves one coordinate)."
        ),
    },
)
def build_lattice_metropolis(
    target: Target, num_warmup: int, radius=2, adapt="dual_averaging", target_accept=SINGLE_SITE_ACCEPT
):
    """The lattice Metropolis (:mod:`gradmc.discrete.lattice_metropolis`), its radius r
    adapted in warm-up.
    """
    space = hams.check_space(target)
    return _radius_sampler(
        "lattice-metropolis", lattice_metropolis, target, space, num_warmup, radius, adapt, target_accept
    )
