"""The mode shift (gradmc.mode_shift): a joint move of a mixed position's blocks.

The reference target is a mixture whose blocks stick under blockwise updates: an assignment
``z`` (3 values) and a switch ``g`` each move the mean of a real ``x`` (2-D) by many of its
standard deviations, with component scales that differ (so that the shift between modes is
not exact and some moves are rejected):

    p(x, g, z) = pi_z Bernoulli(g; 0.3) N(x; m_z + a g, s_z² I).

Its discrete marginal is p(g, z) = pi_z Bernoulli(g; 0.3) exactly, and E[x], Var[x] follow.
Blockwise Gibbs sweeps started in one component stay there; with the mode shift the run
must match these marginals, and "auto" must find the mode shift worth keeping.
"""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gradmc
from gradmc import mode_shift
from gradmc.enumeration import ExactDistribution
from gradmc.spaces import Binary, Categorical
from gradmc.testing import assert_moments_match, assert_tv_within_bound

PI = np.array([0.2, 0.5, 0.3])
M = np.array([[-6.0, 0.0], [0.0, 6.0], [6.0, -3.0]])
SCALE = np.array([1.0, 0.7, 1.3])
A = np.array([5.0, 5.0])
P_G = 0.3


def log_density(position):
    x, g, z = position["x"], position["g"][0], position["z"][0]
    mean = z @ jnp.asarray(M, jnp.float32) + jnp.asarray(A, jnp.float32) * g
    scale = z @ jnp.asarray(SCALE, jnp.float32)
    log_prior = z @ jnp.log(jnp.asarray(PI, jnp.float32)) + g * np.log(P_G) + (1 - g) * np.log(1 - P_G)
    return log_prior - 0.5 * jnp.sum((x - mean) ** 2) / scale**2 - 2 * jnp.log(scale)


def exact():
    """p(g, z) over the coordinates (g, z) on the values {0, 1, 2} (g = 2 has no mass), E[x], Var[x]."""
    probs = np.zeros((3, 3))
    weights, centres, second = [], [], []
    for g in (0, 1):
        for z in range(3):
            probs[g, z] = PI[z] * (P_G if g else 1 - P_G)
            weights.append(probs[g, z])
            centres.append(M[z] + A * g)
            second.append(SCALE[z] ** 2 + (M[z] + A * g) ** 2)
    weights = np.array(weights)
    mean = weights @ np.array(centres)
    var = weights @ np.array(second) - mean**2
    return ExactDistribution(np.arange(3.0), 2, probs.ravel(order="F"), 0.0), mean, var


@pytest.fixture(scope="module")
def target():
    init = {"x": jnp.asarray(M[0]), "g": jnp.zeros(1), "z": jnp.array([[1.0, 0.0, 0.0]])}
    return gradmc.from_function(
        log_density, init=init, space={"g": Binary(1), "z": Categorical(3, 1)}, name="separated"
    )


RUN = {"num_chains": 4, "num_warmup": 300, "num_draws": 2000, "progress": False, "seed": 3}


def discrete_draws(trace):
    posterior = trace.posterior()
    return np.concatenate([posterior["g"], posterior["z"]], axis=-1).astype(float)


def check_exact(trace):
    distribution, mean, var = exact()
    assert trace.warnings == []
    assert_tv_within_bound(discrete_draws(trace), distribution, p=0.01)
    assert_moments_match(trace.posterior()["x"], mean, var=var, p=0.01)
    z = trace.posterior()["z"][..., 0]
    assert all(set(np.unique(z[c])) == {0, 1, 2} for c in range(len(z)))  # every chain visits every component
    accepted = np.asarray(trace.stats["joint.acceptance_rate"]).mean()
    assert 0.05 < accepted < 1.0  # a move to a less probable component (or switch value) is rejected at times


