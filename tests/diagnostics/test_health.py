"""Tests of the run warnings (gradmc.diagnostics.health) and of sample()'s space check.

The unit logic runs on traces built by hand; a few tiny real runs (compiled once per module)
check that sample() attaches and raises the warnings, that a failing adaptation still
returns a trace, and that NUTS traces carry what arviz.bfmi needs.

False alarms on the healthy runs: with iid draws (or NUTS on a standard normal, whose draws
are nearly independent), 4 chains x 1000 draws give 8 split halves of 500 draws, and
split R-hat^2 ~ (n-1)/n + F/n with F ~ chi2_7/7: R-hat > 1.01 needs F > 11, i.e.
chi2_7 > 77, probability below 1e-13 per coordinate. Bulk and tail ESS are then near 4000
(tail ESS of 5%/95% indicators has a relative error of a few percent), 40 times the
threshold of 100.
"""

import logging
import warnings
from pathlib import Path

import arviz as az
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gradmc
from gradmc.base import FALLBACK, Target
from gradmc.diagnostics import health
from gradmc.diagnostics._common import coord_names
from gradmc.diagnostics.health import RunWarning, run_warnings
from gradmc.spaces import Binary, Categorical, Ordinal, Product, Real, Spin
from gradmc.trace import Trace
from gradmc.variables import Variables, entry_name


def fake_trace(draws, *, sampler="custom", accept=0.6, options=None, warmup=None, params=None, moments=None, **stats):
    """A Trace of hand-made draws ``(chain, draw, ...)`` (or none, with ``moments``)."""
    c, n = (draws.shape[:2]) if draws is not None else (moments["mean"].shape[0], moments["count"])
    base = {
        "acceptance_rate": np.full((c, n), accept, np.float32),
        "diverging": np.zeros((c, n), bool),
        "nonfinite": np.zeros((c, n), bool),
    }
    base.update(stats)
    return Trace(
        target="t",
        sampler=sampler,
        draws=draws,
        stats=base,
        warmup_stats=warmup or {},
        params=params,
        options=options or {},
        moments=moments,
    )


@pytest.fixture(scope="module")
def iid():
    return np.random.default_rng(0).standard_normal((4, 1000, 3)).astype(np.float32)


def only(lines, text):
    """The one line of ``lines`` that contains ``text``."""
    hits = [line for line in lines if text in line]
    assert len(hits) == 1, lines
    return hits[0]


# -- unit logic on hand-made traces -------------------------------------------------------------


def test_healthy_iid_draws_raise_nothing(iid):
    assert run_warnings(fake_trace(iid)) == []


def test_rhat_names_the_worst_coordinates(iid):
    draws = np.random.default_rng(1).standard_normal((4, 1000, 10)).astype(np.float32)
    draws[:2, :, [3, 7, 8, 9]] += 3.0  # two chains elsewhere in four coordinates
    draws[:2, :, 7] += 3.0  # x[7] worst
    line = only(run_warnings(fake_trace(draws, sampler="rwm")), "R-hat above 1.01")
    assert line.startswith("rwm: ")
    assert "4 of 10 coordinates: x[7]" in line and "(+1 more)" in line
    assert "x[0]" not in line


def test_coordinates_that_share_a_name_are_listed_once():
    # the one-hot entries of one categorical site carry the site's name: it is shown once
    labels = ["z[4] (17.7)", "z[4] (17.7)", "z[9] (12.2)"]
    assert health._listing(labels, 11) == "z[4] (17.7), z[9] (12.2) (+8 more)"
    assert health._listing(["a", "b", "c", "d"]) == "a, b, c (+1 more)"
    assert health._listing(["a", "b"]) == "a, b"


