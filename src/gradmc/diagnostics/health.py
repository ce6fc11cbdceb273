"""Health checks of a finished run: the warnings :func:`gradmc.sample` attaches to every trace.

After each run, :func:`run_warnings` looks for the usual ways a Markov chain run goes wrong
and returns one line per problem, naming the coordinates or chains concerned and a fix;
:func:`emit_warnings` stores the lines in ``trace.warnings`` and raises each as a
:class:`RunWarning`. The checks, and the module constants that set them:

* chains that disagree: rank-normalised split R-hat above :data:`RHAT_THRESHOLD`
  (Vehtari et al. 2021; ArviZ computes it);
* too few effective draws: bulk or tail ESS below :data:`MIN_ESS` (one chain:
  :data:`MIN_ESS_SINGLE_CHAIN`);
* draws that are not finite, and coordinates constant within every chain but different
  between chains (each chain is stuck in its own state);
* chains whose discrete sites agree with the first chain's once their values are relabelled
  (a mixture's components found in different orders: :func:`_relabelled_lines`);
* chains that never moved over the kept draws (every coordinate constant, or a mean
  acceptance rate at most :data:`STUCK_ACCEPTANCE`);
* divergent transitions and proposals with a non-finite log density or gradient in the
  kept draws;
* warm-up adaptation that failed (a tuned value is not a positive finite number or moved
  more than :data:`MAX_ADAPTED_RATIO`-fold from its start, or the warm-up acceptance rate
  stayed within :data:`STUCK_ACCEPTANCE` of 0 or 1);
* a kept acceptance rate more than :data:`ACCEPTANCE_TOLERANCE` away from the one the
  warm-up aimed at.

What a sampler tunes, the acceptance it aims at and its other cures for divergences are
read from its registry entry (:class:`gradmc.registry.Tuned`, :class:`gradmc.registry.Fix`),
never guessed from parameter names.

The checks read the kept draws once, a block of coordinates at a time (float64 blocks of at
most :data:`BLOCK_ELEMENTS` elements, so their memory is bounded whatever the run's size).
R-hat and ESS cost about a microsecond per draw and coordinate, so at most
:data:`MAX_CHECKED_VALUES` draws are passed to ArviZ: when a run has more coordinates than
that allows, the coordinates checked are those most likely to fail, ranked by a cheap screen
of every coordinate (the classic between/within-chain R-hat and the lag-1 autocorrelation).
A run that kept no draws is checked from its per-chain running means and variances
(``trace.moments``): R-hat there is the classic, not the rank-normalised one, and there is
no ESS.
"""

from __future__ import annotations

import dataclasses
import logging
import warnings
from collections.abc import Callable, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from gradmc.base import COLLAPSE, FALLBACK, JOINT, RunWarning
from gradmc.composed import LINEAR_CHOICE
from gradmc.diagnostics._common import arviz, column
from gradmc.registry import Entry, Tuned, samplers
from gradmc.spaces import Count, Product
from gradmc.variables import entry_name

if TYPE_CHECKING:
    from gradmc.trace import Trace

__all__ = [
    "RunWarning",
    "RHAT_THRESHOLD",
    "MIN_ESS",
    "MIN_ESS_SINGLE_CHAIN",
    "STUCK_ACCEPTANCE",
    "ACCEPTANCE_TOLERANCE",
    "MAX_ADAPTED_RATIO",
    "MIN_DRAWS_FOR_ACCEPTANCE",
    "MAX_CHECKED_VALUES",
    "BLOCK_ELEMENTS",
    "run_warnings",
    "emit_warnings",
]

#: Rank-normalised split R-hat above this flags a coordinate (Vehtari et al. 2021's advice).
RHAT_THRESHOLD = 1.01
#: Bulk or tail ESS, summed over chains, below this flags a coordinate (Vehtari et al. 2021:
#: about 100 effective draws make the R-hat and MCSE estimates themselves reliable).
MIN_ESS = 100
#: The ESS threshold of a single-chain run, where R-hat is undefined.
MIN_ESS_SINGLE_CHAIN = 50
#: A chain whose mean acceptance rate over the kept draws is at most this has (almost) never
#: moved; a warm-up acceptance rate within this of 0 or 1 means its adaptation failed.
STUCK_ACCEPTANCE = 0.01
#: An adapted step size that ends more than this factor above or below its first warm-up
#: value has run off towards float32's overflow or underflow (a flat or NaN target).
MAX_ADAPTED_RATIO = 1e20
#: A kept acceptance rate further than this (absolute) from ``target_accept`` is flagged.
#: Dual averaging settles within a few hundredths of its target on a well-behaved target;
#: the mean over 50 or more kept draws has a standard error below about 0.06.
ACCEPTANCE_TOLERANCE = 0.2
#: The acceptance rate is compared with ``target_accept`` only over at least this many kept draws.
MIN_DRAWS_FOR_ACCEPTANCE = 50
#: At most this many draws (chains x draws x coordinates) go through ArviZ's R-hat and ESS.
MAX_CHECKED_VALUES = 1 << 21
#: Float64 elements of one block of draws read by the checks (32 MiB).
BLOCK_ELEMENTS = 1 << 22
#: Coordinates or chains named in one message before "(+k more)".
_SHOWN = 3


# -- formatting -------------------------------------------------------------------------------


def _listing(labels: Sequence[str], total: int | None = None) -> str:
    """``"a, b, c (+4 more)"``: the first :data:`_SHOWN` distinct labels and a count of the
    other items (``total`` items in all, default ``len(labels)``). Items may share a label (the
    one-hot entries of one categorical site): each label is shown once.
    """
    total = len(labels) if total is None else total
    shown = list(dict.fromkeys(labels))[:_SHOWN]
    covered = sum(label in shown for label in labels)
    return ", ".join(shown) + (f" (+{total - covered} more)" if total > covered else "")


