"""Discrete spaces and the shared factorised-proposal routine (Rhodes & Gutmann 2022, eqs 8, 13, 17, 25, 40)."""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from gradmc.discrete.proposals import (
    factorised_logits,
    factorised_logprob,
    factorised_proposal,
    factorised_sample,
    sample_logits_scored,
)
from gradmc.spaces import Binary, Categorical, Count, Ordinal, Product, Real, Spin

ORDINAL_VALUES = np.linspace(-1.5, 3.0, 5)
SPACES = {
    "binary": Binary(3),
    "spin": Spin(3),
    "ordinal": Ordinal(ORDINAL_VALUES, 2),
    "ordinal2": Ordinal([-0.5, 2.0], 3),  # two values: the logistic fast path, like binary and spin
    "categorical": Categorical(3, 2),
}
TWO_VALUED = ["binary", "spin", "ordinal2"]


def all_states(space):
    """Every position of a small space (as a (n, *event) array) in a fixed order."""
    index = np.array(list(itertools.product(range(space.num_values), repeat=space.d)))
    return np.asarray(space.from_index(index))


def state_ids(space, positions):
    """Position -> its row in :func:`all_states` (the first coordinate varies slowest)."""
    index = np.asarray(space.to_index(positions))
    return (index * space.num_values ** np.arange(space.d)[::-1]).sum(-1)


# -- spaces -----------------------------------------------------------------------------


def test_value_sets_and_shapes():
    assert Binary(4).values.tolist() == [0.0, 1.0] and Binary(4).event_shape == (4,)
    assert Spin(2).values.tolist() == [-1.0, 1.0]
    o = Ordinal([0.0, 0.5, 2.0], 3)
    assert o.event_shape == (3,) and o.num_values == 3 and o.is_discrete
    c = Categorical(3, 2)
    assert c.event_shape == (2, 3) and c.values.shape == (3, 3) and c.dim == 6
    assert not Real(2).is_discrete
    assert Binary(3) == Binary(3) and Binary(3) != Spin(3) and hash(Binary(3)) == hash(Binary(3))
    count = Count(2, 40, low=1)
    assert count.values.tolist() == list(range(1, 41)) and str(count) == "Count(1..40, d=2)"
    assert count == Count(2, 40, 1) and count != Ordinal(np.arange(1.0, 41.0), 2)


@pytest.mark.parametrize("name", list(SPACES))
def test_index_roundtrip_and_validate(name):
    space = SPACES[name]
    states = all_states(space)
    assert states.shape == (space.size, *space.event_shape)
    space.validate(states)  # every state is valid
    index = np.asarray(space.to_index(states))
    np.testing.assert_array_equal(np.asarray(space.from_index(index)), states)
    np.testing.assert_array_equal(state_ids(space, states), np.arange(space.size))


@pytest.mark.parametrize("name", list(SPACES))
def test_sample_uniform_is_uniform(name):
    """Chi-square test (p > 0.001) of 20,000 uniform draws over all states."""
    space = SPACES[name]
    draws = jax.vmap(space.sample_uniform)(jax.random.split(jax.random.key(0), 20_000))
    space.validate(np.asarray(draws))
    state = state_ids(space, draws)
    counts = np.bincount(state, minlength=space.size)
    assert stats.chisquare(counts).pvalue > 1e-3


@pytest.mark.parametrize(
    "space, bad, match",
    [
        (Binary(2), [0.5, 1.0], "outside the value set"),
        (Spin(2), [0.0, 1.0], "outside the value set"),
        (Ordinal([0.0, 1.0, 2.5], 2), [1.0, 2.0], "outside the value set"),
        (Binary(2), [0.0, np.nan], "non-finite"),
        (Binary(3), [0.0, 1.0], "shape"),
        (Categorical(3, 2), [[1.0, 1.0, 0.0], [0.0, 0.0, 1.0]], "one-hot"),
        (Categorical(3, 2), [[0.5, 0.5, 0.0], [0.0, 0.0, 1.0]], "one-hot"),
        (Categorical(3, 2), [[0.0, 0.0, 0.0], [0.0, 0.0, 1.0]], "one-hot"),
        (Categorical(3, 2), [1.0, 0.0, 0.0], "shape"),
    ],
)
def test_validate_rejects(space, bad, match):
    with pytest.raises(ValueError, match=match):
        space.validate(np.asarray(bad))


