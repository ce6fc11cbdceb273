"""Small linear-algebra helpers with input checks (host side, before tracing)."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from gradmc.checks import check_square

__all__ = ["cholesky_factor"]


def cholesky_factor(cov, what: str, dim: int | None = None) -> jnp.ndarray:
    """Lower Cholesky factor of a symmetric positive-definite ``cov``, or a clear error.

    Parameters
    ----------
    cov : array_like
        A symmetric positive-definite matrix (symmetric to within rtol 1e-6, atol 1e-10).
    what : str
        How error messages name the matrix.
    dim : int, optional
        The size it must have (the target's dimension).

    Returns
    -------
    jax.Array
        The lower-triangular factor L with ``L @ L.T == cov``, as float32.
    """
    m = check_square(cov, what, dim)
    if not np.allclose(m, m.T, rtol=1e-6, atol=1e-10):
        raise ValueError(f"{what} must be symmetric")
    try:
        chol = np.linalg.cholesky(m)
    except np.linalg.LinAlgError:
        low = np.linalg.eigvalsh(m).min()
        raise ValueError(f"{what} must be positive definite (smallest eigenvalue {low:.3g})") from None
    return jnp.asarray(chol, dtype=jnp.float32)