#: Names of flat coordinates: ``name(flat_indices) -> labels``.
Namer = Callable[[np.ndarray], list[str]]


def _position_namer(event_shape: tuple[int, ...]) -> Namer:
    """Coordinates named by their place in the position: ``x[3]``, ``x[1,2]``."""
    return lambda flat_indices: [entry_name("x", event_shape, i) for i in flat_indices]


def _variables_namer(variables, base: np.ndarray, moved: Callable[[np.ndarray], np.ndarray], fallback: Namer) -> Namer:
    """Coordinates named in the model's terms: the named entry that follows when the
    coordinate alone is moved (``moved(flat_indices)``: ``base`` with each of them moved,
    one position each), ``theta[3]``; ``w via x[2]`` for a coordinate that moves several
    entries of one variable (a simplex's); :func:`_position_namer`'s label otherwise.
    """

    def label(change: tuple[str, str | None] | None, position: str) -> str:
        if change is None:
            return position
        variable, entry = change
        return entry if entry is not None else f"{variable} via {position}"

    def name(flat_indices: np.ndarray) -> list[str]:
        flat_indices = np.asarray(flat_indices)
        if not flat_indices.size:
            return []
        padded = np.resize(flat_indices, max(_SHOWN, flat_indices.size))  # one batch shape: one compilation
        try:
            changes = variables.changed_entries(base, moved(padded))[: flat_indices.size]
        except Exception:  # a name is a courtesy: a variables function that fails here must not lose the warning
            return fallback(flat_indices)
        return [label(c, p) for c, p in zip(changes, fallback(flat_indices), strict=True)]

    return name


