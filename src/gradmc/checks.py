"""Argument checks shared by every layer of gradmc (ground level: imports only NumPy and JAX).

Each check raises ``ValueError`` with a message that names the argument and the value it
got. Checks run on the host, before tracing; values that are JAX tracers (a step size a
search ``vmap``s over) pass through unchecked, so kernels stay jittable.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

__all__ = [
    "is_concrete",
    "check_move_probability",
    "check_positive",
    "check_positive_param",
    "check_radius",
    "check_probability",
    "check_square",
    "check_symmetric",
]


def is_concrete(x) -> bool:
    """True when no leaf of ``x`` is a JAX tracer (the value can be checked on the host)."""
    return not any(isinstance(leaf, jax.core.Tracer) for leaf in jax.tree.leaves(x))


def check_positive(name: str, value, *, integer: bool = False) -> None:
    """Raise ``ValueError`` unless ``value`` is a positive number (an integer if ``integer``).

    Parameters
    ----------
    name : str
        The argument's name, for the message.
    value : number or array
        Every entry must be positive.
    integer : bool
        Also require an integral value.
    """
    ok = value is not None and bool(np.all(np.asarray(value) > 0))
    if integer:
        ok = ok and float(value) == int(value)
    if not ok:
        kind = "a positive integer" if integer else "positive"
        raise ValueError(f"{name} must be {kind}, got {value!r}")


def check_positive_param(name: str, value) -> jax.Array:
    """``value`` as float32 after checking it is a finite positive scalar (when concrete).

    Parameters
    ----------
    name : str
        How the message names the parameter (e.g. ``"NCG step size ε"``).
    value : float or tracer
        The parameter; a tracer passes unchecked.
    """
    if is_concrete(value):
        v = np.asarray(value, dtype=np.float64)
        if v.shape != () or not np.isfinite(v) or v <= 0:
            raise ValueError(f"{name} must be a finite positive number, got {value!r}")
    return jnp.asarray(value, jnp.float32)


def check_radius(value) -> jax.Array:
    """A radius r ≥ 1 (an integer), as int32 (tracers pass unchecked).

    Parameters
    ----------
    value : int or tracer
        The radius of a local move.
    """
    if is_concrete(value):
        v = np.asarray(value)
        if v.shape != () or not np.isfinite(v) or v < 1 or int(v) != v:
            raise ValueError(f"radius r must be an integer >= 1, got {value!r}")
    return jnp.asarray(value, jnp.int32)


def check_probability(name: str, value) -> float:
    """``value`` as a float after checking it lies strictly between 0 and 1.

    Parameters
    ----------
    name : str
        How the message names the parameter (e.g. ``"target acceptance rate"``).
    value : float
        The probability.
    """
    v = float(value)
    if not 0.0 < v < 1.0:
        raise ValueError(f"{name} must lie in (0, 1), got {value}")
    return v


def check_move_probability(value) -> jax.Array:
    """A move probability 0 < p ≤ 1, as float32 (tracers pass unchecked).

    Parameters
    ----------
    value : float or tracer
        The probability that a coordinate joins a move.
    """
    if is_concrete(value):
        v = np.asarray(value, np.float64)
        if v.shape != () or not 0.0 < v <= 1.0:
            raise ValueError(f"move_probability must lie in (0, 1], got {value!r}")
    return jnp.asarray(value, jnp.float32)


def check_square(matrix, what: str, dim: int | None = None) -> np.ndarray:
    """``matrix`` as a float64 array after checking it is square, finite and ``dim`` × ``dim``.

    Parameters
    ----------
    matrix : array_like
        The matrix to check.
    what : str
        How the message names it.
    dim : int, optional
        The size it must have (the target's dimension).
    """
    m = np.asarray(matrix, dtype=np.float64)
    if m.ndim != 2 or m.shape[0] != m.shape[1]:
        raise ValueError(f"{what} must be a square matrix, got shape {m.shape}")
    if dim is not None and m.shape[0] != dim:
        raise ValueError(f"{what} must be {dim}x{dim} to match the target, got {m.shape}")
    if not np.all(np.isfinite(m)):
        raise ValueError(f"{what} has non-finite entries")
    return m


def check_symmetric(matrix, what: str, dim: int | None = None, *, rtol: float = 0.0) -> np.ndarray:
    """The symmetric part ½(A + Aᵀ) of a square, finite ``matrix`` that is symmetric to
    within ``rtol`` relative and 1e-6 × max|A| absolute tolerance.

    Parameters
    ----------
    matrix : array_like
        The matrix to check.
    what : str
        How the message names it.
    dim : int, optional
        The size it must have.
    rtol : float
        Relative tolerance of the symmetry check.
    """
    m = check_square(matrix, what, dim)
    scale = max(1.0, float(np.abs(m).max()))
    if not np.allclose(m, m.T, rtol=rtol, atol=1e-6 * scale):
        raise ValueError(f"{what} must be symmetric (max |A - Aᵀ| = {np.abs(m - m.T).max():.3g})")
    return 0.5 * (m + m.T)
