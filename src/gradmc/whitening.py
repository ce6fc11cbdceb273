"""Whitening: the continuous block of a mixed position moved in coordinates fitted to each
conditional.

Given the discrete values ``d``, let ``c(d)`` be the mode of the continuous block's
conditional and ``R(d)`` the lower Cholesky factor of its negative Hessian there
(:func:`gradmc.mode_shift.conditional_mode`; both deterministic functions of ``d``). The
block's sampler moves ``u = R(d)^T (x − c(d))`` on the conditional of ``u``,
``p(c(d) + R(d)^{-T} u | d)``: the map is a bijection of ``x`` fixed by ``d`` alone, so a kernel
that leaves the conditional of ``u`` invariant leaves ``p(x | d)`` invariant, and the Gibbs
sweep stays exact. Its Jacobian is constant given ``d`` and cancels inside the block's moves.

Where the conditional's spread changes with ``d`` (a coefficient that the prior spreads while
its switch is off and the data pin while it is on), no one mass matrix fits every ``d``, and
NUTS takes long trajectories at a small step size; in ``u`` the conditional is close to
N(0, I) whatever ``d`` is. Where the Newton steps find no concave point (``R`` not finite),
the block moves in ``x`` itself for that ``d`` (``c = 0``, ``R = I``), again a function of ``d``
alone.

A sweep costs :data:`~gradmc.mode_shift.NEWTON_STEPS` more gradients and Hessians of the block
(:func:`grad_evals`), counted in ``num_grad_evals``; none in a sweep that starts with a mode
shift, which returns the frame at the discrete values it leaves.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from gradmc import mode_shift
from gradmc.base import BoundSampler, Target
from gradmc.discrete.fallback import shifted_site
from gradmc.spaces import Product

__all__ = [
    "WhitenedState",
    "conditional_frame",
    "usable",
    "whitened",
    "ConditionalChange",
    "conditional_change",
    "grad_evals",
]


class WhitenedState(NamedTuple):
    """A whitened block's state.

    Parameters
    ----------
    inner : Any
        The block sampler's own state, in the coordinates ``u`` of the last sweep's ``d``.
    position : jax.Array
        The block's position ``x`` (what the other blocks and the trace read).
    """

    inner: Any
    position: jax.Array


def conditional_frame(logdensity_fn: Callable, position: jax.Array, index: np.ndarray):
    """``(c(d), R(d))`` of the block at ``index`` given the discrete values in ``position``, or
    ``(0, I)`` where the conditional is not concave at a Newton step's start.

    Parameters
    ----------
    logdensity_fn : callable
        The joint log density of a flat position.
    position : jax.Array
        A flat position; only its other entries matter.
    index : ndarray
        Where the block's entries sit.
    """
    return usable(*mode_shift.conditional_mode(logdensity_fn, position, index))


def usable(mode: jax.Array, factor: jax.Array):
    """``(mode, factor)``, or ``(0, I)`` where either is not finite (a conditional that is not
    concave at a Newton step's start).

    Parameters
    ----------
    mode, factor : jax.Array
        A conditional's mode and the Cholesky factor of its negative Hessian.
    """
    ok = jnp.all(jnp.isfinite(factor)) & jnp.all(jnp.isfinite(mode))
    identity = jnp.eye(mode.size, dtype=mode.dtype)
    return jnp.where(ok, mode, 0.0), jnp.where(ok, factor, identity)


def whitened(bind: Callable[[Target], BoundSampler], view: Target, frame: Callable) -> BoundSampler:
    """The block sampler ``bind`` makes for a target, run on ``view`` (the block's conditional)
    in the coordinates ``u`` of ``frame() -> (c, R)`` (module doc).

    Parameters
    ----------
    bind : callable
        ``bind(target) -> BoundSampler``: the block's sampler bound to a target.
    view : Target
        The block's conditional given the other blocks.
    frame : callable
        ``frame() -> (c, R)``, computed when first needed.
    """
    shape = view.space.event_shape
    frame = functools.cache(frame)

    @functools.cache
    def inverse():  # R^{-T}, once a sweep: each log density of the moves then takes a product, not a solve
        mode, factor = frame()
        return jax.scipy.linalg.solve_triangular(factor.T, jnp.eye(mode.size, dtype=mode.dtype), lower=False)

    def to_x(u):
        mode, _ = frame()
        return jnp.reshape(mode + inverse() @ jnp.ravel(u), shape)

    def to_u(x):
        mode, factor = frame()
        return jnp.reshape(factor.T @ (jnp.ravel(x) - mode), shape)

    inner = bind(Target(f"{view.name} (whitened)", lambda u: view.logdensity_fn(to_x(u)), view.space))

    def moved(result):
        state, stats = result
        return WhitenedState(state, to_x(inner.position(state))), stats

    def finalize(state):
        kernel_state, params = inner.finalize(state.inner)
        return WhitenedState(kernel_state, state.position), params

    return BoundSampler(
        inner.name,
        lambda key, start: WhitenedState(inner.init(key, to_u(start)), start),
        lambda key, state, t: moved(inner.warmup_step(key, state.inner, t)),
        finalize,
        lambda key, state, params: moved(inner.step(key, state.inner, params)),
        lambda state: state.position,
        adapts_in_warmup=inner.adapts_in_warmup,
        refresh=None
        if inner.refresh is None
        else lambda key, state, x: WhitenedState(inner.refresh(key, state.inner, to_u(x)), x),
        freeze=None if inner.freeze is None else lambda state: state._replace(inner=inner.freeze(state.inner)),
    )


class ConditionalChange(NamedTuple):
    """How much the continuous block's conditional changes when one discrete site moves
    (:func:`conditional_change`).

    Parameters
    ----------
    spread : float
        The largest factor by which a coordinate's conditional standard deviation changes.
    shift : float
        The largest distance the conditional's mode moves, in the conditional's own
        standard deviations: ``‖R(d)^T (c(d') − c(d))‖`` (infinite where a conditional is not
        concave at a Newton step's start).
    """

    spread: float
    shift: float


#: :func:`conditional_change` reads the mode's shift at this many sites of each discrete part
#: at most (evenly spaced over its sites), moved one at a time: a switch whose coefficient the
#: data do not pin says nothing of another's that they do.
PROBED_SITES = 32


def _probed_sites(space: Product) -> list[tuple[str, int]]:
    """The discrete sites :func:`conditional_change` moves, as ``(part, site)``: up to
    :data:`PROBED_SITES` of each discrete part (of each group of one-site parts on equal spaces,
    :meth:`~gradmc.spaces.Product.discrete_groups`), evenly spaced, the part's first site first.
    """
    probed = []
    for group in space.discrete_groups():
        sites = [(name, site) for name in group for site in range(space.parts[name].d)]
        spaced = np.linspace(0, len(sites) - 1, min(len(sites), PROBED_SITES)).round().astype(int)
        probed += [sites[i] for i in np.unique(spaced)]
    return probed


def conditional_change(target: Target, index: np.ndarray, start: jax.Array | None = None) -> ConditionalChange:
    """How the conditional of the block at ``index`` changes when one discrete site moves, at
    the target's start (one compiled program): its spread when the first site of each discrete
    part of its :class:`~gradmc.spaces.Product` space moves to its next value (what decides
    the whitening, measured so on the benchmark models), its mode's shift when each of up to
    :data:`PROBED_SITES` sites of each part does.

    Parameters
    ----------
    target : Target
        A target on a Product space.
    index : ndarray
        Where the continuous block's entries sit.
    start : jax.Array, optional
        The start (default: ``target.draw_initial`` with key 0).
    """
    space = target.space
    probed = _probed_sites(space)
    firsts = {(group[0], 0) for group in space.discrete_groups()}  # where the spread is read
    first = [0] + [i + 1 for i, site in enumerate(probed) if site in firsts]
    sites_of: dict[str, list[int]] = {}
    for name, site in probed:  # in the order of probed
        sites_of.setdefault(name, []).append(site)

    def moved(start, name, site):
        part, where = space.parts[name], space.slices[name]
        values = jnp.reshape(start[where], part.event_shape)
        return start.at[where].set(jnp.ravel(shifted_site(values, site, 1, part)))

    @jax.jit
    def changes(start):
        points = [start[None]] + [
            jax.vmap(functools.partial(moved, start, name))(jnp.asarray(sites)) for name, sites in sites_of.items()
        ]
        # one copy of the Newton steps to compile
        modes, factors = jax.vmap(lambda x: mode_shift.conditional_mode(target.logdensity_fn, x, index))(
            jnp.concatenate(points)
        )
        identity = jnp.eye(index.size, dtype=factors.dtype)
        inverse = jax.vmap(lambda factor: jax.scipy.linalg.solve_triangular(factor, identity, lower=True))(
            factors[np.array(first)]
        )
        spread = jnp.sqrt(jnp.sum(inverse**2, axis=1))  # the conditional's standard deviations, from (R R^T)^-1
        shift = jnp.linalg.norm((modes[1:] - modes[0]) @ factors[0], axis=1)
        return jnp.max(jnp.abs(jnp.log(spread[1:] / spread[0])), axis=1), shift

    start = target.draw_initial(jax.random.key(0)) if start is None else start
    spread, shift = (np.asarray(a) for a in changes(start))
    spread = spread[np.isfinite(spread)]
    return ConditionalChange(
        float(np.exp(spread.max())) if spread.size else 1.0,
        float(np.max(np.where(np.isfinite(shift), shift, np.inf), initial=0.0)),
    )


def grad_evals(num_continuous: int) -> int:
    """Gradient and Hessian-vector-product evaluations of one sweep's frame for a block of
    ``num_continuous`` entries: a gradient and a Hessian per Newton step.

    Parameters
    ----------
    num_continuous : int
        The block's size.
    """
    return mode_shift.NEWTON_STEPS * (1 + num_continuous)