def test_low_ess_is_flagged_and_names_bulk_and_tail():
    rng = np.random.default_rng(2)
    x = np.cumsum(rng.standard_normal((4, 200, 2)), axis=1) * 0.01 + rng.standard_normal((4, 200, 2))
    x[:, :, 1] = np.repeat(rng.standard_normal((4, 20)), 10, axis=1)  # blocks of 10 equal draws
    lines = run_warnings(fake_trace(x))
    line = only(lines, "ESS below 100")
    assert "x[1] (bulk" in line and "tail" in line


def test_single_chain_uses_its_own_threshold_and_leaks_no_arviz_notes(caplog):
    draws = np.random.default_rng(3).standard_normal((1, 400, 2))
    with warnings.catch_warnings(record=True) as caught, caplog.at_level(logging.DEBUG):
        warnings.simplefilter("always")
        assert run_warnings(fake_trace(draws)) == []
        sticky = np.repeat(np.random.default_rng(4).standard_normal((1, 40, 2)), 10, axis=1)
        line = only(run_warnings(fake_trace(sticky)), "ESS below")
    assert "ESS below 50 " in line
    assert caught == [] and not [r for r in caplog.records if r.name.startswith("arviz")]


def test_constant_coordinates(iid):
    draws = iid.copy()
    draws[:, :, 0] = 1.0  # constant everywhere: fine
    assert run_warnings(fake_trace(draws)) == []
    draws[:, :, 1] = np.arange(4)[:, None]  # constant within chains, different between them
    line = only(run_warnings(fake_trace(draws)), "never changed within any chain")
    assert line.startswith("custom: x[1] never changed") and "1 of 3" in line


def test_frozen_and_rejecting_chains_are_named(iid):
    draws = iid.copy()
    draws[2] = draws[2, :1]  # chain 2 never moves
    accept = np.full((4, 1000), 0.6, np.float32)
    accept[3] = 0.0  # chain 3 rejects everything
    lines = run_warnings(fake_trace(draws, acceptance_rate=accept))
    assert "chains 2, 3 never moved" in only(lines, "never moved")


def test_every_chain_at_one_state_is_not_stuck():
    draws = np.zeros((4, 100, 3), np.float32)
    assert run_warnings(fake_trace(draws)) == []


def test_a_gibbs_chain_that_keeps_its_state_is_a_draw_not_a_stuck_proposal():
    """Every chain at one state, every accepted move a jump of 0: for a first-order proposal
    (NCG) the proposals misjudge the log density; for Gibbs, whose steps draw from the exact
    conditionals, the conditional sits on that state, and nothing is wrong.
    """
    draws = np.zeros((4, 100, 3), np.float32)
    jump = np.zeros((4, 100), np.float32)
    line = only(run_warnings(fake_trace(draws, sampler="ncg", accept=1.0, jump=jump)), "never moved")
    assert "were all the current state" in line
    assert run_warnings(fake_trace(draws, sampler="gibbs", accept=1.0, jump=jump)) == []


def test_a_fallback_run_that_settled_where_the_data_pin_it_is_not_stuck():
    """Every chain at one state although the fallback's single-site moves, scored by the log
    density itself, were tried at every step: the data pin the sites, nothing is wrong. Where
    the chains disagree, or moved, the fallback's line stays."""
    draws = np.zeros((4, 100, 3), np.float32)
    jump = np.zeros((4, 100), np.float32)
    params = {FALLBACK: np.ones(4, bool)}
    assert run_warnings(fake_trace(draws, sampler="ncg", accept=0.5, jump=jump, params=params)) == []
    split = draws.copy()
    split[2:] = 1.0  # two chains at another state
    lines = run_warnings(fake_trace(split, sampler="ncg", accept=0.5, jump=jump, params=params))
    assert "froze in warm-up" in only(lines, "froze in warm-up")
    assert "never moved" in only(lines, "never moved")
    moving = np.random.default_rng(1).integers(0, 2, (4, 100, 3)).astype(np.float32)
    lines = run_warnings(fake_trace(moving, sampler="ncg", accept=0.5, jump=np.ones((4, 100)), params=params))
    assert "froze in warm-up" in only(lines, "froze in warm-up")


