"""A user's own model: plain log-density functions, pytree positions, named variables in
traces and ArviZ, built-in targets' names, and ``module:NAME`` specs for the command line.
"""

from __future__ import annotations

import re
import textwrap
from pathlib import Path
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gradmc
from gradmc.enumeration import enumerate_if_small
from gradmc.models import from_function, load_target, parse_space, resolve_target
from gradmc.spaces import Binary, Categorical, Real, Spin
from gradmc.testing import assert_moments_match, assert_tv_within_bound
from gradmc.trace import Trace
from gradmc.variables import Variables

# short runs: the run-health warnings about R-hat and ESS are expected here
pytestmark = pytest.mark.filterwarnings("ignore::gradmc.RunWarning")

# -- a user-written 10-D correlated Gaussian, as a plain function ------------------------------

MEAN = np.linspace(-1.0, 1.0, 10)
COV = 0.5 * np.eye(10) + 0.5  # unit variances, correlation 0.5
PRECISION = jnp.asarray(np.linalg.inv(COV), jnp.float32)


def gaussian_log_p(x):
    r = x - jnp.asarray(MEAN, jnp.float32)
    return -0.5 * r @ PRECISION @ r


@pytest.mark.parametrize("sampler, num_warmup, num_draws", [("nuts", 300, 500), ("mala", 500, 2000)])
def test_plain_function_samples_its_mean(sampler, num_warmup, num_draws):
    trace = gradmc.sample(
        gaussian_log_p,
        sampler,
        init=jnp.zeros(10),
        num_chains=4,
        num_warmup=num_warmup,
        num_draws=num_draws,
        seed=1,
        progress=False,
    )
    assert trace.target == "gaussian_log_p"
    assert trace.draws.shape == (4, num_draws, 10)
    assert_moments_match(trace.draws, mean=MEAN, p=0.01)
    assert list(trace.to_arviz().posterior.data_vars) == ["x"]


# -- pytree positions and named variables ------------------------------------------------------


def pytree_log_p(p):
    return -0.5 * (p["mu"] - 1.0) ** 2 - 2.0 * jnp.sum((p["theta"] + 1.0) ** 2)


PYTREE_INIT = {"mu": 0.0, "theta": jnp.zeros(3)}


@pytest.fixture(scope="module")
def pytree_trace():
    return gradmc.sample(
        pytree_log_p, "mala", init=PYTREE_INIT, num_chains=2, num_warmup=100, num_draws=100, progress=False
    )


def test_pytree_model_names_its_variables(pytree_trace, tmp_path):
    trace = pytree_trace
    assert trace.draws.shape == (2, 100, 4)
    named = trace.posterior()
    assert list(named) == ["mu", "theta"]
    assert named["mu"].shape == (2, 100) and named["theta"].shape == (2, 100, 3)
    np.testing.assert_allclose(named["theta"], trace.draws[..., 1:])  # ravel_pytree order: mu, then theta
    structured = trace.posterior(structured=True)
    assert isinstance(structured, dict) and structured["theta"].shape == (2, 100, 3)
    posterior = trace.to_arviz().posterior
    assert posterior["theta"].dims == ("chain", "draw", "theta_dim_0")
    assert posterior["mu"].dims == ("chain", "draw")
    assert trace.to_arviz(var_name="z").posterior["z"].shape == (2, 100, 4)  # the flat draws, as before
    import arviz as az

    back = az.from_netcdf(str(trace.save_netcdf(tmp_path / "run.nc")))
    np.testing.assert_allclose(back.posterior["theta"].values, named["theta"])


def test_bounded_memory_netcdf_writes_named_variables(tmp_path):
    import arviz as az

    trace = gradmc.sample(
        pytree_log_p,
        "mala",
        init=PYTREE_INIT,
        num_chains=2,
        num_warmup=10,
        num_draws=40,
        chunk_size=20,
        keep_draws=False,
        checkpoint=tmp_path / "ckpt",
        progress=False,
    )
    assert trace.draws is None
    posterior = az.from_netcdf(str(trace.save_netcdf(tmp_path / "run.nc"))).posterior
    assert posterior["theta"].dims == ("chain", "draw", "theta_dim_0")
    assert posterior["theta"].shape == (2, 40, 3) and posterior["mu"].shape == (2, 40)
    with pytest.raises(ValueError, match="kept no draws"):
        trace.posterior()


