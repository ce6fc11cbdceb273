"""Annealed importance sampling (Neal 2001): weighted draws and an unbiased estimate of Z.

Path from a normalised Gaussian reference r = N(mean, cov) to the target gamma:
log pi_beta = beta log gamma + (1 - beta) log r, 0 = beta_0 < ... < beta_T = 1. Each
particle starts from r, and for t = 1..T adds (beta_t - beta_{t-1})(log gamma(x) - log r(x))
to its log weight, then makes ``num_mcmc_steps`` local moves (RWM or HMC) that leave
pi_beta_t invariant. The mean weight estimates Z = ∫ gamma unbiasedly; its standard error is
sd(w) / sqrt(P) (reported relative, which is also the delta-method s.e. of log Z).
Particles are ``vmap``ped and the ladder is a ``lax.scan``.

Why not BlackJAX: its tempered SMC resamples and adapts between temperatures, which is
a different estimator (SMC sampler); AIS is the plain importance sampler over the
annealing path, a dozen lines on top of our tempered local moves.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from gradmc.base import Target
from gradmc.checks import check_positive
from gradmc.continuous.tempering import TemperedPath, check_ladder, gaussian_reference, local_move

__all__ = ["AISResult", "ais", "power_schedule"]


class AISResult(NamedTuple):
    """``draws`` (P, *event) with ``log_weights`` (P,); ``log_z`` = log mean w and its
    s.e. ``log_z_se`` (= relative s.e. of Z-hat); ``ess`` = (sum w)^2 / sum w^2;
    ``acceptance_rate`` of the local moves, averaged.
    """

    draws: np.ndarray
    log_weights: np.ndarray
    log_z: float
    log_z_se: float
    ess: float
    acceptance_rate: float

    def weighted_mean(self, fn=None) -> np.ndarray:
        """The self-normalised estimate sum w f(x) / sum w over the particles.

        Parameters
        ----------
        fn : callable, optional
            f, applied to ``draws`` (the identity when omitted).
        """
        w = np.exp(self.log_weights - self.log_weights.max())
        values = self.draws if fn is None else fn(self.draws)
        return np.tensordot(w / w.sum(), values, axes=(0, 0))


def power_schedule(num_temperatures: int, power: float = 4.0) -> np.ndarray:
    """beta_t = (t / T)^power, t = 0..T (T + 1 = ``num_temperatures`` values).

    Parameters
    ----------
    num_temperatures : int
        The ladder's length (>= 2).
    power : float
        The exponent (positive).
    """
    if int(num_temperatures) < 2:
        raise ValueError(f"num_temperatures must be >= 2, got {num_temperatures!r}")
    check_positive("power", power)
    return np.linspace(0.0, 1.0, int(num_temperatures)) ** float(power)


def ais(
    target: Target,
    key,
    *,
    num_particles: int = 1000,
    betas=None,
    num_temperatures: int = 1000,
    reference_mean=None,
    reference_cov=None,
    local: str = "rwm",
    step_size: float = 0.5,
    num_leapfrog_steps: int = 5,
    num_mcmc_steps: int = 1,
) -> AISResult:
    """Run AIS on ``target``: Neal 2001 §2, the importance weights of the annealing path.

    Parameters
    ----------
    target : Target
        The distribution gamma (unnormalised).
    key : PRNGKey
        The run's key.
    num_particles : int
        P.
    betas : array_like, optional
        The ladder, increasing from 0 to 1 (overrides ``num_temperatures``).
    num_temperatures : int
        The length of the default ``power_schedule(num_temperatures)``.
    reference_mean, reference_cov : array_like, optional
        The Gaussian reference r (default N(0, I)).
    local : {"rwm", "hmc"}
        The local move.
    step_size : float
        Its step size.
    num_leapfrog_steps : int
        Leapfrog steps of an HMC move.
    num_mcmc_steps : int
        Local moves per temperature.
    """
    check_positive("num_particles", num_particles, integer=True)
    check_positive("num_mcmc_steps", num_mcmc_steps, integer=True)
    check_positive("step_size", step_size)
    ladder = check_ladder(
        power_schedule(num_temperatures) if betas is None else betas, allow_zero=True, increasing=True
    )
    if ladder[0] != 0.0:
        raise ValueError(f"the AIS ladder must start at beta = 0 (the reference), got {ladder[0]}")
    d = target.dim
    reference = gaussian_reference(reference_mean, reference_cov, d, "reference_mean", "AIS reference covariance")
    mean_j, chol = reference.mean, reference.chol
    path = TemperedPath(target.logdensity_fn, reference.log_density)
    move = local_move(local, num_leapfrog_steps)
    shape = target.space.event_shape
    betas_j = jnp.asarray(ladder, jnp.float32)

    def particle(key):
        k0, k_run = jax.random.split(key)
        x0 = (mean_j + chol @ jax.random.normal(k0, (d,), jnp.float32)).reshape(shape)

        def anneal(carry, inputs):
            point, log_w, acc = carry
            t, beta_prev, beta = inputs
            log_w = log_w + (beta - beta_prev) * (point.loglik - point.logref)

            def mcmc(carry, k):
                p, a = carry
                p, prob, _, _ = move(k, p, beta, path, step_size)
                return (p, a + prob), None

            (point, acc), _ = jax.lax.scan(
                mcmc, (point, acc), jax.random.split(jax.random.fold_in(k_run, t), num_mcmc_steps)
            )
            return (point, log_w, acc), None

        steps = (jnp.arange(1, betas_j.size), betas_j[:-1], betas_j[1:])
        (point, log_w, acc), _ = jax.lax.scan(anneal, (path.point(x0), jnp.zeros(()), jnp.zeros(())), steps)
        return point.position, jnp.where(jnp.isnan(log_w), -jnp.inf, log_w), acc / ((betas_j.size - 1) * num_mcmc_steps)

    draws, log_w, acc = jax.jit(jax.vmap(particle))(jax.random.split(key, int(num_particles)))
    log_w = np.asarray(log_w, np.float64)
    top = log_w.max()
    if not np.isfinite(top):
        raise ValueError("every AIS weight is zero or not finite: the reference does not cover the target")
    w = np.exp(log_w - top)
    log_z = float(top + np.log(w.mean()))
    rel_se = float(w.std(ddof=1) / (np.sqrt(w.size) * w.mean())) if w.size > 1 else float("inf")
    return AISResult(np.asarray(draws), log_w, log_z, rel_se, float(w.sum() ** 2 / np.sum(w**2)), float(np.mean(acc)))
