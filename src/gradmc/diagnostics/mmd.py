"""Maximum mean discrepancy between two samples (Gretton et al. 2012, unbiased MMD^2_u).

Kernels: ``"exp_hamming"`` k(x, y) = exp(-H(x, y) / D), H the number of differing
coordinates and D the number of coordinates (the exponential Hamming kernel used to
compare discrete EBM samples); ``"gaussian"`` exp(-|x - y|^2 / (2 h^2)) with the
median-distance bandwidth by default; or any callable ``kernel(X, Y) -> (n, m)`` Gram matrix.
"""

from __future__ import annotations

import numpy as np

__all__ = ["mmd"]


def _hamming_gram(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    values = np.union1d(np.unique(x), np.unique(y))
    agree = sum((x == v).astype(np.float32) @ (y == v).astype(np.float32).T for v in values)
    return np.exp(-(x.shape[1] - agree) / x.shape[1])


def _sq_dists(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return np.maximum((x**2).sum(1)[:, None] + (y**2).sum(1)[None, :] - 2 * x @ y.T, 0.0)


def mmd(x, y, kernel="exp_hamming", bandwidth: float | None = None) -> float:
    """Unbiased estimate of MMD^2 between samples ``x`` (n, *event) and ``y`` (m, *event).

    Diagonal terms k(x_i, x_i) are left out, so the estimate is unbiased and may be slightly
    negative when the distributions agree. ``bandwidth`` applies to the Gaussian kernel.
    """
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if x.ndim < 2 or y.ndim < 2 or x.shape[1:] != y.shape[1:]:
        raise ValueError(f"x and y must be (n, *event) with the same event shape, got {x.shape}, {y.shape}")
    if x.shape[0] < 2 or y.shape[0] < 2:
        raise ValueError("each sample needs at least 2 points")
    x, y = x.reshape(x.shape[0], -1), y.reshape(y.shape[0], -1)
    if callable(kernel):
        gram = kernel
    elif kernel == "exp_hamming":
        gram = _hamming_gram
    elif kernel == "gaussian":
        if bandwidth is None:
            both = np.concatenate([x, y])
            bandwidth = float(np.sqrt(0.5 * np.median(_sq_dists(both, both)[np.triu_indices(len(both), 1)])))
        if not bandwidth > 0:
            raise ValueError(f"bandwidth must be positive, got {bandwidth}")
        gram = lambda a, b: np.exp(-_sq_dists(a, b) / (2 * bandwidth**2))  # noqa: E731
    else:
        raise ValueError(f"kernel must be 'exp_hamming', 'gaussian' or a callable, got {kernel!r}")
    kxx, kyy, kxy = (np.asarray(gram(a, b), dtype=np.float64) for a, b in ((x, x), (y, y), (x, y)))
    n, m = x.shape[0], y.shape[0]
    return float(
        (kxx.sum() - np.trace(kxx)) / (n * (n - 1)) + (kyy.sum() - np.trace(kyy)) / (m * (m - 1)) - 2 * kxy.mean()
    )
