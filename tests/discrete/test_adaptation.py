"""Warm-up adaptation of the discrete samplers: it moves the parameter towards the target
acceptance, it stops at the end of warm-up (the kept draws all use the frozen value), and
``adapt=None`` keeps the value given.

Exactness with the adapted parameters is tested against enumeration in
``test_discrete_samplers.py``; the adaptation rule itself (dual averaging) is BlackJAX's.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

import gradmc
from gradmc.discrete.gradient_samplers import MAX_STEP_SIZE, TARGET_ACCEPT
from gradmc.spaces import Binary

WARMUP, DRAWS, CHAINS = 1500, 1000, 4


@pytest.fixture(scope="module")
def ising():
    return gradmc.target("discs-ising", shape=8)


# (sampler, options, adapted parameter, its statistic in trace.stats)
ADAPTED = [
    ("ncg", {"step_size": 2.0}, "step_size", "step_size"),
    ("avg", {"step_size": 2.0}, "step_size", "step_size"),
    ("gwg", {}, "num_flips", "num_flips"),
]


def _stat(trace, name, warmup=False):
    stats = trace.warmup_stats if warmup else trace.stats
    return np.asarray(stats[name] if name in stats else stats["extra"][name])


@pytest.fixture(scope="module", params=ADAPTED, ids=[a[0] for a in ADAPTED])
def adapted(request, ising):
    name, options, param, stat = request.param
    trace = gradmc.sample(
        ising,
        gradmc.sampler(name, **options),
        num_chains=CHAINS,
        num_warmup=WARMUP,
        num_draws=DRAWS,
        seed=1,
        progress=False,
    )
    return name, options, param, stat, trace


def test_adaptation_is_frozen_after_warmup(adapted):
    """Every kept step uses the value in trace.params: adaptation never touches kept draws."""
    name, _, param, stat, trace = adapted
    kept = _stat(trace, stat)  # (chain, draw)
    final = np.asarray(trace.params[param], np.float64).reshape(CHAINS, 1)
    np.testing.assert_allclose(kept, np.broadcast_to(final, kept.shape), rtol=1e-6)
    warm = _stat(trace, stat, warmup=True)
    assert np.ptp(warm) > 0, f"{name}: the warm-up never changed {param}"


def test_adaptation_reaches_the_target_acceptance(adapted):
    """Kept acceptance near 0.574. The tolerance: the per-chain mean acceptance of DRAWS steps
    has a standard error ≤ 0.5/√(ESS) with ESS ≥ DRAWS/20 here (autocorrelated acceptance),
    i.e. ≤ 0.07."""
    name, _, _, _, trace = adapted
    acceptance = float(np.mean(trace.stats["acceptance_rate"]))
    assert abs(acceptance - TARGET_ACCEPT) < 0.07, f"{name}: kept acceptance {acceptance:.3f}"


@pytest.mark.slow
def test_adapt_none_keeps_the_value(ising):
    trace = gradmc.sample(
        ising,
        gradmc.sampler("ncg", step_size=2.0, adapt=None),
        num_chains=2,
        num_warmup=50,
        num_draws=20,
        seed=1,
        progress=False,
    )
    assert np.all(np.asarray(trace.params["step_size"]) == np.float32(2.0))
    assert np.all(trace.stats["step_size"] == np.float32(2.0))


@pytest.mark.parametrize(
    "name, options, match",
    [
        ("ncg", {"adapt": "newton"}, "adapt must be one of"),
        ("ncg", {"target_accept": 1.5}, "target"),
        ("gwg", {"num_flips": 0}, "num_flips"),
        ("gwg", {"num_flips": -2.0}, "num_flips"),
        ("gwg", {"num_flips": np.inf}, "num_flips"),
        ("gwg", {"num_flips": 65}, "at most the number of coordinates 64"),
    ],
)
def test_bad_adaptation_options(ising, name, options, match):
    with pytest.raises(ValueError, match=match):
        gradmc.sample(ising, gradmc.sampler(name, **options), num_chains=1, num_warmup=5, num_draws=5, progress=False)


def test_the_learned_values_are_reported(adapted):
    name, _, param, _, trace = adapted
    line = gradmc.report.format_params(trace.params)
    assert line.startswith("learned in warm-up: ") and param in line, line


@pytest.mark.slow
@pytest.mark.parametrize("name", ["v-pdhams", "o-pdhams"])
def test_pdhams_learns_the_hessian_of_a_quadratic_target(name):
    """Without W, PDHAMS fits W by the gradient regression of PD eq. 38 on the warm-up moves of
    all chains: on a quadratic f the gradient is exactly linear, so W is the Hessian J + Jᵀ up
    to float32 round-off, the same in every chain; the kept draws use that frozen W."""
    target = gradmc.target("discs-ising", shape=4)
    J = np.asarray(target.metadata["J"])
    trace = gradmc.sample(target, name, num_chains=8, num_warmup=400, num_draws=200, seed=2, progress=False)
    W = np.asarray(trace.params["W"])
    scale = np.abs(J + J.T).max()
    np.testing.assert_allclose(W, np.broadcast_to(J + J.T, W.shape), atol=1e-3 * scale)
    assert "W 16x16" in gradmc.report.format_params(trace.params)
    # δ: tuned after the fit towards acceptance 0.574, one value for all chains, frozen for the
    # kept draws; rejection-free here, so it reaches its floor δ₀/4
    delta = np.asarray(trace.params["delta"])
    np.testing.assert_allclose(delta, 0.25, rtol=1e-6)
    np.testing.assert_array_equal(trace.stats["step_size"], np.broadcast_to(delta.reshape(-1, 1), (8, 200)))
    assert np.ptp(trace.warmup_stats["step_size"][:, 200:]) > 0  # δ moved after the fit
    fixed = gradmc.sample(
        target, gradmc.sampler(name, adapt=None), num_chains=2, num_warmup=400, num_draws=20, seed=2, progress=False
    )
    assert np.all(fixed.stats["step_size"] == np.float32(1.0)) and np.all(np.asarray(fixed.params["delta"]) == 1.0)


@pytest.mark.slow
def test_pdhams_tunes_delta_towards_the_target_acceptance():
    """On a non-quadratic target (an RBM with 400 visibles) O-PDHAMS with the learned W accepts
    about 0.27 of its proposals at δ = 1; tuned after the fit, one δ for all chains lands the
    kept acceptance near 0.574 (the tolerance of test_adaptation_reaches_the_target_acceptance)
    and every kept step uses the frozen δ."""
    target = gradmc.target("discs-rbm", num_visible=400, num_hidden=25)
    run = lambda **options: gradmc.sample(  # noqa: E731
        target,
        gradmc.sampler("o-pdhams", **options),
        num_chains=CHAINS,
        num_warmup=WARMUP,
        num_draws=DRAWS,
        seed=1,
        progress=False,
    )
    fixed, tuned = run(adapt=None), run()
    assert float(np.mean(fixed.stats["acceptance_rate"])) < 0.4
    assert abs(float(np.mean(tuned.stats["acceptance_rate"])) - TARGET_ACCEPT) < 0.07
    delta = np.asarray(tuned.params["delta"]).reshape(-1)
    assert np.all(delta == delta[0]) and delta[0] > 2.0  # one δ for all chains, moved up from 1
    np.testing.assert_array_equal(tuned.stats["step_size"], np.full((CHAINS, DRAWS), delta[0], np.float32))


def test_pdhams_learning_needs_warmup():
    with pytest.raises(ValueError, match="num_warmup >= 200"):
        gradmc.sample(gradmc.target("discs-ising", shape=4), "v-pdhams", num_warmup=50, num_draws=10, progress=False)


@pytest.mark.slow
def test_pdhams_refuses_to_learn_a_huge_dense_w():
    d = 2500  # above the dense limit, every pair of coordinates interacts (no sparse pattern), full rank
    A = np.random.default_rng(0).normal(size=(d, d)).astype(np.float32) / d
    A = jnp.asarray(A + A.T)
    target = gradmc.Target("all-pairs", lambda x: 0.5 * x @ A @ x, Binary(d))
    with pytest.raises(ValueError, match="dense second-order model W only up to"):
        gradmc.sampler("v-pdhams").bind(target, 1000)
    rank_one = gradmc.Target("all-pairs-rank-one", lambda x: 0.01 * jnp.sum(x) ** 2, Binary(d))
    gradmc.sampler("v-pdhams").bind(rank_one, 1000)  # a W of rank one (docs/discrete-hams.md §8.9)


@pytest.mark.slow
def test_step_size_capped_where_the_gradient_proposal_is_exact():
    """On independent bits (a linear f) AVG is exact at every ε (its M = 0 is the Hessian):
    the acceptance rate stays above the target, so ε rises to its cap, and the run says
    nothing is wrong (it draws independent states); on a constant f it warns."""
    theta = jnp.linspace(-2.0, 2.0, 20)
    target = gradmc.Target("independent-bits", lambda x: theta @ x, Binary(20))
    trace = gradmc.sample(target, "avg", num_chains=2, num_warmup=200, num_draws=200, progress=False)
    np.testing.assert_allclose(trace.params["step_size"], MAX_STEP_SIZE)
    assert not [line for line in trace.warnings if "step_size" in line or "acceptance" in line]
    assert np.mean(trace.stats["acceptance_rate"]) > 0.99
    flat = gradmc.Target("flat-bits", lambda x: 0.0 * jnp.sum(x), Binary(20))
    with pytest.warns(gradmc.RunWarning, match="avg: step_size adaptation did not converge"):
        gradmc.sample(flat, "avg", num_chains=2, num_warmup=200, num_draws=200, progress=False)
