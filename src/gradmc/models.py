"""A user's own model as a :class:`~gradmc.base.Target`: a log-density function, a pytree
model, a NumPyro model, or ``path/to/model.py:NAME`` on the command line.

* :func:`from_function` wraps a log density ``f(position)``. Positions are arrays on any
  space, or, on a continuous space, pytrees (dict, NamedTuple, tuple of arrays and
  scalars) that are flattened for the samplers and named in traces.
* :func:`resolve_target` is what :func:`gradmc.sample` and :func:`gradmc.compare.compare`
  do with their first argument: a Target, a registered name, or a callable.
* :func:`load_target` reads ``module:NAME`` specs (the command line's ``--target``);
  :func:`parse_space` reads space texts such as ``categorical:4x900``.
* NumPyro models: :func:`gradmc.numpyro_models.from_numpyro`.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import importlib.util
import inspect
import os
import re
import sys
import traceback
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from gradmc.base import Target
from gradmc.registry import target as registered_target
from gradmc.spaces import Binary, Categorical, Product, Real, Space, Spin
from gradmc.variables import Variables

__all__ = ["from_function", "resolve_target", "parse_space", "load_target", "SPACE_FORMS"]

#: The space texts :func:`parse_space` reads.
SPACE_FORMS = "real:D, binary:D, spin:D or categorical:KxD"


def parse_space(text: str) -> Space:
    """The space named by ``text``: ``real:D``, ``binary:D``, ``spin:D`` or ``categorical:KxD``
    (``D`` coordinates; ``K`` categories, each variable a one-hot row).

    Parameters
    ----------
    text : str
        E.g. ``"binary:100"`` or ``"categorical:4x900"``.

    Raises
    ------
    ValueError
        For any other text.
    """
    if not isinstance(text, str):
        raise TypeError(f"a space text must be a string such as 'binary:100', got {type(text).__name__}")
    kind, _, size = text.strip().lower().partition(":")
    try:
        if kind == "categorical":
            k, x, d = size.partition("x")
            if not x:
                raise ValueError
            return Categorical(int(k), int(d))
        spaces = {"real": Real, "binary": Binary, "spin": Spin}
        if kind in spaces:
            return spaces[kind](int(size))
    except ValueError:
        pass
    raise ValueError(f"cannot read the space {text!r}; expected {SPACE_FORMS} (e.g. 'binary:100', 'categorical:4x900')")


def _as_space(space: Space | str) -> Space:
    if isinstance(space, str):
        return parse_space(space)
    if not isinstance(space, Space):
        raise TypeError(
            f"space must be a gradmc space (e.g. gradmc.spaces.Binary(100)) or a text such as "
            f"'binary:100', got {type(space).__name__}"
        )
    return space


def _is_pytree(init) -> bool:
    """Whether ``init`` is a structure of several arrays (dict, tuple, NamedTuple) rather than one array.
    A list counts as one array, as NumPy reads it.
    """
    if isinstance(init, list):
        return False
    return not jax.tree_util.treedef_is_leaf(jax.tree.structure(init))


def _function_name(fn: Callable) -> str:
    name = getattr(fn, "__name__", None) or getattr(getattr(fn, "func", None), "__name__", None)
    return name if name and not name.startswith("<") else "model"


def _check_scalar_and_pure(logdensity_fn: Callable, space: Space, name: str) -> None:
    """Raise ``ValueError`` unless ``logdensity_fn`` maps one position to a scalar, and gives
    the same computation each time it is traced (traced twice, or three times when the first
    trace builds a cache; nothing runs).

    The samplers compile the log density more than once (the start, the warm-up, the kept
    draws); a function that draws its constants while it runs (``np.random`` inside it)
    would be a different density in each, and the chains would silently stick.
    """
    position = jax.ShapeDtypeStruct(space.event_shape, jnp.result_type(float))

    def trace():  # a new wrapper each time: JAX caches the trace of one function object
        return jax.make_jaxpr(lambda x: logdensity_fn(x))(position)

    first, second = trace(), trace()
    shape = first.out_avals[0].shape if len(first.out_avals) == 1 else None
    if shape != ():
        out = jax.eval_shape(logdensity_fn, position)
        got = f"an array of shape {out.shape}" if hasattr(out, "shape") else f"a {type(out).__name__}"
        raise ValueError(
            f"the log density {name!r} must return a scalar for one position of shape {space.event_shape}; "
            f"it returned {got} (sum the terms of the log density)"
        )
    if not _same_program(first, second) and not _same_program(second, trace()):
        # a function that builds a cache on its first call (TensorFlow Probability's bijectors
        # do) traces the same from its second call on
        raise ValueError(
            f"the log density {name!r} changes from one call to the next: two traces of it at the same "
            "position differ (it draws random numbers, or reads something that changes, while it runs). "
            "Make it a function of the position alone: draw random constants once, outside it"
        )


def _same_program(first, second) -> bool:
    """Whether two traces of a function are the same computation with the same constants."""
    return _program_text(first) == _program_text(second) and all(map(_same_constant, first.consts, second.consts))


def _decoded(part: Space, value):
    """A discrete part's value as a user reads it: integers (a category's index for one-hot
    rows, the value for 0/1, ±1 and integer-valued ordinal parts); real parts as they are.
    """
    if isinstance(part, Categorical):
        rows = value.reshape(-1, part.k)
        # a one-hot row's index; any other row (a coordinate moved off the space, as the run
        # warnings do to name it) reads as another number
        index = rows @ jnp.arange(part.k, dtype=rows.dtype) + part.k * (1 - rows.sum(-1))
        return jnp.round(index).astype(jnp.int32)
    integral = part.is_discrete and np.all(np.asarray(part.values) == np.round(part.values))
    return jnp.round(value).astype(jnp.int32) if integral else value


def _product_target(logdensity_fn: Callable, init, spaces: Mapping, name: str) -> Target:
    """The Target of a log density of pytree positions, some entries of which lie on the
    discrete spaces ``spaces`` names (the rest real): a :class:`~gradmc.spaces.Product`.
    """
    if init is None or not _is_pytree(init):
        raise TypeError(
            "space= as a dict names entries of a pytree position: give init= as one such position, e.g. "
            "{'beta': jnp.zeros(3), 'gamma': jnp.zeros(10)} for space={'gamma': gradmc.spaces.Binary(10)}"
        )
    variables = Variables.from_pytree(init)
    unknown = sorted(set(spaces) - set(variables.shapes))
    if unknown:
        raise ValueError(
            f"space= names {', '.join(map(repr, unknown))}, not entries of init: {', '.join(variables.shapes)}"
        )
    parts = {}
    for entry, shape in variables.shapes.items():
        size = int(np.prod(shape, dtype=np.int64))
        part = _as_space(spaces[entry]) if entry in spaces else Real(size)
        if isinstance(part, Product) or part.dim != size:
            raise ValueError(f"init's entry {entry!r} has {size} entries; its space {part} has {part.dim}")
        parts[entry] = part
    space = Product(parts)
    start = variables.flatten(init)
    space.validate(np.asarray(start), what=f"init of {name!r}")
    unflatten = variables.unflatten

    def fn(x):
        return logdensity_fn(unflatten(x))

    def named(position):
        return {entry: _decoded(parts[entry], value) for entry, value in variables.fn(position).items()}

    _check_scalar_and_pure(fn, space, name)
    return Target(
        name=name,
        logdensity_fn=fn,
        space=space,
        description=f"user model {name} on {space}",
        initial_position=lambda key: start,
        variables=Variables(named, space.event_shape, unflatten=unflatten, treedef=variables.treedef),
    )


def _program_text(closed_jaxpr) -> str:
    """The trace as text, without the memory addresses of Python callables it may name."""
    return re.sub(r" at 0x[0-9a-fA-F]+", "", str(closed_jaxpr.jaxpr))


def _same_constant(a, b) -> bool:
    """Whether two constants captured by a trace are equal (NaN equal to NaN); True when they
    cannot be compared as arrays (e.g. PRNG keys).
    """
    try:
        a, b = np.asarray(a), np.asarray(b)
    except TypeError:
        return True
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    return bool(np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"))


def from_function(
    logdensity_fn: Callable,
    init=None,
    *,
    space: Space | str | None = None,
    name: str | None = None,
) -> Target:
    """A :class:`~gradmc.base.Target` from a log-density function.

    On a continuous space the position may be a pytree: with
    ``init={"mu": 0.0, "theta": jnp.zeros(8)}``, ``logdensity_fn`` receives such dicts,
    the samplers move the flattened vector (``jax.flatten_util.ravel_pytree`` order) and
    traces name the variables ``mu`` and ``theta``. With ``space`` a dict naming the spaces
    of some entries (``space={"gamma": Binary(10)}``), those entries are discrete and the rest
    real: the target lives on a :class:`~gradmc.spaces.Product` (a mixed model), and traces
    show its discrete entries as integers (a category's index for one-hot rows).

    Parameters
    ----------
    logdensity_fn : callable
        ``logdensity_fn(position)``: the unnormalised log density, a scalar. On a discrete
        space it must also accept real-valued positions (the gradient samplers differentiate it).
    init : array or pytree, optional
        One starting position, shared by every chain; on its own it fixes the space,
        ``Real`` of its size.
    space : Space, str or dict, optional
        The space (``gradmc.spaces.Binary(100)``, or a text such as ``"categorical:4x900"``,
        see :func:`parse_space`); needed for discrete models. A dict from entries of a pytree
        ``init`` to their spaces makes a mixed model.
    name : str, optional
        The name traces carry (default: the function's name).

    Raises
    ------
    TypeError
        Without ``init`` and without ``space``, or with a pytree ``init`` on a discrete space.
    ValueError
        When ``init`` does not fit ``space``, the log density is not a scalar, or it
        changes from one call to the next (random constants drawn inside it).
    """
    if not callable(logdensity_fn):
        raise TypeError(f"logdensity_fn must be callable, got {type(logdensity_fn).__name__}")
    name = name or _function_name(logdensity_fn)
    if isinstance(space, Mapping):
        return _product_target(logdensity_fn, init, space, name)
    if init is None and space is None:
        raise TypeError(
            f"the log density {name!r} needs init= (a starting position, e.g. jnp.zeros(10) or "
            "{'mu': 0.0, 'theta': jnp.zeros(8)}) or space= (e.g. gradmc.spaces.Binary(100) or 'binary:100') "
            "to say where it lives; for a NumPyro model use gradmc.from_numpyro(model, *args, **kwargs)"
        )
    space = None if space is None else _as_space(space)
    variables = None
    fn = logdensity_fn
    start = None
    discrete = space is not None and space.is_discrete
    if init is not None and (_is_pytree(init) or (np.ndim(init) != 1 and not discrete)):
        if discrete:
            raise TypeError(
                f"pytree positions are for continuous models; on {space} give init as one array of shape "
                f"{space.event_shape}"
            )
        variables = Variables.from_pytree(init)
        start = variables.flatten(init)
        if space is not None and space.event_shape != start.shape:
            raise ValueError(f"init has {start.size} entries in all; {space} has {space.dim}")
        unflatten = variables.unflatten

        def fn(x):
            return logdensity_fn(unflatten(x))

    elif init is not None:
        start = jnp.asarray(np.asarray(init), jnp.result_type(float))
        if space is not None and start.shape != space.event_shape:
            raise ValueError(f"init has shape {start.shape}; {space} needs one position of shape {space.event_shape}")
    space = space if space is not None else Real(int(start.size))
    if start is not None:
        space.validate(np.asarray(start), what=f"init of {name!r}")
    _check_scalar_and_pure(fn, space, name)
    initial_position = None if start is None else (lambda key, start=start: start)
    return Target(
        name=name,
        logdensity_fn=fn,
        space=space,
        description=f"user model {name} on {space}",
        initial_position=initial_position,
        variables=variables,
    )


def resolve_target(target, *, init=None, space: Space | str | None = None) -> tuple[Target, Any]:
    """``(Target, init)`` for what :func:`gradmc.sample` accepts as its target.

    * a :class:`~gradmc.base.Target`: itself (a pytree ``init`` is flattened when the
      target was built from pytrees);
    * a string: the registered target of that name (``gradmc.target(name)``);
    * a callable log density: :func:`from_function`. With ``space``, ``init`` is one start
      for all chains or one per chain (as for a Target); without, ``init`` is one position
      (array or pytree) and fixes the space, ``Real`` of its size.

    Parameters
    ----------
    target : Target, str or callable
        What to sample.
    init : array or pytree, optional
        The chains' start.
    space : Space or str, optional
        The space of a callable's positions.

    Raises
    ------
    TypeError
        For anything else, for ``space`` with a Target or a name, and for a callable
        without ``init`` and ``space``.
    """
    if isinstance(target, str | Target):
        if space is not None:
            raise TypeError("space= applies to a log-density function only; a Target or a registered name has its own")
        target = registered_target(target) if isinstance(target, str) else target
        if init is not None and _is_pytree(init):
            if target.variables is None or target.variables.treedef is None:
                raise TypeError(
                    f"target {target.name!r} takes init as an array of shape {target.space.event_shape} "
                    f"(or one per chain), not a {type(init).__name__}"
                )
            init = target.variables.flatten(init)
        return target, init
    if callable(target):
        if space is not None and not (init is not None and _is_pytree(init)):
            return from_function(target, space=space), init
        return from_function(target, init, space=space), None
    raise TypeError(
        "target must be a gradmc.Target, a registered target name or a log-density function, "
        f"got {type(target).__name__}"
    )


# -- the command line's module:NAME specs ----------------------------------------------------


def _load_module(source: str):
    """The module of a spec's source: a ``.py`` file (run under a name of its own) or a dotted module."""
    if source.endswith(".py") or "/" in source or os.sep in source:
        path = Path(source).expanduser()
        if not path.is_file():
            raise ValueError(f"no such model file: {source}")
        path = path.resolve()
        module_name = f"gradmc_user_{path.stem}_{hashlib.sha1(str(path).encode()).hexdigest()[:8]}"
        spec = importlib.util.spec_from_file_location(module_name, path)
        if spec is None or spec.loader is None:
            raise ValueError(f"cannot load {source} as a Python module")
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module  # dataclasses and pickling look their module up here
        try:
            spec.loader.exec_module(module)
        except Exception as error:
            sys.modules.pop(module_name, None)
            raise _loading_error(source, error, lambda filename: Path(filename).resolve() == path) from error
        except BaseException:
            sys.modules.pop(module_name, None)
            raise
        return module
    try:
        return importlib.import_module(source)
    except ModuleNotFoundError as error:
        raise ValueError(
            f"cannot import the module {source!r} ({error}); give path/to/model.py:NAME or package.module:NAME"
        ) from None
    except Exception as error:
        top = source.split(".")[0]  # the user's package directory, or their top-level module's file
        in_package = lambda filename: top in Path(filename).parts or Path(filename).stem == top  # noqa: E731
        raise _loading_error(source, error, in_package) from error


def _loading_error(source: str, error: Exception, is_users_file: Callable[[str], bool]) -> ValueError:
    """A ``ValueError`` saying that running the user's model code failed, with the last line
    of their code in the traceback, so the error is not taken for gradmc's own.
    """
    frames = [frame for frame in traceback.extract_tb(error.__traceback__) if is_users_file(frame.filename)]
    where = f" ({Path(frames[-1].filename).name}, line {frames[-1].lineno}: {frames[-1].line})" if frames else ""
    return ValueError(f"loading {source} failed{where}: {type(error).__name__}: {error}")


def _load_data(data) -> dict[str, np.ndarray]:
    path = Path(data).expanduser()
    if not path.is_file():
        raise ValueError(f"no such data file: {data}")
    try:
        with np.load(path, allow_pickle=False) as arrays:
            if not hasattr(arrays, "files"):
                raise ValueError
            return {key: arrays[key] for key in arrays.files}
    except ValueError:
        raise ValueError(f"cannot read {data} as an .npz file of named arrays (numpy.savez)") from None


def _candidates(module) -> list[str]:
    """The public Targets of ``module`` and the functions it defines."""
    return sorted(
        k
        for k, v in vars(module).items()
        if not k.startswith("_")
        and (isinstance(v, Target) or (callable(v) and getattr(v, "__module__", None) == module.__name__))
    )


def _missing_arguments(fn: Callable, arrays: dict) -> list[str]:
    """The required parameters of ``fn`` that ``arrays`` does not name."""
    try:
        parameters = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return []
    return [
        p.name
        for p in parameters
        if p.default is p.empty and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and p.name not in arrays
    ]


def load_target(
    spec: str,
    *,
    dim: int | None = None,
    space: str | None = None,
    data: str | os.PathLike | None = None,
) -> Target:
    """The target named by ``spec``: a registered name, ``path/to/model.py:NAME`` or
    ``package.module:NAME``; ``path/to/model.py`` alone where the file defines one function or
    Target.

    ``NAME`` is a :class:`~gradmc.base.Target`, a NumPyro model function (a function
    whose trace has NumPyro sample sites; see :func:`gradmc.numpyro_models.from_numpyro`)
    or a log-density function of one position, which needs ``dim`` (``Real(dim)``) or
    ``space``. A spec without ``:`` is a registered target name.

    Parameters
    ----------
    spec : str
        ``NAME`` of the registry, or ``source:NAME``.
    dim : int, optional
        The dimension of a log-density function's ``Real`` space.
    space : str, optional
        The space of a log-density function, e.g. ``"binary:100"`` or ``"categorical:4x900"``
        (:func:`parse_space`).
    data : path, optional
        An ``.npz`` file whose arrays are passed as keyword arguments to the NumPyro model
        or the log density (``log_p(x, **data)``).

    Raises
    ------
    ValueError
        For a missing file or module, a missing ``NAME``, a log density without ``dim`` or
        ``space``, a bad space text, or ``dim``/``space``/``data`` where they do not apply.
    """
    if not isinstance(spec, str) or not spec:
        raise ValueError(f"a target spec is a registered name or path/to/model.py:NAME, got {spec!r}")
    if ":" in spec:
        source, _, name = spec.rpartition(":")
        if not source or not name.isidentifier():
            raise ValueError(
                f"cannot read the target spec {spec!r}; expected path/to/model.py:NAME or package.module:NAME"
            )
        module = _load_module(source)
    elif spec.endswith(".py"):  # a file defining one model names it
        source, module = spec, _load_module(spec)
        found = _candidates(module)
        if len(found) != 1:
            raise ValueError(
                f"name the model inside {spec}: {spec}:NAME (a Target, a log density or a NumPyro model); "
                f"it defines {', '.join(found) or 'nothing usable'}"
            )
        name, spec = found[0], f"{spec}:{found[0]}"
    else:
        if dim is not None or space is not None or data is not None:
            raise ValueError(f"--dim, --space and --data apply to a model of your own, not to the registered {spec!r}")
        return registered_target(spec)
    if not hasattr(module, name):
        found = ", ".join(_candidates(module)) or "nothing usable"
        raise ValueError(f"{source} has no {name!r}; it defines {found}")
    obj = getattr(module, name)
    arrays = {} if data is None else _load_data(data)
    if isinstance(obj, Target):
        if dim is not None or space is not None or data is not None:
            raise ValueError(f"{spec} is a Target, with its own space and data; drop --dim, --space and --data")
        return obj
    if not callable(obj):
        raise ValueError(
            f"{spec} is neither a Target, a log-density function nor a NumPyro model (its type is {type(obj).__name__})"
        )
    from gradmc.numpyro_models import from_numpyro, numpyro_model_error

    problem = numpyro_model_error(obj, arrays)
    if problem is None:
        if dim is not None or space is not None:
            raise ValueError(f"{spec} is a NumPyro model, whose sites give the space; drop --dim and --space")
        return from_numpyro(obj, **arrays)
    if dim is None and space is None:
        missing = _missing_arguments(obj, arrays)
        if missing:
            raise ValueError(
                f"{spec} needs {', '.join(map(repr, missing))}, which --data did not give: if it is a log-density "
                f"function of the position, give its space with --dim D (Real(D)) or --space ({SPACE_FORMS}); if "
                "it is a NumPyro model, pass its data with --data FILE.npz (one array per argument, saved under "
                "its name)"
            )
        raise ValueError(
            f"{spec} is a log-density function: give its space with --dim D (Real(D)) or --space "
            f"({SPACE_FORMS}); it is not a NumPyro model ({problem})"
        )
    target_space = parse_space(space) if space is not None else Real(int(dim))  # type: ignore[arg-type]
    if dim is not None and space is not None and target_space.dim != int(dim):
        raise ValueError(f"--dim {dim} disagrees with --space {space} ({target_space.dim} coordinates)")
    fn = functools.partial(obj, **arrays) if arrays else obj
    return from_function(fn, space=target_space, name=name)
