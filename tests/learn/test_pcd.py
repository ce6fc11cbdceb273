"""Persistent contrastive divergence (gradmc.learn.pcd) and the Table 1 data sampler.

* PCD's gradient estimate is unbiased for the exact likelihood gradient (model
  expectations by enumeration) when the buffer is at equilibrium: z-test over runs.
* PCD on a 3x3-torus Ising model (d = 9, 512 states) recovers J within a tolerance that
  shrinks as the data set grows, and agrees with the exact maximum-likelihood estimate
  (exact-gradient optimisation) within the spread of independent PCD runs.
* The Table 1 data sampler (independent block-Gibbs chains) matches exact moments on a
  4x4 torus; the transfer-matrix bond correlation matches enumeration.
* Table 1's {0, 1} coding is the spin model, its NCG with ε is the spin NCG with 4ε, and its
  block-Gibbs Hessian is 8J; the l1-MLE floor (``l1_mle``) meets the exact KKT conditions.
"""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
import scipy.optimize
from scipy.stats import norm
from scipy.stats import t as student_t

from gradmc.enumeration import enumerate_target, positions, value_indices
from gradmc.experiments.rhodes_learning import (
    CODINGS,
    exact_bond_correlation,
    ising_logdensity,
    ising_logdensity_binary,
    ising_samples,
    l1_mle,
    symmetric,
)
from gradmc.learn import pcd
from gradmc.spaces import Binary, Spin
from gradmc.targets.lattice import periodic_adjacency
from gradmc.testing import assert_moments_match

D = 9
J_STAR = 0.2 * periodic_adjacency(3)
SPACE = Spin(D)
UPPER = np.triu_indices(D, 1)


@pytest.fixture(scope="module")
def exact():
    return enumerate_target(lambda s: s @ jnp.asarray(J_STAR) @ s, SPACE)


def _off_diagonal(J):
    return np.asarray(J) * (1 - np.eye(D))


def mle(data):
    """Exact maximum-likelihood J (L-BFGS on the enumerated negative log-likelihood)."""
    nll = jax.jit(jax.value_and_grad(pcd.exact_negative_log_likelihood(ising_logdensity, SPACE, data)))

    def fun(x):
        value, grad = nll(jnp.asarray(x.reshape(D, D), jnp.float32))
        return float(value), np.asarray(grad, np.float64).ravel()

    res = scipy.optimize.minimize(fun, np.zeros(D * D), jac=True, method="L-BFGS-B", options={"gtol": 1e-7})
    return _off_diagonal(symmetric(res.x.reshape(D, D)))


# ----------------------------------------------------------------------------- bad input


def _learner(**kw):
    opts = dict(num_steps=2, batch_size=10, buffer_size=20)
    opts.update(kw)
    return pcd.PCD(ising_logdensity, SPACE, pcd.kernel("ncg"), **opts)


def test_bad_input():
    data = np.ones((30, D), np.float32)
    G = jnp.zeros((D, D))
    with pytest.raises(ValueError, match="outside the value set"):
        pcd.fit(_learner(), G, np.zeros((30, D)), key=jax.random.key(0), num_updates=1)
    with pytest.raises(ValueError, match="mismatched dimensions"):
        pcd.fit(_learner(), G, np.ones((30, D + 1)), key=jax.random.key(0), num_updates=1)
    with pytest.raises(ValueError, match="mismatched dimensions"):
        pcd.fit(_learner(), jnp.zeros((D + 2, D + 2)), data, key=jax.random.key(0), num_updates=1)
    with pytest.raises(ValueError, match="K"):
        _learner(num_steps=0)
    with pytest.raises(ValueError, match="buffer_size"):
        _learner(batch_size=50, buffer_size=20)
    with pytest.raises(ValueError, match="discrete space"):
        pcd.PCD(ising_logdensity, object(), pcd.kernel("ncg"), 1)
    with pytest.raises(ValueError, match="no option"):
        pcd.kernel("ncg", radius=2)
    with pytest.raises(ValueError, match="needs M="):
        pcd.kernel("pavg")