class Params(NamedTuple):
    loc: jax.Array
    scale: jax.Array


def test_namedtuple_tuple_and_scalar_positions():
    target = from_function(lambda p: -jnp.sum(p.loc**2) - p.scale**2, Params(jnp.zeros(2), 1.0))
    assert target.variables.names == ("loc", "scale") and target.space == Real(3)
    draws = np.arange(2 * 5 * 3, dtype=np.float32).reshape(2, 5, 3)
    named = target.variables.of_draws(draws)
    np.testing.assert_array_equal(named["scale"], draws[..., 2])
    trace = Trace("t", "s", draws, {"acceptance_rate": np.ones((2, 5))}, variables=target.variables)
    structured = trace.posterior(structured=True)
    assert isinstance(structured, Params) and structured.loc.shape == (2, 5, 2)
    assert from_function(lambda p: -(p[0] ** 2) - jnp.sum(p[1] ** 2), (0.0, jnp.zeros(2))).variables.names == (
        "x_0",
        "x_1",
    )
    scalar = from_function(lambda x: -(x**2), 0.5)
    assert scalar.space == Real(1) and scalar.variables.shapes == {"x": ()}
    matrix = from_function(lambda w: -jnp.sum(w**2), jnp.zeros((2, 3)))
    assert matrix.space == Real(6) and matrix.variables.shapes == {"x": (2, 3)}
    # a Target built from pytrees takes its init as a pytree too
    built = from_function(pytree_log_p, PYTREE_INIT)
    _, flat = resolve_target(built, init={"mu": 2.0, "theta": jnp.ones(3)})
    np.testing.assert_array_equal(flat, [2.0, 1.0, 1.0, 1.0])


# -- a user-written Potts energy on a categorical space -----------------------------------------

FIELD = jnp.asarray(np.random.default_rng(0).normal(scale=0.5, size=(4, 3)), jnp.float32)


def potts_ring(s):
    """Four one-hot sites on a ring: 0.8 per pair of equal neighbours, plus a field."""
    return 0.8 * jnp.sum(s * jnp.roll(s, 1, axis=0)) + jnp.sum(FIELD * s)


def test_user_potts_energy_with_a_discrete_gradient_sampler():
    trace = gradmc.sample(
        potts_ring,
        "gwg",
        space="categorical:3x4",
        num_chains=4,
        num_warmup=200,
        num_draws=2000,
        seed=3,
        progress=False,
    )
    assert trace.draws.shape == (4, 2000, 4, 3)
    exact = enumerate_if_small(potts_ring, Categorical(3, 4))
    assert_tv_within_bound(trace.draws, exact, p=0.01)


# -- built-in targets name their coordinates ----------------------------------------------------


def _fake_trace(target, num_chains=2, num_draws=3):
    keys = jax.random.split(jax.random.key(0), num_chains * num_draws)
    draws = np.asarray(jax.vmap(target.draw_initial)(keys)).reshape(num_chains, num_draws, *target.space.event_shape)
    stats = {"acceptance_rate": np.ones((num_chains, num_draws))}
    return Trace(target.name, "none", draws, stats, variables=target.variables)


def test_builtin_targets_name_their_coordinates():
    beta = _fake_trace(gradmc.target("logistic-ripley")).to_arviz().posterior["beta"]
    assert beta.dims == ("chain", "draw", "coefficient")
    assert list(beta.coords["coefficient"].values) == ["x1", "x2", "intercept"]
    ising = _fake_trace(gradmc.target("ising", side=3))
    spins = ising.to_arviz().posterior["spins"]
    assert spins.dims == ("chain", "draw", "row", "col") and spins.shape == (2, 3, 3, 3)
    np.testing.assert_array_equal(spins.values.reshape(2, 3, 9), ising.draws)
    potts = _fake_trace(gradmc.target("potts", side=2))
    labels = potts.posterior()["labels"]
    assert labels.shape == (2, 3, 2, 2)
    np.testing.assert_array_equal(labels.reshape(2, 3, 4), potts.draws.argmax(-1))


def test_variables_checks_its_dims():
    with pytest.raises(ValueError, match="has shape"):
        Variables.reshaped("b", (3,), dims=("a", "b"))
    with pytest.raises(ValueError, match="2 labels"):
        Variables.reshaped("b", (3,), dims=("a",), coords={"a": ["p", "q"]})
    with pytest.raises(TypeError, match="dict of name"):
        Variables(lambda x: x, (3,))


