"""DISCS benchmark targets and metric: parameters as DISCS draws them, log densities by
hand, the TFP-equivalent ESS against reference values and the AR(1) formula."""

import functools
import itertools
import math
from importlib import resources

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.signal import lfilter

from gradmc.diagnostics.discs import (
    DiscsESS,
    discs_ess,
    discs_ess_per_step,
    discs_statistic,
)
from gradmc.registry import target as build_target
from gradmc.registry import targets as registered_targets
from gradmc.spaces import Binary, Categorical, Spin
from gradmc.targets import discs  # registers the discs-* targets


@functools.cache
def _cached(name, options):
    return build_target(name, **dict(options))


def built(name, **options):
    """The target ``name`` with ``options``, built once per test run (building compiles)."""
    return _cached(name, tuple(sorted(options.items())))


def logdensities(target, positions):
    return np.asarray(jax.jit(jax.vmap(target.logdensity_fn))(jnp.asarray(positions, jnp.float32)), np.float64)


# -- targets -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name, options",
    [
        ("discs-ising", {}),
        ("discs-ising", {"temperature": "low", "shape": (6, 5)}),
        ("discs-potts", {}),
        ("discs-potts", {"num_categories": 8, "shape": 5}),
        ("discs-bernoulli", {}),
        ("discs-categorical", {}),
        ("discs-fhmm", {}),
        ("discs-fhmm", {"num_categories": 4}),
        ("discs-rbm", {}),
        ("discs-rbm", {"num_categories": 4, "num_visible": 30}),
    ],
)
def test_targets_build_and_have_finite_log_densities(name, options):
    t = built(name, **options)
    assert t.name == name and t.description
    ref = t.metadata["reference"]
    t.space.validate(ref)
    starts = discs.discs_initial_states(t, 3)
    assert starts.shape == (3, *t.space.event_shape)
    t.space.validate(np.asarray(starts))
    x = t.draw_initial(jax.random.PRNGKey(1))
    t.space.validate(np.asarray(x))
    assert np.all(np.isfinite(logdensities(t, np.concatenate([np.asarray(starts), ref[None]]))))
    value, grad = jax.jit(jax.value_and_grad(t.logdensity_fn))(x)
    assert np.isfinite(float(value)) and np.all(np.isfinite(np.asarray(grad)))


def test_discs_defaults():
    t = built("discs-ising")
    assert t.metadata["shape"] == (50, 50) and t.space == Binary(2500)
    assert (t.metadata["strength"], t.metadata["mu"], t.metadata["sigma"]) == (0.5, 0.5, 1.5)
    assert "J" not in t.metadata  # 2500 rows: too large to keep dense
    low = built("discs-ising", temperature="low", shape=(6, 5))
    assert (low.metadata["strength"], low.metadata["mu"], low.metadata["sigma"]) == (1.0, 1.0, 3.0)
    assert low.space == Binary(30) and low.truth is None  # 2^30 states: not enumerated
    p = built("discs-potts")
    assert p.space == Categorical(4, 900) and p.metadata["strength"] == 1.0
    assert built("discs-fhmm").space == Binary(200 * 50)
    assert built("discs-fhmm", num_categories=4).space == Categorical(4, 200 * 10)
    assert built("discs-bernoulli").space == Binary(10000)
    assert built("discs-categorical").space == Categorical(4, 2000)
    assert built("discs-rbm").space == Binary(784)


def test_ising_reproduces_discs_parameters_starts_and_reference():
    ref = discs.ising25_hightemp_reference()
    t = built("discs-ising", shape=25, temperature="high", seed=0)
    np.testing.assert_array_equal(t.metadata["params"], ref["params"].astype(np.float64))
    np.testing.assert_array_equal(np.asarray(discs.discs_initial_states(t, 100)), ref["x0"].reshape(100, 625))
    np.testing.assert_array_equal(t.metadata["reference"], ref["x_ref"][0])
    assert discs.discs_ising(shape=25, seed=1).metadata["params"][2, 0, 0] != ref["params"][2, 0, 0]
    with jax.enable_x64(True):  # the draws are pinned to float32, as DISCS's
        t64 = discs.discs_ising(shape=25)
        np.testing.assert_array_equal(t64.metadata["params"], ref["params"].astype(np.float64))
        np.testing.assert_array_equal(t64.metadata["reference"], ref["x_ref"][0])


