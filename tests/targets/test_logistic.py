"""Bayesian logistic-regression targets: vendored data, model, reference posterior."""

import gzip
import hashlib
from importlib import resources

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gradmc.registry as registry
from gradmc.targets import logistic

DATA = resources.files("gradmc") / "data" / "logistic"
DIMS = {"australian": 15, "german": 25, "heart": 14, "pima": 8, "ripley": 3, "caravan": 86}
ROWS = {"australian": 690, "german": 1000, "heart": 270, "pima": 532, "ripley": 250, "caravan": 5822}


def test_dimensions_and_rows():
    assert {n: d for n, (d, _) in logistic.DATASETS.items()} == DIMS
    for name, dim in DIMS.items():
        target = registry.target(f"logistic-{name}")
        assert target.dim == dim and target.metadata["num_data"] == ROWS[name]
        assert target.per_datum.num_data == ROWS[name]


def _published_sha256():
    """SHA-256 of each published CSV, recorded beside the vendored files (``data/logistic/SHA256SUMS``)."""
    lines = DATA.joinpath("SHA256SUMS").read_text().splitlines()
    return {name.removesuffix(".csv"): digest for digest, name in (line.split() for line in lines if line.strip())}


@pytest.mark.parametrize("name", sorted(DIMS))
def test_vendored_data_identical_to_published_csv(name):
    """gunzip of the vendored file gives the published CSV byte for byte (same SHA-256)."""
    text = gzip.decompress(DATA.joinpath(f"{name}.csv.gz").read_bytes())
    assert hashlib.sha256(text).hexdigest() == _published_sha256()[name]
    header, *rows = text.decode().splitlines()
    assert header.split(",") == [f"x{i}" for i in range(1, DIMS[name])] + ["label"]
    assert len(rows) == ROWS[name]


def test_design_matrix_standardised_with_intercept():
    features, labels = logistic.load_dataset("pima")
    design = logistic.design_matrix(features)
    np.testing.assert_allclose(design[:, :-1].mean(0), 0.0, atol=1e-12)
    np.testing.assert_allclose(design[:, :-1].std(0, ddof=1), 1.0, rtol=1e-12)
    assert np.all(design[:, -1] == 1.0)
    assert set(np.unique(labels)) == {0, 1}


def test_logdensity_matches_formula_and_per_datum_model():
    """log N(w; 0, I) + sum_i [y_i log s(x_i.w) + (1 - y_i) log(1 - s(x_i.w))] (up to a constant)."""
    target = registry.target("logistic-heart")
    features, labels = logistic.load_dataset("heart")
    x = logistic.design_matrix(features)
    w = np.random.default_rng(0).normal(size=target.dim) * 0.3
    p = 1.0 / (1.0 + np.exp(-x @ w))
    expected = -0.5 * w @ w + np.sum(labels * np.log(p) + (1 - labels) * np.log1p(-p))
    np.testing.assert_allclose(float(target.logdensity_fn(jnp.asarray(w, jnp.float32))), expected, rtol=1e-5)

    pd = target.per_datum
    per_datum = jax.vmap(pd.loglik_fn, (None, 0))(jnp.asarray(w, jnp.float32), pd.data)
    total = pd.logprior_fn(jnp.asarray(w, jnp.float32)) + per_datum.sum()
    np.testing.assert_allclose(float(total), expected, rtol=1e-5)
    grad = jax.grad(target.logdensity_fn)(jnp.asarray(w, jnp.float32))
    np.testing.assert_allclose(np.asarray(grad), -w + x.T @ (labels - p), rtol=1e-4, atol=1e-4)


def test_logdensity_finite_far_from_mode():
    """The stable y z - log(1 + e^z) form stays finite for huge weights."""
    target = registry.target("logistic-ripley")
    w = jnp.array([300.0, -300.0, 50.0])
    value, grad = jax.value_and_grad(target.logdensity_fn)(w)
    assert np.isfinite(float(value)) and np.all(np.isfinite(np.asarray(grad)))


@pytest.mark.parametrize("name", sorted(DIMS))
def test_reference_posterior_stored_and_converged(name):
    ref = logistic.load_reference(name)
    assert ref is not None, "run scripts/compute_logistic_reference.py"
    assert ref["rhat_max"] < 1.01
    assert len(ref["mean"]) == len(ref["sd"]) == DIMS[name]
    assert ref["settings"]["num_chains"] >= 4
    assert np.all(np.asarray(ref["mcse_mean"]) < 0.05 * np.asarray(ref["sd"]))
    truth = registry.target(f"logistic-{name}").truth
    np.testing.assert_allclose(truth.mean, ref["mean"])
    np.testing.assert_allclose(np.sqrt(truth.variance), ref["sd"])


def test_reference_mean_is_near_posterior_mode():
    """Sanity check of the reference independent of NUTS: for N = 532 the posterior is close
    to Gaussian, so its mean lies within a fraction of a posterior sd of the MAP."""
    target = registry.target("logistic-pima", dtype="float32")
    ref = logistic.load_reference("pima")
    grad = jax.jit(jax.grad(target.logdensity_fn))
    hess = jax.jit(jax.hessian(target.logdensity_fn))
    w = jnp.zeros(target.dim)
    for _ in range(20):  # Newton's method
        w = w - jnp.linalg.solve(hess(w), grad(w))
    sd = np.sqrt(np.diag(np.linalg.inv(-np.asarray(hess(w)))))
    assert np.all(np.abs(np.asarray(w) - ref["mean"]) < 0.2 * sd)
    np.testing.assert_allclose(ref["sd"], sd, rtol=0.1)


def test_synthetic_factory():
    a = registry.target("logistic-synthetic", num_data=200, num_features=4, seed=3)
    b = registry.target("logistic-synthetic", num_data=200, num_features=4, seed=3)
    assert a.dim == 5 and a.metadata["num_data"] == 200
    w = jnp.ones(5) * 0.1
    assert float(a.logdensity_fn(w)) == float(b.logdensity_fn(w))
    c = registry.target("logistic-synthetic", num_data=200, num_features=4, seed=4)
    assert float(a.logdensity_fn(w)) != float(c.logdensity_fn(w))


def test_bad_input():
    with pytest.raises(ValueError, match="unknown logistic-regression data set"):
        logistic.load_dataset("iris")
    with pytest.raises(ValueError, match="constant"):
        logistic.design_matrix(np.ones((5, 2)))
    with pytest.raises(ValueError, match="labels must be 0 or 1"):
        logistic.logistic_target("x", np.ones((3, 2)), np.array([0, 1, 2]))
    with pytest.raises(ValueError, match="dtype"):
        registry.target("logistic-pima", dtype="float16")
    with pytest.raises(ValueError, match="num_data"):
        registry.target("logistic-synthetic", num_data=1)
