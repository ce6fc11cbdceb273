"""100-D sparse Bayesian linear regression (Rhodes & Gutmann 2022, §5.2 and App. K, as in the authors' code).

Data: ``Z = default_rng(seed).integers(0, 3, (20, 5))`` (the paper's seed is unknown; we
use ``numpy.random.default_rng(0)``), ``X = [Z Z Z Z]`` (20 × 20), ``y = Z 1`` (the sum
of the first 5 columns). With ``X_s = X diag(s)``, ``|s| = Σ s_i`` over the D = 20 real
dimensions, ``c = (1 + g)/g`` and N = 20 rows, the log posterior of the authors' code is

    lgamma(|s| + α_π) + lgamma(D − |s| + β_π)
      + ½ logdet(X_sᵀX_s / g + λI) − ½ logdet(c X_sᵀX_s + λI)
      − (α_σ + N/2) log(2β_σ + yᵀy − yᵀX_s [c X_sᵀX_s + λI]⁻¹ X_sᵀy)

with α_π = 1e-3, β_π = 10, α_σ = β_σ = 0.1, g = N = 20, λ = 1e-3. The 80 appended
dimensions are independent Bernoulli(0.001): ``+ Σ_i s_i log 0.001 + (1 − s_i) log 0.999``.

**Evaluation.** ``X`` has duplicated columns, so ``X_sᵀX_s`` is singular and λ = 1e-3
sits ~6 decades below its largest eigenvalue: evaluated literally in float32 the log
density is off by up to 2.5e-3 (median 6e-4 over 200 random masks), against ~2e-5 for
the form below. We evaluate the same function exactly rewritten in terms of the ``r``
distinct columns ``Z`` (r = 5): with ``m_u = Σ_{j: column j is copy u} s_j²``,
``X_s X_sᵀ = Z diag(m) Zᵀ``, and Sylvester's determinant identity and the push-through
identity give

    logdet(a X_sᵀX_s + λI_D) = logdet(a diag(m) ZᵀZ + λI_r) + (D − r) log λ
    yᵀX_s [c X_sᵀX_s + λI]⁻¹ X_sᵀy = (Zᵀy)ᵀ (c diag(m) ZᵀZ + λI_r)⁻¹ diag(m) Zᵀy

(the (D − r) log λ terms cancel in the difference). This holds for every real ``s``, so
the function and its gradient are those of the formula above; the tests check it
against a literal float64 NumPy implementation. The r × r systems are solved by
unrolled Gaussian elimination (:func:`_eliminate`) rather than LAPACK: with
``jnp.linalg.slogdet``/``solve`` the batched float64 enumeration intermittently hung
the XLA CPU runtime (jaxlib 0.10.2; about half of the runs), with
elimination it never did.

**Truth.** Exact uni- and bivariate marginals of the 20 real dimensions by enumerating
the 2^20 states (float64), computed once by ``scripts/compute_sparse_regression_marginals.py``
and shipped as ``gradmc/data/sparse_regression_marginals.npz``; the 80 extra dimensions
are independent of them with P(s_i = 1) = 0.001. Chains start at s = e₂ (0-based
index 1 set to 1).
"""

from __future__ import annotations

from importlib import resources
from typing import NamedTuple

import jax.numpy as jnp
import numpy as np
from jax.scipy.special import gammaln

from gradmc.base import Target, Truth
from gradmc.enumeration import Enumeration, enumerate_target
from gradmc.registry import register_target
from gradmc.spaces import Binary

__all__ = [
    "Hyperparameters",
    "make_data",
    "log_posterior_fn",
    "enumerate_posterior",
    "load_cache",
    "sparse_regression_target",
    "sparse_regression",
    "CACHE_FILE",
]

CACHE_FILE = "sparse_regression_marginals.npz"


class Hyperparameters(NamedTuple):
    """App. K defaults (as in the authors' code; g = N = 20)."""

    alpha_pi: float = 1e-3
    beta_pi: float = 10.0
    alpha_sigma: float = 0.1
    beta_sigma: float = 0.1
    g: float = 20.0
    lam: float = 1e-3


