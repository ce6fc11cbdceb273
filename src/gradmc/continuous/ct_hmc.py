"""Continuously tempered HMC (Graham & Storkey 2017).

HMC on the joint of x and an inverse temperature beta = sigmoid(u) in (0, 1):

    log pi(x, u) = beta l(x) + (1 - beta)(log q(x) + c) + log sigmoid'(u),

with q = N(base_mean, base_cov) a normalised base density (the role of Graham &
Storkey's variational approximation) and c an estimate of log Z, so that the marginal of
beta is roughly flat. c is estimated once, before sampling, by importance sampling from q
(``num_is_samples`` draws, fixed key); its value only affects efficiency. Integrating beta
out gives the x-marginal e^b (e^D - 1) / D with b = log q(x) + c, D = l(x) - b, so each
draw carries the importance weight of the target

    log w(x) = l(x) - log pi(x) = log(D / (1 - e^-D))        (stats["log_weight"]),

and E_pi[f] = sum w f / sum w over the chain (:func:`gradmc.continuous.tempering.weighted_mean`).
The kernel is BlackJAX HMC (or NUTS) on z = (x, u) (:mod:`gradmc.continuous.hmc`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from blackjax.base import build_sampling_algorithm

from gradmc.base import SamplingAlgorithm, reject_nonfinite
from gradmc.continuous import hmc
from gradmc.continuous.tempering import GaussianReference

__all__ = ["log_weight", "ContinuousTempering", "continuous_tempering", "init", "build_kernel", "as_top_level_api"]


def log_weight(delta):
    """log(D / (1 - e^-D)), stable for all D (-> 0 at D = 0): the importance weight of the module docstring.

    Parameters
    ----------
    delta : array
        D = l(x) - log q(x) - c.
    """
    small = jnp.abs(delta) < 1e-4
    d = jnp.where(small, 1.0, delta)
    pos = jnp.log(jnp.abs(d)) - jnp.log(-jnp.expm1(-jnp.abs(d)))  # D > 0 branch, for |D|
    value = jnp.where(d > 0, pos, pos + d)  # D < 0: log(-D) - log(e^-D - 1) = pos(|D|) - |D|
    return jnp.where(small, 0.5 * delta, value)


class ContinuousTempering(NamedTuple):
    """The joint log pi(x, u) of the module docstring, on z = (x flattened, u).

    Parameters
    ----------
    logdensity_fn : callable
        The target's l(x).
    log_base : callable
        The normalised base log q(x).
    log_z : float
        c, the estimate of log Z.
    shape : tuple
        The event shape of x.
    dim : int
        The number of coordinates of x.
    """

    logdensity_fn: Callable
    log_base: Callable
    log_z: float
    shape: tuple
    dim: int

    def split(self, z):
        """``(x, u)`` from z."""
        return z[: self.dim].reshape(self.shape), z[self.dim]

    def augment(self, x):
        """Z = (x, u = 0): beta = 1/2."""
        return jnp.concatenate([x.reshape(-1), jnp.zeros(1, x.dtype)])

    def joint(self, z):
        """Log pi(x, u)."""
        x, u = self.split(z)
        beta = jax.nn.sigmoid(u)
        ell = self.logdensity_fn
        return (
            beta * ell(x)
            + (1.0 - beta) * (self.log_base(x) + self.log_z)
            + jax.nn.log_sigmoid(u)
            + jax.nn.log_sigmoid(-u)
        )

    def logdensity(self, z):
        """:meth:`joint` with non-finite values mapped to -inf (what the HMC kernel samples)."""
        return reject_nonfinite(self.joint)(z)

    def weights(self, z) -> dict:
        """``{"beta": sigmoid(u), "log_weight": log w(x)}`` at z."""
        x, u = self.split(z)
        delta = self.logdensity_fn(x) - self.log_base(x) - self.log_z
        return {"beta": jax.nn.sigmoid(u), "log_weight": log_weight(delta)}


def continuous_tempering(
    logdensity_fn: Callable,
    base: GaussianReference,
    shape: tuple,
    num_is_samples: int = 2000,
) -> ContinuousTempering:
    """The joint with c estimated by importance sampling from the base (``num_is_samples`` draws, key 2017).

    Parameters
    ----------
    logdensity_fn : callable
        The target's l(x).
    base : GaussianReference
        q (from :func:`gradmc.continuous.tempering.gaussian_reference`).
    shape : tuple
        The event shape of x.
    num_is_samples : int
        The number of importance draws.
    """
    d = base.mean.shape[0]
    xs = (base.mean + jax.random.normal(jax.random.key(2017), (int(num_is_samples), d)) @ base.chol.T).reshape(
        -1, *shape
    )
    log_ratio = np.asarray(jax.jit(jax.vmap(lambda x: logdensity_fn(x) - base.log_density(x)))(xs), np.float64)
    log_ratio = log_ratio[np.isfinite(log_ratio)]
    c = float(np.logaddexp.reduce(log_ratio) - np.log(log_ratio.size)) if log_ratio.size else 0.0
    return ContinuousTempering(logdensity_fn, base.log_density, c, tuple(shape), d)


def init(position, tempering: ContinuousTempering) -> hmc.HMCState:
    """The HMC state at z = (``position``, 0).

    Parameters
    ----------
    position : array
        x.
    tempering : ContinuousTempering
        The joint (in the slot BlackJAX gives the log density).
    """
    return hmc.init(tempering.augment(position), tempering.logdensity)


def build_kernel(kind: str = "hmc") -> Callable:
    """``kernel(key, state, tempering, step_size, inverse_mass_matrix, n)``: BlackJAX's HMC or NUTS on the joint.

    Parameters
    ----------
    kind : {"hmc", "nuts"}
        As in :func:`gradmc.continuous.hmc.build_kernel`.
    """
    inner = hmc.build_kernel(kind)

    def kernel(rng_key, state, tempering: ContinuousTempering, step_size, inverse_mass_matrix, n):
        return inner(rng_key, state, tempering.logdensity, step_size, inverse_mass_matrix, n)

    return kernel


def as_top_level_api(
    tempering: ContinuousTempering,
    step_size,
    inverse_mass_matrix,
    *,
    kind: str = "hmc",
    num_integration_steps: int = 10,
    max_num_doublings: int = 10,
) -> SamplingAlgorithm:
    """CT-HMC as a BlackJAX ``SamplingAlgorithm``: ``init(x)``; states hold z = (x, u).

    Parameters
    ----------
    tempering : ContinuousTempering
        The joint, from :func:`continuous_tempering`.
    step_size : float
        The leapfrog step size.
    inverse_mass_matrix : array
        Over z (``dim + 1`` entries when diagonal).
    kind : {"hmc", "nuts"}
        The trajectory.
    num_integration_steps, max_num_doublings : int
        As in :func:`gradmc.continuous.hmc.as_top_level_api`.
    """
    length = num_integration_steps if kind == "hmc" else max_num_doublings
    kernel_args = (step_size, jnp.asarray(inverse_mass_matrix), int(length))
    return build_sampling_algorithm(build_kernel(kind), init, tempering, kernel_args=kernel_args)
