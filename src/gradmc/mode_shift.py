"""The mode shift: one move of a mixed position's discrete and continuous blocks together.

Blockwise (Gibbs) updates stick where the blocks are strongly coupled. In a mixture with
well-separated components the continuous parameters, given an assignment, sit at that
component, and the assignment, given them, stays: neither conditional move leaves the mode.
The mode shift moves both at once. With ``c(d)`` the mode of the continuous block's
conditional given the discrete values ``d`` and ``R(d)`` the lower Cholesky factor of the
negative Hessian there (both from :data:`NEWTON_STEPS` Newton steps from a fixed point, so
deterministic functions of ``d`` alone), a move

1. proposes ``d'`` from ``d`` by giving one discrete site, chosen uniformly (within a
   discrete block chosen uniformly), a uniformly chosen other value: a symmetric proposal;
2. carries the continuous entries' standardised value over:
   ``x' = c(d') + R(d')^{-T} R(d)^T (x − c(d))``;
3. accepts with probability min(1, p(x', d') / p(x, d) · det R(d) / det R(d')).

The reverse proposal (d' → d, chosen with the same probability) maps (x', d') back to
(x, d), and the map's Jacobian is det R(d) / det R(d'), so the Metropolis–Hastings ratio is
the one above and p is left invariant whatever ``c`` and ``R`` are: poor ones only lower the
acceptance, and ones that are not finite (a conditional that is not concave) are a rejection.
Where the conditionals are Gaussian the map carries each conditional onto the other, and the
move is accepted with probability min(1, p(d') / p(d)): a switch whose coefficient is spread
by its prior when out and pinned by the data when in (variable selection) moves as readily as
a mixture's assignment between components of equal spread. It is the move of a
reversible-jump sampler between models of equal dimension, with the map taken from the
conditionals' modes and curvatures.

A move costs two log-density evaluations and ``2 NEWTON_STEPS`` gradients and Hessians of
the continuous conditional (``d_x`` Hessian-vector products each), counted in
``num_grad_evals``: worth it where blocks stick, wasted where they do not.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from gradmc.discrete.fallback import shifted_site
from gradmc.spaces import DiscreteSpace

__all__ = ["NAME", "NEWTON_STEPS", "conditional_mode", "mode_shift_move", "grad_evals"]

#: The joint move's name, as a value of the sampler choice's ``"joint"`` key.
NAME = "mode-shift"

#: Newton steps from the fixed start to a conditional mode (one is exact for a Gaussian conditional).
NEWTON_STEPS = 5


def conditional_mode(logdensity_fn: Callable, position: jax.Array, continuous: np.ndarray):
    """``c(d)`` and ``R(d)``: :data:`NEWTON_STEPS` Newton steps on the continuous entries of
    ``position`` (indices ``continuous``) from zero, the discrete entries held at their values,
    and the lower Cholesky factor of the negative Hessian at the last step's start (NaN where
    the conditional is not concave there).

    Parameters
    ----------
    logdensity_fn : callable
        The joint log density of a flat position.
    position : jax.Array
        A flat position; only its discrete entries matter.
    continuous : ndarray
        Where the continuous entries sit.
    """

    def conditional(x):
        return logdensity_fn(position.at[continuous].set(x))

    def newton(_, carry):
        x, _ = carry
        hessian = jax.hessian(conditional)(x)
        return x - jnp.linalg.solve(hessian, jax.grad(conditional)(x)), hessian

    zero = jnp.zeros(continuous.shape, position.dtype)
    mode, hessian = jax.lax.fori_loop(0, NEWTON_STEPS, newton, (zero, jnp.zeros(2 * continuous.shape, position.dtype)))
    return mode, jnp.linalg.cholesky(-hessian)


def mode_shift_move(
    key: jax.Array,
    position: jax.Array,
    logdensity_fn: Callable,
    continuous: np.ndarray,
    discrete: Sequence[tuple[np.ndarray, DiscreteSpace]],
):
    """One mode-shift move (module doc) of a flat position.

    Returns ``(position, accepted, (c, R))``, the last the conditional's mode and factor at the
    returned position's discrete values (what :mod:`gradmc.whitening` moves the continuous
    block in); the move costs :func:`grad_evals` evaluations.

    Parameters
    ----------
    key : jax.Array
        Key of the move.
    position : jax.Array
        The current flat position.
    logdensity_fn : callable
        The joint log density of a flat position.
    continuous : ndarray
        Where the continuous entries sit.
    discrete : sequence of (ndarray, DiscreteSpace)
        Each discrete block: where its entries sit, and its space.
    """
    # the block, the site, the shift of its value and the test from one draw of four 32-bit
    # words: each random call compiles to its own rounds of the hash, so one call keeps the
    # move quick to compile. The remainders' bias (below K / 2^32 for K choices) cancels for
    # the block and the site, which the reverse move picks alike.
    words = jax.random.bits(key, (4,), jnp.uint32)

    def proposal_in(index: np.ndarray, space: DiscreteSpace):
        def propose(_):
            values = position[index].reshape(space.event_shape)
            num_sites = space.to_index(values).size
            site = (words[1] % num_sites).astype(jnp.int32)
            value_shift = 1 + (words[2] % (space.num_values - 1)).astype(jnp.int32)
            return position.at[index].set(jnp.ravel(shifted_site(values, site, value_shift, space)))

        return propose

    branches = [proposal_in(index, space) for index, space in discrete]
    moved = jax.lax.switch((words[0] % len(branches)).astype(jnp.int32), branches, None)
    mode, factor = conditional_mode(logdensity_fn, position, continuous)
    new_mode, new_factor = conditional_mode(logdensity_fn, moved, continuous)
    standardised = factor.T @ (position[continuous] - mode)  # N(0, I) where the conditional is Gaussian
    shifted = new_mode + jax.scipy.linalg.solve_triangular(new_factor.T, standardised, lower=False)
    log_jacobian = jnp.sum(jnp.log(jnp.diag(factor))) - jnp.sum(jnp.log(jnp.diag(new_factor)))
    proposed = moved.at[continuous].set(shifted)
    log_ratio = logdensity_fn(proposed) - logdensity_fn(position) + log_jacobian
    uniform = (words[3] >> 8).astype(jnp.float32) * 2.0**-24
    accepted = jnp.log(uniform) < jnp.where(jnp.isfinite(log_ratio), log_ratio, -jnp.inf)
    frame = jax.tree.map(lambda new, old: jnp.where(accepted, new, old), (new_mode, new_factor), (mode, factor))
    return jnp.where(accepted, proposed, position), accepted, frame


def grad_evals(num_continuous: int) -> int:
    """Log-density and gradient evaluations of one move with ``num_continuous`` continuous
    entries: two log densities, and per Newton step of each of the two modes a gradient and a
    Hessian (one Hessian-vector product per entry).

    Parameters
    ----------
    num_continuous : int
        The continuous block's size.
    """
    return 2 + 2 * NEWTON_STEPS * (1 + num_continuous)
