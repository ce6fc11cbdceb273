"""The pseudo-extended target (Nemeth et al. 2022) as a transform, and its post-hoc correction.

:func:`pseudo_extended` turns a continuous target pi = gamma / Z on R^d into the extended
target pi^N on N pseudo-samples, a plain :class:`~gradmc.base.Target` on the flattened
vector ``(x_1, ..., x_N, u_1, ..., u_N)`` that any gradmc sampler can run on (the paper's
choice is NUTS). Three proposals q:

* **tempered** (default, eq. 8 with pi(beta) = g(beta) = 1 on [beta_min, beta_max]):
  q(x, beta) ∝ gamma(x)^beta, beta_i = beta_min + (beta_max - beta_min) sigmoid(u_i), so
  ``log pi^N = logsumexp_i((1 - beta_i) log gamma(x_i)) - log N + sum_i beta_i log gamma(x_i)
  + sum_i log |d beta_i / d u_i|`` (as in the authors' code, plus the logit Jacobian);
* **fixed beta**: the same with every beta_i fixed (no u coordinates);
* **user proposal** ``log q(x)``: eq. 4, ``logsumexp_i(log gamma(x_i) - log q(x_i)) - log N
  + sum_i log q(x_i)``.

:func:`resample_extended` is Prop. 3.1: given draws of pi^N, the particle index of each
iteration is drawn with probability ∝ gamma(x_i) / q(x_i) (= gamma(x_i)^(1 - beta_i) for the
tempered proposal), which gives draws of pi. All weights live in log space, so iterations
whose weights all underflow in float32 still resample correctly.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from gradmc.base import Target
from gradmc.spaces import Real

__all__ = [
    "ExtendedLayout",
    "ExtendedDraws",
    "logit_to_beta",
    "pseudo_extended",
    "resample_extended",
    "sample_extended",
]


@dataclass(frozen=True)
class ExtendedLayout:
    """How the flat extended vector splits into particles and temperatures.

    ``mode`` is ``"tempered"``, ``"fixed"`` or ``"proposal"``; ``event_shape`` is the
    original target's; ``log_weight_fn(z) -> (N,)`` gives log gamma(x_i) - log q(x_i)
    (the Prop. 3.1 weights, unnormalised) for one extended position ``z``.

    Parameters
    ----------
    base : Target
        The original target.
    num_particles : int
        N.
    mode : str
        ``"tempered"``, ``"fixed"`` or ``"proposal"``.
    beta_bounds : tuple of float
        [beta_min, beta_max] of the tempered proposal.
    fixed_beta : float or None
        The common beta of the ``"fixed"`` mode.
    log_weight_fn : callable
        The unnormalised log importance weights of one extended position.
    """

    base: Target
    num_particles: int
    mode: str
    beta_bounds: tuple[float, float]
    fixed_beta: float | None
    log_weight_fn: Callable[[jax.Array], jax.Array]

    @property
    def event_shape(self) -> tuple[int, ...]:
        """The original target's event shape."""
        return self.base.space.event_shape

    @property
    def base_dim(self) -> int:
        """The original target's dimension d."""
        return self.base.dim

    def particles(self, z: jax.Array) -> jax.Array:
        """(..., N, *event_shape) particles from extended positions (..., D_ext).

        Parameters
        ----------
        z : jax.Array
            Extended positions.
        """
        n, d = self.num_particles, self.base_dim
        return z[..., : n * d].reshape(*z.shape[:-1], n, *self.event_shape)

    def betas(self, z: jax.Array) -> jax.Array:
        """(..., N) inverse temperatures of the tempered proposal (fixed or from the logits).

        Parameters
        ----------
        z : jax.Array
            Extended positions.
        """
        n, d = self.num_particles, self.base_dim
        if self.mode == "tempered":
            return logit_to_beta(z[..., n * d :], *self.beta_bounds)
        if self.mode == "fixed":
            return jnp.full((*z.shape[:-1], n), self.fixed_beta, z.dtype)
        raise ValueError("a pseudo-extended target with a user proposal has no temperatures")


def logit_to_beta(u, lo: float, hi: float):
    """Beta = lo + (hi - lo) sigmoid(u): the unconstrained coordinate onto [lo, hi].

    Parameters
    ----------
    u : array_like
        Unconstrained coordinates.
    lo, hi : float
        The interval of beta.
    """
    return lo + (hi - lo) * jax.nn.sigmoid(u)


