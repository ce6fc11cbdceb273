"""What the tempering samplers share: ladders, tempered local moves, weighted estimates.

A *tempered path* between a reference r(x) (log density, 0 for plain power tempering) and
the target l(x) = log gamma(x) is log pi_beta(x) = beta l(x) + (1 - beta) r(x). A
:class:`TemperedPoint` caches l and r at its position, so any beta's tempered log
density (swap moves, temperature moves, AIS weights) costs no new evaluation.

Local moves at a given beta: random-walk Metropolis (:func:`rwm_move`) and HMC with a
fixed number of leapfrog steps (:func:`hmc_move`); both reject non-finite proposals
(``nonfinite`` flag). Used by parallel and simulated tempering and by AIS; the Gaussian
reference of AIS and CT-HMC is :func:`gaussian_reference`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from gradmc.base import mh_accept
from gradmc.linalg import cholesky_factor

__all__ = [
    "TemperedPath",
    "TemperedPoint",
    "geometric_ladder",
    "check_ladder",
    "resolve_ladder",
    "GaussianReference",
    "gaussian_reference",
    "rwm_move",
    "hmc_move",
    "local_move",
    "weighted_mean",
]


class TemperedPoint(NamedTuple):
    """A position with its target log density l(x) and reference log density r(x)."""

    position: jax.Array
    loglik: jax.Array  # l(x) = log gamma(x)
    logref: jax.Array  # r(x)


class TemperedPath(NamedTuple):
    """log pi_beta(x) = beta l(x) + (1 - beta) r(x); ``reference_fn=None`` means r = 0."""

    logdensity_fn: Callable
    reference_fn: Callable | None = None

    def point(self, x) -> TemperedPoint:
        """The :class:`TemperedPoint` at ``x``."""
        ref = jnp.zeros((), x.dtype) if self.reference_fn is None else self.reference_fn(x)
        return TemperedPoint(x, self.logdensity_fn(x), ref)

    def value(self, point: TemperedPoint, beta) -> jax.Array:
        """Log pi_beta at ``point``."""
        return beta * point.loglik + (1.0 - beta) * point.logref

    def value_and_grad(self, x, beta):
        """Log pi_beta(x), its gradient in x, and the :class:`TemperedPoint` at x."""

        def f(y):
            p = self.point(y)
            return self.value(p, beta), p

        (value, p), grad = jax.value_and_grad(f, has_aux=True)(x)
        return value, grad, p


def geometric_ladder(num_temperatures: int, beta_min: float) -> np.ndarray:
    """beta_k = beta_min^(k / (K - 1)), k = 0..K-1: from 1 (the target) down to beta_min.

    Parameters
    ----------
    num_temperatures : int
        K >= 2.
    beta_min : float
        The smallest inverse temperature, in (0, 1).
    """
    if int(num_temperatures) < 2 or float(num_temperatures) != int(num_temperatures):
        raise ValueError(f"num_temperatures must be an integer >= 2, got {num_temperatures!r}")
    if not 0.0 < float(beta_min) < 1.0:
        raise ValueError(f"beta_min must lie in (0, 1), got {beta_min!r}")
    k = np.arange(int(num_temperatures))
    return float(beta_min) ** (k / (int(num_temperatures) - 1))


def check_ladder(betas, *, allow_zero: bool = False, increasing: bool = False) -> np.ndarray:
    """A ladder of inverse temperatures: strictly monotone, in (0, 1] ([0, 1] with
    ``allow_zero``), starting (decreasing ladders) or ending (increasing ones) at 1.

    Parameters
    ----------
    betas : array_like
        The inverse temperatures.
    allow_zero : bool
        Admit beta = 0 (AIS starts at the reference).
    increasing : bool
        The ladder rises to 1 (AIS) instead of falling from it.
    """
    b = np.asarray(betas, dtype=np.float64)
    if b.ndim != 1 or b.size < 2 or not np.all(np.isfinite(b)):
        raise ValueError(f"a temperature ladder must be a 1-D array of at least 2 finite betas, got {betas!r}")
    low_ok = np.all(b >= 0.0) if allow_zero else np.all(b > 0.0)
    if not low_ok or np.any(b > 1.0):
        raise ValueError(f"ladder betas must lie in {'[0, 1]' if allow_zero else '(0, 1]'}, got {b}")
    steps = np.diff(b)
    if increasing and not (np.all(steps > 0) and b[-1] == 1.0):
        raise ValueError(f"the ladder must increase strictly and end at beta = 1, got {b}")
    if not increasing and not (np.all(steps < 0) and b[0] == 1.0):
        raise ValueError(f"the ladder must start at beta = 1 (the target) and decrease strictly, got {b}")
    return b


def resolve_ladder(betas=None, temperatures=None, num_temperatures=5, beta_min=0.01) -> np.ndarray:
    """The ladder from ``betas``, ``temperatures`` (T = 1 / beta) or a geometric default.

    Parameters
    ----------
    betas : array_like, optional
        Inverse temperatures, from 1 down.
    temperatures : array_like, optional
        Temperatures, from 1 up (not with ``betas``).
    num_temperatures, beta_min
        The :func:`geometric_ladder` used when neither is given.
    """
    if betas is not None and temperatures is not None:
        raise ValueError("give betas or temperatures, not both")
    if temperatures is not None:
        t = np.asarray(temperatures, np.float64)
        if np.any(t <= 0):
            raise ValueError(f"temperatures must be positive, got {t}")
        return check_ladder(1.0 / t)
    if betas is not None:
        return check_ladder(betas)
    return geometric_ladder(num_temperatures, beta_min)


class GaussianReference(NamedTuple):
    """A normalised Gaussian N(mean, L L^T) on a target's event shape.

    ``log_density(x)``; ``mean`` and ``chol`` (L) as float32, for drawing ``mean + L z``.
    """

    log_density: Callable
    mean: jax.Array
    chol: jax.Array


def gaussian_reference(mean, cov, dim: int, mean_name: str, cov_name: str) -> GaussianReference:
    """The Gaussian N(mean, cov) (default N(0, I)) after checking its shape, with its normalised log density.

    Parameters
    ----------
    mean : array_like, optional
        The mean, shape ``(dim,)``.
    cov : array_like, optional
        The covariance, ``dim`` x ``dim``, symmetric positive definite.
    dim : int
        The target's dimension.
    mean_name, cov_name : str
        How messages name the mean and the covariance.
    """
    m = np.zeros(dim) if mean is None else np.asarray(mean, np.float64)
    if m.shape != (dim,):
        raise ValueError(f"{mean_name} must have shape ({dim},), got {m.shape}")
    chol = cholesky_factor(np.eye(dim) if cov is None else cov, cov_name, dim)
    chol_np = np.asarray(chol, np.float64)
    log_det = float(np.sum(np.log(np.diag(chol_np))))
    mean_j, chol_inv = jnp.asarray(m, jnp.float32), jnp.asarray(np.linalg.inv(chol_np), jnp.float32)

    def log_density(x):
        z = chol_inv @ (x.reshape(-1) - mean_j)
        return -0.5 * jnp.dot(z, z) - log_det - 0.5 * dim * np.log(2 * np.pi)

    return GaussianReference(log_density, mean_j, chol)


def rwm_move(key, point: TemperedPoint, beta, path: TemperedPath, step_size):
    """One random-walk Metropolis step on pi_beta; returns (point, prob, accepted, nonfinite).

    Parameters
    ----------
    key : PRNGKey
        The step's key.
    point : TemperedPoint
        The current point.
    beta : float
        The inverse temperature.
    path : TemperedPath
        The tempered path.
    step_size : float
        The proposal's standard deviation.
    """
    k_prop, k_acc = jax.random.split(key)
    x = point.position
    proposal = path.point(x + step_size * jax.random.normal(k_prop, x.shape, x.dtype))
    accept, prob, nonfinite = mh_accept(k_acc, path.value(proposal, beta) - path.value(point, beta))
    new = jax.tree.map(lambda a, b: jnp.where(accept, a, b), proposal, point)
    return new, prob, accept, nonfinite


def hmc_move(key, point: TemperedPoint, beta, path: TemperedPath, step_size, num_steps: int):
    """One HMC step (identity mass, ``num_steps`` leapfrog steps of ``step_size``) on pi_beta.

    Parameters
    ----------
    key, point, beta, path, step_size
        As in :func:`rwm_move`.
    num_steps : int
        The number of leapfrog steps.
    """
    k_mom, k_acc = jax.random.split(key)
    x0 = point.position
    p0 = jax.random.normal(k_mom, x0.shape, x0.dtype)
    value0, grad0, _ = path.value_and_grad(x0, beta)

    def leapfrog(carry, _):
        x, p, grad = carry
        p = p + 0.5 * step_size * grad
        x = x + step_size * p
        value, grad, _ = path.value_and_grad(x, beta)
        p = p + 0.5 * step_size * grad
        return (x, p, grad), None

    (x1, p1, _), _ = jax.lax.scan(leapfrog, (x0, p0, grad0), None, length=num_steps)
    proposal = path.point(x1)
    log_ratio = path.value(proposal, beta) - 0.5 * jnp.sum(p1**2) - value0 + 0.5 * jnp.sum(p0**2)
    accept, prob, nonfinite = mh_accept(k_acc, log_ratio)
    new = jax.tree.map(lambda a, b: jnp.where(accept, a, b), proposal, point)
    return new, prob, accept, nonfinite


def local_move(kind: str, num_leapfrog_steps: int = 10) -> Callable:
    """``move(key, point, beta, path, step_size)``: :func:`rwm_move` or :func:`hmc_move`.

    Parameters
    ----------
    kind : {"rwm", "hmc"}
        The local move.
    num_leapfrog_steps : int
        Leapfrog steps of an HMC move.
    """
    if kind == "rwm":
        return rwm_move
    if kind == "hmc":
        if int(num_leapfrog_steps) < 1:
            raise ValueError(f"num_leapfrog_steps must be >= 1, got {num_leapfrog_steps!r}")
        return lambda key, point, beta, path, step_size: hmc_move(
            key, point, beta, path, step_size, int(num_leapfrog_steps)
        )
    raise ValueError(f"local move must be 'rwm' or 'hmc', got {kind!r}")


def weighted_mean(draws, log_weights, fn: Callable | None = None) -> np.ndarray:
    """Self-normalised importance estimate sum w f(x) / sum w, pooled over all axes but the event's.

    Parameters
    ----------
    draws : array
        ``(chain, draw, *event)``.
    log_weights : array
        ``(chain, draw)``, unnormalised.
    fn : callable, optional
        f, applied to ``draws`` (the identity when omitted).
    """
    lw = np.asarray(log_weights, np.float64).reshape(-1)
    x = np.asarray(draws, np.float64)
    values = x if fn is None else np.asarray(fn(x), np.float64)
    shape = values.shape[np.asarray(log_weights).ndim :]
    w = np.exp(lw - np.max(lw))
    return (w @ values.reshape(lw.size, -1) / w.sum()).reshape(shape)
