"""Targets of Zhou & Tan (``docs/discrete-hams.md`` §10): exact marginals against enumeration."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from gradmc.diagnostics import exact_distribution
from gradmc.targets import hams_targets as ht


def check_against_enumeration(target, orders=(1, 2, 3)):
    d = target.dim
    exact = exact_distribution(target.logdensity_fn, target.space.values, d)
    marginal = target.metadata["exact_marginal"]
    for k in orders:
        for subset in itertools.islice(itertools.combinations(range(d), k), 3):
            np.testing.assert_allclose(marginal(subset), exact.marginal(subset), atol=1e-7)
    np.testing.assert_allclose(target.truth.mean, exact.mean(), atol=1e-6)
    np.testing.assert_allclose(target.truth.cov, exact.cov(), atol=1e-5)


def test_discrete_gaussian_marginals_match_enumeration():
    check_against_enumeration(ht.discrete_gaussian(d=4, sigma=2.0, rho=0.6, half_width=3))


@pytest.mark.parametrize("factory", [ht.mixture_dhams, ht.quadratic_mixture])
def test_mixture_marginals_match_enumeration(factory):
    check_against_enumeration(factory(d=3, half_width=4), orders=(1, 2))


def test_paper_discrete_gaussian():
    t = ht.discrete_gaussian()
    W = t.metadata["W"]
    np.testing.assert_allclose(W, -np.linalg.inv(t.metadata["Sigma"]), atol=1e-12)
    eig = np.linalg.eigvalsh(W)
    np.testing.assert_allclose(eig[:7], -0.4, atol=1e-12)
    assert eig[-1] == pytest.approx(-1 / 182.5)
    p4 = t.metadata["exact_marginal"]((0, 3, 5, 7))
    assert p4.shape == (21,) * 4 and abs(p4.sum() - 1) < 1e-12
    # the 2-variate marginal is the sum of the 4-variate one
    np.testing.assert_allclose(p4.sum(axis=(2, 3)), t.metadata["exact_marginal"]((0, 1)), atol=1e-12)
    assert t.truth.marginals.shape == (8, 21)
    s = np.array([1.0, -2, 0, 3, 4, -1, 0, 2])
    assert float(t.logdensity_fn(s)) == pytest.approx(-0.5 * s @ np.linalg.inv(t.metadata["Sigma"]) @ s, rel=1e-5)


def test_stand_in_says_so():
    t = ht.quadratic_mixture()
    assert "stand-in" in t.description
    np.testing.assert_allclose(t.metadata["centres"], np.linspace(-7.5, 7.5, 7))
    np.testing.assert_allclose(t.metadata["scales"], 1.5 + 0.1 * np.abs(np.linspace(-7.5, 7.5, 7)))


def test_bad_input():
    with pytest.raises(ValueError, match="rho"):
        ht.discrete_gaussian(rho=1.0)
    with pytest.raises(ValueError, match="half_width"):
        ht.discrete_gaussian(half_width=0)
    with pytest.raises(ValueError, match="d must"):
        ht.mixture_dhams(d=1)
    with pytest.raises(ValueError, match="subset"):
        ht.discrete_gaussian().metadata["exact_marginal"]((0, 0))
