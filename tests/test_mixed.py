"""Mixed discrete-continuous targets: a Gibbs composition of block samplers on a Product space.

The reference model couples an Ising pair of binary switches ``g`` (3 of them) and a
categorical ``z`` (3 values) to a real ``mu`` (2-D) through its mean,

    log p(mu, g, z) = h·g + g'Jg/2 + w·z + log N(mu; A g + B z, s² I),

so that p(g, z) ∝ exp(h·g + g'Jg/2 + w·z) exactly (the Gaussian's normaliser does not
depend on its mean), while the conditionals of g and z given mu do: a kernel, or a
composition, that used a stale conditional would miss these marginals. E[mu] and E[mu²]
follow from p(g, z).
"""

import itertools
import re
import warnings
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gradmc
from gradmc.enumeration import ExactDistribution
from gradmc.spaces import Binary, Categorical, Product, Real
from gradmc.testing import assert_moments_match, assert_tv_within_bound

H = np.array([0.3, -0.4, 0.1])
J = np.array([[0.0, 0.6, -0.5], [0.6, 0.0, 0.4], [-0.5, 0.4, 0.0]])
W = np.array([0.2, -0.3, 0.4])
A = np.array([[1.2, -0.8, 0.5], [0.4, 0.9, -1.0]])
B = np.array([[0.0, 1.0, -1.0], [-0.7, 0.5, 0.6]])
S = 0.8


def log_density(position):
    g, z, mu = position["g"], position["z"][0], position["mu"]
    mean = jnp.asarray(A, jnp.float32) @ g + jnp.asarray(B, jnp.float32) @ z
    prior = jnp.dot(jnp.asarray(H, jnp.float32), g) + 0.5 * g @ jnp.asarray(J, jnp.float32) @ g
    return prior + jnp.dot(jnp.asarray(W, jnp.float32), z) - 0.5 * jnp.sum((mu - mean) ** 2) / S**2


INIT = {"mu": jnp.zeros(2), "g": jnp.zeros(3), "z": jnp.array([[1.0, 0.0, 0.0]])}
SPACE = {"g": Binary(3), "z": Categorical(3, 1)}


def exact():
    """p(g, z) over the 4 coordinates (g1, g2, g3, z) on the values {0, 1, 2} (g = 2 has no
    mass), and E[mu], Var[mu].
    """
    probs = np.zeros((3,) * 4)
    means = []
    for g in itertools.product((0, 1), repeat=3):
        for z in range(3):
            g_arr = np.array(g, float)
            probs[(*g, z)] = np.exp(H @ g_arr + 0.5 * g_arr @ J @ g_arr + W[z])
            means.append((probs[(*g, z)], A @ g_arr + B[:, z]))
    total = probs.sum()
    weights = np.array([w for w, _ in means]) / total
    centres = np.array([m for _, m in means])
    mean = weights @ centres
    var = S**2 + weights @ centres**2 - mean**2
    distribution = ExactDistribution(np.arange(3.0), 4, (probs / total).ravel(order="F"), float(np.log(total)))
    return distribution, mean, var


def check(trace):
    distribution, mean, var = exact()
    posterior = trace.posterior()
    discrete = np.concatenate([posterior["g"], posterior["z"]], axis=-1).astype(float)
    assert_tv_within_bound(discrete, distribution, p=0.01)
    assert_moments_match(posterior["mu"], mean, var=var, p=0.01)


@pytest.fixture(scope="module")
def target():
    return gradmc.from_function(log_density, init=INIT, space=SPACE, name="coupled")


RUN = {"num_chains": 4, "num_warmup": 500, "num_draws": 2500, "progress": False, "seed": 1}


def test_the_product_space_and_its_target(target):
    assert target.space == Product({"g": Binary(3), "mu": Real(2), "z": Categorical(3, 1)})
    with pytest.raises(ValueError, match="entry 'g'"):
        target.space.validate(np.array([2.0, 0, 0, 0, 0, 1, 0, 0]))