def test_divergences_and_nonfinite_proposals(iid):
    diverging = np.zeros((4, 1000), bool)
    diverging[1, :5] = True
    nonfinite = np.zeros((4, 1000), bool)
    nonfinite[0, 3] = nonfinite[2, 7] = True
    lines = run_warnings(fake_trace(iid, sampler="nuts", diverging=diverging, nonfinite=nonfinite))
    div = only(lines, "divergent transitions")
    assert div.startswith("nuts: 5 divergent") and "chain 1 (5)" in div
    assert "target_accept (now 0.8)" in div and "dense_mass=True" in div
    assert "chains 0 (1), 2 (1)" in only(lines, "non-finite log density")


def test_nonfinite_draws(iid):
    draws = iid.copy()
    draws[1, 5:, 2] = np.inf
    assert "x[2]" in only(run_warnings(fake_trace(draws)), "not finite")


def test_acceptance_far_from_target(iid):
    warm = {"acceptance_rate": np.full((4, 100), 0.55, np.float32), "step_size": np.ones((4, 100), np.float32)}
    params = {"step_size": np.ones(4, np.float32)}
    accept = np.full((4, 1000), 0.55, np.float32)
    accept[1] = 0.2
    lines = run_warnings(fake_trace(iid, sampler="mala", acceptance_rate=accept, warmup=warm, params=params))
    line = only(lines, "target_accept=0.574")
    assert "acceptance rate 0.20 in chain 1 " in line and "ACCEPTANCE" not in line
    # the same rates with adaptation switched off: nothing to compare with
    off = fake_trace(iid, sampler="mala", acceptance_rate=accept, warmup=warm, params=params, options={"adapt": None})
    assert run_warnings(off) == []


def test_acceptance_above_target_at_the_end_of_the_range(iid):
    """A tuned value held at a bound of its range in the last part of warm-up (PDHAMS's δ at
    its floor on a quadratic target, where it is rejection-free at every δ) while accepting
    more than the target is not flagged; the same rates with a value still moving are."""
    params = {"step_size": np.ones(4, np.float32)}
    accept = np.full((4, 1000), 0.95, np.float32)
    falling = np.geomspace(1.0, 0.25, 100).astype(np.float32)
    held = {
        "acceptance_rate": np.full((4, 100), 0.95, np.float32),
        "step_size": np.tile(np.maximum(falling, 0.5), (4, 1)),
    }
    assert run_warnings(fake_trace(iid, sampler="mala", acceptance_rate=accept, warmup=held, params=params)) == []
    moving = {**held, "step_size": np.tile(falling, (4, 1))}
    lines = run_warnings(fake_trace(iid, sampler="mala", acceptance_rate=accept, warmup=moving, params=params))
    assert "acceptance rate 0.95, 0.95, 0.95 in chains 0, 1, 2" in only(lines, "target_accept=0.574")


def test_step_size_at_its_cap_accepting_more_than_the_target(iid):
    """A step size that rose to its cap while the acceptance rate rose above the target (a
    proposal that is that good at the cap) is not a failed adaptation; the same values on a
    target whose log density never changed (a flat one) are."""
    params = {"step_size": np.full(4, 1e6, np.float32)}
    rising = np.minimum(np.geomspace(0.2, 1e9, 100), 1e6).astype(np.float32)
    warm = {
        "acceptance_rate": np.tile(np.minimum(np.linspace(0.6, 1.4, 100), 1.0), (4, 1)).astype(np.float32),
        "step_size": np.tile(rising, (4, 1)),
        "logdensity": np.random.default_rng(0).normal(size=(4, 100)).astype(np.float32),
    }
    accept = np.ones((4, 1000), np.float32)
    assert run_warnings(fake_trace(iid, sampler="avg", acceptance_rate=accept, warmup=warm, params=params)) == []
    flat = {**warm, "acceptance_rate": np.ones((4, 100), np.float32), "logdensity": np.zeros((4, 100), np.float32)}
    lines = run_warnings(fake_trace(iid, sampler="avg", acceptance_rate=accept, warmup=flat, params=params))
    assert "flat" in only(lines, "did not converge")


