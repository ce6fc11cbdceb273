"""Positions as pytrees: the flat vector a continuous kernel moves, and the way back.

A continuous kernel accepts a position that is an array or any pytree of arrays (a dict of
named parameters, a NamedTuple), as BlackJAX's kernels do: it moves the flat vector
``jax.flatten_util.ravel_pytree`` makes of it and hands back positions (and gradients) of
the user's structure. On a flat array the vector is the array itself.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
from jax.flatten_util import ravel_pytree

__all__ = ["flat_view", "ravel"]


def flat_view(position: Any, logdensity_fn: Callable) -> tuple[jax.Array, Callable, Callable]:
    """``(x, flat_logdensity_fn, unravel)``: ``position`` as one flat vector ``x``, the log
    density of such vectors, and ``unravel(x)`` back to the position's structure.

    Parameters
    ----------
    position : array or pytree
        A position.
    logdensity_fn : callable
        The log density of positions of that structure.
    """
    x, unravel = ravel_pytree(position)
    return x, lambda flat: logdensity_fn(unravel(flat)), unravel


def ravel(tree: Any) -> jax.Array:
    """The flat vector of ``tree`` (a gradient of the position's structure, say).

    Parameters
    ----------
    tree : array or pytree
        Arrays to flatten, in ``ravel_pytree``'s order.
    """
    return ravel_pytree(tree)[0]
