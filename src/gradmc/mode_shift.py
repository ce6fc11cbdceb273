"""The mode shift: one move of a mixed position's discrete and continuous blocks together.

Blockwise (Gibbs) updates stick where the blocks are strongly coupled. In a mixture with
well-separated components the continuous parameters, given an assignment, sit at that
component, and the assignment, given them, stays: neither conditional move leaves the mode.
The mode shift moves both at once. With ``c(d)`` the mode of the continuous block's
conditional given the discrete values ``d`` and ``R(d)`` the lower Cholesky factor of the
negative Hessian there (both from :data:`MOVE_NEWTON_STEPS` Newton steps from a fixed point, so
deterministic functions of ``d`` alone), a move

1. proposes ``d'`` from ``d`` in a discrete block chosen uniformly: by giving one site,
   chosen uniformly, a uniformly chosen other value; or, in a block of two or more labels
   (sites whose values name categories: a mixture's assignments), with probability
   :data:`RELABEL_SHARE`, by swapping two of its values, a uniformly chosen pair, at every
   site (the assignments of two components exchanged at once). Both proposals are
   symmetric, and a swap is its own reverse;
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

The continuous entries the move carries need not be all of them: entries it holds where they
are (``x_H``) only enter ``c`` and ``R`` as fixed arguments, ``c(d, x_H)`` and ``R(d, x_H)``,
and the argument above goes through for the carried entries given ``x_H``. The move carries
the entries in which the log density is Gaussian given the rest (:func:`gaussian_parts`: a
regression's coefficients, holding its noise scale), where there are such entries and others
that are not: given the held entries, the carried ones' conditionals are Gaussian and the move
is accepted with the ratio of the discrete values' probabilities given the held entries. The
joint conditional of coefficients and a scale need not have a mode (a response the
coefficients fit exactly), where a move of both would be refused every time.

A mixture whose chains settle with two components' labels exchanged (each component's
mean pulled to the other's data, against its prior) leaves that local mode by no change of
one assignment: every single move puts one datum in a component far from it. The swap
moves every assignment of the two components at once and carries their means with them.

Several moves may follow each other in a sweep, each from where the last left (each leaves
p invariant, so their composition does): ``"auto"`` sets how many in warm-up, so that a sweep
spends about as much on them as on the blocks' own moves, at most one per discrete site and
:data:`MOVES` (:func:`gradmc.composed.judge_joint`). A move costs two log-density evaluations and
``MOVE_NEWTON_STEPS`` gradients and Hessians of the carried conditional (one Hessian-vector product
per carried entry each) for the mode at its proposal; the mode at the current discrete values
is carried from one move to the next, computed once a sweep. All are counted in
``num_grad_evals``: worth it where blocks stick, wasted where they do not.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from gradmc.discrete.fallback import shifted_site
from gradmc.spaces import Categorical, DiscreteSpace

__all__ = [
    "NAME",
    "NEWTON_STEPS",
    "MOVE_NEWTON_STEPS",
    "MOVES",
    "RELABEL_SHARE",
    "LABELS",
    "conditional_mode",
    "gaussian_parts",
    "mode_shift_move",
    "mode_shift_moves",
    "most_moves",
    "grad_evals",
]

#: The joint move's name, as a value of the sampler choice's ``"joint"`` key.
NAME = "mode-shift"

#: Newton steps from the fixed start to a conditional mode (one is exact for a Gaussian conditional),
#: by default: a whitened block's own frame (:mod:`gradmc.whitening`) takes this many.
NEWTON_STEPS = 5
#: Newton steps of the mode shift's modes. Fewer steps leave a mode not quite reached, which only
#: lowers the acceptance (and, where the frame is shared, the whitening's fit). Measured on the
#: logistic variable selection of ``benchmarks/mixed.py`` (4 x (1,000 + 2,000), seeds 0-2): three
#: steps instead of five cut its sampling from 2.2 s to 1.75 s at about the same smallest ESS
#: (506-653 against 445-609), 1.1-1.8x the ESS per second.
MOVE_NEWTON_STEPS = 3

#: Moves per sweep at most: one per discrete site up to this many (:func:`most_moves`).
MOVES = 10

#: Share of the moves in a block of labels that swap two of its values at every site.
RELABEL_SHARE = 0.25

#: The key of a target's ``metadata`` that names the discrete parts whose values are labels
#: (categories without an order, such as a NumPyro ``Categorical`` site's), besides the parts on
#: a :class:`~gradmc.spaces.Categorical` space, which always are.
LABELS = "labels"

#: A second difference of the gradient below this share of its first difference is rounding,
#: not a departure from a Gaussian (:func:`gaussian_parts`).
GAUSSIAN_TOLERANCE = 1e-4


def conditional_mode(logdensity_fn: Callable, position: jax.Array, continuous: np.ndarray, steps: int = NEWTON_STEPS):
    """``c(d)`` and ``R(d)``: ``steps`` Newton steps on the continuous entries of
    ``position`` (indices ``continuous``) from zero, the discrete entries held at their values,
    and the lower Cholesky factor of the negative Hessian at the last step's start. Each step
    solves with that factor at its own start (half the time of a general solve on a 20-entry
    block), so both are NaN where the conditional is not concave at a step's start.

    Parameters
    ----------
    logdensity_fn : callable
        The joint log density of a flat position.
    position : jax.Array
        A flat position; only its discrete entries matter.
    continuous : ndarray
        Where the continuous entries sit.
    steps : int
        Newton steps (default :data:`NEWTON_STEPS`).
    """

    def conditional(x):
        return logdensity_fn(position.at[continuous].set(x))

    def newton(_, carry):
        x, _ = carry
        factor = jnp.linalg.cholesky(-jax.hessian(conditional)(x))
        return x + jax.scipy.linalg.cho_solve((factor, True), jax.grad(conditional)(x)), factor

    zero = jnp.zeros(continuous.shape, position.dtype)
    return jax.lax.fori_loop(0, steps, newton, (zero, jnp.zeros(2 * continuous.shape, position.dtype)))


def gaussian_parts(
    logdensity_fn: Callable, position: jax.Array, parts: Sequence[np.ndarray], key: jax.Array
) -> list[int]:
    """Which of the continuous ``parts`` (each an array of flat indices) the log density is
    Gaussian in, given the others: the largest set S of parts on which its gradient is affine.
    For each pair of parts P ≤ Q the probe takes a random direction u on their entries and the
    gradient's second difference ∇f(x + 2u) − 2∇f(x + u) + ∇f(x) at ``position``: rows of a
    part R where it is not zero say that a third derivative couples P, Q and R. Parts are
    dropped one at a time, the one in the most such triples within S first. Returns the kept
    parts' positions in ``parts``.

    Parameters
    ----------
    logdensity_fn : callable
        The joint log density of a flat position.
    position : jax.Array
        The flat position to probe at.
    parts : sequence of ndarray
        The continuous parts, each its entries' flat indices.
    key : jax.Array
        Key of the random directions.
    """
    n = len(parts)
    pairs = [(p, q) for p in range(n) for q in range(p, n)]
    masks = np.zeros((len(pairs), position.size), bool)
    for i, (p, q) in enumerate(pairs):
        masks[i, parts[p]] = masks[i, parts[q]] = True

    def differences():
        directions = jax.random.normal(key, masks.shape, position.dtype) * masks
        grad_fn = jax.vmap(jax.grad(logdensity_fn))
        base = grad_fn(position[None])[0]
        once, twice = grad_fn(position + directions), grad_fn(position + 2 * directions)
        return once - base, twice - 2 * once + base

    first, second = jax.device_get(jax.jit(differences)())
    third = np.zeros((n, n, n), bool)
    for i, (p, q) in enumerate(pairs):
        for r, part in enumerate(parts):
            # NaN counts as a change
            third[p, q, r] = third[q, p, r] = ~(
                np.linalg.norm(second[i, part]) <= GAUSSIAN_TOLERANCE * np.linalg.norm(first[i, part])
            )
    kept = list(range(n))
    while kept:
        within = third[np.ix_(kept, kept, kept)]
        if not within.any():
            break
        kept.pop(int(np.argmax(within.sum(axis=(1, 2)) + within.sum(axis=(0, 2)) + within.sum(axis=(0, 1)))))
    return kept


def mode_shift_move(
    key: jax.Array,
    position: jax.Array,
    logdensity_fn: Callable,
    continuous: np.ndarray,
    discrete: Sequence[tuple[np.ndarray, DiscreteSpace]],
    frame,
    labels: Sequence[bool] | None = None,
    only_read=False,
):
    """One mode-shift move (module doc) of a flat position.

    Returns ``(position, accepted, (c, R))``, the last the conditional's mode and factor at the
    returned position's discrete values (what :mod:`gradmc.whitening` moves the continuous
    block in). Where ``only_read`` (a flag, traced or not), nothing moves and ``(c, R)`` is
    read at ``position`` (``frame`` is then not used): :func:`mode_shift_moves` gets its first
    frame from the same code as its moves', so that a program holds one copy of the Newton
    steps, whose compilation takes seconds.

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
    frame : tuple
        ``(c, R)`` at ``position``'s discrete values (the last move's).
    labels : sequence of bool, optional
        For each discrete block, whether its values are labels, which a move may swap
        (default: the blocks on a :class:`~gradmc.spaces.Categorical` space).
    only_read : bool or jax.Array
        Make no move; read ``(c, R)`` at ``position``.
    """
    # the block, the site, the shift of its value, the test, whether to swap and the pair
    # swapped from one draw of six 32-bit words: each random call compiles to its own rounds
    # of the hash, so one call keeps the move quick to compile. The remainders' bias (below
    # K / 2^32 for K choices) cancels for every choice, which the reverse move makes alike.
    words = jax.random.bits(key, (6,), jnp.uint32)

    def proposal_in(index: np.ndarray, space: DiscreteSpace, swaps: bool):
        def propose(_):
            values = position[index].reshape(space.event_shape)
            indices = space.to_index(values)
            site = (words[1] % indices.size).astype(jnp.int32)
            value_shift = 1 + (words[2] % (space.num_values - 1)).astype(jnp.int32)
            moved = shifted_site(values, site, value_shift, space)
            if swaps and indices.size > 1:
                first = (words[5] % space.num_values).astype(jnp.int32)
                second = (first + value_shift) % space.num_values
                swapped = jnp.where(indices == first, second, jnp.where(indices == second, first, indices))
                relabel = words[4] < np.uint32(RELABEL_SHARE * 2.0**32)
                moved = jnp.where(relabel, space.from_index(swapped).astype(values.dtype), moved)
            return position.at[index].set(jnp.ravel(moved))

        return propose

    labels = [isinstance(space, Categorical) for _, space in discrete] if labels is None else labels
    branches = [proposal_in(index, space, swaps) for (index, space), swaps in zip(discrete, labels, strict=True)]
    moved = jax.lax.switch((words[0] % len(branches)).astype(jnp.int32), branches, None)
    moved = jnp.where(only_read, position, moved)
    new_mode, new_factor = conditional_mode(logdensity_fn, moved, continuous, MOVE_NEWTON_STEPS)

    def move(frame):
        mode, factor = frame
        standardised = factor.T @ (position[continuous] - mode)  # N(0, I) where the conditional is Gaussian
        shifted = new_mode + jax.scipy.linalg.solve_triangular(new_factor.T, standardised, lower=False)
        log_jacobian = jnp.sum(jnp.log(jnp.diag(factor))) - jnp.sum(jnp.log(jnp.diag(new_factor)))
        proposed = moved.at[continuous].set(shifted)
        log_ratio = logdensity_fn(proposed) - logdensity_fn(position) + log_jacobian
        uniform = (words[3] >> 8).astype(jnp.float32) * 2.0**-24
        accepted = jnp.log(uniform) < jnp.where(jnp.isfinite(log_ratio), log_ratio, -jnp.inf)
        frame = jax.tree.map(lambda new, old: jnp.where(accepted, new, old), (new_mode, new_factor), frame)
        return jnp.where(accepted, proposed, position), accepted, frame

    if only_read is False:
        return move(frame)
    # a read evaluates nothing more (the two log densities of the test are behind the branch)
    return jax.lax.cond(only_read, lambda frame: (position, jnp.bool_(False), (new_mode, new_factor)), move, frame)


def mode_shift_moves(
    key: jax.Array,
    position: jax.Array,
    logdensity_fn: Callable,
    continuous: np.ndarray,
    discrete: Sequence[tuple[np.ndarray, DiscreteSpace]],
    num_moves: int = MOVES,
    labels: Sequence[bool] | None = None,
):
    """``num_moves`` mode-shift moves in a row (module doc), the conditional's frame carried from
    each to the next. Returns ``(position, accepted moves, (c, R))`` as :func:`mode_shift_move`.

    Parameters
    ----------
    key : jax.Array
        Key of the moves.
    position : jax.Array
        The current flat position.
    logdensity_fn : callable
        The joint log density of a flat position.
    continuous : ndarray
        Where the carried continuous entries sit.
    discrete : sequence of (ndarray, DiscreteSpace)
        Each discrete block: where its entries sit, and its space.
    num_moves : int or jax.Array
        How many moves (a traced count runs as a loop of that length); none reads the frame at
        ``position``.
    labels : sequence of bool, optional
        As :func:`mode_shift_move`'s.
    """

    def one(i, carry):  # step 0 reads the frame at the start; step i makes move i - 1
        position, accepted, frame = carry
        position, moved, frame = mode_shift_move(
            jax.random.fold_in(key, i - 1), position, logdensity_fn, continuous, discrete, frame, labels, i == 0
        )
        return position, accepted + moved, frame

    unread = (jnp.zeros(continuous.shape, position.dtype), jnp.eye(continuous.size, dtype=position.dtype))
    return jax.lax.fori_loop(0, num_moves + 1, one, (position, jnp.int32(0), unread))


def most_moves(discrete: Sequence[tuple[np.ndarray, DiscreteSpace]]) -> int:
    """The most moves per sweep: one per discrete site, at most :data:`MOVES`.

    Parameters
    ----------
    discrete : sequence of (ndarray, DiscreteSpace)
        Each discrete block: where its entries sit, and its space.
    """
    return min(sum(space.d for _, space in discrete), MOVES)


def grad_evals(num_continuous: int, num_moves=MOVES):
    """Log-density and gradient evaluations of :func:`mode_shift_moves` carrying
    ``num_continuous`` entries: two log densities a move, and per Newton step of each mode (one
    a move, and the first move's current one) a gradient and a Hessian (one Hessian-vector
    product per entry).

    Parameters
    ----------
    num_continuous : int
        The carried entries.
    num_moves : int or jax.Array
        Moves per sweep.
    """
    return 2 * num_moves + (num_moves + 1) * MOVE_NEWTON_STEPS * (1 + num_continuous)
