"""Textbook Example 5.9 (Ising image denoising): the posterior, its samplers, the figure."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gradmc.enumeration import enumerate_target
from gradmc.experiments.textbook_denoising import denoise, denoising_logdensity, grid_bonds, posterior_mean
from gradmc.spaces import Spin


def test_full_conditional_is_the_textbooks():
    """p(x_ij = 1 | rest, y) = σ(2 (J W_ij + y_ij/σ²)) for every pixel of a random state."""
    rng = np.random.default_rng(0)
    y = rng.normal(size=(4, 5))
    J, sigma = 4.0, 1.3
    f = denoising_logdensity(y, J, sigma)
    x = np.where(rng.random(20) < 0.5, -1.0, 1.0)
    grid = x.reshape(4, 5)
    padded = np.pad(grid, 1)
    W = padded[:-2, 1:-1] + padded[2:, 1:-1] + padded[1:-1, :-2] + padded[1:-1, 2:]
    for i in range(20):
        up, down = x.copy(), x.copy()
        up[i], down[i] = 1.0, -1.0
        q = 1 / (1 + np.exp(-(float(f(jnp.asarray(up))) - float(f(jnp.asarray(down))))))
        expected = 1 / (1 + np.exp(-2 * (J * W.ravel()[i] + y.ravel()[i] / sigma**2)))
        assert abs(q - expected) < 1e-4


def test_grid_bonds_count():
    assert grid_bonds((3, 4)).shape == (3 * 3 + 2 * 4, 2)


@pytest.mark.parametrize("name,step_size", [("Gibbs (systematic sweeps)", None), ("GWG", None)])
def test_posterior_mean_matches_enumeration(name, step_size):
    """3x3 image (512 states), J = 0.5 and a weak field so every pixel is uncertain: posterior means within MCSE
    (batch means over 20 independent chains, Bonferroni over 9 pixels at p = 0.01)."""
    from scipy.stats import norm

    y = 0.5 * np.random.default_rng(1).normal(size=(3, 3))
    f = denoising_logdensity(y, 0.5, 1.0)
    exact = enumerate_target(f, Spin(9)).mean
    steps = 400 if name.startswith("Gibbs") else 6000
    means = posterior_mean(
        f,
        9,
        name,
        num_steps=steps,
        burn_in=steps // 10,
        key=jax.random.key(0),
        start=np.ones(9),
        step_size=step_size,
        num_chains=20,
    )
    z = (means.mean(0) - exact) / (means.std(0, ddof=1) / np.sqrt(len(means)))
    assert np.all(np.abs(z) < norm.ppf(1 - 0.01 / 18)), z


def test_denoise_builtin_and_png(tmp_path):
    from PIL import Image

    res = denoise(out=tmp_path, samplers={"Gibbs (systematic sweeps)": None}, sweeps=6)
    assert res["figure"].is_file()
    assert res["errors"]["Gibbs (systematic sweeps)"] < 0.5 * res["errors"]["noisy (sign of y)"]
    img = np.zeros((20, 24), np.uint8)
    img[5:15, 6:18] = 255
    path = tmp_path / "box.png"
    Image.fromarray(img).save(path)
    res = denoise(path, out=tmp_path, samplers={"Gibbs (systematic sweeps)": None}, sweeps=6)
    assert res["clean"].shape == (20, 24) and (tmp_path / "denoising_box.png").is_file()
    with pytest.raises(ValueError, match="does not exist"):
        denoise(tmp_path / "missing.png")
    (tmp_path / "bad.png").write_text("not an image")
    with pytest.raises(ValueError, match="not an image"):
        denoise(tmp_path / "bad.png")
    with pytest.raises(ValueError, match="sigma"):
        denoising_logdensity(np.zeros((3, 3)), 4.0, 0.0)