def test_auto_is_exact_on_the_joint(target):
    trace = gradmc.sample(target, "auto", **RUN)
    assert trace.sampler == "g=ncg, mu=jittered-hmc, z=ncg"
    assert set(trace.params) == {"g", "joint", "joint_moves", "mu", "z"} and "inverse_mass_matrix" in trace.params["mu"]
    if not np.any(trace.params["joint"]):  # judged not worth it: no moves, and none counted
        assert np.all(trace.params["joint_moves"] == 0) and np.all(trace.stats["joint.acceptance_rate"] == 0)
    check(trace)
    posterior = trace.posterior()
    assert posterior["g"].dtype.kind == "i" and posterior["z"].shape == (4, 2500, 1)


@pytest.mark.slow  # three composed programs to compile: about a minute on 2 cores
def test_a_composed_run_is_one_program_and_draws_what_two_would(target, monkeypatch):
    """Every block can freeze its warm-up (NUTS's window, NCG's step size behind its
    fallback, the mode shift's judged flag), so warm-up and kept draws share one compiled
    program; forcing two programs draws the same, bit for bit."""
    import gradmc.run.sampling as sampling

    run = {**RUN, "num_warmup": 200, "num_draws": 100}
    programs = []
    chunk_function = sampling.chunk_function
    monkeypatch.setattr(sampling, "chunk_function", lambda *args: programs.append(args) or chunk_function(*args))
    one = gradmc.sample(target, "auto", **run)
    assert len(programs) == 1
    plan = sampling._chunk_plan
    monkeypatch.setattr(sampling, "_chunk_plan", lambda *args: plan(*args)._replace(one_program=False))
    two = gradmc.sample(target, "auto", **run)
    assert len(programs) == 3
    np.testing.assert_array_equal(one.draws, two.draws)
    for name in one.stats:
        np.testing.assert_array_equal(one.stats[name], two.stats[name])
    np.testing.assert_array_equal(one.params["mu"]["step_size"], two.params["mu"]["step_size"])


# -- a block summed out of the continuous moves ---------------------------------------------------
#
# log p(x, c, g) = -|x|^2/2 + sum_n c_n . (a_n + B_n x) + g . (h + D x) + j g_0 g_1: linear in the
# one-hot rows c, not in the switches g, so given (c, g), x ~ N(m, I) with m = sum_n B_n' c_n + D' g,
# and p(c, g) ∝ exp(sum_n a_n . c_n + h . g + j g_0 g_1 + |m|^2 / 2): a mixture of 36 Gaussians.

SUM_A = np.array([[0.2, -0.4, 0.1], [0.0, 0.5, -0.3]])
SUM_B = np.array([[[1.0, 0.0], [-0.8, 0.6], [0.2, -1.1]], [[0.0, 0.9], [0.7, 0.3], [-0.5, -0.4]]])  # (n, k, 2)
SUM_H, SUM_J = np.array([-0.6, 0.3]), 0.8
SUM_D = np.array([[0.9, -0.2], [-0.4, 1.0]])  # (switch, 2)


def summed_log_density(position):
    x, c, g = position["x"], position["c"], position["g"]
    rows = jnp.asarray(SUM_A, jnp.float32) + jnp.einsum("nkj,j->nk", jnp.asarray(SUM_B, jnp.float32), x)
    switches = g @ (jnp.asarray(SUM_H, jnp.float32) + jnp.asarray(SUM_D, jnp.float32) @ x) + SUM_J * g[0] * g[1]
    return -0.5 * jnp.sum(x**2) + jnp.sum(c * rows) + switches


