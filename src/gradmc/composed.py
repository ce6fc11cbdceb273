"""One sampler per block of a mixed position: a Gibbs composition of gradmc's samplers.

A target on a :class:`~gradmc.spaces.Product` space (continuous parameters beside discrete
latent variables) is split into blocks: a group of parts with one space (all the real parts
together, by default, and each discrete part on its own, but for one-site parts on equal
spaces, which share a block: :meth:`~gradmc.spaces.Product.discrete_groups`). Each step moves every block in
turn with its own sampler, on the target's conditional given the other blocks' current
values (a deterministic-scan Gibbs sweep, whose kernel leaves the joint target invariant
because each block's kernel leaves its conditional invariant). Before a block moves, the
log density and gradient its state caches are computed again (``BoundSampler.refresh``),
since the other blocks have moved since it last did: one log-density+gradient evaluation
per block and step, counted in ``num_grad_evals``.

Warm-up tunes every block while the others move (NUTS's step size and mass matrix, a
discrete sampler's step size, learned preconditioner or number of flips); the kept draws
use the frozen kernels. ``trace.params`` holds each block's learned parameters under its
label (``"beta"``, or ``"mu+sigma"`` for a group).

Where a discrete block is drawn whole from its exact conditional (``"linear-gibbs"`` on a log
density linear in it, ``"plate-gibbs"`` on a plate of sites independent given the rest), the
continuous block's moves sum it out (:func:`summed_out`), and its draw follows them directly: a
collapsed Gibbs sweep, in which the continuous block moves on its marginal, free of the ridge
that fixing the discrete values puts it on (``{"collapse": "off"}`` keeps it in).

Where the blocks hold each other in place, a joint move of every block before the sweep
(:mod:`gradmc.mode_shift`) moves them together: asked for in every sweep
(``{"joint": "mode-shift"}``), or, by ``"auto"``, tried in the third quarter of the warm-up
and kept where it changes the discrete block often enough beside the blocks' own moves
(``trace.params["joint"]``).

:func:`auto_sampler` is what ``"auto"`` picks for a block's space (docs/mixed-models.md
says why).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from gradmc import mode_shift, switch_pairs, whitening
from gradmc.base import COLLAPSE, INDEX_PARTS, JOINT, WHITEN, BoundSampler, Sampler, Shared, Target, step_stats
from gradmc.chains import pool_chains
from gradmc.discrete import ffbs
from gradmc.discrete.plate_gibbs import SITE_TERMS
from gradmc.registry import sampler as registered_sampler
from gradmc.registry import sampler_entry
from gradmc.spaces import Binary, Categorical, Count, Ordinal, Product, Real, Space, Spin

__all__ = ["AUTO", "JOINT", "auto_sampler", "Block", "blocks", "composed_sampler"]

AUTO = "auto"

#: Kernel steps a discrete block takes per sweep unless told otherwise: a discrete step costs
#: one or two log-density evaluations where a NUTS step costs tens, and on a three-component
#: mixture of 100 data (benchmarks/mixed.py) 1, 5, 10 and 20 NCG steps per sweep gave the
#: component means a smallest ESS of 126, 572, 924 and 893 in 4 x 2,000 sweeps, sampling in
#: 1.0, 1.4, 1.2 and 1.7 s.
DISCRETE_STEPS = 10

# what "auto" runs on a block of each kind of space
_AUTO_CHOICE = {
    Real: "nuts",
    Binary: "ncg",
    Spin: "ncg",
    Categorical: "ncg",
    Ordinal: "ordinal-ncg",
    Count: "ordinal-ncg",
}
#: "auto" on the real block of a target with discrete parts: HMC of jittered length, NUTS's
#: trajectory length learned in warm-up without NUTS's tree in the kept sweeps. Measured at 4 x
#: (1,000 + 2,000) sweeps, seeds 0 and 1 (benchmarks/mixed.py's models, their gradmc forms),
#: against NUTS, smallest ESS per second of sampling: spike and slab 13.6-14.2k vs 8.3-11.9k,
#: change point 19.7-19.9k vs 13.4-16.8k, mixture 2.1-2.3k vs 0.85-0.90k, HMM 370-460 vs
#: 300-390, logistic selection 210-260 vs 210-220, the 24-D mixture 6.4-7.3k vs 7.3-8.7k.
MIXED_REAL_CHOICE = "jittered-hmc"
FLAT_CHOICE = "gibbs"  # "auto" on a discrete block without a gradient (PartShapes.flat)
#: A block's sampler named without options takes these: single-site Gibbs sweeps the block's
#: sites in turn (each once per sweep), where its own default picks a random site each step.
BLOCK_OPTIONS = {FLAT_CHOICE: {"scan": "systematic"}}
PLATE_CHOICE = "plate-gibbs"  # "auto" where the target gives the block's site terms (a plate of independent sites)
CHAIN_CHOICE = "ffbs"  # "auto" on categorical sites coupled in a chain (chain_parts): an HMM's states
LINEAR_CHOICE = "linear-gibbs"  # "auto" on sites the log density is linear in (PartShapes.linear)
#: Samplers whose one step draws the whole block from its conditional (exactly, or in the
#: chain's case exactly when the log density is quadratic in it, and from the gradient exactly
#: when it is linear in it): one step per sweep.
WHOLE_BLOCK_DRAWS = frozenset({PLATE_CHOICE, CHAIN_CHOICE, LINEAR_CHOICE})

#: The values of the choice's ``"joint"`` key: the mode shift in every sweep, in the sweeps after
#: warm-up found it worth its cost (``"auto"``, the default), or never.
NO_JOINT = "none"
JOINT_CHOICES = (mode_shift.NAME, AUTO, NO_JOINT)
#: ``"auto"``'s mode shift: tried in every judged sweep W/2 .. 3W/4 − 1 and kept for the last
#: quarter of the warm-up and the kept draws where the discrete entries its moves changed were
#: at least :data:`JOINT_SHARE` of those the blocks' own moves changed in those sweeps
#: (:func:`judge_joint`): blocks that hold each other in place, as a mixture's far-apart
#: components do, or switches whose coefficients the data pin when in and the prior spreads
#: when out (variable selection). The judged sweeps follow those of a discrete block's own
#: fallback move (W/4 .. W/2 − 1), so a block that its fallback moves is left to it. Where it is
#: not kept, the trial's moves may still have taken a chain to another mode, both ways: out of
#: a start with a mixture's labels exchanged, or into an HMM's states with two labels
#: exchanged, which the blocks' own moves do not leave. So each chain then keeps, of its place
#: before the trial and its place after it, the one whose mean log density over
#: :func:`settle_sweeps` sweeps was higher (:func:`trial_levels`).
JUDGED = "judged"
#: The key of ``trace.params`` holding the mode shift's moves per sweep where ``"auto"`` kept it
#: (:func:`judge_joint`); asked for in every sweep, it makes one.
JOINT_MOVES = "joint_moves"
#: A joint move costs about a sweep; kept where the discrete entries its moves change are at
#: least this share of those the blocks' own moves change. Measured (one run each,
#: 4 × (500 + 1,000), one move a sweep): the logistic
#: selection 0.17 (kept: its min ESS per second of sampling is 1.6x what it is without),
#: MixedHMC's mixture unbounded (its blocks do not move alone), the spike and slab 0.056, the
#: change point 0.058, the three-component mixture 0.005 and the HMM 0.002 (each 0.4-0.65x
#: with it in every sweep); a 60-day two-regime HMM written one site per day 2.8 (its
#: exchanges of the regimes flip every state; counted as one change each, it was left out and
#: a chain stayed in the second mode).
JOINT_SHARE = 0.1
#: ``"auto"`` tries no mode shift where moving any one discrete site it probes moves the
#: continuous block's conditional mode by at most :data:`HOLD_SHIFT` of its standard deviations,
#: moving the first site of each part changes its spread by at most a factor :data:`HOLD_SPREAD`
#: (:func:`gradmc.whitening.conditional_change`, at the start), and no discrete block holds
#: labels the moves could swap: its proposal then carries the continuous block about where it
#: was, and its move is the discrete block's own.
#: Nor where every discrete block is summed out of the continuous moves (``"collapse"``) and none
#: holds labels: those moves then see the blocks' marginal, which no block's values hold in place.
#: On the spike and slab of benchmarks/mixed.py the trial was never kept, nor with predictors in
#: pairs correlated 0.96 (min ESS 175 with it, 185 without), and it cost a first run 2-3 s; written
#: for NumPyro, whose switches select prior scales (:func:`_selectors`), 0.8 s.
#: The trial makes the composed program larger; on the change point of benchmarks/mixed.py
#: (shift 0.13, spread 1.0; the trial not kept) a first run took 9.3-11.9 s with it and 6.7-8.2 s
#: without. Measured at the start of the other models (each as written for gradmc and for
#: NumPyro): MixedHMC's mixture 7.7 (its z moves x from one component to another), the spike and
#: slab 11-13, the logistic selection 0.15-4.4 beside a spread of 30-43, the three-component
#: mixture 1.5-2.1 and the HMM 0.8-1.0 (both labels), the sparse regression not concave at the
#: start (its noise scale).
HOLD_SHIFT = 0.5
HOLD_SPREAD = 1.5
#: ``"auto"`` has the mode shift ready, and whitens, only where the continuous block has at most
#: this many entries: each of its Newton steps takes a Hessian-vector product per entry.
AUTO_JOINT_MAX_CONTINUOUS = 64
#: The values of the choice's ``"whiten"`` key (:mod:`gradmc.whitening`): where one discrete
#: site changes the continuous block's conditional spread by more than :data:`WHITEN_SPREAD`
#: (``"auto"``, the default), always, or never.
WHITEN_CHOICES = (AUTO, "on", "off")
#: The values of the choice's ``"collapse"`` key: the continuous block moves with the one discrete
#: block drawn whole from its exact conditional (``"linear-gibbs"``, ``"plate-gibbs"``) summed out
#: (``"auto"``, the default), or with none. Measured on the spike and slab of benchmarks/mixed.py
#: (4 × (1,000 + 2,000), seeds 0, 1 and 2): the switches' smallest ESS was 7,100, 6,240 and 4,000
#: with them summed out of the coefficients' NUTS moves, 2,680, 2,850 and 2,590 without.
COLLAPSE_CHOICES = (AUTO, "off")
#: The values of the choice's ``"pairs"`` key (:mod:`gradmc.switch_pairs`): each 0/1 part flipped
#: with the continuous part whose curvature it switches, where the model has one (``"auto"``, the
#: default), or none.
PAIRS_CHOICES = (AUTO, "off")
#: ``"auto"`` sums a plate block out only where its sites have at most this many values: each log
#: density of the continuous block then evaluates the site terms at every value. On an N-mixture
#: (50 counts of 61 values, 4 × (500 + 1,000)) summing them out raised the rates' smallest ESS
#: from 54 to 738 but took 14.7 s of sampling where 0.55 s did before, and 42 s end to end;
#: NumPyro's enumeration (``infer={"enumerate": "parallel"}``) sums them in 1.7 s.
COLLAPSE_MAX_VALUES = 8
#: ``"auto"`` whitens the continuous block where moving the first site of a discrete part changes a
#: coordinate's conditional standard deviation by more than this factor
#: (:func:`gradmc.whitening.conditional_change`). Measured at the start of each model of
#: benchmarks/mixed.py: the logistic selection 42 (30 as a NumPyro model; whitened, its min ESS
#: per second of sampling was 3.7x), the spike and slab 1.4, the change point, the mixtures and
#: the HMM 1.0-1.1 (whitened, all but the HMM, which was not tried, ran at 0.55-0.75x).
WHITEN_SPREAD = 4.0


class JointWarmup(NamedTuple):
    """The warm-up state of a composed sampler whose mode shift is judged in warm-up.

    Parameters
    ----------
    blocks : tuple
        Each block's warm-up state.
    judged : Shared
        ``(changed, joint_changed, evals, on, moves)``: the discrete entries the blocks' own
        moves changed, those the joint moves changed and the blocks' evaluations, each a
        mean over chains summed over the judged sweeps; whether the mode shift is on, and its
        moves per sweep; the same for every chain.
    before_trial : jax.Array
        The chain's flat position when the judged sweeps began.
    levels : jax.Array
        The chain's log density summed over the sweeps just before and just after them
        (:func:`trial_levels`).
    """

    blocks: tuple
    judged: Shared
    before_trial: jax.Array
    levels: jax.Array


class PairedWarmup(NamedTuple):
    """The warm-up state of a composed sampler with switch pairs (:mod:`gradmc.switch_pairs`).

    Parameters
    ----------
    blocks : tuple or JointWarmup
        The warm-up state without them.
    moments : Shared
        The :class:`~gradmc.switch_pairs.PairMoments` learned so far.
    """

    blocks: tuple | JointWarmup
    moments: Shared


def settle_sweeps(judge_from: int, judge_to: int) -> int:
    """The sweeps over which a chain's log density is averaged just before and just after the
    mode shift's trial (sweeps ``judge_from`` .. ``judge_to`` − 1): a quarter of the trial.
    """
    return max((judge_to - judge_from) // 4, 1)


def trial_levels(levels, logdensity, t, judge_from: int, judge_to: int):
    """``(before, after)``: the chain's log density after warm-up sweep ``t`` added to the sum
    over the :func:`settle_sweeps` sweeps before the trial or to that over those after it. After
    the last of those, a chain whose ``after`` is below ``before`` goes back to where it was when
    the trial began.
    """
    settle = settle_sweeps(judge_from, judge_to)
    before = (t >= judge_from - settle) & (t < judge_from)
    after = (t >= judge_to) & (t < judge_to + settle)
    return levels + jnp.stack([jnp.where(before, logdensity, 0.0), jnp.where(after, logdensity, 0.0)])


def judge_joint(
    judged: Shared, changed, joint_changed, evals, t, judge_from: int, judge_to: int, move_evals: int, max_moves: int
) -> Shared:
    """``judged`` (:class:`JointWarmup`) after warm-up sweep ``t``, whose blocks' own moves
    changed ``changed`` discrete entries at a cost of ``evals`` evaluations, and whose joint
    move changed ``joint_changed``: summed over sweeps ``judge_from`` .. ``judge_to`` − 1. At the
    last of them the mode shift is kept on where it moved at all and changed at least
    :data:`JOINT_SHARE` times as many entries as the blocks did (a swap of two labels counts
    every site it relabels, a shift of one site its entries), with as many moves per sweep
    (at least one, at most ``max_moves``) as cost, at ``move_evals`` each, what the blocks'
    moves cost: a sweep spends as much on joint moves as on the blocks' own (none where the
    mode shift is off).
    """
    total_changed, total_joint, total_evals, on, moves = judged.value
    in_window = (t >= judge_from) & (t < judge_to)
    total_changed = total_changed + jnp.where(in_window, pool_chains(changed.astype(jnp.float32)), 0.0)
    total_joint = total_joint + jnp.where(in_window, pool_chains(joint_changed.astype(jnp.float32)), 0.0)
    total_evals = total_evals + jnp.where(in_window, pool_chains(evals.astype(jnp.float32)), 0.0)
    worth = (total_joint > 0) & (total_joint >= JOINT_SHARE * total_changed)
    last = t == judge_to - 1
    affordable = jnp.floor(total_evals / max(judge_to - judge_from, 1) / move_evals).astype(jnp.int32)
    moves = jnp.where(last, jnp.where(worth, jnp.clip(affordable, 1, max_moves), 0), moves)
    return Shared((total_changed, total_joint, total_evals, on | (last & worth), moves))


def auto_sampler(space: Space) -> str:
    """The sampler ``"auto"`` runs on a block (or a whole target) on ``space``: NUTS on real
    blocks (within a mixed target, :func:`blocks` gives them :data:`MIXED_REAL_CHOICE`), NCG on
    binary, spin and categorical ones, ordinal-NCG on ordinal ones. Where the
    log density is linear in a block's 0/1 or one-hot entries given the rest (a mixture's
    assignments, George & McCulloch's spike and slab), NCG's first-order proposal is the
    sites' exact conditionals, all moved at once; docs/mixed-models.md has the runs behind
    these choices. Within a mixed target (:func:`blocks`), a plate of sites independent given
    the rest gets ``"plate-gibbs"``, a block without a gradient single-site ``"gibbs"``,
    categorical sites coupled in a chain ``"ffbs"``, and a block in which the log density is
    not quadratic ``"gibbs"`` again.

    Parameters
    ----------
    space : Space
        The block's space.
    """
    if isinstance(space, Product):
        raise TypeError("a Product space is split into blocks first (gradmc.composed.blocks)")
    return _AUTO_CHOICE[type(space)]


class Block(NamedTuple):
    """Parts of a :class:`~gradmc.spaces.Product` moved together by one sampler.

    Parameters
    ----------
    label : str
        The key of the block's learned parameters (:func:`block_label`).
    parts : tuple of str
        The parts.
    space : Space
        Their joint space (the parts' entries one after the other).
    index : ndarray
        Where the block's entries sit in the flat position.
    sampler : Sampler
        What moves it.
    steps : int
        Kernel steps per sweep.
    """

    label: str
    parts: tuple[str, ...]
    space: Space
    index: np.ndarray
    sampler: Sampler
    steps: int


def _joint_space(product: Product, parts: tuple[str, ...]) -> Space:
    """One space for ``parts`` moved together: their common kind, with the entries summed."""
    spaces = [product.parts[name] for name in parts]
    first = spaces[0]
    if len(spaces) == 1:
        return first
    if all(isinstance(s, Real) for s in spaces):
        return Real(sum(s.dim for s in spaces))
    same_values = all(
        type(s) is type(first) and s.is_discrete and np.array_equal(s.values, first.values) for s in spaces
    )
    if not same_values:
        raise ValueError(
            f"the parts {', '.join(parts)} are moved by one sampler but lie on different spaces "
            f"({', '.join(map(str, spaces))}); group parts of one kind with the same values"
        )
    if isinstance(first, Categorical):
        return Categorical(first.k, sum(s.d for s in spaces))
    if isinstance(first, Count):
        return Count(sum(s.d for s in spaces), first.high, first.low)
    if isinstance(first, Ordinal):
        return Ordinal(first.values, sum(s.d for s in spaces))
    return type(first)(sum(s.d for s in spaces))


#: A block of more parts than this is labelled by its first and last (``"s1..s119"``).
LABEL_MAX_PARTS = 3


def block_label(parts: tuple[str, ...]) -> str:
    """A block's label: its parts' names joined by ``+``, or, for more than :data:`LABEL_MAX_PARTS`
    (a model's sites one per time step), its first and last part's joined by ``..``.
    """
    return "+".join(parts) if len(parts) <= LABEL_MAX_PARTS else f"{parts[0]}..{parts[-1]}"


def part_index(space: Product, parts: tuple[str, ...]) -> np.ndarray:
    """Where ``parts`` sit in ``space``'s flat positions, one after the other."""
    return np.concatenate([np.arange(space.slices[name].start, space.slices[name].stop) for name in parts])


def _default_steps(name: str, space: Space) -> int:
    """Kernel steps per sweep of a block's sampler unless told: one on a real block or for a
    draw of the whole block; a sweep of its sites for single-site Gibbs; else :data:`DISCRETE_STEPS`.
    """
    if not space.is_discrete or name in WHOLE_BLOCK_DRAWS:
        return 1
    return space.d if name == FLAT_CHOICE else DISCRETE_STEPS


def _as_block_sampler(choice, space: Space, label: str) -> tuple[Sampler, int]:
    """The :class:`Sampler` of a block and its steps per sweep: ``choice`` (a registered name,
    ``"auto"`` or a ``gradmc.sampler(...)``, or a pair of one and the steps), checked to
    sample ``space``.
    """
    steps = None
    if isinstance(choice, tuple) and not isinstance(choice, Sampler):
        if len(choice) != 2 or isinstance(choice[1], bool) or not isinstance(choice[1], int) or choice[1] < 1:
            raise ValueError(
                f"the sampler of {label!r} as a pair must be (sampler, steps per sweep >= 1), got {choice!r}"
            )
        choice, steps = choice
    if isinstance(choice, str):
        name = auto_sampler(space) if choice == AUTO else choice
        choice = registered_sampler(name, **BLOCK_OPTIONS.get(name, {}))
    if not isinstance(choice, Sampler):
        raise TypeError(
            f"the sampler of {label!r} must be a name or a gradmc.sampler(...), got {type(choice).__name__}"
        )
    if steps is None:
        steps = _default_steps(choice.name, space)
    kind = "discrete" if space.is_discrete else "continuous"
    entry_kind = sampler_entry(choice.name).kind
    if entry_kind not in ("any", kind):
        raise ValueError(
            f"sampler {choice.name!r} samples {entry_kind} spaces; {label!r} lies on {space}: give it a {kind} "
            f"sampler (such as {auto_sampler(space)!r}) or 'auto', which picks one from the model"
        )
    return choice, steps


def _probe_start(target: Target, start: jax.Array | None) -> jax.Array:
    """Where the structural probes read the log density: ``start``, else the target's start
    with key 0 (a NumPyro model's runs the model from its prior, which takes a while: a
    caller that probes several times draws it once).
    """
    return target.draw_initial(jax.random.key(0)) if start is None else start


class PartShapes(NamedTuple):
    """How the log density depends on each discrete part of a Product space (:func:`part_shapes`)."""

    flat: frozenset[str]
    """Parts without a gradient: the model only indexes arrays by them or compares with them,
    as ``locs[z]`` or ``t < s`` do, and a first-order proposal learns nothing there."""
    curved: frozenset[str]
    """Binary, spin and categorical parts in which the log density is not quadratic, or whose
    changes its gradient misjudges (``compared``)."""
    linear: frozenset[str]
    """Binary, spin and categorical parts in which it is linear, with a gradient."""
    compared: frozenset[str] = frozenset()
    """The curved parts whose Hessian-vector products vanish but whose changes the gradient
    mispredicts: the model compares with their sites (``jnp.where(z == 1, a, b)``) besides
    terms linear in them (a prior's), which alone the gradient sees."""


#: A part's Hessian-vector products at two points that differ by more than this share of their
#: size tell a log density that is not quadratic in the part.
CURVATURE_TOLERANCE = 1e-3

#: A part's Hessian-vector products below this share of its gradient tell a log density that is
#: linear in the part.
LINEAR_TOLERANCE = 1e-6

#: A linear part's moves change the log density by what its gradient predicts, to within this
#: share of the log density's size at the two points, or of 1 if smaller (float32 rounding).
LINEAR_CHANGE_TOLERANCE = 1e-5


def part_shapes(target: Target, start: jax.Array | None = None) -> PartShapes:
    """Read how ``target``'s log density depends on each discrete part of its Product space,
    from one compiled probe at two points: the start, and the start with its continuous
    entries moved by a standard normal draw (coefficients started at zero hide how the log
    density depends on the switches that multiply them). One-site parts on equal spaces are
    read together (:meth:`~gradmc.spaces.Product.discrete_groups`), as one part, and each of
    them gets the group's shape. Parts the target names in ``metadata["index_parts"]`` (taken
    as integers) are flat without a probe.

    At each point the probe takes the gradient and, for each binary, spin and categorical
    part, a Hessian-vector product along a random direction of the part, there and where
    every site of the part takes its next value. A part is *flat* where its gradient is zero
    at both points; *curved* where the two products differ at either point (a logistic
    likelihood of ``X @ (gamma * beta)``: a first-order proposal misjudges the changes of the
    log density in a way no step size mends, and single-site Gibbs, which evaluates them, is
    the safer choice); *linear* where the products vanish beside the gradient at both (a
    mixture's one-hot assignments: the sites are independent given the rest, with conditionals
    read from the gradient, :mod:`gradmc.discrete.linear_gibbs`), and where, besides, moving
    every site of the part, its first site alone and a random half of its sites to their next
    values changes the log density by what the gradient predicts. A part whose products vanish
    but whose moves the gradient mispredicts is curved: the model compares with its sites
    (``jnp.where(z == 1, a, b)``) besides terms linear in them (a prior's), so the gradient sees
    only the latter. A point where the log density is not finite is left out. Ordinal parts
    are left to ordinal-NCG, whose window keeps its moves local where a first-order view holds.

    Parameters
    ----------
    target : Target
        A target on a :class:`~gradmc.spaces.Product` space.
    start : jax.Array, optional
        Its start (default: ``target.draw_initial`` with key 0).
    """
    space = target.space
    start = _probe_start(target, start)
    continuous = np.ones(start.shape, bool)
    for name in space.discrete_parts:
        continuous[space.slices[name]] = False
    indices = target.metadata.get(INDEX_PARTS, frozenset())
    groups = [group for group in space.discrete_groups() if not set(group) <= indices]
    if not groups:  # every discrete part an index: no gradient, nothing to read
        return PartShapes(frozenset(indices), frozenset(), frozenset())
    where = {group: part_index(space, group) for group in groups}
    probed = [group for group in groups if not isinstance(space.parts[group[0]], Ordinal)]
    grad_fn = jax.grad(target.logdensity_fn)
    value_and_grad = jax.value_and_grad(target.logdensity_fn)

    @jax.jit
    def probe(start):
        moved = start + jax.random.normal(jax.random.key(3), start.shape, start.dtype) * continuous
        return jax.vmap(at_point)(jnp.stack([start, moved]))

    def at_point(x):
        gradient = grad_fn(x)
        products, misses = {}, {}
        for group in probed:
            joint = _joint_space(space, group)
            index = joint.to_index(jnp.reshape(x[where[group]], joint.event_shape))

            def moved(sites, index=index, joint=joint, group=group):  # those sites at their next values
                new = jnp.where(sites, (index + 1) % joint.num_values, index)
                return x.at[where[group]].set(jnp.ravel(joint.from_index(new)).astype(x.dtype))

            every = jnp.ones(index.shape, bool)
            half = jax.random.bernoulli(jax.random.key(4), 0.5, index.shape)
            first = jnp.ravel(every).at[1:].set(False).reshape(index.shape)
            points = jnp.stack([x] + [moved(sites) for sites in (every, first, half)])
            step = jax.random.normal(jax.random.key(2), where[group].shape, x.dtype)
            direction = jnp.zeros_like(x).at[where[group]].set(step)
            # one batch (one copy of the log density in the program): values and the products
            (values, _), (_, hvps) = jax.vmap(lambda y, v=direction: jax.jvp(value_and_grad, (y,), (v,)))(points)
            predicted = (points[1:] - x)[:, where[group]] @ gradient[where[group]]
            scale = jnp.maximum(jnp.abs(values[1:]) + jnp.abs(values[0]), 1.0)
            misses[group] = jnp.abs(values[1:] - values[0] - predicted) / scale
            products[group] = hvps[:2, where[group]]  # at x and with every site moved
        return gradient, products, misses

    gradients, products, misses = jax.device_get(probe(start))
    usable = [
        i
        for i in range(2)
        if np.isfinite(gradients[i]).all() and all(np.isfinite(p[i]).all() for p in products.values())
    ]
    flat = {name for group in groups if usable and not np.any(gradients[usable][:, where[group]]) for name in group}
    flat.update(indices)
    curved, linear, compared = set(), set(), set()
    for group, pair in products.items():
        grads = [np.linalg.norm(gradients[i, where[group]]) for i in usable]
        sizes = [max(np.linalg.norm(pair[i, 0]), np.linalg.norm(pair[i, 1])) for i in usable]
        changes = [np.linalg.norm(pair[i, 0] - pair[i, 1]) for i in usable]
        if any(change > CURVATURE_TOLERANCE * size for change, size in zip(changes, sizes, strict=True)):
            curved.update(group)
        elif usable and max(grads) > 0 and all(s <= LINEAR_TOLERANCE * g for s, g in zip(sizes, grads, strict=True)):
            if np.max(misses[group][usable]) <= LINEAR_CHANGE_TOLERANCE:
                linear.update(group)
            else:  # a move to -inf gives NaN
                curved.update(group)
                compared.update(group)
    return PartShapes(frozenset(flat), frozenset(curved), frozenset(linear), frozenset(compared))


#: A categorical part is a chain when the Hessian's entries beyond neighbouring sites are below
#: this share of the whole (a random Hessian-vector product): rounding, not a coupling.
CHAIN_TOLERANCE = 1e-4


#: Scalar sites (Binary, Ordinal) with more values than this are not read as a chain: the
#: chain from evaluations costs (K − 1)² evaluations of the log density per pair of sites.
CHAIN_MAX_VALUES = 8


def chain_parts(target: Target, start: jax.Array | None = None) -> dict[tuple[str, ...], bool]:
    """The discrete parts of ``target``'s Product space, of three or more sites, in which its
    log density at a start couples each site with its neighbours and with no other: an HMM's
    states, held in one part or one site per part (read together,
    :meth:`~gradmc.spaces.Product.discrete_groups`). Categorical parts are read through
    Hessian-vector products (:func:`gradmc.discrete.ffbs.coupling_outside_chain`), scalar parts
    of at most :data:`CHAIN_MAX_VALUES` values through evaluations
    (:func:`~gradmc.discrete.ffbs.coupling_outside_chain_by_values`); of those, a chain whose
    pairwise terms, read at FFBS's reference, are the same at every pair to within
    :data:`SHARED_TOLERANCE` (an HMM's transitions) has them shared (``True``: FFBS's
    ``transitions="shared"``).

    Parameters
    ----------
    target : Target
        A target on a :class:`~gradmc.spaces.Product` space.
    start : jax.Array, optional
        Its start (default: ``target.draw_initial`` with key 0).

    Returns
    -------
    dict of tuple of str to bool
        The chains, each as its group of parts, and whether its pairwise terms are shared.
    """
    space = target.space
    start = _probe_start(target, start)
    found = {}
    for group in space.discrete_groups():
        part = _joint_space(space, group)
        one_hot = isinstance(part, Categorical)
        if part.d < 3 or not (one_hot or (part.values.ndim == 1 and part.num_values <= CHAIN_MAX_VALUES)):
            continue
        where = part_index(space, group)

        def conditional(x, where=where):
            return target.logdensity_fn(start.at[where].set(jnp.ravel(x)))

        at = jnp.reshape(start[where], part.event_shape)
        if one_hot:
            outside, whole = jax.jit(ffbs.coupling_outside_chain, static_argnums=0)(conditional, at, jax.random.key(1))
            coupled = jnp.any(jax.jit(ffbs.chain_model, static_argnums=0)(conditional, at).pairwise != 0)
        else:
            probe = jax.jit(ffbs.coupling_outside_chain_by_values, static_argnums=(0, 2))
            outside, whole, neighbours = probe(conditional, at, part)
            coupled = neighbours > 0
        if float(outside) <= CHAIN_TOLERANCE * float(whole) and bool(coupled):
            found[group] = not one_hot and _shares_pairwise(conditional, part)
    return found


#: A chain of scalar sites has its pairwise terms shared where those read at the start differ
#: from pair to pair by at most this many nats, beyond float32's rounding of the evaluations
#: each is read from. A proposal off by that much at each of T pairs loses at most T times it
#: in the log acceptance ratio.
SHARED_TOLERANCE = 1e-4


def _shares_pairwise(conditional: Callable, part) -> bool:
    """Whether the chain of ``conditional`` (f on ``part``'s sites) has the same pairwise terms
    at every pair of neighbours (:func:`gradmc.discrete.ffbs.pairwise_spread`), read at FFBS's
    reference, every site at its first value.
    """
    reference = jnp.full(part.event_shape, part.values[0], jnp.result_type(float))

    @jax.jit
    def probe(x):
        return ffbs.pairwise_spread(ffbs.chain_model_by_values(conditional, x, part)), conditional(x)

    spread, level = (float(v) for v in probe(reference))
    rounding = 4 * ffbs.HALF_ROUNDING * abs(level)  # four evaluations make each pairwise term
    return np.isfinite(level) and spread <= SHARED_TOLERANCE + rounding


def _held_parts(target: Target, continuous: list[str], start: jax.Array | None = None) -> list[str]:
    """The continuous parts the mode shift holds where they are: those the log density is not
    Gaussian in given the others (:func:`gradmc.mode_shift.gaussian_parts`, probed at the
    target's start), where it is Gaussian in some; none where it is Gaussian in all or in none.
    """
    if len(continuous) < 2:
        return []
    space = target.space
    parts = [np.arange(space.slices[name].start, space.slices[name].stop) for name in continuous]
    start = _probe_start(target, start)
    with jax.default_matmul_precision("highest"):
        kept = mode_shift.gaussian_parts(target.logdensity_fn, start, parts, jax.random.key(1))
    return [] if len(kept) in (0, len(parts)) else [name for i, name in enumerate(continuous) if i not in kept]


def _site_terms(target: Target) -> Mapping[str, Callable]:
    """The parts of ``target`` whose site terms it gives (``metadata["site_terms"]``, a dict
    from a part's name to ``terms(full position) -> (size of the part,)``).
    """
    terms = target.metadata.get(SITE_TERMS, {})
    return terms if isinstance(terms, Mapping) else {}


def blocks(
    space: Product,
    choice,
    shapes: Callable[[], PartShapes] | None = None,
    plates: frozenset[str] = frozenset(),
    chains: Callable[[], set[str]] | None = None,
) -> list[Block]:
    """The blocks of ``space`` and their samplers.

    ``choice`` is ``"auto"``, one sampler name (for every block of its kind; ``"auto"`` for the
    rest) or a dict from a part's name, or a tuple of names moved together, to a sampler, or
    to a pair ``(sampler, steps)`` of it and its kernel steps per sweep (default
    :func:`_default_steps`); parts not named get
    ``"auto"``, all real parts together and each discrete part alone, but for one-site parts
    on equal spaces, which move together (:meth:`~gradmc.spaces.Product.discrete_groups`;
    those in ``plates`` stay alone). ``"auto"`` on a
    discrete part is ``"plate-gibbs"``, all sites drawn from their exact conditionals at once,
    for a part in ``plates`` (whose site terms the target gives); single-site ``"gibbs"``,
    whose exact conditionals need no gradient, for a part without a gradient (``shapes()``,
    :func:`part_shapes`), unless its sites are coupled in a chain, which ``chains()`` names
    (:func:`chain_parts`): then ``"ffbs"``, as for categorical sites coupled in a chain;
    ``"gibbs"`` again for a part in which the log density is not quadratic;
    ``"linear-gibbs"``, all sites drawn at once from their conditionals read from the
    gradient, for a part in which it is linear; otherwise :func:`auto_sampler`'s.

    Parameters
    ----------
    space : Product
        The target's space.
    choice : str, Sampler or dict
        What moves which parts.
    """
    if not isinstance(choice, Mapping):
        single = choice if isinstance(choice, Sampler) else registered_sampler(choice) if choice != AUTO else None
        kind = None if single is None else sampler_entry(single.name).kind
        choice = {
            name: single
            for name, part in space.parts.items()
            if single is not None and kind in ("any", "discrete" if part.is_discrete else "continuous")
        }
    grouped: dict[tuple[str, ...], object] = {}
    named: set[str] = set()
    for key, value in choice.items():
        parts = (key,) if isinstance(key, str) else tuple(key)
        for name in parts:
            if name not in space.parts:
                raise ValueError(f"no part named {name!r}; the parts are {', '.join(space.parts)}")
            if name in named:
                raise ValueError(f"part {name!r} is given two samplers")
            named.add(name)
        grouped[parts] = value
    rest = [name for name in space.parts if name not in named]
    real_rest = tuple(name for name in rest if not space.parts[name].is_discrete)
    if real_rest:
        grouped[real_rest] = AUTO
    for group in space.discrete_groups():  # one-site parts on equal spaces together, unless in a plate
        unnamed = [name for name in group if name in rest]
        grouped.update({(name,): AUTO for name in unnamed if name in plates})
        together = tuple(name for name in unnamed if name not in plates)
        if together:
            grouped[together] = AUTO
    order = list(space.parts)
    result = []
    for parts, value in sorted(grouped.items(), key=lambda item: order.index(item[0][0])):
        parts = tuple(sorted(parts, key=order.index))
        label = block_label(parts)
        joint = _joint_space(space, parts)
        index = part_index(space, parts)
        confirmed_linear = False
        if value == AUTO and not joint.is_discrete and any(part.is_discrete for part in space.parts.values()):
            value = MIXED_REAL_CHOICE
        if value == AUTO and joint.is_discrete:
            single = parts[0] if len(parts) == 1 else None
            if single in plates:
                value = PLATE_CHOICE
            elif shapes is not None and set(parts) <= shapes().flat:  # index-valued: a chain read from evaluations
                found = {} if chains is None else chains()
                value = FLAT_CHOICE if parts not in found else _chain_sampler(found[parts])
            elif shapes is not None and set(parts) <= shapes().linear:  # no coupling at all: no chain to read
                value, confirmed_linear = LINEAR_CHOICE, True
            elif isinstance(joint, Categorical) and chains is not None and parts in chains():
                value = CHAIN_CHOICE
            elif shapes is not None and set(parts) <= shapes().curved:
                value = FLAT_CHOICE
        block_sampler, steps = _as_block_sampler(value, joint, label)
        if confirmed_linear:
            # linearity confirmed: the proposal is the sites' exact conditional, which cannot freeze, so
            # the builder goes without the fallback move the registry wraps around a gradient sampler
            block_sampler = block_sampler._replace(build=inspect.unwrap(block_sampler.build))
        result.append(Block(label, parts, joint, index, block_sampler, steps))
    return result


def _chain_sampler(shared: bool) -> Sampler | str:
    """FFBS, its pairwise terms read at one pair where the chain's are ``shared`` (:func:`chain_parts`)."""
    return registered_sampler(CHAIN_CHOICE, transitions=ffbs.SHARED) if shared else CHAIN_CHOICE


def _shared_transitions(block: Block) -> bool:
    """Whether ``block``'s FFBS reads the chain's pairwise terms at one pair (its name says so)."""
    return block.sampler.name == CHAIN_CHOICE and block.sampler.options.get("transitions") == ffbs.SHARED


def _windowed(block: Block) -> bool:
    """Whether ``block``'s single-site Gibbs draws from a window of values (its name says so)."""
    return block.sampler.name == FLAT_CHOICE and block.sampler.options.get("radius") is not None


def _combined_stats(stats: list, labels: list[str], refreshes: int):
    """One step's statistics from its blocks': the log density after the sweep (the joint's),
    the blocks' mean acceptance, every evaluation counted; each block's acceptance rate
    and step size, and its own extra statistics, under its label in ``extra``.
    """
    extra = {}
    for label, s in zip(labels, stats, strict=True):
        extra[f"{label}.acceptance_rate"] = s.acceptance_rate
        extra[f"{label}.step_size"] = s.step_size
        extra.update({f"{label}.{key}": value for key, value in s.extra.items()})
    return step_stats(
        stats[-1].logdensity,
        jnp.mean(jnp.stack([s.acceptance_rate for s in stats])),
        jnp.any(jnp.stack([s.is_accepted for s in stats])),
        num_grad_evals=sum(s.num_grad_evals for s in stats) + refreshes,
        diverging=jnp.any(jnp.stack([s.diverging for s in stats])),
        nonfinite=jnp.any(jnp.stack([s.nonfinite for s in stats])),
        extra=extra,
    )


def summed_out(logdensity_fn: Callable, summed: list[Block], site_terms: Mapping[str, Callable]) -> Callable:
    """``log Σ_{d_S} p(x, d_S, rest)``, a function of the flat position: the log density with the
    blocks ``summed`` (their values in the position ignored) summed out, for the continuous
    blocks' moves. A block the log density is linear in (``"linear-gibbs"``: f(d) = f(d₀) +
    ∇f(d₀)ᵀ(d − d₀)) is summed from the gradient, site by site: Σₙ log Σ_v exp(∇ₙf · v) −
    ∇f · d₀; a plate of sites independent given the rest (``"plate-gibbs"``, whose site terms
    gₙ the target gives) from the terms at every value: Σₙ log Σ_v exp gₙ(v) − Σₙ gₙ(d₀ₙ).
    Values whose term is NaN or +∞ count as impossible, as the blocks' own draws count them.
    """
    linear = [block for block in summed if block.sampler.name == LINEAR_CHOICE]
    plates = [block for block in summed if block.sampler.name == PLATE_CHOICE]

    def possible(terms):
        return jnp.where(jnp.isnan(terms) | (terms == jnp.inf), -jnp.inf, terms)

    def marginal(position):
        if linear:
            value, grad = jax.value_and_grad(logdensity_fn)(position)
        else:
            value = logdensity_fn(position)
        for block in linear:
            space = block.space
            g = grad[block.index].reshape(space.d, -1)  # one row per site
            values = jnp.asarray(space.values, position.dtype).reshape(space.num_values, -1)
            current = position[block.index].reshape(space.d, -1)
            value = value + jnp.sum(jax.nn.logsumexp(g @ values.T, axis=-1)) - jnp.sum(g * current)
        for block in plates:
            terms = site_terms[block.parts[0]]
            values = jnp.asarray(block.space.values, position.dtype)
            table = jax.vmap(lambda v, terms=terms, block=block: terms(position.at[block.index].set(v)))(values)
            value = value + jnp.sum(jax.nn.logsumexp(possible(table), axis=0)) - jnp.sum(terms(position))
        return value

    return marginal


def _repeated(move, bound: BoundSampler, steps: int, key, state, i: int):
    """``steps`` kernel steps of block ``i`` (``move(bound, key, state, i, j)`` for step j);
    the statistics of the last, with the evaluations summed and the acceptance rate averaged.
    """
    if steps == 1:
        return move(bound, jax.random.fold_in(key, 0), state, i, 0)

    def one(carry, j):
        state, stats = carry
        state, new = move(bound, jax.random.fold_in(key, j), state, i, j)
        total = new._replace(
            num_grad_evals=stats.num_grad_evals + new.num_grad_evals,
            acceptance_rate=stats.acceptance_rate + new.acceptance_rate,
        )
        return (state, total), None

    # the kernel is traced once, inside the scan: its statistics start from zeros of their shapes
    shapes = jax.eval_shape(lambda: move(bound, key, state, i, 0)[1])
    zeros = jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), shapes)
    (state, stats), _ = jax.lax.scan(one, (state, zeros), jnp.arange(steps))
    return state, stats._replace(acceptance_rate=stats.acceptance_rate / steps)


