"""The convolutional energy-based model of Rhodes & Gutmann (2022) §5.4, App. O.

f(s; J, b, θ) = sᵀJs + bᵀs + net_θ(s) (the authors' code has no ½; §5.4 writes ½sᵀJs),
s = 2x − 1 ∈ {−1, +1}^256 for a 16×16 binary image x, with net_θ the 7-layer SiLU CNN of
Table 14a (Equinox): Conv(1→16, 3, s1, p1), Conv(16→32, 4, s2, p1), Conv(32→32, 3, 1, 1),
Conv(32→64, 4, 2, 1), Conv(64→64, 3, 1, 1), Conv(64→128, 4, 2, 1), Conv(128→128, 2, 1, 0),
each followed by SiLU, giving 128 features at 1×1; a linear read-out 128 → 1 (our reading:
the table stops at the last SiLU) makes it a scalar.

* :func:`load_digits16` — the vendored ``digits16`` data (5000 images, packed bits) as spins.
* :class:`EBMParams`, :func:`init_params`, :func:`logdensity` — the model as a pytree, for
  :class:`gradmc.learn.pcd.PCD` (``logdensity(params, s)``).
"""

from __future__ import annotations

from importlib import resources
from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["load_digits16", "ConvNet", "EBMParams", "init_params", "logdensity", "SIDE"]

SIDE = 16


def load_digits16() -> tuple[np.ndarray, np.ndarray]:
    """``(spins (5000, 256) float32 in {−1, +1}, labels (5000,))`` of the 16×16 binarised digits
    (the vendored ``gradmc/data/digits16.npz``).
    """
    with resources.files("gradmc.data").joinpath("digits16.npz").open("rb") as fh:
        archive = np.load(fh)
        bits = np.unpackbits(archive["images"], axis=1)[:, : SIDE * SIDE]
        labels = archive["labels"]
    return (2.0 * bits - 1.0).astype(np.float32), labels


class ConvNet(eqx.Module):
    """Table 14a's 7 convolutions with SiLU, then a linear read-out to a scalar.

    Parameters
    ----------
    key : jax.Array
        Key of the initial weights (Equinox's default initialisation).
    """

    convs: list
    readout: eqx.nn.Linear

    def __init__(self, key):
        spec = [
            (1, 16, 3, 1, 1),
            (16, 32, 4, 2, 1),
            (32, 32, 3, 1, 1),
            (32, 64, 4, 2, 1),
            (64, 64, 3, 1, 1),
            (64, 128, 4, 2, 1),
            (128, 128, 2, 1, 0),
        ]
        keys = jax.random.split(key, len(spec) + 1)
        self.convs = [
            eqx.nn.Conv2d(i, o, k, stride=s, padding=p, key=kk)
            for (i, o, k, s, p), kk in zip(spec, keys[:-1], strict=True)
        ]
        self.readout = eqx.nn.Linear(128, 1, key=keys[-1])

    def __call__(self, s):
        """net_θ(s) for a spin image ``s`` (256,)."""
        h = jnp.reshape(s, (1, SIDE, SIDE))
        for conv in self.convs:
            h = jax.nn.silu(conv(h))
        return self.readout(jnp.reshape(h, (-1,)))[0]


class EBMParams(NamedTuple):
    """The model's parameters: J (256, 256), used symmetrised; b (256,); the network."""

    J: jax.Array  # (256, 256), used symmetrised
    b: jax.Array  # (256,)
    net: ConvNet


def init_params(key, scale: float = 0.01) -> EBMParams:
    """Initial parameters: J ~ N(0, scale²) entrywise, b = 0, a freshly initialised network.

    Parameters
    ----------
    key : jax.Array
        Key of J and of the network's weights.
    scale : float
        The standard deviation of J's entries.
    """
    key_J, key_net = jax.random.split(key)
    d = SIDE * SIDE
    return EBMParams(scale * jax.random.normal(key_J, (d, d)), jnp.zeros(d), ConvNet(key_net))


def logdensity(params: EBMParams, s) -> jax.Array:
    """f(s) = sᵀ((J + Jᵀ)/2)s + bᵀs + net(s) (no ½ on the quadratic term, as in the authors' code).

    Parameters
    ----------
    params : EBMParams
        J, b and the network.
    s : jax.Array
        A spin image, (256,).
    """
    J = 0.5 * (params.J + params.J.T)
    return s @ J @ s + params.b @ s + params.net(s)
