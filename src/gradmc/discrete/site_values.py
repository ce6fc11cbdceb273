"""The log density at every value of one discrete site, for Gibbs's exact conditional.

``jax.vmap`` over the k values evaluates the whole density k times, and a change point's
``rate = jnp.where(jnp.arange(T) < s, early, late)`` then costs k × T logarithms and
Poisson terms. :func:`logdensities_at` evaluates the density's program (its jaxpr) once,
tracking how each intermediate depends on the site s:

* not at all: computed once;
* as s itself, broadcast (``s``, ``float(s)``, ``jnp.full(T, s)``): its k values;
* as a *masked* array ``where(M(s), A, B)`` with A and B free of s, where a comparison of an
  array free of s with s made the mask M (``jnp.arange(T) < s``): elementwise operations act
  on A and B alone, and a sum over the array is, for each value v of s, Σ_t M_t(v) A_t +
  Σ_t (1 − M_t(v)) B_t, two matrix–vector products (their infinities and NaNs counted apart,
  so that the sum is the one ``where`` gives);
* any other way: batched over the k values, as ``vmap`` would.

The result equals the batched evaluation up to the order of the sums' terms.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np
from jax.extend import core

__all__ = ["logdensities_at"]

#: Elementwise primitives: ``where(M, A, B)`` commutes with each.
ELEMENTWISE = frozenset(
    """abs acos acosh add and asin asinh atan atan2 atanh cbrt ceil clamp convert_element_type cos cosh
    digamma div eq erf erf_inv erfc exp exp2 expm1 floor ge gt igamma imag integer_pow is_finite le lgamma
    log log1p logistic lt max min mul ne neg nextafter not or pow real reduce_precision rem round rsqrt
    select_n sign sin sinh sqrt square sub tan tanh xor""".split()
)
#: Primitives that only move or copy entries: applied to a masked array's mask and branches alike.
STRUCTURAL = frozenset("broadcast_in_dim reshape squeeze transpose slice expand_dims rev".split())
COMPARISONS = frozenset("lt le gt ge eq ne".split())


@dataclass(frozen=True)
class Site:
    """The site's value at each of the k values, broadcast to ``shape``."""

    values: jax.Array  # (k,)
    shape: tuple
    dtype: np.dtype


@dataclass(frozen=True)
class Masked:
    """``where(mask, a, b)`` per value: ``mask`` of shape (k, *shape), ``a`` and ``b`` free of s."""

    mask: jax.Array
    a: jax.Array
    b: jax.Array


def _masked(mask, a, b) -> Masked:
    """:class:`Masked` with its branches at the mask's full shape."""
    shape = mask.shape[1:]
    return Masked(mask, jnp.broadcast_to(a, shape), jnp.broadcast_to(b, shape))


@dataclass(frozen=True)
class Patched:
    """A vector free of s but at ``index``, which holds the site (a block's values set into the
    full position): slices that leave ``index`` out are free of s.
    """

    base: jax.Array
    index: int
    site: Site


@dataclass(frozen=True)
class Batched:
    """An array depending on s in another way: its k values stacked on a leading axis."""

    value: jax.Array


TRACKED = (Site, Masked, Patched)


def _shape(x) -> tuple:
    if isinstance(x, Patched):
        return x.base.shape
    if isinstance(x, Site):
        return x.shape
    if isinstance(x, Masked):
        return x.mask.shape[1:]
    if isinstance(x, Batched):
        return x.value.shape[1:]
    return jnp.shape(x)


def _batched(x, k: int):
    """``x`` as a (k, ...) array (the generic form)."""
    if isinstance(x, Site):
        return jnp.broadcast_to(x.values.astype(x.dtype).reshape((k,) + (1,) * len(x.shape)), (k, *x.shape))
    if isinstance(x, Masked):
        return jnp.where(x.mask, x.a, x.b)
    if isinstance(x, Patched):
        return jax.vmap(lambda v: x.base.at[x.index].set(v.astype(x.base.dtype)))(x.site.values)
    return x.value


