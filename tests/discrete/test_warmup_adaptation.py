"""Warm-up adaptation of V-/O-DHAMS (δ), MH-uniform (move scale u) and the lattice Metropolis (radius r).

For each sampler at its defaults:

* the adapted value is frozen after warm-up: every kept step records the value in
  ``trace.params``, while the warm-up steps record several values;
* the kept draws, made with the adapted value, match exact enumeration of a small
  non-quadratic target within the TV bound of :func:`gradmc.testing.assert_tv_within_bound`
  (derived from the run length and the chains' ESS; a correct sampler fails with
  probability ≤ 1 %);
* the kept acceptance rate lands near the rule's target: on DISCS's Ising model for DHAMS,
  and on a discrete Gaussian on a wide lattice for the radius samplers (the Ising model's
  coordinates take two values, so its only radius is 1 and no radius can reach a target).

Options: ``adapt=None`` keeps the value given (the fixed kernel), bad options raise
``ValueError``, and ``gradmc.report.format_params`` names what was learned.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

import gradmc
from gradmc.base import Target
from gradmc.diagnostics import exact_distribution
from gradmc.discrete.gradient_samplers import TARGET_ACCEPT
from gradmc.discrete.local_samplers import RANDOM_WALK_ACCEPT, SINGLE_SITE_ACCEPT
from gradmc.spaces import Ordinal
from gradmc.targets.hams_targets import discrete_gaussian
from gradmc.testing import assert_tv_within_bound

# sampler -> (adapted parameter in trace.params, its per-step statistic, acceptance aimed at)
ADAPTED = {
    "v-dhams": ("delta", "step_size", TARGET_ACCEPT),
    "o-dhams": ("delta", "step_size", TARGET_ACCEPT),
    "mh-uniform": ("move_scale", "move_scale", RANDOM_WALK_ACCEPT),
    "lattice-metropolis": ("radius", "radius", SINGLE_SITE_ACCEPT),
}
DHAMS = ["v-dhams", "o-dhams"]
RADIUS = ["mh-uniform", "lattice-metropolis"]

# -- a small non-quadratic target, enumerated exactly: 3 coordinates on {-3, ..., 3} ------------

VALUES = np.arange(-3.0, 4.0)


def small_logdensity(s):
    return 0.3 * s[0] * s[1] - 0.2 * jnp.sum(s**2) + 0.8 * jnp.sin(s[0] + 0.5 * s[2]) + 0.04 * s[1] ** 3 + 0.2 * s[2]


SMALL = Target("adaptation-small", small_logdensity, Ordinal(VALUES, 3))
EXACT = exact_distribution(small_logdensity, VALUES, 3)
TV_CHAINS, TV_WARMUP, TV_DRAWS = 16, 400, 3000


def _sample(target, name, *, num_chains, num_warmup, num_draws, seed=0, **options):
    return gradmc.sample(
        target,
        gradmc.sampler(name, **options),
        num_chains=num_chains,
        num_warmup=num_warmup,
        num_draws=num_draws,
        seed=seed,
        progress=False,
    )


def _stat(stats, name):
    return np.asarray(stats[name] if name in stats else stats["extra"][name], np.float64)


@pytest.fixture(scope="module", params=list(ADAPTED))
def small_run(request):
    """(name, trace) of the sampler at its defaults on the enumerated target."""
    name = request.param
    return name, _sample(SMALL, name, num_chains=TV_CHAINS, num_warmup=TV_WARMUP, num_draws=TV_DRAWS, seed=3)


def test_adapted_value_is_frozen_after_warmup(small_run):
    """Every kept step uses the value in trace.params (per chain); the warm-up changed it."""
    name, trace = small_run
    param, stat, _ = ADAPTED[name]
    kept = _stat(trace.stats, stat)  # (chain, draw)
    learned = np.asarray(trace.params[param], np.float64).reshape(-1, 1)
    np.testing.assert_allclose(kept, np.broadcast_to(learned, kept.shape), rtol=1e-6)
    assert np.ptp(_stat(trace.warmup_stats, stat)) > 0, f"{name}: the warm-up never changed {param}"


def test_adapted_sampler_matches_exact_distribution(small_run):
    """The kept draws, made with the adapted value, against exact enumeration."""
    name, trace = small_run
    assert 0.05 < trace.acceptance_rate < 0.99, f"{name}: acceptance {trace.acceptance_rate:.3f}"
    assert_tv_within_bound(trace.draws, EXACT, p=0.01)


# -- the acceptance rate reached -----------------------------------------------------------------

ACCEPT_CHAINS, ACCEPT_WARMUP, ACCEPT_DRAWS = 8, 1000, 1000
#: A wide lattice (61 values per coordinate): one more unit of radius changes the acceptance
#: rate by a few hundredths, so the rounded radius can come close to the target.
WIDE_GAUSSIAN = discrete_gaussian(d=4, sigma=6.0, rho=0.5, half_width=30)


@pytest.mark.parametrize(
    "name, model",
    [pytest.param(name, "ising", marks=pytest.mark.slow) for name in DHAMS]
    + [(name, "wide") for name in RADIUS]
    + [("mh-uniform", "ising")],
)
def test_adapted_acceptance_is_near_the_target(name, model):
    """Kept acceptance within 0.1 of the target. The per-chain mean acceptance of 1,000 steps
    has a standard error ≤ 0.5/√ESS ≤ 0.07 with ESS ≥ 50 (autocorrelated acceptance); the
    rest covers the frozen value being the average of the warm-up iterates (dual averaging),
    and the rounding of the radius. On the Ising model's two-valued coordinates MH-uniform
    can only get there by moving a share p < 1 of its coordinates (move scale below 1)."""
    target = gradmc.target("discs-ising", shape=5) if model == "ising" else WIDE_GAUSSIAN
    trace = _sample(target, name, num_chains=ACCEPT_CHAINS, num_warmup=ACCEPT_WARMUP, num_draws=ACCEPT_DRAWS)
    aimed = ADAPTED[name][2]
    assert abs(trace.acceptance_rate - aimed) < 0.1, f"{name}: kept acceptance {trace.acceptance_rate:.3f}"
    if name == "mh-uniform" and model == "ising":
        assert np.all(np.asarray(trace.params["move_scale"]) < 1.0)


# -- options --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name, option, value, stat",
    [
        ("v-dhams", "delta", 0.9, "step_size"),
        ("o-dhams", "delta", 0.75, "step_size"),
        ("mh-uniform", "radius", 2, "radius"),
        ("mh-uniform", "move_probability", 0.3, "move_probability"),
        ("lattice-metropolis", "radius", 3, "radius"),
    ],
)
def test_adapt_none_keeps_the_value(name, option, value, stat):
    sampler = gradmc.sampler(name, **{option: value}, adapt=None).bind(SMALL, 50)
    assert not sampler.adapts_in_warmup
    trace = _sample(SMALL, name, num_chains=2, num_warmup=20, num_draws=10, **{option: value, "adapt": None})
    assert np.all(_stat(trace.stats, stat) == np.float32(value))


@pytest.mark.parametrize("name", list(ADAPTED))
@pytest.mark.parametrize(
    "options, match",
    [
        ({"adapt": "newton"}, "adapt must be one of"),
        ({"target_accept": 1.5}, "target"),
        ({"target_accept": 0}, "target"),
    ],
)
def test_bad_adaptation_options(name, options, match):
    with pytest.raises(ValueError, match=match):
        gradmc.sampler(name, **options).bind(SMALL, 10)


@pytest.mark.parametrize("name", RADIUS)
@pytest.mark.parametrize("radius", [-1, 0, 1.5])
def test_bad_radius(name, radius):
    with pytest.raises(ValueError, match="radius r must be an integer >= 1"):
        gradmc.sampler(name, radius=radius).bind(SMALL, 10)


def test_bad_delta():
    with pytest.raises(ValueError, match="step size δ"):
        gradmc.sampler("v-dhams", delta=-0.5).bind(SMALL, 10)


def test_the_learned_values_are_reported(small_run):
    name, trace = small_run
    line = gradmc.report.format_params(trace.params)
    assert line.startswith(f"learned in warm-up: {ADAPTED[name][0]} "), line
