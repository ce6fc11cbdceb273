"""Tests of gradmc.diagnostics and gradmc.testing.

Tolerances are derived from the run lengths (stated per test), at p = 0.01 unless said.
"""

import itertools

import jax.numpy as jnp
import numpy as np
import pytest
import scipy.signal
from scipy.stats import chi2

from gradmc import diagnostics as dg
from gradmc.base import Truth
from gradmc.diagnostics.ess import _geyer_tau
from gradmc.testing import assert_moments_match, assert_tv_within_bound

Z99 = 2.5758293035489004  # two-sided normal quantile at p = 0.01


def ar1(rng, phi, chains, n):
    """Stationary Gaussian AR(1) chains x_t = phi x_{t-1} + e_t, e_t ~ N(0, 1)."""
    e = rng.standard_normal((chains, n))
    e[:, 0] /= np.sqrt(1 - phi**2)  # x_0 from the stationary law N(0, 1/(1-phi^2))
    return scipy.signal.lfilter([1.0], [1.0, -phi], e, axis=1)


def sticky_chain(rng, probs, chains, n, stay):
    """Markov chain on range(len(probs)): stay with prob ``stay``, else a fresh draw from probs.

    Its stationary law is exactly ``probs``; every indicator has tau = (1+stay)/(1-stay).
    """
    fresh = rng.choice(len(probs), size=(chains, n), p=probs)
    refresh = rng.random((chains, n)) >= stay
    refresh[:, 0] = True
    last = np.maximum.accumulate(np.where(refresh, np.arange(n), 0), axis=1)
    return np.take_along_axis(fresh, last, axis=1)


# ---------------------------------------------------------------- ESS of one statistic


def reference_tfp_ess(x):
    """Direct (O(n^2)) transcription of tfp's ESS with filter_beyond_positive_pairs=True."""
    n = x.size
    c = x - x.mean()
    s = np.array([np.dot(c[: n - k], c[k:]) for k in range(n)])
    unbiased = (s / (n - np.arange(n))) / (s[0] / n)
    weighted = (n - np.arange(n)) / n * unbiased
    m = n // 2
    pairs_u = unbiased[: 2 * m].reshape(m, 2).sum(1)
    pairs_w = weighted[: 2 * m].reshape(m, 2).sum(1)
    mask = np.maximum(1.0 - np.cumsum(pairs_u < 0), 0.0)
    return n / (-1 + 2 * np.sum(pairs_w * mask))


def test_geyer_ess_equals_direct_transcription_of_tfp():
    rng = np.random.default_rng(0)
    x = ar1(rng, 0.7, 3, 501)  # odd length: the last lag is dropped, as in tfp
    np.testing.assert_allclose(dg.geyer_ess(x), [reference_tfp_ess(row) for row in x], rtol=1e-9)


@pytest.mark.parametrize("phi", [0.0, 0.5, 0.9])
def test_geyer_ess_of_ar1_matches_theory(phi):
    """ESS = n (1-phi)/(1+phi) (phi = 0: iid, ESS = n).

    Tolerance: the truncated autocorrelation sum over lags |k| <= M has relative standard
    deviation sqrt(2 (2M + 1) / n) (Priestley 1981, §6.2.4, rectangular lag window at
    frequency 0), M the lag where the initial positive sequence stopped; |z| < 2.576.
    """
    n = 50_000
    x = ar1(np.random.default_rng(1), phi, 1, n)
    tau, lag = _geyer_tau(x)
    true_tau = (1 + phi) / (1 - phi)
    assert abs(tau[0] / true_tau - 1) < Z99 * np.sqrt(2 * (2 * lag[0] + 1) / n)
    np.testing.assert_allclose(dg.geyer_ess(x), n / tau)


def test_geyer_ess_agrees_with_arviz_within_monte_carlo_error():
    """Ours (initial positive sequence) and ArviZ's (initial monotone) estimate the same tau:
    their mean ESS over 16 chains differ by less than one standard error of that mean."""
    az = pytest.importorskip("arviz")
    x = ar1(np.random.default_rng(2), 0.5, 16, 4000)
    ours = dg.geyer_ess(x)
    theirs = np.array([az.ess(row[None], method="identity") for row in x])
    assert abs(ours.mean() - theirs.mean()) < ours.std(ddof=1) / np.sqrt(len(ours))