def test_auto_switches_the_mode_shift_on_where_blockwise_sweeps_stick(target):
    trace = gradmc.sample(target, {"g": "gibbs", "z": "gibbs"}, **RUN)
    assert trace.sampler == "g=gibbs, x=jittered-hmc, z=gibbs"
    assert trace.options["joint"] == {"sampler": "mode-shift", "when": "judged"}
    assert np.all(trace.params["joint"])
    warm = np.asarray(trace.warmup_stats["joint.acceptance_rate"])
    # off before the judged sweeps (W/2 .. 3W/4 - 1), tried in them, kept after
    judge_from = RUN["num_warmup"] // 2
    assert np.all(warm[:, :judge_from] == 0) and warm[:, judge_from:].mean() > 0.05
    check_exact(trace)


def test_the_trial_is_judged_by_the_log_density_summed_just_before_it_and_just_after_it():
    from gradmc.composed import settle_sweeps, trial_levels

    judge_from, judge_to = 8, 16  # sweeps 8 .. 15 tried: two sweeps either side are summed
    assert settle_sweeps(judge_from, judge_to) == 2 and settle_sweeps(2, 3) == 1
    levels = jnp.zeros(2)
    for t in range(24):
        levels = trial_levels(levels, jnp.float32(t), t, judge_from, judge_to)
    np.testing.assert_allclose(levels, [6.0 + 7.0, 16.0 + 17.0])


@pytest.mark.slow  # a run of 8 chains: the rule above at work
def test_a_trial_not_kept_leaves_each_chain_where_its_log_density_was_higher(target, monkeypatch):
    # the trial's moves take chains to other components, which blockwise sweeps never leave;
    # judged not worth it, a chain whose log density fell over the trial goes back to where it
    # was when the trial began (the start's component), and one whose log density rose stays
    from gradmc import composed

    judge = composed.judge_joint

    def never_kept(*args):
        changed, joint_changed, evals, _, _ = judge(*args).value
        return gradmc.base.Shared((changed, joint_changed, evals, jnp.bool_(False), jnp.int32(0)))

    monkeypatch.setattr(composed, "judge_joint", never_kept)
    run = {**RUN, "num_chains": 8, "num_draws": 50}
    trace = gradmc.sample(target, {"g": "gibbs", "z": "gibbs"}, **run)
    judge_from, judge_to = run["num_warmup"] // 2, 3 * run["num_warmup"] // 4
    settle = composed.settle_sweeps(judge_from, judge_to)
    warm = np.asarray(trace.warmup_stats["logdensity"])
    before = warm[:, judge_from - settle : judge_from].mean(axis=1)
    after = warm[:, judge_to : judge_to + settle].mean(axis=1)
    where = discrete_draws(trace)
    assert np.all(where == where[:, :1])  # blockwise sweeps stay in one component
    at_start = np.all(where[:, 0] == [0.0, 0.0], axis=-1)  # g = 0, z = 0
    went_back = after < before
    assert np.all(at_start[went_back])
    assert went_back.any() and not at_start.all()  # both happen in this run


@pytest.mark.parametrize(
    ("changed", "joint_changed", "kept"),
    [
        (0.0, 0.3, True),  # blocks that do not move alone
        (1.0, 0.2, True),  # the joint moves change one entry for every five the blocks change
        (10.0, 0.5, False),  # one for every twenty: not worth its cost
        (10.0, 2.0, True),  # an exchange of labels changes every site it relabels
        (0.0, 0.0, False),  # nothing moves either way
    ],
)
def test_the_joint_move_is_kept_where_it_moves_the_discrete_block_often_enough(changed, joint_changed, kept):
    judged = _judged(changed, joint_changed, evals=10.0)
    np.testing.assert_allclose(judged.value[:3], (4 * changed, 4 * joint_changed, 40.0))
    assert bool(judged.value[3]) == kept


