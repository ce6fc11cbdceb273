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
(Rhodes & Gutmann eqs 8, 13, 17, 25, 40): :func:`factorised_sample` (the draw, its index and its log-probability),
:func:`factorised_logprob` (the score of any position, e.g. the reverse move), with
:func:`factorised_proposal` and :func:`factorised_logits`; :func:`sample_logits` is the
one categorical draw (inverse CDF) that every discrete kernel uses. Two-valued scalar
spaces (Binary, Spin, two-point Ordinal) take a logistic fast path: σ of one logit gap
per coordinate instead of a log-sum-exp over the stacked values. The proposals'
uniforms come from :func:`gradmc.random.uniform` (random numbers dominate a step's cost
on cheap targets).
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from gradmc.random import uniform

__all__ = [
    "Space",
    "Real",
    "DiscreteSpace",
    "Binary",
    "Spin",
    "Ordinal",
    "Categorical",
    "sample_logits",
    "sample_logits_scored",
    "factorised_logits",
    "factorised_sample",
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
    def is_two_valued(self) -> bool:
        """Scalar coordinates with k = 2 values (Binary, Spin, a two-point Ordinal): the
        samplers' logistic fast paths apply (one logit gap per coordinate, no stacking over k)."""
        return self._values.ndim == 1 and self.num_values == 2

    @property
    def size(self) -> int:
        """Number of states, k^d (as a Python int: may be huge)."""
        return self.num_values**self.d

    # -- indices <-> positions (traceable) ---------------------------------------------
    def from_index(self, index) -> jax.Array:
        """Position with coordinate ``i`` equal to ``values[index[..., i]]`` (default float dtype)."""
        return jnp.asarray(self._values, jnp.result_type(float))[jnp.asarray(index)]

    def to_index(self, position) -> jax.Array:
        """Integer index of each coordinate's value (nearest value, ties to the lower one),
        shape ``(..., d)``: the number of midpoints between sorted values below it (one
        comparison for two-valued spaces)."""
        s = jnp.asarray(position)
        mid = jnp.asarray(0.5 * (self._values[1:] + self._values[:-1]), s.dtype)
        if mid.shape[0] == 1:
            return (s > mid[0]).astype(jnp.int32)
        return jnp.sum(s[..., None] > mid, axis=-1).astype(jnp.int32)

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


_BLOCK = 32  # rows longer than 4 blocks are drawn in two levels (a block, then within it)


def sample_logits_scored(key, logits) -> tuple[jax.Array, jax.Array]:
    """``(index, log-probability of index)``: an index drawn from softmax(``logits``) along
    the last axis by inverse CDF, scored from the same normaliser (see :func:`sample_logits`).

    One exp per entry serves the draw and the score. Long rows (GWG's d·k moves) are
    drawn in two levels: a block of ``_BLOCK`` entries by the cumulative block sums, then
    the entry within it; a cumulative sum over the whole row costs far more on a CPU.
    """
    logits = jnp.asarray(logits)
    n = logits.shape[-1]
    top = jnp.max(logits, axis=-1, keepdims=True)
    top = jnp.where(jnp.isfinite(top), top, 0.0)
    weights = jnp.exp(logits - top)
    if n <= 4 * _BLOCK:
        cdf = jnp.cumsum(weights, axis=-1)
        total = cdf[..., -1:]
        u = (1.0 - uniform(key, logits.shape[:-1] + (1,), cdf.dtype)) * total  # in (0, total]
        index = jnp.minimum(jnp.sum(cdf < u, axis=-1), n - 1).astype(jnp.int32)
    else:
        num_blocks = -(-n // _BLOCK)
        padding = [(0, 0)] * (logits.ndim - 1) + [(0, num_blocks * _BLOCK - n)]
        blocks = jnp.pad(weights, padding).reshape(logits.shape[:-1] + (num_blocks, _BLOCK))
        block_cdf = jnp.cumsum(jnp.sum(blocks, axis=-1), axis=-1)
        total = block_cdf[..., -1:]
        u = (1.0 - uniform(key, logits.shape[:-1] + (1,), block_cdf.dtype)) * total  # in (0, total]
        block = jnp.minimum(jnp.sum(block_cdf < u, axis=-1), num_blocks - 1)
        below = jnp.take_along_axis(block_cdf, block[..., None], axis=-1) - jnp.take_along_axis(
            jnp.sum(blocks, axis=-1), block[..., None], axis=-1
        )
        cdf = jnp.cumsum(jnp.take_along_axis(blocks, block[..., None, None], axis=-2)[..., 0, :], axis=-1)
        # Rounding may put u − below just outside (0, block sum]: clip, so that only an
        # entry of positive weight can be chosen.
        within = jnp.clip(u - below, jnp.finfo(cdf.dtype).tiny, cdf[..., -1:])
        index = (block * _BLOCK + jnp.minimum(jnp.sum(cdf < within, axis=-1), _BLOCK - 1)).astype(jnp.int32)
    chosen = jnp.take_along_axis(logits, index[..., None], axis=-1)
    return index, (chosen - top - jnp.log(total))[..., 0]


def sample_logits(key, logits) -> jax.Array:
    """Index drawn from softmax(``logits``) along the last axis, by inverse CDF.

    One uniform per row (the Gumbel-max trick needs one per entry, and random numbers
    dominate the cost of a step on cheap targets). The log-softmax is computed stably,
    so logits of any size work; −inf logits are never drawn; a row with a NaN logit
    gives an arbitrary index (its proposal is scored NaN and rejected by the MH test).
    """
    return sample_logits_scored(key, logits)[0]


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


def _logit_gap(a, b, space: DiscreteSpace) -> jax.Array:
    """δ_i = log q(s_i = v₁) − log q(s_i = v₀) = a_i (v₁ − v₀) + b_i (v₁² − v₀²), so that
    q(s_i = v₁) = σ(δ_i): no stacking over k and no log-sum-exp."""
    v0, v1 = (float(v) for v in space.values)
    a = jnp.asarray(a)
    gap = a * (v1 - v0)
    if b is not None and v1 * v1 != v0 * v0:
        gap = gap + jnp.asarray(b, a.dtype) * (v1 * v1 - v0 * v0)
    return gap


def _log_sigmoid(y, e) -> jax.Array:
    """log σ(y) given e = exp(−|y|) (shared with the draw): min(y, 0) − log1p(e)."""
    return jnp.minimum(y, 0.0) - jnp.log1p(e)


def factorised_sample(key, a, b, space: DiscreteSpace) -> tuple[jax.Array, jax.Array, jax.Array]:
    """``(position, index, log q(position))``: one draw from ``q(s) ∝ Π_i exp(a_i s_i + b_i s_i²)``
    (see :func:`factorised_logits`) with its normalised log-probability, so a sampler
    scores its forward move without recomputing the logits.

    Two-valued scalar spaces draw each coordinate as v₁ with probability σ(δ_i) by
    comparing one uniform, and score it by log σ(±δ_i), sharing one exp(−|δ_i|); other
    spaces draw by inverse CDF from the log-sum-exp-normalised logits. Both are stable
    for logits of any size (step sizes from 1e-2 to 1e3).
    """
    if space.is_two_valued:
        gap = _logit_gap(a, b, space)
        e = jnp.exp(-jnp.abs(gap))
        u = uniform(key, gap.shape, gap.dtype)
        upper = u * (1.0 + e) < jnp.where(gap >= 0, 1.0, e)  # u < σ(δ)
        v0, v1 = (float(v) for v in space.values)
        position = jnp.where(upper, v1, v0).astype(jnp.result_type(float))  # no gather
        logq = jnp.sum(_log_sigmoid(jnp.where(upper, gap, -gap), e))
        return position, upper.astype(jnp.int32), logq
    index, logq = sample_logits_scored(key, factorised_logits(a, b, space))
    return space.from_index(index), index, jnp.sum(logq)


def factorised_proposal(key, a, b, space: DiscreteSpace) -> jax.Array:
    """Draw a position from ``q(s) ∝ Π_i exp(a_i s_i + b_i s_i²)`` (:func:`factorised_sample`)."""
    return factorised_sample(key, a, b, space)[0]


def factorised_logprob(s, a, b, space: DiscreteSpace) -> jax.Array:
    """``log q(s)`` of the normalised factorised proposal at a position ``s`` of the space.

    The unnormalised term is evaluated at ``s`` itself (a_i s_i + b_i s_i², or the
    one-hot row's logit), so no search for the index of ``s`` is needed; two-valued
    scalar spaces use log σ(±δ_i), the others a per-coordinate log-sum-exp.
    """
    s = jnp.asarray(s)
    if space.is_two_valued:
        gap = _logit_gap(a, b, space)
        y = jnp.where(space.to_index(s) == 1, gap, -gap)
        return jnp.sum(_log_sigmoid(y, jnp.exp(-jnp.abs(y))))
    logits = factorised_logits(a, b, space)
    if isinstance(space, Categorical):
        chosen = jnp.sum(jnp.where(s > 0.5, logits, 0.0), axis=-1)
    else:  # the same arithmetic as factorised_logits, so the chosen logit is bit-identical
        a = jnp.asarray(a)
        b = jnp.zeros((), a.dtype) if b is None else jnp.asarray(b, a.dtype)
        chosen = a * s + b * s * s
    return jnp.sum(chosen - jax.nn.logsumexp(logits, axis=-1))