def test_divergence_names_the_update():
    """θ rises by exactly 1 per update (SGD on h(θ) = −θ); f is NaN once θ > 2.5, so the
    loss of update 4 (θ = 3) is the first non-finite one."""

    def f(theta, s):
        return jnp.where(theta > 2.5, jnp.nan, 0.0) + 0.0 * jnp.sum(s)

    learner = pcd.PCD(
        f,
        Binary(3),
        pcd.kernel("gibbs"),
        1,
        batch_size=2,
        buffer_size=4,
        optimizer=optax.sgd(1.0),
        regulariser=lambda th: -th,
    )
    with pytest.raises(pcd.DivergenceError, match="diverged at update 4 of 10"):
        pcd.fit(
            learner, jnp.float32(0.0), np.ones((5, 3)), key=jax.random.key(0), num_updates=10, every=3, progress=False
        )


def test_random_subset_is_uniform():
    """The buffer minibatch (Floyd's algorithm): distinct indices, every 3-subset of range(7)
    equally likely — chi-square test over 35 cells at p = 0.01 — and n = k a permutation."""
    from itertools import combinations

    from scipy.stats import chi2

    n, k, draws = 7, 3, 35_000
    subsets = np.sort(
        np.asarray(jax.vmap(lambda key: pcd.random_subset(key, n, k))(jax.random.split(jax.random.key(0), draws))),
        axis=1,
    )
    assert np.all(np.diff(subsets, axis=1) > 0)
    cells = {c: i for i, c in enumerate(combinations(range(n), k))}
    counts = np.bincount([cells[tuple(s)] for s in subsets.tolist()], minlength=len(cells))
    expected = draws / len(cells)
    assert np.sum((counts - expected) ** 2 / expected) < chi2.ppf(0.99, len(cells) - 1)
    assert sorted(np.asarray(pcd.random_subset(jax.random.key(1), 50, 50)).tolist()) == list(range(50))
    with pytest.raises(ValueError, match="k <= n"):
        pcd.random_subset(jax.random.key(0), 3, 4)


# ----------------------------------------------------------------------------- gradient estimate


@pytest.mark.parametrize("kernel", ["ncg", "block-gibbs"])
def test_gradient_estimate_unbiased(exact, kernel):
    """With an exact buffer and a valid kernel (NCG; block Gibbs with the current model's
    Hessian through pcd.cholesky_preconditioner, as model-specific PAVG) keeping p
    stationary, one PCD step with SGD(lr 1) moves G by minus an unbiased estimate of the
    exact likelihood gradient."""
    runs, batch = 200, 50
    chosen = {
        "ncg": pcd.kernel("ncg", step_size=0.5),
        "block-gibbs": pcd.kernel("block-gibbs", step_size=10.0, M=lambda G: 2.0 * symmetric(G)),
    }
    data = np.asarray(exact.sample(jax.random.key(1), 2000))
    G = jnp.asarray(J_STAR, jnp.float32)
    exact_grad = np.asarray(jax.grad(pcd.exact_negative_log_likelihood(ising_logdensity, SPACE, data))(G))
    buffers = np.asarray(exact.sample(jax.random.key(2), runs * batch)).reshape(runs, batch, D)
    learner = pcd.PCD(
        ising_logdensity, SPACE, chosen[kernel], 3, batch_size=batch, buffer_size=batch, optimizer=optax.sgd(1.0)
    )
    res = pcd.fit(
        learner,
        jnp.broadcast_to(G, (runs, D, D)),
        data,
        key=jax.random.key(3),
        num_updates=1,
        num_runs=runs,
        buffer=buffers,
        progress=False,
    )
    estimates = np.asarray(G - res.params)[:, UPPER[0], UPPER[1]]  # (runs, 36)
    z = (estimates.mean(0) - exact_grad[UPPER]) / (estimates.std(0, ddof=1) / np.sqrt(runs))
    threshold = norm.ppf(1 - 0.01 / (2 * z.size))
    assert np.all(np.abs(z) < threshold), (np.abs(z).max(), threshold)


# ----------------------------------------------------------------------------- recovery