def _judged(changed, joint_changed, evals, move_evals=1, max_moves=10):
    """The judged state after sweeps 0 .. 11 of which 4 .. 7 are judged."""
    from gradmc.composed import judge_joint

    judged = gradmc.base.Shared((jnp.float32(0), jnp.float32(0), jnp.float32(0), jnp.bool_(False), jnp.int32(1)))
    worth = joint_changed > 0 and joint_changed >= 0.1 * changed
    for t in range(12):  # the others count nothing
        judged = judge_joint(
            judged, jnp.float32(changed), jnp.float32(joint_changed), jnp.float32(evals), t, 4, 8, move_evals, max_moves
        )
        assert bool(judged.value[3]) == (worth and t >= 7)
    return judged


@pytest.mark.parametrize(
    ("evals", "move_evals", "max_moves", "moves"),
    [
        (100.0, 10, 20, 10),  # the blocks cost ten moves: ten moves a sweep
        (100.0, 30, 20, 3),
        (100.0, 10, 4, 4),  # at most one per discrete site
        (5.0, 10, 20, 1),  # a move costs more than the blocks: still one
    ],
)
def test_a_kept_joint_move_costs_a_sweep_what_the_blocks_cost(evals, move_evals, max_moves, moves):
    assert int(_judged(1.0, 0.5, evals, move_evals, max_moves).value[4]) == moves
    assert int(_judged(10.0, 0.5, evals, move_evals, max_moves).value[4]) == 0  # not kept: none


@pytest.mark.slow  # the same move in every sweep, asked for by name
def test_the_mode_shift_in_every_sweep_is_exact(target):
    trace = gradmc.sample(target, {"g": "gibbs", "z": "gibbs", "joint": "mode-shift"}, **RUN)
    assert trace.sampler == "g=gibbs, x=jittered-hmc, z=gibbs, joint=mode-shift"
    assert np.asarray(trace.warmup_stats["joint.acceptance_rate"])[:, :10].mean() > 0
    check_exact(trace)


@pytest.mark.slow  # the power check of the tests above
def test_without_it_the_same_sweeps_stay_in_their_start_component(target):
    # what the checks above guard against: blockwise sweeps alone never leave their start's
    # component, and the run says so: two chains started at g = 0 and two at g = 1 (all at z = 0)
    # keep to the switch they started with, so the chains disagree
    g = np.array([0.0, 0.0, 1.0, 1.0])
    starts = [{"x": jnp.asarray(M[0] + A * gc), "g": jnp.full(1, gc), "z": jnp.array([[1.0, 0.0, 0.0]])} for gc in g]
    init = jnp.stack([target.variables.flatten(start) for start in starts])
    choice = {"g": "gibbs", "z": "gibbs", "joint": "none"}
    trace = gradmc.sample(target, choice, init=init, **{**RUN, "num_draws": 500})
    assert "joint" not in trace.options
    assert np.all(trace.posterior()["z"] == 0)
    assert any("R-hat" in line for line in trace.warnings)
    assert any("block z (gibbs)" in line and "{'joint': 'mode-shift'}" in line for line in trace.warnings)


def test_the_conditional_mode_and_scale_of_a_gaussian_are_its_mean_and_standard_deviation():
    position = jnp.array([9.0, 9.0, 0.0, 0.0, 1.0, 0.0])  # x, g, one-hot z
    continuous = np.arange(2)

    def flat(y):
        return log_density({"x": y[:2], "g": y[2:3], "z": y[3:].reshape(1, 3)})

    mode, factor = mode_shift.conditional_mode(flat, position, continuous)
    np.testing.assert_allclose(mode, M[1], atol=1e-4)
    np.testing.assert_allclose(factor, np.eye(2) / SCALE[1], atol=1e-4)  # R R^T = -H = I / s_z^2


def test_a_joint_move_that_does_not_exist_or_has_no_continuous_block_is_refused(target):
    refused = r"joint move 'shift' does not exist; the choices are: mode-shift \(every sweep\)"
    with pytest.raises(ValueError, match=refused):
        gradmc.sample(target, {"joint": "shift"}, **RUN)
    discrete_only = gradmc.from_function(
        lambda p: jnp.sum(p["g"]) + jnp.sum(p["h"]),
        init={"g": jnp.zeros(2), "h": jnp.zeros(2)},
        space={"g": Binary(2), "h": Binary(2)},
        name="switches",
    )
    with pytest.raises(ValueError, match="moves discrete and continuous blocks together; 'switches' has blocks of one"):
        gradmc.sample(discrete_only, {"joint": "mode-shift"}, **RUN)