def _ising_by_hand(params, x):
    """λ Σ_<ij> s_i s_j − Σ b_i s_i from DISCS's (3, H, W) weights (−λ) and field, by loops."""
    w_h, w_v, b = params
    H, W = b.shape
    s = 2.0 * x.reshape(H, W) - 1.0
    total = 0.0
    for r in range(H):
        for c in range(W):
            if c + 1 < W:
                total -= w_h[r, c] * s[r, c] * s[r, c + 1]
            if r + 1 < H:
                total -= w_v[r, c] * s[r, c] * s[r + 1, c]
            total -= b[r, c] * s[r, c]
    return total


def test_ising_log_density_matches_discs_parameters_by_hand():
    ref = discs.ising25_hightemp_reference()
    params = ref["params"].astype(np.float64)
    t = built("discs-ising", shape=25, temperature="high", seed=0)
    states = np.concatenate([ref["x0"][:3].reshape(3, -1), ref["x_ref"], np.ones((1, 625)), np.zeros((1, 625))])
    expected = np.array([_ising_by_hand(params, x) for x in states])
    np.testing.assert_allclose(logdensities(t, states), expected, rtol=1e-5, atol=1e-3)
    # gradmc's quadratic convention in metadata: x'Jx + b'x + constant
    J, b, c = t.metadata["J"], t.metadata["b"], t.metadata["constant"]
    np.testing.assert_allclose([x @ J @ x + b @ x + c for x in states], expected, rtol=1e-9, atol=1e-8)
    # the shipped file given as params=
    path = resources.files("gradmc") / "data" / "discs_ising25_hightemp.npz"
    t2 = discs.discs_ising(params=path)
    assert t2.metadata["shape"] == (25, 25)
    np.testing.assert_allclose(logdensities(t2, states), expected, rtol=1e-5, atol=1e-3)


