"""Calibration of W, D, L and the tuning procedures (the discrete-HAMS algorithm statement,
docs/discrete-hams.md §8–§9)."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

from gradmc.curvature import second_order
from gradmc.targets.hams_targets import discrete_gaussian
from gradmc.tuning import calibration

RNG = np.random.default_rng(0)
D_DIM = 5
_A = RNG.normal(size=(D_DIM, D_DIM))
W_TRUE = -(_A @ _A.T) / D_DIM - 0.2 * np.eye(D_DIM) + 0.1 * np.ones((D_DIM, D_DIM))  # symmetric, indefinite allowed
B_TRUE = RNG.normal(size=D_DIM)


def quadratic(s):
    return s @ B_TRUE + 0.5 * np.einsum("...i,ij,...j->...", s, W_TRUE, s)


def quadratic_grad(s):
    return B_TRUE + s @ W_TRUE


def lattice_chains(num_chains=6, num_draws=40, scale=1.0):
    """Random-walk-like lattice paths (chain, draw, d): any draws serve as burn-in pairs."""
    steps = RNG.integers(-2, 3, size=(num_chains, num_draws, D_DIM))
    return scale * np.cumsum(steps, axis=1).astype(np.float64)


def test_gradient_matching_recovers_w_exactly():
    s = lattice_chains()
    W = second_order.fit_w_gradients(s, quadratic_grad(s))
    np.testing.assert_allclose(W, W_TRUE, atol=1e-10)


def test_function_values_recover_w_exactly():
    s = lattice_chains()
    W = second_order.fit_w_values(s, quadratic(s), quadratic_grad(s))
    np.testing.assert_allclose(W, W_TRUE, atol=1e-10)


def test_lyapunov_solution_matches_vec_formula_on_noisy_pairs():
    """On a non-quadratic f the Lyapunov solution is the symmetric least-squares minimiser:
    it equals the Kronecker (vec) solution of (I⊗A + A⊗I) vec W = vec C."""
    s = lattice_chains()
    grads = quadratic_grad(s) + 0.3 * np.sin(s)
    W = second_order.fit_w_gradients(s, grads)
    (s0, s1), (g0, g1) = second_order.consecutive_pairs(s, grads)
    X, Y = s1 - s0, g1 - g0
    A, C = X.T @ X, X.T @ Y + Y.T @ X
    vec = np.linalg.solve(np.kron(np.eye(D_DIM), A) + np.kron(A, np.eye(D_DIM)), C.reshape(-1, order="F"))
    np.testing.assert_allclose(W, vec.reshape(D_DIM, D_DIM, order="F"), atol=1e-10)
    # and no other symmetric W fits better
    loss = lambda M: np.sum((Y - X @ M) ** 2)  # noqa: E731
    E = RNG.normal(size=(D_DIM, D_DIM))
    assert loss(W) <= loss(W + 1e-3 * (E + E.T))


def test_scaled_lattice_gives_w_over_c_squared():
    """Calibrating f(s / c) on the lattice c·S gives W / c² (Supp. F)."""
    c = 2.5
    s = lattice_chains(scale=c)
    W = second_order.fit_w_values(s, quadratic(s / c), quadratic_grad(s / c) / c)
    np.testing.assert_allclose(W, W_TRUE / c**2, atol=1e-10)


def test_pairs_never_cross_chains():
    s = np.zeros((2, 3, 1))
    s[1] += 100.0  # a jump between chains would be a large Δ
    ((before, after),) = second_order.consecutive_pairs(s)
    assert before.shape == (4, 1) and np.all(after - before == 0)


def test_lambda_shift_and_factor():
    for delta in (0.01, 0.5, 3.0):
        D = second_order.lambda_shift(W_TRUE, delta)
        assert np.linalg.eigvalsh(W_TRUE + np.diag(D))[0] == pytest.approx(delta, rel=1e-9)
        L, L_inv, method = second_order.factor(W_TRUE, D)
        np.testing.assert_allclose(L @ L.T, W_TRUE + np.diag(D), atol=1e-10)
        np.testing.assert_allclose(L @ L_inv, np.eye(D_DIM), atol=1e-8)
        cond = np.linalg.cond(W_TRUE + np.diag(D))
        assert method == ("cholesky" if cond < 100 else "eigen")
        if method == "cholesky":
            assert np.allclose(L, np.tril(L))
    # the discrete Gaussian (§10.2): λ_min(W) = −0.4, so D = (δ + 0.4) I
    W = discrete_gaussian().metadata["W"]
    np.testing.assert_allclose(second_order.lambda_shift(W, 0.3), 0.7, atol=1e-12)


def test_bad_input():
    with pytest.raises(ValueError, match="symmetric"):
        second_order.check_w(np.array([[1.0, 2.0], [0.0, 1.0]]))
    with pytest.raises(ValueError, match="square"):
        second_order.check_w(np.ones((2, 3)))
    for delta in (0.0, -1.0, np.nan):
        with pytest.raises(ValueError, match="δ"):
            second_order.lambda_shift(W_TRUE, delta)
    with pytest.raises(ValueError, match="positive definite"):
        second_order.factor(-np.eye(3), np.full(3, 0.5))
    # single-coordinate moves never identify W's off-diagonal entries by function values
    s = np.zeros((1, 60, 3))
    for t in range(1, 60):
        s[0, t] = s[0, t - 1]
        s[0, t, t % 3] += 1.0
    f = np.einsum("...i,...i->...", s, s)
    with pytest.raises(ValueError, match="identify"):
        second_order.fit_w_values(s, f, 2 * s)
    with pytest.raises(ValueError, match="span"):
        second_order.fit_w_gradients(np.zeros((2, 10, 3)), np.zeros((2, 10, 3)))


def test_tune_pdhams_on_discrete_gaussian():
    """Algorithm 5 on the discrete Gaussian (exact W, rejection-free): every δ is accepted with
    probability 1, the chosen δ and φ are grid points with the largest ESS of f."""
    target = discrete_gaussian(d=4, half_width=5)
    positions = jnp.zeros((8, 4))
    deltas = np.array([0.05, 0.5, 5.0])
    out = calibration.tune_pdhams(
        target,
        target.metadata["W"],
        deltas,
        positions,
        epsilon=0.9,
        beta=1.0,
        phis=(-0.5, 0.0),
        num_warmup=50,
        num_draws=200,
        seed=0,
    )
    assert np.all(out["acceptance"] > 0.999)
    assert out["delta"] == deltas[int(np.argmax(out["ess_f"]))]
    assert out["phi"] in (-0.5, 0.0) and out["phi_ess_f"].shape == (2,)
    assert out["delta"] != 5.0  # the largest δ barely moves the chain
    # φ has no effect on a quadratic target (the gradient residual ρ is 0)
    np.testing.assert_allclose(out["phi_ess_f"][0], out["phi_ess_f"][1], rtol=1e-6)


@pytest.mark.parametrize("method", ["gradients", "values"])
def test_calibrate_w_from_sampler_draws(method):
    """From burn-in draws of a real sampler (V-DHAMS) on the discrete Gaussian, both methods
    recover its exact W = −Σ⁻¹ (to the float32 round-off of f and ∇f)."""
    from gradmc.registry import sampler

    target = discrete_gaussian(d=4, sigma=2.0, rho=0.5, half_width=6)
    W = calibration.calibrate_w(target, sampler("v-dhams", delta=1.0), method, num_chains=4, num_draws=100, seed=0)
    np.testing.assert_allclose(W, target.metadata["W"], atol=2e-4)
    with pytest.raises(ValueError, match="method"):
        calibration.calibrate_w(target, "v-dhams", "hessian")


def test_calibrate_w_refuses_one_hot_rows():
    """Each one-hot row sums to 1, so the moves never span R^{d·k}: refused before any sampling,
    naming the samplers that learn W in warm-up instead."""
    from gradmc.base import Target
    from gradmc.spaces import Categorical

    target = Target("one-hot", lambda s: -jnp.sum(s**2), Categorical(3, 2))
    with pytest.raises(ValueError, match="one-hot Categorical rows.*o-pdhams"):
        calibration.calibrate_w(target, "ncg")