def test_auto_has_the_mode_shift_ready_only_for_a_small_continuous_block():
    from gradmc.composed import AUTO_JOINT_MAX_CONTINUOUS, composed_sampler

    def build(d):
        return gradmc.from_function(
            lambda p: -0.5 * jnp.sum((p["x"] - 4.0 * p["g"][0]) ** 2),  # g moves x by 4 sd
            init={"x": jnp.zeros(d), "g": jnp.zeros(1)},
            space={"g": Binary(1)},
            name=f"x{d}",
        )

    assert composed_sampler(build(AUTO_JOINT_MAX_CONTINUOUS), "auto").options["joint"]["when"] == "judged"
    assert "joint" not in composed_sampler(build(AUTO_JOINT_MAX_CONTINUOUS + 1), "auto").options
    assert "joint" not in composed_sampler(build(2), {"joint": "none"}).options


def test_auto_tries_no_mode_shift_where_a_discrete_move_barely_moves_the_continuous_conditional():
    """Switches that move x's conditional mean by ``shifts`` of its standard deviations (0.5):
    one far, the mode shift is tried; none more than a little, its proposal is a switch's own
    move, and ``"auto"`` leaves it out. The switches are no labels (the log density is quadratic
    in them)."""
    from gradmc.composed import HOLD_SHIFT, composed_sampler
    from gradmc.whitening import conditional_change

    def build(*shifts):  # switch i moves x by shifts[i]
        return gradmc.from_function(
            lambda p: -0.5 * jnp.sum(((p["x"] - 0.5 * jnp.asarray(shifts) @ p["g"]) / 0.5) ** 2) - jnp.sum(p["g"]),
            init={"x": jnp.zeros(1), "g": jnp.zeros(len(shifts))},
            space={"g": Binary(len(shifts))},
            name=f"shifts {shifts}",
        )

    near, far, last_far = build(HOLD_SHIFT / 2), build(4.0), build(0.0, 0.1, 0.0, 4.0)
    x = np.arange(near.space.slices["x"].start, near.space.slices["x"].stop)
    assert conditional_change(near, x).shift == pytest.approx(HOLD_SHIFT / 2, rel=1e-3)
    assert conditional_change(far, x).shift == pytest.approx(4.0, rel=1e-3)
    assert conditional_change(last_far, x).shift == pytest.approx(4.0, rel=1e-3)  # every switch is probed
    assert "joint" not in composed_sampler(near, "auto").options
    assert composed_sampler(far, "auto").options["joint"]["when"] == "judged"
    assert composed_sampler(last_far, "auto").options["joint"]["when"] == "judged"


