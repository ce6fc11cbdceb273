"""Exact distributions of small discrete targets, by enumerating every state.

A discrete space with ``d`` coordinates, each taking one of ``k`` values, has ``k**d``
states. State number ``n`` has value index ``(n // k**i) % k`` at coordinate ``i``
(coordinate 0 varies fastest), so ``n = np.ravel_multi_index(idx, (k,) * d, order="F")``
and ``probs.reshape((k,) * d, order="F")`` is the joint table indexed ``[i_0, ..., i_{d-1}]``.

Two views of one enumeration:

* :func:`enumerate_target` takes a log density and a :class:`~gradmc.spaces.Space`. It
  evaluates the log density on all states in vectorised chunks (``jit(vmap(logdensity_fn))``,
  in float64 by default), normalises by log-sum-exp, and reads every statistic a target's
  :class:`~gradmc.base.Truth` needs from one pass over the states (:class:`Enumeration`:
  univariate and bivariate marginals, mean, covariance, exact samples).
* :func:`exact_distribution` takes a value set and ``d`` alone (no ``Space``) and returns an
  :class:`ExactDistribution` (joint table, marginals of any subset), what the TV diagnostics
  use; :meth:`ExactDistribution.from_enumeration` adopts an :class:`Enumeration`.

For ``Categorical(k, d)`` a position is the ``(d, k)`` one-hot matrix; its "values" are
the ``k`` categories, its mean is the ``(d, k)`` matrix of marginals and its covariance
is over the flattened ``d*k`` one-hot vector.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations

import jax
import jax.numpy as jnp
import numpy as np
from scipy.special import logsumexp

from gradmc.base import Truth
from gradmc.spaces import Categorical, DiscreteSpace, Ordinal, Space

__all__ = [
    "MAX_STATES",
    "MAX_TABLE_STATES",
    "ENUMERATE_LIMIT",
    "check_values",
    "num_values",
    "num_states",
    "value_indices",
    "positions",
    "Enumeration",
    "enumerate_target",
    "enumerate_if_small",
    "enumerate_states",
    "ExactDistribution",
    "exact_distribution",
]

#: The largest state count :func:`enumerate_target` accepts by default (2^22: 4 M states).
MAX_STATES = 2**22

#: The largest state count :func:`enumerate_states` and :func:`exact_distribution` accept (2^24).
MAX_TABLE_STATES = 2**24

#: Targets with at most this many states get their exact truth by enumeration when built.
ENUMERATE_LIMIT = 2**20


def num_values(space: Space) -> int:
    """Number of values ``k`` each coordinate of a discrete space takes.

    Parameters
    ----------
    space : Space
        A discrete space.
    """
    if not isinstance(space, DiscreteSpace):
        raise ValueError(f"enumeration needs a discrete space, got {space}")
    return space.num_values


def num_states(space: Space) -> int:
    """Number of states ``k**d`` of a discrete space (a Python int, never overflowing).

    Parameters
    ----------
    space : Space
        A discrete space.
    """
    return num_values(space) ** space.d


def value_indices(space: Space, start: int, stop: int) -> np.ndarray:
    """Value indices ``(stop - start, d)`` of states ``start .. stop-1`` (mixed radix).

    Parameters
    ----------
    space : Space
        A discrete space.
    start, stop : int
        The range of state numbers.
    """
    k, d = num_values(space), space.d
    n = np.arange(start, stop, dtype=np.int64)[:, None]
    return ((n // k ** np.arange(d, dtype=np.int64)) % k).astype(np.int32)


def _value_table(space: Space) -> np.ndarray:
    """The value set as a ``(k, m)`` float64 table (m = 1, or k for one-hot rows)."""
    v = np.asarray(space.values, np.float64)
    return v.reshape(v.shape[0], -1)


def positions(space: Space, indices) -> jax.Array:
    """Positions ``(n, *event_shape)`` of value indices ``(n, d)``, in the default float dtype.

    Parameters
    ----------
    space : Space
        A discrete space.
    indices : array_like
        ``(n, d)`` value indices.
    """
    values = jnp.asarray(np.asarray(space.values, np.float64), dtype=jnp.result_type(float))
    return values[jnp.asarray(indices)]


def _second_moment(indices: jax.Array, probs: jax.Array, k: int) -> jax.Array:
    """``Σ_n p_n o_n o_nᵀ`` for the ``(n, d*k)`` indicators ``o[n, i*k + a] = [s_i = value a]``."""
    onehot = jax.nn.one_hot(indices, k, dtype=probs.dtype).reshape(indices.shape[0], -1)
    return onehot.T @ (probs[:, None] * onehot)


_accumulate = jax.jit(_second_moment, static_argnums=2)


@dataclass(frozen=True)
class Enumeration:
    """The exact distribution of a discrete target.

    ``log_probs[n]`` is the normalised log probability of state ``n``;
    ``pairwise[i, j, a, b] = P(s_i = value a, s_j = value b)`` (its diagonal blocks hold
    the univariate marginals); ``log_normaliser`` is log Z of the unnormalised density.

    Parameters
    ----------
    space : Space
        The enumerated space.
    log_probs : ndarray
        ``(k**d,)`` normalised log probabilities.
    pairwise : ndarray
        ``(d, d, k, k)`` bivariate marginals.
    log_normaliser : float
        log Z.
    """

    space: Space
    log_probs: np.ndarray
    pairwise: np.ndarray
    log_normaliser: float

    @property
    def probs(self) -> np.ndarray:
        """Normalised probabilities of the states, in state order."""
        return np.exp(self.log_probs)

    @property
    def marginals(self) -> np.ndarray:
        """``(d, k)`` univariate marginal probabilities."""
        d = self.pairwise.shape[0]
        return self.pairwise[np.arange(d), np.arange(d)].diagonal(axis1=-2, axis2=-1).copy()

    @property
    def mean(self) -> np.ndarray:
        """E[s] with the space's event shape (one-hot spaces: the marginals)."""
        mean = self.marginals @ _value_table(self.space)
        return mean.reshape((-1,) + self.space.event_shape[1:])

    @property
    def cov(self) -> np.ndarray:
        """Covariance of the flattened position, ``(D, D)``."""
        v = _value_table(self.space)
        size = self.space.dim
        second = np.einsum("ijab,ac,be->icje", self.pairwise, v, v).reshape(size, size)
        mean = self.mean.reshape(-1)
        return second - np.outer(mean, mean)

    def sample(self, key: jax.Array, n: int) -> jax.Array:
        """``n`` exact draws ``(n, *event_shape)``: inverse CDF in float64 on 48-bit uniforms.

        Parameters
        ----------
        key : jax.Array
            The key of the uniforms.
        n : int
            The number of draws.
        """
        bits = np.asarray(jax.random.bits(key, (2, int(n)), dtype=jnp.uint32)).astype(np.float64)
        u = (np.floor(bits[0] / 2**8) + np.floor(bits[1] / 2**8) / 2**24) / 2**24
        cdf = np.cumsum(self.probs)
        state = np.minimum(np.searchsorted(cdf, u * cdf[-1], side="right"), cdf.size - 1)
        k, d = num_values(self.space), self.space.d
        idx = (state[:, None] // k ** np.arange(d, dtype=np.int64)) % k
        return positions(self.space, idx.astype(np.int32))

    def truth(self) -> Truth:
        """The :class:`~gradmc.base.Truth` of this enumeration."""
        return Truth(
            mean=self.mean,
            cov=self.cov,
            marginals=self.marginals,
            sample=self.sample,
            source=f"exact enumeration of {self.log_probs.size} states",
        )


def enumerate_target(
    logdensity_fn, space: Space, *, chunk_size: int = 2**15, x64: bool = True, max_states: int = MAX_STATES
) -> Enumeration:
    """Enumerate every state of ``space`` and normalise ``exp(logdensity_fn)`` over them.

    ``x64=True`` evaluates the log density in float64 (``jax.enable_x64``), so the truth
    does not inherit float32 round-off. Raises ``ValueError`` when the space has more
    than ``max_states`` states or a state's log density is NaN or +inf.

    Parameters
    ----------
    logdensity_fn : callable
        The unnormalised log density of one position.
    space : Space
        A discrete space.
    chunk_size : int
        States per vectorised evaluation.
    x64 : bool
        Evaluate in float64.
    max_states : int
        The largest number of states accepted.
    """
    total = num_states(space)
    if total > max_states:
        raise ValueError(f"{space} has {total} states; enumeration is limited to max_states={max_states}")
    k, d = num_values(space), space.d
    chunk = int(min(chunk_size, total))
    with jax.enable_x64(x64):
        batched = jax.jit(jax.vmap(logdensity_fn))
        logf = np.empty(total)
        for start in range(0, total, chunk):
            stop = min(start + chunk, total)
            idx = value_indices(space, start, start + chunk)  # full chunk: one compilation
            logf[start:stop] = np.asarray(batched(positions(space, idx)), np.float64)[: stop - start]
    if np.any(np.isnan(logf)) or np.any(logf == np.inf):
        raise ValueError("the log density is NaN or +inf at some state; cannot normalise")
    log_z = float(logsumexp(logf))
    log_probs = logf - log_z
    # second pass, in JAX (NumPy's threaded BLAS stalls when other processes share the cores)
    with jax.enable_x64(True):
        second = np.zeros((d * k, d * k))
        for start in range(0, total, chunk):
            stop = min(start + chunk, total)
            probs = np.zeros(chunk)
            probs[: stop - start] = np.exp(log_probs[start:stop])  # padding states get weight 0
            second += np.asarray(_accumulate(value_indices(space, start, start + chunk), probs, k))
    pairwise = second.reshape(d, k, d, k).transpose(0, 2, 1, 3)
    return Enumeration(space=space, log_probs=log_probs, pairwise=pairwise, log_normaliser=log_z)


def enumerate_if_small(logdensity_fn, space: Space, limit: int = ENUMERATE_LIMIT) -> Enumeration | None:
    """:func:`enumerate_target` when ``space`` has at most ``limit`` states, else ``None``.

    Parameters
    ----------
    logdensity_fn : callable
        The unnormalised log density of one position.
    space : Space
        A discrete space.
    limit : int
        The largest number of states enumerated.
    """
    return enumerate_target(logdensity_fn, space) if num_states(space) <= limit else None


def check_values(values) -> np.ndarray:
    """A discrete coordinate's value set as float64, after checking it is 1-D, finite and
    strictly increasing.

    Parameters
    ----------
    values : array_like
        At least two values, sorted, without duplicates.
    """
    v = np.asarray(values, dtype=np.float64)
    if v.ndim != 1 or v.size < 2:
        raise ValueError(f"values must be a 1-D array of at least 2 values, got shape {v.shape}")
    if not np.all(np.isfinite(v)) or np.any(np.diff(v) <= 0):
        raise ValueError("values must be finite, sorted and without duplicates")
    return v


def _num_states(k: int, d: int) -> int:
    if int(d) < 1:
        raise ValueError(f"d must be >= 1, got {d}")
    total = k ** int(d)
    if total > MAX_TABLE_STATES:
        raise ValueError(f"{k}^{d} = {total} states is too many to enumerate (limit {MAX_TABLE_STATES})")
    return total


def enumerate_states(values, d: int, *, one_hot: bool = False) -> np.ndarray:
    """All ``len(values)**d`` states, shaped (K, d), or (K, d, k) one-hot rows if ``one_hot``.

    Parameters
    ----------
    values : array_like
        The value set of each coordinate.
    d : int
        The number of coordinates.
    one_hot : bool
        Give one-hot rows instead of values.
    """
    v = check_values(values)
    total = _num_states(v.size, d)
    idx = np.stack(np.unravel_index(np.arange(total), (v.size,) * int(d), order="F"), axis=-1)
    return np.eye(v.size)[idx] if one_hot else v[idx]


@dataclass(frozen=True)
class ExactDistribution:
    """A normalised distribution over every state of ``values^d`` (state order: module doc).

    Parameters
    ----------
    values : ndarray
        The k values of each coordinate.
    d : int
        The number of coordinates.
    probs : ndarray
        ``(k**d,)`` probabilities (float64, summing to 1).
    log_normaliser : float
        log Z of the unnormalised density.
    """

    values: np.ndarray
    d: int
    probs: np.ndarray  # (k^d,), float64, sums to 1
    log_normaliser: float

    @property
    def joint(self) -> np.ndarray:
        """Probability table shaped (k,) * d."""
        return self.probs.reshape((self.values.size,) * self.d, order="F")

    @classmethod
    def from_enumeration(cls, enumeration) -> ExactDistribution:
        """Adopt a :class:`Enumeration` (same state order).

        One-hot (categorical) spaces get the values ``0..k-1``, the category indices.

        Parameters
        ----------
        enumeration : Enumeration
            A target's enumeration.
        """
        v = np.asarray(enumeration.space.values, dtype=np.float64)
        values = np.arange(v.shape[0], dtype=np.float64) if v.ndim == 2 else v
        return cls(values, int(enumeration.space.d), np.asarray(enumeration.probs), float(enumeration.log_normaliser))

    def states(self, *, one_hot: bool = False) -> np.ndarray:
        """All states in state order (see :func:`enumerate_states`).

        Parameters
        ----------
        one_hot : bool
            Give (K, d, k) one-hot rows instead of (K, d) values.
        """
        return enumerate_states(self.values, self.d, one_hot=one_hot)

    def marginal(self, subset) -> np.ndarray:
        """Marginal table of the coordinates ``subset`` (in that order), shaped (k,) * len(subset).

        Parameters
        ----------
        subset : sequence of int
            Distinct coordinates.
        """
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
        """E[s], (d,)."""
        return self.marginals() @ self.values

    def cov(self) -> np.ndarray:
        """Covariance of s, (d, d)."""
        pm = self.pair_marginals()
        second = np.einsum("ijkl,k,l->ij", pm, self.values, self.values)
        mu = self.mean()
        return second - np.outer(mu, mu)


def exact_distribution(
    logdensity_fn, values, d: int, batch: int = 65536, *, one_hot: bool = False
) -> ExactDistribution:
    """Normalise ``logdensity_fn`` over all ``len(values)**d`` states.

    ``logdensity_fn`` maps one state — shape (d,) of values, or (d, k) one-hot rows if
    ``one_hot`` — to a scalar. The enumeration itself is
    :func:`enumerate_target` (chunks of ``batch`` states, float64);
    ``-inf`` means probability 0, NaN or ``+inf`` is an error.

    Parameters
    ----------
    logdensity_fn : callable
        The unnormalised log density of one state.
    values : array_like
        The value set of each coordinate (sorted, distinct).
    d : int
        The number of coordinates.
    batch : int
        States per vectorised evaluation.
    one_hot : bool
        States are one-hot rows ``(d, k)`` instead of values ``(d,)``.
    """
    v = check_values(values)
    total = _num_states(v.size, d)
    if int(batch) < 1:
        raise ValueError(f"batch must be >= 1, got {batch}")
    space = Categorical(v.size, int(d)) if one_hot else Ordinal(v, int(d))
    enumeration = enumerate_target(logdensity_fn, space, chunk_size=min(int(batch), total), max_states=MAX_TABLE_STATES)
    if not np.any(np.isfinite(enumeration.log_probs)):
        raise ValueError("logdensity_fn is -inf at every state")
    return ExactDistribution(values=v, d=int(d), probs=enumeration.probs, log_normaliser=enumeration.log_normaliser)