def _bind(eqn, args):
    """``eqn``'s primitive applied to ``args`` (free of s): now, where none is traced (the
    indices a block's values are set at), else in the program.
    """
    params = eqn.primitive.get_bind_params(eqn.params)  # a custom JVP's rules as functions
    if any(isinstance(a, jax.core.Tracer) for a in args):
        out = eqn.primitive.bind(*args, **params)
    else:
        with jax.ensure_compile_time_eval():
            out = eqn.primitive.bind(*args, **params)
    return out if eqn.primitive.multiple_results else [out]


def _concrete_index(indices) -> int | None:
    """The one index of a scatter's ``indices``, where it is known now."""
    try:
        flat = np.asarray(indices).reshape(-1)
    except Exception:  # traced: not known before the program runs
        return None
    return int(flat[0]) if flat.size == 1 else None


def _patched_parts(eqn, x: Patched):
    """The outputs of ``slice`` or ``split`` of ``x``, or None for another primitive."""
    if eqn.primitive.name == "slice" and eqn.params.get("strides") in (None, (1,)):
        ranges = [(eqn.params["start_indices"][0], eqn.params["limit_indices"][0])]
    elif eqn.primitive.name == "split" and eqn.params["axis"] == 0:
        ends = np.cumsum(eqn.params["sizes"])
        ranges = list(zip([0, *ends[:-1]], ends, strict=True))
    else:
        return None
    outs = []
    for start, stop in ranges:
        if not start <= x.index < stop:
            outs.append(x.base[start:stop])
        elif stop - start == 1:
            outs.append(Site(x.site.values, (1,), x.site.dtype))
        else:
            outs.append(Batched(_batched(x, x.site.values.shape[0])[:, start:stop]))
    return outs


def _vmapped(eqn, args, k: int):
    """``eqn`` batched over the k values of the arguments that depend on s."""
    free = [not isinstance(a, (*TRACKED, Batched)) for a in args]
    batched = [a if f else _batched(a, k) for a, f in zip(args, free, strict=True)]
    out = jax.vmap(lambda *xs: _bind(eqn, xs), in_axes=[None if f else 0 for f in free])(*batched)
    return [Batched(o) for o in out]


def _masked_sum(x: Masked):
    """Σ over every entry of ``where(mask, a, b)``, for each value: two matrix products of the
    mask with a's and b's finite parts and their +inf, −inf and NaN indicators, so that the
    sum is the one ``where`` gives.
    """
    k = x.mask.shape[0]
    mask = x.mask.reshape(k, -1).astype(jnp.result_type(x.a, x.b, jnp.float32))

    def parts(v):  # (entries, 4): finite part, +inf, -inf, NaN
        v = jnp.broadcast_to(v, x.mask.shape[1:]).reshape(-1).astype(mask.dtype)
        return jnp.stack([jnp.where(jnp.isfinite(v), v, 0), v == jnp.inf, v == -jnp.inf, jnp.isnan(v)], axis=1)

    total, plus, minus, nan = (mask @ parts(x.a) + (1 - mask) @ parts(x.b)).T
    total = jnp.where(plus > 0, jnp.inf, total)
    total = jnp.where(minus > 0, -jnp.inf, total)
    return jnp.where((nan > 0) | ((plus > 0) & (minus > 0)), jnp.nan, total)