def test_adaptation_failure_from_params_and_warmup(iid):
    warm = {"acceptance_rate": np.ones((4, 100), np.float32), "step_size": np.ones((4, 100), np.float32)}
    params = {"step_size": np.array([np.inf, 1.0, 1.0, 1.0], np.float32)}
    line = only(run_warnings(fake_trace(iid, sampler="ncg", warmup=warm, params=params)), "did not converge")
    assert line.startswith("ncg: step_size adaptation did not converge in chains 0, 1, 2 (+1 more)")
    assert "flat" in line


def test_run_without_draws_uses_moments():
    mean = np.array([[0.0, 0.0], [0.0, 0.02], [0.0, 5.0], [0.0, 0.01]])
    moments = {"count": 1000, "mean": mean, "var": np.ones((4, 2))}
    line = only(run_warnings(fake_trace(None, moments=moments)), "R-hat")
    assert "1 of 2 coordinates: x[1]" in line and "kept no draws" in line
    agreeing = {"count": 1000, "mean": np.zeros((4, 2)), "var": np.ones((4, 2))}
    assert run_warnings(fake_trace(None, moments=agreeing)) == []


def test_many_coordinates_check_the_likeliest_to_fail(monkeypatch):
    draws = np.random.default_rng(5).standard_normal((4, 500, 40)).astype(np.float32)
    draws[0, :, 37] += 2.0
    monkeypatch.setattr(health, "MAX_CHECKED_VALUES", 1)  # 16 coordinates at most
    line = only(run_warnings(fake_trace(draws)), "R-hat")
    assert "x[37]" in line and "checked the 16 of 40 coordinates" in line


def test_too_few_draws():
    assert "only 3 kept draws" in only(run_warnings(fake_trace(np.ones((2, 3, 1)) * [[[0]], [[1]]])), "only")


# -- coordinates named in the model's terms -------------------------------------------------------


@pytest.mark.parametrize("shape", [(), (3,), (2, 3), (2, 1, 2)])
def test_entry_names_are_the_summary_tables_labels(shape):
    size = int(np.prod(shape))
    assert [entry_name("s", shape, i) for i in range(size)] == coord_names(shape, "s")


def test_warnings_name_a_pytree_models_variables():
    """A model on {"mu", "theta"}: flat coordinate 7 is theta[6] (ravel order: mu, then theta),
    in the R-hat, ESS, not-finite and stuck-coordinate lines alike, and in a run without draws."""
    variables = Variables.from_pytree({"mu": 0.0, "theta": np.zeros(8)})
    draws = np.random.default_rng(7).standard_normal((4, 1000, 9)).astype(np.float32)
    draws[:2, :, 7] += 5.0
    draws[:, :, 3] = np.arange(4)[:, None]  # constant within each chain, different between them
    draws[1, 5, 0] = np.nan
    trace = fake_trace(draws)
    trace.variables = variables
    lines = run_warnings(trace)
    assert "coordinates: theta[6] (" in only(lines, "R-hat")
    assert "not finite in mu:" in only(lines, "not finite")
    assert only(lines, "never changed").startswith("custom: theta[2] never changed")
    assert not any("x[" in line for line in lines), lines
    moments = {"count": 1000, "mean": np.zeros((4, 9)), "var": np.ones((4, 9))}
    moments["mean"][2, 7] = 5.0
    trace = fake_trace(None, moments=moments)
    trace.variables = variables
    assert "1 of 9 coordinates: theta[6] (" in only(run_warnings(trace), "R-hat")


