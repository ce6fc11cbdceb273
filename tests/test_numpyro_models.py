"""NumPyro models as targets: eight schools on the unconstrained space, constrained and
deterministic sites named in traces, discrete sites, and loading a model from a file.
"""

from __future__ import annotations

import sys
import textwrap

import jax
import numpy as np
import pytest

import gradmc
from gradmc.models import load_target

numpyro = pytest.importorskip("numpyro")
dist = pytest.importorskip("numpyro.distributions")

pytestmark = pytest.mark.filterwarnings("ignore::gradmc.RunWarning")

Y = np.array([28.0, 8.0, -3.0, 7.0, -1.0, 1.0, 18.0, 12.0])
SIGMA = np.array([15.0, 10.0, 16.0, 11.0, 9.0, 11.0, 10.0, 18.0])

SCHOOLS = """
import numpyro
import numpyro.distributions as dist


def eight_schools(sigma, y=None):
    mu = numpyro.sample("mu", dist.Normal(0.0, 5.0))
    tau = numpyro.sample("tau", dist.HalfCauchy(5.0))
    with numpyro.plate("school", len(sigma)):
        eta = numpyro.sample("eta", dist.Normal(0.0, 1.0))
        theta = numpyro.deterministic("theta", mu + tau * eta)
        numpyro.sample("obs", dist.Normal(theta, sigma), obs=y)
"""
namespace: dict = {}
exec(textwrap.dedent(SCHOOLS), namespace)
eight_schools = namespace["eight_schools"]


@pytest.fixture(scope="module")
def schools_target():
    return gradmc.from_numpyro(eight_schools, SIGMA, y=Y)


def test_eight_schools_gives_constrained_and_deterministic_sites(schools_target):
    target = schools_target
    assert target.space == gradmc.spaces.Real(10)
    assert target.variables.names == ("mu", "tau", "eta", "theta")
    trace = gradmc.sample(target, "nuts", num_chains=2, num_warmup=150, num_draws=150, seed=0, progress=False)
    posterior = trace.to_arviz().posterior
    assert posterior["tau"].dims == ("chain", "draw")
    assert float(posterior["tau"].min()) > 0.0
    assert posterior["theta"].dims == ("chain", "draw", "theta_dim_0")
    assert posterior.sizes["theta_dim_0"] == 8
    np.testing.assert_allclose(
        posterior["theta"].values,
        posterior["mu"].values[..., None] + posterior["tau"].values[..., None] * posterior["eta"].values,
        rtol=1e-4,
        atol=1e-4,
    )


def test_log_density_is_minus_numpyro_potential(schools_target):
    from jax.flatten_util import ravel_pytree
    from numpyro.infer.util import potential_energy

    x = schools_target.initial_position(jax.random.key(3))
    _, unravel = ravel_pytree({"eta": np.zeros(8, np.float32), "mu": np.float32(0), "tau": np.float32(0)})
    expected = -potential_energy(eight_schools, (SIGMA,), {"y": Y}, unravel(x))
    assert float(schools_target.logdensity_fn(x)) == pytest.approx(float(expected), rel=1e-5)


def test_discrete_sites_without_enumeration_are_named():
    def counts():
        n = numpyro.sample("n", dist.Poisson(3.0))
        numpyro.sample("y", dist.Normal(n, 1.0), obs=2.0)

    with pytest.raises(ValueError, match="latent site 'n' \\(Poisson\\)"):
        gradmc.from_numpyro(counts)

    def sequential():
        z = numpyro.sample("z", dist.Bernoulli(0.3), infer={"enumerate": "sequential"})
        m = numpyro.sample("m", dist.Normal(0.0, 1.0))
        numpyro.sample("y", dist.Normal(m + z, 1.0), obs=2.0)

    with pytest.raises(ValueError, match="latent site 'z'.*enumerate='sequential'"):
        gradmc.from_numpyro(sequential)


def test_enumerated_sites_are_summed_out():
    pytest.importorskip("funsor")
    from scipy.stats import norm

    def mixture():
        z = numpyro.sample("z", dist.Bernoulli(0.3), infer={"enumerate": "parallel"})
        m = numpyro.sample("m", dist.Normal(0.0, 1.0))
        numpyro.sample("y", dist.Normal(m + 3.0 * z, 1.0), obs=2.0)

    target = gradmc.from_numpyro(mixture)
    m = np.linspace(-3.0, 3.0, 5)
    exact = np.log(0.7 * norm.pdf(2.0, m, 1.0) + 0.3 * norm.pdf(2.0, m + 3.0, 1.0)) + norm.logpdf(m)
    got = jax.vmap(target.logdensity_fn)(m[:, None].astype(np.float32))
    np.testing.assert_allclose(got, exact, rtol=1e-5)


def test_from_numpyro_without_numpyro_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "numpyro", None)
    with pytest.raises(ImportError, match='pip install "gradmc\\[numpyro\\]"'):
        gradmc.from_numpyro(eight_schools, SIGMA, y=Y)


def test_load_target_finds_a_numpyro_model(tmp_path):
    path = tmp_path / "schools.py"
    path.write_text(textwrap.dedent(SCHOOLS))
    np.savez(tmp_path / "schools.npz", sigma=SIGMA, y=Y)
    target = load_target(f"{path}:eight_schools", data=tmp_path / "schools.npz")
    assert target.variables.names == ("mu", "tau", "eta", "theta")
    with pytest.raises(ValueError, match="is a NumPyro model"):
        load_target(f"{path}:eight_schools", dim=10, data=tmp_path / "schools.npz")
    with pytest.raises(ValueError, match="give its space with --dim D.*not a NumPyro model"):
        load_target(f"{path}:eight_schools")  # without its data it cannot run as a model
