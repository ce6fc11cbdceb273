"""Per-chain estimation errors of discrete samplers (Rhodes & Gutmann 2022, Table 5).

Every function takes draws (chain, draw, d) with entries in ``values`` (or one-hot
(chain, draw, d, k) rows) and returns one number per chain, shape (chain,): the paper
computes each error from a single chain's history, then a mean and standard error over
chains.

Zero convention for the KL divergence: 0 log(0/p) = 0 (values a chain never visited add
nothing); a visited value with exact probability 0 gives +inf. The paper does not say how
its code treats zeros.
"""

from __future__ import annotations

import numpy as np

from gradmc.diagnostics._common import as_draws, flat_coords, mean_kl, value_indices

__all__ = [
    "empirical_marginals",
    "empirical_pair_marginals",
    "marginal_kl",
    "mean_abs_marginal_error",
    "pairwise_error",
    "covariance_frobenius_error",
]


def _one_hot(draws, values) -> np.ndarray:
    idx = value_indices(draws, values)
    return (idx[..., None] == np.arange(np.asarray(values).size)).astype(np.float32)  # (c, n, d, k)


def _check_table(table, shape, what, axes) -> np.ndarray:
    """A probability table of ``shape`` whose entries over ``axes`` sum to 1."""
    t = np.asarray(table, dtype=np.float64)
    if t.shape != shape:
        raise ValueError(f"{what} must have shape {shape}, got {t.shape}")
    if np.any(t < 0) or not np.all(np.isfinite(t)) or not np.allclose(t.sum(axis=axes), 1.0, atol=1e-5):
        raise ValueError(f"{what} must hold finite, non-negative probabilities that sum to 1 per table")
    return t


def empirical_marginals(draws, values) -> np.ndarray:
    """Per-chain univariate frequencies q_i(x), shape (chain, d, k)."""
    return _one_hot(draws, values).mean(axis=1, dtype=np.float64)


def empirical_pair_marginals(draws, values) -> np.ndarray:
    """Per-chain bivariate frequencies q_ij(x, y), shape (chain, d, d, k, k)."""
    h = _one_hot(draws, values)
    c, n, d, k = h.shape
    flat = h.reshape(c, n, d * k)
    joint = np.matmul(flat.transpose(0, 2, 1), flat).astype(np.float64) / n  # (c, dk, dk)
    return joint.reshape(c, d, k, d, k).transpose(0, 1, 3, 2, 4)


def marginal_kl(draws, marginals, values) -> np.ndarray:
    """(1/d) sum_i KL(q_i || p_i) per chain; ``marginals`` p is (d, k) (paper Table 5, ordinal)."""
    q = empirical_marginals(draws, values)
    return mean_kl(q, _check_table(marginals, q.shape[1:], "marginals", -1))


def mean_abs_marginal_error(draws, marginals, values) -> np.ndarray:
    """(1/d) sum_i (1/2) sum_x |q_i(x) - p_i(x)| per chain.

    For binary values this is the paper's (1/d) sum_i |q_i(s_i=1) - p_i(s_i=1)|
    (Table 5, Bayesian regression); in general it is the mean univariate TV distance.
    """
    q = empirical_marginals(draws, values)
    p = _check_table(marginals, q.shape[1:], "marginals", -1)
    return 0.5 * np.abs(q - p).sum(axis=-1).mean(axis=-1)


def pairwise_error(draws, pair_marginals, values) -> np.ndarray:
    """(1/d^2) sum_{i,j} sum_{x,y} |q_ij(x,y) - p_ij(x,y)| per chain (paper Table 5).

    ``pair_marginals`` is (d, d, k, k), the diagonal i = j being diag(p_i) (see
    :meth:`ExactDistribution.pair_marginals`); the sum runs over all i, j as printed.
    """
    q = empirical_pair_marginals(draws, values)
    p = _check_table(pair_marginals, q.shape[1:], "pair_marginals", (-2, -1))
    d = q.shape[1]
    return np.abs(q - p).sum(axis=(1, 2, 3, 4)) / d**2


def covariance_frobenius_error(draws, true_cov) -> np.ndarray:
    """||M_q - M_p||_F per chain, M_q the chain's sample covariance (ddof 1), M_p ``true_cov``.

    Rhodes & Gutmann take M_p from 100,000 exact samples; any (d, d) reference works.
    """
    x = flat_coords(as_draws(draws))
    d = x.shape[-1]
    ref = np.asarray(true_cov, dtype=np.float64)
    if ref.shape != (d, d):
        raise ValueError(f"true_cov must be {d}x{d} to match the draws, got {ref.shape}")
    centred = x - x.mean(axis=1, keepdims=True)
    cov = np.einsum("cni,cnj->cij", centred, centred) / (x.shape[1] - 1)
    return np.sqrt(np.sum((cov - ref) ** 2, axis=(1, 2)))
