"""What the tempering samplers share: ladders, tempered local moves, weighted estimates.

A *tempered path* between a reference r(x) (log density, 0 for plain power tempering) and
the target l(x) = log gamma(x) is log pi_beta(x) = beta l(x) + (1 - beta) r(x). A
:class:`TemperedPoint` caches l and r at its position, so any beta's tempered log
density (swap moves, temperature moves, AIS weights) costs no new evaluation.

Local moves at a given beta: random-walk Metropolis (:func:`rwm_move`) and HMC with a
fixed number of leapfrog steps (:func:`hmc_move`); both reject non-finite proposals
(``nonfinite`` flag). Used by parallel and simulated tempering and by AIS.
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from gradmc.base import mh_accept

__all__ = [
    "TemperedPath",
    "TemperedPoint",
    "geometric_ladder",
    "check_ladder",
    "rwm_move",
    "hmc_move",
    "local_move",
    "weighted_mean",
]


class TemperedPoint(NamedTuple):
    position: jax.Array
    loglik: jax.Array  # l(x) = log gamma(x)
    logref: jax.Array  # r(x)


class TemperedPath(NamedTuple):
    """log pi_beta(x) = beta l(x) + (1 - beta) r(x); ``reference_fn=None`` means r = 0."""

    logdensity_fn: Callable
    reference_fn: Callable | None = None

    def point(self, x) -> TemperedPoint:
        ref = jnp.zeros((), x.dtype) if self.reference_fn is None else self.reference_fn(x)
        return TemperedPoint(x, self.logdensity_fn(x), ref)

    def value(self, point: TemperedPoint, beta) -> jax.Array:
        return beta * point.loglik + (1.0 - beta) * point.logref

    def value_and_grad(self, x, beta):
        def f(y):
            p = self.point(y)
            return self.value(p, beta), p

        (value, p), grad = jax.value_and_grad(f, has_aux=True)(x)
        return value, grad, p


def geometric_ladder(num_temperatures: int, beta_min: float) -> np.ndarray:
    """beta_k = beta_min^(k / (K - 1)), k = 0..K-1: from 1 (the target) down to beta_min."""
    if int(num_temperatures) < 2 or float(num_temperatures) != int(num_temperatures):
        raise ValueError(f"num_temperatures must be an integer >= 2, got {num_temperatures!r}")
    if not 0.0 < float(beta_min) < 1.0:
        raise ValueError(f"beta_min must lie in (0, 1), got {beta_min!r}")
    k = np.arange(int(num_temperatures))
    return float(beta_min) ** (k / (int(num_temperatures) - 1))


def check_ladder(betas, *, allow_zero: bool = False, increasing: bool = False) -> np.ndarray:
    """A ladder of inverse temperatures: strictly monotone, in (0, 1] ([0, 1] with
    ``allow_zero``), starting (decreasing ladders) or ending (increasing ones) at 1."""
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


def rwm_move(key, point: TemperedPoint, beta, path: TemperedPath, step_size):
    """One random-walk Metropolis step on pi_beta; returns (point, prob, accepted, nonfinite)."""
    k_prop, k_acc = jax.random.split(key)
    x = point.position
    proposal = path.point(x + step_size * jax.random.normal(k_prop, x.shape, x.dtype))
    accept, prob, nonfinite = mh_accept(k_acc, path.value(proposal, beta) - path.value(point, beta))
    new = jax.tree.map(lambda a, b: jnp.where(accept, a, b), proposal, point)
    return new, prob, accept, nonfinite


def hmc_move(key, point: TemperedPoint, beta, path: TemperedPath, step_size, num_steps: int):
    """One HMC step (identity mass, ``num_steps`` leapfrog steps of ``step_size``) on pi_beta."""
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
    """``move(key, point, beta, path, step_size)`` for ``kind`` in {"rwm", "hmc"}."""
    if kind == "rwm":
        return rwm_move
    if kind == "hmc":
        if int(num_leapfrog_steps) < 1:
            raise ValueError(f"num_leapfrog_steps must be >= 1, got {num_leapfrog_steps!r}")
        return lambda key, point, beta, path, step_size: hmc_move(key, point, beta, path, step_size, int(num_leapfrog_steps))
    raise ValueError(f"local move must be 'rwm' or 'hmc', got {kind!r}")


def weighted_mean(draws, log_weights, fn: Callable | None = None) -> np.ndarray:
    """Self-normalised importance estimate sum w f(x) / sum w, pooled over all axes but the
    event's; ``draws`` (chain, draw, *event), ``log_weights`` (chain, draw)."""
    lw = np.asarray(log_weights, np.float64).reshape(-1)
    x = np.asarray(draws, np.float64)
    values = x if fn is None else np.asarray(fn(x), np.float64)
    shape = values.shape[np.asarray(log_weights).ndim :]
    w = np.exp(lw - np.max(lw))
    return (w @ values.reshape(lw.size, -1) / w.sum()).reshape(shape)