def test_warnings_name_the_entries_of_a_discrete_models_variables():
    """Kept value indices are named through the decoded positions: coordinate 4 of a 2x3
    lattice of bits is spins[1,1]; row 2 of one-hot rows read as labels is labels[1,0]."""
    rng = np.random.default_rng(8)
    for space, variables, name in (
        (Binary(6), Variables.reshaped("spins", (6,), (2, 3)), "spins[1,1]"),
        (
            Categorical(3, 4),
            Variables(lambda p: {"labels": jnp.argmax(p, axis=-1).reshape(2, 2)}, (4, 3)),
            "labels[1,0]",
        ),
    ):
        indices = rng.integers(0, space.num_values, (4, 500, space.d)).astype(space.index_dtype)
        indices[:, :, 2 if name == "labels[1,0]" else 4] = np.arange(4)[:, None] % space.num_values
        trace = fake_trace(space.decode(indices))
        trace.indices, trace.space, trace.variables = indices, space, variables
        assert only(run_warnings(trace), "never changed").startswith(f"custom: {name} never changed")


def test_coordinates_without_one_named_entry_keep_their_place():
    """A coordinate that moves several entries of one variable (a simplex's unconstrained
    coordinates) is named with its variable; one that moves none keeps its place x[k]."""
    variables = Variables(lambda p: {"w": jax.nn.softmax(jnp.append(p[:2], 0.0)), "c": p[2] * 0.0}, (3,))
    draws = np.random.default_rng(9).standard_normal((4, 1000, 3)).astype(np.float32)
    draws[:2, :, 1] += 5.0
    draws[:2, :, 2] += 9.0
    trace = fake_trace(draws)
    trace.variables = variables
    line = only(run_warnings(trace), "R-hat")
    assert "x[2] (" in line and "w via x[1] (" in line


def relabelled_trace(space, chain_labels, rng):
    """A trace of 4 chains on ``space`` (``mu``: 3 means, ``z``: 40 sites) whose chain c holds
    the sites' value indices ``chain_labels[c]`` (each draw moving 5 % of them at random) and the
    means ``[-4, 0, 4]`` of the labels as chain c reads them."""
    part = space.parts["z"]
    draws = []
    for labels, order in chain_labels:
        indices = np.broadcast_to(labels, (600, labels.size)).copy()
        moved = rng.random(indices.shape) < 0.05
        indices[moved] = rng.integers(0, part.num_values, moved.sum())
        mu = np.array([-4.0, 0.0, 4.0])[order] + 0.3 * rng.standard_normal((600, 3))
        flat_z = part.values[indices].reshape(600, -1)
        draws.append(np.concatenate([mu, flat_z], axis=-1))
    trace = fake_trace(np.stack(draws).astype(np.float32))
    trace.space = space
    return trace


@pytest.mark.parametrize("z", [Categorical(3, 40), Ordinal([1.0, 2.0, 3.0], 40)])
def test_chains_that_found_the_labels_in_another_order_are_told_so(z):
    """Chain 2 holds a mixture's labels 0 and 2 exchanged (its assignments and its means): the
    warning says so, first, with the values it read so; an ordinal part is named by its values."""
    rng = np.random.default_rng(11)
    space = Product({"mu": Real(3), "z": z})
    labels = rng.integers(0, 3, 40)
    exchanged = np.array([2, 1, 0])[labels]
    same, swapped = (labels, np.arange(3)), (exchanged, np.array([2, 1, 0]))
    lines = run_warnings(relabelled_trace(space, [same, same, swapped, same], rng))
    line = only(lines, "relabelled")
    read = "0, 2 read as 2, 0" if isinstance(z, Categorical) else "1, 3 read as 3, 1"
    assert f"z: chain 2 of 4 agrees with chain 0 once z's values are relabelled (chain 2's {read})" in line
    assert lines[0] == line and any("R-hat" in other for other in lines)


