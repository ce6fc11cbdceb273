"""Running sums of each chain's history, for discrete-marginal errors of long runs.

:class:`Accumulator` keeps, per chain, the counts of each coordinate's values, the sum of
the states and the sum of their outer products. The errors of Rhodes & Gutmann (2022),
Table 5, follow from these sums exactly (they equal :mod:`gradmc.diagnostics.discrete`
on the stored history), so a run of millions of steps never has to keep its draws.
"""

from __future__ import annotations

import numpy as np

from gradmc.diagnostics._common import mean_kl

__all__ = ["Accumulator"]


class Accumulator:
    """Running sums of each chain's history on a discrete space with a finite value set.

    Holds value counts ``(chain, d, k)``, the sums Σs ``(chain, d)`` and Σssᵀ
    ``(chain, d, d)`` and the number of draws ``n``; :meth:`update` adds draws chunk by
    chunk, and the error methods give the per-chain errors of Rhodes & Gutmann (2022),
    Table 5, from the sums.

    Parameters
    ----------
    num_chains : int
        Number of chains.
    values : array_like
        The sorted values a coordinate may take (``space.values``).
    d : int
        Number of coordinates.
    """

    def __init__(self, num_chains: int, values, d: int):
        self.values = np.asarray(values, np.float64)
        self.values32 = self.values.astype(np.float32)
        k = self.values.size
        self.counts = np.zeros((num_chains, d, k), np.int64)
        self.sum = np.zeros((num_chains, d))
        self.outer = np.zeros((num_chains, d, d))
        self.n = 0

    def update(self, x: np.ndarray) -> None:
        """Add draws to the sums.

        Parameters
        ----------
        x : np.ndarray
            Draws shaped ``(chain, n, d)`` with entries in ``values``.
        """
        c, n, d = x.shape
        k = self.values.size
        x32 = np.asarray(x, np.float32)
        idx = np.clip(np.searchsorted(self.values32, x32), 0, k - 1)
        if not np.array_equal(self.values32[idx], x32):
            raise ValueError("draws hold values outside the space's value set")
        flat = (np.arange(c)[:, None, None] * d + np.arange(d)) * k + idx
        self.counts += np.bincount(flat.ravel(), minlength=c * d * k).reshape(c, d, k)
        self.sum += x32.sum(axis=1, dtype=np.float64)
        # float32 products of lattice values, summed per piece; float64 across pieces
        self.outer += np.matmul(x32.transpose(0, 2, 1), x32).astype(np.float64)
        self.n += n

    def marginals(self) -> np.ndarray:
        """Each chain's empirical univariate marginals, shape ``(chain, d, k)``."""
        return self.counts / self.n

    def marginal_kl(self, p) -> np.ndarray:
        """(1/d) Σ_i KL(q_i ‖ p_i) per chain, 0 log 0 = 0 (Table 5, ordinal targets).

        Parameters
        ----------
        p : array_like
            Exact marginals, shape ``(d, k)``.
        """
        return mean_kl(self.marginals(), p)

    def covariance_error(self, cov) -> np.ndarray:
        """‖M_q − M_p‖_F per chain, M_q the chain's sample covariance (ddof 1).

        Parameters
        ----------
        cov : array_like
            The exact covariance M_p, shape ``(d, d)``.
        """
        mean = self.sum / self.n
        m_q = (self.outer - self.n * np.einsum("ci,cj->cij", mean, mean)) / (self.n - 1)
        return np.sqrt(np.sum((m_q - np.asarray(cov)) ** 2, axis=(1, 2)))

    def mean_abs_marginal_error(self, p1) -> np.ndarray:
        """(1/d) Σ_i |q_i(s_i = 1) − p_i(s_i = 1)| per chain (Table 5, binary targets).

        Parameters
        ----------
        p1 : array_like
            Exact probabilities p_i(s_i = 1), shape ``(d,)``.
        """
        return np.abs(self.sum / self.n - np.asarray(p1)).mean(-1)

    def pairwise_error(self, pair) -> np.ndarray:
        """(1/d²) Σ_ij Σ_kl |q_ij(k, l) − p_ij(k, l)| per chain (Table 5; binary values).

        Parameters
        ----------
        pair : array_like
            Exact bivariate marginals, shape ``(d, d, 2, 2)``.
        """
        m = self.sum / self.n
        p11 = self.outer / self.n
        q = np.stack(
            [
                np.stack([1 - m[:, :, None] - m[:, None, :] + p11, m[:, None, :] - p11], -1),
                np.stack([m[:, :, None] - p11, p11], -1),
            ],
            -2,
        )  # (c, d, d, 2, 2)
        d = m.shape[1]
        return np.abs(q - np.asarray(pair)).sum(axis=(1, 2, 3, 4)) / d**2