# -- bad inputs ---------------------------------------------------------------------------------


def test_bad_user_models_are_refused_clearly():
    with pytest.raises(TypeError, match="needs init= .* or space="):
        gradmc.sample(gaussian_log_p, "nuts")
    with pytest.raises(ValueError, match=r"must return a scalar .* shape \(10,\)"):
        gradmc.sample(lambda x: x**2, "nuts", init=jnp.zeros(10))
    with pytest.raises(TypeError, match="space= applies to a log-density function only"):
        gradmc.sample("banana", "nuts", space=Real(2))
    with pytest.raises(TypeError, match="pytree positions are for continuous models"):
        from_function(potts_ring, {"s": jnp.zeros((4, 3))}, space=Categorical(3, 4))
    with pytest.raises(ValueError, match=r"init has shape \(3,\)"):
        from_function(gaussian_log_p, jnp.zeros(3), space=Real(10))
    with pytest.raises(ValueError, match="outside the value set"):
        from_function(lambda s: jnp.sum(s), jnp.full(3, 0.5), space=Binary(3))
    with pytest.raises(TypeError, match=r"takes init as an array of shape \(2,\)"):
        gradmc.sample("banana", "nuts", init={"a": 0.0, "b": 0.0})
    with pytest.raises(TypeError, match="target must be"):
        gradmc.sample(3, "nuts")


@pytest.mark.parametrize("text, space", [("real:10", Real(10)), ("binary:100", Binary(100)), ("Spin:7", Spin(7))])
def test_parse_space(text, space):
    assert parse_space(text) == space


def test_parse_space_categorical_and_bad_text():
    assert parse_space("categorical:4x900") == Categorical(4, 900)
    for bad in ("categorical:4", "gaussian:3", "binary:x", "real:0", "binary"):
        with pytest.raises(ValueError, match="expected real:D"):
            parse_space(bad)


# -- module:NAME specs ---------------------------------------------------------------------------

MODEL_FILE = """
import jax.numpy as jnp

import gradmc


def log_p(x, shift=0.0):
    return -0.5 * jnp.sum((x - shift) ** 2)


def flips(s):
    return jnp.sum(s)


TARGET = gradmc.from_function(log_p, jnp.zeros(3), name="mine")
NOT_A_MODEL = 3
"""


@pytest.fixture
def model_file(tmp_path):
    path = tmp_path / "my_model.py"
    path.write_text(textwrap.dedent(MODEL_FILE))
    return path


def test_load_target_from_a_file(model_file, tmp_path):
    assert load_target(f"{model_file}:TARGET").name == "mine"
    plain = load_target(f"{model_file}:log_p", dim=5)
    assert plain.space == Real(5) and plain.name == "log_p"
    assert float(plain.logdensity_fn(jnp.ones(5))) == pytest.approx(-2.5)
    assert load_target(f"{model_file}:flips", space="binary:8").space == Binary(8)
    np.savez(tmp_path / "data.npz", shift=np.ones(5, np.float32))
    shifted = load_target(f"{model_file}:log_p", dim=5, data=tmp_path / "data.npz")
    assert float(shifted.logdensity_fn(jnp.ones(5))) == 0.0


def test_load_target_from_a_module(model_file, monkeypatch):
    monkeypatch.syspath_prepend(str(model_file.parent))
    assert load_target("my_model:log_p", space="real:2").space == Real(2)


def test_registered_names_take_precedence():
    assert load_target("banana").name == gradmc.target("banana").name


def test_a_file_defining_one_model_needs_no_name(tmp_path):
    path = tmp_path / "one.py"
    path.write_text("import jax.numpy as jnp\n\n\ndef log_p(x):\n    return -0.5 * jnp.sum(x**2)\n")
    target = load_target(str(path), dim=2)
    assert target.name == "log_p" and target.dim == 2


