r"""Total-variation distance of empirical distributions, and how large it may be by chance.

**The bound** (:func:`tv_bound`). Let p be a distribution on K states and p_hat the
frequencies of n independent draws. TV = (1/2) sum_x |p_hat_x - p_x|.

1. Expectation. By Jensen, E|p_hat_x - p_x| <= sqrt(Var p_hat_x) = sqrt(p_x (1 - p_x) / n),
   so E[TV] <= (1/2) sum_x sqrt(p_x (1 - p_x) / n). Without p, Cauchy–Schwarz gives
   sum_x sqrt(p_x (1 - p_x)) <= sqrt(K sum_x p_x (1 - p_x)) <= sqrt(K - 1), so
   E[TV] <= (1/2) sqrt((K - 1) / n).
2. Concentration. TV is a function of the n draws, and changing one draw moves one unit
   of mass 1/n from a state to another, changing TV by at most 1/n. McDiarmid's inequality
   gives P(TV - E[TV] >= t) <= exp(-2 n t^2), so with probability >= 1 - p,
   TV <= E[TV] + sqrt(log(1/p) / (2 n)).

For a Markov chain, n is replaced by the effective sample size. For the expectation term
this is the usual Var p_hat_x ~ p_x (1 - p_x) / ESS_x with ESS_x the ESS of the indicator
1{s = x}. For the concentration term it is a heuristic, exact for a chain that repeats each
of ESS independent draws n/ESS times (each block then moves TV by at most 1/ESS). The
bound is therefore approximate for correlated draws, exact-in-form for independent ones.
"""

from __future__ import annotations

from itertools import combinations

import numpy as np

from gradmc.diagnostics._common import scalar_or_array, value_indices
from gradmc.enumeration import ExactDistribution

__all__ = ["tv_distance", "tv_bound", "tv_marginals"]


def tv_distance(empirical_counts, exact_probs) -> np.ndarray | float:
    """(1/2) sum_x |counts_x / sum(counts) - p_x| along the last axis."""
    counts = np.asarray(empirical_counts, dtype=np.float64)
    p = np.asarray(exact_probs, dtype=np.float64)
    if counts.shape[-1] != p.shape[-1]:
        raise ValueError(f"counts have {counts.shape[-1]} states; exact_probs has {p.shape[-1]}")
    if np.any(counts < 0) or np.any(p < 0):
        raise ValueError("counts and probabilities must be non-negative")
    total = counts.sum(axis=-1, keepdims=True)
    if np.any(total <= 0):
        raise ValueError("empirical_counts must contain at least one draw")
    tv = 0.5 * np.abs(counts / total - p / p.sum(axis=-1, keepdims=True)).sum(axis=-1)
    return scalar_or_array(tv)


def tv_bound(num_states: int, ess, p: float = 0.01, probs=None) -> float:
    """TV that an empirical distribution with effective sample size ``ess`` exceeds w.p. <= ``p``.

    ``E-term + sqrt(log(1/p) / (2 min(ess)))`` (module docstring). ``ess`` is a scalar or
    one value per state; with ``probs`` (the exact p_x) the E-term is
    (1/2) sum_x sqrt(p_x (1 - p_x) / ess_x), else (1/2) sqrt((K - 1) / ess).
    """
    if int(num_states) < 1:
        raise ValueError(f"num_states must be >= 1, got {num_states}")
    if not 0 < p < 1:
        raise ValueError(f"p must be in (0, 1), got {p}")
    ess = np.asarray(ess, dtype=np.float64)
    if np.any(~np.isfinite(ess)) or np.any(ess <= 0):
        raise ValueError("ess must be positive and finite")
    if probs is None:
        expected = 0.5 * np.sqrt((num_states - 1) / np.min(ess))
    else:
        pr = np.asarray(probs, dtype=np.float64)
        if pr.shape != (int(num_states),):
            raise ValueError(f"probs must have {num_states} entries, got shape {pr.shape}")
        expected = 0.5 * np.sum(np.sqrt(pr * (1 - pr) / np.broadcast_to(ess, pr.shape)))
    return float(expected + np.sqrt(np.log(1 / p) / (2 * np.min(ess))))