def test_auto_tries_no_mode_shift_where_every_discrete_block_is_summed_out_without_labels():
    """A spike and slab whose switches enter linearly: linear-gibbs draws them, NUTS sums them out
    of the coefficients' moves, which see their marginal, and "auto" tries no mode shift. A
    mixture's one-hot assignments summed out the same way hold labels the moves may swap (the
    marginal has a mode per labelling): tried. So is a second discrete block not summed out."""
    from gradmc.composed import composed_sampler

    X = jnp.asarray(np.random.default_rng(0).normal(size=(30, 3)), jnp.float32)
    y = X @ jnp.array([1.0, 0.0, -1.0])

    def spike_and_slab(p):
        beta, gamma = p["beta"], p["gamma"]
        prior = jnp.sum(
            gamma * (-0.5 * (beta / 2.0) ** 2 - jnp.log(2.0)) + (1 - gamma) * (-0.5 * (beta / 0.1) ** 2 - jnp.log(0.1))
        )
        return prior - 0.5 * jnp.sum((y - X @ beta) ** 2)

    init = {"beta": jnp.zeros(3), "gamma": jnp.zeros(3)}
    summed = composed_sampler(gradmc.from_function(spike_and_slab, init=init, space={"gamma": Binary(3)}, name="ss"))
    assert summed.name == "beta=jittered-hmc (summing out gamma), gamma=linear-gibbs" and "joint" not in summed.options

    data = jnp.array([-2.0, -1.8, 2.1, 1.9])

    def mixture(p):
        return -0.5 * jnp.sum(p["locs"] ** 2) + jnp.sum(p["z"] * -0.5 * (data[:, None] - p["locs"]) ** 2)

    labelled = gradmc.from_function(
        mixture,
        init={"locs": jnp.array([-2.0, 2.0]), "z": jnp.eye(2)[jnp.array([0, 0, 1, 1])]},
        space={"z": Categorical(2, 4)},
        name="labels",
    )
    assert "summing out z" in composed_sampler(labelled).name
    assert composed_sampler(labelled).options["joint"]["when"] == "judged"

    def with_a_flag(p):  # the flag g, compared with, gets single-site gibbs: not summed out
        return spike_and_slab(p) + jnp.where(p["g"][0] == 1, -0.5 * jnp.sum(p["beta"] ** 2), 0.0)

    flagged = composed_sampler(
        gradmc.from_function(
            with_a_flag, init={**init, "g": jnp.zeros(1)}, space={"gamma": Binary(3), "g": Binary(1)}, name="f"
        )
    )
    assert "summing out gamma" in flagged.name and flagged.options["joint"]["when"] == "judged"


# -- a move that carries the coefficients and holds the noise scale ----------------------------

# A variable selection whose first two columns are the same: with the coefficients kept, a
# switch turns on only where its coefficient, spread by the narrow prior of an excluded one,
# sits where the data accept it, so blockwise sweeps stick. Given the noise variance the
# coefficients' conditional is Gaussian; jointly with it, it is not.
_rng = np.random.default_rng(7)
_BASE = _rng.normal(size=(12, 2))
X_SEL = np.column_stack([_BASE[:, 0], _BASE[:, 0], _BASE[:, 1]])
Y_SEL = X_SEL[:, 0] + 0.8 * X_SEL[:, 2] + 0.3 * _rng.normal(size=12)
TAU_IN, TAU_OUT, P_IN, A_IG, B_IG = 2.0, 0.01, 0.3, 2.0, 0.2


def selection(position):
    s, beta, v = position["s"], position["beta"], position["log_var"][0]
    var = jnp.exp(v)
    tau2 = jnp.where(s > 0.5, TAU_IN**2, TAU_OUT**2)
    log_s = jnp.sum(s * np.log(P_IN) + (1 - s) * np.log(1 - P_IN))
    log_beta = jnp.sum(-0.5 * beta**2 / (var * tau2) - 0.5 * jnp.log(var * tau2))
    resid = jnp.asarray(Y_SEL, jnp.float32) - jnp.asarray(X_SEL, jnp.float32) @ (s * beta)
    log_lik = -0.5 * resid @ resid / var - 0.5 * len(Y_SEL) * v
    return log_s + log_beta + log_lik - A_IG * v - B_IG / var  # InvGamma on var, with the Jacobian of v


def selection_exact():
    """p(s | y): beta and the variance integrated out (y | s, var ~ N(0, var (I + TAU_IN² X_s X_s^T)))."""
    from itertools import product

    n = len(Y_SEL)
    logp = []
    for s in product((0, 1), repeat=3):
        xs = X_SEL[:, np.array(s, bool)]
        sigma = np.eye(n) + TAU_IN**2 * xs @ xs.T
        quad = Y_SEL @ np.linalg.solve(sigma, Y_SEL)
        log_prior = sum(np.log(P_IN) if si else np.log(1 - P_IN) for si in s)
        logp.append(log_prior - 0.5 * np.linalg.slogdet(sigma)[1] - (A_IG + n / 2) * np.log(B_IG + quad / 2))
    logp = np.array(logp)
    probs = np.exp(logp - np.logaddexp.reduce(logp)).reshape(2, 2, 2)  # [s0, s1, s2]
    return ExactDistribution(np.array([0.0, 1.0]), 3, probs.ravel(order="F"), 0.0)  # s0 varies fastest