def test_load_target_refuses_bad_specs(model_file, tmp_path):
    with pytest.raises(ValueError, match="no such model file"):
        load_target(f"{tmp_path / 'absent.py'}:log_p", dim=3)
    with pytest.raises(ValueError, match="has no 'nope'; it defines TARGET, flips, log_p"):
        load_target(f"{model_file}:nope")
    with pytest.raises(ValueError, match="give its space with --dim D"):
        load_target(f"{model_file}:log_p")
    with pytest.raises(ValueError, match="cannot read the space"):
        load_target(f"{model_file}:log_p", space="categorical:4")
    with pytest.raises(ValueError, match="is a Target"):
        load_target(f"{model_file}:TARGET", dim=3)
    with pytest.raises(ValueError, match="its type is int"):
        load_target(f"{model_file}:NOT_A_MODEL")
    with pytest.raises(ValueError, match="name the model inside .*; it defines TARGET, flips, log_p"):
        load_target(str(model_file))
    with pytest.raises(ValueError, match="cannot import the module"):
        load_target("no_such_module_here:log_p", dim=2)
    with pytest.raises(ValueError, match="disagrees"):
        load_target(f"{model_file}:log_p", dim=3, space="real:4")
    with pytest.raises(ValueError, match="no such data file"):
        load_target(f"{model_file}:log_p", dim=3, data=tmp_path / "absent.npz")
    with pytest.raises(gradmc.UnknownNameError):
        load_target("no-such-target")


def test_a_log_density_that_changes_between_calls_is_refused():
    """Random constants drawn inside the function make each compilation a different density
    (the chains would stick at their starts without a word): refused, with the cure named.
    Constants drawn once outside it, and library functions with custom derivatives, pass."""
    rng = np.random.default_rng(0)
    weights = jnp.asarray(rng.normal(size=(5, 8)))
    gradmc.from_function(lambda x: jnp.sum(jax.nn.softplus(weights @ x)), space="binary:8")
    for drifting in (
        lambda x: jnp.sum(jnp.asarray(rng.normal(size=8)) * x),  # a captured array
        lambda x: float(rng.normal()) * jnp.sum(x),  # a literal
    ):
        with pytest.raises(ValueError, match="changes from one call to the next.*draw random constants once"):
            gradmc.from_function(drifting, space="binary:8")


def test_a_log_density_that_builds_a_cache_on_its_first_call_is_accepted():
    """TensorFlow Probability's bijectors (and so the Inference Gym's posteriors) compute more
    on their first call and cache it: the first trace differs from the second, and every
    later one equals the second. Such a function is a function of the position alone."""
    cache = {}

    def caching(x):
        if not cache:
            cache["scale"] = 0.5
            x = x + 0.0 * jnp.sin(x)  # work done on the first call only
        return -cache["scale"] * jnp.sum(x**2)

    target = gradmc.from_function(caching, jnp.zeros(3))
    assert float(target.logdensity_fn(jnp.ones(3))) == -1.5


def test_an_error_in_the_users_file_names_the_file_and_line(tmp_path, monkeypatch):
    """Code of the user's that fails while loading is reported as theirs: file, line, the
    exception's type and message (here numpy refusing to write into a JAX array)."""
    broken = tmp_path / "broken_model.py"
    code = [
        "import numpy as np",
        "import jax.numpy as jnp",
        "J = jnp.zeros((3, 3))",
        "np.fill_diagonal(np.asarray(J), 1)",
    ]
    broken.write_text("\n".join(code) + "\n")
    message = (
        r"loading .*broken_model.py failed"
        r" \(broken_model.py, line 4: np.fill_diagonal.*\): ValueError: .*read-only"
    )
    with pytest.raises(ValueError, match=message):
        load_target(f"{broken}:J", dim=3)
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ValueError, match=r"loading broken_model failed \(broken_model.py, line 4.*ValueError"):
        load_target("broken_model:J", dim=3)


# -- the "Bring your own model" page: every Python example runs -----------------------------------

PAGE = Path(__file__).resolve().parents[1] / "docs" / "own-model.md"
EXAMPLES = re.findall(r"```python\n(.*?)```", PAGE.read_text(), flags=re.S)


@pytest.mark.slow
@pytest.mark.parametrize("index", range(len(EXAMPLES)))
def test_own_model_page_examples_run(index, tmp_path, monkeypatch):
    code = EXAMPLES[index]
    if "numpyro" in code:
        pytest.importorskip("numpyro")
    monkeypatch.chdir(tmp_path)
    exec(compile(code, f"{PAGE.name} example {index + 1}", "exec"), {"__name__": f"own_model_example_{index}"})


def test_own_model_page_is_in_the_site():
    assert "own-model.md" in (PAGE.parents[1] / "mkdocs.yml").read_text()
    assert len(EXAMPLES) >= 6