def test_ess_l1_statistic_is_geyer_ess_of_the_l1_distance():
    rng = np.random.default_rng(3)
    draws = rng.integers(0, 5, size=(3, 400, 4)).astype(float)
    ref = np.array([1.0, 0.0, 4.0, 2.0])
    expected = dg.geyer_ess(np.abs(draws - ref).sum(-1))
    np.testing.assert_allclose(dg.ess_l1_statistic(draws, ref), expected)
    with pytest.raises(ValueError, match="event shape"):
        dg.ess_l1_statistic(draws, ref[:3])


# ---------------------------------------------------------------- ArviZ summary


def test_summary_of_iid_draws():
    """Bulk ESS of 4x1000 iid draws is 4000 within 2.576 sqrt(2(2M+1)/N) with M <= 5."""
    rng = np.random.default_rng(4)
    mean = np.array([1.0, -2.0, 0.5])
    draws = mean + rng.standard_normal((4, 1000, 3))
    table = dg.summary(draws, Truth(mean=mean, var=np.ones(3)))
    assert table["name"] == ["x[0]", "x[1]", "x[2]"]
    for col in (
        "mean",
        "sd",
        "mcse_mean",
        "mcse_sd",
        "ess_bulk",
        "ess_tail",
        "r_hat",
        "true_mean",
        "true_sd",
        "z_mean",
    ):
        assert np.shape(table[col]) == (3,)
    assert np.all(np.abs(table["ess_bulk"] / 4000 - 1) < Z99 * np.sqrt(2 * 11 / 4000))
    np.testing.assert_allclose(table["z_mean"], (table["mean"] - mean) / table["mcse_mean"])
    np.testing.assert_allclose(table["mcse_mean"], table["sd"] / np.sqrt(4000), rtol=0.2)
    assert np.all(table["r_hat"] < 1.01)
    text = dg.format_summary(table)
    assert "ess_bulk" in text and len(text.splitlines()) == 4


def test_summary_matrix_events_and_max_coords():
    draws = np.random.default_rng(5).standard_normal((2, 50, 2, 3))
    table = dg.summary(draws, max_coords=4)
    assert table["name"] == ["x[0,0]", "x[0,1]", "x[0,2]", "x[1,0]"]
    with pytest.raises(ValueError, match="non-finite"):
        dg.summary(np.full((2, 50, 2), np.nan))
    with pytest.raises(ValueError, match="chain, draw"):
        dg.summary(np.zeros(10))


def test_summary_gives_no_ess_to_a_coordinate_that_never_changes():
    """A discrete site the data pin keeps one value in every draw: its ESS is undefined, not the draw count."""
    draws = np.random.default_rng(5).standard_normal((2, 50, 2))
    draws[..., 1] = 1.0
    table = dg.summary(draws)
    assert np.all(np.isnan([table["ess_bulk"][1], table["ess_tail"][1]]))
    assert np.all(np.isfinite([table["ess_bulk"][0], table["ess_tail"][0]]))


def test_ess_stats_and_rates():
    draws = np.random.default_rng(6).standard_normal((4, 500, 5))
    stats = dg.ess_stats(draws)
    assert stats["min"] <= stats["median"] <= stats["max"]
    np.testing.assert_allclose(dg.ess_per_second(np.array([100.0, 50.0]), 2.0), [50.0, 25.0])
    assert dg.ess_per_grad(300.0, 1000) == pytest.approx(0.3)
    assert isinstance(dg.ess_per_second(10.0, 4.0), float)
    with pytest.raises(ValueError, match="positive"):
        dg.ess_per_second(10.0, 0.0)
    with pytest.raises(ValueError, match="positive"):
        dg.ess_per_grad(10.0, -1)


# ---------------------------------------------------------------- batch-means ESS