def _stat_tolerance(exact, n, p=0.01, draws=20000):
    """q_{1-p} of ‖Ĵ − J*‖_F (off-diagonal, both triangles) under the MLE's asymptotic law
    N(0, F⁻¹/n), F the exact Fisher information of the 36 pair parameters (enumeration)."""
    S = np.asarray(positions(SPACE, value_indices(SPACE, 0, 2**D)), np.float64)
    phi = 2.0 * S[:, UPPER[0]] * S[:, UPPER[1]]
    probs = exact.probs
    mean = probs @ phi
    fisher = (phi * probs[:, None]).T @ phi - np.outer(mean, mean)
    L = np.linalg.cholesky(np.linalg.inv(fisher) / n)
    err = np.random.default_rng(0).standard_normal((draws, len(mean))) @ L.T
    return float(np.quantile(np.sqrt(2.0 * np.sum(err**2, axis=1)), 1 - p))


def _pcd_runs(data, runs=4, updates=1500):
    learner = pcd.PCD(
        ising_logdensity,
        SPACE,
        pcd.kernel("block-gibbs", step_size=100.0, M=lambda G: 2.0 * symmetric(G)),
        2,
        batch_size=100,
        buffer_size=500,
        optimizer=optax.adam(optax.cosine_decay_schedule(2e-2, updates, 0.01)),
    )
    res = pcd.fit(
        learner,
        jnp.zeros((runs, D, D)),
        data,
        key=jax.random.key(4),
        num_updates=updates,
        num_runs=runs,
        progress=False,
    )
    return _off_diagonal(symmetric(res.params))


@pytest.mark.slow
def test_recovery_tolerance_shrinks_and_matches_exact_mle(exact):
    tolerances = []
    for n in (500, 8000):
        data = np.asarray(exact.sample(jax.random.key(n), n))
        J_runs = _pcd_runs(data)
        R = len(J_runs)
        J_mle = mle(data)
        # PCD's own noise: the spread of independent runs
        spread = np.sqrt(np.sum(J_runs.var(0, ddof=1)))
        tol = _stat_tolerance(exact, n) + 3.0 * spread
        tolerances.append(tol)
        errors = np.linalg.norm(J_runs - J_STAR, axis=(1, 2))
        assert np.all(errors < tol), (n, errors, tol)
        # agreement with the exact-gradient estimate, entrywise t-test over runs (Bonferroni)
        diff = J_runs[:, UPPER[0], UPPER[1]] - J_mle[UPPER]
        t = diff.mean(0) / (diff.std(0, ddof=1) / np.sqrt(R))
        assert np.all(np.abs(t) < student_t.ppf(1 - 0.01 / (2 * t.size), R - 1)), (n, np.abs(t).max())
    assert tolerances[1] < tolerances[0]


# ----------------------------------------------------------------------------- Table 1 data


def test_transfer_matrix_bond_correlation():
    en = enumerate_target(lambda s: s @ jnp.asarray(0.2 * periodic_adjacency(4)) @ s, Spin(16))
    assert abs(exact_bond_correlation(4, 0.2) - en.cov[0, 1]) < 1e-10


def test_data_sampler_matches_enumeration():
    """Independent block-Gibbs chains (the Table 1 data sampler) on the 4x4 torus at the
    paper's strength: means and covariances within MCSE of exact enumeration."""
    J = 0.2 * periodic_adjacency(4)
    en = enumerate_target(lambda s: s @ jnp.asarray(J) @ s, Spin(16))
    draws = ising_samples(J, 2000, jax.random.key(5), num_steps=300)
    assert_moments_match(draws.reshape(4, 500, 16), mean=en.mean, cov=en.cov, max_corr_dim=16)