def test_the_conditional_of_the_coefficients_is_gaussian_and_of_the_scale_is_not():

    position = jnp.concatenate([jnp.ones(3), jnp.full(3, 0.5), jnp.zeros(1)])  # s, beta, log_var

    def flat(y):
        return selection({"s": y[:3], "beta": y[3:6], "log_var": y[6:]})

    beta, log_var = np.arange(3, 6), np.array([6])
    assert mode_shift.gaussian_parts(flat, position, [beta, log_var], jax.random.key(0)) == [0]
    assert mode_shift.gaussian_parts(flat, position, [log_var, beta], jax.random.key(0)) == [1]
    assert mode_shift.gaussian_parts(flat, position, [log_var], jax.random.key(0)) == []


@pytest.mark.slow  # the held scale's exactness, and auto's choice of the moves
def test_auto_carries_the_coefficients_holds_the_scale_and_stays_exact():
    init = {"beta": jnp.zeros(3), "log_var": jnp.zeros(1), "s": jnp.array([1.0, 0.0, 1.0])}
    target = gradmc.from_function(selection, init=init, space={"s": Binary(3)}, name="selection")
    trace = gradmc.sample(target, "auto", **RUN)
    assert trace.options["joint"]["holds"] == "log_var"
    assert np.all(trace.params["joint"]) and np.all(np.asarray(trace.params["joint_moves"]) >= 1)
    # a coefficient's prior scales with the variance (a funnel): a trajectory may diverge now and
    # then, and the leapfrog steps of one that does reach variances that overflow (seed 1 of this
    # run gives both, with three Newton steps in the move as with five): warnings of those two only
    assert [line for line in trace.warnings if "divergent" not in line and "non-finite" not in line] == []
    assert_tv_within_bound(trace.posterior()["s"].astype(float), selection_exact(), p=0.01)


# A mixture whose chains start with two components' labels exchanged: four data in two tight
# groups, each component's mean with a prior at one group (and a third, light component's far
# from both). Each mean then sits at the other group's data, 8 prior standard deviations from
# its own prior mean: a local mode that no change of one assignment leaves (it would put a datum
# in a component far from it), so blockwise sweeps and single-site mode shifts stay; a swap of
# the two labels leaves it.
Y_LABELS = np.array([-4.2, -3.8, 4.1, 3.9])
PRIOR_MEANS, PRIOR_SD, NOISE_SD = np.array([-4.0, 4.0, 12.0]), 1.0, 0.5
WEIGHTS = np.array([0.4, 0.4, 0.2])


def labelled(position):
    z, locs = position["z"], position["locs"]  # z: one-hot rows
    log_prior = jnp.sum(z @ jnp.log(jnp.asarray(WEIGHTS, jnp.float32)))
    log_prior -= 0.5 * jnp.sum((locs - jnp.asarray(PRIOR_MEANS, jnp.float32)) ** 2) / PRIOR_SD**2
    return log_prior - 0.5 * jnp.sum((jnp.asarray(Y_LABELS, jnp.float32) - z @ locs) ** 2) / NOISE_SD**2