def _check_num_particles(num_particles) -> int:
    if isinstance(num_particles, bool) or not float(num_particles) == int(num_particles) or int(num_particles) < 1:
        raise ValueError(f"the number of pseudo-samples N must be an integer >= 1, got {num_particles!r}")
    return int(num_particles)


def _check_beta_bounds(beta_bounds) -> tuple[float, float]:
    try:
        lo, hi = (float(b) for b in beta_bounds)
    except (TypeError, ValueError):
        raise ValueError(f"beta_bounds must be a pair (beta_min, beta_max), got {beta_bounds!r}") from None
    if not (0.0 < lo < hi <= 1.0):
        raise ValueError(f"beta_bounds must satisfy 0 < beta_min < beta_max <= 1, got ({lo}, {hi})")
    return lo, hi


def _check_differentiable(target: Target, num_points: int = 4) -> None:
    """A NaN/inf gradient where the log density is finite: the target is not differentiable."""
    keys = jax.random.split(jax.random.key(20220507), num_points)
    points = jnp.stack([jnp.asarray(target.draw_initial(k), jnp.float32) for k in keys])
    values, grads = jax.vmap(jax.value_and_grad(target.logdensity_fn))(points)
    values, grads = np.asarray(values), np.asarray(grads).reshape(num_points, -1)
    bad = np.isfinite(values) & ~np.all(np.isfinite(grads), axis=1)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(
            f"target {target.name!r}: the gradient of the log density is not finite at "
            f"{np.asarray(points[i]).tolist()} "
            "although the log density is; the pseudo-extended target needs a differentiable log density"
        )