def test_a_block_summed_out_of_the_continuous_moves_keeps_the_joint_exact():
    """ "auto" draws c whole from its exact conditional and sums it out of NUTS's moves of x (a
    collapsed Gibbs sweep); c's draw follows x's move directly, though c comes first among the
    parts (drawn before x, the sweep would pair x with a stale c): the discrete marginal and the
    moments of x are exact."""
    start = {"x": jnp.zeros(2), "c": jnp.tile(jnp.array([1.0, 0.0, 0.0]), (2, 1)), "g": jnp.zeros(2)}
    target = gradmc.from_function(summed_log_density, init=start, space={"c": Categorical(3, 2), "g": Binary(2)})
    trace = gradmc.sample(target, "auto", **{**RUN, "seed": 2})
    assert trace.sampler == "g=ncg, x=jittered-hmc (summing out c), c=linear-gibbs"
    assert trace.warnings == [] and trace.options["x"]["collapse"] == "c"
    probs, means = np.zeros((3, 3, 2, 2)), np.zeros((3, 3, 2, 2, 2))
    for k0, k1, g0, g1 in itertools.product(range(3), range(3), (0, 1), (0, 1)):
        g = np.array([g0, g1], float)
        mean = SUM_B[0, k0] + SUM_B[1, k1] + SUM_D.T @ g
        probs[k0, k1, g0, g1] = np.exp(SUM_A[0, k0] + SUM_A[1, k1] + SUM_H @ g + SUM_J * g0 * g1 + 0.5 * mean @ mean)
        means[k0, k1, g0, g1] = mean
    probs /= probs.sum()
    posterior = trace.posterior()
    discrete = np.concatenate([posterior["c"], posterior["g"]], axis=-1).astype(float)
    joint = np.zeros((3,) * 4)
    joint[:, :, :2, :2] = probs
    assert_tv_within_bound(discrete, ExactDistribution(np.arange(3.0), 4, joint.ravel(order="F"), 0.0), p=0.01)
    weights, centres = probs.ravel(), means.reshape(-1, 2)
    mean = weights @ centres
    cov = np.eye(2) + (centres - mean).T @ (weights[:, None] * (centres - mean))
    assert_moments_match(posterior["x"], mean, cov, p=0.01)
    # each draw of c goes with its x: E[x 1{c_n = k}], which a c drawn before x's move would miss
    picked = np.stack([np.arange(3) == k for k in range(3)])  # (k, value)
    cross = np.zeros((2, 3, 2))
    for (k0, k1, g0, g1), w in np.ndenumerate(probs):
        cross[0, k0] += w * means[k0, k1, g0, g1]
        cross[1, k1] += w * means[k0, k1, g0, g1]
    together = posterior["x"][..., None, None, :] * picked[posterior["c"]][..., None]  # (chain, draw, n, k, 2)
    assert_moments_match(together.reshape(*together.shape[:2], -1), cross.ravel(), p=0.01)
    assert "summing" not in gradmc.composed.composed_sampler(target, {"collapse": "off"}).name


def test_a_block_summed_out_as_linear_that_is_not_is_reported(target, monkeypatch):
    """Were the probe to read z as linear (its log density is quadratic in it), the continuous
    moves would sum it out wrongly: its own draws' MH test rejects some, and the run says so."""
    from gradmc import composed

    monkeypatch.setattr(
        composed, "part_shapes", lambda *_: composed.PartShapes(frozenset(), frozenset(), frozenset({"z"}))
    )
    with pytest.warns(gradmc.RunWarning, match="block z was summed out of mu's moves as if"):
        # the mode shift's trial plays no part here: left out, the program compiles seconds sooner
        trace = gradmc.sample(target, {"g": "gibbs", "joint": None}, **{**RUN, "num_warmup": 200, "num_draws": 300})
    assert trace.options["mu"]["collapse"] == "z"
    assert any("not exact; run with {'collapse': 'off'}" in line for line in trace.warnings)


@pytest.mark.slow
def test_one_sampler_per_block_is_exact_and_frozen_after_warmup(target):
    choice = {"mu": "mala", ("g",): ("gibbs", 3), "z": gradmc.sampler("gwg", num_flips=1)}
    trace = gradmc.sample(target, choice, **RUN)
    assert trace.sampler == "g=gibbs, mu=mala, z=gwg"
    assert trace.options["g"]["steps"] == 3 and trace.options["z"]["steps"] == gradmc.composed.DISCRETE_STEPS
    check(trace)
    # warm-up moved MALA's step size; the kept draws used one value per chain
    kept = trace.stats["mu.step_size"]
    assert np.all(kept == kept[:, :1]) and np.allclose(kept[:, 0], trace.params["mu"]["step_size"])
    assert np.ptp(trace.warmup_stats["mu.step_size"]) > 0


