"""Exact distributions of small discrete targets, by enumerating every state.

State number ``n`` has value index ``(n // k**i) % k`` at coordinate ``i`` — coordinate 0
varies fastest, the order of :mod:`gradmc.targets.enumerate` — so
``n = np.ravel_multi_index(idx, (k,) * d, order="F")`` and
``probs.reshape((k,) * d, order="F")`` is the joint table indexed ``[i_0, ..., i_{d-1}]``.

:func:`exact_distribution` works from a value set and ``d`` alone (no ``Space``) and
delegates the enumeration to :func:`gradmc.targets.enumerate.enumerate_target`;
:meth:`ExactDistribution.from_enumeration` adopts a target's
:class:`gradmc.targets.enumerate.Enumeration`, so both feed the TV diagnostics.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations

import numpy as np

from gradmc.diagnostics._common import check_values

__all__ = ["enumerate_states", "exact_distribution", "ExactDistribution", "MAX_STATES"]

MAX_STATES = 2**24


def _num_states(k: int, d: int) -> int:
    if int(d) < 1:
        raise ValueError(f"d must be >= 1, got {d}")
    total = k ** int(d)
    if total > MAX_STATES:
        raise ValueError(f"{k}^{d} = {total} states is too many to enumerate (limit {MAX_STATES})")
    return total


def enumerate_states(values, d: int, *, one_hot: bool = False) -> np.ndarray:
    """All ``len(values)**d`` states, shaped (K, d), or (K, d, k) one-hot rows if ``one_hot``."""
    v = check_values(values)
    total = _num_states(v.size, d)
    idx = np.stack(np.unravel_index(np.arange(total), (v.size,) * int(d), order="F"), axis=-1)
    return np.eye(v.size)[idx] if one_hot else v[idx]


@dataclass(frozen=True)
class ExactDistribution:
    """A normalised distribution over every state of ``values^d`` (state order: module doc)."""

    values: np.ndarray
    d: int
    probs: np.ndarray  # (k^d,), float64, sums to 1
    log_normaliser: float

    @property
    def joint(self) -> np.ndarray:
        """Probability table shaped (k,) * d."""
        return self.probs.reshape((self.values.size,) * self.d, order="F")

    @classmethod
    def from_enumeration(cls, enumeration) -> "ExactDistribution":
        """Adopt a :class:`gradmc.targets.enumerate.Enumeration` (same state order).

        One-hot (categorical) spaces get the values ``0..k-1``, the category indices.
        """
        v = np.asarray(enumeration.space.values, dtype=np.float64)
        values = np.arange(v.shape[0], dtype=np.float64) if v.ndim == 2 else v
        return cls(values, int(enumeration.space.d), np.asarray(enumeration.probs), float(enumeration.log_normaliser))

    def states(self, *, one_hot: bool = False) -> np.ndarray:
        return enumerate_states(self.values, self.d, one_hot=one_hot)

    def marginal(self, subset) -> np.ndarray:
        """Marginal table of the coordinates ``subset`` (in that order), shaped (k,) * len(subset)."""
        subset = tuple(int(i) for i in subset)
        if len(set(subset)) != len(subset) or not all(0 <= i < self.d for i in subset):
            raise ValueError(f"subset must be distinct coordinates in [0, {self.d}), got {subset}")
        others = tuple(i for i in range(self.d) if i not in subset)
        table = self.joint.sum(axis=others)
        kept = sorted(subset)
        return np.transpose(table, [kept.index(i) for i in subset])

    def marginals(self) -> np.ndarray:
        """Univariate marginals, (d, k)."""
        return np.stack([self.marginal((i,)) for i in range(self.d)])

    def pair_marginals(self) -> np.ndarray:
        """Bivariate marginals p_ij(k, l), (d, d, k, k); the diagonal is diag(p_i)."""
        k = self.values.size
        out = np.zeros((self.d, self.d, k, k))
        for i in range(self.d):
            out[i, i] = np.diag(self.marginal((i,)))
        for i, j in combinations(range(self.d), 2):
            out[i, j] = self.marginal((i, j))
            out[j, i] = out[i, j].T
        return out

    def mean(self) -> np.ndarray:
        return self.marginals() @ self.values

    def cov(self) -> np.ndarray:
        pm = self.pair_marginals()
        second = np.einsum("ijkl,k,l->ij", pm, self.values, self.values)
        mu = self.mean()
        return second - np.outer(mu, mu)


def exact_distribution(logdensity_fn, values, d: int, batch: int = 65536, *, one_hot: bool = False) -> ExactDistribution:
    """Normalise ``logdensity_fn`` over all ``len(values)**d`` states.

    ``logdensity_fn`` maps one state — shape (d,) of values, or (d, k) one-hot rows if
    ``one_hot`` — to a scalar. The enumeration itself is
    :func:`gradmc.targets.enumerate.enumerate_target` (chunks of ``batch`` states, float64);
    ``-inf`` means probability 0, NaN or ``+inf`` is an error.
    """
    from gradmc.spaces import Categorical, Ordinal
    from gradmc.targets.enumerate import enumerate_target

    v = check_values(values)
    total = _num_states(v.size, d)
    if int(batch) < 1:
        raise ValueError(f"batch must be >= 1, got {batch}")
    space = Categorical(v.size, int(d)) if one_hot else Ordinal(v, int(d))
    enumeration = enumerate_target(logdensity_fn, space, chunk_size=min(int(batch), total), max_states=MAX_STATES)
    if not np.any(np.isfinite(enumeration.log_probs)):
        raise ValueError("logdensity_fn is -inf at every state")
    return ExactDistribution(values=v, d=int(d), probs=enumeration.probs, log_normaliser=enumeration.log_normaliser)