def test_multivariate_ess_of_iid_draws():
    """For iid N(mu, S) draws the batch means are iid N(mu, S/b), so Sigma_hat / (S/...) is
    Wishart_p(k, I)/k with k = a m - 1 batches' degrees of freedom; by Bartlett's
    decomposition det = prod_i chi2_{k-i+1}, so mESS/(mn) = (k^p / prod chi2)^(1/p).
    Its 0.5% and 99.5% quantiles (simulated from chi-squares), widened by the fluctuation of
    Lambda (relative sd sqrt(2 / (p m (n-1)))), bound the estimate."""
    m, n, p, b = 4, 2500, 3, 50
    rng = np.random.default_rng(7)
    chol = np.linalg.cholesky(np.array([[2.0, 0.5, 0.0], [0.5, 1.0, 0.3], [0.0, 0.3, 0.5]]))
    draws = rng.standard_normal((m, n, p)) @ chol.T
    k = (n // b) * m - 1
    sims = np.random.default_rng(0).chisquare(k - np.arange(p)[:, None], size=(p, 200_000))
    ratio = (k**p / sims.prod(axis=0)) ** (1 / p)
    lo, hi = np.quantile(ratio, [0.005, 0.995])
    widen = np.exp(Z99 * np.sqrt(2 / (p * m * (n - 1))))
    mess = dg.multivariate_ess(draws, batch_size=b)
    assert lo / widen < mess / (m * n) < hi * widen


def test_multivariate_ess_with_whole_chains_as_batches_is_zhoutan_ess():
    x = ar1(np.random.default_rng(8), 0.6, 10, 300)
    assert dg.multivariate_ess(x[..., None], batch_size=300) == pytest.approx(10 * dg.zhoutan_ess(x))


def test_multivariate_ess_bad_input():
    x = np.random.default_rng(9).standard_normal((1, 16, 5))
    with pytest.raises(ValueError, match="batches"):
        dg.multivariate_ess(x)  # 4 batches cannot estimate a 5x5 covariance
    with pytest.raises(ValueError, match="batch_size"):
        dg.multivariate_ess(x, batch_size=0)
    with pytest.raises(ValueError, match="singular"):
        dg.multivariate_ess(np.zeros((4, 100, 2)))


def test_zhoutan_ess_of_ar1_chains():
    """n Wv / B per chain. The m chain means are iid N(0, tau/n) (stationary AR(1), unit
    innovation, sd^2 = 1/(1-phi^2)), so B / (sd^2 tau) ~ chi2_{m-1}/(m-1) and
    ESS_hat / (n/tau) = (Wv / sd^2) (m-1) / chi2_{m-1}; Wv/sd^2 = 1 up to a relative
    error 2.576 sqrt(2 tau / (m n)) which widens the chi-square interval."""
    m, n, phi = 50, 4000, 0.5
    x = ar1(np.random.default_rng(10), phi, m, n)
    ess = dg.zhoutan_ess(x[..., None])
    assert ess.shape == (1,)
    tau = (1 + phi) / (1 - phi)
    widen = 1 + Z99 * np.sqrt(2 * tau / (m * n))
    lo, hi = (m - 1) / chi2.ppf(0.995, m - 1) / widen, (m - 1) / chi2.ppf(0.005, m - 1) * widen
    assert lo < ess[0] / (n / tau) < hi
    with pytest.raises(ValueError, match="2 chains"):
        dg.zhoutan_ess(x[:1])


# ---------------------------------------------------------------- moments


MEAN = np.array([1.0, -2.0, 0.0])
COV = np.array([[1.0, 0.6, -0.2], [0.6, 2.0, 0.3], [-0.2, 0.3, 0.5]])


def correlated_gaussian_chains(rng, phi=0.7, chains=4, n=5000):
    """AR(1) in each coordinate, mixed by chol(COV): stationary law exactly N(MEAN, COV)."""
    z = ar1(rng, phi, chains * 3, n).reshape(chains, 3, n).transpose(0, 2, 1) * np.sqrt(1 - phi**2)
    return MEAN + z @ np.linalg.cholesky(COV).T


def test_assert_moments_match_passes_on_correct_correlated_chains():
    draws = correlated_gaussian_chains(np.random.default_rng(11))
    result = assert_moments_match(draws, MEAN, COV)
    from_truth = dg.mcse_z(draws, Truth(mean=MEAN, cov=COV))
    np.testing.assert_array_equal(from_truth["corr"]["z"], result["corr"]["z"])
    assert set(result) == {"mean", "var", "corr", "threshold"}
    assert len(result["corr"]["z"]) == 3
    # Bonferroni over 3 means + 3 variances + 3 correlations at p = 0.01
    assert result["threshold"] == pytest.approx(3.2608, abs=1e-3)


@pytest.mark.parametrize(
    "wrong, moment",
    [
        (dict(mean=MEAN + np.array([0.0, 0.2, 0.0])), "mean"),
        (dict(cov=COV + np.diag([0.0, 0.0, 0.075])), "var"),
        (dict(cov=COV + np.array([[0, 0.1, 0], [0.1, 0, 0], [0, 0, 0]])), "corr"),
    ],
)
def test_assert_moments_match_fails_on_a_biased_sample(wrong, moment):
    """Chains of N(MEAN, COV) judged against slightly wrong truths. Each bias is at least
    seven MCSEs (tau = 1.7/0.3 = 5.7, N = 20000: mean of x_1 MCSE = sqrt(2 * 5.7 / N) = 0.024
    vs bias 0.2; var of x_2 MCSE ~ 0.5 sqrt(2 * 5.7 / N) = 0.012 vs bias 0.075; corr_01 MCSE
    ~ 0.01 vs bias 0.07), so even 2.576 MCSE of noise against it leaves |z| > 3.26, the
    Bonferroni threshold: the test must flag that moment first."""
    draws = correlated_gaussian_chains(np.random.default_rng(12))
    kwargs = dict(mean=MEAN, cov=COV) | wrong
    with pytest.raises(AssertionError, match=rf"(?s)differ from the truth.*\n\s*{moment}\s"):
        assert_moments_match(draws, kwargs["mean"], kwargs["cov"])


def test_mcse_z_mean_matches_arviz_mcse():
    draws = correlated_gaussian_chains(np.random.default_rng(13), n=1000)
    z = dg.mcse_z(draws, mean=MEAN)["mean"]
    table = dg.summary(draws)
    np.testing.assert_allclose(z["mcse"], table["mcse_mean"], rtol=1e-10)


def test_moment_errors():
    draws = np.zeros((2, 4, 2)) + np.array([1.0, 3.0])
    draws[:, ::2] += 1.0  # coordinate values alternate (x, x + 1)
    truth = Truth(mean=np.array([1.0, 3.0]), var=np.array([1.0, 4.0]))
    err = dg.moment_errors(draws, truth)
    assert err["mean_max_abs"] == pytest.approx(0.5)
    assert err["mean_rmse"] == pytest.approx(0.5)
    assert err["mean_max_rel"] == pytest.approx(0.5)  # 0.5 / sd 1
    # E[x^2]: coordinate 0 draws 2,1 -> 2.5 vs 2; coordinate 1 draws 4,3 -> 12.5 vs 13
    assert err["m2_max_abs"] == pytest.approx(0.5)
    assert err["m2_max_rel"] == pytest.approx(0.25)
    with pytest.raises(ValueError, match="coordinates"):
        dg.moment_errors(draws, Truth(mean=np.zeros(3)))


def test_moment_bias_variance_against_a_loop():
    rng = np.random.default_rng(14)
    draws = rng.integers(-2, 3, size=(5, 30, 3)).astype(float)
    mean, second = np.array([0.1, 0.0, -0.1]), np.eye(3) * 2.0 + 0.1
    checkpoints = [10, 20, 30]
    out = dg.moment_bias_variance(draws, mean, second, checkpoints)
    for a, t in enumerate(checkpoints):
        x = draws[:, :t]
        m1 = x.mean(1)
        m2 = np.einsum("cni,cnj->cij", x, x) / t
        iu = np.triu_indices(3, 1)
        for name, est, tru in (
            ("mean", m1, mean),
            ("square", np.diagonal(m2, axis1=1, axis2=2), np.diag(second)),
            ("cross", m2[:, iu[0], iu[1]], second[iu]),
        ):
            assert out[name]["bias2"][a] == pytest.approx(np.mean((est.mean(0) - tru) ** 2))
            assert out[name]["var"][a] == pytest.approx(np.mean(est.var(0)))


# ---------------------------------------------------------------- enumeration


def test_exact_distribution_of_independent_ordinal_coordinates():
    """log p = sum_i a_i s_i + b_i s_i^2 factorises: p = prod_i softmax(a_i v + b_i v^2)."""
    values = np.array([-1.0, 0.0, 0.5, 2.0])
    a, b = np.array([0.3, -0.7, 1.1]), np.array([-0.5, 0.2, -0.9])
    exact = dg.exact_distribution(lambda s: jnp.sum(a * s + b * s**2), values, 3, batch=7)
    factors = np.exp(a[:, None] * values + b[:, None] * values**2)
    factors /= factors.sum(1, keepdims=True)
    closed = np.einsum("i,j,k->ijk", *factors)
    assert exact.probs.sum() == pytest.approx(1.0, abs=1e-12)
    np.testing.assert_allclose(exact.joint, closed, rtol=1e-5)
    np.testing.assert_allclose(exact.marginals(), factors, rtol=1e-5)
    np.testing.assert_allclose(exact.marginal((2, 0)), np.outer(factors[2], factors[0]), rtol=1e-5)
    pm = exact.pair_marginals()
    np.testing.assert_allclose(pm[0, 0], np.diag(factors[0]), rtol=1e-5)
    np.testing.assert_allclose(pm[1, 2], np.outer(factors[1], factors[2]), rtol=1e-5)
    mu = factors @ values
    np.testing.assert_allclose(exact.mean(), mu, rtol=1e-5)
    np.testing.assert_allclose(exact.cov(), np.diag(factors @ values**2 - mu**2), rtol=1e-5, atol=1e-7)
    assert exact.log_normaliser == pytest.approx(
        np.log(np.prod(np.exp(a[:, None] * values + b[:, None] * values**2).sum(1))), rel=1e-5
    )


def test_exact_distribution_one_hot_categorical():
    w = np.array([[0.1, 1.0, -0.4], [2.0, 0.0, 0.3]])
    exact = dg.exact_distribution(lambda x: jnp.sum(w * x), np.arange(3), 2, one_hot=True)
    soft = np.exp(w) / np.exp(w).sum(1, keepdims=True)
    np.testing.assert_allclose(exact.joint, np.outer(soft[0], soft[1]), rtol=1e-5)
    states = exact.states(one_hot=True)
    assert states.shape == (9, 2, 3) and np.all(states.sum(-1) == 1)
    codes = np.random.default_rng(22).choice(9, size=(2, 3000), p=exact.probs)
    tv, bound = assert_tv_within_bound(states[codes], exact)  # one-hot draws (chain, draw, d, k)
    assert tv < bound


def test_exact_distribution_agrees_with_the_targets_enumeration(small_exact):
    """Same state order and probabilities as the targets' enumeration (coordinate 0 fastest)."""
    from gradmc.enumeration import enumerate_target
    from gradmc.spaces import Categorical, Ordinal

    theirs = enumerate_target(
        lambda s: 0.8 * s[0] * s[1] - 0.5 * s[2] ** 2 + 0.3 * s[1] * s[2], Ordinal(small_exact.values, 3)
    )
    adopted = dg.ExactDistribution.from_enumeration(theirs)
    np.testing.assert_allclose(adopted.probs, small_exact.probs, rtol=1e-5)
    np.testing.assert_allclose(adopted.marginals(), theirs.marginals, rtol=1e-5)
    w = np.array([[0.1, 1.0, -0.4], [2.0, 0.0, 0.3]])
    cat = dg.ExactDistribution.from_enumeration(enumerate_target(lambda x: jnp.sum(w * x), Categorical(3, 2)))
    ours = dg.exact_distribution(lambda x: jnp.sum(w * x), np.arange(3), 2, one_hot=True)
    np.testing.assert_allclose(cat.probs, ours.probs, rtol=1e-5)
    np.testing.assert_array_equal(cat.values, [0, 1, 2])


def test_enumerate_states_order_and_limits():
    states = dg.enumerate_states([0, 1], 3)
    assert states.tolist() == [list(s)[::-1] for s in itertools.product([0, 1], repeat=3)]  # coordinate 0 fastest
    with pytest.raises(ValueError, match="too many"):
        dg.enumerate_states(np.arange(50), 20)
    with pytest.raises(ValueError, match="sorted"):
        dg.enumerate_states([1, 0], 2)
    with pytest.raises(ValueError, match="NaN"):
        dg.exact_distribution(lambda s: jnp.log(s[0] - 0.5), np.array([0.0, 1.0]), 2)


# ---------------------------------------------------------------- TV and its bound


K_PROBS = np.array([0.30, 0.20, 0.15, 0.10, 0.08, 0.06, 0.05, 0.03, 0.02, 0.01])


@pytest.mark.parametrize("seed", range(5))
def test_tv_bound_holds_for_iid_multinomial_draws(seed):
    n = 2000
    counts = np.random.default_rng(seed).multinomial(n, K_PROBS)
    assert dg.tv_distance(counts, K_PROBS) <= dg.tv_bound(K_PROBS.size, n, p=0.01, probs=K_PROBS)
    assert dg.tv_distance(counts, K_PROBS) <= dg.tv_bound(K_PROBS.size, n, p=0.01)  # distribution-free


def test_tv_bound_rejects_a_wrong_distribution():
    n = 2000
    wrong = K_PROBS.copy()
    wrong[0] -= 0.08
    wrong[-1] += 0.08  # TV(wrong, K_PROBS) = 0.08, about twice the bound at n = 2000
    counts = np.random.default_rng(0).multinomial(n, wrong)
    assert dg.tv_distance(counts, K_PROBS) > dg.tv_bound(K_PROBS.size, n, p=0.01, probs=K_PROBS)


def test_tv_bound_input_checks():
    with pytest.raises(ValueError, match="p must be"):
        dg.tv_bound(10, 100, p=1.5)
    with pytest.raises(ValueError, match="ess"):
        dg.tv_bound(10, 0.0)
    with pytest.raises(ValueError, match="states"):
        dg.tv_distance(np.ones(3), np.ones(4) / 4)


@pytest.fixture(scope="module")
def small_exact():
    """A non-factorised distribution on {0, 1, 2}^3 (27 states)."""
    values = np.array([0.0, 1.0, 2.0])
    return dg.exact_distribution(lambda s: 0.8 * s[0] * s[1] - 0.5 * s[2] ** 2 + 0.3 * s[1] * s[2], values, 3)


def _draws_from(probs, rng, chains, n, d, k, stay=0.0):
    codes = sticky_chain(rng, probs, chains, n, stay)
    return np.stack(np.unravel_index(codes, (k,) * d, order="F"), axis=-1).astype(float)


def test_assert_tv_within_bound_on_exact_and_autocorrelated_draws(small_exact):
    rng = np.random.default_rng(15)
    iid = _draws_from(small_exact.probs, rng, 4, 2000, 3, 3)
    tv, bound = assert_tv_within_bound(iid, small_exact)
    assert tv < bound
    # sticky chain: same stationary law, tau = 19 per indicator; the ESS makes the bound wider
    sticky = _draws_from(small_exact.probs, rng, 4, 20000, 3, 3, stay=0.9)
    tv_s, bound_s = assert_tv_within_bound(sticky, small_exact)
    assert tv_s < bound_s
    assert bound_s > dg.tv_bound(27, 80000, probs=small_exact.probs)


def test_assert_tv_within_bound_fails_for_a_wrong_distribution(small_exact):
    wrong = small_exact.probs**0.7
    wrong /= wrong.sum()  # a flattened version, TV ~ 0.1 from the truth
    draws = _draws_from(wrong, np.random.default_rng(16), 4, 20000, 3, 3, stay=0.9)
    with pytest.raises(AssertionError, match="TV .* > bound"):
        assert_tv_within_bound(draws, small_exact)


def brute_tv(draws, values, table, subset, t):
    idx = np.searchsorted(values, draws[:t, list(subset)])
    counts = np.zeros(table.shape)
    np.add.at(counts, tuple(idx.T), 1)
    return 0.5 * np.abs(counts / t - table).sum()


def test_tv_marginals_against_brute_force(small_exact):
    rng = np.random.default_rng(17)
    draws = _draws_from(small_exact.probs, rng, 3, 90, 3, 3, stay=0.5)
    values = small_exact.values
    for order in (1, 2, 3):
        subsets = list(itertools.combinations(range(3), order))
        got = dg.tv_marginals(draws, values, small_exact, order, checkpoints=[7, 40, 90])
        assert got.shape == (3, 3, len(subsets))
        for (a, t), c, (s, subset) in itertools.product(enumerate([7, 40, 90]), range(3), enumerate(subsets)):
            expected = brute_tv(draws[c], values, small_exact.marginal(subset), subset, t)
            assert got[a, c, s] == pytest.approx(expected, abs=1e-12)
    np.testing.assert_array_equal(dg.tv_marginals(draws, values, small_exact.probs, 3), got[-1])
    final = dg.tv_marginals(draws, values, lambda subset: small_exact.marginal(subset), 2, subsets=[(2, 0)])
    assert final.shape == (3, 1)
    assert final[1, 0] == pytest.approx(brute_tv(draws[1], values, small_exact.marginal((2, 0)), (2, 0), 90))
    with pytest.raises(ValueError, match="sum to 1"):
        dg.tv_marginals(draws, values, lambda subset: np.ones((3,) * len(subset)), 1)


# ---------------------------------------------------------------- Rhodes & Gutmann metrics


def test_marginal_errors_of_rhodes_gutmann():
    values = np.array([0.0, 1.0])
    # chain 0 frequencies: coordinate 0 = (1/4, 3/4), coordinate 1 = (1/2, 1/2)
    draws = np.array([[[0, 0], [1, 1], [1, 0], [1, 1]]], dtype=float)
    p = np.array([[0.5, 0.5], [0.5, 0.5]])
    q0 = np.array([0.25, 0.75])
    kl = np.sum(q0 * np.log(q0 / 0.5)) / 2
    assert dg.marginal_kl(draws, p, values)[0] == pytest.approx(kl)
    assert dg.mean_abs_marginal_error(draws, p, values)[0] == pytest.approx((0.25 + 0.0) / 2)
    assert dg.marginal_kl(draws, np.array([[0.0, 1.0], [0.5, 0.5]]), values)[0] == np.inf
    assert dg.marginal_kl(draws, np.array([[0.25, 0.75], [0.5, 0.5]]), values)[0] == pytest.approx(0.0)


def test_pairwise_error_against_a_loop(small_exact):
    draws = _draws_from(small_exact.probs, np.random.default_rng(18), 2, 50, 3, 3)
    values, pm = small_exact.values, small_exact.pair_marginals()
    got = dg.pairwise_error(draws, pm, values)
    for c in range(2):
        total = 0.0
        for i, j in itertools.product(range(3), repeat=2):
            q = np.zeros((3, 3))
            for s in draws[c]:
                q[int(s[i]), int(s[j])] += 1 / 50
            total += np.abs(q - pm[i, j]).sum()
        assert got[c] == pytest.approx(total / 9)


def test_covariance_frobenius_error_and_one_hot_input():
    draws = np.random.default_rng(19).standard_normal((3, 100, 4))
    ref = np.eye(4)
    expected = [np.linalg.norm(np.cov(draws[c].T) - ref) for c in range(3)]
    np.testing.assert_allclose(dg.covariance_frobenius_error(draws, ref), expected)
    idx = np.random.default_rng(20).integers(0, 3, size=(2, 30, 4))
    one_hot = np.eye(3)[idx]
    np.testing.assert_allclose(
        dg.empirical_marginals(one_hot, np.arange(3)), dg.empirical_marginals(idx.astype(float), np.arange(3))
    )


def test_discrete_metrics_reject_values_outside_the_space():
    draws = np.full((1, 5, 2), 0.5)
    with pytest.raises(ValueError, match="outside the value set"):
        dg.marginal_kl(draws, np.full((2, 2), 0.5), [0.0, 1.0])
    with pytest.raises(ValueError, match="one-hot"):
        dg.empirical_marginals(np.ones((1, 5, 2, 2)), [0, 1])
    with pytest.raises(ValueError, match="shape"):
        dg.marginal_kl(np.zeros((1, 5, 2)), np.full((3, 2), 0.5), [0.0, 1.0])


# ---------------------------------------------------------------- MMD


def test_mmd_exp_hamming_and_gaussian():
    rng = np.random.default_rng(21)
    x = (rng.random((300, 20)) < 0.5).astype(float)
    y = (rng.random((300, 20)) < 0.5).astype(float)
    z = (rng.random((300, 20)) < 0.8).astype(float)
    same, diff = dg.mmd(x, y), dg.mmd(x, z)
    # same law: unbiased estimate with sd O(1/n); different law: MMD^2 of order (0.3^2 D / D)
    assert abs(same) < 0.01 < diff
    # brute-force Gram of the exponential Hamming kernel
    a, b = x[:5], z[:4]
    gram = np.exp(-np.array([[np.sum(u != v) for v in b] for u in a]) / 20)
    expected = dg.mmd(a, b, kernel=lambda p, q: np.exp(-np.array([[np.sum(u != v) for v in q] for u in p]) / 20))
    assert dg.mmd(a, b) == pytest.approx(expected)
    assert gram.shape == (5, 4)
    g = rng.standard_normal((200, 2))
    assert dg.mmd(g, rng.standard_normal((200, 2)), "gaussian") < dg.mmd(
        g, 1.0 + rng.standard_normal((200, 2)), "gaussian"
    )
    with pytest.raises(ValueError, match="kernel"):
        dg.mmd(x, y, kernel="nope")
