"""The fallback move of the discrete gradient samplers (gradmc.discrete.fallback), on a steep
posterior where every gradient proposal freezes: spike-and-slab inclusion indicators with the
coefficients integrated out, n = 100 rows, noise scale 0.5. There ∇f is of order 10⁵ where
single flips change f by order 10², so without the fallback the chains never leave their start.

Each test checks the inclusion probabilities against exact enumeration (2^10 states) by
z-tests whose standard errors come from the run's ESS, Bonferroni-corrected over coordinates.
"""

from __future__ import annotations

import warnings

import jax.numpy as jnp
import numpy as np
import pytest
from scipy.stats import norm

import gradmc
from gradmc.diagnostics.ess import geyer_ess
from gradmc.discrete import fallback
from gradmc.spaces import Binary
from gradmc.targets.quadratic import quadratic

P, N, SIGMA, TAU, PRIOR = 10, 100, 0.5, 1.0, 0.2
RUN = dict(num_chains=4, num_warmup=1000, num_draws=2000, seed=0, progress=False)
ALPHA = 0.01
GRADIENT_SAMPLERS = [
    "avg",
    "pavg",
    "pavg-variance",
    "gwg",
    "ordinal-gwg",
    "ordinal-ncg",
    "v-dhams",
    "o-dhams",
    "v-pdhams",
    "o-pdhams",
]


def _data():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(N, P))
    beta = np.zeros(P)
    beta[:4] = [1.5, -1.0, 0.8, 0.5]
    y = x @ beta + SIGMA * rng.normal(size=N)
    return x.T @ x, x.T @ y, y @ y


GRAM, XY, YY = _data()


def _log_posterior(g, xp=jnp):
    """log p(γ | y) + const: y ~ N(0, σ²I + X diag(τ²γ) Xᵀ) by the determinant lemma and the
    push-through identity on the p × p matrix A = σ²I + diag(τ²γ) XᵀX (smooth in γ at 0).
    """
    d = TAU**2 * g
    a = SIGMA**2 * xp.eye(P) + d[..., :, None] * GRAM
    logdet = xp.linalg.slogdet(a)[1]
    solved = xp.linalg.solve(a, (d * XY)[..., None])[..., 0]
    quad = (YY - xp.sum(XY * solved, axis=-1)) / SIGMA**2
    prior = xp.sum(g * np.log(PRIOR) + (1 - g) * np.log(1 - PRIOR), axis=-1)
    return prior - 0.5 * logdet - 0.5 * quad


def log_p(g):
    return _log_posterior(g.astype(jnp.float32))


@pytest.fixture(scope="module")
def inclusion():
    states = ((np.arange(2**P)[:, None] >> np.arange(P)) & 1).astype(np.float64)
    logp = _log_posterior(states, np)
    w = np.exp(logp - logp.max())
    return w @ states / w.sum()


def _mismatch(trace, exact) -> list[str]:
    """Coordinates whose inclusion frequency is off by more than the run allows."""
    draws = np.asarray(trace.draws, np.float64)
    draws = draws.reshape(draws.shape[0], draws.shape[1], -1)
    z = norm.ppf(1 - ALPHA / (2 * P))
    off = []
    for i in range(P):
        series = draws[..., i]
        ess = np.nansum(geyer_ess(series))
        ess = ess if ess > 0 else series.size  # constant in every chain: the bound below still holds
        se = np.sqrt(max(exact[i] * (1 - exact[i]), 1.0 / series.size) / ess)
        if abs(series.mean() - exact[i]) > z * se:
            off.append(f"γ[{i}]: {series.mean():.4f} vs {exact[i]:.4f} (±{z * se:.4f})")
    return off


def _sample(name, **run):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", gradmc.RunWarning)
        return gradmc.sample(log_p, name, space=Binary(P), **{**RUN, **run})


def _check(name, inclusion):
    trace = _sample(name)
    assert np.all(np.asarray(trace.params["fallback"])), f"{name}: the fallback was not switched on"
    assert not _mismatch(trace, inclusion), _mismatch(trace, inclusion)
    assert any("froze in warm-up" in line for line in trace.warnings), trace.warnings


def test_ncg_moves_on_a_steep_posterior_and_matches_enumeration(inclusion):
    _check("ncg", inclusion)


@pytest.mark.slow
def test_without_the_fallback_the_chains_freeze_and_the_test_fails(inclusion, monkeypatch):
    """The test above has power: with the fallback never switched on, NCG's chains stay at their start."""
    monkeypatch.setattr(fallback, "FROZEN_RATE", 0.0)
    trace = _sample("ncg")
    assert not np.any(np.asarray(trace.params["fallback"]))
    assert _mismatch(trace, inclusion)


def test_a_sampler_that_moves_keeps_its_own_kernel():
    target = quadratic(space="binary", d=6)
    trace = gradmc.sample(target, "ncg", num_chains=2, num_warmup=200, num_draws=100, seed=0, progress=False)
    assert not np.any(np.asarray(trace.params["fallback"]))
    assert not any("froze" in line for line in trace.warnings)


@pytest.mark.slow
@pytest.mark.parametrize("name", GRADIENT_SAMPLERS)
def test_every_gradient_sampler_moves_on_a_steep_posterior(name, inclusion):
    _check(name, inclusion)
