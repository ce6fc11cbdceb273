"""Moments of the draws against the truth: errors, MCSE z-scores, bias and variance over chains.

MCSE of any functional g of the draws is sd(g) / sqrt(ESS(g)), with ArviZ's ESS for the
mean (split chains, Geyer's initial monotone sequence) of the series g(x_t):

* mean of x_i: g = x_i;
* variance of x_i: g = (x_i - xbar_i)^2, whose average is the (ddof 0) variance;
* correlation r_ij: the delta-method linearisation of the sample correlation,
  g = u_i u_j - (r_ij / 2)(u_i^2 + u_j^2) with u = (x - xbar) / sd, so that
  r_hat - r ~ mean(g) - E[g] to first order.
"""

from __future__ import annotations

import numpy as np

from gradmc.base import Truth
from gradmc.diagnostics._common import as_draws, ess_mean, flat_coords

__all__ = ["moment_errors", "mcse_z", "moment_bias_variance"]


def _truth_arrays(truth, d: int):
    mean = None if truth.mean is None else np.asarray(truth.mean, dtype=np.float64).reshape(-1)
    var = truth.variance
    var = None if var is None else np.asarray(var, dtype=np.float64).reshape(-1)
    for name, arr in (("truth mean", mean), ("truth variance", var)):
        if arr is not None and arr.shape != (d,):
            raise ValueError(f"{name} has {arr.size} entries; the draws have {d} coordinates")
    return mean, var


def moment_errors(draws, truth) -> dict[str, float]:
    """Errors of the pooled mean and second moment E[x_i^2] against a :class:`~gradmc.base.Truth`.

    Keys (present when the truth knows the moment): ``mean_max_abs``, ``mean_rmse``,
    ``mean_max_rel`` (|error| / true sd), ``m2_max_abs``, ``m2_rmse``, ``m2_max_rel``
    (|error| / E[x_i^2]). RMSE is over coordinates.
    """
    x = flat_coords(as_draws(draws))
    d = x.shape[-1]
    mean, var = _truth_arrays(truth, d)
    out: dict[str, float] = {}
    if mean is not None:
        err = np.abs(x.mean(axis=(0, 1)) - mean)
        out.update(mean_max_abs=float(err.max()), mean_rmse=float(np.sqrt(np.mean(err**2))))
        if var is not None:
            out["mean_max_rel"] = float(np.max(err / np.sqrt(var)))
    if mean is not None and var is not None:
        m2 = var + mean**2
        err = np.abs(np.mean(x**2, axis=(0, 1)) - m2)
        out.update(
            m2_max_abs=float(err.max()),
            m2_rmse=float(np.sqrt(np.mean(err**2))),
            m2_max_rel=float(np.max(err / m2)),
        )
    return out