@pytest.mark.slow
def test_a_block_that_keeps_a_stale_conditional_fails_the_check(target, monkeypatch):
    """The proof that ``check`` has power: without ``refresh`` the discrete blocks' MH tests
    use the log density cached before the other blocks moved, and the marginals are wrong.
    """
    from gradmc.base import BoundSampler

    def stale(key, state, position):
        return state

    real_bind = gradmc.base.Sampler.bind

    def bind(self, target, num_warmup):
        bound = real_bind(self, target, num_warmup)
        return bound._replace(refresh=stale) if isinstance(bound, BoundSampler) and bound.refresh else bound

    monkeypatch.setattr(gradmc.base.Sampler, "bind", bind)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", gradmc.RunWarning)
        trace = gradmc.sample(target, {"mu": "mala", "g": "gibbs", "z": "gwg"}, **RUN)
    with pytest.raises(AssertionError):
        check(trace)


def test_mixed_input_errors(target):
    with pytest.raises(ValueError, match="'h', not entries of init"):
        gradmc.from_function(log_density, init=INIT, space={"h": Binary(3)})
    with pytest.raises(ValueError, match="entry 'g' has 3 entries; its space Binary[(]4[)] has 4"):
        gradmc.from_function(log_density, init=INIT, space={"g": Binary(4)})
    with pytest.raises(ValueError, match="outside the value set"):
        gradmc.from_function(log_density, init={**INIT, "g": jnp.full(3, 0.5)}, space=SPACE)
    with pytest.raises(TypeError, match="pytree position"):
        gradmc.from_function(log_density, init=jnp.zeros(8), space=SPACE)
    with pytest.raises(ValueError, match="no part named 'beta'"):
        gradmc.sample(target, {"beta": "nuts"}, **RUN)
    with pytest.raises(ValueError, match="samples continuous spaces; 'g' lies on Binary"):
        gradmc.sample(target, {"g": "nuts"}, **RUN)
    with pytest.raises(ValueError, match="'mu' is given two samplers"):
        gradmc.sample(target, {"mu": "nuts", ("mu", "g"): "mala"}, **RUN)
    with pytest.raises(ValueError, match="different spaces"):
        gradmc.sample(target, {("g", "z"): "gibbs"}, **RUN)
    with pytest.raises(ValueError, match="steps per sweep >= 1"):
        gradmc.sample(target, {"g": ("gibbs", 0)}, **RUN)
    with pytest.raises(ValueError, match="cannot move the block 'mu'"):
        gradmc.sample(target, {"mu": "parallel-tempering"}, **RUN)
    with pytest.raises(TypeError, match="dict of samplers names parts of a mixed target"):
        gradmc.sample("banana", {"x": "nuts"}, **RUN)


def test_one_name_moves_every_block_of_its_kind(target):
    layout = gradmc.composed.blocks(target.space, "gibbs")
    assert [(b.label, b.sampler.name) for b in layout] == [("g", "gibbs"), ("mu", "jittered-hmc"), ("z", "gibbs")]
    layout = gradmc.composed.blocks(target.space, {("g",): "avg"})
    assert [(b.label, b.sampler.name) for b in layout] == [("g", "avg"), ("mu", "jittered-hmc"), ("z", "ncg")]
    layout = gradmc.composed.blocks(target.space, "mala")
    assert [(b.label, b.sampler.name) for b in layout] == [("g", "ncg"), ("mu", "mala"), ("z", "ncg")]


def test_one_sweep_of_single_site_gibbs_and_one_draw_of_a_whole_block(target):
    layout = gradmc.composed.blocks(target.space, {"g": "gibbs", "z": "ncg"})
    assert {b.label: b.steps for b in layout} == {
        "g": target.space.parts["g"].d,
        "mu": 1,
        "z": gradmc.composed.DISCRETE_STEPS,
    }
    assert layout[0].sampler.options == {"scan": "systematic"}  # each site once per sweep
    assert {b.label: b.steps for b in gradmc.composed.blocks(target.space, {"z": "ffbs"})}["z"] == 1


