"""Batch-means ESS across chains: Vats, Flegal & Jones (2019) and the Zhou & Tan tables.

Both estimate the asymptotic covariance Sigma of the chains' mean from the spread of
*batch means* and compare it with the target covariance Lambda: ESS = n (|Lambda| / |Sigma|)^(1/p).

* :func:`multivariate_ess` — Vats et al. (2019), eq. (3.1), with the batches of all chains
  pooled around the grand mean (replicated batch means, Vats & Knudson 2021), so a
  difference between chains (non-mixing) inflates Sigma and lowers the ESS; Lambda is the
  average within-chain sample covariance. Returns the ESS of all chains together.
* :func:`zhoutan_ess` — what the published Zhou & Tan tables compute
  (the discrete-HAMS algorithm statement, ``docs/discrete-hams.md`` §10.1): per scalar,
  n Wv / B with Wv the mean within-chain variance and
  B = n/(m-1) sum_i (chain mean_i - grand mean)^2, i.e. the same estimator with one
  batch per chain (batch size n), reported per chain.

For one coordinate and ``batch_size = n``, ``multivariate_ess = m * zhoutan_ess`` exactly.
"""

from __future__ import annotations

import numpy as np

from gradmc.diagnostics._common import as_draws, flat_coords, scalar_or_array

__all__ = ["multivariate_ess", "zhoutan_ess"]


def multivariate_ess(draws, batch_size: int | None = None) -> float:
    """Multivariate batch-means ESS of all chains together (Vats, Flegal & Jones 2019).

    ``draws`` (chain, draw, *event), event flattened to p coordinates. With b the batch
    size (default floor(sqrt(n))), a = floor(n/b) batches per chain (the first n - a*b
    draws are dropped) and m chains:

        Sigma  = b / (a m - 1) * sum_{chains, batches} (batch mean - grand mean)(...)^T
        Lambda = mean over chains of the within-chain sample covariance
        mESS   = m a b * (det Lambda / det Sigma)^(1/p)
    """
    x = flat_coords(as_draws(draws, min_draws=2))
    m, n, p = x.shape
    b = int(np.floor(np.sqrt(n))) if batch_size is None else int(batch_size)
    if not 1 <= b <= n:
        raise ValueError(f"batch_size must be in [1, {n}] (the draws per chain), got {batch_size}")
    a = n // b
    if a * m - 1 < p:
        raise ValueError(
            f"{a * m} batches in all (batch_size {b}, {m} chains) cannot estimate a {p}x{p} covariance; "
            "use a smaller batch_size or more chains"
        )
    x = x[:, n - a * b :]
    grand = x.mean(axis=(0, 1))
    batch_means = x.reshape(m, a, b, p).mean(axis=2).reshape(m * a, p) - grand
    sigma = b / (a * m - 1) * batch_means.T @ batch_means
    centred = x - x.mean(axis=1, keepdims=True)
    lam = np.einsum("cni,cnj->ij", centred, centred) / (m * (a * b - 1))
    sign_l, logdet_l = np.linalg.slogdet(lam)
    sign_s, logdet_s = np.linalg.slogdet(sigma)
    if sign_l <= 0:
        raise ValueError("the draws' covariance is singular (a constant or collinear coordinate)")
    if sign_s <= 0:
        return float("inf")
    return float(m * a * b * np.exp((logdet_l - logdet_s) / p))


def zhoutan_ess(draws) -> np.ndarray | float:
    """Per-chain ESS n * Wv / B of each scalar, as in Zhou & Tan's tables (docs/discrete-hams.md §10.1).

    ``draws`` (chain, draw, *event) with at least 2 chains; returns an array of the event
    shape (a float for (chain, draw) input). Wv = 1/(m(n-1)) sum_ij (Y_ij - Ybar_i)^2,
    B = n/(m-1) sum_i (Ybar_i - Ybar)^2. Equal chain means give B = 0 and ESS = inf.
    """
    x = as_draws(draws, min_draws=2)
    m, n = x.shape[:2]
    if m < 2:
        raise ValueError(f"zhoutan_ess needs at least 2 chains (it uses between-chain variance), got {m}")
    chain_means = x.mean(axis=1)
    within = x.var(axis=1, ddof=1).mean(axis=0)
    between = n * chain_means.var(axis=0, ddof=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        ess = np.where(between > 0, n * within / np.where(between > 0, between, 1.0), np.inf)
    return scalar_or_array(ess)
