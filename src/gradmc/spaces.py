"""State spaces: where a target lives and what a valid position looks like.

``Real(d)`` is the continuous space. The discrete spaces are ``Binary(d)`` ({0,1}^d),
``Spin(d)`` ({-1,+1}^d), ``Ordinal(values, d)`` (any sorted real values per coordinate)
and ``Categorical(k, d)`` (d one-hot rows of length k, Rhodes & Gutmann 2022, App. A).

Every discrete space has ``values``, the value set of one coordinate: shape ``(k,)`` for
the scalar spaces and ``(k, k)`` (the one-hot rows) for ``Categorical``, so a position is
always ``values[index]`` for an integer index vector of shape ``(d,)``
(:meth:`DiscreteSpace.from_index` / :meth:`DiscreteSpace.to_index`). Positions are float32
arrays, since the gradient samplers differentiate the log density at them.

The one shared routine of the gradient samplers (NCG, AVG, PAVG, block Gibbs) samples and
scores the factorised proposals ``q(s) ∝ Π_i exp(a_i s_i + b_i s_i²)`` over the value set
(Rhodes & Gutmann eqs 8, 13, 17, 25, 40): :func:`factorised_proposal`,
:func:`factorised_logprob` (and :func:`factorised_logits`); :func:`sample_logits` is the
one categorical draw (inverse CDF) that every discrete kernel uses.
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

__all__ = [
    "Space",
    "Real",
    "DiscreteSpace",
    "Binary",
    "Spin",
    "Ordinal",
    "Categorical",
    "sample_logits",
    "factorised_logits",
    "factorised_proposal",
    "factorised_logprob",
]


class Space:
    """Base class of state spaces.

    ``event_shape`` is the shape of one position; ``is_discrete`` tells the runner
    and the samplers which family of kernels applies. ``validate`` raises
    ``ValueError`` with a message saying what was expected.
    """

    event_shape: tuple[int, ...]
    is_discrete: bool = False

    @property
    def dim(self) -> int:
        return int(np.prod(self.event_shape))

    def validate(self, position, *, what: str = "position") -> None:
        arr = np.asarray(position)
        if arr.shape[-len(self.event_shape) :] != self.event_shape or arr.ndim < len(self.event_shape):
            raise ValueError(
                f"{what} has shape {arr.shape}; expected trailing shape {self.event_shape} for {self}"
            )
        if not np.issubdtype(arr.dtype, np.number) and arr.dtype != bool:
            raise ValueError(f"{what} must be numeric, got dtype {arr.dtype}")


@dataclass(frozen=True)
class Real(Space):
    """Euclidean space R^d (positions are float arrays of shape ``(d,)``)."""

    d: int

    def __post_init__(self):
        if int(self.d) < 1:
            raise ValueError(f"Real(d) needs d >= 1, got {self.d}")

    @property
    def event_shape(self) -> tuple[int, ...]:  # type: ignore[override]
        return (int(self.d),)

    def validate(self, position, *, what: str = "position") -> None:
        super().validate(position, what=what)
        if not np.all(np.isfinite(np.asarray(position))):
            raise ValueError(f"{what} has non-finite entries")

    def __str__(self) -> str:
        return f"Real({self.d})"


def _check_dim(d, name: str) -> int:
    if isinstance(d, bool) or int(d) != d or int(d) < 1:
        raise ValueError(f"{name} needs a dimension d >= 1 (an integer), got {d!r}")
    return int(d)


class DiscreteSpace(Space):
    """A product of ``d`` copies of a finite value set (``values``, ``k`` of them)."""

    is_discrete = True

    def __init__(self, values, d: int):
        self.d = _check_dim(d, type(self).__name__)
        self._values = np.asarray(values, dtype=np.float32)
        self._values.setflags(write=False)

    # -- the value set ---------------------------------------------------------------
    @property
    def values(self) -> np.ndarray:
        """The value set of one coordinate: ``(k,)`` (or ``(k, k)`` one-hot rows)."""
        return self._values

    @property
    def num_values(self) -> int:
        return int(self._values.shape[0])

    @property
    def event_shape(self) -> tuple[int, ...]:  # type: ignore[override]
        return (self.d,) + self._values.shape[1:]

    @property
    def size(self) -> int:
        """Number of states, k^d (as a Python int: may be huge)."""
        return self.num_values**self.d

    # -- indices <-> positions (traceable) ---------------------------------------------
    def from_index(self, index) -> jax.Array:
        """Position with coordinate ``i`` equal to ``values[index[..., i]]`` (default float dtype)."""
        return jnp.asarray(self._values, jnp.result_type(float))[jnp.asarray(index)]

    def to_index(self, position) -> jax.Array:
        """Integer index of each coordinate's value (nearest value), shape ``(..., d)``."""
        s = jnp.asarray(position)
        v = jnp.asarray(self._values)
        return jnp.argmin(jnp.abs(s[..., None] - v), axis=-1).astype(jnp.int32)

    def sample_uniform(self, key) -> jax.Array:
        """A uniformly random state."""
        return self.from_index(jax.random.randint(key, (self.d,), 0, self.num_values))

    # -- validation (host side) --------------------------------------------------------
    def validate(self, position, *, what: str = "position") -> None:
        super().validate(position, what=what)
        arr = np.asarray(position, dtype=np.float64)
        if not np.all(np.isfinite(arr)):
            raise ValueError(f"{what} has non-finite entries; expected values in {self}")
        v = self._values.astype(np.float64)
        tol = 1e-5 * max(1.0, float(np.abs(v).max()))
        off = np.abs(arr[..., None] - v).min(axis=-1) > tol
        if np.any(off):
            bad = arr[off].ravel()[:3]
            raise ValueError(f"{what} has entries {bad.tolist()} outside the value set {self._value_text()} of {self}")

    def _value_text(self) -> str:
        v = self._values
        if v.shape[0] <= 6:
            return "{" + ", ".join(f"{x:g}" for x in v) + "}"
        return "{" + f"{v[0]:g}, {v[1]:g}, ..., {v[-1]:g}" + "} " + f"({v.shape[0]} values)"

    def __eq__(self, other) -> bool:
        return (
            type(self) is type(other)
            and self.d == other.d
            and self._values.shape == other._values.shape
            and bool(np.all(self._values == other._values))
        )

    def __hash__(self) -> int:
        return hash((type(self).__name__, self.d, self._values.tobytes()))

    def __repr__(self) -> str:
        return str(self)