def test_binary_coding_is_the_spin_model_with_four_times_the_step():
    """The authors' {0, 1} coding: same f, NCG flip log-odds with ε equal the spin NCG's with
    4ε (why the paper's step sizes are {0, 1} quantities), and ∇²f = 8J for block Gibbs."""
    from gradmc.discrete import ncg

    G = jax.random.normal(jax.random.key(0), (D, D)) * 0.3
    s = jnp.where(jax.random.uniform(jax.random.key(1), (D,)) < 0.5, -1.0, 1.0)
    x = (s + 1.0) / 2.0
    assert abs(float(ising_logdensity_binary(G, x)) - float(ising_logdensity(G, s))) < 1e-5

    def flip_log_odds(position, f, values, eps):
        a, b = ncg.coefficients(ncg.init(position, f), eps)
        other = values[0] + values[1] - position
        return a * other + b * other**2 - (a * position + b * position**2)

    for eps in (0.2, 0.5, 2.0):
        binary = flip_log_odds(x, lambda v: ising_logdensity_binary(G, v), (0.0, 1.0), eps)
        spin = flip_log_odds(s, lambda v: ising_logdensity(G, v), (-1.0, 1.0), 4 * eps)
        np.testing.assert_allclose(np.asarray(binary), np.asarray(spin), rtol=1e-5, atol=1e-5)
    hessian = jax.hessian(lambda v: ising_logdensity_binary(G, v))(x)
    assert CODINGS["binary"].scale ** 2 * 2.0 == 8.0  # ∇²f = scale² × the spin Hessian 2J
    np.testing.assert_allclose(np.asarray(hessian), 8.0 * np.asarray(symmetric(G)), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(CODINGS["binary"].from_spin(s), x)
    np.testing.assert_array_equal(CODINGS["binary"].to_spin(x), s)


@pytest.mark.slow
def test_l1_mle_meets_the_exact_kkt_conditions(exact):
    """At l1_mle's J (3x3 torus, exact data), the exact model moments (enumeration) satisfy
    E_J[s_i s_j] − mean_data s_i s_j = −λ sign(J_ij) where J_ij ≠ 0 and |·| ≤ λ where J_ij = 0,
    within the Monte Carlo error of the averaged block-Gibbs moments: per entry sd ≤
    sqrt(τ/(chains · averaged iterations)), τ ≤ 4, z = 5 (Bonferroni over 36 pairs at p ≪ 0.01)."""
    lam, chains, iterations = 0.01, 4000, 4000
    data = np.asarray(exact.sample(jax.random.key(3), 4000))
    J = l1_mle(data, lam, num_iterations=iterations, num_chains=chains, seed=1)
    states = positions(SPACE, value_indices(SPACE, 0, 2**D))
    logp = jax.vmap(lambda v: v @ jnp.asarray(J, jnp.float32) @ v)(states)
    w = np.asarray(jax.nn.softmax(logp), np.float64)
    S = np.asarray(states, np.float64)
    residual = (S.T * w) @ S - data.T @ data / len(data)
    tol = 5.0 * np.sqrt(4.0 / (chains * iterations / 2))
    nonzero = np.abs(J) > 1e-3
    off = ~np.eye(D, dtype=bool)
    assert np.all(np.abs(residual + lam * np.sign(J))[nonzero & off] < tol), np.abs(residual + lam * np.sign(J))[
        nonzero & off
    ].max()
    assert np.all(np.abs(residual)[~nonzero & off] < lam + tol)
    assert np.allclose(np.diag(J), 0.0) and np.allclose(J, J.T)


# ----------------------------------------------------------------------------- convolutional EBM


@pytest.mark.slow  # compiling the CNN's gradient takes 10-60 s on a shared 2-core machine
def test_ebm_model_and_data():
    from gradmc.learn import ebm

    spins, labels = ebm.load_digits16()
    assert spins.shape == (5000, 256) and set(np.unique(spins)) == {-1.0, 1.0} and labels.shape == (5000,)
    params = ebm.init_params(jax.random.key(0))
    value, grad = jax.value_and_grad(lambda s: ebm.logdensity(params, s))(jnp.asarray(spins[0]))
    assert value.shape == () and grad.shape == (256,) and np.all(np.isfinite(grad))
    # the quadratic part is sᵀJs (no ½, as in the authors' code) with J symmetrised: swapping J for Jᵀ changes nothing
    s = jnp.asarray(spins[1])
    quadratic = ebm.logdensity(params, s) - ebm.logdensity(params._replace(J=jnp.zeros_like(params.J)), s)
    assert float(quadratic) == pytest.approx(float(s @ (0.5 * (params.J + params.J.T)) @ s), rel=1e-4, abs=1e-4)
    swapped = params._replace(J=params.J.T)
    assert abs(float(ebm.logdensity(swapped, spins[1])) - float(ebm.logdensity(params, spins[1]))) < 1e-4
