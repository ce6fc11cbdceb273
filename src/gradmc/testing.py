"""Statistical assertions that the test suite uses to prove samplers correct.

* :func:`assert_moments_match` — MCSE z-tests of means, variances and correlations.
  **Threshold: Bonferroni.** With K quantities tested, each |z| is compared with the
  normal quantile z* = Phi^{-1}(1 - p / (2K)), so a correct sampler fails the whole
  assertion with probability <= p (asymptotically in the chain length). ``bonferroni=False``
  uses the per-quantity quantile Phi^{-1}(1 - p/2) instead.
* :func:`assert_tv_within_bound` — TV between the pooled empirical distribution of the
  draws and the exact one, below :func:`gradmc.diagnostics.tv_bound` at level p, with
  the per-state ESS of the indicators 1{s = x}.
"""

from __future__ import annotations

import numpy as np
from scipy.stats import norm

from gradmc.diagnostics._common import ess_mean, value_indices
from gradmc.diagnostics.moments import mcse_z
from gradmc.diagnostics.tv import tv_bound, tv_distance
from gradmc.enumeration import ExactDistribution

__all__ = ["assert_moments_match", "assert_tv_within_bound", "MAX_TV_STATES"]

MAX_TV_STATES = 4096


def _table(header: list[str], rows: list[list]) -> str:
    cells = [header] + [[f"{v:.4g}" if isinstance(v, float) else str(v) for v in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    return "\n".join("  ".join(c.rjust(w) for c, w in zip(r, widths, strict=False)) for r in cells)


def assert_moments_match(
    draws, mean=None, cov=None, *, var=None, p: float = 0.01, bonferroni: bool = True, max_corr_dim: int = 10
) -> dict:
    """Raise ``AssertionError`` (with a table) unless every |z| of :func:`mcse_z` is below z*.

    Returns the :func:`mcse_z` result, with ``"threshold"`` added, when it passes.

    Parameters
    ----------
    draws : array_like
        ``(chain, draw, *event)``.
    mean, cov : array_like, optional
        The true mean and covariance.
    var : array_like, optional
        The true variances (when ``cov`` is not known).
    p : float
        The level of the whole assertion.
    bonferroni : bool
        Split ``p`` over the quantities tested.
    max_corr_dim : int
        Test correlations only up to this dimension.
    """
    if not 0 < p < 1:
        raise ValueError(f"p must be in (0, 1), got {p}")
    result = mcse_z(draws, mean, cov, var=var, max_corr_dim=max_corr_dim)
    num = sum(len(r["z"]) for r in result.values())
    threshold = float(norm.ppf(1 - p / (2 * num if bonferroni else 2)))
    rows = []
    for name, r in result.items():
        for idx, est, tru, se, z in zip(r["index"], r["estimate"], r["truth"], r["mcse"], r["z"], strict=False):
            rows.append([name, ",".join(map(str, idx)), float(est), float(tru), float(se), float(z)])
    bad = [row for row in rows if not abs(row[-1]) < threshold]
    if bad:
        bad.sort(key=lambda row: -abs(row[-1]) if np.isfinite(row[-1]) else -np.inf)
        rule = f"Bonferroni over {num} quantities" if bonferroni else "per quantity"
        raise AssertionError(
            f"{len(bad)} of {num} moments differ from the truth: |z| >= {threshold:.3f} (p = {p}, {rule})\n"
            + _table(["moment", "index", "estimate", "truth", "mcse", "z"], bad[:20])
        )
    result["threshold"] = threshold
    return result


def assert_tv_within_bound(draws, exact, p: float = 0.01) -> tuple[float, float]:
    """Raise ``AssertionError`` unless TV(pooled empirical, exact) <= tv_bound at level ``p``.

    ``exact`` is an :class:`~gradmc.diagnostics.ExactDistribution` or a target's
    :class:`~gradmc.enumeration.Enumeration`. ``draws`` (chain, draw, d) with
    entries in its values (or one-hot rows (chain, draw, d, k)). The
    ESS of each state's indicator is ArviZ's (split chains, all chains together), capped at
    the number of draws; a state whose indicator never changes gets the smallest ESS of the
    others. Returns (tv, bound).

    Parameters
    ----------
    draws : array_like
        Discrete draws.
    exact : ExactDistribution or Enumeration
        The exact distribution.
    p : float
        The level of the bound.
    """
    if not isinstance(exact, ExactDistribution):
        exact = ExactDistribution.from_enumeration(exact)
    idx = value_indices(draws, exact.values)
    c, n, d = idx.shape
    if d != exact.d:
        raise ValueError(f"draws have {d} coordinates; the exact distribution has {exact.d}")
    num_states = exact.probs.size
    if num_states > MAX_TV_STATES:
        raise ValueError(
            f"{num_states} states is too many for a joint TV test (limit {MAX_TV_STATES}); use tv_marginals"
        )
    codes = np.ravel_multi_index(tuple(idx[..., i] for i in range(d)), (exact.values.size,) * d, order="F")
    counts = np.bincount(codes.ravel(), minlength=num_states).astype(np.float64)
    ess = np.empty(num_states)
    chunk = max(1, 10_000_000 // (c * n))
    for start in range(0, num_states, chunk):
        states = np.arange(start, min(start + chunk, num_states))
        ess[states] = ess_mean((codes[..., None] == states).astype(np.float64))
    constant = (counts == 0) | (counts == c * n)
    ess = np.minimum(ess, c * n)
    ess[constant] = np.min(ess[~constant]) if np.any(~constant) else c * n
    tv = tv_distance(counts, exact.probs)
    bound = tv_bound(num_states, ess, p, probs=exact.probs)
    if not tv <= bound:
        freq = counts / counts.sum()
        worst = np.argsort(-np.abs(freq - exact.probs))[:8]
        states = np.stack(np.unravel_index(worst, (exact.values.size,) * d, order="F"), axis=-1)
        rows = [
            [str(exact.values[s].tolist()), float(freq[w]), float(exact.probs[w]), float(ess[w])]
            for s, w in zip(states, worst, strict=False)
        ]
        raise AssertionError(
            f"TV {tv:.4g} > bound {bound:.4g} (p = {p}, {c}x{n} draws, min ESS {ess.min():.4g})\n"
            + _table(["state", "empirical", "exact", "ess"], rows)
        )
    return tv, bound
