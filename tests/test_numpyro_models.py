"""NumPyro models as targets: eight schools on the unconstrained space, constrained and
deterministic sites named in traces, discrete sites, and loading a model from a file.
"""

from __future__ import annotations

import sys
import textwrap

import jax
import jax.numpy as jnp
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
        n = numpyro.sample("n", dist.Poisson(3.0), infer={"max_value": 70000})
        numpyro.sample("y", dist.Normal(n, 1.0), obs=2.0)

    with pytest.raises(ValueError, match="latent site 'n' \\(Poisson\\) has unbounded support.*max_value"):
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


def test_sites_summed_out_beside_sampled_ones_give_the_marginal():
    """b is summed out and z sampled: the log density at (m, z) is
    log(0.7 N(1; m + 2z, 1) + 0.3 N(1; m + 1 + 2z, 1)) + log N(m; 0, 1) + log 0.5."""
    pytest.importorskip("funsor")
    from scipy.stats import norm

    def both_kinds():
        b = numpyro.sample("b", dist.Bernoulli(0.3), infer={"enumerate": "parallel"})
        z = numpyro.sample("z", dist.Bernoulli(0.5))
        m = numpyro.sample("m", dist.Normal(0.0, 1.0))
        numpyro.sample("y", dist.Normal(m + b + 2.0 * z, 1.0), obs=1.0)

    target = gradmc.from_numpyro(both_kinds)
    assert str(target.space) == "Product(m: Real(1), z: Binary(1))"
    m, z = np.meshgrid(np.linspace(-2.0, 2.0, 5), [0.0, 1.0])
    exact = np.log(0.7 * norm.pdf(1.0, m + 2 * z, 1.0) + 0.3 * norm.pdf(1.0, m + 1 + 2 * z, 1.0))
    exact += norm.logpdf(m) + np.log(0.5)
    positions = np.stack([m.ravel(), z.ravel()], -1).astype(np.float32)
    np.testing.assert_allclose(jax.vmap(target.logdensity_fn)(positions), exact.ravel(), rtol=1e-5)


def outlying_shift(y):
    """y_n ~ N(m + [n < s], 1), or N(5, 1) where o_n = 1 (prior 0.3): s sampled, o summed out."""
    m = numpyro.sample("m", dist.Normal(0.0, 1.0))
    s = numpyro.sample("s", dist.DiscreteUniform(0, 4))
    with numpyro.plate("n", y.shape[0]):
        o = numpyro.sample("o", dist.Bernoulli(0.3), infer={"enumerate": "parallel"})
        numpyro.sample("y", dist.Normal(jnp.where(o == 1, 5.0, m + (jnp.arange(y.shape[0]) < s)), 1.0), obs=y)


@pytest.mark.slow
def test_sampled_and_summed_out_sites_together_are_exact():
    """The change s is sampled, the outlier flags o summed out and drawn back: p(s | y),
    E[m | y] and p(o_n = 1 | y), exact by quadrature over m, match the draws."""
    pytest.importorskip("funsor")
    from scipy.special import logsumexp
    from scipy.stats import norm

    from gradmc.enumeration import ExactDistribution
    from gradmc.testing import assert_moments_match, assert_tv_within_bound

    y = np.array([3.0, 3.3, 5.3, 2.6, 3.4, 4.1])  # p(o_n = 1 | y) from 0.03 to 0.87
    m = np.linspace(-6.0, 6.0, 4001)[:, None, None]  # grid over m, then s, then n
    shift = (np.arange(y.size) < np.arange(5)[:, None])[None]
    normal, outlier = np.log(0.7) + norm.logpdf(y, m + shift, 1.0), np.log(0.3) + norm.logpdf(y, 5.0, 1.0)
    joint = norm.logpdf(m[..., 0]) + np.log(0.2) + logsumexp(np.stack(np.broadcast_arrays(normal, outlier)), 0).sum(-1)
    weights = np.exp(joint - joint.max())
    weights /= weights.sum()
    p_s, m_mean = weights.sum(0), weights.sum(1) @ m[:, 0, 0]
    m_var = weights.sum(1) @ m[:, 0, 0] ** 2 - m_mean**2
    p_o = np.einsum("ms,msn->n", weights, np.exp(outlier - np.logaddexp(normal, outlier)))

    trace = gradmc.sample(gradmc.from_numpyro(outlying_shift, y), "auto", num_draws=2000, seed=1, progress=False)
    posterior = trace.posterior()
    assert posterior["o"].shape == (4, 2000, y.size) and posterior["o"].dtype.kind == "i"
    assert_tv_within_bound(posterior["s"][..., None].astype(float), ExactDistribution(np.arange(5.0), 1, p_s, 0.0))
    assert_moments_match(np.asarray(posterior["m"])[..., None], [m_mean], var=[m_var], p=0.01)
    assert_moments_match(posterior["o"].astype(float), p_o, var=p_o * (1 - p_o), p=0.01)


@pytest.mark.slow
def test_enumerated_sites_are_drawn_back_into_the_posterior():
    """z is summed out of the log density and drawn back from p(z | m, y) for each draw of m:
    its draws follow the exact p(z = 1 | y) = 0.3 N(2; 3, 2) / (0.3 N(2; 3, 2) + 0.7 N(2; 0, 2))."""
    pytest.importorskip("funsor")
    from scipy.stats import norm

    from gradmc.testing import assert_moments_match

    def mixture():
        z = numpyro.sample("z", dist.Bernoulli(0.3), infer={"enumerate": "parallel"})
        m = numpyro.sample("m", dist.Normal(0.0, 1.0))
        numpyro.sample("y", dist.Normal(m + 3.0 * z, 1.0), obs=2.0)

    trace = gradmc.sample(gradmc.from_numpyro(mixture), "nuts", num_warmup=300, num_draws=1000, seed=2, progress=False)
    z = trace.posterior()["z"]
    assert z.shape == (4, 1000) and set(np.unique(z)) <= {0, 1}
    np.testing.assert_array_equal(trace.posterior()["z"], z)  # the same draws at every call
    one, zero = 0.3 * norm.pdf(2.0, 3.0, np.sqrt(2.0)), 0.7 * norm.pdf(2.0, 0.0, np.sqrt(2.0))
    p = one / (one + zero)
    assert_moments_match(z[..., None].astype(float), np.array([p]), np.array([[p * (1 - p)]]))
    assert "z" in trace.to_arviz().posterior


