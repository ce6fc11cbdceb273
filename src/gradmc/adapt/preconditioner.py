"""How PAVG's M is learned during warm-up (Rhodes & Gutmann 2022, App. F); the forms M is
held in are :mod:`gradmc.curvature.pavg_model`.

* :func:`least_squares_scale`, :func:`choose_candidate` — App. F.1: for each candidate
  M (empirical covariance and precision of the burn-in samples) the least-squares γ0 of
  eqs 36–37, keeping the candidate γ0 M of lower loss.
* :func:`adapt_gamma` — Algorithm F.5 (AdaptGamma), maximising the mean L1 jump.
* :func:`learning_sampler` — Algorithm F.4 as a warm-up: collect the burn-in history for
  ``fit_at`` steps, fit M, then AdaptGamma every ``refit_interval`` steps with a decaying
  rate; ε follows a step-size rule towards an acceptance rate at every step. Statistics
  are pooled across chains (``lax.pmean``/``all_gather`` over the runner's ``"chain"``
  axis) when that axis exists, else each chain adapts on its own history; the model
  learned from them is held once for all chains. Adaptation stops at ``finalize``;
  the kept chain is a fixed PAVG kernel.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from gradmc.adapt.step_size import StepSizeRule, fixed_rule
from gradmc.adapt.warmup import WarmupKernel, bind_two_phase
from gradmc.base import BoundSampler, Shared
from gradmc.chains import gather_chains, pool_chains
from gradmc.curvature.pavg_model import EigenPreconditioner, eigen_preconditioner, from_eigh

__all__ = [
    "LearningState",
    "least_squares_scale",
    "choose_candidate",
    "adapt_gamma",
    "PooledModel",
    "HISTORY_FLOATS",
    "learning_sampler",
    "DEFAULTS",
]

DEFAULTS = dict(num_fit=1000, refit_interval=100, adapt_rate=0.25, decay=0.99)
"""Algorithm F.4 defaults (the authors' settings): N_M = 1000, N_adapt = 100, δ = 0.25, ρ = 0.99."""


def least_squares_scale(M, deltas, ys):
    """γ0 = argmin Σ_t (y_t − γ0 x_t)², x_t = ½ Δ_tᵀ M Δ_t (eqs 36–37); returns (γ0, loss).

    Sums are pooled across chains.

    Parameters
    ----------
    M : jax.Array
        A candidate M, (n, n).
    deltas : jax.Array
        (T, n) moves Δ_t = s_{t+1} − s_t.
    ys : jax.Array
        (T,) residuals y_t = f(s_{t+1}) − f(s_t) − ∇f(s_t)ᵀΔ_t.
    """
    x = 0.5 * jnp.einsum("ti,ij,tj->t", deltas, M, deltas)
    sxy, sxx, syy = (pool_chains(jnp.sum(v)) for v in (x * ys, x * x, ys * ys))
    gamma0 = jnp.where(sxx > 0, sxy / jnp.where(sxx > 0, sxx, 1.0), 0.0)
    return gamma0, syy - 2.0 * gamma0 * sxy + gamma0**2 * sxx


def choose_candidate(candidates, deltas, ys):
    """App. F.1: the rescaled candidate γ0 M of lowest least-squares loss.

    Parameters
    ----------
    candidates : sequence of jax.Array
        The candidate matrices M, each (n, n).
    deltas, ys : jax.Array
        The burn-in history, as for :func:`least_squares_scale`.
    """
    best, best_loss = None, None
    for M in candidates:
        gamma0, loss = least_squares_scale(M, deltas, ys)
        if best is None:
            best, best_loss = gamma0 * M, loss
        else:
            better = loss < best_loss
            best, best_loss = jnp.where(better, gamma0 * M, best), jnp.where(better, loss, best_loss)
    return best


def adapt_gamma(gamma, gamma_old, rate, a_new, a_old):
    """Algorithm F.5: move γ in the direction that increased the mean jump; returns (γ, γ_old).

    Parameters
    ----------
    gamma, gamma_old : jax.Array
        The current and the previous γ.
    rate : float or jax.Array
        The step of the rule (multiplicative when |γ| ≥ 1, additive otherwise).
    a_new, a_old : jax.Array
        The mean L1 jump of the last and of the previous window.
    """
    increased = gamma >= gamma_old
    improved = a_new >= a_old
    step = jnp.where(increased == improved, rate, -rate)
    new_gamma = jnp.where(jnp.abs(gamma) >= 1.0, gamma * (1.0 + step), gamma + step)
    return new_gamma, gamma


#: The most burn-in moves a chain keeps for the least-squares scale of App. F.1 hold at
#: most this many floats (n per move): every move when n ≤ 1,048, the last ones above.
HISTORY_FLOATS = 2**20


class PooledModel(NamedTuple):
    """What :func:`learning_sampler` learns from all chains together (held once, in
    :class:`~gradmc.base.Shared`): the fitted M's eigendecomposition, γ and AdaptGamma's
    bookkeeping, the step-size rule's state, and the pooled sums M is fitted to; the
    current preconditioner follows from them (:meth:`current_precond`).
    """

    eigvecs: jax.Array  # eigendecomposition of the fitted M (γ = 1)
    eigvals: jax.Array
    gamma: jax.Array
    gamma_old: jax.Array
    rate: jax.Array
    sum_s: jax.Array  # Σ over steps of the chain mean of s
    sum_ss: jax.Array  # Σ over steps of the chain mean of s sᵀ
    prev_window_mean: jax.Array
    step_rule: NamedTuple | jax.Array  # the state of the rule ε follows

    def current_precond(self, rule: StepSizeRule) -> EigenPreconditioner:
        """γM in eigen form at the rule's current ε."""
        return eigen_preconditioner(self.eigvecs, self.gamma * self.eigvals, rule.current(self.step_rule))


class LearningState(NamedTuple):
    """The warm-up state of :func:`learning_sampler`: one chain's kernel state, its recent
    burn-in moves and residuals (for γ0 of eqs 36–37) and jump sum, and the model learned
    from all chains (:class:`PooledModel`, held once).
    """

    kernel: NamedTuple
    deltas: jax.Array  # (history, n) the chain's last burn-in moves
    ys: jax.Array  # (history,) their residuals of eq. 37
    window_sum: jax.Array
    pooled: Shared


def learning_sampler(
    name: str,
    kernel_init: Callable,
    kernel: Callable,
    stats_fn: Callable,
    dim: int,
    step_size,
    num_warmup: int,
    M=None,
    initial_step_size=None,
    adapt: bool = True,
    num_fit: int = DEFAULTS["num_fit"],
    refit_interval: int = DEFAULTS["refit_interval"],
    adapt_rate: float = DEFAULTS["adapt_rate"],
    decay: float = DEFAULTS["decay"],
    step_size_rule: StepSizeRule | None = None,
) -> BoundSampler:
    """PAVG warm-up of Algorithm F.4 around ``kernel(key, state, precond) -> (state, info)``.

    M, its eigendecomposition and the sums it is fitted to exist once for all chains
    (:class:`~gradmc.base.Shared`): the mean and second moment are pooled each step by one
    product of the chains' positions (``all_gather``), and the least-squares scale γ0 of
    App. F.1 pools each chain's last ``min(fit_at, HISTORY_FLOATS // n)`` moves.

    Parameters
    ----------
    name : str
        The sampler's name.
    kernel_init : callable
        ``kernel_init(key, position) -> state`` of the kernel.
    kernel : callable
        ``kernel(key, state, precond) -> (state, info)`` with a :class:`PAVGPreconditioner`
        (kept draws) or an :class:`EigenPreconditioner` (warm-up).
    stats_fn : callable
        ``stats_fn(state, info, gamma, step_size) -> StepStats``.
    dim : int
        n, the flattened dimension M acts on.
    step_size : float or jax.Array
        ε after the fit: of the kept kernel, or, with ``step_size_rule``, where the rule
        starts again when M is fitted.
    num_warmup : int
        Warm-up steps.
    M : array_like, optional
        None: M starts at 0 (AVG) and is fitted after ``fit_at = min(num_fit,
        num_warmup // 2)`` steps from the burn-in history (App. F.1). With ``M`` given,
        lines 5–8 of Algorithm F.4 are dropped (App. F).
    initial_step_size : float, optional
        The ε used before the fit, while M = 0 (default ``step_size``; PAVG is then AVG;
        the paper's poly2 runs use 0.02, then 1000 after adaptation).
    adapt : bool
        Run AdaptGamma on γ every ``refit_interval`` steps after the fit.
    num_fit, refit_interval : int
        N_M and N_adapt of Algorithm F.4.
    adapt_rate, decay : float
        AdaptGamma's rate and its decay per window.
    step_size_rule : StepSizeRule, optional
        The rule ε follows at every warm-up step, on the acceptance rate pooled over chains
        (from ``initial_step_size``, and from ``step_size`` again at the fit); the kept ε is
        its final value. None keeps ε as given.
    """
    learn = M is None
    fit_at = min(int(num_fit), int(num_warmup) // 2) if learn else 0
    # on the host, once: as constants of the compiled warm-up they would be folded slowly
    if learn:  # M = 0
        eigvals0, eigvecs0 = np.zeros(dim, np.float32), np.eye(dim, dtype=np.float32)
    else:
        eigvals0, eigvecs0 = (v.astype(np.float32) for v in np.linalg.eigh(np.asarray(M, np.float64)))
    rule = fixed_rule() if step_size_rule is None else step_size_rule
    eps0 = step_size if initial_step_size is None or not learn else initial_step_size
    n_hist = max(min(fit_at, HISTORY_FLOATS // max(int(dim), 1)), 1)
    first_recorded = fit_at - n_hist

    def init(key, position):
        pooled = PooledModel(
            eigvecs=eigvecs0,
            eigvals=eigvals0,
            gamma=jnp.float32(1.0),
            gamma_old=jnp.float32(1.0),
            rate=jnp.float32(adapt_rate),
            sum_s=jnp.zeros((dim,), jnp.float32),
            sum_ss=jnp.zeros((dim, dim) if learn else (1, 1), jnp.float32),
            prev_window_mean=jnp.float32(0.0),
            step_rule=rule.init(eps0),
        )
        return LearningState(
            kernel=kernel_init(key, position),
            deltas=jnp.zeros((n_hist, dim), jnp.float32),
            ys=jnp.zeros((n_hist,), jnp.float32),
            window_sum=jnp.float32(0.0),
            pooled=Shared(pooled),
        )

    def record(ws, old, new, t):
        s = new.position.ravel()
        delta = s - old.position.ravel()
        y = new.logdensity - old.logdensity - jnp.dot(old.grad.ravel(), delta)
        slot = jnp.where(t >= first_recorded, t - first_recorded, n_hist)  # out of range: dropped

        def accumulate(pooled):
            positions = gather_chains(s)  # (chains, n), held once
            return pooled._replace(
                sum_s=pooled.sum_s + positions.mean(0),
                sum_ss=pooled.sum_ss + positions.T @ positions / positions.shape[0],
            )

        # the moments are needed only up to the fit: no n × n product after it
        pooled = jax.lax.cond(t < fit_at, accumulate, lambda pooled: pooled, ws.pooled.value)
        return ws._replace(
            deltas=ws.deltas.at[slot].set(delta, mode="drop"),
            ys=ws.ys.at[slot].set(jnp.where(jnp.isfinite(y), y, 0.0), mode="drop"),
            pooled=Shared(pooled),
        )

    def fit(ws):
        pooled = ws.pooled.value
        mean = pooled.sum_s / fit_at
        cov = pooled.sum_ss / fit_at - jnp.outer(mean, mean)
        cov = 0.5 * (cov + cov.T)
        precision = jnp.linalg.pinv(cov, hermitian=True)
        fitted = choose_candidate([cov, precision], ws.deltas, ws.ys)
        vals, vecs = jnp.linalg.eigh(fitted)
        pooled = pooled._replace(
            eigvecs=vecs,
            eigvals=vals,
            gamma=jnp.float32(1.0),
            gamma_old=jnp.float32(1.0),
            step_rule=rule.init(step_size),  # M changed scale: ε starts again
        )
        return ws._replace(pooled=Shared(pooled))

    def adapt_step(ws, a_new):
        pooled = ws.pooled.value
        gamma, gamma_old = adapt_gamma(pooled.gamma, pooled.gamma_old, pooled.rate, a_new, pooled.prev_window_mean)
        pooled = pooled._replace(
            gamma=gamma,
            gamma_old=gamma_old,
            rate=pooled.rate * decay,
        )
        return ws._replace(pooled=Shared(pooled))

    def follow_rule(ws, acceptance):
        pooled = ws.pooled.value
        step_rule = rule.update(pooled.step_rule, pool_chains(acceptance))
        return ws._replace(pooled=Shared(pooled._replace(step_rule=step_rule)))

    def warmup_step(key, ws, t):
        old = ws.kernel
        step_size_used = rule.current(ws.pooled.value.step_rule)
        new, info = kernel(key, old, ws.pooled.value.current_precond(rule))
        ws = ws._replace(kernel=new, window_sum=ws.window_sum + info.jump)
        if step_size_rule is not None:
            ws = follow_rule(ws, info.acceptance_rate)
        count = t + 1
        if learn:
            ws = record(ws, old, new, t)
            ws = jax.lax.cond(count == fit_at, fit, lambda w: w, ws)
        window_end = count % refit_interval == 0
        a_new = pool_chains(ws.window_sum) / refit_interval
        if adapt:
            ready = window_end & (count > fit_at) & (count >= 2 * refit_interval)
            ws = jax.lax.cond(ready, adapt_step, lambda w, a: w, ws, a_new)
        pooled = ws.pooled.value
        ws = ws._replace(
            window_sum=jnp.where(window_end, 0.0, ws.window_sum),
            pooled=Shared(pooled._replace(prev_window_mean=jnp.where(window_end, a_new, pooled.prev_window_mean))),
        )
        return ws, stats_fn(new, info, ws.pooled.value.gamma, step_size_used)

    def finalize(ws):
        pooled = ws.pooled.value
        eps = jnp.asarray(rule.final(pooled.step_rule), jnp.float32)
        # the kept kernel's M and R formed once: one mat-vec each per step
        precond = from_eigh(pooled.eigvecs, pooled.gamma * pooled.eigvals, eps)
        return ws.kernel, Shared({"step_size": eps, "precond": precond, "gamma": pooled.gamma})

    def step(key, state, params):
        state, info = kernel(key, state, params.value["precond"])
        return state, stats_fn(state, info, params.value["gamma"], params.value["step_size"])

    warmup = WarmupKernel(
        init,
        warmup_step,
        position=lambda ws: ws.kernel.position,
        refresh=lambda key, ws, position: ws._replace(kernel=kernel_init(key, position)),
    )
    return bind_two_phase(name, warmup, finalize, kernel_init, step)