def _each_moved(base: np.ndarray, flat_indices: np.ndarray, move: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    """``(len(flat_indices), base.size)``: ``base`` (flat) with one coordinate replaced by ``move`` of it per row."""
    out = np.repeat(base.reshape(1, -1), len(flat_indices), axis=0)
    rows = np.arange(len(flat_indices))
    out[rows, flat_indices] = move(out[rows, flat_indices])
    return out


def _namer(trace: Trace, kept: np.ndarray | None) -> Namer:
    """How the warnings name the coordinates of ``kept`` (the draws the checks read; None:
    the running means of a run that kept no draws): by the target's named variables when
    it has them and ``kept`` holds its positions (or a discrete run's value indices), else
    by place in the position. A coordinate is moved from the first kept position: to the
    next value of its space, or by 1 + |value|.
    """
    if kept is None:
        kept = np.asarray(trace.moments["mean"])[:, None]  # each chain's mean stands in for a draw
    event_shape = tuple(kept.shape[2:])
    fallback = _position_namer(event_shape)
    variables, space = trace.variables, trace.space
    if variables is None:
        return fallback
    if trace.indices is not None:
        base_index, k = np.asarray(kept[0, 0], np.int64), space.num_values
        base = space.decode(base_index)

        def moved(flat_indices: np.ndarray) -> np.ndarray:
            return space.decode(_each_moved(base_index, flat_indices, lambda v: (v + 1) % k))

    elif event_shape != variables.event_shape or (space is not None and space.is_discrete):
        return fallback
    else:
        base = np.nan_to_num(np.asarray(kept[0, 0], np.float64), nan=0.0, posinf=0.0, neginf=0.0)

        def moved(flat_indices: np.ndarray) -> np.ndarray:
            return _each_moved(base, flat_indices, lambda v: v + 1.0 + np.abs(v)).reshape(-1, *event_shape)

    return _variables_namer(variables, base, moved, fallback)


def _coords(flat_indices: np.ndarray, name: Namer) -> str:
    """The first coordinates of ``flat_indices`` by name, and a count of the rest."""
    return _listing(name(flat_indices[:_SHOWN]), len(flat_indices))


def _chains(trace: Trace, chains, counts: np.ndarray | None = None) -> str:
    """``"chain 2"``, ``"chains 0, 3"`` or with ``counts`` ``"chains 0 (4), 3 (1)"`` (indices in the whole run)."""
    labels = [f"{trace.first_chain + int(c)}" + ("" if counts is None else f" ({int(counts[c])})") for c in chains]
    return ("chain " if len(labels) == 1 else "chains ") + _listing(labels)


# -- the sampler's options --------------------------------------------------------------------


def _entry_of(trace: Trace, entry: Entry | None) -> Entry | None:
    """``entry``, else the registered sampler named ``trace.sampler`` (None for a composed run)."""
    return entry if entry is not None else next((e for e in samplers() if e.name == trace.sampler), None)


class _Judged(NamedTuple):
    """What the checks know of the run's sampler: its options in force (defaults updated by
    the options given) and its entry's declarations.
    """

    options: dict
    tuned: tuple[Tuned, ...]
    fixes: tuple

    @classmethod
    def of(cls, trace: Trace, entry: Entry | None) -> _Judged:
        entry = _entry_of(trace, entry)
        if entry is None:
            return cls(dict(trace.options), (), ())
        return cls({**entry.defaults(), **trace.options}, entry.tuned, entry.fixes)

    def adapting(self) -> list[Tuned]:
        """The tuned settings whose adaptation is on."""
        return [t for t in self.tuned if t.active(self.options)]

    def aim(self, tuned: Tuned):
        """The acceptance rate ``tuned`` aims at (None when it aims at none)."""
        return None if tuned.aims_at is None else self.options.get(tuned.aims_at)

    def smaller_steps(self) -> str:
        """How to take smaller steps with this sampler's options."""
        option = next((t.aims_at for t in self.tuned if t.aims_at), None)
        if option is not None:
            accept = self.options.get(option)
            now = f" (now {accept})" if isinstance(accept, int | float) else ""
            return f"a higher {option}{now}, e.g. 0.95"
        return "a smaller step_size" if "step_size" in self.options else "smaller steps"

    def divergence_fixes(self) -> str:
        """Remedies for divergences among the sampler's options."""
        fixes = ["more warm-up (num_warmup)", self.smaller_steps()]
        fixes += [f"{f.option}={f.value} {f.why}" for f in self.fixes if self.options.get(f.option) != f.value]
        return "try " + ", ".join(fixes) + ", or a reparameterised target"


# -- reading the draws ------------------------------------------------------------------------


@contextmanager
def _quiet_arviz():
    """No warnings and no log lines from ArviZ (its single-chain and shape notes)."""
    logger = logging.getLogger("arviz")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        with warnings.catch_warnings(action="ignore"):
            yield
    finally:
        logger.setLevel(level)


def _blocks(num_coords: int, per_coord: int):
    """Slices of coordinates whose float64 copy stays under :data:`BLOCK_ELEMENTS` elements."""
    step = max(1, BLOCK_ELEMENTS // max(per_coord, 1))
    for start in range(0, num_coords, step):
        yield slice(start, min(start + step, num_coords))


class _Screen(NamedTuple):
    """Cheap per-chain, per-coordinate facts about the kept draws (arrays ``(chain, coord)``,
    ``finite`` ``(coord,)``).
    """

    finite: np.ndarray
    constant: np.ndarray  # the coordinate never changes within the chain
    first: np.ndarray  # its first value in the chain
    mean: np.ndarray
    var: np.ndarray
    lag1: np.ndarray  # lag-1 autocorrelation (NaN for a constant coordinate)


def _screen(flat: np.ndarray) -> _Screen:
    """One pass over the draws ``(chain, draw, coord)``, a block of coordinates at a time."""
    c, n, k = flat.shape
    finite, constant = np.ones(k, bool), np.ones((c, k), bool)
    first, mean, var, lag1 = (np.empty((c, k)) for _ in range(4))
    for cols in _blocks(k, c * n):
        x = np.asarray(flat[:, :, cols], dtype=np.float64)
        finite[cols] = np.isfinite(x).all(axis=(0, 1))
        first[:, cols] = x[:, 0]
        constant[:, cols] = (x == x[:, :1]).all(axis=1)
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):  # non-finite draws give NaN
            m = x.mean(axis=1)
            centred = x - m[:, None]
            ss = (centred**2).sum(axis=1)
            lag1[:, cols] = (centred[:, 1:] * centred[:, :-1]).sum(axis=1) / ss
        mean[:, cols], var[:, cols] = m, ss / max(n - 1, 1)
    return _Screen(finite, constant, first, mean, var, lag1)


def _classic_rhat(mean: np.ndarray, var: np.ndarray, n: int) -> np.ndarray:
    """Gelman & Rubin's R-hat of each coordinate from per-chain means and variances ``(chain, coord)``."""
    within = var.mean(axis=0)
    between = mean.var(axis=0, ddof=1)  # B / n
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.sqrt(((n - 1) / n * within + between) / within)


def _checked(candidates: np.ndarray, screen: _Screen, num_chains: int, num_draws: int) -> tuple[np.ndarray, bool]:
    """The coordinates passed to ArviZ, and whether they are a subset of the candidates."""
    budget = max(16, MAX_CHECKED_VALUES // (num_chains * num_draws))
    index = np.flatnonzero(candidates)
    if index.size <= budget:
        return index, False
    sticky = np.nan_to_num(np.nanmean(screen.lag1[:, index], axis=0), nan=1.0)
    picks = [index[np.argsort(-sticky, kind="stable")]]
    if num_chains > 1:
        rhat = _classic_rhat(screen.mean[:, index], screen.var[:, index], num_draws)
        picks.insert(0, index[np.argsort(-np.nan_to_num(rhat, nan=np.inf), kind="stable")])
    order = np.stack(picks, axis=1).reshape(-1)  # the two rankings interleaved
    _, first = np.unique(order, return_index=True)
    return np.sort(order[np.sort(first)][:budget]), True


def _arviz_diagnostics(flat: np.ndarray, index: np.ndarray) -> dict[str, np.ndarray]:
    """ArviZ's rank-normalised split R-hat (several chains) and bulk and tail ESS of the
    coordinates ``index`` of the draws ``(chain, draw, coord)``.
    """
    c, n, _ = flat.shape
    methods = ["bulk", "tail"] + (["rhat"] if c > 1 else [])
    out = {m: np.empty(index.size) for m in methods}
    az = arviz()
    with _quiet_arviz():
        for cols in _blocks(index.size, c * n):
            ds = az.convert_to_dataset(np.asarray(flat[:, :, index[cols]], dtype=np.float64))
            for m in methods:
                out[m][cols] = column(az.rhat(ds) if m == "rhat" else az.ess(ds, method=m))
    return out


# -- the checks -------------------------------------------------------------------------------


def _kept(trace: Trace) -> np.ndarray | None:
    """The kept draws ``(chain, draw, ...)``: a discrete run's value indices when it keeps
    them (the same ranks, far fewer bytes), else ``trace.draws``.
    """
    return trace.draws if getattr(trace, "indices", None) is None else trace.indices


def _frozen_chains(constant: np.ndarray, first: np.ndarray) -> np.ndarray:
    """Chains whose every coordinate stayed constant, unless every chain sits at one and
    the same state (a target concentrated there).
    """
    frozen = constant.all(axis=1)
    if frozen.size > 1 and frozen.all() and (first == first[:1]).all():
        return np.zeros_like(frozen)
    return frozen


#: The words of the warnings that say the run's chains disagree (R-hat, chains in different states).
_DISAGREE = "the chains disagree"


def _split_line(const_all: np.ndarray, first: np.ndarray, frozen: np.ndarray, name: Namer) -> list[str]:
    """The warning about coordinates constant within every chain (``const_all``) but different
    between chains (their ``first`` values), unless every chain is ``frozen`` (the stuck-chain
    warning says it).
    """
    split = np.flatnonzero(const_all & ~(first == first[:1]).all(axis=0))
    if not split.size or frozen.all():
        return []
    return [
        f"{_coords(split, name)} never changed within any chain, yet differ between chains "
        f"({split.size} of {const_all.size} coordinates): {_DISAGREE}, each stuck in its own state, and the draws "
        "cannot be trusted; run longer, or use a sampler that moves between modes"
    ]


#: A chain sits in a relabelling of the first chain's mode where the most frequent values of a
#: discrete part's sites agree with the first chain's at this share of the sites once the
#: values are relabelled, and at most :data:`UNRELABELLED_AGREEMENT` as they are.
RELABELLED_AGREEMENT = 0.9
UNRELABELLED_AGREEMENT = 0.5
#: Parts (or groups of one-site parts) with fewer sites, or more values, are not read for
#: relabellings: a few sites agree by chance, and labels are few.
MIN_RELABELLED_SITES = 4
MAX_LABELS = 16


def _site_values(draws: np.ndarray, part) -> np.ndarray:
    """The value indices ``(chain, draw, site)`` of a discrete part's flat draws."""
    c, n = draws.shape[:2]
    if part.values.ndim == 2:  # one-hot rows
        return draws.reshape(c, n, part.d, part.num_values).argmax(axis=-1)
    return np.clip(np.searchsorted(part.values, draws.reshape(c, n, part.d)), 0, part.num_values - 1)


def _relabelled_lines(draws: np.ndarray, space) -> list[str]:
    """The warning about chains that found a discrete part's labels in another order: for each
    discrete part (each group of one-site parts, :meth:`~gradmc.spaces.Product.discrete_groups`),
    the chains whose sites' most frequent values match the first chain's once relabelled by the
    best matching of values (Hungarian algorithm on the two chains' value pairs), at
    :data:`RELABELLED_AGREEMENT` of the sites, and not as they are.
    """
    from scipy.optimize import linear_sum_assignment

    if not isinstance(space, Product) or draws.shape[0] < 2:
        return []
    found = []
    for group in space.discrete_groups():
        parts = [space.parts[name] for name in group]
        k = parts[0].num_values
        sites = sum(part.d for part in parts)
        if isinstance(parts[0], Count) or k > MAX_LABELS or sites < MIN_RELABELLED_SITES:
            continue
        values = np.concatenate(
            [_site_values(draws[..., space.slices[n]], p) for n, p in zip(group, parts, strict=True)], axis=-1
        )
        counts = (values[..., None] == np.arange(k)).sum(axis=1)  # (chain, site, value)
        modes = counts.argmax(axis=-1)  # (chain, site)
        relabelled = {}
        for chain in range(1, len(modes)):
            pairs = np.zeros((k, k))
            np.add.at(pairs, (modes[chain], modes[0]), 1)
            rows, cols = linear_sum_assignment(-pairs)
            matched = pairs[rows, cols].sum() / sites
            if matched >= RELABELLED_AGREEMENT and np.trace(pairs) / sites <= UNRELABELLED_AGREEMENT:
                relabelled[chain] = [(int(a), int(b)) for a, b in zip(rows, cols, strict=True) if a != b]
        if not relabelled:
            continue
        what = group[0] if len(group) == 1 else f"{group[0]}..{group[-1]}"
        chain, moved = next(iter(relabelled.items()))
        names = [str(i) for i in range(k)] if parts[0].values.ndim == 2 else [f"{v:g}" for v in parts[0].values]
        read = f"{', '.join(names[a] for a, _ in moved)} read as {', '.join(names[b] for _, b in moved)}"
        chains = _listing([str(c) for c in relabelled])
        agree = "agree" if len(relabelled) > 1 else "agrees"
        found.append(
            f"{what}: chain{'s' if len(relabelled) > 1 else ''} {chains} of {len(modes)} {agree} with chain 0 once "
            f"{what}'s values are relabelled (chain {chain}'s {read}), at {RELABELLED_AGREEMENT:.0%} of its sites or "
            f"more: the posterior is symmetric, or nearly, in these labels, and {_DISAGREE} in which labelling they "
            "found; what the labels index (a component's mean, ...) then differs between chains too. Tell the labels "
            "apart (order a parameter they index, such as component means drawn as increments, or give each label "
            "a prior of its own), or read only what does not depend on the labelling"
        )
    return found


def _worst(score: np.ndarray, passed: np.ndarray, index: np.ndarray, name: Namer, value) -> tuple[int, str]:
    """How many of the coordinates ``index`` did not pass, and the listing of the worst first
    (highest ``score``, NaN highest), each with ``value(j)`` of its place ``j`` in ``index``.
    """
    worst = np.argsort(-np.nan_to_num(score, nan=np.inf), kind="stable")
    worst = worst[~passed[worst]]
    shown = worst[:_SHOWN]
    labels = [f"{label} ({value(j)})" for label, j in zip(name(index[shown]), shown, strict=True)]
    return worst.size, _listing(labels, worst.size)


def _rhat_line(rhat: np.ndarray, index: np.ndarray, name: Namer, k: int, note: str) -> list[str]:
    """The R-hat warning for the coordinates ``index`` (of ``k``), worst first; NaN counts as failing."""
    failed, listing = _worst(rhat, rhat <= RHAT_THRESHOLD, index, name, lambda j: f"{rhat[j]:.3g}")
    if not failed:
        return []
    return [
        f"R-hat above {RHAT_THRESHOLD} for {failed} of {k} coordinates: {listing}{note}: "
        f"{_DISAGREE}, so they have not yet forgotten their starts or are stuck in different modes; run "
        "more warm-up and draws, or use a sampler that moves between modes"
    ]


def _mixing(draws: np.ndarray, name: Namer) -> tuple[list[str], np.ndarray]:
    """R-hat, ESS, non-finite draws and chains stuck in different states; and the frozen
    chains. ``name`` names the coordinates of ``draws`` in the messages.
    """
    flat = draws.reshape(*draws.shape[:2], -1)
    c, n, k = flat.shape
    screen = _screen(flat)
    found = []
    frozen = _frozen_chains(screen.constant, screen.first)
    bad = np.flatnonzero(~screen.finite)
    if bad.size:
        found.append(
            f"draws are not finite in {_coords(bad, name)}: the chains ran off to "
            "infinity or NaN (a step size that blew up, or a log density without a maximum); check the target "
            "and the adapted step size"
        )
    const_all = screen.constant.all(axis=0) & screen.finite
    found += _split_line(const_all, screen.first, frozen, name)
    if n < 4:
        found.append(f"only {n} kept draws per chain: too few to judge convergence; run more draws (num_draws)")
        return found, frozen
    candidates = screen.finite & ~const_all
    index, subset = _checked(candidates, screen, c, n)
    if index.size == 0:
        return found, frozen
    result = _arviz_diagnostics(flat, index)
    scope = f" (checked the {index.size} of {k} coordinates most likely to fail)" if subset else ""
    if "rhat" in result:
        found += _rhat_line(result["rhat"], index, name, k, scope)
    least = np.minimum(result["bulk"], result["tail"])  # NaN (undefined) counts as failing
    threshold = MIN_ESS if c > 1 else MIN_ESS_SINGLE_CHAIN
    failed, listing = _worst(
        -least, least >= threshold, index, name, lambda j: f"bulk {result['bulk'][j]:.0f}, tail {result['tail'][j]:.0f}"
    )
    if failed:
        found.append(
            f"ESS below {threshold} for {failed} of {k} coordinates: {listing}{scope}: "
            "means and quantiles from these draws are noisy; run more draws (num_draws), or a sampler that mixes "
            "better"
        )
    return found, frozen


def _moments_mixing(moments: dict, name: Namer) -> tuple[list[str], np.ndarray]:
    """The checks a run that kept no draws allows: classic R-hat from per-chain running
    means and variances, chains stuck in different states, and the frozen chains.
    """
    c, n = len(moments["mean"]), int(moments["count"])
    mean, var = (np.asarray(moments[key], np.float64).reshape(c, -1) for key in ("mean", "var"))
    k = mean.shape[1]
    frozen = _frozen_chains(var == 0, mean)
    const_all = (var == 0).all(axis=0)
    found = _split_line(const_all, mean, frozen, name)
    if c > 1 and n > 1:
        rhat = _classic_rhat(mean[:, ~const_all], var[:, ~const_all], n)
        note = " (classic R-hat from running means and variances: the run kept no draws)"
        found += _rhat_line(rhat, np.flatnonzero(~const_all), name, k, note)
    return found, frozen


def _stuck(
    trace: Trace, frozen: np.ndarray | None, entry: Entry | None, unmixed: bool = False
) -> tuple[list[str], np.ndarray]:
    """Chains that never moved over the kept draws, and the mask of them: chains that accepted
    (almost) nothing, and a discrete sampler's chains whose accepted proposals were all the
    current state (a ``jump`` of 0 throughout). A sampler that draws exact conditionals
    (Gibbs) keeps the state where the conditional sits on one value, which says nothing
    wrong in itself: its chains count only where the run has not mixed (``unmixed``: its
    chains disagree), as chains that the other blocks hold in place; so do a run's chains that
    settled with its fallback's single-site moves tried at every step (:func:`_settled`).
    """
    accept = np.asarray(trace.stats["acceptance_rate"], np.float64)
    rate = accept.reshape(accept.shape[0], -1).mean(axis=1)
    stuck = rate <= STUCK_ACCEPTANCE
    exact = (entry is not None and entry.exact_conditionals) or _settled(trace, unmixed)
    jump = trace.stats.get("jump") if trace.thinning == 1 and (unmixed or not exact) else None
    standing = np.zeros_like(stuck) if jump is None else np.asarray(jump).reshape(len(rate), -1).max(axis=1) == 0
    standing &= ~stuck
    stuck |= standing
    if frozen is not None:
        stuck |= frozen
    if not stuck.any():
        return [], stuck
    chains = np.flatnonzero(stuck)
    rates = ", ".join(f"{rate[i]:.3f}" for i in chains[:_SHOWN])
    if standing[chains].all() and exact:
        return [
            f"{_chains(trace, chains)} never moved over the kept draws: every draw from the exact conditionals "
            "kept the current state while the run's chains disagree, so the other blocks hold these sites in place"
        ], stuck
    if standing[chains].all():
        return [
            f"{_chains(trace, chains)} never moved over the kept draws: the proposals accepted (acceptance rate "
            f"{rates}) were all the current state, so the first-order proposal misjudges the log density's "
            "changes here (a log density far from linear in the discrete entries); single-site 'gibbs' moves by "
            "exact conditionals, or write the log density linear in these entries (docs/mixed-models.md)"
        ], stuck
    return [
        f"{_chains(trace, chains)} never moved over the kept draws (acceptance rate {rates}): such chains say "
        "nothing about the target and the run has not converged; check that the log density is finite and "
        "not flat around the chains' positions, run more warm-up, or use another sampler"
    ], stuck


def _counts_cut_off(trace: Trace) -> list[str]:
    """The :class:`~gradmc.spaces.Count` entries whose kept draws reached the largest value
    their space keeps: the model allows larger values, which the space cut off.
    """
    space, draws = trace.space, _kept(trace)
    if draws is None:
        return []
    parts = space.parts.items() if isinstance(space, Product) else [("the draws", space)]
    found = []
    for name, part in parts:
        if not isinstance(part, Count):
            continue
        if trace.indices is not None:
            top = np.asarray(draws) == part.num_values - 1
        else:
            top = np.asarray(draws[..., space.slices[name]]) >= part.high - 0.5
        if top.any():
            chains = np.flatnonzero(top.reshape(top.shape[0], -1).any(axis=1))
            found.append(
                f"{name} reached {part.high}, the largest value of {part}, in {_chains(trace, chains)}: the model "
                "allows larger values, which the space cut off, so the draws may miss part of the posterior; "
                "raise the bound (gradmc.spaces.Count(d, high=...), or infer={'max_value': ...} on a NumPyro site)"
            )
    return found


#: Added to a block's stuck chains in a run without a joint move.
_JOINT_HINT = (
    "; where the blocks hold each other in place (a mixture whose components lie far apart), ask for the joint move "
    f"in every sweep, {{'{JOINT}': 'mode-shift'}} (--sampler {JOINT}=mode-shift), which moves them together"
)

_FALLBACK_LINE = (
    "its gradient proposal froze in warm-up (the chains moved in under 1% of the steps judged), so from the "
    "middle of the warm-up on every step added a single-site Metropolis move, which is what moved the chains "
    "(params['fallback']): the gradient misjudges this log density's changes (far from linear in the discrete "
    "entries). 'gibbs' moves by exact conditionals at a lower cost per step"
)


def _switched_on(trace: Trace, key: str) -> bool:
    """Whether the warm-up switched on a move in any chain, ``params[key]``: a discrete sampler's
    fallback move (``FALLBACK``, :mod:`gradmc.discrete.fallback`), a joint move (``JOINT``).
    """
    return isinstance(trace.params, dict) and bool(np.any(np.asarray(trace.params.get(key, False))))


def _settled(trace: Trace, unmixed: bool) -> bool:
    """Whether a run whose fallback move is on sat still where the target puts its mass: no
    chain moved over the kept draws although the fallback's single-site moves, scored by the
    log density itself, were tried at every step, and the chains agree (not ``unmixed``). A
    proposal that froze there froze because every other value is improbable (a site the data
    pin), not because the gradient misjudged the log density.
    """
    jump = trace.stats.get("jump")
    if not _switched_on(trace, FALLBACK) or unmixed or jump is None or trace.thinning != 1:
        return False
    return bool(np.max(np.asarray(jump)) == 0)


def _warmup(trace: Trace, judged: _Judged, unmixed: bool = False) -> tuple[list[str], np.ndarray]:
    """What went wrong in warm-up, and the mask of its chains: a discrete sampler that switched
    on its fallback move gets one line saying so, in place of the adaptation checks of the
    proposal that froze, unless the run settled where the target puts its mass
    (:func:`_settled`); any other, the failed adaptation of each tuned setting.
    """
    found, failed = [], np.zeros(trace.stats["acceptance_rate"].shape[0], bool)
    for tuned in judged.adapting():
        lines, chains = _tuned_adaptation(trace, tuned, judged.aim(tuned))
        found, failed = found + lines, failed | chains
    if not _switched_on(trace, FALLBACK):
        return found, failed
    return ([], np.zeros_like(failed)) if _settled(trace, unmixed) else ([_FALLBACK_LINE], np.ones_like(failed))


def _transitions(trace: Trace, judged: _Judged) -> list[str]:
    """Divergent transitions and non-finite proposals in the kept draws."""
    found = []
    for name, what, fix in (
        ("diverging", "divergent transitions", judged.divergence_fixes()),
        (
            "nonfinite",
            "proposals with a non-finite log density or gradient (rejected)",
            "the log density or its gradient is NaN or +inf somewhere the chains propose; return -inf outside "
            f"the support, or try {judged.smaller_steps()}",
        ),
    ):
        if name not in trace.stats:
            continue
        counts = np.asarray(trace.stats[name]).reshape(len(trace.stats[name]), -1).sum(axis=1)
        if counts.sum():
            chains = _chains(trace, np.flatnonzero(counts), counts)
            found.append(f"{int(counts.sum())} {what} in the kept draws, in {chains}; {fix}")
    return found


def _held_at_bound(trace: Trace, c: int) -> np.ndarray:
    """Chains whose tuned value moved in warm-up and was then held constant over its last
    quarter: the value reached a bound of its range (a tuning rule never holds still
    otherwise).
    """
    tuned = trace.warmup_stats.get("step_size")
    if tuned is None or not np.size(tuned):
        return np.zeros(c, bool)
    tuned = np.asarray(tuned, np.float64).reshape(c, -1)
    held = np.ptp(tuned[:, -max(tuned.shape[1] // 4, 1) :], axis=1) == 0
    return held & (tuned[:, 0] != tuned[:, -1])


def _tuned_adaptation(trace: Trace, tuned: Tuned, aim) -> tuple[list[str], np.ndarray]:
    """The failed adaptation of one tuned setting, and the mask of its chains."""
    c = trace.stats["acceptance_rate"].shape[0]
    none = np.zeros(c, bool)
    warm = trace.warmup_stats.get("acceptance_rate")
    name = tuned.param
    if warm is None or np.size(warm) == 0 or not isinstance(trace.params, dict) or name not in trace.params:
        return [], none
    value = np.asarray(trace.params[name], np.float64)  # per chain, (chain, ...)
    value = value.reshape(c, -1) if value.ndim and value.shape[0] == c else np.broadcast_to(value, (c, 1))
    warm = np.asarray(warm, np.float64).reshape(c, -1)
    late = warm[:, warm.shape[1] // 2 :]
    nonfinite = np.asarray(trace.warmup_stats.get("nonfinite", np.zeros_like(warm, bool)), bool).reshape(c, -1)
    finite = np.where(nonfinite[:, warm.shape[1] // 2 :], np.nan, late)  # a step size that overflowed
    with warnings.catch_warnings(action="ignore", category=RuntimeWarning):  # no finite proposal at all: NaN
        late, late_finite = np.nanmean(late, axis=1), np.nanmean(finite, axis=1)
    invalid = ~(np.isfinite(value) & (value > 0)).all(axis=1)
    start = np.asarray(trace.warmup_stats.get("step_size", np.full_like(warm, np.nan)), np.float64).reshape(c, -1)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        ratio = np.abs(np.log10(value[:, 0] / start[:, 0]))
    runaway = ratio > np.log10(MAX_ADAPTED_RATIO)
    invalid |= runaway
    high, low = late_finite >= 1 - STUCK_ACCEPTANCE, late <= STUCK_ACCEPTANCE
    late = np.where(high, late_finite, late)
    failed = invalid | high | low
    if isinstance(aim, int | float):  # a value held at its bound, accepting more than the target there,
        # on a target that is not flat (its log density varied along the chain): the proposal at the
        # bound is simply that good (AVG's ε at its cap on independent coordinates, where it is exact)
        logdensity = trace.warmup_stats.get("logdensity")
        varied = none if logdensity is None else np.ptp(np.asarray(logdensity, np.float64).reshape(c, -1), axis=1) > 0
        failed &= ~(_held_at_bound(trace, c) & (late_finite > aim) & varied & ~invalid)
    if not failed.any():
        return [], none
    chains = np.flatnonzero(failed)
    aim = f" (aiming at {aim})" if isinstance(aim, int | float) else ""
    values = ", ".join(f"{v:.3g}" for v in value[chains[:_SHOWN], 0])
    rates = ", ".join(f"{v:.2f}" for v in late[chains[:_SHOWN]])
    flat = high | (value[:, 0] == np.inf) | (runaway & (value[:, 0] > start[:, 0]))
    if flat[chains].any():
        why = "the log density may be flat near the chains (constant, or with a zero gradient)"
    else:
        why = (
            "proposals were (nearly) all rejected: the log density or its gradient may be NaN or infinite "
            "near the chains"
        )
    return [
        f"{name} adaptation did not converge in {_chains(trace, chains)}: the acceptance rate in the second half of "
        f"warm-up was {rates}{aim} and {name} ended at {values}; {why}. Check the target, run more warm-up, "
        f"or set {name} by hand with adapt=None"
    ], failed


def _acceptance(trace: Trace, judged: _Judged, skip: np.ndarray) -> list[str]:
    """A kept acceptance rate far from the one the warm-up aimed at (chains in ``skip``
    already reported).
    """
    tuned = next((t for t in judged.adapting() if isinstance(judged.aim(t), int | float)), None)
    if tuned is None or not trace.warmup_stats:
        return []
    aim, name = judged.aim(tuned), tuned.param
    accept = np.asarray(trace.stats["acceptance_rate"], np.float64)
    accept = accept.reshape(accept.shape[0], -1)
    if accept.shape[1] < MIN_DRAWS_FOR_ACCEPTANCE:
        return []
    rate = np.nanmean(accept, axis=1)
    far = np.abs(rate - aim) > ACCEPTANCE_TOLERANCE
    # held at the end of its range with acceptance to spare (PDHAMS's δ at its floor, rejection-free
    # with a learned W on a quadratic target; NCG's ε at its cap): not a failure
    far &= ~(_held_at_bound(trace, accept.shape[0]) & (rate > aim))
    chains = np.flatnonzero(far & ~skip)
    if not chains.size:
        return []
    rates = ", ".join(f"{rate[i]:.2f}" for i in chains[:_SHOWN])
    return [
        f"acceptance rate {rates} in {_chains(trace, chains)} is more than {ACCEPTANCE_TOLERANCE} away from "
        f"{tuned.aims_at}={aim}: the {name} adapted in warm-up does not suit the kept draws; run more warm-up "
        f"(num_warmup), or set {name} by hand with adapt=None"
    ]


def _block_views(trace: Trace) -> list[tuple[str, Trace, Entry | None]]:
    """A composed sampler's blocks (:mod:`gradmc.composed`: options ``{label: {"sampler": name,
    ...}}``, statistics ``label.KEY``, learned parameters ``params[label]``), each as a view of
    the run that the adaptation and acceptance checks read as a run of that sampler alone
    (the joint log density stands in for the block's); empty for any other run.
    """
    blocks = trace.options
    if not blocks or not all(isinstance(v, dict) and "sampler" in v for v in blocks.values()):
        return []
    by_name = {e.name: e for e in samplers()}
    views = []
    for label, choice in blocks.items():

        def part(stats, prefix=f"{label}."):
            own = {key[len(prefix) :]: value for key, value in stats.items() if key.startswith(prefix)}
            return {**{k: stats[k] for k in ("logdensity", "nonfinite") if k in stats}, **own}

        options = {key: value for key, value in choice.items() if key != "sampler"}
        params = trace.params.get(label) if isinstance(trace.params, dict) else None
        view = dataclasses.replace(
            trace,
            options=options,
            stats=part(trace.stats),
            warmup_stats=part(trace.warmup_stats),
            params=params,
            warnings=[],
        )
        views.append((label, view, by_name.get(choice["sampler"])))
    return views


def _joint_moved(trace: Trace) -> bool:
    """Whether a joint move (:mod:`gradmc.mode_shift`) took part in the kept draws: always when
    asked for, and when ``"auto"`` switched it on in warm-up (``params["joint"]``).
    """
    joint = trace.options.get(JOINT)
    return isinstance(joint, dict) and ("when" not in joint or _switched_on(trace, JOINT))


#: A block summed out of the continuous moves as linear whose draws were accepted less often than
#: this (its exact-conditional draw is accepted always where the log density is linear in it)
#: was not linear there.
SUMMED_ACCEPTANCE = 0.999


def _summed_out_problems(trace: Trace) -> list[str]:
    """A block the continuous moves summed out as linear in it (:func:`gradmc.composed.summed_out`)
    whose own draws say it is not: their MH test rejected some, where linearity accepts all.
    """
    found = []
    for label, choice in trace.options.items() if isinstance(trace.options, dict) else ():
        summed = choice.get(COLLAPSE) if isinstance(choice, dict) else None  # the summed block's label
        accept = trace.stats.get(f"{summed}.acceptance_rate") if isinstance(summed, str) else None
        if accept is None or trace.options.get(summed, {}).get("sampler") != LINEAR_CHOICE:
            continue
        rate = float(np.nanmean(np.asarray(accept)))
        if rate < SUMMED_ACCEPTANCE:
            found.append(
                f"block {summed} was summed out of {label}'s moves as if the log density were linear in it, but "
                f"its exact-conditional draws were accepted at a rate of {rate:.4f}, not 1: it is not linear "
                f"there, and the draws are not exact; run with {{'{COLLAPSE}': 'off'}} (--sampler {COLLAPSE}=off)"
            )
    return found


def _block_problems(trace: Trace, unmixed: bool) -> list[str]:
    """Each block's failed adaptation, stuck chains and acceptance far from its aim, its
    lines starting ``block LABEL (SAMPLER):``. Beside a joint move (:mod:`gradmc.mode_shift`),
    which moves every block, a block whose own moves stick is not a problem in itself.
    ``unmixed``: the run's chains disagree (:func:`_stuck`).
    """
    found = []
    joint = _joint_moved(trace)
    for label, view, entry in _block_views(trace):
        if label == JOINT:  # an extra move: its rejections cost nothing, the run's own checks judge the draws
            continue
        judged = _Judged.of(view, entry)
        lines, failed = _warmup(view, judged, unmixed)
        stuck_lines, stuck = _stuck(view, None, entry, unmixed)
        if joint:  # the joint move moves this block too: the whole run's checks judge it
            lines, stuck_lines = [line for line in lines if line != _FALLBACK_LINE], []
        else:
            stuck_lines = [line + _JOINT_HINT for line in stuck_lines]
        lines += stuck_lines + _acceptance(view, judged, failed | stuck)
        found += [f"block {label} ({trace.options[label]['sampler']}): {line}" for line in lines]
    return found


def run_warnings(trace: Trace, entry: Entry | None = None) -> list[str]:
    """The problems of a finished run, one line each (empty for a healthy run).

    Each line starts with the sampler's name, names the coordinates or chains concerned
    and suggests a fix. The module constants set the thresholds.

    Parameters
    ----------
    trace : Trace
        The run.
    entry : gradmc.registry.Entry, optional
        The sampler's registry entry: its builder's signature gives the defaults of its
        options, its declarations what the warm-up tuned (default: the registered sampler
        of ``trace.sampler``).

    Returns
    -------
    list of str
        One line per problem.
    """
    entry = _entry_of(trace, entry)
    judged = _Judged.of(trace, entry)
    draws = _kept(trace)
    frozen = None
    if draws is not None:
        draws = np.asarray(draws)
        mixing, frozen = _mixing(draws, _namer(trace, draws))
    elif trace.moments is not None:
        mixing, frozen = _moments_mixing(trace.moments, _namer(trace, None))
    else:
        mixing = []
    # the chains disagree: R-hat or split states, or chains frozen each in its own state
    unmixed = any(_DISAGREE in line for line in mixing) or (frozen is not None and bool(frozen.any()))
    if unmixed and draws is not None and trace.draws is not None:  # the likely cause first
        mixing = _relabelled_lines(np.asarray(trace.draws), trace.space) + mixing
    found, failed = _warmup(trace, judged, unmixed)
    stuck_lines, stuck = _stuck(trace, frozen, entry, unmixed)
    found += stuck_lines + _transitions(trace, judged) + mixing + _acceptance(trace, judged, failed | stuck)
    found += _block_problems(trace, unmixed) + _summed_out_problems(trace) + _counts_cut_off(trace)
    return [f"{trace.sampler}: {line}" for line in found]


def emit_warnings(trace: Trace, entry: Entry | None = None, stacklevel: int = 2) -> Trace:
    """Store :func:`run_warnings` in ``trace.warnings`` and raise each as a :class:`RunWarning`.

    Parameters
    ----------
    trace : Trace
        The run.
    entry : gradmc.registry.Entry, optional
        The sampler's registry entry (see :func:`run_warnings`).
    stacklevel : int
        Passed to :func:`warnings.warn`, so the warnings point at the caller's line.

    Returns
    -------
    Trace
        ``trace`` itself, with ``warnings`` filled in.
    """
    trace.warnings = run_warnings(trace, entry)
    for line in trace.warnings:
        warnings.warn(line, RunWarning, stacklevel=stacklevel + 1)
    return trace
