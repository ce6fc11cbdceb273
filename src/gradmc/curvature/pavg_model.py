"""PAVG's second-order term M (Rhodes & Gutmann 2022, eqs 14, 39–40, App. F), in the two
forms its kernels take, each applying M and a root R of M_ε = M + d_ε I to a position-shaped
array (``apply``, ``apply_root``) so that the kernels never ask which form they hold:

* :class:`PAVGPreconditioner` — M, R and d_ε formed (:func:`make_preconditioner`,
  :func:`from_eigh`): one mat-vec each per step;
* :class:`EigenPreconditioner` — M's eigendecomposition (:func:`eigen_preconditioner`), as
  the warm-up holds it: a new γ or ε costs O(n).

d_ε = max(0, −λ_min(M)) + 2/ε (eq. 39) makes M_ε positive definite for an M with negative
eigenvalues. :func:`from_data` gives the covariance or precision of a data set as M (App. F,
EBMs). How M is learned during warm-up is :mod:`gradmc.adapt.preconditioner`.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

__all__ = [
    "PAVGPreconditioner",
    "EigenPreconditioner",
    "eigen_preconditioner",
    "from_eigh",
    "make_preconditioner",
    "from_data",
]


class PAVGPreconditioner(NamedTuple):
    """PAVG's second-order term: M (n×n, acting on the flattened position), a square root R
    of M_ε = M + d_ε I and the shift d_ε (eq. 39).

    R is any matrix with RᵀR = M_ε: the kernel draws its auxiliary noise as ``n @ R`` = Rᵀn
    (covariance RᵀR). :func:`make_preconditioner` gives the symmetric root; a Cholesky
    factor M_ε = L Lᵀ is stored as R = Lᵀ (:func:`gradmc.learn.pcd.cholesky_preconditioner`).

    Parameters
    ----------
    matrix : jax.Array
        M, (n, n).
    root : jax.Array
        R with RᵀR = M_ε, (n, n).
    d_eps : jax.Array
        d_ε, a scalar.
    """

    matrix: jax.Array
    root: jax.Array
    d_eps: jax.Array

    def apply(self, x):
        """M x for a position-shaped ``x`` (a row-vector product, x @ M: M is symmetric)."""
        return (x.reshape(-1) @ self.matrix).reshape(x.shape)

    def apply_root(self, x):
        """Rᵀ x for a position-shaped ``x`` (``x @ R``: the noise ``n @ R`` has covariance RᵀR = M_ε)."""
        return (x.reshape(-1) @ self.root).reshape(x.shape)


class EigenPreconditioner(NamedTuple):
    """PAVG's second-order term held by the eigendecomposition M = V diag(λ) Vᵀ: M x and the
    symmetric root R x = V diag(√(λ + d_ε)) Vᵀ x are two mat-vecs with V each, and a new γ
    (λ scaled) or ε (d_ε) costs O(n), with no n × n product (the warm-up's form).

    Parameters
    ----------
    eigvecs : jax.Array
        V, (n, n), eigenvectors in columns.
    eigvals : jax.Array
        λ, (n,).
    d_eps : jax.Array
        d_ε, a scalar.
    """

    eigvecs: jax.Array
    eigvals: jax.Array
    d_eps: jax.Array

    def root_values(self) -> jax.Array:
        """√(λ + d_ε), the eigenvalues of the symmetric root R of M_ε."""
        return jnp.sqrt(jnp.maximum(self.eigvals + self.d_eps, 0.0))

    def _scaled(self, values, x):
        return (((x.reshape(-1) @ self.eigvecs) * values) @ self.eigvecs.T).reshape(x.shape)

    def apply(self, x):
        """M x = V(λ ⊙ Vᵀx) for a position-shaped ``x``."""
        return self._scaled(self.eigvals, x)

    def apply_root(self, x):
        """R x = V(√(λ + d_ε) ⊙ Vᵀx), the symmetric root, for a position-shaped ``x``."""
        return self._scaled(self.root_values(), x)


def _shift(eigvals, step_size):
    """d_ε = max(0, −λ_min) + 2/ε (eq. 39)."""
    return jnp.maximum(0.0, -jnp.min(eigvals)) + 2.0 / step_size


def eigen_preconditioner(eigvecs, eigvals, step_size) -> EigenPreconditioner:
    """The preconditioner of M = V diag(λ) Vᵀ for step size ε (eq. 39), kept in eigen form.

    Parameters
    ----------
    eigvecs, eigvals : jax.Array
        V and λ, as the fields of :class:`EigenPreconditioner`.
    step_size : float or jax.Array
        ε > 0.
    """
    d_eps = jnp.asarray(_shift(eigvals, step_size), jnp.float32)
    return EigenPreconditioner(jnp.asarray(eigvecs, jnp.float32), jnp.asarray(eigvals, jnp.float32), d_eps)


def from_eigh(eigvecs, eigvals, step_size) -> PAVGPreconditioner:
    """The preconditioner of :func:`eigen_preconditioner` (same parameters) with M and R
    formed, for a kernel that runs with it for long: one mat-vec each per step.
    """
    eigen = eigen_preconditioner(eigvecs, eigvals, step_size)
    vecs = eigen.eigvecs
    matrix = (vecs * eigen.eigvals) @ vecs.T
    root = (vecs * eigen.root_values()) @ vecs.T
    return PAVGPreconditioner(matrix, root, eigen.d_eps)


def make_preconditioner(M, step_size) -> PAVGPreconditioner:
    """The preconditioner of a given symmetric M (negative eigenvalues allowed, eq. 39).

    Parameters
    ----------
    M : array_like
        Symmetric (n, n).
    step_size : float or jax.Array
        ε > 0.
    """
    eigvals, eigvecs = jnp.linalg.eigh(jnp.asarray(M, jnp.float32))
    return from_eigh(eigvecs, eigvals, step_size)


def from_data(samples, kind: str = "covariance") -> np.ndarray:
    """Empirical covariance or precision (pseudo-inverse) of ``samples`` (App. F, EBMs).

    Parameters
    ----------
    samples : array_like
        (N, *event) samples, flattened per sample.
    kind : {"covariance", "precision"}
        Which matrix to return.
    """
    x = np.asarray(samples, dtype=np.float64)
    x = x.reshape(x.shape[0], -1)
    if x.shape[0] < 2 or not np.all(np.isfinite(x)):
        raise ValueError(f"from_data needs at least 2 finite samples, got shape {x.shape}")
    cov = np.cov(x, rowvar=False).reshape(x.shape[1], x.shape[1])
    if kind == "covariance":
        return cov
    if kind == "precision":
        return np.linalg.pinv(cov, hermitian=True)
    raise ValueError(f"kind must be 'covariance' or 'precision', got {kind!r}")