def make_data(seed: int = 0, num_rows: int = 20, num_base: int = 5, copies: int = 4) -> tuple[np.ndarray, np.ndarray]:
    """``X = [Z ... Z]`` (``copies`` times), ``y = Z 1``, ``Z ~ randint(0, 3)`` of shape (num_rows, num_base)."""
    for name, v in (("num_rows", num_rows), ("num_base", num_base), ("copies", copies)):
        if int(v) < 1:
            raise ValueError(f"{name} must be >= 1, got {v}")
    z = np.random.default_rng(seed).integers(0, 3, size=(num_rows, num_base)).astype(np.float64)
    return np.tile(z, (1, copies)), z.sum(axis=1)


def _check_hyper(hyper: Hyperparameters) -> None:
    for name, v in hyper._asdict().items():
        if not (np.isfinite(v) and v > 0):
            raise ValueError(f"hyperparameter {name} must be finite and > 0, got {v}")


def _eliminate(a, b):
    """``(log det a, a⁻¹ b)`` by Gaussian elimination without pivoting, unrolled for small ``a``.

    Valid for ``a = λI + diag(m) G`` with ``m >= 0`` and ``G`` symmetric positive
    semi-definite: every leading principal block is similar to the symmetric positive
    definite ``λI + diag(√m) G diag(√m)``, so all pivots are positive. Plain array
    arithmetic, so it vectorises over chains without LAPACK calls.
    """
    r = a.shape[0]
    logdet = jnp.zeros((), a.dtype)
    for k in range(r):
        pivot = a[k, k]
        logdet = logdet + jnp.log(pivot)
        factor = a[k + 1 :, k] / pivot
        a = a.at[k + 1 :].add(-factor[:, None] * a[k])
        b = b.at[k + 1 :].add(-factor * b[k])
    x = jnp.zeros_like(b)
    for k in reversed(range(r)):
        x = x.at[k].set((b[k] - a[k, k + 1 :] @ x[k + 1 :]) / a[k, k])
    return logdet, x


def log_posterior_fn(x, y, hyper: Hyperparameters = Hyperparameters()):
    """``log p(s | X, y)`` (unnormalised) of App. K on ``s ∈ R^D``, via the distinct columns of ``X``."""
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    if x.ndim != 2 or y.shape != (x.shape[0],):
        raise ValueError(f"X must be (N, D) and y (N,); got X {x.shape}, y {y.shape}")
    _check_hyper(hyper)
    n, dim = x.shape
    z, copy_of = np.unique(x, axis=1, return_inverse=True)  # X = Z[:, copy_of]
    copies = np.eye(z.shape[1])[copy_of.ravel()]  # (D, r): column j is a copy of Z[:, copy_of[j]]
    gram, zy, yy = z.T @ z, z.T @ y, float(y @ y)
    c = (1.0 + hyper.g) / hyper.g
    eye = np.eye(z.shape[1])

    def logdensity_fn(s):
        s = jnp.asarray(s)
        f = lambda a: jnp.asarray(a, s.dtype)  # noqa: E731 (constants in the input's precision)
        m = (s * s) @ f(copies)
        weighted = m[:, None] * f(gram)  # diag(m) ZᵀZ
        size = jnp.sum(s)
        prior = gammaln(size + hyper.alpha_pi) + gammaln(dim - size + hyper.beta_pi)
        logdet1, _ = _eliminate(weighted / hyper.g + hyper.lam * f(eye), m)
        logdet2, solved = _eliminate(c * weighted + hyper.lam * f(eye), m * f(zy))
        quad = f(zy) @ solved
        logdet = logdet1 - logdet2
        return prior + 0.5 * logdet - (hyper.alpha_sigma + n / 2) * jnp.log(2 * hyper.beta_sigma + yy - quad)

    return logdensity_fn


def enumerate_posterior(x, y, hyper: Hyperparameters = Hyperparameters()) -> Enumeration:
    """Exact distribution of the D real dimensions by enumerating the 2^D states (float64)."""
    x = np.asarray(x)
    return enumerate_target(log_posterior_fn(x, y, hyper), Binary(x.shape[1]), chunk_size=2**16)


def load_cache() -> dict:
    """The shipped enumeration: ``pairwise`` (20, 20, 2, 2), ``log_normaliser``, and the
    ``x``, ``y``, ``seed`` and ``hyper`` it belongs to.
    """
    with resources.files("gradmc").joinpath("data", CACHE_FILE).open("rb") as fh:
        with np.load(fh) as data:
            return {k: data[k] for k in data.files}