def labelled_exact():
    """p(z | y), the means integrated out: the data of component k are N(mu_k 1, s² I + tau² 1 1^T)."""
    from itertools import product

    logp = []
    for z in product(range(3), repeat=len(Y_LABELS)):
        total = np.sum(np.log(WEIGHTS[list(z)]))
        for k in range(3):
            y = Y_LABELS[np.array(z) == k]
            if y.size:
                cov = NOISE_SD**2 * np.eye(y.size) + PRIOR_SD**2 * np.ones((y.size, y.size))
                resid = y - PRIOR_MEANS[k]
                total += -0.5 * resid @ np.linalg.solve(cov, resid) - 0.5 * np.linalg.slogdet(2 * np.pi * cov)[1]
        logp.append(total)
    logp = np.array(logp)
    probs = np.exp(logp - np.logaddexp.reduce(logp)).reshape((3,) * len(Y_LABELS))  # [z0, z1, z2, z3]
    return ExactDistribution(np.arange(3.0), len(Y_LABELS), probs.ravel(order="F"), 0.0)  # z0 fastest


@pytest.mark.slow  # exactness with the swaps, and their power: from the exchanged labels every chain leaves
def test_a_swap_of_two_labels_leaves_a_mixture_s_exchanged_components_and_stays_exact():
    exchanged = {"locs": jnp.array([4.0, -4.0, 12.0]), "z": jax.nn.one_hot(jnp.array([1, 1, 0, 0]), 3)}
    target = gradmc.from_function(labelled, init=exchanged, space={"z": Categorical(3, 4)}, name="exchanged")
    trace = gradmc.sample(target, {"z": "gibbs", "joint": "mode-shift"}, **RUN)
    z = trace.posterior()["z"]
    assert np.all(z[:, :, 0] != 1) and np.all(z[:, :, 2] != 0)  # every chain left the exchanged labels
    assert_tv_within_bound(z.astype(float), labelled_exact(), p=0.01)


@pytest.mark.slow  # one composed program with a chain of 60 states
def test_the_trial_counts_every_state_an_exchange_of_labels_flips():
    # Two regimes of a 60-step chain, exchangeable in the likelihood: the second mode (the
    # regimes exchanged) holds about a fifth of the mass. FFBS moves a few states a sweep in
    # either mode but never leaves it; an accepted exchange flips every state. Judged by the
    # entries changed, the trial keeps the mode shift and every chain visits both modes;
    # counted as one change per accepted move, it was left out and no chain left the first.
    steps = 60
    rng = np.random.default_rng(7)
    regime = np.zeros(steps, int)
    for t in range(1, steps):
        regime[t] = regime[t - 1] if rng.random() < 0.85 else 1 - regime[t - 1]
    rain = jnp.asarray(rng.normal(np.where(regime == 0, 0.5, 3.0), 0.8), jnp.float32)

    def regimes(position):
        level, log_noise, s = position["level"], position["log_noise"], position["s"]
        noise = jnp.exp(log_noise)
        log_prior = -0.5 * jnp.sum(((level - jnp.array([0.0, 2.0])) / 2.0) ** 2) - 0.5 * (noise / 2.0) ** 2 + log_noise
        same = jnp.sum(s[1:] * s[:-1])
        log_chain = same * np.log(0.85) + (steps - 1 - same) * np.log(0.15)
        return log_prior + log_chain + jnp.sum(-0.5 * ((rain - s @ level) / noise) ** 2 - log_noise)

    init = {
        "level": jnp.array([0.0, 2.0]),
        "log_noise": jnp.float32(0.0),
        "s": jax.nn.one_hot(jnp.zeros(steps, int), 2),
    }
    target = gradmc.from_function(regimes, init=init, space={"s": Categorical(2, steps)}, name="regimes")
    run = {**RUN, "num_warmup": 400, "num_draws": 200, "seed": 0}
    with warnings.catch_warnings():  # a run this short may warn of its R-hat
        warnings.simplefilter("ignore", gradmc.RunWarning)
        trace = gradmc.sample(target, "auto", **run)
    assert trace.sampler.endswith("s=ffbs") and np.all(trace.params["joint"])
    second_mode = np.asarray(trace.posterior()["level"])[..., 0] > 1.75
    assert np.all(second_mode.any(axis=1)) and np.all((~second_mode).any(axis=1))
    assert 0.05 < second_mode.mean() < 0.5