@pytest.mark.parametrize(
    "make",
    [
        lambda: Binary(0),
        lambda: Spin(1.5),
        lambda: Ordinal([1.0, 0.0], 2),
        lambda: Ordinal([1.0], 2),
        lambda: Ordinal([0.0, np.inf], 2),
        lambda: Categorical(1, 2),
        lambda: Categorical(3, 0),
        lambda: Count(2, 0),
        lambda: Count(2, 70000),
        lambda: Count(2, 10.5),
    ],
)
def test_constructor_errors(make):
    with pytest.raises(ValueError):
        make()


# -- the factorised proposal -------------------------------------------------------------


def ncg_coefficients(space, eps, seed):
    """(a, b) of eq. 8 at a random state with a random gradient (categorical: eq. 25)."""
    key_s, key_g = jax.random.split(jax.random.key(seed))
    s = space.sample_uniform(key_s)
    g = 2.0 * jax.random.normal(key_g, space.event_shape)
    return 0.5 * g + s / eps, -0.5 / eps


_batched_draw = jax.jit(
    lambda keys, a, b, space: jax.vmap(lambda k: factorised_proposal(k, a, b, space))(keys), static_argnums=3
)


@pytest.mark.parametrize("name", list(SPACES))
@pytest.mark.parametrize("eps", [0.01, 0.1, 1.0, 10.0, 1000.0])
def test_factorised_normalises_and_matches_samples(name, eps):
    """Σ_s q(s) = 1 over the enumerated space, and 20,000 draws pass a chi-square test
    (p > 0.001; cells with expected count < 5 pooled, as the test's approximation needs)."""
    space = SPACES[name]
    a, b = ncg_coefficients(space, eps, seed=hash((name, eps)) % 1000)
    states = all_states(space)
    logq = np.asarray(jax.vmap(lambda s: factorised_logprob(s, a, b, space))(jnp.asarray(states)), np.float64)
    assert np.all(np.isfinite(logq) | (logq == -np.inf))
    np.testing.assert_allclose(np.exp(logq).sum(), 1.0, atol=1e-4)

    n = 20_000
    draws = np.asarray(_batched_draw(jax.random.split(jax.random.key(1), n), a, b, space))
    space.validate(draws)
    state = state_ids(space, draws)
    observed = np.bincount(state, minlength=space.size).astype(float)
    expected = n * np.exp(logq) / np.exp(logq).sum()
    small = expected < 5
    if small.any():
        observed = np.append(observed[~small], observed[small].sum())
        expected = np.append(expected[~small], expected[small].sum())
    keep = expected > 0
    assert observed[~keep].sum() == 0  # no draws where q is 0
    if keep.sum() > 1:
        assert stats.chisquare(observed[keep], expected[keep]).pvalue > 1e-3


def test_factorised_is_stable_for_extreme_logits():
    """Logits of size 1e5 (ε = 1e-4 with values up to 3) give finite, normalised log-probs."""
    space = Ordinal(np.linspace(-1.5, 3.0, 50), 3)
    s = space.from_index(jnp.array([0, 25, 49]))
    a, b = s / 1e-4, -0.5 / 1e-4
    logq_here = factorised_logprob(s, a, b, space)
    assert np.isfinite(logq_here) and abs(float(logq_here)) < 1e-3  # the current state has all mass
    draw = factorised_proposal(jax.random.key(0), a, b, space)
    np.testing.assert_array_equal(np.asarray(draw), np.asarray(s))


def test_categorical_b_term_cancels_within_rows():
    """On one-hot rows s⊙s = s, so a per-row b does not change q (eq. 25)."""
    space = Categorical(4, 3)
    a = jax.random.normal(jax.random.key(3), (3, 4))
    s = space.sample_uniform(jax.random.key(4))
    lp0 = factorised_logprob(s, a, None, space)
    lp1 = factorised_logprob(s, a, jnp.array([1.0, -7.0, 30.0]), space)
    np.testing.assert_allclose(lp0, lp1, rtol=1e-5, atol=1e-5)


# -- the two-valued (logistic) fast path -------------------------------------------------


def test_to_index_is_the_nearest_value():
    """The midpoint count of to_index equals the nearest value (argmin of the distance) on
    real inputs around every value set, ties going to the lower value."""
    x = jax.random.uniform(jax.random.key(5), (2000,), minval=-3.0, maxval=4.0)
    for space in (Binary(1), Spin(1), Ordinal(ORDINAL_VALUES, 1), Ordinal([-0.5, 2.0], 1)):
        v = np.asarray(space.values)
        nearest = np.argmin(np.abs(np.asarray(x)[:, None] - v), axis=-1)
        np.testing.assert_array_equal(np.asarray(space.to_index(x)), nearest)
        midpoint = 0.5 * (v[0] + v[1])
        assert int(space.to_index(jnp.float32(midpoint))) == 0
    assert [s.is_two_valued for s in SPACES.values()] == [True, True, False, True, False]