def test_chains_that_disagree_otherwise_are_not_called_relabelled():
    """Chains whose assignments differ by no relabelling (drawn afresh), or agree, get no such line."""
    rng = np.random.default_rng(12)
    space = Product({"mu": Real(3), "z": Categorical(3, 40)})
    labels = rng.integers(0, 3, 40)
    other = (rng.integers(0, 3, 40), np.array([2, 1, 0]))
    lines = run_warnings(relabelled_trace(space, [(labels, np.arange(3))] * 3 + [other], rng))
    assert any("R-hat" in line for line in lines) and not any("relabelled" in line for line in lines)
    assert health._relabelled_lines(relabelled_trace(space, [(labels, np.arange(3))] * 4, rng).draws, space) == []


# -- real runs -----------------------------------------------------------------------------------


def standard_normal(d=2):
    return Target("std-normal", lambda x: -0.5 * jnp.sum(x**2), Real(d))


@pytest.fixture(scope="module")
def nuts_trace():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trace = gradmc.sample(standard_normal(), "nuts", num_chains=4, num_warmup=500, num_draws=1000, progress=False)
    return trace, [w for w in caught if issubclass(w.category, RunWarning)]


def test_healthy_nuts_run_warns_nothing(nuts_trace):
    trace, caught = nuts_trace
    assert trace.warnings == [] and caught == []


def test_nuts_traces_carry_energy_and_tree_depth(nuts_trace):
    trace, _ = nuts_trace
    assert trace.stats["tree_depth"].shape == trace.stats["energy"].shape == (4, 1000)
    assert trace.stats["tree_depth"].min() >= 1
    idata = trace.to_arviz()
    assert "energy" in idata.sample_stats
    bfmi = az.bfmi(idata)
    assert bfmi.shape == (4,) and np.all(bfmi > 0.3)  # E-BFMI of a standard normal is about 1


def test_chains_in_different_modes_warn_about_rhat():
    def bimodal(x):
        return jnp.logaddexp(-0.5 * jnp.sum((x - 8.0) ** 2), -0.5 * jnp.sum((x + 8.0) ** 2))

    target = Target("bimodal", bimodal, Real(1))
    init = np.array([[-8.0], [8.0], [-8.0], [8.0]])
    with pytest.warns(RunWarning, match=r"R-hat above 1.01 for 1 of 1 coordinates: x\[0\]"):
        trace = gradmc.sample(target, "mala", num_chains=4, num_warmup=100, num_draws=200, init=init, progress=False)
    assert any("R-hat" in line for line in trace.warnings)


FLAT_BITS = Target("flat-bits", lambda x: 0.0 * jnp.sum(x), Binary(5))


@pytest.mark.parametrize(
    ("target", "sampler", "parameter", "why"),
    [
        (Target("flat", lambda x: 0.0 * jnp.sum(x), Real(3)), "mala", "step_size", "flat"),
        (FLAT_BITS, "ncg", "step_size", "flat"),
        (FLAT_BITS, "gwg", "num_flips", "flat"),
        (FLAT_BITS, "mh-uniform", "move_scale", "flat"),
        (FLAT_BITS, "v-dhams", "delta", "flat"),
        (FLAT_BITS, "o-pdhams", "delta", "flat"),
        (
            Target(
                "nan-away-from-0",
                lambda x: jnp.where(jnp.sum(x**2) > 0, jnp.nan, 0.0),
                Real(3),
                initial_position=lambda key: jnp.zeros(3),
            ),
            "mala",
            "step_size",
            "NaN or infinite",
        ),
    ],
)
def test_failed_adaptation_warns_and_returns(target, sampler, parameter, why):
    """Each self-tuning sampler names the parameter its warm-up tunes (a constant log density
    takes every one of them to the end of its range, accepting everything)."""
    match = f"{sampler}: {parameter} adaptation did not converge"
    with pytest.warns(RunWarning, match=match) as caught:
        trace = gradmc.sample(target, sampler, num_chains=2, num_warmup=200, num_draws=20, progress=False)
    assert trace.draws.shape[:2] == (2, 20)
    assert why in only(trace.warnings, "did not converge")
    assert f"set {parameter} by hand" in only(trace.warnings, "did not converge")
    assert [str(w.message) for w in caught if issubclass(w.category, RunWarning)] == trace.warnings