def _eqn(eqn, args, k: int):
    """The outputs of one equation, each free of s or one of the forms above."""
    name = eqn.primitive.name
    tracked = [isinstance(a, (*TRACKED, Batched)) for a in args]
    if not any(tracked):
        return _bind(eqn, args)
    if name == "scatter" and isinstance(args[2], Site) and not any(tracked[:2]) and args[2].shape == (1,):
        index = _concrete_index(args[1])
        if index is not None and jnp.ndim(args[0]) == 1 and 0 <= index < jnp.shape(args[0])[0]:
            return [Patched(args[0], index, args[2])]
    if isinstance(args[0], Patched) and len(args) == 1:
        parts = _patched_parts(eqn, args[0])
        if parts is not None:
            return parts
    if name in ("pjit", "jit", "closed_call", "core_call", "remat", "checkpoint"):
        closed = eqn.params.get("jaxpr", eqn.params.get("call_jaxpr"))
        return _evaluate(closed, args, k)
    if name == "custom_jvp_call":
        return _evaluate(eqn.params["call_jaxpr"], args, k)
    if name == "custom_vjp_call":
        return _evaluate(eqn.params.get("call_jaxpr", eqn.params.get("fun_jaxpr")), args, k)
    if any(isinstance(a, Batched | Patched) for a in args):
        return _vmapped(eqn, args, k)
    sites = [a for a in args if isinstance(a, Site)]
    masks = {id(a.mask): a.mask for a in args if isinstance(a, Masked)}
    if name in STRUCTURAL and len(args) == 1:
        (x,) = args
        if isinstance(x, Site):
            shape = jax.eval_shape(lambda z: _bind(eqn, [z])[0], jax.ShapeDtypeStruct(x.shape, x.dtype)).shape
            return [Site(x.values, tuple(shape), x.dtype)]
        mask = jax.vmap(lambda m: _bind(eqn, [m])[0])(x.mask)
        return [_masked(mask, _bind(eqn, [x.a])[0], _bind(eqn, [x.b])[0])]
    if name in ELEMENTWISE and not eqn.primitive.multiple_results:
        free_scalars = all(isinstance(a, Site) or (not isinstance(a, TRACKED) and _shape(a) == ()) for a in args)
        if sites and free_scalars:  # a function of s: its k values
            at_values = [a.values.astype(a.dtype) if isinstance(a, Site) else jnp.full((k,), a) for a in args]
            values = _bind(eqn, at_values)[0]
            return [Site(values, jnp.broadcast_shapes(*(_shape(a) for a in args)), values.dtype)]
        if name in COMPARISONS and len(sites) == 1 and not masks and len(args) == 2:
            site = sites[0]

            def compare(v):
                return _bind(eqn, [jnp.full(site.shape, v, site.dtype) if a is site else a for a in args])[0]

            mask = jax.vmap(compare)(site.values)
            return [_masked(mask, jnp.bool_(True), jnp.bool_(False))]
        (mask,) = masks.values() if len(masks) == 1 else (None,)
        shape = mask.shape[1:] if mask is not None else None
        if not sites and mask is not None and all(jnp.broadcast_shapes(_shape(a), shape) == shape for a in args):
            a = _bind(eqn, [x.a if isinstance(x, Masked) else x for x in args])[0]
            b = _bind(eqn, [x.b if isinstance(x, Masked) else x for x in args])[0]
            return [_masked(mask, a, b)]
    if name == "reduce_sum" and isinstance(args[0], Masked) and len(eqn.params["axes"]) == len(_shape(args[0])):
        return [Batched(_masked_sum(args[0]))]
    return _vmapped(eqn, args, k)


def _evaluate(closed, args, k: int):
    """The outputs of the closed jaxpr ``closed`` at ``args``."""
    jaxpr = closed.jaxpr if hasattr(closed, "jaxpr") else closed
    consts = closed.consts if hasattr(closed, "consts") else []
    env = {}

    def read(v):
        return v.val if isinstance(v, core.Literal) else env[v]

    for var, value in zip(jaxpr.constvars, consts, strict=True):
        env[var] = value
    for var, value in zip(jaxpr.invars, args, strict=True):
        env[var] = value
    for eqn in jaxpr.eqns:
        outs = _eqn(eqn, [read(v) for v in eqn.invars], k)
        for var, value in zip(eqn.outvars, outs, strict=True):
            env[var] = value
    return [read(v) for v in jaxpr.outvars]


def logdensities_at(logdensity_fn: Callable, values: jax.Array, shape: tuple, dtype=None) -> jax.Array:
    """``logdensity_fn(full(shape, v))`` for each of the k ``values`` v: one site's conditional
    log densities, the site being the whole argument (a block of one site).

    Parameters
    ----------
    logdensity_fn : callable
        The log density of the site's block, of an array of ``shape``.
    values : jax.Array
        The k values, ``(k,)``.
    shape : tuple
        The block's event shape (one entry).
    dtype : dtype, optional
        The position's dtype (default: ``values``').
    """
    dtype = jnp.dtype(dtype or jnp.result_type(values))
    values = jnp.asarray(values, dtype)
    k = values.shape[0]
    closed = jax.make_jaxpr(logdensity_fn)(jax.ShapeDtypeStruct(shape, dtype))
    (out,) = _evaluate(closed, [Site(values, tuple(shape), dtype)], k)
    if isinstance(out, (*TRACKED, Batched)):
        return _batched(out, k).reshape(k)
    return jnp.broadcast_to(out, (k,))