def test_auto_reads_whether_the_log_density_is_linear_quadratic_or_curved_in_a_block():
    """Linear in the switches (their exact conditionals read from the gradient), quadratic
    (a Gaussian likelihood of ``X @ (gamma * beta)``: NCG) and neither (a logistic likelihood of
    it: its Hessian in the switches moves from point to point).
    """
    rng = np.random.default_rng(0)
    X = jnp.asarray(rng.normal(size=(20, 3)), jnp.float32)
    y = jnp.asarray(rng.integers(0, 2, 20), jnp.float32)

    def linear(x):
        return -0.5 * jnp.sum(x["beta"] ** 2) + jnp.sum(x["gamma"] * x["beta"])

    def quadratic(x):
        return -0.5 * jnp.sum(x["beta"] ** 2) - 0.5 * jnp.sum((y - X @ (x["gamma"] * x["beta"])) ** 2)

    def logistic(x):
        logits = X @ (x["gamma"] * x["beta"])
        return -0.5 * jnp.sum(x["beta"] ** 2) + jnp.sum(y * logits - jnp.logaddexp(0.0, logits))

    # coefficients started at zero: no gradient in the switches there, nor curvature; the probe's
    # second point, with the coefficients moved, tells the three apart all the same
    for beta in (jnp.ones(3), jnp.zeros(3)):
        for fn, curved, linear_ones, chosen in (
            (linear, set(), {"gamma"}, "linear-gibbs"),
            (quadratic, set(), set(), "ncg"),
            (logistic, {"gamma"}, set(), "gibbs"),
        ):
            t = gradmc.from_function(fn, init={"beta": beta, "gamma": jnp.ones(3)}, space={"gamma": Binary(3)})
            shapes = gradmc.composed.part_shapes(t)
            assert (shapes.flat, shapes.curved, shapes.linear) == (set(), curved, linear_ones)
            assert f"gamma={chosen}" in gradmc.composed.composed_sampler(t).name.split(", ")


def test_a_block_auto_finds_linear_goes_without_the_fallback_move_and_one_named_keeps_it():
    """Where "auto" confirmed the log density linear in a block, linear-gibbs's proposal is the
    sites' exact conditional, which cannot freeze: no fallback move is built (nor compiled).
    Named by the user, on a log density it may not suit, the sampler keeps it."""
    target = gradmc.from_function(
        lambda x: -0.5 * jnp.sum(x["beta"] ** 2) + jnp.sum(x["gamma"] * x["beta"]),
        init={"beta": jnp.ones(3), "gamma": jnp.ones(3)},
        space={"gamma": Binary(3)},
    )
    view = gradmc.base.Target("gamma", jnp.sum, Binary(3))
    learned = {}
    for choice in ("auto", {"gamma": "linear-gibbs"}):
        (block,) = [
            b
            for b in gradmc.composed.blocks(target.space, choice, lambda: gradmc.composed.part_shapes(target))
            if b.label == "gamma"
        ]
        assert block.sampler.name == "linear-gibbs"
        bound = block.sampler.bind(view, 40)
        learned[str(choice)] = bound.finalize(bound.init(jax.random.key(0), jnp.zeros(3)))[1]
    assert "fallback" not in learned["auto"] and "fallback" in learned[str({"gamma": "linear-gibbs"})]


# -- the "Mixed models" page: every Python example runs, with no run warning ----------------------

PAGE = Path(__file__).resolve().parents[1] / "docs" / "mixed-models.md"
EXAMPLES = re.findall(r"```python\n(.*?)```", PAGE.read_text(), flags=re.S)


