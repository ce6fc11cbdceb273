"""The log density at every value of one site (gradmc.discrete.site_values) equals vmap's."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.scipy.special import gammaln, xlogy

from gradmc.discrete.site_values import logdensities_at

T = 12
COUNTS = jnp.asarray(np.random.default_rng(0).poisson(3.0, T), jnp.float32)
VALUES = jnp.arange(T, dtype=jnp.float32)
YEARS = jnp.arange(T)


def change_point(x):  # the rate changes at s = x[0]
    rate = jnp.where(YEARS < x[0], 4.0, 1.5)
    return jnp.sum(COUNTS * jnp.log(rate) - rate)


def poisson_as_numpyro(x):  # NumPyro's Poisson log-probability: xlogy (a custom JVP) and lgamma
    rate = jnp.where(jnp.arange(T) < x[0].round().astype(jnp.int32), 4.0, 1.5)
    return jnp.sum(xlogy(COUNTS, rate) - gammaln(COUNTS + 1) - rate)


def nonfinite(x):  # a branch at 0 (log: -inf) and one at -1 (log: NaN)
    after = jnp.where(YEARS >= x[0], 0.0, 1.0)
    return jnp.sum(jnp.log(after)) + jnp.sum(jnp.log(jnp.where(YEARS > x[0] + 8, -1.0, 1.0)))


def plus_infinite(x):
    return jnp.sum(jnp.where(YEARS < x[0], jnp.inf, 0.0)) + jnp.sum(jnp.where(YEARS < 3, -x[0], 0.0))


def arithmetic(x):  # s used as a number: batched as vmap would
    return -0.5 * (x[0] - 3.0) ** 2 + jnp.sum(jnp.where(x[0] > YEARS, COUNTS, 0.0))


def indexing(x):  # s as an index: batched
    return jnp.log(jnp.arange(1.0, T + 1.0))[x[0].astype(jnp.int32)] + change_point(x)


def two_masks(x):  # two comparisons: two masks, combined by materialising them
    return jnp.sum(jnp.where(YEARS < x[0], 1.0, 2.0) * jnp.where(YEARS >= x[0] - 2, 3.0, 0.5))


@jax.jit
def inner(rate):
    return COUNTS * jnp.log(rate) - rate


def nested(x):  # a jitted function inside, and a site on the left of its comparison
    return jnp.sum(inner(jnp.where(x[0] > YEARS, 4.0, 1.5)))


def matrix(x):  # a mask broadcast along a second axis, summed over both
    rates = jnp.where((YEARS < x[0])[:, None], jnp.array([4.0, 2.0]), jnp.array([1.0, 0.5]))
    return jnp.sum(jnp.log(rates) * COUNTS[:, None] - rates)


def custom_rules_free_and_batched(x):  # xlogy (a custom JVP) of constants, and of s used as a number
    prior = jnp.sum(xlogy(jnp.array([[0.0], [1.0]]), 0.3))
    return prior + xlogy(2.0, x[0] + 1.0) + change_point(x)


def masked_scalar_times_site(x):  # one entry of a mask, a scalar, times s: batched
    return jnp.where(YEARS < x[0], 1.0, 0.5)[3] * x[0]


@pytest.mark.parametrize(
    "fn",
    [
        change_point,
        poisson_as_numpyro,
        nonfinite,
        plus_infinite,
        arithmetic,
        indexing,
        two_masks,
        nested,
        matrix,
        custom_rules_free_and_batched,
        masked_scalar_times_site,
    ],
)
def test_equals_the_batched_evaluation(fn):
    direct = jax.jit(jax.vmap(lambda v: fn(jnp.full((1,), v))))(VALUES)
    read = jax.jit(lambda: logdensities_at(fn, VALUES, (1,), jnp.float32))()
    np.testing.assert_array_equal(np.isnan(read), np.isnan(direct))
    np.testing.assert_allclose(read, direct, rtol=1e-5, atol=1e-5)


def test_a_site_set_into_a_larger_position():
    """The block's value set into a full position (as a composed sweep's conditional does) and
    read back by slices: the other entries stay free of s."""

    def joint(flat):
        early, late, s = jnp.split(flat, 3)
        rate = jnp.where(YEARS < s[0], jnp.exp(early[0]), jnp.exp(late[0]))
        return jnp.sum(COUNTS * jnp.log(rate) - rate) + early[0] + late[0]

    @jax.jit
    def both(position):
        def conditional(x):
            return joint(position.at[np.array([2])].set(jnp.ravel(x)))

        return jax.vmap(lambda v: conditional(jnp.full((1,), v)))(VALUES), logdensities_at(
            conditional, VALUES, (1,), jnp.float32
        )

    direct, read = both(jnp.array([1.2, 0.3, 5.0]))
    np.testing.assert_allclose(read, direct, rtol=1e-5, atol=1e-5)


def test_a_change_point_takes_its_logarithms_once():
    """The per-year logarithms are taken once, not once per value: no log on k × T entries."""
    jaxpr = jax.make_jaxpr(lambda: logdensities_at(change_point, VALUES, (1,), jnp.float32))()

    def logs(jaxpr):
        for eqn in jaxpr.eqns:
            if eqn.primitive.name == "log":
                yield eqn.outvars[0].aval.size
            for sub in jax.extend.core.jaxprs_in_params(eqn.params):
                yield from logs(sub)

    sizes = list(logs(jaxpr.jaxpr))
    assert sizes and max(sizes) <= T