def _subset_table(exact, subset: tuple[int, ...], k: int) -> np.ndarray:
    table = np.asarray(exact.marginal(subset) if isinstance(exact, ExactDistribution) else exact(subset))
    if table.shape != (k,) * len(subset):
        raise ValueError(f"the exact marginal of {subset} must have shape {(k,) * len(subset)}, got {table.shape}")
    table = table.reshape(-1).astype(np.float64)
    if np.any(table < 0) or abs(table.sum() - 1.0) > 1e-5:
        raise ValueError(
            f"the exact marginal of {subset} must be non-negative and sum to 1 (sums to {table.sum():.6g})"
        )
    return table


def tv_marginals(draws, values, exact, order: int = 1, *, subsets=None, checkpoints=None) -> np.ndarray:
    """TV between each chain's empirical ``order``-variate marginals and the exact ones.

    ``exact`` is an :class:`ExactDistribution` (or a target's ``Enumeration``), the joint
    probabilities of all k^d states in enumeration order (see :mod:`gradmc.enumeration`), or
    a function ``subset -> table`` of shape (k,) * order over the value grid (e.g. a closed-form marginal). ``subsets``
    defaults to all ``order``-subsets of the coordinates. Returns (chain, num_subsets); with
    ``checkpoints`` (increasing draw counts t), (len(checkpoints), chain, num_subsets) using
    the draws 1..t of each chain (docs/discrete-hams.md §10.1).

    When a marginal has more cells than a chain has draws, only visited cells are touched:
    TV = (1/2)(1 + sum_{visited x} (|q_x - p_x| - p_x)). The cost per subset is
    O(chains * draws + len(checkpoints) * chains * min(cells, draws)).
    """
    idx = value_indices(draws, values)
    c, n, d = idx.shape
    k = np.asarray(values).size
    if subsets is None:
        if not 1 <= int(order) <= d:
            raise ValueError(f"order must be in [1, {d}], got {order}")
        subsets = list(combinations(range(d), int(order)))
    subsets = [tuple(int(i) for i in s) for s in subsets]
    if hasattr(exact, "log_probs") and hasattr(exact, "space"):  # a target's Enumeration
        exact = ExactDistribution.from_enumeration(exact)
    elif not callable(exact) and not isinstance(exact, ExactDistribution):
        probs = np.asarray(exact, dtype=np.float64).reshape(-1)
        if probs.size != k**d:
            raise ValueError(f"a joint distribution over {k}^{d} states needs {k**d} probabilities, got {probs.size}")
        exact = ExactDistribution(values=np.asarray(values, dtype=np.float64), d=d, probs=probs, log_normaliser=0.0)
    t = np.asarray([n] if checkpoints is None else checkpoints, dtype=np.int64).reshape(-1)
    if t.size == 0 or np.any(np.diff(t) <= 0) or t[0] < 1 or t[-1] > n:
        raise ValueError(f"checkpoints must be increasing integers in [1, {n}], got {checkpoints}")
    out = np.empty((t.size, c, len(subsets)))
    for s, subset in enumerate(subsets):
        p = _subset_table(exact, subset, k)
        cells = p.size
        codes = np.ravel_multi_index(tuple(idx[..., i] for i in subset), (k,) * len(subset))  # (c, n)
        # one group per (chain, cell): all cells when few, else only the visited ones
        keys = codes + cells * np.arange(c)[:, None]
        if cells <= n:
            group, keys = keys, np.arange(c * cells)
        else:
            keys, group = np.unique(keys, return_inverse=True)
            group = group.reshape(c, n)
        group_row, group_p = keys // cells, p[keys % cells]
        counts = np.zeros(keys.size)
        for a, (t0, t1) in enumerate(zip(np.concatenate([[0], t[:-1]]), t, strict=False)):
            counts += np.bincount(group[:, t0:t1].ravel(), minlength=keys.size)
            contrib = np.where(counts > 0, np.abs(counts / t1 - group_p) - group_p, 0.0)
            out[a, :, s] = 0.5 * (1.0 + np.bincount(group_row, contrib, minlength=c))
    return out[0] if checkpoints is None else out