@pytest.mark.slow
def test_mixed_models_page_examples_run_clean():
    assert "mixed-models.md" in (PAGE.parents[1] / "mkdocs.yml").read_text()
    assert len(EXAMPLES) == 11
    namespace = {"__name__": "mixed_models_example"}
    with warnings.catch_warnings():
        warnings.simplefilter("error", gradmc.RunWarning)
        for index, code in enumerate(EXAMPLES):
            exec(compile(code, f"{PAGE.name} example {index + 1}", "exec"), namespace)
    inclusion = namespace["inclusion"]
    assert inclusion[0] > 0.99 and inclusion[3] > 0.99 and np.all(np.delete(inclusion, [0, 3]) < 0.1)
    assert namespace["trace"].sampler == "early+late=jittered-hmc, s=gibbs"
    assert np.bincount(namespace["trace"].posterior()["s"].ravel()).argmax() == 25
    assert namespace["outlier_trace"].sampler == "early+late=jittered-hmc, s=gibbs"
    assert np.all(namespace["outlier_trace"].posterior()["outlier"].mean(axis=(0, 1))[[10, 40]] > 0.9)
    assert namespace["count_trace"].sampler == "rate=jittered-hmc, size=ordinal-ncg"
    assert abs(namespace["count_trace"].posterior()["size"].mean() - 21.08) < 1.0
    assert namespace["mixture_trace"].sampler == "x=jittered-hmc (summing out z), z=linear-gibbs"
    assert np.all(namespace["mixture_trace"].params["joint"])  # "auto" kept the mode shift
    assignments = namespace["mixture_trace"].posterior()["z"].ravel()
    assert np.allclose(np.bincount(assignments, minlength=3) / assignments.size, namespace["weights"], atol=0.05)
    assert namespace["hmm_trace"].sampler == "mu=jittered-hmc, z=ffbs"
    plated = gradmc.from_numpyro(namespace["weather_plate"], np.array([0.3, 2.9, 3.4, 0.1, 2.5, 0.6, 3.1]))
    assert gradmc.composed.composed_sampler(plated).name == "level+noise+stay=jittered-hmc, s=ffbs (shared transitions)"
    decoded = np.round(namespace["states"].mean(axis=(0, 1)))
    assert np.mean(decoded == namespace["hidden"]) > 0.9
    assert namespace["field_trace"].sampler == "log_sigma=jittered-hmc, x=ncg"
    assert abs(np.exp(namespace["field"]["log_sigma"]).mean() - 0.75) < 0.1
    assert np.mean(namespace["restored"] == namespace["clean"]) > 0.95


MODEL_FILE = """
import numpy as np
import jax.numpy as jnp
import gradmc
from gradmc.spaces import Binary

rng = np.random.default_rng(1)
X = rng.normal(size=(30, 3))
y = X @ np.array([1.5, 0.0, -1.0]) + rng.normal(size=30)


def log_density(position):
    beta, gamma = position["beta"], position["gamma"]
    scale = 2.0 * gamma + 0.1 * (1 - gamma)
    prior = jnp.sum(-0.5 * (beta / scale) ** 2 - jnp.log(scale)) + jnp.sum(gamma) * jnp.log(0.25)
    return prior - 0.5 * jnp.sum((y - X @ beta) ** 2)


init = {"beta": jnp.zeros(3), "gamma": jnp.zeros(3)}
target = gradmc.from_function(log_density, init=init, space={"gamma": Binary(3)})
"""


@pytest.mark.slow
def unpaired(out: str) -> str:
    """The command's output without the switch pairs in the sampler's name."""
    return out.replace(", pairs=gamma:beta", "")


def test_command_line_one_sampler_per_part(tmp_path, capsys):
    from gradmc.cli import main

    model = tmp_path / "selection.py"
    model.write_text(MODEL_FILE)
    argv = ["sample", f"{model}:target", "--warmup", "200", "--draws", "200", "--chains", "2"]
    assert (
        main([*argv, "--sampler", "beta=nuts,gamma=pavg", "--option", "gamma.num_fit=50", "--out", str(tmp_path / "a")])
        == 0
    )
    out = capsys.readouterr().out
    assert "beta=nuts, gamma=pavg, pairs=gamma:beta on" in out and "gamma[2]" in out and "gamma: " in out
    assert "values drawn of the discrete variables:\n  gamma (3 entries pooled): " in out
    assert re.search(r"gamma \(3 entries pooled\): .*; R-hat at most \d\.\d{3}, bulk ESS at least \d+", out)
    assert main([*argv, "--sampler", "gamma=auto", "--option", "gamma.steps=2", "--out", str(tmp_path / "d")]) == 0
    assert "beta=jittered-hmc, gamma=ncg on" in unpaired(capsys.readouterr().out)
    assert main([*argv, "--sampler", "collapse=off,whiten=off", "--out", str(tmp_path / "f")]) == 0
    assert "beta=jittered-hmc, gamma=" in capsys.readouterr().out
    assert main([*argv, "--sampler", "joint=mode-shift", "--out", str(tmp_path / "e")]) == 0
    assert "beta=jittered-hmc, gamma=gibbs, joint=mode-shift on" in unpaired(capsys.readouterr().out)
    assert main([*argv, "--sampler", "joint=shift", "--out", str(tmp_path / "e")]) == 2
    assert "the joint move 'shift' does not exist; the choices are: mode-shift (every sweep)" in capsys.readouterr().err
    assert main([*argv, "--sampler", "gamma=nuts", "--out", str(tmp_path / "b")]) == 2
    assert "samples continuous spaces; 'gamma' lies on Binary(3)" in capsys.readouterr().err
    assert main([*argv, "--sampler", "auto", "--option", "step_size=1", "--out", str(tmp_path / "c")]) == 2
    assert main([*argv, "--sampler", "beta=nuts", "--option", "delta.x=1", "--out", str(tmp_path / "c")]) == 2
    assert "'delta' is not among --sampler's parts (beta)" in capsys.readouterr().err