def pseudo_extended(
    target: Target,
    N: int,
    beta_bounds=(0.001, 1.0),
    fixed_beta: float | None = None,
    proposal: Callable[[jax.Array], jax.Array] | None = None,
) -> Target:
    """The pseudo-extended target pi^N of ``target`` with ``N`` pseudo-samples (eqs 4, 8).

    ``beta_bounds``: the interval of the tempered proposal's beta (0.001-1 for the
    mixtures, 0.1-0.9 for the Boltzmann relaxation in the authors' code). ``fixed_beta``:
    temper every pseudo-sample at this beta instead (no beta coordinates).
    ``proposal``: a log density ``log q(x)`` to use instead of the tempered target
    (normalisation not needed). The result's ``metadata["extended"]`` is the
    :class:`ExtendedLayout` that :func:`resample_extended` needs.

    Parameters
    ----------
    target : Target
        A continuous target on R^d with a differentiable log density.
    N : int
        The number of pseudo-samples.
    beta_bounds : tuple of float
        [beta_min, beta_max] of the tempered proposal, 0 < beta_min < beta_max <= 1.
    fixed_beta : float, optional
        One beta in (0, 1] for every pseudo-sample.
    proposal : callable, optional
        ``log q(x)``.
    """
    n = _check_num_particles(N)
    lo, hi = _check_beta_bounds(beta_bounds)
    if not isinstance(target.space, Real) or target.space.is_discrete:
        raise ValueError(f"the pseudo-extended transform needs a continuous target on R^d, got {target.space}")
    if fixed_beta is not None and proposal is not None:
        raise ValueError("give either fixed_beta or proposal, not both")
    if fixed_beta is not None and not 0.0 < float(fixed_beta) <= 1.0:
        raise ValueError(f"fixed_beta must lie in (0, 1], got {fixed_beta!r}")
    if proposal is not None and not callable(proposal):
        raise ValueError("proposal must be a callable log q(x)")
    _check_differentiable(target)

    event_shape, d = target.space.event_shape, target.dim
    base_logdensity = target.logdensity_fn
    mode = "proposal" if proposal is not None else ("fixed" if fixed_beta is not None else "tempered")
    log_n = float(np.log(n))

    def split(z):
        return z[: n * d].reshape(n, *event_shape), z[n * d :]

    def log_gammas(xs):
        return jax.vmap(base_logdensity)(xs)

    if mode == "tempered":
        width = hi - lo

        def tempered_terms(z):
            xs, u = split(z)
            beta = logit_to_beta(u, lo, hi)
            log_jac = jnp.log(width) + jax.nn.log_sigmoid(u) + jax.nn.log_sigmoid(-u)
            return log_gammas(xs), beta, log_jac

        def logdensity_fn(z):
            lg, beta, log_jac = tempered_terms(z)
            return jax.nn.logsumexp((1.0 - beta) * lg) - log_n + jnp.sum(beta * lg) + jnp.sum(log_jac)

        def log_weight_fn(z):
            lg, beta, _ = tempered_terms(z)
            return (1.0 - beta) * lg

        ext_dim = n * d + n
    elif mode == "fixed":
        beta_fixed = float(fixed_beta)

        def logdensity_fn(z):
            lg = log_gammas(split(z)[0])
            return jax.nn.logsumexp((1.0 - beta_fixed) * lg) - log_n + beta_fixed * jnp.sum(lg)

        def log_weight_fn(z):
            return (1.0 - beta_fixed) * log_gammas(split(z)[0])

        ext_dim = n * d
    else:

        def log_ratio(z):
            xs = split(z)[0]
            lq = jax.vmap(proposal)(xs)
            return log_gammas(xs) - lq, lq

        def logdensity_fn(z):
            lr, lq = log_ratio(z)
            return jax.nn.logsumexp(lr) - log_n + jnp.sum(lq)

        def log_weight_fn(z):
            return log_ratio(z)[0]

        ext_dim = n * d

    def initial_position(key):
        keys = jax.random.split(key, n + 1)
        xs = jnp.stack([jnp.asarray(target.draw_initial(k), jnp.float32).reshape(-1) for k in keys[:n]]).reshape(-1)
        if mode != "tempered":
            return xs
        # beta_i uniform on [lo, hi]  <=>  u_i = logit(U(0, 1))
        u = jax.random.logistic(keys[n], (n,), jnp.float32)
        return jnp.concatenate([xs, u])

    layout = ExtendedLayout(target, n, mode, (lo, hi), None if fixed_beta is None else float(fixed_beta), log_weight_fn)
    what = {
        "tempered": f"tempered proposal, beta in [{lo}, {hi}]",
        "fixed": f"proposal gamma^{fixed_beta}",
        "proposal": "user proposal q",
    }[mode]
    return Target(
        name=f"{target.name}-pe{n}",
        logdensity_fn=logdensity_fn,
        space=Real(ext_dim),
        description=f"pseudo-extended {target.name} with N = {n} pseudo-samples ({what}; Nemeth et al. 2022)",
        truth=None,
        initial_position=initial_position,
        metadata={"extended": layout},
    )


class ExtendedDraws(NamedTuple):
    """Draws of the original target from a pseudo-extended run (Prop. 3.1).

    ``draws``: (chain, draw, *event), one particle per iteration resampled by its weight.
    ``particles``: (chain, draw, N, *event); ``weights``: (chain, draw, N), normalised within
    each iteration (so ``sum(weights * f(particles)) / (chains * draws)`` is the
    importance-weighted estimate of E[f]); ``log_weights``: the unnormalised log weights.
    ``ess``: Kish effective size (sum w)^2 / sum w^2 of all particles' weights pooled
    (<= chains * draws * N; it ignores autocorrelation); ``ess_per_iteration``: mean over
    iterations of 1 / sum_i w_i^2, between 1 and N.

    Parameters
    ----------
    draws : ndarray
        Resampled draws of the original target.
    particles : ndarray
        All particles.
    weights, log_weights : ndarray
        Normalised weights and unnormalised log weights.
    ess, ess_per_iteration : float
        The Kish effective sizes above.
    """

    draws: np.ndarray
    particles: np.ndarray
    weights: np.ndarray
    log_weights: np.ndarray
    ess: float
    ess_per_iteration: float

    def weighted_mean(self, fn: Callable[[np.ndarray], np.ndarray] | None = None) -> np.ndarray:
        """Importance-weighted estimate of E[fn(x)] (default: E[x]), pooling chains and iterations.

        Parameters
        ----------
        fn : callable, optional
            Maps particles ``(chain, draw, N, *event)`` to values of the same leading shape.
        """
        values = self.particles if fn is None else fn(self.particles)
        w = self.weights.reshape(*self.weights.shape, *([1] * (values.ndim - self.weights.ndim)))
        return np.sum(w * values, axis=(0, 1, 2)) / (self.weights.shape[0] * self.weights.shape[1])