def test_summed_out_sites_numpyro_cannot_draw_back_are_left_out_with_the_fix():
    """NumPyro's infer_discrete does not handle a site marked for enumeration inside scan: the
    posterior names the sites, leaves them out and says how gradmc samples them instead."""
    pytest.importorskip("funsor")
    from numpyro.contrib.control_flow import scan

    def hmm(y):
        mu = numpyro.sample("mu", dist.Normal(0.0, 3.0).expand([2]).to_event(1))

        def transition(previous, y_t):
            x = numpyro.sample("x", dist.Bernoulli(jnp.where(previous == 1, 0.9, 0.1)), infer={"enumerate": "parallel"})
            numpyro.sample("y", dist.Normal(mu[x], 1.0), obs=y_t)
            return x, None

        scan(transition, jnp.array(0), y)

    target = gradmc.from_numpyro(hmm, jnp.array([-1.0, 2.0, 1.5]))
    draws = np.zeros((1, 2, 2), np.float32)
    for _ in range(2):  # tried once, then left out at once
        with pytest.warns(gradmc.RunWarning, match="could not draw the summed-out sites 'x'.*without infer="):
            posterior = target.variables.of_draws(draws, key=jax.random.key(0))
        assert list(posterior) == ["mu"] and posterior["mu"].shape == (1, 2, 2)


def test_from_numpyro_without_numpyro_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "numpyro", None)
    with pytest.raises(ImportError, match='pip install -e "\\.\\[numpyro\\]" in the gradmc repository'):
        gradmc.from_numpyro(eight_schools, SIGMA, y=Y)


def test_load_target_finds_a_numpyro_model(tmp_path):
    path = tmp_path / "schools.py"
    path.write_text(textwrap.dedent(SCHOOLS))
    np.savez(tmp_path / "schools.npz", sigma=SIGMA, y=Y)
    target = load_target(f"{path}:eight_schools", data=tmp_path / "schools.npz")
    assert target.variables.names == ("mu", "tau", "eta", "theta")
    with pytest.raises(ValueError, match="is a NumPyro model"):
        load_target(f"{path}:eight_schools", dim=10, data=tmp_path / "schools.npz")
    with pytest.raises(ValueError, match="needs 'sigma', which --data did not give.*pass its data with --data"):
        load_target(f"{path}:eight_schools")  # without its data it cannot run as a model


A_MIX = np.array([[1.2, -0.8, 0.5], [0.4, 0.9, -1.0]])
B_MIX = np.array([[0.0, 1.0, -1.0], [-0.7, 0.5, 0.6]])
P_Z = np.array([0.2, 0.5, 0.3])


def switches_and_label():
    """Three 0/1 switches and a 3-valued label shift a 2-D Gaussian's mean; the discrete
    sites' joint is their prior exactly (the Gaussian is the only other site).
    """
    g = numpyro.sample("g", dist.Bernoulli(0.3).expand([3]).to_event(1))
    z = numpyro.sample("z", dist.Categorical(probs=jnp.asarray(P_Z)))
    numpyro.sample("mu", dist.Normal(jnp.asarray(A_MIX) @ g + jnp.asarray(B_MIX)[:, z], 0.8).to_event(1))


@pytest.mark.slow
def test_discrete_sites_are_sampled_exactly():
    import itertools

    from gradmc.enumeration import ExactDistribution
    from gradmc.spaces import Binary, Ordinal, Product, Real
    from gradmc.testing import assert_moments_match, assert_tv_within_bound

    target = gradmc.from_numpyro(switches_and_label)
    assert target.space == Product({"mu": Real(2), "g": Binary(3), "z": Ordinal([0.0, 1.0, 2.0], 1)})
    trace = gradmc.sample(target, "auto", num_warmup=500, num_draws=2000, seed=2, progress=False)
    assert trace.sampler == "mu=jittered-hmc, g=ncg, z=gibbs"  # locs[z]: no gradient in z
    posterior = trace.posterior()
    assert posterior["g"].dtype.kind == "i" and posterior["z"].shape == (4, 2000)
    probs = np.zeros((3,) * 4)
    for g in itertools.product((0, 1), repeat=3):
        for z in range(3):
            probs[(*g, z)] = np.prod(np.where(np.array(g) == 1, 0.3, 0.7)) * P_Z[z]
    exact = ExactDistribution(np.arange(3.0), 4, probs.ravel(order="F"), 0.0)
    draws = np.concatenate([posterior["g"], posterior["z"][..., None]], axis=-1).astype(float)
    assert_tv_within_bound(draws, exact, p=0.01)
    mean = A_MIX @ np.full(3, 0.3) + B_MIX @ P_Z
    var = 0.64 + (A_MIX**2) @ np.full(3, 0.21) + (B_MIX**2) @ P_Z - (B_MIX @ P_Z) ** 2
    assert_moments_match(posterior["mu"], mean, var=var, p=0.01)


CENTRES = np.array([-2.0, 0.0, 2.0])
X_PLATE = np.array([-2.1, 0.3, 1.7])
W_PLATE = np.array([0.3, 0.3, 0.4])


def shifted_mixture(x):
    """Three labels in a plate pick each datum's centre, all shifted by mu ~ N(0, 1)."""
    mu = numpyro.sample("mu", dist.Normal(0.0, 1.0))
    with numpyro.plate("data", len(x)):
        z = numpyro.sample("z", dist.Categorical(probs=jnp.asarray(W_PLATE)))
        numpyro.sample("x", dist.Normal(jnp.asarray(CENTRES)[z] + mu, 1.0), obs=x)


