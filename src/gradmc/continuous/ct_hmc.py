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
The kernel is BlackJAX HMC (or NUTS) with Stan's window adaptation on (x, u).
"""

from __future__ import annotations

import blackjax
import jax
import jax.numpy as jnp
import numpy as np

from gradmc.base import Sampler, Target, reject_nonfinite
from gradmc.continuous.hmc import window_adapted_sampler
from gradmc.linalg import cholesky_factor
from gradmc.registry import register_sampler

__all__ = ["log_weight", "build"]


def log_weight(delta):
    """log(D / (1 - e^-D)), stable for all D (-> 0 at D = 0)."""
    small = jnp.abs(delta) < 1e-4
    d = jnp.where(small, 1.0, delta)
    pos = jnp.log(jnp.abs(d)) - jnp.log(-jnp.expm1(-jnp.abs(d)))  # D > 0 branch, for |D|
    value = jnp.where(d > 0, pos, pos + d)  # D < 0: log(-D) - log(e^-D - 1) = pos(|D|) - |D|
    return jnp.where(small, 0.5 * delta, value)


@register_sampler("ct-hmc", "continuously tempered HMC (Graham & Storkey 2017): inverse temperature as a state, Gaussian base")
def build(
    target: Target,
    num_warmup: int,
    base_mean=None,
    base_cov=None,
    kernel="hmc",
    num_integration_steps=10,
    target_accept=0.8,
    num_is_samples=2000,
):
    """Options: ``base_mean``/``base_cov`` of the Gaussian base q (default N(0, I)),
    ``kernel`` in {"hmc", "nuts"}, ``num_integration_steps`` (HMC), ``target_accept``,
    ``num_is_samples`` for the estimate of c = log Z."""
    d = target.dim
    mean = np.zeros(d) if base_mean is None else np.asarray(base_mean, np.float64)
    if mean.shape != (d,):
        raise ValueError(f"base_mean must have shape ({d},), got {mean.shape}")
    chol = np.asarray(cholesky_factor(np.eye(d) if base_cov is None else base_cov, "CT-HMC base covariance", d), np.float64)
    if kernel not in ("hmc", "nuts"):
        raise ValueError(f"kernel must be 'hmc' or 'nuts', got {kernel!r}")
    log_det = float(np.sum(np.log(np.diag(chol))))
    mean_j, chol_j, chol_inv = (jnp.asarray(a, jnp.float32) for a in (mean, chol, np.linalg.inv(chol)))
    shape = target.space.event_shape
    ell = target.logdensity_fn

    def log_base(x):
        z = chol_inv @ (x.reshape(-1) - mean_j)
        return -0.5 * jnp.dot(z, z) - log_det - 0.5 * d * np.log(2 * np.pi)

    xs = (mean_j + jax.random.normal(jax.random.key(2017), (int(num_is_samples), d)) @ chol_j.T).reshape(-1, *shape)
    log_ratio = np.asarray(jax.jit(jax.vmap(lambda x: ell(x) - log_base(x)))(xs), np.float64)
    log_ratio = log_ratio[np.isfinite(log_ratio)]
    c = float(np.logaddexp.reduce(log_ratio) - np.log(log_ratio.size)) if log_ratio.size else 0.0

    def split(z):
        return z[:d].reshape(shape), z[d]

    def joint(z):
        x, u = split(z)
        beta = jax.nn.sigmoid(u)
        return beta * ell(x) + (1.0 - beta) * (log_base(x) + c) + jax.nn.log_sigmoid(u) + jax.nn.log_sigmoid(-u)

    if kernel == "hmc":
        inner = window_adapted_sampler(
            "ct-hmc", blackjax.hmc.build_kernel(), reject_nonfinite(joint), num_warmup, dense_mass=False,
            target_accept=target_accept, initial_step_size=1.0, num_integration_steps=int(num_integration_steps),
        )
    else:
        inner = window_adapted_sampler(
            "ct-hmc", blackjax.nuts.build_kernel(), reject_nonfinite(joint), num_warmup, dense_mass=False,
            target_accept=target_accept, initial_step_size=1.0,
        )

    def with_weight(state, stats):
        x, u = split(inner.position(state))
        delta = ell(x) - log_base(x) - c
        extra = dict(stats.extra, beta=jax.nn.sigmoid(u), log_weight=log_weight(delta))
        return state, stats._replace(extra=extra)

    def finalize(state):
        kernel_state, params = inner.finalize(state)
        return kernel_state, dict(params, log_z_estimate=jnp.asarray(c, jnp.float32))

    return Sampler(
        "ct-hmc",
        init=lambda key, position: inner.init(key, jnp.concatenate([position.reshape(-1), jnp.zeros(1, position.dtype)])),
        warmup_step=lambda key, state, t: with_weight(*inner.warmup_step(key, state, t)),
        finalize=finalize,
        step=lambda key, state, params: with_weight(*inner.step(key, state, {k: v for k, v in params.items() if k != "log_z_estimate"})),
        position=lambda state: split(inner.position(state))[0],
    )
