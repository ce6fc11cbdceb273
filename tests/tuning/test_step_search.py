"""App. H step-size search: grids, the batched mean-jump score, and the chosen value."""

import jax.numpy as jnp
import numpy as np
import pytest
from scipy.special import expit

import gradmc  # noqa: F401  (registers every sampler)
from gradmc.base import Target
from gradmc.registry import UnknownNameError
from gradmc.spaces import Binary, Ordinal
from gradmc.tuning.step_search import RADIUS_GRID, STEP_SIZE_GRID, decile_grid, mean_jumps, radius_grid, search

FLAT_BINARY = Target("flat-binary", lambda s: 0.0 * jnp.sum(s), Binary(4))
FLAT_ORDINAL = Target("flat-ordinal", lambda s: 0.0 * jnp.sum(s), Ordinal(np.linspace(-1.5, 3.0, 50), 3))


def test_grids():
    np.testing.assert_allclose(decile_grid(0.5), np.arange(1, 11) / 10)
    np.testing.assert_allclose(decile_grid(0.05), np.arange(1, 11) / 100)
    np.testing.assert_allclose(decile_grid(5.0), np.arange(1, 11))
    np.testing.assert_allclose(decile_grid(500.0), np.arange(1, 11) * 100)
    np.testing.assert_array_equal(radius_grid(15, 49), [15, 16, 17, 18, 19])
    np.testing.assert_array_equal(radius_grid(1, 3), [1, 2, 3])
    assert len(STEP_SIZE_GRID) + len(decile_grid(0.5)) == 15  # "in total, 15 values" (App. H)


def test_mean_jump_matches_theory_on_a_flat_target():
    """On f = 0, NCG flips each binary coordinate independently with probability
    σ(−1/(2ε)) (eq. 8) and accepts everything, so the mean jump is d·σ(−1/(2ε)); the C·T·d
    flips are independent, giving a z-test (|z| < 3.29, p = 0.001 per value)."""
    chains, steps, d = 8, 400, 4
    values = np.asarray(STEP_SIZE_GRID)
    got = mean_jumps(FLAT_BINARY, "ncg", "step_size", values, num_chains=chains, num_steps=steps, seed=1)
    p = expit(-1.0 / (2.0 * values))
    z = (got - d * p) / np.sqrt(d * p * (1 - p) / (chains * steps))
    assert np.all(np.abs(z) < 3.29), z


def test_search_picks_the_largest_jump():
    """The mean jump grows with ε on the flat target: the coarse stage picks 500 and the
    second stage searches its decade {100, …, 1000}."""
    result = search(FLAT_BINARY, "ncg", num_chains=8, num_steps=200, seed=0)
    assert result.param == "step_size"
    np.testing.assert_allclose(result.values[0], STEP_SIZE_GRID)
    assert np.all(np.diff(result.mean_jumps[0]) > 0)
    np.testing.assert_allclose(result.values[1], np.arange(1, 11) * 100.0)
    assert result.best in result.values[1]


def test_radius_search():
    """MH-uniform on a flat 50-value ordinal target: larger boxes jump further."""
    result = search(FLAT_ORDINAL, "mh-uniform", num_chains=8, num_steps=200, seed=0)
    assert result.param == "radius"
    np.testing.assert_array_equal(result.values[0], RADIUS_GRID)
    assert np.all(np.diff(result.mean_jumps[0]) > 0)
    np.testing.assert_array_equal(result.values[1], [20, 21, 22, 23, 24])
    assert isinstance(result.best, int) and result.best >= 20


def test_search_with_pavg_warmup():
    """PAVG learns M at each fixed ε during the search's warm-up (App. H, last paragraph)."""
    target = Target("quad", lambda s: -jnp.sum((s - 1.0) ** 2) + 0.3 * s[0] * s[1], Ordinal(np.arange(4.0), 3))
    result = search(target, "pavg", num_chains=4, num_steps=50, num_warmup=200, seed=0, refine=False)
    assert len(result.values) == 1 and np.all(np.isfinite(result.mean_jumps[0]))
    assert result.best in STEP_SIZE_GRID


@pytest.mark.parametrize(
    "kwargs, error",
    [
        ({"sampler": "ncg", "param": "temperature"}, ValueError),
        ({"sampler": "ncg", "num_chains": 0}, ValueError),
        ({"sampler": "ncg", "num_warmup": -1}, ValueError),
        ({"sampler": "no-such-sampler"}, UnknownNameError),
    ],
)
def test_bad_search_input(kwargs, error):
    with pytest.raises(error):
        search(FLAT_BINARY, **kwargs)