@pytest.mark.slow
def test_a_plate_of_indexed_labels_moves_by_blocked_gibbs_exactly():
    """Given z, x - centres[z] ~ N(0, I + 11ᵀ) with mu integrated out, so p(z | x) is exact over
    the 27 label triples, and mu | x, z ~ N(sum(x - centres[z]) / 4, 1/4)."""
    import itertools

    from scipy.stats import multivariate_normal

    from gradmc.enumeration import ExactDistribution
    from gradmc.testing import assert_moments_match, assert_tv_within_bound

    target = gradmc.from_numpyro(shifted_mixture, X_PLATE)
    assert list(target.metadata["site_terms"]) == ["z"]
    trace = gradmc.sample(target, "auto", num_warmup=500, num_draws=2000, seed=4, progress=False)
    assert (
        trace.sampler == "mu=jittered-hmc (summing out z), z=plate-gibbs"
    )  # centres[z]: no gradient, but a plate of independent labels
    probs, means, second = np.zeros((3,) * 3), 0.0, 0.0
    cov = np.eye(3) + np.ones((3, 3))
    for z in itertools.product(range(3), repeat=3):
        residual = X_PLATE - CENTRES[list(z)]
        probs[z] = np.prod(W_PLATE[list(z)]) * multivariate_normal.pdf(residual, cov=cov)
    probs /= probs.sum()
    for z in itertools.product(range(3), repeat=3):
        m = np.sum(X_PLATE - CENTRES[list(z)]) / 4.0
        means, second = means + probs[z] * m, second + probs[z] * (m**2 + 0.25)
    posterior = trace.posterior()
    assert_tv_within_bound(
        posterior["z"].astype(float), ExactDistribution(np.arange(3.0), 3, probs.ravel(order="F"), 0.0)
    )
    assert_moments_match(posterior["mu"][..., None], np.array([means]), var=np.array([second - means**2]), p=0.01)


PAIR = np.array([-2.0, 2.0])
W_PAIR = np.array([0.4, 0.6])


def two_label_mixture(x):
    """Two labels in a plate index each datum's centre (``PAIR[z]``): 0/1 sites the model
    cannot take as floats."""
    mu = numpyro.sample("mu", dist.Normal(0.0, 1.0))
    with numpyro.plate("data", len(x)):
        z = numpyro.sample("z", dist.Categorical(probs=jnp.asarray(W_PAIR)))
        numpyro.sample("x", dist.Normal(jnp.asarray(PAIR)[z] + mu, 1.0), obs=x)


X_GRID = np.array([[-1.9, 0.4], [2.2, -0.1]])


def grid_of_labels(x):
    """A label per cell of a (group, item) grid, in two nested plates, picks its datum's
    centre, all shifted by mu ~ N(0, 1)."""
    mu = numpyro.sample("mu", dist.Normal(0.0, 1.0))
    with numpyro.plate("group", 2, dim=-2), numpyro.plate("item", 2, dim=-1):
        z = numpyro.sample("z", dist.Bernoulli(0.3))
        numpyro.sample("x", dist.Normal(jnp.asarray(PAIR)[z] + mu, 1.0), obs=x)


def test_labels_in_nested_plates_move_by_blocked_gibbs_exactly():
    """As the one-plate case: given z, x - PAIR[z] (flat) ~ N(0, I + 11ᵀ) with mu integrated
    out, so p(z | x) is exact over the 16 grids."""
    import itertools

    from scipy.stats import multivariate_normal

    from gradmc.enumeration import ExactDistribution
    from gradmc.testing import assert_tv_within_bound

    target = gradmc.from_numpyro(grid_of_labels, X_GRID)
    trace = gradmc.sample(target, "auto", num_warmup=300, num_draws=2000, seed=1, progress=False)
    assert trace.sampler == "mu=jittered-hmc (summing out z), z=plate-gibbs"
    probs = np.zeros((2,) * 4)
    for z in itertools.product(range(2), repeat=4):
        residual = X_GRID.ravel() - PAIR[list(z)]
        probs[z] = np.prod(np.where(np.array(z) == 1, 0.3, 0.7)) * multivariate_normal.pdf(
            residual, cov=np.eye(4) + np.ones((4, 4))
        )
    draws = trace.posterior()["z"].reshape(4, 2000, 4).astype(float)  # entries in C order, as z[g, n] ravels
    exact = ExactDistribution(np.arange(2.0), 4, (probs / probs.sum()).ravel(order="F"), 0.0)
    assert_tv_within_bound(draws, exact, p=0.01)


def test_two_valued_labels_that_index_an_array_enter_as_integers():
    from scipy.stats import norm

    from gradmc.spaces import Binary, Product, Real

    target = gradmc.from_numpyro(two_label_mixture, X_PLATE)  # a TypeError from PAIR[z] before
    assert target.space == Product({"mu": Real(1), "z": Binary(3)})
    # labels drawn from a Categorical, which the mode shift may swap; 0/1 switches (Bernoulli) are not
    assert target.metadata[gradmc.mode_shift.LABELS] == {"z"}
    assert target.metadata["index_parts"] == {"z"}  # no gradient in z: auto's probes skip it
    switches = gradmc.from_numpyro(switches_and_label)
    assert switches.metadata[gradmc.mode_shift.LABELS] == {"z"}
    assert switches.metadata["index_parts"] == {"z"}  # g enters as floats (A @ g), z as an index
    z = np.array([1, 0, 1])
    expected = norm.logpdf(0.3) + np.sum(np.log(W_PAIR[z])) + np.sum(norm.logpdf(X_PLATE, PAIR[z] + 0.3, 1.0))
    np.testing.assert_allclose(target.logdensity_fn(jnp.array([0.3, *z], jnp.float32)), expected, rtol=1e-5)


@pytest.mark.slow
def test_two_valued_labels_that_index_an_array_are_sampled_exactly():
    """As the three-label plate: p(z | x) over the 8 label triples with mu integrated out."""
    import itertools

    from scipy.stats import multivariate_normal

    from gradmc.enumeration import ExactDistribution
    from gradmc.testing import assert_tv_within_bound

    trace = gradmc.sample(
        gradmc.from_numpyro(two_label_mixture, X_PLATE), "auto", num_warmup=500, num_draws=2000, seed=4, progress=False
    )
    assert trace.sampler == "mu=jittered-hmc (summing out z), z=plate-gibbs"
    probs = np.zeros((2,) * 3)
    for z in itertools.product(range(2), repeat=3):
        probs[z] = np.prod(W_PAIR[list(z)]) * multivariate_normal.pdf(X_PLATE - PAIR[list(z)], cov=np.eye(3) + 1.0)
    probs /= probs.sum()
    exact = ExactDistribution(np.arange(2.0), 3, probs.ravel(order="F"), 0.0)
    assert_tv_within_bound(trace.posterior()["z"].astype(float), exact)


ANSWERS = np.array([[1, 1, 0], [1, 1, 1], [0, 0, 1], [0, 0, 0], [1, 0, 1], [0, 1, 0]])
CLASS_PRIORS = np.array([[1.0, 3.0], [3.0, 1.0]])  # Beta(a, b) of each class's answer probabilities