# -- a latent count: an ordinal block beside a real one ------------------------------------------

COUNTS = np.array([7.0, 4.0, 9.0, 6.0])  # y_i ~ Binomial(N, 0.3), N ~ Poisson(lam), lam ~ Gamma(3, 0.2)
SHAPE, RATE, DETECT, MAX_COUNT = 3.0, 0.2, 0.3, 100


def count_log_density(position):
    from jax.scipy.special import gammaln

    log_lam, n = position["log_lam"], position["N"][0]
    lam = jnp.exp(log_lam)
    prior = SHAPE * log_lam - RATE * lam  # Gamma(3, 0.2) on lam, with the log's Jacobian
    poisson = n * log_lam - lam - gammaln(n + 1)
    y = jnp.asarray(COUNTS)
    binomial = gammaln(n + 1) - gammaln(n - y + 1) + y * np.log(DETECT) + (n - y) * np.log(1 - DETECT)
    return prior + poisson + jnp.sum(jnp.where(n >= y, binomial, -jnp.inf))


def exact_count():
    """p(N | y) ∝ NegBin(N; 3, 0.2) Π Binomial(y_i; N, 0.3) (lam summed out by Gamma–Poisson
    conjugacy), and E[lam], Var[lam] from lam | N ~ Gamma(3 + N, 1.2).
    """
    from scipy.stats import binom, nbinom

    n = np.arange(MAX_COUNT + 1)
    log_p = nbinom.logpmf(n, SHAPE, RATE / (RATE + 1)) + binom.logpmf(COUNTS[:, None], n, DETECT).sum(0)
    probs = np.exp(log_p - log_p.max())
    probs /= probs.sum()
    mean_n = probs @ n
    var_n = probs @ n**2 - mean_n**2
    return probs, (SHAPE + mean_n) / (RATE + 1), (SHAPE + mean_n + var_n) / (RATE + 1) ** 2


@pytest.mark.slow
def test_a_latent_count_beside_its_rate_is_exact():
    from gradmc.spaces import Ordinal

    probs, mean_lam, var_lam = exact_count()
    assert probs[-1] < 1e-12  # the value set holds the whole posterior
    space = {"N": Ordinal(np.arange(MAX_COUNT + 1.0), 1)}
    init = {"log_lam": jnp.array(3.0), "N": jnp.array([20.0])}
    trace = gradmc.sample(count_log_density, "auto", init=init, space=space, **RUN)
    assert trace.sampler == "N=ordinal-ncg, log_lam=jittered-hmc"
    posterior = trace.posterior()
    distribution = ExactDistribution(np.arange(MAX_COUNT + 1.0), 1, probs, 0.0)
    assert_tv_within_bound(posterior["N"].astype(float), distribution, p=0.01)
    assert_moments_match(np.exp(posterior["log_lam"])[..., None], [mean_lam], var=[var_lam], p=0.01)


# -- an Ising field with an unknown noise scale: a spin block beside a real one -----------------

SIDE, COUPLING = 3, 0.5  # x on a 3 x 3 grid, free boundary; y_i ~ N(x_i, sigma^2), log sigma ~ N(0, 1)
NOISY = np.array([1.2, 0.4, -0.9, 0.8, -0.2, -1.1, 0.3, -0.6, -1.4])
ROWS = [(r * SIDE + c, r * SIDE + c + 1) for r in range(SIDE) for c in range(SIDE - 1)]
EDGES = np.array(ROWS + [(r * SIDE + c, (r + 1) * SIDE + c) for r in range(SIDE - 1) for c in range(SIDE)]).T