class Binary(DiscreteSpace):
    """{0, 1}^d."""

    def __init__(self, d: int):
        super().__init__([0.0, 1.0], d)

    def __str__(self) -> str:
        return f"Binary({self.d})"


class Spin(DiscreteSpace):
    """{-1, +1}^d."""

    def __init__(self, d: int):
        super().__init__([-1.0, 1.0], d)

    def __str__(self) -> str:
        return f"Spin({self.d})"


class Ordinal(DiscreteSpace):
    """``values``^d for a strictly increasing, finite list of real ``values`` (k >= 2)."""

    def __init__(self, values, d: int):
        v = np.asarray(values, dtype=np.float64)
        if v.ndim != 1 or v.shape[0] < 2:
            raise ValueError(f"Ordinal values must be a 1-D list of at least 2 numbers, got shape {v.shape}")
        if not np.all(np.isfinite(v)):
            raise ValueError("Ordinal values must be finite")
        if not np.all(np.diff(v.astype(np.float32)) > 0):
            raise ValueError("Ordinal values must be strictly increasing (and distinct in float32)")
        super().__init__(v, d)

    def __str__(self) -> str:
        return f"Ordinal({self._value_text()}, d={self.d})"


class Categorical(DiscreteSpace):
    """d categorical variables with k categories, each a one-hot row: event shape ``(d, k)``."""

    def __init__(self, k: int, d: int):
        if isinstance(k, bool) or int(k) != k or int(k) < 2:
            raise ValueError(f"Categorical needs k >= 2 categories (an integer), got {k!r}")
        super().__init__(np.eye(int(k)), d)

    @property
    def k(self) -> int:
        return self.num_values

    def to_index(self, position) -> jax.Array:
        return jnp.argmax(jnp.asarray(position), axis=-1).astype(jnp.int32)

    def validate(self, position, *, what: str = "position") -> None:
        Space.validate(self, position, what=what)
        arr = np.asarray(position, dtype=np.float64)
        binary = np.all((arr == 0.0) | (arr == 1.0), axis=-1)
        one = arr.sum(axis=-1) == 1.0
        if not np.all(binary & one):
            rows = np.argwhere(~(binary & one))[:3].tolist()
            raise ValueError(
                f"{what} must consist of one-hot rows (entries 0/1 summing to 1) for {self}; rows {rows} are not"
            )

    def __str__(self) -> str:
        return f"Categorical(k={self.k}, d={self.d})"


