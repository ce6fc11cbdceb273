"""Gradient-based adaptive MCMC (Titsias & Dellaportas 2019): gadRWM, gadMALAf, gadMALAe.

Proposal (reparameterised, eps ~ N(0, I), L lower-triangular with positive diagonal):

* RWM   ``y = x + L eps`` (§2.2);
* MALA  ``y = x + 1/2 L L^T g_x + L eps`` with ``g = grad log pi`` (§2.3).

Warm-up ascends the entropy-regularised lower bound on the generalised speed measure
(eq. 5-7), ``F(L) = E[min(0, log a(x, y(L)))] + beta sum_i log L_ii``, with the one-sample
reparameterisation gradient at the proposal actually made (Algorithm 1). With
``[A]_lower`` = ``tril(A)`` and ``d = g_x - g_y``, and only when ``log a < 0``:

* gadRWM   ``grad_L = [g_y eps^T]_lower`` (the eq. after eq. 7, exact);
* gadMALAf ``grad_L = [-1/2 d (eps + 1/2 L^T d)^T]_lower`` — the gradient with ``g_y`` held
  constant in ``L`` (paper §2.3 and supplement; one outer product, O(n^2));
* gadMALAe the exact gradient: autodiff of ``log a`` through ``y(L)`` *and* ``g_y(L)``.
  The extra work is one reverse pass through ``grad log pi`` (a Hessian-vector product)
  per warm-up step, on top of the O(n^2) update shared by all three. Measured (CPU,
  float32, one chain, jitted scan of 2,000 warm-up steps, best of 5):
  Neal's 100-D Gaussian 65 vs 56 us per step (1.15x gadMALAf; there the O(n^2) update
  dominates a 1.3 us gradient), logistic regression on Caravan (d = 86, N = 5822)
  197 vs 128 us (1.54x; one gradient is 90 us). Kept draws cost the same for both.

plus ``beta diag(1/L_ii)`` from the entropy term in every case. The step is the RMSProp
of the released code (``G <- kappa grad^2 + (1 - kappa) G``, ``kappa = 1`` at the first
update, so ``G0`` is overwritten; ``L <- L + eta grad / (1 + sqrt(G))``), then
``diag(L) >= 1e-3``. The entropy
weight follows ``beta <- max(beta (1 + 0.02 (accepted - alpha*)), 1e-4)`` (Algorithm 1).
An update whose log ratio or gradient is not finite is skipped and counted; ``L`` stays
lower-triangular with a positive diagonal by construction.

After warm-up ``L`` and ``beta`` are frozen: the kept chain is plain RWM / preconditioned
MALA with proposal covariance ``L L^T``. Constants (eta, alpha*, L0 = 0.1/sqrt(n) I,
beta0 = 1, G0 = 0.01) are those of the released code.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from blackjax.base import build_sampling_algorithm

from gradmc.base import SamplingAlgorithm, mh_accept
from gradmc.checks import check_positive, check_probability

__all__ = [
    "METHODS",
    "GadState",
    "GadAdaptState",
    "GadInfo",
    "init",
    "check_start",
    "init_adaptation",
    "adaptive_init",
    "rmsprop_step",
    "log_acceptance_ratio",
    "fast_mala_gradient",
    "build_kernel",
    "as_top_level_api",
]

#: method -> (Langevin drift?, default alpha*, default eta, gradient evaluations per warm-up step)
METHODS = {
    "rwm": (False, 0.25, 5e-5, 1),
    "mala-f": (True, 0.55, 1.5e-4, 1),
    "mala-e": (True, 0.55, 1.5e-4, 2),
}


class GadState(NamedTuple):
    """Position, log density and its gradient (the MALA kernel state)."""

    position: jax.Array
    logdensity: jax.Array
    logdensity_grad: jax.Array


class GadAdaptState(NamedTuple):
    """Kernel state plus the adapted proposal: Cholesky factor ``L``, entropy weight
    ``beta``, RMSProp accumulator ``G``, applied updates ``t``, skipped updates.
    """

    state: GadState
    L: jax.Array
    beta: jax.Array
    G: jax.Array
    t: jax.Array
    num_skipped: jax.Array


class GadInfo(NamedTuple):
    """MH acceptance probability, acceptance, non-finite proposal, ``log a(x, y)``, and whether the update of
    ``L`` was skipped.
    """

    acceptance_rate: jax.Array
    is_accepted: jax.Array
    nonfinite: jax.Array
    log_ratio: jax.Array
    skipped_update: jax.Array


def _method(method: str):
    if method not in METHODS:
        raise ValueError(f"method must be one of {sorted(METHODS)}, got {method!r}")
    return METHODS[method]


def init(position, logdensity_fn: Callable) -> GadState:
    """The kernel state at ``position``.

    Parameters
    ----------
    position : array
        The starting point (a flat vector).
    logdensity_fn : callable
        The unnormalised log density (differentiable).
    """
    position = jnp.asarray(position)
    if position.ndim != 1:
        raise ValueError(f"gad samplers need a flat position vector, got shape {position.shape}")
    logdensity, grad = jax.value_and_grad(logdensity_fn)(position)
    return GadState(position, logdensity, grad)


def _check_chol(L, dim: int) -> jax.Array:
    m = np.asarray(L, dtype=np.float64)
    if m.shape != (dim, dim):
        raise ValueError(f"L must be a {dim}x{dim} matrix, got shape {m.shape}")
    if not np.all(np.isfinite(m)) or np.any(np.triu(m, 1) != 0) or np.any(np.diag(m) <= 0):
        raise ValueError("L must be finite and lower-triangular with a positive diagonal")
    return jnp.asarray(m, jnp.float32)


def _check_start(beta0, G0) -> None:
    if not (float(beta0) > 0 and float(G0) >= 0):
        raise ValueError(f"need beta0 > 0 and G0 >= 0, got beta0={beta0}, G0={G0}")


def check_start(dim: int, L0=None, beta0: float = 1.0, G0: float = 0.01) -> jax.Array | None:
    """``L0`` as float32 (``None`` when not given) after checking the adaptation's starting values.

    Parameters
    ----------
    dim : int
        The target's dimension n.
    L0 : array, optional
        n x n, lower-triangular with a positive diagonal.
    beta0 : float
        The entropy weight's start (positive).
    G0 : float
        The RMSProp accumulator's start (non-negative).
    """
    L = None if L0 is None else _check_chol(L0, dim)
    _check_start(beta0, G0)
    return L


def init_adaptation(state: GadState, L0=None, beta0: float = 1.0, G0: float = 0.01) -> GadAdaptState:
    """Adaptation state (Algorithm 1's start) with ``L0`` (default ``0.1/sqrt(n) I``), ``beta0`` and ``G0``.

    Parameters
    ----------
    state : GadState
        The kernel state to start from.
    L0 : array, optional
        The first Cholesky factor.
    beta0 : float
        The first entropy weight.
    G0 : float
        The first RMSProp accumulator (every entry).
    """
    n = state.position.shape[0]
    checked = check_start(n, L0, beta0, G0)
    L = jnp.eye(n, dtype=jnp.float32) * (0.1 / np.sqrt(n)) if L0 is None else checked
    return GadAdaptState(state, L, jnp.float32(beta0), jnp.full((n, n), G0, jnp.float32), jnp.int32(0), jnp.int32(0))


def adaptive_init(position, logdensity_fn: Callable, L0=None, beta0: float = 1.0, G0: float = 0.01) -> GadAdaptState:
    """:func:`init_adaptation` of :func:`init` at ``position``.

    Parameters
    ----------
    position : array
        The starting point (a flat vector).
    logdensity_fn : callable
        The unnormalised log density.
    L0, beta0, G0
        As in :func:`init_adaptation`.
    """
    return init_adaptation(init(position, logdensity_fn), L0, beta0, G0)


def rmsprop_step(G, grad, t, kappa):
    """The released code's RMSProp: ``G_t = k_t grad^2 + (1 - k_t) G_{t-1}`` with ``k_t = kappa``
    except ``k = 1`` at the first update (``t == 0``); returns ``(G_t, grad / (1 + sqrt(G_t)))``.

    Parameters
    ----------
    G : array
        The accumulator ``G_{t-1}``.
    grad : array
        The gradient.
    t : int
        The number of updates applied so far.
    kappa : float
        The accumulator's weight of a new squared gradient.
    """
    k = jnp.where(t == 0, 1.0, kappa)
    G = k * grad**2 + (1.0 - k) * G
    return G, grad / (1.0 + jnp.sqrt(G))


def _propose(x, g_x, L, eps, langevin: bool):
    drift = 0.5 * (L @ (L.T @ g_x)) if langevin else 0.0
    return x + drift + L @ eps


def log_acceptance_ratio(L, state: GadState, eps, logdensity_fn: Callable, langevin: bool, stop_grad_y: bool = False):
    """``log a(x, y)`` for ``y = y(L, eps)`` and the proposed state (paper eq. 6 and §2.3).

    MALA: ``log pi(y) - log pi(x) - 1/2 ||eps + 1/2 L^T (g_x + g_y)||^2 + 1/2 ||eps||^2``.
    Differentiable in ``L``; ``stop_grad_y`` holds ``g_y`` constant (the gadMALAf gradient).

    Parameters
    ----------
    L : array
        The Cholesky factor of the proposal.
    state : GadState
        The current state x.
    eps : array
        The standard normal draw.
    logdensity_fn : callable
        The unnormalised log density.
    langevin : bool
        MALA's proposal (else RWM's).
    stop_grad_y : bool
        Hold ``g_y`` constant when differentiating in ``L``.
    """
    y = _propose(state.position, state.logdensity_grad, L, eps, langevin)
    logdensity_y, g_y = jax.value_and_grad(logdensity_fn)(y)
    log_ratio = logdensity_y - state.logdensity
    if langevin:
        g = jax.lax.stop_gradient(g_y) if stop_grad_y else g_y
        back = eps + 0.5 * (L.T @ (state.logdensity_grad + g))
        log_ratio = log_ratio + 0.5 * (eps @ eps - back @ back)
    return log_ratio, GadState(y, logdensity_y, g_y)


def fast_mala_gradient(L, eps, g_x, g_y):
    """gadMALAf: ``-1/2 d (eps + 1/2 L^T d)^T`` with ``d = g_x - g_y`` (before ``tril``; paper §2.3).

    Parameters
    ----------
    L : array
        The Cholesky factor.
    eps : array
        The standard normal draw of the proposal.
    g_x, g_y : array
        ``grad log pi`` at the current point and at the proposal.
    """
    d = g_x - g_y
    return -0.5 * jnp.outer(d, eps + 0.5 * (L.T @ d))


def _forward(L, state, eps, logdensity_fn, langevin):
    return log_acceptance_ratio(L, state, eps, logdensity_fn, langevin), None


def _check_hyper(method, target_accept, learning_rate, kappa):
    langevin, default_accept, default_eta, _ = _method(method)
    target_accept = default_accept if target_accept is None else target_accept
    learning_rate = default_eta if learning_rate is None else learning_rate
    check_probability("target acceptance rate alpha*", target_accept)
    check_positive("learning rate", learning_rate)
    if not 0.0 < float(kappa) <= 1.0:
        raise ValueError(f"RMSProp kappa must lie in (0, 1], got {kappa}")
    return langevin, float(target_accept), float(learning_rate)


def build_kernel(
    method: str,
    target_accept=None,
    learning_rate=None,
    kappa: float = 0.1,
    beta_rate: float = 0.02,
    beta_min: float = 1e-4,
    diag_min: float = 1e-3,
):
    """Adaptive kernel ``kernel(key, adapt_state, logdensity_fn)``: one proposal, one MH
    test, one gradient step on ``L`` and one update of ``beta`` (Algorithm 1).

    The frozen kernel is not here: it is :mod:`gradmc.continuous.rwm` (``step_size=1``,
    ``chol=L``) or :mod:`gradmc.continuous.mala` (``step_size=1/2``, ``chol=L``), whose
    proposals ``x + L eps`` and ``x + 1/2 L L^T g + L eps`` are the ones adapted here.

    Parameters
    ----------
    method : {"rwm", "mala-f", "mala-e"}
        The proposal and the gradient of the bound.
    target_accept : float, optional
        alpha* (default per method, :data:`METHODS`).
    learning_rate : float, optional
        eta (default per method).
    kappa : float
        RMSProp's weight, in (0, 1].
    beta_rate, beta_min : float
        The entropy weight's gain and floor.
    diag_min : float
        The floor of ``diag(L)``.
    """
    langevin, target_accept, learning_rate = _check_hyper(method, target_accept, learning_rate, kappa)

    evaluate = jax.value_and_grad(log_acceptance_ratio, has_aux=True) if method == "mala-e" else _forward

    def bound_gradient(L, state, proposal, eps, log_ratio, dL_exact):
        if method == "mala-e":
            dL = dL_exact
        elif method == "mala-f":
            dL = fast_mala_gradient(L, eps, state.logdensity_grad, proposal.logdensity_grad)
        else:
            dL = jnp.outer(proposal.logdensity_grad, eps)
        return jnp.tril(jnp.where(log_ratio < 0, dL, 0.0))

    def kernel(rng_key, astate: GadAdaptState, logdensity_fn):
        L, beta, state = astate.L, astate.beta, astate.state
        key_eps, key_mh = jax.random.split(rng_key)
        eps = jax.random.normal(key_eps, state.position.shape, state.position.dtype)
        (log_ratio, proposal), dL_exact = evaluate(L, state, eps, logdensity_fn, langevin)
        accept, prob, nonfinite = mh_accept(key_mh, log_ratio)
        new_state = jax.tree.map(lambda a, b: jnp.where(accept, a, b), proposal, state)
        grad = bound_gradient(L, state, proposal, eps, log_ratio, dL_exact) + beta * jnp.diag(1.0 / jnp.diag(L))
        ok = jnp.isfinite(log_ratio) & jnp.all(jnp.isfinite(grad))
        grad = jnp.where(ok, grad, 0.0)
        G, step = rmsprop_step(astate.G, grad, astate.t, kappa)
        new_L = L + learning_rate * step
        new_L = new_L.at[jnp.diag_indices_from(L)].set(jnp.maximum(jnp.diag(new_L), diag_min))
        new_beta = jnp.maximum(beta * (1.0 + beta_rate * (accept.astype(beta.dtype) - target_accept)), beta_min)
        new = GadAdaptState(
            new_state,
            jnp.where(ok, new_L, L),
            new_beta,
            jnp.where(ok, G, astate.G),
            astate.t + ok.astype(jnp.int32),
            astate.num_skipped + (~ok).astype(jnp.int32),
        )
        return new, GadInfo(prob, accept, nonfinite, log_ratio, ~ok)

    return kernel


def as_top_level_api(
    logdensity_fn: Callable,
    method: str = "mala-f",
    target_accept=None,
    learning_rate=None,
    L0=None,
    beta0: float = 1.0,
    G0: float = 0.01,
    **adapt_options,
) -> SamplingAlgorithm:
    """The adaptive sampler: ``alg.init(x) -> GadAdaptState``; ``alg.step(key, s)`` adapts ``L``, ``beta``.

    Parameters
    ----------
    logdensity_fn : callable
        The unnormalised log density (differentiable).
    method : {"rwm", "mala-f", "mala-e"}
        As in :func:`build_kernel`.
    target_accept, learning_rate
        As in :func:`build_kernel`.
    L0, beta0, G0
        As in :func:`init_adaptation`.
    **adapt_options
        Further options of :func:`build_kernel`.
    """
    kernel = build_kernel(method, target_accept, learning_rate, **adapt_options)
    return build_sampling_algorithm(kernel, adaptive_init, logdensity_fn, init_args=(L0, beta0, G0))