def test_ising_field_sign_and_inner_circle():
    H, W, mu = 8, 10, 0.7
    t = discs.discs_ising(shape=(H, W), sigma=0.0, mu=mu, strength=0.0)
    field = t.metadata["field"].reshape(H, W)
    r, c = np.indices((H, W))
    inner = (r / H - 0.5) ** 2 + (c / W - 0.5) ** 2 < 0.5 / np.pi
    assert inner[H // 2, W // 2] and not inner[0, 0] and 0 < inner.sum() < H * W
    np.testing.assert_allclose(field, np.where(inner, mu, -mu), rtol=1e-6)
    # −Σ b s: the inner region prefers s = −1 (x = 0), the outer s = +1
    best = np.where(inner, 0.0, 1.0).reshape(-1)
    flipped = 1.0 - best
    values = logdensities(t, np.stack([best, flipped]))
    np.testing.assert_allclose(values, [mu * H * W, -mu * H * W], rtol=1e-5)
    # noise: |b ∓ μ| <= σ, and it is not all zero
    noisy = discs.discs_ising(shape=(H, W), temperature="low").metadata["field"].reshape(H, W)
    deviation = noisy - np.where(inner, 1.0, -1.0)
    assert np.all(np.abs(deviation) <= 3.0 + 1e-6) and np.std(deviation) > 0.5


def test_ising_small_is_enumerated_and_gradient_is_quadratic():
    t = discs.discs_ising(shape=(3, 3))
    assert t.truth is not None and t.truth.marginals.shape == (9, 2)
    np.testing.assert_allclose(t.truth.marginals.sum(-1), 1.0, atol=1e-10)
    x = jnp.asarray(np.arange(9) % 2, jnp.float32)
    g = np.asarray(jax.grad(t.logdensity_fn)(x))
    np.testing.assert_allclose(g, 2 * t.metadata["J"] @ np.asarray(x) + t.metadata["b"], rtol=1e-5, atol=1e-5)


def _potts_by_hand(params, labels):
    """λ Σ_<ij> [x_i = x_j] − Σ b_{i, x_i} from DISCS's (3, H, W, C) parameters."""
    w_h, w_v, b = params
    H, W, _ = b.shape
    x = labels.reshape(H, W)
    total = -sum(b[r, c, x[r, c]] for r in range(H) for c in range(W))
    total -= sum(w_h[r, c, x[r, c]] * (x[r, c] == x[r, c + 1]) for r in range(H) for c in range(W - 1))
    total -= sum(w_v[r, c, x[r, c]] * (x[r, c] == x[r + 1, c]) for r in range(H - 1) for c in range(W))
    return total


def test_potts_log_density_and_normalisation():
    C = 3
    t = built("discs-potts", shape=(2, 2), num_categories=C)
    params = t.metadata["params"]
    assert params.shape == (3, 2, 2, C)
    labels = np.array(list(itertools.product(range(C), repeat=4)))
    positions = np.eye(C)[labels]
    by_hand = np.array([_potts_by_hand(params, lab) for lab in labels])
    np.testing.assert_allclose(logdensities(t, positions), by_hand, rtol=1e-5, atol=1e-5)
    probs = np.exp(by_hand - by_hand.max())
    probs /= probs.sum()
    marginals = np.stack([np.bincount(labels[:, i], weights=probs, minlength=C) for i in range(4)])
    np.testing.assert_allclose(t.truth.marginals, marginals, atol=1e-6)
    np.testing.assert_allclose(t.truth.marginals.sum(-1), 1.0, atol=1e-10)
    J, b = t.metadata["J"], t.metadata["b"]
    flat = positions.reshape(len(labels), -1)
    np.testing.assert_allclose(np.einsum("ni,ij,nj->n", flat, J, flat) + flat @ b, by_hand, atol=1e-9)


def test_bernoulli_and_categorical_closed_forms():
    t = discs.discs_bernoulli(shape=7, temperature="low")
    theta = t.metadata["theta"]
    x = np.array([[0, 1, 1, 0, 1, 0, 0]], float)
    np.testing.assert_allclose(logdensities(t, x), x @ theta, rtol=1e-6)
    np.testing.assert_allclose(t.truth.mean, 1 / (1 + np.exp(-theta)))
    assert abs(np.std(discs.discs_bernoulli(shape=4000, temperature="low").metadata["theta"]) - 1.5) < 0.1
    c = discs.discs_categorical(shape=5, num_categories=3)
    theta = c.metadata["theta"]
    labels = np.array([0, 2, 1, 1, 0])
    np.testing.assert_allclose(logdensities(c, np.eye(3)[labels][None]), [theta[np.arange(5), labels].sum()], rtol=1e-6)
    np.testing.assert_allclose(c.truth.marginals.sum(-1), 1.0)


def test_fhmm_log_densities_by_hand():
    L, K = 7, 3  # 2^21 and 3^21 states: above the enumeration limit, no enumeration to compile
    t = discs.discs_fhmm(shape=(L, K))
    m = t.metadata
    x = m["x_true"].reshape(L, K)
    change = x[:-1] != x[1:]
    expected = (
        np.sum(np.where(x[0] == 1, np.log(0.1), np.log(0.9)))
        + np.sum(np.where(change, np.log(0.2), np.log(0.8)))
        - np.sum((m["y"][:, 0] - x @ m["w"][:, 0] - m["b"][0, 0]) ** 2) / (2 * 2.0**2)
    )
    np.testing.assert_allclose(logdensities(t, m["x_true"][None]), [expected], rtol=1e-5)

    C = 3
    t = discs.discs_fhmm(shape=(L, K), num_categories=C)
    assert t.space == Categorical(C, L * K)
    m = t.metadata
    weights = np.exp(m["log_beta"])  # DISCS's unnormalised transition weights
    d = 0.8 - 0.2 / (C - 1)
    np.testing.assert_allclose(np.diag(weights), d + (1 - d) / (C - 1), rtol=1e-6)
    np.testing.assert_allclose(weights[0, 1], 1 / (C - 1), rtol=1e-6)
    labels = m["x_true"].reshape(L, K, C).argmax(-1)
    expected = (
        m["alpha_logits"][labels[0]].sum()
        + m["log_beta"][labels[:-1], labels[1:]].sum()
        - np.sum((m["y"][0] - m["w"][np.arange(K), labels].sum(-1) - m["b"][0, 0]) ** 2) / (2 * 2.0**2)
    )
    np.testing.assert_allclose(logdensities(t, m["x_true"][None]), [expected], rtol=1e-5)


def test_rbm_marginalises_the_hidden_units():
    t = discs.discs_rbm(num_visible=5, num_hidden=3, seed=3)
    W, b_v, b_h = t.metadata["weights"], t.metadata["b_visible"], t.metadata["b_hidden"]
    v = np.array([1.0, 0.0, 1.0, 1.0, 0.0])
    hidden = np.array(list(itertools.product([0, 1], repeat=3)), float)
    brute = np.log(np.sum(np.exp(v @ W @ hidden.T + hidden @ b_h + v @ b_v)))
    np.testing.assert_allclose(logdensities(t, v[None]), [brute], rtol=1e-5)
    assert t.truth is not None  # 2^5 states: enumerated
    (entry,) = [e for e in registered_targets("discrete") if e.name == "discs-rbm"]
    assert "not available" in entry.description and "checkpoints" in discs.discs_rbm.__doc__


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: discs.discs_ising(temperature="medium"), "temperature"),
        (lambda: discs.discs_ising(shape=1), "shape"),
        (lambda: discs.discs_ising(shape=(3, 3, 3)), "shape"),
        (lambda: discs.discs_ising(seed=-1), "seed"),
        (lambda: discs.discs_ising(params=np.zeros((2, 4, 4))), "params"),
        (lambda: discs.discs_ising(shape=5, params=np.zeros((3, 4, 4))), "shape"),
        (lambda: discs.discs_potts(num_categories=1), "num_categories"),
        (lambda: discs.discs_potts(num_categories=3, params=np.zeros((3, 3, 3, 4))), "num_categories"),
        (lambda: discs.discs_fhmm(beta=1.5, shape=(3, 2)), "beta"),
        (lambda: discs.discs_fhmm(shape=(1, 2)), "L >= 2"),
        (lambda: discs.discs_rbm(num_hidden=0), "num_hidden"),
        (lambda: discs.discs_bernoulli(sigma=float("nan"), shape=3), "sigma"),
    ],
)
def test_bad_target_options_raise(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_initial_states_need_a_discs_target():
    from gradmc.base import Target

    plain = Target("plain", lambda x: jnp.sum(x), Binary(3))
    with pytest.raises(ValueError, match="not a DISCS target"):
        discs.discs_initial_states(plain, 2)
    with pytest.raises(ValueError, match="num_chains"):
        discs.discs_initial_states(discs.discs_bernoulli(shape=3), 0)


# -- the metric ----------------------------------------------------------------------------


def _lcg_series(chains, n, seed):
    """A deterministic integer series (an LCG mod 7, moving sums of 4: autocorrelated)."""
    state, raw = seed, np.zeros((chains, n))
    for c in range(chains):
        for t in range(n):
            state = (1103515245 * state + 12345) % 2**31
            raw[c, t] = state % 7
    return np.stack([np.convolve(row, np.ones(4), mode="valid") for row in raw])


def test_ess_matches_tfp_reference_values():
    # tfp.mcmc.effective_sample_size(x.T) (TFP 0.25, float64, default arguments)
    x = _lcg_series(3, 60, 2023)
    tfp_values = [17.525112098172183, 14.714728582215377, 17.285405523903187]
    np.testing.assert_allclose(discs_ess(x), tfp_values, rtol=1e-12)
    np.testing.assert_allclose(discs_ess(x[1]), tfp_values[1], rtol=1e-12)  # one chain, (draws,)


def _ar1(rho, chains, n, seed):
    rng = np.random.default_rng(seed)
    e = rng.normal(size=(chains, n))
    e[:, 0] /= math.sqrt(1 - rho**2)  # start in the stationary distribution
    return lfilter([1.0], [1.0, -rho], e, axis=-1)


@pytest.mark.parametrize("rho", [0.5, 0.8])
def test_ess_of_ar1_matches_formula(rho):
    chains, n = 40, 8000
    x = _ar1(rho, chains, n, seed=11)
    tau = (1 + rho) / (1 - rho)
    # Tolerance from n: the sum stops near the lag M where rho^M falls to the noise level
    # sqrt(tau / n) of one autocorrelation estimate; the truncated sum then has relative
    # sd sqrt(2 (2M + 1) / n) per chain (Priestley 1981, §5.3), sqrt(chains) less for the
    # mean, and the dropped tail 2 rho^M / (1 - rho) biases tau down at most that much.
    M = math.ceil(math.log(math.sqrt(tau / n)) / math.log(rho))
    sd = math.sqrt(2 * (2 * M + 1) / n / chains)
    bias = 2 * rho**M / (1 - rho) / tau
    tol = 4 * sd + bias
    ratio = discs_ess(x).mean() / n
    assert abs(ratio / (1 / tau) - 1) < tol, (ratio, 1 / tau, tol)


def test_ess_truncation_rule_and_constant_chains():
    x = _ar1(-0.5, 3, 2000, seed=5)  # R_1 < 0: the sum stops at lag 0, ESS = n
    np.testing.assert_allclose(discs_ess(x), 2000.0)
    assert discs_ess(np.ones((2, 10))).tolist() == [1.0, 1.0]  # NaN -> 1, as DISCS
    exact_zero = np.array([0.0, 1.0, 0.0, -1.0] * 5)  # R_1 = 0 exactly: not truncated by it
    assert discs_ess(exact_zero) > 0


def test_statistic_hamming_and_label_l1():
    draws = np.array([[[0, 1, 1], [1, 1, 1]], [[0, 0, 0], [1, 0, 1]]], float)  # (2, 2, 3)
    ref = np.array([0.0, 1.0, 0.0])
    np.testing.assert_array_equal(discs_statistic(draws, ref, Binary(3)), [[1, 2], [1, 3]])
    np.testing.assert_array_equal(discs_statistic(2 * draws - 1, 2 * ref - 1, Spin(3)), [[1, 2], [1, 3]])
    labels = np.array([[[0, 3], [2, 2]]])  # (1 chain, 2 draws, d = 2)
    onehot = np.eye(4)[labels]
    ref = np.eye(4)[[1, 1]]
    np.testing.assert_array_equal(discs_statistic(onehot, ref, Categorical(4, 2)), [[3, 2]])


def test_ess_per_step_shapes_and_second_half():
    rng = np.random.default_rng(0)
    chains, steps, d = 4, 101, 6
    draws = (rng.random((chains, steps, d)) < 0.5).astype(np.float32)
    ref = np.zeros(d)
    result = discs_ess_per_step(draws, ref, Binary(d), num_evals=2 * steps)
    assert isinstance(result, DiscsESS)
    assert result.num_steps == steps - steps // 2 == 51
    stat = discs_statistic(draws, ref, Binary(d))[:, steps // 2 :]
    np.testing.assert_allclose(result.ess_per_chain, discs_ess(stat))
    assert result.ess_per_chain.shape == (chains,)
    assert result.ess_mean == pytest.approx(result.ess_per_chain.mean())
    assert result.ess_std == pytest.approx(result.ess_per_chain.std())
    assert result.ess_per_step == pytest.approx(result.ess_mean / 51)
    assert result.ess_per_eval == pytest.approx(result.ess_mean / (2 * 51))
    assert discs_ess_per_step(draws, ref, Binary(d)).ess_per_eval is None
    full = discs_ess_per_step(draws, ref, Binary(d), discard=0.0)
    assert full.num_steps == steps


def test_metric_on_a_discs_target_reference():
    t = built("discs-potts", shape=(2, 2), num_categories=3)
    starts = np.asarray(discs.discs_initial_states(t, 5))
    draws = np.repeat(starts[:, None], 4, axis=1)  # chains that never move
    result = discs_ess_per_step(draws, t.metadata["reference"], t.space)
    assert result.ess_per_chain.tolist() == [1.0] * 5


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: discs_statistic(np.zeros((2, 3)), np.zeros(3), Binary(3)), "shaped"),
        (lambda: discs_statistic(np.zeros((2, 3, 4)), np.zeros(3), Binary(3)), "shaped"),
        (lambda: discs_statistic(np.zeros((2, 3, 3)), np.zeros(4), Binary(3)), "reference"),
        (lambda: discs_statistic(np.zeros((2, 3, 3)), np.array([0, 2, 1]), Binary(3)), "reference has entries"),
        (lambda: discs_statistic(np.full((2, 3, 3), 0.5), np.zeros(3), Binary(3)), "draws has entries"),
        (lambda: discs_statistic(np.zeros((1, 2, 2, 3)), np.ones((2, 3)), Categorical(3, 2)), "not one-hot"),
        (lambda: discs_statistic(np.zeros((1, 2, 2, 3)), np.eye(3)[[0, 1]], Categorical(3, 2)), "draws has a row"),
        (lambda: discs_statistic(np.zeros((1, 2, 3)), np.zeros(3), "binary"), "discrete space"),
        (lambda: discs_ess(np.zeros((2, 3, 4))), "shaped"),
        (lambda: discs_ess(np.zeros((2, 1))), "at least 2"),
        (lambda: discs_ess(np.array([1.0, np.nan, 2.0])), "non-finite"),
        (lambda: discs_ess_per_step(np.zeros((2, 10, 3)), np.zeros(3), Binary(3), discard=1.0), "discard"),
        (lambda: discs_ess_per_step(np.zeros((2, 2, 3)), np.zeros(3), Binary(3)), "kept steps"),
        (lambda: discs_ess_per_step(np.zeros((2, 10, 3)), np.zeros(3), Binary(3), num_evals=0), "num_evals"),
    ],
)
def test_bad_metric_input_raises(call, match):
    with pytest.raises(ValueError, match=match):
        call()