def ising_log_density(position):
    x, log_sigma = position["x"], position["log_sigma"]
    prior = COUPLING * jnp.sum(x[EDGES[0]] * x[EDGES[1]]) - 0.5 * log_sigma**2
    residual = jnp.sum((jnp.asarray(NOISY, jnp.float32) - x) ** 2)
    return prior - 0.5 * residual * jnp.exp(-2 * log_sigma) - NOISY.size * log_sigma


def exact_ising():
    """p(x | y) over the 512 spin fields (log sigma integrated out on a grid of 9,001 points
    over [-5, 4], where the integrand is below 1e-14 of its peak at both ends), the spins'
    means, and E[log sigma], Var[log sigma].
    """
    grid = np.linspace(-5.0, 4.0, 9001)
    log_p = np.empty((2,) * NOISY.size)
    moments = np.zeros(3)
    for index in itertools.product((0, 1), repeat=NOISY.size):
        x = 2.0 * np.array(index) - 1
        log_w = COUPLING * np.sum(x[EDGES[0]] * x[EDGES[1]]) - 0.5 * grid**2 - NOISY.size * grid
        log_w = log_w - 0.5 * np.sum((NOISY - x) ** 2) * np.exp(-2 * grid)
        top = log_w.max()
        w = np.exp(log_w - top)
        log_p[index] = top + np.log(w.sum())
        moments += np.exp(top) * np.array([w.sum(), w @ grid, w @ grid**2])
    probs = np.exp(log_p - log_p.max())
    probs /= probs.sum()
    spins = np.array([np.sum(probs * (2.0 * np.indices(probs.shape)[i] - 1)) for i in range(NOISY.size)])
    mean = moments[1] / moments[0]
    distribution = ExactDistribution(np.array([-1.0, 1.0]), NOISY.size, probs.ravel(order="F"), 0.0)
    return distribution, spins, mean, moments[2] / moments[0] - mean**2


def test_an_ising_field_with_an_unknown_noise_scale_is_exact():
    """The spins' joint law (TV), their means and log sigma's moments against the exact posterior
    (a coupling of 0.4 in the sampled model, against 0.5 here, fails the spins' means).
    """
    from gradmc.spaces import Spin

    distribution, spins, mean, var = exact_ising()
    init = {"x": jnp.ones(NOISY.size), "log_sigma": jnp.zeros(())}
    trace = gradmc.sample(ising_log_density, "auto", init=init, space={"x": Spin(NOISY.size)}, **RUN)
    assert trace.sampler == "log_sigma=jittered-hmc, x=ncg"
    posterior = trace.posterior()
    assert_tv_within_bound(posterior["x"].astype(float), distribution, p=0.01)
    assert_moments_match(posterior["x"], spins, var=1 - spins**2, p=0.01)
    assert_moments_match(posterior["log_sigma"][..., None], [mean], var=[var], p=0.01)


@pytest.mark.slow
def test_a_block_whose_proposals_freeze_is_reported_by_name():
    """Spike and slab written through ``gamma * beta`` (quadratic in the switches): NCG's
    first-order proposal misjudges every flip, its step size shrinks until it proposes the
    current state, and the block's fallback move takes over. The warning names the block and
    the sampler that moves there.
    """
    rng = np.random.default_rng(1)
    X = rng.normal(size=(100, 4))
    y = X @ np.array([2.0, 0.0, 0.0, -1.5]) + rng.normal(size=100)

    def log_density(position):
        beta, gamma = position["beta"], position["gamma"]
        prior = -0.125 * jnp.sum(beta**2) + jnp.sum(gamma) * jnp.log(0.25)
        return prior - 0.5 * jnp.sum((y - X @ (gamma * beta)) ** 2)

    init = {"beta": jnp.zeros(4), "gamma": jnp.zeros(4)}
    with pytest.warns(gradmc.RunWarning, match=r"block gamma \(ncg\): .*froze in warm-up.*'gibbs'"):
        # without the joint move or the switch pairs, which would move the block too (and hide the line, as they should)
        choice = {"gamma": "ncg", "joint": "none", "pairs": "off"}
        gradmc.sample(log_density, choice, init=init, space={"gamma": Binary(4)}, **RUN)