def latent_classes(answers):
    """A latent class model as NumPyro users write it: one class per person, a 0/1 site of shape
    (N, 1) in a plate at dim -2, which picks the answer probabilities by comparison."""
    w = numpyro.sample("w", dist.Beta(2.0, 2.0))
    shape = (2, answers.shape[1])
    a, b = (jnp.broadcast_to(jnp.asarray(CLASS_PRIORS)[:, i : i + 1], shape) for i in (0, 1))
    p = numpyro.sample("p", dist.Beta(a, b).to_event(2))
    with numpyro.plate("person", answers.shape[0], dim=-2):
        z = numpyro.sample("z", dist.Bernoulli(w))
        with numpyro.plate("item", answers.shape[1], dim=-1):
            numpyro.sample("answer", dist.Bernoulli(jnp.where(z == 1, p[1], p[0])), obs=answers)


def test_latent_classes_compared_with_are_read_per_person_and_not_as_linear():
    """The class's prior (Bernoulli(w)) gives the log density a gradient in z, and its Hessian
    vanishes, yet flipping classes changes the answers' terms, which the gradient does not see:
    z is not linear (its conditionals cannot be read from the gradient) but compared. Its plate
    at dim -2, with a broadcast last axis, gives each person's terms, so "auto" gives it
    plate-gibbs (the slow test below runs it)."""
    target = gradmc.from_numpyro(latent_classes, ANSWERS)
    assert set(target.metadata["site_terms"]) == {"z"}
    shapes = gradmc.composed.part_shapes(target)
    assert "z" not in shapes.linear and "z" in shapes.compared


def spike_and_slab_selected(X, y):
    """A spike and slab as NumPyro users write it: each switch selects its coefficient's prior
    scale by comparison, between two constants."""
    with numpyro.plate("p", X.shape[1]):
        gamma = numpyro.sample("gamma", dist.Bernoulli(0.2))
        beta = numpyro.sample("beta", dist.Normal(0.0, jnp.where(gamma == 1, 2.0, 0.1)))
    numpyro.sample("y", dist.Normal(X @ beta, 1.0), obs=y)


def test_switches_selecting_constants_hold_no_labels_and_classes_do():
    """Both models compare with 0/1 sites that "auto" sums out of the continuous moves. Flipping a
    latent class moves a person's answers from one class's probabilities to the other's (the
    gradient changes in entries of both rows of p): labels, which a mode shift may exchange, so
    warm-up judges one. Flipping a switch changes only its own coefficient's gradient (the prior
    scale, a constant either way): no labels, no mode shift to try."""
    from gradmc.composed import composed_sampler

    classes = composed_sampler(gradmc.from_numpyro(latent_classes, ANSWERS))
    assert classes.options["joint"]["when"] == "judged"
    X = np.random.default_rng(1).normal(size=(30, 4)).astype(np.float32)
    y = X @ np.array([1.5, 0.0, -1.0, 0.0], np.float32)
    switches = composed_sampler(gradmc.from_numpyro(spike_and_slab_selected, X, y))
    assert "summing out gamma" in switches.name and "joint" not in switches.options


@pytest.mark.slow
def test_latent_classes_are_exact():
    """Beta priors are conjugate to the Bernoulli answers and classes, so p(z | answers) is exact
    over the 2^6 class assignments: prod over classes and items of B(a + yes, b + no) / B(a, b),
    times B(2 + ones, 2 + zeros) / B(2, 2); E[w | z] = (2 + ones) / (4 + N)."""
    import itertools

    from scipy.special import betaln

    from gradmc.enumeration import ExactDistribution
    from gradmc.testing import assert_moments_match, assert_tv_within_bound

    people = ANSWERS.shape[0]
    probs, w_mean, w_second = np.zeros((2,) * people), 0.0, 0.0
    for z in itertools.product(range(2), repeat=people):
        z = np.array(z)
        log_p = betaln(2 + z.sum(), 2 + people - z.sum())
        for k in range(2):
            yes = ANSWERS[z == k].sum(0)
            log_p += np.sum(betaln(CLASS_PRIORS[k, 0] + yes, CLASS_PRIORS[k, 1] + (z == k).sum() - yes))
        probs[tuple(z)] = np.exp(log_p)
    probs /= probs.sum()
    for z in itertools.product(range(2), repeat=people):
        a, b = 2 + sum(z), 2 + people - sum(z)
        w_mean += probs[z] * a / (a + b)
        w_second += probs[z] * a * (a + 1) / ((a + b) * (a + b + 1))
    trace = gradmc.sample(
        gradmc.from_numpyro(latent_classes, ANSWERS), "auto", num_warmup=500, num_draws=2000, seed=5, progress=False
    )
    assert trace.sampler == "p+w=jittered-hmc (summing out z), z=plate-gibbs"
    posterior = trace.posterior()
    exact = ExactDistribution(np.arange(2.0), people, probs.ravel(order="F"), 0.0)
    assert_tv_within_bound(posterior["z"][..., 0].astype(float), exact)
    assert_moments_match(posterior["w"][..., None], np.array([w_mean]), var=np.array([w_second - w_mean**2]), p=0.01)


RAIN = np.array([0.3, 2.9, 3.4, 0.1, 2.5])
LEVELS = np.array([0.5, 3.0])
STAY = 0.8


def daily_regimes(rain):
    """A two-regime HMM written as users write it, one Bernoulli site per day in a Python loop;
    the regimes' levels are shifted by mu ~ N(0, 1)."""
    mu = numpyro.sample("mu", dist.Normal(0.0, 1.0))
    states = [numpyro.sample("s0", dist.Bernoulli(0.5))]
    for t in range(1, len(rain)):
        states.append(numpyro.sample(f"s{t}", dist.Bernoulli(jnp.where(states[-1] == 1, STAY, 1 - STAY))))
    numpyro.sample("rain", dist.Normal(jnp.asarray(LEVELS)[jnp.stack(states)] + mu, 1.0), obs=rain)


