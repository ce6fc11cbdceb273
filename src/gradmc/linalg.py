"""Small linear-algebra helpers with input checks (host side, before tracing)."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

__all__ = ["cholesky_factor", "check_square"]


def check_square(matrix, what: str, dim: int | None = None) -> np.ndarray:
    """Return ``matrix`` as a float array after checking it is square, finite and of size ``dim``."""
    m = np.asarray(matrix, dtype=np.float64)
    if m.ndim != 2 or m.shape[0] != m.shape[1]:
        raise ValueError(f"{what} must be a square matrix, got shape {m.shape}")
    if dim is not None and m.shape[0] != dim:
        raise ValueError(f"{what} must be {dim}x{dim} to match the target, got {m.shape}")
    if not np.all(np.isfinite(m)):
        raise ValueError(f"{what} has non-finite entries")
    return m


def cholesky_factor(cov, what: str, dim: int | None = None) -> jnp.ndarray:
    """Lower Cholesky factor of a symmetric positive-definite ``cov``, or a clear error."""
    m = check_square(cov, what, dim)
    if not np.allclose(m, m.T, rtol=1e-6, atol=1e-10):
        raise ValueError(f"{what} must be symmetric")
    try:
        chol = np.linalg.cholesky(m)
    except np.linalg.LinAlgError:
        low = np.linalg.eigvalsh(m).min()
        raise ValueError(f"{what} must be positive definite (smallest eigenvalue {low:.3g})") from None
    return jnp.asarray(chol, dtype=jnp.float32)
