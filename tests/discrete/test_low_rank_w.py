"""The low-rank second-order model of the HAMS kernel (docs/discrete-hams.md §8.9): W =
V diag(λ) Vᵀ with D = (δ − min(0, λ_min)) I and the symmetric square root L of W + D, its
range probe and its fit, and the learned low-rank path of V-/O-PDHAMS.

* the operators equal their dense matrices: L Lᵀ = W + D, L⁻¹ L = I, λ_min(W + D) ≥ δ;
* exactness of the kernel with a given, inexact low-rank W (and φ ≠ 0, which uses L⁻¹) on
  an 8-visible RBM (256 states): long runs of V- and O-PDHAMS within the TV bound; the same
  test rejects a kernel without the momentum term of the MH ratio (a test of the test);
* the probe finds the span of an RBM's hidden weights; the fit recovers the Hessian of a
  rank-3 quadratic target from warm-up moves through ``gradmc.sample`` with no options, in
  both places the low-rank form is chosen (d ≤ 2,000 and above, forced by a low threshold);
  the kept draws are rejection-free;
* a dense Hessian of full rank above the dense limit is refused.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gradmc
from gradmc.base import Target
from gradmc.curvature import learned_w, low_rank_model, second_order
from gradmc.discrete import hams, proposals
from gradmc.enumeration import exact_distribution
from gradmc.spaces import Binary
from gradmc.testing import assert_tv_within_bound


def random_model(d=9, eigenvalues=(1.5, -0.8, 0.3), seed=0):
    V, _ = np.linalg.qr(np.random.default_rng(seed).normal(size=(d, len(eigenvalues))))
    return second_order.LowRankModel(jnp.asarray(V, jnp.float32), jnp.asarray(eigenvalues, jnp.float32))


def test_operators_match_their_dense_matrices():
    model, delta = random_model(), 0.4
    precond = second_order.low_rank_pdhams_preconditioner(model, delta)
    V, lam = np.asarray(model.basis, np.float64), np.asarray(model.eigenvalues, np.float64)
    W = (V * lam) @ V.T
    L, L_inv = precond.L.to_dense(), precond.L_inv.to_dense()
    np.testing.assert_allclose(precond.W.to_dense(), W, atol=1e-6)
    np.testing.assert_allclose(L @ L.T, W + np.diag(np.asarray(precond.D)), atol=1e-5)
    np.testing.assert_allclose(L_inv @ L, np.eye(9), atol=1e-5)
    np.testing.assert_allclose(np.asarray(precond.D), delta + 0.8, rtol=1e-6)  # δ − λ_min
    assert np.linalg.eigvalsh(W + np.diag(np.asarray(precond.D))).min() >= delta - 1e-5
    x = np.random.default_rng(1).normal(size=9).astype(np.float32)
    for operator, dense in ((precond.W, W), (precond.L, L), (precond.L_inv, L_inv)):
        np.testing.assert_allclose(np.asarray(operator @ jnp.asarray(x)), dense @ x, atol=1e-5)


# -- exactness with a given low-rank W: an RBM with 8 visible units (256 states) -----------------

RBM = gradmc.target("discs-rbm", num_visible=8, num_hidden=2)
EXACT = exact_distribution(RBM.logdensity_fn, RBM.space.values, RBM.space.d)
GIVEN = second_order.low_rank_pdhams_preconditioner(random_model(d=8, eigenvalues=(1.2, -0.6)), 0.5)


@functools.cache
def runner(beta, phi, broken=False):
    """jit(run(s0, keys (C, T)) -> (positions (C, T, d), acceptance)) of the kernel with GIVEN."""
    kernel = hams.build_kernel(beta)
    original = proposals.metropolis

    def metropolis(key, state, proposed, log_correction, rejected=None):  # without |u'|² − |m|²
        return original(key, state, proposed, log_correction[2:], rejected=rejected)

    def step(state, key):
        if broken:
            with pytest.MonkeyPatch.context() as patch:
                patch.setattr(hams.proposals, "metropolis", metropolis)
                new, info = kernel(key, state, RBM.logdensity_fn, RBM.space, GIVEN, 0.7, phi)
        else:
            new, info = kernel(key, state, RBM.logdensity_fn, RBM.space, GIVEN, 0.7, phi)
        return new, (new.position, info.is_accepted)

    @jax.jit
    def run(s0, init_keys, keys):
        def chain(s, init_key, keys):
            state = hams.init(s, RBM.logdensity_fn, init_key)  # u ~ N(0, I): started in equilibrium
            return jax.lax.scan(step, state, keys)[1]

        return jax.vmap(chain)(s0, init_keys, keys)

    return run


def long_run(beta, phi, broken=False, num_chains=32, num_draws=2000, seed=0):
    exact = EXACT
    key_s, key_u, key_run = jax.random.split(jax.random.key(seed), 3)
    states = jnp.asarray(exact.states(), jnp.float32)
    s0 = states[jax.random.categorical(key_s, jnp.log(jnp.asarray(exact.probs, jnp.float32)), shape=(num_chains,))]
    draws, accepted = runner(beta, phi, broken)(
        s0, jax.random.split(key_u, num_chains), jax.random.split(key_run, (num_chains, num_draws))
    )
    return np.asarray(draws), float(np.mean(accepted))


@pytest.mark.parametrize(("beta", "phi"), [(1.0, 0.0), (0.3, 0.0), (1.0, 0.3)], ids=["v", "o", "v-phi"])
def test_given_low_rank_w_is_exact(beta, phi):
    draws, acceptance = long_run(beta, phi)
    assert 0.05 < acceptance < 0.99  # a real MH test happens
    assert_tv_within_bound(draws, EXACT, p=0.01)


def test_exactness_test_detects_a_missing_momentum_term():
    draws, _ = long_run(1.0, 0.0, broken=True)
    with pytest.raises(AssertionError):
        assert_tv_within_bound(draws, EXACT, p=0.01)


# -- the probe, the fit and the learned path ------------------------------------------------------


def test_probe_finds_the_span_of_the_hidden_weights():
    rbm = gradmc.target("discs-rbm", num_visible=40, num_hidden=3)
    basis = low_rank_model.hessian_range(rbm.logdensity_fn, rbm.space, max_rank=10)
    assert basis.shape == (40, 3)
    weights = np.asarray(rbm.metadata["weights"], np.float64).reshape(40, 3)
    residual = weights - basis @ (basis.T @ weights)
    assert np.abs(residual).max() < 1e-4 * np.abs(weights).max()
    assert low_rank_model.hessian_range(rbm.logdensity_fn, rbm.space, max_rank=2) is None  # rank 3 > 2


def low_rank_quadratic(d, seed=0):
    """f(x) = ½ xᵀHx + bᵀx on Binary(d), H = B diag(2, −1, 0.5) Bᵀ of rank 3."""
    rng = np.random.default_rng(seed)
    B = rng.normal(size=(d, 3)) / np.sqrt(d)
    H = (B * np.array([2.0, -1.0, 0.5])) @ B.T
    H32, b = jnp.asarray(H, jnp.float32), jnp.asarray(0.3 * rng.normal(size=d), jnp.float32)
    return Target("low-rank-quadratic", lambda x: 0.5 * x @ H32 @ x + b @ x, Binary(d)), H


def check_learned_hessian(trace, H):
    """On a quadratic f the projected regression returns H, and the frozen kernel is rejection-free (§7.10)."""
    precond = jax.tree.map(lambda x: np.asarray(x)[0], trace.params["model"])
    assert isinstance(precond.W, second_order.LowRankSymmetric)
    np.testing.assert_allclose(precond.W.to_dense(), H, atol=1e-4 * np.abs(H).max())
    assert np.all(trace.stats["acceptance_rate"] > 0.999)
    assert "W_rank 3" in gradmc.report.format_params(trace.params)


@pytest.mark.slow
def test_learned_low_rank_w_below_the_dense_limit():
    """d = 300 ≥ MIN_LOW_RANK_DIM: rank 3 ≤ d/4, so W is low-rank rather than dense."""
    target, H = low_rank_quadratic(300)
    trace = gradmc.sample(target, "o-pdhams", num_chains=8, num_warmup=400, num_draws=200, seed=3, progress=False)
    check_learned_hessian(trace, H)


@pytest.mark.slow
def test_learned_low_rank_w_above_the_dense_limit(monkeypatch):
    """Above the dense limit (forced low), a dense Hessian has too many diagonals for the
    sparse form, and its rank 3 makes W low-rank; φ ≠ 0 is allowed (L⁻¹ exists)."""
    monkeypatch.setattr(learned_w, "MAX_LEARNED_W_DIM", 10)
    monkeypatch.setattr(learned_w, "SPARSE_W_HISTORY", 200)
    target, H = low_rank_quadratic(80, seed=1)
    trace = gradmc.sample(target, "v-pdhams", num_chains=8, num_warmup=400, num_draws=200, seed=3, progress=False)
    check_learned_hessian(trace, H)
    gradmc.sampler("v-pdhams", phi=-0.5).bind(target, 400)  # no ValueError


def test_a_dense_full_rank_hessian_is_refused_above_the_dense_limit(monkeypatch):
    monkeypatch.setattr(learned_w, "MAX_LEARNED_W_DIM", 10)
    A = np.random.default_rng(0).normal(size=(80, 80)) / 80
    A = jnp.asarray(A + A.T, jnp.float32)
    dense = Target("dense-quadratic", lambda x: 0.5 * x @ A @ x, Binary(80))
    with pytest.raises(ValueError, match="is none of these. Pass W="):
        gradmc.sampler("v-pdhams").bind(dense, 400)