def plated_regimes(rain):
    """The same HMM written over a plate: the states one site of a plate of days, uniform there,
    the chain's transitions a factor."""
    mu = numpyro.sample("mu", dist.Normal(0.0, 1.0))
    with numpyro.plate("day", len(rain)):
        s = numpyro.sample("s", dist.Bernoulli(0.5))
        numpyro.sample("rain", dist.Normal(jnp.asarray(LEVELS)[s] + mu, 1.0), obs=rain)
    same = s[1:] == s[:-1]
    numpyro.factor("markov", jnp.sum(jnp.where(same, np.log(STAY), np.log(1 - STAY))))


def scanned_regimes(rain):
    """The same HMM written with NumPyro's scan, as its HMM examples write it (the states unmarked)."""
    from numpyro.contrib.control_flow import scan

    mu = numpyro.sample("mu", dist.Normal(0.0, 1.0))

    def day(previous, rain_t):  # previous = -1 before the first day
        s = numpyro.sample("s", dist.Bernoulli(jnp.where(previous < 0, 0.5, jnp.where(previous == 1, STAY, 1 - STAY))))
        numpyro.sample("rain", dist.Normal(jnp.asarray(LEVELS)[s] + mu, 1.0), obs=rain_t)
        return s, None

    scan(day, jnp.array(-1), rain)


def test_states_written_in_scan_are_one_site_read_as_a_chain():
    target = gradmc.from_numpyro(scanned_regimes, RAIN)
    assert str(target.space) == "Product(mu: Real(1), s: Binary(5))"
    assert gradmc.composed.composed_sampler(target).name == "mu=jittered-hmc, s=ffbs (shared transitions)"


def test_labels_of_a_grid_coupled_by_a_potts_factor_are_not_read_as_a_chain():
    """Flattened row by row, each pixel's label is coupled with its neighbours along the row
    and with the pixels a row away: not a chain, though the pairs one to three apart say so."""

    def segmentation(y):
        mu = numpyro.sample("mu", dist.Normal(jnp.array([-1.0, 0.0, 1.0]), 2.0).to_event(1))
        with numpyro.plate("pixel", 16):
            z = numpyro.sample("z", dist.Categorical(jnp.ones(3) / 3))
            numpyro.sample("y", dist.Normal(mu[z], 0.7), obs=y)
        grid = z.reshape(4, 4)
        numpyro.factor("potts", 0.8 * (jnp.sum(grid[1:] == grid[:-1]) + jnp.sum(grid[:, 1:] == grid[:, :-1])))

    target = gradmc.from_numpyro(segmentation, np.linspace(-2.0, 2.0, 16))
    assert gradmc.composed.chain_parts(target) == {}
    assert gradmc.composed.composed_sampler(target).name == "mu=jittered-hmc, z=gibbs"


def test_states_over_a_plate_coupled_by_a_markov_factor_are_read_as_a_chain():
    """Flipping every state keeps which neighbours agree, so a check of the plate's independence
    that moved all of them at once saw no coupling, and plate-gibbs drew each state as if alone."""
    target = gradmc.from_numpyro(plated_regimes, RAIN)
    assert target.metadata["site_terms"] == {}
    assert gradmc.composed.composed_sampler(target).name == "mu=jittered-hmc, s=ffbs (shared transitions)"


def test_two_states_of_a_plate_coupled_by_a_factor_are_not_independent():
    """A factor on whether two states agree is unchanged when every state flips, and when
    either both or neither lie in a moved half: the check's random halves split them."""

    def paired(rain):
        mu = numpyro.sample("mu", dist.Normal(0.0, 1.0))
        with numpyro.plate("day", len(rain)):
            s = numpyro.sample("s", dist.Bernoulli(0.5))
            numpyro.sample("rain", dist.Normal(jnp.asarray(LEVELS)[s] + mu, 1.0), obs=rain)
        numpyro.factor("twins", jnp.where(s[2] == s[4], 1.0, 0.0))

    assert gradmc.from_numpyro(paired, RAIN).metadata["site_terms"] == {}


def test_sites_written_one_per_day_are_one_block_read_as_a_chain():
    from gradmc.spaces import Binary

    days = len(RAIN)
    target = gradmc.from_numpyro(daily_regimes, RAIN)
    assert [target.space.parts[f"s{t}"] for t in range(days)] == [Binary(1)] * days
    # 0/1 states taken as indices (levels[s]) name the regimes: labels, which the mode shift may swap
    assert target.metadata["labels"] == target.metadata["index_parts"] == {f"s{t}" for t in range(days)}
    assert gradmc.composed.composed_sampler(target).name == "mu=jittered-hmc, s0..s4=ffbs (shared transitions)"


@pytest.mark.slow
@pytest.mark.parametrize(
    "model, chosen",
    [
        (daily_regimes, "mu=jittered-hmc, s0..s4=ffbs (shared transitions)"),
        (plated_regimes, "mu=jittered-hmc, s=ffbs (shared transitions)"),
        (scanned_regimes, "mu=jittered-hmc, s=ffbs (shared transitions)"),
    ],
)
def test_an_hmm_moves_its_states_together_as_a_chain_exactly(model, chosen):
    """The five states, written one site per day, over a plate or in scan, are one block, read as a chain
    and drawn by FFBS; with mu integrated out, rain - levels[s] ~ N(0, I + 11ᵀ), so p(s | rain) is
    exact over the 32 regime paths, and mu | rain, s ~ N(sum(rain - levels[s]) / 6, 1/6)."""
    import itertools

    from scipy.stats import multivariate_normal

    from gradmc.enumeration import ExactDistribution
    from gradmc.testing import assert_moments_match, assert_tv_within_bound

    days = len(RAIN)
    trace = gradmc.sample(
        gradmc.from_numpyro(model, RAIN), "auto", num_warmup=500, num_draws=2000, seed=3, progress=False
    )
    assert trace.sampler == chosen
    probs, means, second = np.zeros((2,) * days), 0.0, 0.0
    cov = np.eye(days) + np.ones((days, days))
    for s in itertools.product(range(2), repeat=days):
        stays = np.sum(np.diff(s) == 0)
        residual = RAIN - LEVELS[list(s)]
        probs[s] = STAY**stays * (1 - STAY) ** (days - 1 - stays) * multivariate_normal.pdf(residual, cov=cov)
    probs /= probs.sum()
    for s in itertools.product(range(2), repeat=days):
        m = np.sum(RAIN - LEVELS[list(s)]) / (days + 1)
        means, second = means + probs[s] * m, second + probs[s] * (m**2 + 1 / (days + 1))
    posterior = trace.posterior()
    paths = posterior["s"] if "s" in posterior else np.stack([posterior[f"s{t}"] for t in range(days)], axis=-1)
    paths = paths.astype(float)
    assert_tv_within_bound(paths, ExactDistribution(np.arange(2.0), days, probs.ravel(order="F"), 0.0))
    assert_moments_match(posterior["mu"][..., None], np.array([means]), var=np.array([second - means**2]), p=0.01)