@pytest.mark.parametrize(
    ("target", "sampler"),
    [
        # a quadratic target: with the learned W PDHAMS is rejection-free, δ rests at its floor
        (Target("chain", lambda x: 0.8 * jnp.sum((2 * x[1:] - 1) * (2 * x[:-1] - 1)), Binary(6)), "v-pdhams"),
        # independent bits: DHAMS accepts everything at every δ, which rises to its cap
        (Target("independent-bits", lambda x: jnp.linspace(-2.0, 2.0, 6) @ x, Binary(6)), "o-dhams"),
    ],
)
def test_a_value_held_at_its_bound_on_a_varying_target_is_not_a_failure(target, sampler):
    trace = gradmc.sample(target, sampler, num_chains=2, num_warmup=200, num_draws=100, progress=False)
    assert np.mean(trace.stats["acceptance_rate"]) > 0.99
    assert not [line for line in trace.warnings if "delta" in line or "acceptance" in line], trace.warnings


def test_continuous_sampler_on_discrete_target_is_refused():
    target = Target("spins", lambda x: jnp.sum(x[:-1] * x[1:]), Spin(4))
    with pytest.raises(ValueError, match="sampler 'nuts' samples continuous spaces") as err:
        gradmc.sample(target, "nuts", num_warmup=10, num_draws=10, progress=False)
    assert "lives on Spin(4)" in str(err.value) and "Samplers for discrete targets:" in str(err.value)
    assert "ncg" in str(err.value) and "mala" not in str(err.value)


def test_discrete_sampler_on_continuous_target_is_refused():
    with pytest.raises(ValueError, match="sampler 'ncg' samples discrete spaces") as err:
        gradmc.sample(standard_normal(), "ncg", num_warmup=10, num_draws=10, progress=False)
    assert "Samplers for continuous targets:" in str(err.value) and "nuts" in str(err.value)


def _toy_builder(target, num_warmup, temperature=1.0, adapt="robbins_monro", aim=0.3):
    raise NotImplementedError  # only its registration is read here


def test_a_new_sampler_declares_what_it_tunes_and_its_failure_is_reported(iid):
    """The checks ask the registry entry what a sampler tunes: a sampler registered with a
    tuned parameter of a new name, aiming at an acceptance option of a new name, gets its
    failed adaptation reported by that name; switched off, nothing is reported."""
    from gradmc.registry import Tuned, register_sampler

    meanings = {"temperature": "The temperature.", "adapt": "Its rule.", "aim": "The acceptance aimed at."}
    register_sampler("toy-tempered", "a toy", tuned=(Tuned("temperature", aims_at="aim"),), options=meanings)(
        _toy_builder
    )
    warm = {"acceptance_rate": np.ones((4, 100), np.float32), "step_size": np.ones((4, 100), np.float32)}
    params = {"temperature": np.ones(4, np.float32)}
    line = only(run_warnings(fake_trace(iid, sampler="toy-tempered", warmup=warm, params=params)), "did not converge")
    assert line.startswith("toy-tempered: temperature adaptation did not converge in chains 0, 1, 2 (+1 more)")
    assert "(aiming at 0.3)" in line and "set temperature by hand" in line
    off = fake_trace(iid, sampler="toy-tempered", warmup=warm, params=params, options={"adapt": None})
    assert run_warnings(off) == []
    # a declaration naming an option the builder does not take is refused at registration
    with pytest.raises(ValueError, match=r"declares option\(s\) \['target_accept'\]"):
        register_sampler("toy-misdeclared", "a toy", tuned=(Tuned("temperature"),), options=meanings)(_toy_builder)


def test_no_list_of_parameter_names_in_the_checks():
    """health.py holds no table of tuned-parameter names: what it checks comes from entries."""
    source = Path(health.__file__).read_text()
    for name in ("num_flips", "move_scale", "delta", "dense_mass", '"target_accept"'):
        assert name not in source, name