def _cached_pairwise(x, y, hyper: Hyperparameters) -> np.ndarray | None:
    try:
        cache = load_cache()
    except FileNotFoundError:
        return None
    given = {"x": x, "y": y, "hyper": np.asarray(hyper, np.float64)}
    return cache["pairwise"] if all(np.array_equal(cache[k], v) for k, v in given.items()) else None


def _full_pairwise(real: np.ndarray, num_extra: int, extra_prob: float) -> np.ndarray:
    """Bivariate marginals of [real dims, independent Bernoulli(extra_prob) dims]."""
    d_real = real.shape[0]
    real_marg = real[np.arange(d_real), np.arange(d_real)].diagonal(axis1=-2, axis2=-1)
    marg = np.concatenate([real_marg, np.tile([1 - extra_prob, extra_prob], (num_extra, 1))])
    out = np.einsum("ia,jb->ijab", marg, marg)
    out[:d_real, :d_real] = real
    k = np.arange(d_real, d_real + num_extra)
    out[k, k] = np.einsum("ia,ab->iab", marg[k], np.eye(2))
    return out


def sparse_regression_target(
    x,
    y,
    *,
    num_extra: int = 80,
    extra_prob: float = 1e-3,
    hyper: Hyperparameters = Hyperparameters(),
    name: str = "sparse-regression",
) -> Target:
    """The posterior over masks of ``(x, y)`` times ``num_extra`` independent Bernoulli(extra_prob) dims.

    Truth: from the shipped cache when ``(x, y, hyper)`` are the cached ones, else by a
    fresh enumeration (2^D states). ``metadata["pairwise_marginals"]`` is the exact
    ``(d, d, 2, 2)`` table P(s_i = a, s_j = b).
    """
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    if not (0.0 < extra_prob < 1.0):
        raise ValueError(f"extra_prob must be in (0, 1), got {extra_prob}")
    if int(num_extra) < 0:
        raise ValueError(f"num_extra must be >= 0, got {num_extra}")
    d_real, d = x.shape[1], x.shape[1] + int(num_extra)
    posterior = log_posterior_fn(x, y, hyper)
    log_on, log_off = np.log(extra_prob), np.log1p(-extra_prob)

    def logdensity_fn(s):
        s = jnp.asarray(s)
        extra = s[d_real:]
        return posterior(s[:d_real]) + jnp.sum(extra * log_on + (1 - extra) * log_off)

    real = _cached_pairwise(x, y, hyper)
    source = f"enumeration of 2^{d_real} states (cached)"
    if real is None:
        real = enumerate_posterior(x, y, hyper).pairwise
        source = f"enumeration of 2^{d_real} states"
    pairwise = _full_pairwise(real, int(num_extra), extra_prob)
    marginals = pairwise[np.arange(d), np.arange(d)].diagonal(axis1=-2, axis2=-1).copy()
    mean, second = marginals[:, 1], pairwise[..., 1, 1]
    start = np.zeros(d, np.float32)
    start[1] = 1.0
    description = (
        f"sparse Bayesian linear regression (App. K): {d_real} real + {num_extra} Bernoulli({extra_prob}) dims"
    )
    return Target(
        name=name,
        logdensity_fn=logdensity_fn,
        space=Binary(d),
        description=description,
        truth=Truth(mean=mean, cov=second - np.outer(mean, mean), marginals=marginals, source=source),
        initial_position=lambda key: jnp.asarray(start),
        metadata={"pairwise_marginals": pairwise, "x": x, "y": y, "hyper": hyper, "num_real": d_real},
    )


@register_target(
    "sparse-regression",
    "Rhodes & Gutmann §5.2: 100-D sparse Bayesian linear regression posterior "
    "(App. K, the authors' code), exact marginals",
    kind="discrete",
)
def sparse_regression(seed: int = 0, num_extra: int = 80, extra_prob: float = 1e-3) -> Target:
    """The paper's problem: 20 rows, 5 covariates × 4 copies, data from ``default_rng(seed)``."""
    x, y = make_data(seed)
    return sparse_regression_target(x, y, num_extra=num_extra, extra_prob=extra_prob)