@pytest.mark.parametrize("name", TWO_VALUED)
@pytest.mark.parametrize("eps", [0.01, 0.1, 10.0, 1000.0])
def test_two_valued_fast_path_matches_log_sum_exp(name, eps):
    """On every state of a two-valued space the logistic log q equals the stacked
    log-sum-exp of eq. 8 (float64 reference); the draw returns its own index and score."""
    space = SPACES[name]
    a, b = ncg_coefficients(space, eps, seed=7)
    logits = np.asarray(factorised_logits(a, b, space), np.float64)
    ref_lp = logits - np.logaddexp(logits[:, 0], logits[:, 1])[:, None]
    states = all_states(space)
    index = np.asarray(space.to_index(states))
    reference = np.take_along_axis(ref_lp[None], index[..., None], -1)[..., 0].sum(-1)
    logq = np.asarray(jax.vmap(lambda s: factorised_logprob(s, a, b, space))(jnp.asarray(states)))
    np.testing.assert_allclose(logq, reference, rtol=1e-5, atol=1e-4 * (1 + np.abs(reference).max() * 1e-3))
    for key in jax.random.split(jax.random.key(2), 5):
        position, index, logq_draw = factorised_sample(key, a, b, space)
        np.testing.assert_array_equal(np.asarray(space.from_index(index)), np.asarray(position))
        np.testing.assert_allclose(logq_draw, factorised_logprob(position, a, b, space), rtol=1e-6, atol=1e-5)


@pytest.mark.parametrize("name", TWO_VALUED)
def test_two_valued_fast_path_extreme_gaps(name):
    """Logit gaps of ±1e5 (ε = 1e-4) put all mass on the current state, finitely; a NaN
    gradient gives a NaN score (so the MH test rejects the proposal)."""
    space = SPACES[name]
    s = space.from_index(jnp.array([0, 1, 0]))
    a, b = s / 1e-4, -0.5 / 1e-4
    assert np.isfinite(factorised_logprob(s, a, b, space)) and abs(float(factorised_logprob(s, a, b, space))) < 1e-6
    other = space.from_index(jnp.array([1, 1, 0]))
    assert float(factorised_logprob(other, a, b, space)) < -1e3
    position, _, logq = factorised_sample(jax.random.key(0), a, b, space)
    np.testing.assert_array_equal(np.asarray(position), np.asarray(s))
    assert abs(float(logq)) < 1e-6
    assert np.isnan(factorised_logprob(s, a.at[0].set(jnp.nan), b, space))
    assert np.isnan(factorised_sample(jax.random.key(0), a.at[0].set(jnp.nan), b, space)[2])


@pytest.mark.parametrize("n", [50, 1500])  # one level, and two levels (blocks) for long rows
def test_sample_logits_scored_matches_softmax(n):
    """Draws over n logits (every 7th and the last −inf) pass a chi-square test against
    softmax (p > 0.001; cells with expected count < 5 pooled), never hit a −inf entry,
    and come with their exact log-probability."""
    logits = 2.0 * jax.random.normal(jax.random.key(21), (n,))
    logits = logits.at[::7].set(-jnp.inf).at[n - 1].set(-jnp.inf)
    draws = 200_000
    index, logp = jax.jit(jax.vmap(lambda k: sample_logits_scored(k, logits)))(
        jax.random.split(jax.random.key(22), draws)
    )
    index, logp = np.asarray(index), np.asarray(logp, np.float64)
    p = np.exp(np.asarray(logits, np.float64) - np.logaddexp.reduce(np.asarray(logits, np.float64)))
    assert np.all(p[index] > 0)
    np.testing.assert_allclose(logp, np.log(p[index]), atol=1e-4)
    observed, expected = np.bincount(index, minlength=n).astype(float), draws * p
    small, keep = (expected < 5) & (expected > 0), expected >= 5
    obs, exp = observed[keep], expected[keep]
    if small.any():
        obs, exp = np.append(obs, observed[small].sum()), np.append(exp, expected[small].sum())
    assert stats.chisquare(obs, exp * obs.sum() / exp.sum()).pvalue > 1e-3


def test_discrete_groups_put_one_site_parts_on_equal_spaces_together():
    space = Product(
        {
            "mu": Real(2),
            "s0": Binary(1),
            "z": Binary(3),
            "s1": Binary(1),
            "n0": Count(1, 20),
            "n1": Count(1, 30),  # another upper end: another space
            "s2": Binary(1),
        }
    )
    assert space.discrete_groups() == [("s0", "s1", "s2"), ("z",), ("n0",), ("n1",)]
