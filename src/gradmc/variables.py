"""Named variables: how one flat position of a target reads as ``name -> array``.

Samplers move one array per chain (shape ``space.event_shape``); a model is written in its
own terms (``mu``, ``tau``, ``theta``, a lattice of spins). :class:`Variables` is the bridge:
a traceable function from one position to a dict of named arrays, their shapes, and
optional dimension names and labels for ArviZ. A target without one has a single variable
``x``, the position itself.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree

__all__ = ["Variables", "entry_name"]

#: Positions converted per block by :meth:`Variables.of_draws` (scalar entries), so the
#: device holds a bounded slice of the draws whatever their number.
BLOCK_ENTRIES = 1 << 22


def entry_name(name: str, shape: tuple[int, ...], flat_index: int) -> str:
    """The label of entry ``flat_index`` (C order) of a variable: ``mu`` for a scalar,
    ``theta[3]``, ``spins[1,2]``; as ArviZ summaries write them.
    """
    if not shape:
        return name
    return f"{name}[{','.join(map(str, np.unravel_index(int(flat_index), shape)))}]"


def _key_text(key) -> str:
    """One step of a pytree path as text: a dict key, an attribute or an index."""
    for attribute in ("key", "name", "idx"):
        if hasattr(key, attribute):
            return str(getattr(key, attribute))
    return str(key)


def _leaf_name(path) -> str:
    """``a.b`` for the leaf at ``path`` (``x`` for a bare array, ``x_0`` for a top-level index)."""
    name = ".".join(_key_text(k) for k in path)
    if not name:
        return "x"
    return name if name[0].isalpha() or name[0] == "_" else f"x_{name}"


class Variables:
    """The named variables of a target's position.

    Parameters
    ----------
    fn : callable
        ``fn(position) -> dict`` of name -> array for one position of shape
        ``event_shape``; traceable (it is vmapped over draws).
    event_shape : tuple of int
        The shape of one position.
    dims : dict of str to sequence of str, optional
        Names of the axes of a variable (default ArviZ's ``{name}_dim_{i}``).
    coords : dict of str to sequence, optional
        Labels along named axes (e.g. ``{"coefficient": ["x1", "x2", "intercept"]}``).
    unflatten : callable, optional
        ``unflatten(position)``: the position as the model's own pytree (a dict,
        NamedTuple or tuple), for models written on pytrees.
    treedef : jax.tree_util.PyTreeDef, optional
        That pytree's structure, which :meth:`flatten` checks.
    recover : callable, optional
        ``recover(named, key) -> dict``: draws of variables the log density sums out (a
        NumPyro model's enumerated discrete sites), each drawn from its conditional given
        the named draws ``{name: (chain, draw, *shape)}``, with the JAX key ``key``.
    derived : sequence of str, optional
        Variables computed from the others (a NumPyro model's deterministic sites): they
        move with the coordinates they are computed from and never name one.

    Raises
    ------
    TypeError
        When ``fn`` does not return a dict with string keys.
    ValueError
        When ``dims`` or ``coords`` do not match the variables' shapes.
    """

    def __init__(
        self,
        fn: Callable[[jax.Array], dict[str, jax.Array]],
        event_shape: Sequence[int],
        *,
        dims: Mapping[str, Sequence[str]] | None = None,
        coords: Mapping[str, Sequence] | None = None,
        unflatten: Callable[[jax.Array], Any] | None = None,
        treedef=None,
        recover: Callable[[dict, jax.Array], dict] | None = None,
        derived: Sequence[str] = (),
    ):
        self.fn = fn
        self.recover = recover
        self.derived = frozenset(derived)
        self.event_shape = tuple(int(n) for n in event_shape)
        self.unflatten = unflatten
        self.treedef = treedef
        order: list[str] = []

        def record(position):
            out = fn(position)
            if not isinstance(out, Mapping) or not all(isinstance(k, str) for k in out):
                raise TypeError(f"a Variables function must return a dict of name -> array, got {type(out).__name__}")
            order[:] = list(out)
            return dict(out)

        spec = jax.ShapeDtypeStruct(self.event_shape, jnp.result_type(float))
        out = jax.eval_shape(record, spec)
        self.shapes: dict[str, tuple[int, ...]] = {name: tuple(out[name].shape) for name in order}
        self.dims = {name: tuple(axes) for name, axes in (dims or {}).items()}
        self.coords = {name: list(labels) for name, labels in (coords or {}).items()}
        self._check_dims()
        self._apply = jax.jit(jax.vmap(fn))  # compiled once per block shape, kept for every call

    def _check_dims(self) -> None:
        sizes: dict[str, int] = {}
        for name, axes in self.dims.items():
            if name not in self.shapes:
                raise ValueError(f"dims names the variable {name!r}; the variables are {list(self.shapes)}")
            shape = self.shapes[name]
            if len(axes) != len(shape):
                raise ValueError(f"variable {name!r} has shape {shape}, but dims gives {len(axes)} axis names {axes}")
            for axis, size in zip(axes, shape, strict=True):
                if sizes.setdefault(axis, size) != size:
                    raise ValueError(f"axis {axis!r} has length {sizes[axis]} in one variable and {size} in another")
        for axis, labels in self.coords.items():
            if axis not in sizes:
                raise ValueError(f"coords labels the axis {axis!r}, which no variable's dims name")
            if len(labels) != sizes[axis]:
                raise ValueError(f"axis {axis!r} has length {sizes[axis]}, but coords gives {len(labels)} labels")

    @property
    def names(self) -> tuple[str, ...]:
        """The variables' names, in the model's order."""
        return tuple(self.shapes)

    def __call__(self, position) -> dict[str, jax.Array]:
        """The named variables of one position (traceable).

        Parameters
        ----------
        position : array_like
            One position, shape ``event_shape``.
        """
        return dict(self.fn(jnp.asarray(position)))

    def of_draws(self, draws, key=None) -> dict[str, np.ndarray]:
        """The named variables of every draw: name -> ``(chain, draw, *shape)`` array; with a
        ``key``, also the variables ``recover`` draws (summed out of the log density).

        Parameters
        ----------
        draws : array_like
            Positions ``(chain, draw, *event_shape)``.
        key : jax.Array, optional
            The key of the recovered variables' draws.
        """
        named = self._named_draws(draws)
        if self.recover is not None and key is not None:
            named.update({name: np.asarray(value) for name, value in self.recover(named, key).items()})
        return named

    def _named_draws(self, draws) -> dict[str, np.ndarray]:
        """The variables of ``fn`` for every draw (``of_draws`` without the recovered ones)."""
        draws = np.asarray(draws)
        lead = draws.shape[: draws.ndim - len(self.event_shape)]
        if draws.shape[len(lead) :] != self.event_shape:
            raise ValueError(f"draws have shape {draws.shape}; expected trailing shape {self.event_shape}")
        flat = draws.reshape(-1, *self.event_shape)
        step = max(1, BLOCK_ENTRIES // max(1, int(np.prod(self.event_shape))))
        apply = self._apply
        if flat.shape[0] == 0:
            out = jax.eval_shape(apply, flat)
            return {name: np.zeros((*lead, *self.shapes[name]), out[name].dtype) for name in self.names}
        blocks = [jax.device_get(apply(flat[start : start + step])) for start in range(0, flat.shape[0], step)]
        return {
            name: np.concatenate([np.asarray(b[name]) for b in blocks]).reshape(*lead, *self.shapes[name])
            for name in self.names
        }

    def changed_entries(self, base, moved) -> list[tuple[str, str | None] | None]:
        """What each of ``moved`` changes relative to ``base``, as ``(variable, entry)``:
        ``("theta", "theta[3]")`` for one entry of one variable, ``("w", None)`` for several
        entries of one variable, None for no change or changes in several variables (the
        ``derived`` ones aside).

        This is how a coordinate of the flat position is named in the model's terms: move
        that one coordinate and see which named entry follows. It holds for any variables
        function that maps each coordinate to one entry, transformed or not (a NumPyro
        model's ``sigma = exp(z)`` names ``z``'s coordinate ``sigma``; a simplex's
        unconstrained coordinates each move several entries of it).

        Parameters
        ----------
        base : array_like
            One position, shape ``event_shape``.
        moved : array_like
            Positions ``(k, *event_shape)``, each ``base`` with one coordinate moved.
        """
        positions = np.concatenate([np.asarray(base)[None], np.asarray(moved)])
        named = self._named_draws(positions)
        changed = {}
        for name in (n for n in self.names if n not in self.derived):
            value = named[name].reshape(len(positions), -1)
            changed[name] = ~((value[1:] == value[:1]) | (np.isnan(value[1:]) & np.isnan(value[:1])))
        found: list[tuple[str, str | None] | None] = []
        for j in range(len(positions) - 1):
            hits = {name: np.flatnonzero(mask[j]) for name, mask in changed.items() if mask[j].any()}
            if len(hits) != 1:
                found.append(None)
                continue
            ((name, entries),) = hits.items()
            found.append((name, entry_name(name, self.shapes[name], entries[0]) if entries.size == 1 else None))
        return found

    def flatten(self, tree) -> jax.Array:
        """The flat position of a pytree with the model's structure (the inverse of ``unflatten``).

        Parameters
        ----------
        tree : pytree
            A position written as the model's pytree.
        """
        if self.treedef is None:
            raise TypeError("these variables were not built from a pytree; give positions as arrays")
        structure = jax.tree.structure(tree)
        if structure != self.treedef:
            raise ValueError(f"position has the structure {structure}; the model's is {self.treedef}")
        flat, _ = ravel_pytree(jax.tree.map(lambda v: jnp.asarray(v, jnp.result_type(float)), tree))
        if flat.shape != self.event_shape:
            raise ValueError(f"position has {flat.size} entries in all; the model's has {self.event_shape[0]}")
        return flat

    @classmethod
    def from_pytree(cls, example) -> Variables:
        """The variables of a model whose positions are pytrees shaped like ``example``.

        Each leaf is a variable named by its path: ``mu`` for ``{"mu": ...}`` or a NamedTuple
        field, ``a.b`` for nested dicts, ``x_0``, ``x_1`` for the entries of a tuple, ``x``
        for a bare array. Positions are flattened as ``jax.flatten_util.ravel_pytree`` does.

        Parameters
        ----------
        example : pytree
            One position (dict, NamedTuple, tuple of arrays and scalars).
        """
        example = jax.tree.map(lambda v: jnp.asarray(v, jnp.result_type(float)), example)
        flat, unravel = ravel_pytree(example)
        paths, treedef = jax.tree_util.tree_flatten_with_path(example)
        names = [_leaf_name(path) for path, _ in paths]
        if len(set(names)) != len(names):
            raise ValueError(f"the pytree's leaves do not have distinct names: {names}")

        def fn(position):
            return dict(zip(names, jax.tree.leaves(unravel(position)), strict=True))

        return cls(fn, flat.shape, unflatten=unravel, treedef=treedef)

    @classmethod
    def reshaped(
        cls,
        name: str,
        event_shape: Sequence[int],
        shape: Sequence[int] | None = None,
        *,
        dims: Sequence[str] | None = None,
        coords: Mapping[str, Sequence] | None = None,
    ) -> Variables:
        """One variable ``name``: the position reshaped to ``shape`` (default: as it is).

        Parameters
        ----------
        name : str
            The variable's name.
        event_shape : tuple of int
            The shape of one position.
        shape : tuple of int, optional
            The variable's shape (the same number of entries).
        dims : sequence of str, optional
            Names of its axes.
        coords : dict of str to sequence, optional
            Labels along those axes.
        """
        shape = tuple(event_shape) if shape is None else tuple(int(n) for n in shape)
        if int(np.prod(shape)) != int(np.prod(event_shape)):
            raise ValueError(f"cannot read a position of shape {tuple(event_shape)} as shape {shape}")
        return cls(
            lambda position: {name: jnp.reshape(position, shape)},
            event_shape,
            dims=None if dims is None else {name: tuple(dims)},
            coords=coords,
        )

    def __repr__(self) -> str:
        inner = ", ".join(f"{name}{list(shape)}" for name, shape in self.shapes.items())
        return f"Variables({inner})"