def mcse_z(draws, mean=None, cov=None, *, var=None, max_corr_dim: int = 10) -> dict[str, dict]:
    """z-scores (estimate - truth) / MCSE of means, variances and correlations.

    ``mean`` (d,), ``cov`` (d, d) or ``var`` (d,) are the exact moments; whatever is given
    is tested. A :class:`~gradmc.base.Truth` may be passed as ``mean`` instead.
    Correlations (needing ``cov``) are taken among the first ``max_corr_dim`` coordinates
    (d(d-1)/2 pairs grow fast). Returns ``{"mean"|"var"|"corr": {"index", "estimate",
    "truth", "mcse", "z"}}`` with arrays per quantity.
    """
    x = flat_coords(as_draws(draws, min_draws=4))
    c, n, d = x.shape
    if isinstance(mean, Truth):
        mean, cov, var = mean.mean, mean.cov, mean.variance
    if cov is not None:
        cov = np.asarray(cov, dtype=np.float64)
        if cov.shape != (d, d):
            raise ValueError(f"cov must be {d}x{d} to match the draws, got {cov.shape}")
        var = np.diag(cov)
    if mean is not None:
        mean = np.asarray(mean, dtype=np.float64).reshape(-1)
        if mean.shape != (d,):
            raise ValueError(f"mean must have {d} entries, got {mean.size}")
    if var is not None:
        var = np.asarray(var, dtype=np.float64).reshape(-1)
        if var.shape != (d,) or np.any(var <= 0):
            raise ValueError(f"var must be {d} positive numbers")
    xbar = x.mean(axis=(0, 1))
    centred = x - xbar
    blocks: list[tuple[str, list, np.ndarray, np.ndarray, np.ndarray]] = []
    if mean is not None:
        blocks.append(("mean", [(i,) for i in range(d)], x, xbar, mean))
    if var is not None:
        sq = centred**2
        blocks.append(("var", [(i,) for i in range(d)], sq, sq.mean(axis=(0, 1)), var))
    if cov is not None and min(d, max_corr_dim) >= 2:
        k = min(d, max_corr_dim)
        u = centred[..., :k] / centred[..., :k].std(axis=(0, 1))
        i, j = np.triu_indices(k, 1)
        prod = u[..., i] * u[..., j]
        r = prod.mean(axis=(0, 1))
        g = prod - 0.5 * r * (u[..., i] ** 2 + u[..., j] ** 2)
        true_r = cov[i, j] / np.sqrt(cov[i, i] * cov[j, j])
        blocks.append(("corr", list(zip(i.tolist(), j.tolist(), strict=False)), g, r, true_r))
    if not blocks:
        raise ValueError("give at least one of mean, cov or var")
    series = np.concatenate([b[2] for b in blocks], axis=-1)
    mcse = series.reshape(c * n, -1).std(axis=0, ddof=1) / np.sqrt(ess_mean(series))
    out, start = {}, 0
    for name, index, g, est, truth in blocks:
        se = mcse[start : start + g.shape[-1]]
        start += g.shape[-1]
        out[name] = {"index": index, "estimate": est, "truth": truth, "mcse": se, "z": (est - truth) / se}
    return out


def moment_bias_variance(draws, mean, second_moment, checkpoints) -> dict[str, dict[str, np.ndarray]]:
    """Squared bias and variance over chains of E[s_i], E[s_i^2], E[s_i s_j] (docs/discrete-hams.md §10.1).

    Each chain estimates the moments from its draws 1..t for every t in ``checkpoints``.
    ``mean`` (d,) and ``second_moment`` (d, d) = E[s s^T] are exact. Returns, for
    ``"mean"``, ``"square"`` (diagonal) and ``"cross"`` (pairs i < j), arrays of length
    len(checkpoints): ``bias2`` = mean over quantities of (chain-average - truth)^2 and
    ``var`` = mean over quantities of the variance over chains (ddof 0, so bias2 + var is
    the mean squared error of one chain's estimate).
    """
    x = flat_coords(as_draws(draws, min_draws=1))
    c, n, d = x.shape
    t = np.asarray(checkpoints, dtype=int).reshape(-1)
    if t.size == 0 or np.any(np.diff(t) <= 0) or t[0] < 1 or t[-1] > n:
        raise ValueError(f"checkpoints must be increasing integers in [1, {n}], got {checkpoints}")
    mean = np.asarray(mean, dtype=np.float64).reshape(-1)
    m2 = np.asarray(second_moment, dtype=np.float64)
    if mean.shape != (d,) or m2.shape != (d, d):
        raise ValueError(f"mean must be ({d},) and second_moment ({d}, {d}); got {mean.shape}, {m2.shape}")
    first = np.cumsum(x, axis=1)[:, t - 1] / t[None, :, None]  # (c, T, d)
    bounds = np.concatenate([[0], t])
    seg = [np.einsum("cni,cnj->cij", x[:, a:b], x[:, a:b]) for a, b in zip(bounds[:-1], bounds[1:], strict=False)]
    second = np.cumsum(np.stack(seg, axis=1), axis=1) / t[None, :, None, None]  # (c, T, d, d)
    iu = np.triu_indices(d, 1)
    estimates = {
        "mean": (first, mean),
        "square": (np.diagonal(second, axis1=-2, axis2=-1), np.diag(m2)),
        "cross": (second[..., iu[0], iu[1]], m2[iu]),
    }
    return {
        name: {"bias2": np.mean((est.mean(axis=0) - truth) ** 2, axis=-1), "var": np.mean(est.var(axis=0), axis=-1)}
        for name, (est, truth) in estimates.items()
        if est.shape[-1]  # no pairs for d = 1
    }