@pytest.mark.slow
def test_labels_coupled_across_the_plate_get_single_site_gibbs():
    def coupled(x):
        mu = numpyro.sample("mu", dist.Normal(0.0, 1.0))
        with numpyro.plate("data", len(x)):
            z = numpyro.sample("z", dist.Categorical(probs=jnp.asarray(W_PLATE)))
            numpyro.sample("x", dist.Normal(jnp.asarray(CENTRES)[z] + mu, 1.0), obs=x)
        numpyro.factor("balance", -0.5 * jnp.sum(z) ** 2)  # couples every label with every other

    target = gradmc.from_numpyro(coupled, X_PLATE)
    assert target.metadata["site_terms"] == {}
    trace = gradmc.sample(target, "auto", num_warmup=20, num_draws=20, progress=False)
    assert trace.sampler == "mu=jittered-hmc, z=gibbs"
    with pytest.raises(ValueError, match="plate-gibbs needs the log density's terms of each site"):
        gradmc.sample(target, {"z": "plate-gibbs"}, num_warmup=20, num_draws=20, progress=False)


def test_discrete_sites_that_cannot_be_sampled_are_named():
    def moving_support():
        n = numpyro.sample("n", dist.Categorical(probs=jnp.ones(50) / 50))
        numpyro.sample("s", dist.DiscreteUniform(0, n))

    with pytest.raises(ValueError, match="latent site 's' \\(DiscreteUniform\\) has a support that depends"):
        gradmc.from_numpyro(moving_support)

    def impossible(seen):
        scale = numpyro.sample("scale", dist.HalfNormal(1.0))
        n = numpyro.sample("n", dist.Binomial(3, 0.5))  # at most 3 trials, and 5 successes were seen
        numpyro.sample("seen", dist.Binomial(n, 0.5), obs=seen)
        numpyro.sample("noise", dist.Normal(0.0, scale), obs=0.1)

    with pytest.raises(ValueError, match="no finite log density for the continuous sites.*largest values \\(n\\)"):
        gradmc.from_numpyro(impossible, 5.0)


TOTALS, SEEN = np.array([2, 3]), np.array([1.0, 2.0])


def thinned_counts():
    """Counts k_i ~ Binomial(n_i, 0.4) with one total n_i per unit, of which Binomial(k_i, 0.5) were seen."""
    numpyro.sample("mu", dist.Normal(0.0, 1.0))
    with numpyro.plate("unit", 2):
        k = numpyro.sample("k", dist.Binomial(jnp.asarray(TOTALS), 0.4))
        numpyro.sample("seen", dist.Binomial(k, 0.5), obs=SEEN)
    numpyro.deterministic("total", jnp.sum(k))


def test_a_binomial_site_with_one_total_count_per_entry_is_exact():
    """NumPyro enumerates no support that differs between entries: the site takes every value
    some entry allows, each entry's others have log density −∞. p(k | seen) is the product of
    the units' Binomial(n_i, 0.4) x Binomial(seen_i; k_i, 0.5), over k_i = seen_i..n_i.
    """
    from scipy.stats import binom

    from gradmc.enumeration import ExactDistribution
    from gradmc.spaces import Ordinal
    from gradmc.testing import assert_tv_within_bound

    target = gradmc.from_numpyro(thinned_counts)
    assert target.space.parts["k"] == Ordinal([0.0, 1.0, 2.0, 3.0], 2)
    base = np.asarray(target.draw_initial(jax.random.key(0)))
    moved = base.copy()
    moved[1] = 3.0 - moved[1]  # the first count: named by it, not by the deterministic total it changes too
    assert target.variables.changed_entries(base, moved[None]) == [("k", "k[0]")]
    # mu does not meet k: the mode shift's trial, left out, would only cost compilation
    trace = gradmc.sample(target, {"joint": None}, num_warmup=300, num_draws=2000, seed=0, progress=False)
    values = np.arange(4)
    unit = [binom.pmf(values, n, 0.4) * binom.pmf(y, values, 0.5) for n, y in zip(TOTALS, SEEN, strict=True)]
    probs = np.outer(*[u / u.sum() for u in unit])
    exact = ExactDistribution(values.astype(float), 2, probs.ravel(order="F"), 0.0)
    assert_tv_within_bound(trace.posterior()["k"].astype(float), exact, p=0.01)


def test_a_model_that_needs_concrete_values_of_its_sites_says_what_to_change():
    columns = np.arange(12.0).reshape(4, 3)  # a NumPy array, indexed by a sampled site

    def numpy_indexing():
        k = numpyro.sample("k", dist.Categorical(probs=jnp.ones(3) / 3))
        numpyro.sample("y", dist.Normal(columns[:, k], 1.0), obs=np.zeros(4))

    def python_branch():
        scale = numpyro.sample("scale", dist.HalfNormal(1.0))
        numpyro.sample("y", dist.Normal(0.0, 1.0 if scale > 1 else 2.0), obs=0.5)

    for model, error in ((numpy_indexing, "TracerArrayConversionError"), (python_branch, "TracerBoolConversionError")):
        with pytest.raises(
            ValueError,
            match=f"'{model.__name__}' cannot run with its latent sites as traced JAX values \\({error}\\).*jnp",
        ):
            gradmc.from_numpyro(model)


# sixty yearly event counts whose rate drops part of the way through (made up for the test)
YEARLY_COUNTS = np.array([4, 5, 4, 1, 0, 4, 3, 4, 0, 6, 3, 3, 4, 0, 2, 6, 3, 3, 5, 4, 5, 3, 1, 4, 4, 1, 5, 5, 3, 4,
                 2, 5, 2, 2, 3, 4, 2, 1, 3, 2, 1, 1, 1, 1, 1, 3, 0, 0, 1, 0, 1, 1, 0, 0, 3, 1, 0, 3, 2, 2])  # fmt: skip