def _layout(extended_target: Target) -> ExtendedLayout:
    layout = extended_target.metadata.get("extended") if isinstance(extended_target, Target) else None
    if not isinstance(layout, ExtendedLayout):
        raise ValueError("extended_target must be a target built by gradmc.extended.pseudo_extended")
    return layout


@jax.jit
def _resample_indices(key, log_weights):
    return jax.random.categorical(key, log_weights, axis=-1)


def resample_extended(trace_or_draws, extended_target: Target, key) -> ExtendedDraws:
    """Prop. 3.1: turn draws of pi^N (a Trace or an array (chain, draw, D_ext)) into draws of pi.

    Each iteration keeps particle i with probability ∝ gamma(x_i) / q(x_i), drawn with
    ``key``; the weights are normalised by logsumexp, so nothing underflows.

    Parameters
    ----------
    trace_or_draws : Trace or array_like
        Draws of the extended target.
    extended_target : Target
        The target :func:`pseudo_extended` built.
    key : jax.Array
        The key of the resampling.
    """
    layout = _layout(extended_target)
    z = np.asarray(getattr(trace_or_draws, "draws", trace_or_draws))
    if z.ndim == 1:
        z = z[None, None]
    elif z.ndim == 2:
        z = z[None]
    if z.ndim != 3 or z.shape[-1] != extended_target.dim:
        raise ValueError(f"expected extended draws of shape (chain, draw, {extended_target.dim}), got {z.shape}")
    zj = jnp.asarray(z, jnp.float32)
    log_w = jax.jit(jax.vmap(jax.vmap(layout.log_weight_fn)))(zj)
    log_w = jnp.where(jnp.isnan(log_w), -jnp.inf, log_w)
    if not bool(jnp.all(jnp.any(jnp.isfinite(log_w), axis=-1))):
        raise ValueError("some iterations have no particle with a finite log weight; the extended draws are not valid")
    log_norm = jax.nn.logsumexp(log_w, axis=-1, keepdims=True)
    weights = np.asarray(jnp.exp(log_w - log_norm), np.float64)
    idx = np.asarray(_resample_indices(key, log_w))
    particles = np.asarray(layout.particles(zj))
    draws = np.take_along_axis(particles, idx.reshape(*idx.shape, 1, *([1] * len(layout.event_shape))), axis=2)[:, :, 0]
    pooled = weights.reshape(-1)
    ess = float(pooled.sum() ** 2 / np.sum(pooled**2))
    ess_iter = float(np.mean(1.0 / np.sum(weights**2, axis=-1)))
    return ExtendedDraws(draws, particles, weights, np.asarray(log_w), ess, ess_iter)


def sample_extended(
    run: Callable, target: Target, sampler, num_particles: int, options: dict | None, *, seed: int, **run_options
):
    """``gradmc.sample(target, sampler, extended=N)``: ``run`` (that function) on the
    pseudo-extended target with N particles, then its draws resampled to draws of ``target``
    by their importance weights (key ``fold_in(key(seed), 3)``, Prop. 3.1).

    Parameters
    ----------
    run : callable
        :func:`gradmc.sample`.
    target : Target
        The target.
    sampler : str or Sampler
        The sampler of the extended target.
    num_particles : int
        N.
    options : dict, optional
        Options of :func:`pseudo_extended`.
    seed : int
        The run's seed.
    **run_options
        The rest of the run's arguments.

    Returns
    -------
    Trace
        The extended run's trace with the resampled draws of ``target``; ``trace.extended``
        keeps the particles, weights and the weights' effective sample size.
    """
    extended_target = pseudo_extended(target, num_particles, **(options or {}))
    trace = run(extended_target, sampler, seed=seed, **run_options)
    weighted = resample_extended(trace, extended_target, jax.random.fold_in(jax.random.key(seed), 3))
    return dataclasses.replace(
        trace,
        target=target.name,
        draws=weighted.draws,
        extended=weighted,
        variables=target.variables,
        space=target.space,
    )
