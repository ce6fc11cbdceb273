"""gradmc.random: the proposals' uniforms, normals and bits (both words of each threefry block)."""

import jax
import jax.numpy as jnp
import numpy as np
from scipy import stats

from gradmc.random import bits, normal, uniform


def test_uniform_and_normal_are_distributed_correctly():
    """KS tests (p > 0.001) of 100,000 uniforms and normals; the two words of a threefry
    block (entries i and i + n/2) are independent: chi-square of their joint 10×10 histogram."""
    n = 100_000
    u = np.asarray(uniform(jax.random.key(11), (n,)), np.float64)
    assert u.min() >= 0.0 and u.max() < 1.0
    assert stats.kstest(u, "uniform").pvalue > 1e-3
    joint = np.histogram2d(u[: n // 2], u[n // 2 :], bins=10, range=[[0, 1], [0, 1]])[0]
    assert stats.chisquare(joint.ravel()).pvalue > 1e-3
    z = np.asarray(normal(jax.random.key(12), (n,)), np.float64)
    assert np.all(np.isfinite(z)) and stats.kstest(z, "norm").pvalue > 1e-3
    batched = jax.vmap(lambda k: uniform(k, (3, 5)))(jax.random.split(jax.random.key(13), 4))
    assert batched.shape == (4, 3, 5) and len(np.unique(np.asarray(batched))) == 60


def test_uniform_falls_back_for_other_generators():
    key = jax.random.key(0, impl="rbg")
    np.testing.assert_array_equal(np.asarray(uniform(key, (7,))), np.asarray(jax.random.uniform(key, (7,))))
    raw = jax.random.PRNGKey(3)  # a raw threefry key takes the fast path too
    assert uniform(raw, (7,)).shape == (7,)


def test_bits_are_uniform_words():
    """Each of the 32 bit positions of 50,000 words is set with probability 1/2 (binomial
    z-test, Bonferroni at p = 0.01), and the words of one block are not equal."""
    n = 50_000
    words = np.asarray(bits(jax.random.key(14), (n,)), np.uint64)
    ones = np.array([np.sum((words >> np.uint64(j)) & np.uint64(1)) for j in range(32)])
    z = np.abs(ones - n / 2) / np.sqrt(n / 4)
    assert z.max() < stats.norm.ppf(1 - 0.005 / 32)
    assert np.mean(words[: n // 2] == words[n // 2 :]) < 1e-3
    assert bits(jax.random.key(0, impl="rbg"), (3, 2)).dtype == jnp.uint32