def change_point(counts):
    T = len(counts)
    early = numpyro.sample("early", dist.Exponential(0.5))
    late = numpyro.sample("late", dist.Exponential(0.5))
    s = numpyro.sample("s", dist.DiscreteUniform(0, T - 1))
    rate = jnp.where(jnp.arange(T) < s, early, late)
    numpyro.sample("counts", dist.Poisson(rate), obs=counts)


@pytest.mark.slow
@pytest.mark.parametrize("window", [None, 4])
def test_a_change_point_is_exact(window):
    """Exponential(0.5) = Gamma(1, 0.5) rates are conjugate to the Poisson counts, so
    p(s | y) ∝ Π over the two segments of Γ(1 + S) / (0.5 + n)^(1 + S) (S the segment's
    total, n its length), and early | s, y ~ Gamma(1 + S_early, 0.5 + s). With a window,
    the change point's Gibbs draws from 9 years around the current one, with its MH test;
    its chain runs from seed 5, as seed 3 falls in the test's 1 % tail for it (z = 3.2 on the
    early rate's mean; 0.9, 0.9 and -0.4 at seeds 4-6, and -0.7 at ten times the draws).
    """
    from scipy.special import gammaln

    from gradmc.enumeration import ExactDistribution
    from gradmc.testing import assert_moments_match, assert_tv_within_bound

    T = YEARLY_COUNTS.size
    s = np.arange(T)
    early_total = np.concatenate([[0], np.cumsum(YEARLY_COUNTS)[:-1]])
    late_total = YEARLY_COUNTS.sum() - early_total
    log_p = gammaln(1 + early_total) - (1 + early_total) * np.log(0.5 + s)
    log_p += gammaln(1 + late_total) - (1 + late_total) * np.log(0.5 + T - s)
    probs = np.exp(log_p - log_p.max())
    probs /= probs.sum()
    shape, rate = 1 + early_total, 0.5 + s
    mean = probs @ (shape / rate)
    var = probs @ (shape * (shape + 1) / rate**2) - mean**2

    target = gradmc.from_numpyro(change_point, YEARLY_COUNTS)
    choice = "auto" if window is None else {"s": gradmc.sampler("gibbs", radius=window)}
    trace = gradmc.sample(target, choice, num_draws=2000, seed=3 if window is None else 5, progress=False)
    assert trace.sampler == "early+late=jittered-hmc, s=gibbs" + ("" if window is None else f" (window {window})")
    posterior = trace.posterior()
    exact = ExactDistribution(s.astype(float), 1, probs, 0.0)
    assert_tv_within_bound(posterior["s"][..., None].astype(float), exact, p=0.01)
    assert_moments_match(np.asarray(posterior["early"])[..., None], [mean], var=[var], p=0.01)


def two_change_points(counts):
    """Three rates and two change points, ordered by a factor (each drawn over its widest range)."""
    T = len(counts)
    rates = numpyro.sample("rates", dist.Exponential(0.5).expand([3]).to_event(1))
    s1 = numpyro.sample("s1", dist.DiscreteUniform(1, T - 2))
    s2 = numpyro.sample("s2", dist.DiscreteUniform(2, T - 1))
    numpyro.factor("order", jnp.where(s1 < s2, 0.0, -jnp.inf))
    t = jnp.arange(T)
    rate = jnp.where(t < s1, rates[0], jnp.where(t < s2, rates[1], rates[2]))
    numpyro.sample("counts", dist.Poisson(rate), obs=counts)


@pytest.mark.slow
def test_two_change_points_ordered_by_a_factor_are_exact():
    """Gamma(1, 0.5) rates are conjugate to each segment's counts, so p(s1, s2 | y) is exact over
    the ordered pairs: each segment contributes Γ(1 + S) / (0.5 + n)^(1 + S) (S its total, n its length)."""
    from scipy.special import gammaln

    from gradmc.enumeration import ExactDistribution
    from gradmc.testing import assert_tv_within_bound

    counts = YEARLY_COUNTS[:60]
    T, totals = counts.size, np.concatenate([[0], np.cumsum(counts)])

    def segment(a, b):
        total = totals[b] - totals[a]
        return gammaln(1 + total) - (1 + total) * np.log(0.5 + b - a)

    log_p = np.full((T, T), -np.inf)
    for s1 in range(1, T - 1):
        for s2 in range(s1 + 1, T):
            log_p[s1, s2] = segment(0, s1) + segment(s1, s2) + segment(s2, T)
    probs = np.exp(log_p - log_p.max())
    probs /= probs.sum()
    target = gradmc.from_numpyro(two_change_points, counts)
    posterior = gradmc.sample(target, "auto", num_draws=2000, seed=2, progress=False).posterior()
    for name, marginal in (("s1", probs.sum(1)), ("s2", probs.sum(0))):
        exact = ExactDistribution(np.arange(float(T)), 1, marginal, 0.0)
        assert_tv_within_bound(posterior[name][..., None].astype(float), exact, p=0.005)


# -- a latent count of unbounded support ----------------------------------------------------------

DETECTIONS = np.array([7.0, 4.0, 9.0, 6.0])  # y_i ~ Binomial(N, 0.3), N ~ Poisson(lam), lam ~ Gamma(3, 0.2)


def latent_count(y, max_value=None):
    lam = numpyro.sample("lam", dist.Gamma(3.0, 0.2))
    n = numpyro.sample("N", dist.Poisson(lam), infer={} if max_value is None else {"max_value": max_value})
    numpyro.sample("y", dist.Binomial(n, 0.3), obs=y)


@pytest.mark.slow
def test_a_count_cut_below_its_posterior_warns():
    """A Poisson site becomes a Count from 0 to a bound; its posterior (mean 21) lies beyond a
    bound of 22 set by hand, so the draws reach it and the run says so.
    """
    from gradmc.spaces import Count, Product, Real

    assert gradmc.from_numpyro(latent_count, DETECTIONS).space.parts["N"].high > 100  # from the prior's reach
    target = gradmc.from_numpyro(latent_count, DETECTIONS, max_value=22)
    assert target.space == Product({"lam": Real(1), "N": Count(1, 22)})
    with pytest.warns(gradmc.RunWarning, match=r"N reached 22, the largest value of Count\(0..22, d=1\)"):
        trace = gradmc.sample(target, "auto", num_warmup=200, num_draws=200, seed=0, progress=False)
    assert trace.sampler == "lam=jittered-hmc, N=ordinal-ncg"
    assert trace.posterior()["N"].dtype.kind == "i"


