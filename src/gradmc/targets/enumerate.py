"""Exact distribution of a small discrete target, by enumerating every state.

A discrete space with ``d`` coordinates, each taking one of ``k`` values, has ``k**d``
states. State number ``n`` has value index ``(n // k**i) % k`` at coordinate ``i``
(coordinate 0 varies fastest). The log density is evaluated on all states in
vectorised chunks (``jit(vmap(logdensity_fn))``, in float64 by default), normalised by
log-sum-exp, and every statistic the diagnostics need is read from one pass over the
states: univariate and bivariate marginals, mean, covariance, and exact samples.

For ``Categorical(k, d)`` a position is the ``(d, k)`` one-hot matrix; its "values" are
the ``k`` categories, its mean is the ``(d, k)`` matrix of marginals and its covariance
is over the flattened ``d*k`` one-hot vector.
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np
from scipy.special import logsumexp

from gradmc.base import Truth
from gradmc.spaces import DiscreteSpace, Space

__all__ = [
    "MAX_STATES",
    "ENUMERATE_LIMIT",
    "num_values",
    "num_states",
    "value_indices",
    "positions",
    "Enumeration",
    "enumerate_target",
    "enumerate_if_small",
]

#: The largest state count :func:`enumerate_target` accepts (2^22: 4 M states).
MAX_STATES = 2**22

#: Targets with at most this many states get their exact truth by enumeration when built.
ENUMERATE_LIMIT = 2**20


def num_values(space: Space) -> int:
    """Number of values ``k`` each coordinate of a discrete space takes."""
    if not isinstance(space, DiscreteSpace):
        raise ValueError(f"enumeration needs a discrete space, got {space}")
    return space.num_values


def num_states(space: Space) -> int:
    """Number of states ``k**d`` of a discrete space (a Python int, never overflowing)."""
    return num_values(space) ** space.d


def value_indices(space: Space, start: int, stop: int) -> np.ndarray:
    """Value indices ``(stop - start, d)`` of states ``start .. stop-1`` (mixed radix)."""
    k, d = num_values(space), space.d
    n = np.arange(start, stop, dtype=np.int64)[:, None]
    return ((n // k ** np.arange(d, dtype=np.int64)) % k).astype(np.int32)


def _value_table(space: Space) -> np.ndarray:
    """The value set as a ``(k, m)`` float64 table (m = 1, or k for one-hot rows)."""
    v = np.asarray(space.values, np.float64)
    return v.reshape(v.shape[0], -1)


def positions(space: Space, indices) -> jax.Array:
    """Positions ``(n, *event_shape)`` of value indices ``(n, d)``, in the default float dtype."""
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
    """

    space: Space
    log_probs: np.ndarray
    pairwise: np.ndarray
    log_normaliser: float

    @property
    def probs(self) -> np.ndarray:
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
        """``n`` exact draws ``(n, *event_shape)``: inverse CDF in float64 on 48-bit uniforms."""
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
    """
    total = num_states(space)
    if total > max_states:
        raise ValueError(
            f"{space} has {total} states; enumeration is limited to max_states={max_states}"
        )
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
    # second pass, in JAX (NumPy's threaded BLAS stalls on a shared machine)
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
    """:func:`enumerate_target` when ``space`` has at most ``limit`` states, else ``None``."""
    return enumerate_target(logdensity_fn, space) if num_states(space) <= limit else None