def _build(
    target: Target,
    num_warmup: int,
    layout: list[Block],
    joint: str | None = None,
    whiten: bool = False,
    carried: np.ndarray | None = None,
    summed: tuple[str, ...] = (),
    selectors: frozenset[str] = frozenset(),
    pairs: tuple[np.ndarray, np.ndarray] | None = None,
) -> BoundSampler:
    """The :class:`BoundSampler` of a Gibbs sweep over ``layout``'s blocks (module doc),
    preceded by joint moves of every block (:mod:`gradmc.mode_shift`): in every sweep when
    ``joint`` is its name, after the warm-up sweeps that judged it worth its cost when it is
    :data:`JUDGED`, never when it is None. The moves carry the continuous entries ``carried``
    (default: all) and hold the others. The continuous blocks move on the log density with the
    discrete blocks labelled in ``summed`` summed out (:func:`summed_out`): each sweep then
    draws those blocks from their exact conditional given the continuous ones, a collapsed
    Gibbs sweep. The joint moves may swap the values of Categorical blocks, of those the
    target's metadata names as labels and of the 0/1 parts in ``selectors``. Each sweep begins
    with a move of each switch pair in ``pairs`` (``(sites, entries)``, :mod:`gradmc.switch_pairs`),
    whose frame is learned from the sweeps W/4 .. W − 1 and moves them from sweep W/2 on.
    """
    site_terms = _site_terms(target)
    marginal = summed_out(target.logdensity_fn, [b for b in layout if b.label in summed], site_terms)
    continuous = np.concatenate([block.index for block in layout if not block.space.is_discrete] or [[]]).astype(int)
    carried = continuous if carried is None else carried
    discrete = [(block.index, block.space) for block in layout if block.space.is_discrete]
    named_labels = target.metadata.get(mode_shift.LABELS, frozenset()) | selectors
    labels = [_holds_labels(block, named_labels) for block in layout if block.space.is_discrete]
    max_moves = mode_shift.most_moves(discrete)
    discrete_index = np.concatenate([index for index, _ in discrete] or [[]]).astype(int)
    # the joint move's frame of the continuous block holds until a discrete block has moved
    first_discrete = next((i for i, block in enumerate(layout) if block.space.is_discrete), len(layout))
    last_discrete = max((i for i, block in enumerate(layout) if block.space.is_discrete), default=-1)
    share_frame = (
        whiten
        and joint is not None
        and carried.size == continuous.size
        and any(not b.space.is_discrete for b in layout[:first_discrete])
    )

    def bound(block: Block, position, frame=None) -> BoundSampler:
        logdensity_fn = marginal if summed and not block.space.is_discrete else target.logdensity_fn

        def conditional(x):
            return logdensity_fn(position.at[block.index].set(jnp.ravel(x)))

        metadata = {}
        if block.parts[0] in site_terms and len(block.parts) == 1:
            terms = site_terms[block.parts[0]]
            metadata[SITE_TERMS] = lambda x: terms(position.at[block.index].set(jnp.ravel(x)))
        view = Target(f"{target.name} | {block.label}", conditional, block.space, metadata=metadata)

        def bind(view):
            with jax.ensure_compile_time_eval():  # the builder's checks and constants, not the density, run now
                return block.sampler.bind(view, num_warmup * block.steps)

        if whiten and not block.space.is_discrete:
            if frame is not None:  # the joint move's, at these discrete values
                return whitening.whitened(bind, view, lambda: whitening.usable(*frame))
            return whitening.whitened(
                bind, view, lambda: whitening.conditional_frame(target.logdensity_fn, position, block.index)
            )
        return bind(view)

    zero = jnp.zeros(target.space.event_shape, jnp.result_type(float))
    readers, freezable = [], True
    for block in layout:
        b = bound(block, zero)
        freezable = freezable and b.freeze is not None
        if b.refresh is None and len(layout) > 1:
            raise ValueError(
                f"sampler {block.sampler.name!r} cannot move the block {block.label!r}: its state holds more than "
                "the position (replicas or a temperature), which other blocks' moves would make stale"
            )
        readers.append(b.position)

    def position(states):
        x = zero
        for block, read, state in zip(layout, readers, states, strict=True):
            x = x.at[block.index].set(jnp.ravel(read(state)))
        return x

    def sweep(key, states, move, joint_on=False, num_moves=1, restart=None, pair=None):
        # restart: (whether, where): every block set to a flat position first, refreshed there;
        # pair: (whether, frame) of the switch pairs' moves
        x = position(states) if restart is None else jnp.where(restart[0], restart[1], position(states))
        extra_evals, extra, frame, paired_changed, pair_evals = 0, {}, None, 0, 0
        if pair is not None:
            before_pairs = x
            x, accepted = pair_moves(jax.random.fold_in(key, 2 * len(layout) + 1), x, *pair)
            pair_evals = extra_evals = jnp.where(pair[0], 1 + pairs[0].size, 0)
            extra[f"{switch_pairs.NAME}.acceptance_rate"] = accepted / pairs[0].size
            paired_changed = jnp.sum(before_pairs[pairs[0]] != x[pairs[0]])
        before_joint = x
        if joint_on is not False:  # True: every sweep; a traced flag: from when warm-up switched it on
            x, accepted, frame = joint_move(jax.random.fold_in(key, 2 * len(layout)), x, joint_on, num_moves)
            extra_evals = extra_evals + jnp.where(joint_on, mode_shift.grad_evals(carried.size, num_moves), 0)
            extra[f"{JOINT}.acceptance_rate"] = accepted / jnp.maximum(num_moves, 1)  # none where it is off
        new_states, stats, after_joint = [], [], x
        for i, (block, state) in enumerate(zip(layout, states, strict=True)):
            b = bound(block, x, frame if i < first_discrete else None)
            if len(layout) > 1:
                here = x[block.index].reshape(block.space.event_shape)
                state = b.refresh(jax.random.fold_in(key, 2 * i), state, here)
            state, block_stats = _repeated(move, b, block.steps, jax.random.fold_in(key, 2 * i + 1), state, i)
            x = x.at[block.index].set(jnp.ravel(b.position(state)))
            new_states.append(state)
            stats.append(block_stats)
        refreshes = len(layout) if len(layout) > 1 else 0
        if whiten:  # the block's frame: the joint move's where it moved, else computed for the block alone
            extra_evals = extra_evals + jnp.where(joint_on & share_frame, 0, whitening.grad_evals(continuous.size))
        combined = _combined_stats(stats, [b.label for b in layout], refreshes + extra_evals)
        # by the blocks' own moves and the switch pairs'
        changed = jnp.sum(after_joint[discrete_index] != x[discrete_index]) + paired_changed
        joint_changed = jnp.sum(before_joint[discrete_index] != after_joint[discrete_index])
        own_evals = sum(s.num_grad_evals for s in stats) + refreshes + pair_evals
        level = stats[last_discrete].logdensity  # the joint's: a discrete block's moves never sum a block out
        combined = combined._replace(extra={**combined.extra, **extra})
        return tuple(new_states), combined, (changed, joint_changed), own_evals, level

    def pair_moves(key, x, on, pair_frame):
        def moved(x):
            level = target.logdensity_fn(x)
            x, _, accepted = switch_pairs.pair_moves(key, x, target.logdensity_fn, level, *pairs, pair_frame)
            return x, accepted

        return moved(x) if on is True else jax.lax.cond(on, moved, lambda x: (x, jnp.int32(0)), x)

    def joint_move(key, x, on, num_moves):
        """``num_moves`` mode-shift moves where ``on``, and the continuous block's frame at the
        discrete values they leave (:mod:`gradmc.whitening`; computed where the moves are off,
        too), or None where no whitened block moves before the discrete blocks.
        """

        def shift(x, num_moves=num_moves):
            moved, accepted, frame = mode_shift.mode_shift_moves(
                key, x, target.logdensity_fn, carried, discrete, num_moves, labels
            )
            return moved, accepted, frame if share_frame else None

        if on is True:
            return shift(x)
        if share_frame:  # no moves where it is off, only the frame: the same code (one copy of its Newton steps)
            return shift(x, jnp.where(on, num_moves, 0))
        return jax.lax.cond(on, shift, lambda x: (x, jnp.int32(0), None), x)

    def init(key, start):
        states = tuple(
            bound(block, start).init(jax.random.fold_in(key, i), start[block.index].reshape(block.space.event_shape))
            for i, block in enumerate(layout)
        )
        states = (
            JointWarmup(
                states,
                Shared((jnp.float32(0), jnp.float32(0), jnp.float32(0), jnp.bool_(False), jnp.int32(1))),
                start,
                jnp.zeros(2, jnp.result_type(float)),
            )
            if joint == JUDGED
            else states
        )
        if pairs is None:
            return states
        return PairedWarmup(states, Shared(switch_pairs.no_moments(pairs[0].size, zero.dtype)))

    def blockwise(key, states, t, joint_on, num_moves=1, restart=None, pair=None):
        # a block of s steps per sweep takes warm-up steps s t, ..., s t + s - 1 of its s W
        return sweep(
            key,
            states,
            lambda b, k, state, i, j: b.warmup_step(k, state, t * layout[i].steps + j),
            joint_on,
            num_moves,
            restart,
            pair,
        )

    def warmup_step(key, states, t):
        if pairs is None:
            return judged_warmup_step(key, states, t)
        moments = states.moments.value
        on = t >= num_warmup // 2
        inner, stats = judged_warmup_step(key, states.blocks, t, (on, switch_pairs.frame(moments)))
        learned = switch_pairs.add_draw(moments, read_position(inner), *pairs)
        learning = (t >= num_warmup // 4) & (t < num_warmup)
        moments = jax.tree.map(lambda new, old: jnp.where(learning, new, old), learned, moments)
        return PairedWarmup(inner, Shared(moments)), stats

    def judged_warmup_step(key, states, t, pair=None):
        if joint != JUDGED:
            return blockwise(key, states, t, joint == mode_shift.NAME, pair=pair)[:2]
        judge_from, judge_to = num_warmup // 2, 3 * num_warmup // 4
        trial = (t >= judge_from) & (t < judge_to)
        kept, moves = states.judged.value[3:]  # judged worth it: its moves per sweep; on trial: one
        before_trial = jnp.where(t == judge_from, position(states.blocks), states.before_trial)
        before, after = states.levels
        back = (t == judge_to + settle_sweeps(judge_from, judge_to)) & ~kept & (after < before)
        new, stats, changed, evals, level = blockwise(
            key, states.blocks, t, kept | trial, jnp.where(kept, moves, 1), (back, before_trial), pair
        )
        changed, joint_changed = changed
        move_evals = mode_shift.grad_evals(carried.size, 2) - mode_shift.grad_evals(carried.size, 1)
        judged = judge_joint(
            states.judged, changed, joint_changed, evals, t, judge_from, judge_to, move_evals, max_moves
        )
        levels = trial_levels(states.levels, level, t, judge_from, judge_to)
        return JointWarmup(new, judged, before_trial, levels), stats

    def finalize(states):
        if pairs is not None:
            done, params = judged_finalize(states.blocks)
            return done, {**params, switch_pairs.NAME: Shared(switch_pairs.frame(states.moments.value))}
        return judged_finalize(states)

    def judged_finalize(states):
        blocks_states = states.blocks if joint == JUDGED else states
        x = position(blocks_states)
        done = [bound(block, x).finalize(state) for block, state in zip(layout, blocks_states, strict=True)]
        params = {block.label: params for block, (_, params) in zip(layout, done, strict=True)}
        if joint == JUDGED:
            params[JOINT], params[JOINT_MOVES] = Shared(states.judged.value[3]), Shared(states.judged.value[4])
        return tuple(state for state, _ in done), params

    def step(key, states, params):
        joint_on, moves = (
            (params[JOINT].value, params[JOINT_MOVES].value) if joint == JUDGED else (joint == mode_shift.NAME, 1)
        )
        pair = None if pairs is None else (True, params[switch_pairs.NAME].value)
        return sweep(
            key,
            states,
            lambda b, k, state, i, j: b.step(k, state, params[layout[i].label]),
            joint_on,
            moves,
            pair=pair,
        )[:2]

    def read_position(states):
        states = states.blocks if isinstance(states, PairedWarmup) else states
        return position(states.blocks if isinstance(states, JointWarmup) else states)

    def freeze(states):
        if pairs is not None:  # the switch pairs' frame is learned until the end of warm-up
            return states._replace(blocks=judged_freeze(states.blocks))
        return judged_freeze(states)

    def judged_freeze(states):
        # the joint move's flag is judged before 3W/4 and stays as it is after
        blocks_states = states.blocks if joint == JUDGED else states
        x = position(blocks_states)
        frozen = tuple(bound(block, x).freeze(state) for block, state in zip(layout, blocks_states, strict=True))
        return states._replace(blocks=frozen) if joint == JUDGED else frozen

    return BoundSampler(
        "+".join(block.sampler.name for block in layout),
        init,
        warmup_step,
        finalize,
        step,
        read_position,
        adapts_in_warmup=any(bound(block, zero).adapts_in_warmup for block in layout) or joint == JUDGED,
        freeze=freeze if freezable else None,
    )


#: A continuous entry's gradient changes with a site's flip where it moves by more than this share
#: of its size at the two points (float32 rounding; the terms the flip leaves are computed alike).
FLIP_GRADIENT_TOLERANCE = 1e-4


def _selectors(target: Target, shapes: Callable[[], PartShapes], start: Callable[[], jax.Array]) -> frozenset[str]:
    """The 0/1 parts the model only selects with between unknowns (``jnp.where(z == 1, a, b)``,
    ``a[z]``, with ``a`` and ``b`` sampled): they name two alternatives, which the joint moves
    may swap as they swap a Categorical's labels. A part selected with that way moves the
    model's pull from one continuous entry to another as a site flips (a datum's from one
    component's mean to the other's), where a part selecting between constants changes at most
    one entry's gradient per site (a spike and slab's ``Normal(0, jnp.where(gamma == 1, 2.0,
    0.1))``: the coefficient's prior scale) and names no labels to swap (:func:`_flip_reach`).
    """
    binary = {name for name, part in target.space.parts.items() if isinstance(part, Binary | Spin)}
    if not binary:
        return frozenset()
    with jax.default_matmul_precision("highest"):
        candidates = binary & (shapes().flat | shapes().compared)
        return frozenset(name for name in sorted(candidates) if _flip_reach(target, name, start()) > 1)


def _flip_reach(target: Target, part: str, start: jax.Array) -> int:
    """The most continuous entries whose gradient one site of the 0/1 ``part`` changes when it
    flips, at ``start`` and at ``start`` with its continuous entries moved by a standard normal
    draw (coefficients started at zero hide a scale the switch sets), in one compiled probe.
    """
    space = target.space
    size = int(np.prod(start.shape))
    sites = np.arange(size)[space.slices[part]]
    continuous = np.ones(size, bool)
    for name in space.discrete_parts:
        continuous[space.slices[name]] = False
    if not continuous.any():
        return 0
    total = float(np.sum(space.parts[part].values))  # a site's value and its flip add up to this
    grad_fn = jax.grad(target.logdensity_fn)

    @jax.jit
    def reach(start):
        moved = start + jax.random.normal(jax.random.key(5), start.shape, start.dtype) * continuous

        def at(x):
            flipped = jax.vmap(lambda i: x.at[i].set(total - x[i]))(jnp.asarray(sites))
            grads = jax.vmap(grad_fn)(jnp.concatenate([x[None], flipped]))[:, continuous]
            change = jnp.abs(grads[1:] - grads[:1])
            size = jnp.abs(grads[1:]) + jnp.abs(grads[:1])
            changed = (change > FLIP_GRADIENT_TOLERANCE * size) & jnp.isfinite(change)
            return jnp.max(jnp.sum(changed, axis=1))

        return jnp.maximum(at(start), at(moved))

    return int(reach(start))


def _holds_labels(block: Block, named: frozenset[str]) -> bool:
    """Whether the joint moves may swap the values of the discrete ``block``: a Categorical's, or
    those of parts ``named`` as labels (the target's metadata, :func:`_selectors`).
    """
    return isinstance(block.space, Categorical) or set(block.parts) <= named


def _has_labels(
    target: Target, layout: list[Block], shapes: Callable[[], PartShapes], start: Callable[[], jax.Array]
) -> bool:
    """Whether a discrete block of ``layout`` holds labels (:func:`_holds_labels`)."""
    named = target.metadata.get(mode_shift.LABELS, frozenset()) | _selectors(target, shapes, start)
    return any(_holds_labels(block, named) for block in layout if block.space.is_discrete)


def composed_sampler(target: Target, choice=AUTO) -> Sampler:
    """The :class:`~gradmc.base.Sampler` moving the blocks of ``target``'s Product space in
    turn (:func:`blocks`, with ``"auto"`` reading :func:`part_shapes` when it has a discrete
    block to fill).

    Its name lists each block's sampler (``"beta=nuts, gamma=ncg"``); its options are each
    block's sampler, steps per sweep and options, under the block's label.

    Parameters
    ----------
    target : Target
        A target on a :class:`~gradmc.spaces.Product` space.
    choice : str, Sampler or dict
        What moves which parts (:func:`blocks`).
    """
    settings = {}
    for key, aliases, choices, what in (
        (
            JOINT,
            {None: NO_JOINT},
            JOINT_CHOICES,
            f"the joint move {{!r}} does not exist; the choices are: {mode_shift.NAME} (every sweep), "
            f"{AUTO} (where warm-up finds it worth its cost; the default), {NO_JOINT}",
        ),
        (
            WHITEN,
            {True: "on", False: "off"},
            WHITEN_CHOICES,
            f"the whitening {{!r}} does not exist; the choices are: {AUTO} (where one discrete site changes the "
            "continuous block's conditional spread; the default), on, off",
        ),
        (
            COLLAPSE,
            {True: AUTO, False: "off"},
            COLLAPSE_CHOICES,
            f"the collapse {{!r}} does not exist; the choices are: {AUTO} (the continuous block's moves sum out "
            "every discrete block drawn whole from its exact conditional; the default), off",
        ),
        (
            switch_pairs.NAME,
            {True: AUTO, False: "off"},
            PAIRS_CHOICES,
            f"the switch pairs {{!r}} do not exist; the choices are: {AUTO} (each 0/1 part flipped with the "
            "continuous part whose curvature it switches, where the model has one; the default), off",
        ),
    ):
        settings[key] = AUTO
        if isinstance(choice, Mapping) and key in choice and key not in target.space.parts:
            choice = dict(choice)
            value = choice.pop(key)
            settings[key] = aliases.get(value, value) if isinstance(value, bool | None) else value
            if settings[key] not in choices:
                raise ValueError(what.format(value))
    joint, whiten, collapse = settings[JOINT], settings[WHITEN], settings[COLLAPSE]
    pair_choice = settings[switch_pairs.NAME]
    # The structural probes compare products of the log density with tolerances near float32's
    # rounding: on a GPU, float32 matrix products default to TF32's 10-bit mantissa, which would
    # read as couplings that are not there.
    precision = jax.config.jax_default_matmul_precision

    @functools.cache
    def start():  # where every probe reads, drawn at the caller's precision: its program (a NumPyro model's,
        with jax.default_matmul_precision(precision):  # which from_numpyro compiled) then runs as compiled
            return target.draw_initial(jax.random.key(0))

    shapes = functools.cache(lambda: part_shapes(target, start()))
    with jax.default_matmul_precision("highest"):
        layout = blocks(
            target.space,
            choice,
            shapes,
            frozenset(_site_terms(target)),
            functools.cache(lambda: chain_parts(target, start())),
        )
    both_kinds = len({block.space.is_discrete for block in layout}) == 2
    if joint == mode_shift.NAME and not both_kinds:
        raise ValueError(
            f"the joint move {joint!r} moves discrete and continuous blocks together; {target.name!r} "
            "has blocks of one kind only"
        )
    real = [block for block in layout if not block.space.is_discrete]
    num_continuous = sum(block.index.size for block in real)
    small = both_kinds and num_continuous <= AUTO_JOINT_MAX_CONTINUOUS
    if joint == AUTO:
        joint = JUDGED if small else NO_JOINT
    if whiten == "on" and not (both_kinds and len(real) == 1):
        raise ValueError(
            f"whitening moves the one continuous block of a mixed model in coordinates fitted to its conditional "
            f"given the discrete blocks; {target.name!r} has {len(real)} continuous blocks"
            + ("" if both_kinds else " and blocks of one kind only")
        )

    def sums_exactly(block: Block) -> bool:  # draws the whole block exactly: by site terms, or a linear density
        if block.sampler.name == LINEAR_CHOICE:
            with jax.default_matmul_precision("highest"):
                return set(block.parts) <= shapes().linear
        return block.sampler.name == PLATE_CHOICE and block.space.num_values <= COLLAPSE_MAX_VALUES

    # One block at most (two linear blocks may interact, which their gradients at the current values
    # would not sum out), beside one continuous block that is not whitened (whitening's frame follows
    # the discrete values, which the continuous moves must not see): summing out comes first, and
    # "auto" then leaves whitening off. The summed block's draw follows the continuous block's move
    # directly, so no other block reads its stale values in between.
    summable = []
    if collapse == AUTO and whiten != "on" and len(real) == 1:
        summable = [block for block in layout if block.space.is_discrete and sums_exactly(block)]
    summed = (summable[0].label,) if len(summable) == 1 else ()
    if summed:
        rest = [block for block in layout if block is not real[0] and block is not summable[0]]
        layout = rest + [real[0], summable[0]]
    change = None
    if small and len(real) == 1 and not summed and (whiten == AUTO or joint == JUDGED):
        with jax.default_matmul_precision("highest"):
            change = whitening.conditional_change(target, real[0].index, start())
    if whiten == AUTO:
        whiten = "on" if change is not None and change.spread > WHITEN_SPREAD else "off"
    whiten = whiten == "on"
    holds_nothing = change is not None and change.spread <= HOLD_SPREAD and change.shift <= HOLD_SHIFT
    # The continuous moves see the marginal of a block summed out of them: it cannot hold them in place
    every_discrete_summed = bool(summed) and all(b.label in summed for b in layout if b.space.is_discrete)
    if joint == JUDGED and (holds_nothing or every_discrete_summed) and not _has_labels(target, layout, shapes, start):
        joint = NO_JOINT
    pairs = []
    if pair_choice == AUTO and small:
        site_parts = {
            part: part_index(target.space, (part,))
            for block in layout
            if block.space.is_discrete and block.label not in summed
            for part in block.parts
            if isinstance(target.space.parts[part], Binary)
        }
        entry_parts = {part: part_index(target.space, (part,)) for block in real for part in block.parts}
        if site_parts:
            with jax.default_matmul_precision("highest"):
                pairs = switch_pairs.switch_pairs(target.logdensity_fn, start(), site_parts, entry_parts)
    paired = None
    if pairs:
        paired = tuple(np.concatenate([part_index(target.space, (p[i],)) for p in pairs]) for i in (0, 1))
    sums_out = f" (summing out {'+'.join(summed)})" if summed else ""
    name = ", ".join(
        f"{block.label}={block.sampler.name}"
        + (f" (window {block.sampler.options['radius']})" if _windowed(block) else "")
        + (" (shared transitions)" if _shared_transitions(block) else "")
        + (" (whitened)" if whiten and block in real else "")
        + (sums_out if block in real else "")
        for block in layout
    ) + "".join(f", {switch_pairs.NAME}={site}:{entry}" for site, entry in pairs)
    options = {
        block.label: {"sampler": block.sampler.name, "steps": block.steps, **block.sampler.options}
        | ({WHITEN: True} if whiten and block in real else {})
        | ({COLLAPSE: "+".join(summed)} if summed and block in real else {})
        for block in layout
    }
    if joint == mode_shift.NAME:
        name += f", {JOINT}={joint}"
        options[JOINT] = {"sampler": joint}
    elif joint == JUDGED:
        options[JOINT] = {"sampler": mode_shift.NAME, "when": JUDGED}
    if pairs:
        options[switch_pairs.NAME] = {site: entry for site, entry in pairs}
    joint = None if joint == NO_JOINT else joint
    carried, selectors = None, frozenset()
    if joint is not None:
        selectors = _selectors(target, shapes, start)
        held = _held_parts(target, [name for block in real for name in block.parts], start())
        if held:
            options[JOINT]["holds"] = "+".join(held)
            continuous = [name for block in real for name in block.parts if name not in held]
            carried = part_index(target.space, tuple(continuous))

    def build(target: Target, num_warmup: int, **_):
        return _build(target, num_warmup, layout, joint, whiten, carried, summed, selectors, paired)

    return Sampler(name, options, build)