@pytest.mark.slow
def test_a_latent_poisson_count_is_exact():
    """Gamma–Poisson conjugacy sums lam out: p(N | y) ∝ NegBin(N; 3, 0.2/1.2) Π Binomial(y_i; N,
    0.3), and lam | N ~ Gamma(3 + N, 1.2). The NumPyro Binomial's total count is the sampled N.
    """
    from scipy.stats import binom, nbinom

    from gradmc.enumeration import ExactDistribution
    from gradmc.testing import assert_moments_match, assert_tv_within_bound

    target = gradmc.from_numpyro(latent_count, DETECTIONS)
    values = target.space.parts["N"].values.astype(float)
    log_p = nbinom.logpmf(values, 3.0, 0.2 / 1.2) + binom.logpmf(DETECTIONS[:, None], values, 0.3).sum(0)
    probs = np.exp(log_p - log_p.max())
    assert probs[-1] / probs.sum() < 1e-12  # the bound from the prior holds the whole posterior
    probs /= probs.sum()
    trace = gradmc.sample(target, "auto", num_warmup=500, num_draws=2500, seed=1, progress=False)
    assert trace.warnings == []
    posterior = trace.posterior()
    assert_tv_within_bound(posterior["N"][..., None].astype(float), ExactDistribution(values, 1, probs, 0.0), p=0.01)
    mean_n, var_n = probs @ values, probs @ values**2 - (probs @ values) ** 2
    mean, var = (3.0 + mean_n) / 1.2, (3.0 + mean_n + var_n) / 1.2**2
    assert_moments_match(posterior["lam"][..., None], np.array([mean]), var=np.array([var]), p=0.01)


@pytest.mark.slow
def test_a_count_summed_out_as_a_binomial_total_is_exact():
    """The same count, marked for enumeration as a Categorical over 0..80 with the Poisson's
    probabilities (NumPyro enumerates no unbounded support): summed out of the log density
    for NUTS on lam and drawn back per draw, with the Binomial's total count a traced value
    in both, where NumPyro's support check would fail under tracing."""
    pytest.importorskip("funsor")
    from scipy.stats import binom, nbinom

    from gradmc.enumeration import ExactDistribution
    from gradmc.testing import assert_moments_match, assert_tv_within_bound

    values = np.arange(81.0)

    def summed_count(y):
        lam = numpyro.sample("lam", dist.Gamma(3.0, 0.2))
        logits = dist.Poisson(lam).log_prob(jnp.asarray(values))
        n = numpyro.sample("N", dist.Categorical(logits=logits), infer={"enumerate": "parallel"})
        with numpyro.plate("visit", y.shape[0]):
            numpyro.sample("y", dist.Binomial(n, 0.3), obs=y)

    trace = gradmc.sample(
        gradmc.from_numpyro(summed_count, DETECTIONS), "auto", num_warmup=500, num_draws=2500, seed=1, progress=False
    )
    assert trace.sampler == "nuts" and trace.warnings == []
    log_p = nbinom.logpmf(values, 3.0, 0.2 / 1.2) + binom.logpmf(DETECTIONS[:, None], values, 0.3).sum(0)
    probs = np.exp(log_p - log_p.max())
    probs /= probs.sum()
    posterior = trace.posterior()
    assert_tv_within_bound(posterior["N"][..., None].astype(float), ExactDistribution(values, 1, probs, 0.0), p=0.01)
    mean_n, var_n = probs @ values, probs @ values**2 - (probs @ values) ** 2
    mean, var = (3.0 + mean_n) / 1.2, (3.0 + mean_n + var_n) / 1.2**2
    assert_moments_match(posterior["lam"][..., None], np.array([mean]), var=np.array([var]), p=0.01)


@pytest.mark.slow
def test_an_n_mixture_starts_where_its_counts_exceed_the_data():
    """Prior draws of the counts fall below what the sites' detections require (a zero
    density): NumPyro's start for the rates is found with the counts at their largest values,
    and each chain's start raises its counts until the density is finite.
    """
    detections = np.array([[9.0, 7.0], [12.0, 10.0], [8.0, 11.0]])

    def n_mixture(y):
        lam = numpyro.sample("lam", dist.Gamma(2.0, 1.0))  # counts of about 2, far below the detections
        with numpyro.plate("site", y.shape[0]):
            n = numpyro.sample("N", dist.Poisson(lam))
            with numpyro.plate("visit", y.shape[1], dim=-2):
                numpyro.sample("y", dist.Binomial(n, 0.5), obs=y.T)

    target = gradmc.from_numpyro(n_mixture, detections)
    starts = jax.vmap(target.draw_initial)(jax.random.split(jax.random.key(0), 4))
    assert np.all(np.isfinite(np.asarray(jax.vmap(target.logdensity_fn)(starts))))
    counts = np.asarray(starts)[:, target.space.slices["N"]]
    assert np.all(counts >= detections.max(axis=1))


def test_sites_with_an_improper_prior_start_as_numpyro_starts_them():
    """ImproperUniform gives a support and no prior draw: the sites start uniformly in (-2, 2)
    on the unconstrained scale, as NumPyro's own initialisation does, and the factor alone
    sets the posterior: mu ~ N((1, -1), I), and log sigma ~ N(0, 0.5^2) (sigma on its support)."""
    from gradmc.testing import assert_moments_match

    def improper():
        mu = numpyro.sample("mu", dist.ImproperUniform(dist.constraints.real, (), (2,)))
        sigma = numpyro.sample("sigma", dist.ImproperUniform(dist.constraints.positive, (), ()))
        # the density of log sigma, less the Jacobian that NumPyro adds for sigma's positive support
        numpyro.factor("prior", -0.5 * jnp.sum((mu - jnp.array([1.0, -1.0])) ** 2) - 2 * jnp.log(sigma) ** 2)
        numpyro.factor("jacobian", -jnp.log(sigma))

    trace = gradmc.sample(gradmc.from_numpyro(improper), "nuts", num_warmup=300, num_draws=1000, seed=1, progress=False)
    posterior = trace.posterior()
    assert_moments_match(posterior["mu"], np.array([1.0, -1.0]), var=np.ones(2), p=0.01)
    assert_moments_match(np.log(posterior["sigma"])[..., None], np.array([0.0]), var=np.array([0.25]), p=0.01)
