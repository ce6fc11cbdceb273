"""State spaces: where a target lives and what a valid position looks like.

``Real(d)`` is the continuous space. The discrete spaces are ``Binary(d)`` ({0,1}^d),
``Spin(d)`` ({-1,+1}^d), ``Ordinal(values, d)`` (any sorted real values per coordinate),
``Count(d, high)`` (the integers ``low..high``: a count whose model allows more, cut where
the posterior has no mass) and ``Categorical(k, d)`` (d one-hot rows of length k, Rhodes & Gutmann 2022, App. A).
``Product`` joins named parts of these spaces (a mixed model's continuous and discrete
unknowns) into one flat position.

Every discrete space has ``values``, the value set of one coordinate: shape ``(k,)`` for
the scalar spaces and ``(k, k)`` (the one-hot rows) for ``Categorical``, so a position is
always ``values[index]`` for an integer index vector of shape ``(d,)``
(:meth:`DiscreteSpace.from_index` / :meth:`DiscreteSpace.to_index`). Positions are float32
arrays, since the gradient samplers differentiate the log density at them. The proposals
over these value sets live with the kernels (:mod:`gradmc.discrete.proposals`).
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
    "Count",
    "Categorical",
    "Product",
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
        """Number of scalar entries of one position (the product of ``event_shape``)."""
        return int(np.prod(self.event_shape))

    def validate(self, position, *, what: str = "position") -> None:
        """Raise ``ValueError`` unless ``position`` (or a batch of them) lies in the space.

        Parameters
        ----------
        position : array_like
            One position or a batch (leading axes) of them.
        what : str
            How the message names it (e.g. ``"initial position"``).
        """
        arr = np.asarray(position)
        if arr.shape[-len(self.event_shape) :] != self.event_shape or arr.ndim < len(self.event_shape):
            raise ValueError(f"{what} has shape {arr.shape}; expected trailing shape {self.event_shape} for {self}")
        if not np.issubdtype(arr.dtype, np.number) and arr.dtype != bool:
            raise ValueError(f"{what} must be numeric, got dtype {arr.dtype}")


@dataclass(frozen=True)
class Real(Space):
    """Euclidean space R^d (positions are float arrays of shape ``(d,)``).

    Parameters
    ----------
    d : int
        The dimension, d ≥ 1.
    """

    d: int

    def __post_init__(self):
        if int(self.d) < 1:
            raise ValueError(f"Real(d) needs d >= 1, got {self.d}")

    @property
    def event_shape(self) -> tuple[int, ...]:  # type: ignore[override]
        """``(d,)``."""
        return (int(self.d),)

    def validate(self, position, *, what: str = "position") -> None:
        """Raise ``ValueError`` unless ``position`` has the shape ``(..., d)`` and finite entries.

        Parameters
        ----------
        position : array_like
            One position or a batch (leading axes) of them.
        what : str
            How the message names it.
        """
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
    """A product of ``d`` copies of a finite value set (``values``, ``k`` of them).

    Parameters
    ----------
    values : array_like
        The value set of one coordinate, ``(k,)`` (or ``(k, k)`` one-hot rows).
    d : int
        The number of coordinates, d ≥ 1.
    """

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
        """k, the number of values of one coordinate."""
        return int(self._values.shape[0])

    @property
    def event_shape(self) -> tuple[int, ...]:  # type: ignore[override]
        """``(d,)``, or ``(d, k)`` for one-hot rows."""
        return (self.d,) + self._values.shape[1:]

    @property
    def is_two_valued(self) -> bool:
        """Scalar coordinates with k = 2 values (Binary, Spin, a two-point Ordinal): the
        samplers' logistic fast paths apply (one logit gap per coordinate, no stacking over k).
        """
        return self._values.ndim == 1 and self.num_values == 2

    @property
    def size(self) -> int:
        """Number of states, k^d (as a Python int: may be huge)."""
        return self.num_values**self.d

    # -- indices <-> positions (traceable) ---------------------------------------------
    def from_index(self, index) -> jax.Array:
        """Position with coordinate ``i`` equal to ``values[index[..., i]]`` (default float dtype).

        Parameters
        ----------
        index : array_like
            Integer value indices ``(..., d)``.
        """
        return jnp.asarray(self._values, jnp.result_type(float))[jnp.asarray(index)]

    def to_index(self, position) -> jax.Array:
        """Integer index of each coordinate's value (nearest value, ties to the lower one),
        shape ``(..., d)``: the number of midpoints between sorted values below it (one
        comparison for two-valued spaces).

        Parameters
        ----------
        position : array_like
            Positions ``(..., *event_shape)``.
        """
        s = jnp.asarray(position)
        mid = jnp.asarray(0.5 * (self._values[1:] + self._values[:-1]), s.dtype)
        if mid.shape[0] == 1:
            return (s > mid[0]).astype(jnp.int32)
        return jnp.sum(s[..., None] > mid, axis=-1).astype(jnp.int32)

    @property
    def index_dtype(self) -> np.dtype:
        """The smallest unsigned integer dtype that holds every value index (how runs keep
        discrete draws: one byte per coordinate for up to 256 values).
        """
        return np.dtype(
            np.uint8 if self.num_values <= 1 << 8 else np.uint16 if self.num_values <= 1 << 16 else np.int32
        )

    def decode(self, index) -> np.ndarray:
        """Positions ``values[index]`` on the host (float32), the inverse of :meth:`to_index`.

        Parameters
        ----------
        index : array_like
            Integer value indices ``(..., d)``.
        """
        return self._values[np.asarray(index)]

    def sample_uniform(self, key) -> jax.Array:
        """A uniformly random state.

        Parameters
        ----------
        key : jax.Array
            The key of the draw.
        """
        return self.from_index(jax.random.randint(key, (self.d,), 0, self.num_values))

    # -- validation (host side) --------------------------------------------------------
    def validate(self, position, *, what: str = "position") -> None:
        """Raise ``ValueError`` unless every entry of ``position`` is in the value set.

        Parameters
        ----------
        position : array_like
            One position or a batch (leading axes) of them.
        what : str
            How the message names it.
        """
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
    """{0, 1}^d.

    Parameters
    ----------
    d : int
        The number of coordinates.
    """

    def __init__(self, d: int):
        super().__init__([0.0, 1.0], d)

    def __str__(self) -> str:
        return f"Binary({self.d})"


class Spin(DiscreteSpace):
    """{-1, +1}^d.

    Parameters
    ----------
    d : int
        The number of coordinates.
    """

    def __init__(self, d: int):
        super().__init__([-1.0, 1.0], d)

    def __str__(self) -> str:
        return f"Spin({self.d})"


class Ordinal(DiscreteSpace):
    """``values``^d for a strictly increasing, finite list of real ``values`` (k >= 2).

    Parameters
    ----------
    values : array_like
        The k ≥ 2 values of one coordinate, strictly increasing (also in float32).
    d : int
        The number of coordinates.
    """

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


class Count(Ordinal):
    """The integers ``low, low + 1, ..., high`` in each of d coordinates: a count whose model
    allows any value from ``low`` up (a Poisson or negative-binomial latent), kept below a
    ``high`` where the posterior has no mass. It samples as an :class:`Ordinal`; a run whose
    draws reach ``high`` warns, since the model's values above it were cut off.

    Parameters
    ----------
    d : int
        The number of coordinates.
    high : int
        The largest value kept, above ``low``.
    low : int
        The smallest value (0 for Poisson counts).
    """

    def __init__(self, d: int, high: int, low: int = 0):
        if isinstance(high, bool) or int(high) != high or isinstance(low, bool) or int(low) != low:
            raise ValueError(f"Count needs integer bounds, got low={low!r}, high={high!r}")
        if int(high) <= int(low) or int(high) - int(low) >= 1 << 16:
            raise ValueError(f"Count needs low < high < low + 65536, got low={low}, high={high}")
        super().__init__(np.arange(int(low), int(high) + 1), d)
        self.low, self.high = int(low), int(high)

    def __str__(self) -> str:
        return f"Count({self.low}..{self.high}, d={self.d})"


class Categorical(DiscreteSpace):
    """d categorical variables with k categories, each a one-hot row: event shape ``(d, k)``.

    Parameters
    ----------
    k : int
        The number of categories, k ≥ 2.
    d : int
        The number of variables.
    """

    def __init__(self, k: int, d: int):
        if isinstance(k, bool) or int(k) != k or int(k) < 2:
            raise ValueError(f"Categorical needs k >= 2 categories (an integer), got {k!r}")
        super().__init__(np.eye(int(k)), d)

    @property
    def k(self) -> int:
        """The number of categories."""
        return self.num_values

    def to_index(self, position) -> jax.Array:
        """The category of each one-hot row, shape ``(..., d)``.

        Parameters
        ----------
        position : array_like
            Positions ``(..., d, k)``.
        """
        return jnp.argmax(jnp.asarray(position), axis=-1).astype(jnp.int32)

    def validate(self, position, *, what: str = "position") -> None:
        """Raise ``ValueError`` unless every row of ``position`` is one-hot.

        Parameters
        ----------
        position : array_like
            One position or a batch (leading axes) of them.
        what : str
            How the message names it.
        """
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


class Product(Space):
    """Positions made of named parts, each in a space of its own (a mixed model's
    continuous parameters beside its discrete latent variables), held as one flat vector:
    the parts' entries one after the other, in the order given.

    Parameters
    ----------
    parts : mapping of str to Space
        Each part's name and space, in the order of the flat vector.
    """

    def __init__(self, parts):
        parts = dict(parts)
        if not parts:
            raise ValueError("Product needs at least one part")
        for name, part in parts.items():
            if not isinstance(part, Space) or isinstance(part, Product):
                raise TypeError(f"part {name!r} of a Product must be a Real or discrete space, got {part!r}")
        self.parts = parts
        ends = np.cumsum([part.dim for part in parts.values()])
        self.slices = {
            name: slice(int(end - part.dim), int(end)) for (name, part), end in zip(parts.items(), ends, strict=True)
        }

    @property
    def event_shape(self) -> tuple[int, ...]:  # type: ignore[override]
        """``(n,)``, n the parts' entries in all."""
        return (sum(part.dim for part in self.parts.values()),)

    @property
    def discrete_parts(self) -> list[str]:
        """The names of the discrete parts."""
        return [name for name, part in self.parts.items() if part.is_discrete]

    def discrete_groups(self) -> list[tuple[str, ...]]:
        """The discrete parts, those of one site on equal spaces together (a model's states
        written one site per time step, ``s1``, ``s2``, ...: one block of a sampler, whose
        sites it can read as a chain), each other part alone; in the order of the parts.
        """
        groups: dict[object, list[str]] = {}
        for name in self.discrete_parts:
            part = self.parts[name]
            groups.setdefault(part if part.d == 1 else name, []).append(name)
        return [tuple(names) for names in groups.values()]

    def part(self, position, name: str):
        """Part ``name`` of ``position`` (or of a batch of them), shaped as its space's positions.

        Parameters
        ----------
        position : array_like
            Flat positions ``(..., n)``.
        name : str
            The part.
        """
        batch = position.shape[:-1]
        return position[..., self.slices[name]].reshape(*batch, *self.parts[name].event_shape)

    def validate(self, position, *, what: str = "position") -> None:
        """:meth:`Space.validate`, and each part of ``position`` (or of a batch) in its own space."""
        super().validate(position, what=what)
        arr = np.asarray(position)
        for name, part in self.parts.items():
            part.validate(self.part(arr, name), what=f"{what}, entry {name!r},")

    def __eq__(self, other) -> bool:
        return isinstance(other, Product) and self.parts == other.parts

    def __hash__(self) -> int:
        return hash(tuple(self.parts.items()))

    def __str__(self) -> str:
        return "Product(" + ", ".join(f"{name}: {part}" for name, part in self.parts.items()) + ")"

    __repr__ = __str__