# ---------------------------------------------------------------------------------------
# The factorised proposal q(s) ∝ Π_i exp(a_i s_i + b_i s_i²) over the value set
# ---------------------------------------------------------------------------------------


def sample_logits(key, logits) -> jax.Array:
    """Index drawn from softmax(``logits``) along the last axis, by inverse CDF.

    One uniform per row (the Gumbel-max trick needs one per entry, and random numbers
    dominate the cost of a step on cheap targets). The log-softmax is computed stably,
    so logits of any size work; −inf logits are never drawn; a row with a NaN logit
    gives an arbitrary index (its proposal is scored NaN and rejected by the MH test).
    """
    logits = jnp.asarray(logits)
    probs = jnp.exp(logits - jax.nn.logsumexp(logits, axis=-1, keepdims=True))
    cdf = jnp.cumsum(probs, axis=-1)
    u = (1.0 - jax.random.uniform(key, logits.shape[:-1] + (1,), cdf.dtype)) * cdf[..., -1:]  # in (0, total]
    return jnp.minimum(jnp.sum(cdf < u, axis=-1), logits.shape[-1] - 1).astype(jnp.int32)


def factorised_logits(a, b, space: DiscreteSpace) -> jax.Array:
    """Unnormalised log-probabilities ``(d, k)`` of each coordinate's ``k`` values.

    Scalar spaces: ``logits[i, j] = a_i v_j + b_i v_j²`` with ``a`` of shape ``(d,)`` and
    ``b`` a scalar or ``(d,)`` (eqs 8, 13, 17, 40). Categorical (eq 25): ``a`` is ``(d, k)``
    scores per category and, since one-hot entries satisfy s⊙s = s, ``logits = a + b``
    (``b`` a scalar, ``(d,)`` or ``(d, k)``). ``b=None`` means 0.
    """
    a = jnp.asarray(a)
    b = jnp.zeros((), a.dtype) if b is None else jnp.asarray(b, a.dtype)
    if isinstance(space, Categorical):
        if b.ndim == 1:
            b = b[:, None]
        return a + b
    v = jnp.asarray(space.values, a.dtype)
    b = b[..., None] if b.ndim >= 1 else b
    return a[..., None] * v + b * v * v


def factorised_proposal(key, a, b, space: DiscreteSpace) -> jax.Array:
    """Draw a position from ``q(s) ∝ Π_i exp(a_i s_i + b_i s_i²)`` (see :func:`factorised_logits`).

    Each coordinate is drawn by :func:`sample_logits` from its normalised (log-sum-exp)
    probabilities, stable for logits of any size (step sizes from 1e-2 to 1e3).
    """
    return space.from_index(sample_logits(key, factorised_logits(a, b, space)))


def factorised_logprob(s, a, b, space: DiscreteSpace) -> jax.Array:
    """``log q(s)`` of the normalised factorised proposal (per-coordinate log-sum-exp)."""
    logits = factorised_logits(a, b, space)
    index = space.to_index(s)
    chosen = jnp.take_along_axis(logits, index[..., None], axis=-1)[..., 0]
    return jnp.sum(chosen - jax.nn.logsumexp(logits, axis=-1))
