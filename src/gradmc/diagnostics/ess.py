"""Effective sample size, R-hat and MCSE: the per-coordinate summary of a run.

**Why ArviZ and not BlackJAX's jittable diagnostics.** BlackJAX 1.7.1 does ship
rank-normalised ``ess_bulk``, ``ess_tail`` and ``rhat`` (Vehtari et al. 2021), but
(i) it has no MCSE; (ii) its ``ess_tail`` documents a tie-handling defect — the upper-tail
indicator is 1(x >= q) instead of 1(x <= q) — which changes the answer on tied draws, i.e.
on every discrete sampler in this library; (iii) it runs in JAX's default float32, while
autocovariance sums over long chains want float64. Diagnostics run once, on the host,
after sampling, so being jittable buys nothing. ArviZ 0.23 is the reference
implementation of Vehtari et al., computes in float64 NumPy, and gives bulk/tail ESS,
rank-normalised split R-hat and MCSE from one ``(chain, draw, d)`` array.

The Geyer ESS of one scalar statistic per chain (:func:`geyer_ess`) is written here in
NumPy with an FFT, reproducing ``tfp.mcmc.effective_sample_size(...,
filter_beyond_positive_pairs=True)`` as Rhodes & Gutmann (2022, App. J) used it.
"""

from __future__ import annotations

import warnings

import numpy as np

from gradmc.diagnostics._common import (
    arviz,
    arviz_ess,
    as_draws,
    autocovariance_sums,
    column,
    coord_names,
    flat_coords,
    scalar_or_array,
)

__all__ = [
    "named_summary",
    "summary",
    "format_summary",
    "ess_stats",
    "ess_per_second",
    "ess_per_grad",
    "geyer_ess",
    "ess_l1_statistic",
]


def summary(draws, truth=None, *, max_coords: int | None = None) -> dict[str, np.ndarray | list]:
    """Per-coordinate summary of draws shaped (chain, draw, *event).

    Returns columns (each of length ``num_coords``): ``name``, ``mean``, ``sd``,
    ``mcse_mean``, ``mcse_sd``, ``ess_bulk``, ``ess_tail`` (NaN for a coordinate that never
    changes), ``r_hat`` (rank-normalised split R-hat; NaN for a single chain), and, when
    ``truth`` (a :class:`gradmc.base.Truth`) knows them, ``true_mean``, ``true_sd`` and
    ``z_mean = (mean - true_mean) / mcse_mean``.
    ``max_coords`` keeps only the first coordinates (event flattened in C order).
    """
    x = as_draws(draws, min_draws=4)
    names = coord_names(x.shape[2:])
    flat = flat_coords(x)
    if max_coords is not None:
        if int(max_coords) < 1:
            raise ValueError(f"max_coords must be >= 1, got {max_coords}")
        flat, names = flat[:, :, : int(max_coords)], names[: int(max_coords)]
    az, k = arviz(), flat.shape[-1]
    with warnings.catch_warnings(action="ignore"):  # "more chains than draws" and similar shape notes
        ds = az.convert_to_dataset(flat)
        table = {
            "name": names,
            "mean": flat.mean(axis=(0, 1)),
            "sd": flat.reshape(-1, k).std(axis=0, ddof=1),
            "mcse_mean": column(az.mcse(ds, method="mean")),
            "mcse_sd": column(az.mcse(ds, method="sd")),
            "ess_bulk": column(az.ess(ds, method="bulk")),
            "ess_tail": column(az.ess(ds, method="tail")),
            "r_hat": column(az.rhat(ds)),
        }
    # a coordinate that never changes has no autocorrelation to count its draws by
    constant = table["sd"] == 0
    table["ess_bulk"][constant] = table["ess_tail"][constant] = np.nan
    if truth is not None and truth.mean is not None:
        table["true_mean"] = np.asarray(truth.mean, dtype=np.float64).reshape(-1)[:k]
        table["z_mean"] = (table["mean"] - table["true_mean"]) / table["mcse_mean"]
    if truth is not None and truth.variance is not None:
        table["true_sd"] = np.sqrt(np.asarray(truth.variance, dtype=np.float64).reshape(-1)[:k])
    return table


def named_summary(variables: dict, *, max_coords: int | None = None) -> dict[str, np.ndarray | list]:
    """:func:`summary` of named variables ``{name: (chain, draw, *shape)}`` (what
    ``Trace.posterior()`` returns), coordinates named ``mu``, ``theta[3]``, ``spins[1,2]``.

    Parameters
    ----------
    variables : dict of str to ndarray
        The named draws.
    max_coords : int, optional
        Keep only the first coordinates, in the order of ``variables``.
    """
    blocks, names = [], []
    for name, value in variables.items():
        value = np.asarray(value)
        block = value.reshape(*value.shape[:2], -1)
        block_names = coord_names(value.shape[2:], name)
        if max_coords is not None:
            room = max(int(max_coords) - len(names), 0)
            block, block_names = block[:, :, :room], block_names[:room]
        blocks.append(np.asarray(block, np.float64))
        names += block_names
    table = summary(np.concatenate(blocks, axis=-1))
    table["name"] = names
    return table


def format_summary(table: dict, digits: int = 3) -> str:
    """A plain-text, aligned rendering of :func:`summary`'s columns."""
    cols = list(table)
    rows = [
        [str(v) if c == "name" else f"{v:.{digits}g}" for c, v in zip(cols, vals, strict=False)]
        for vals in zip(*table.values(), strict=False)
    ]
    widths = [max(len(c), *(len(r[i]) for r in rows)) if rows else len(c) for i, c in enumerate(cols)]
    lines = ["  ".join(c.rjust(w) for c, w in zip(cols, widths, strict=False))]
    lines += ["  ".join(v.rjust(w) for v, w in zip(r, widths, strict=False)) for r in rows]
    return "\n".join(lines)


def ess_stats(draws, method: str = "bulk") -> dict[str, float]:
    """Minimum, median and maximum ESS (``method`` = "bulk" or "tail") over coordinates."""
    if method not in ("bulk", "tail"):
        raise ValueError(f"method must be 'bulk' or 'tail', got {method!r}")
    ess = arviz_ess(flat_coords(as_draws(draws, min_draws=4)), method)
    return {"min": float(np.min(ess)), "median": float(np.median(ess)), "max": float(np.max(ess))}


def _ess_per(ess, amount, what: str):
    if not np.all(np.asarray(amount) > 0):
        raise ValueError(f"{what} must be positive, got {amount}")
    return scalar_or_array(np.asarray(ess, dtype=np.float64) / np.asarray(amount, dtype=np.float64))


def ess_per_second(ess, seconds):
    """ESS divided by wall-clock seconds (``seconds`` > 0)."""
    return _ess_per(ess, seconds, "seconds")


def ess_per_grad(ess, num_grad_evals):
    """ESS divided by the number of log-density+gradient evaluations (> 0)."""
    return _ess_per(ess, num_grad_evals, "num_grad_evals")


def _geyer_tau(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Integrated autocorrelation time of each row of ``x`` (chains, draws), and its last lag.

    Geyer's initial positive sequence, as tfp's ``filter_beyond_positive_pairs=True``:
    with S_k = sum_t (x_t - xbar)(x_{t+k} - xbar),
    tau = -1 + 2 sum_{k <= 2K+1} S_k / S_0, where the pairs (2j, 2j+1) are kept up to the
    first pair whose (unbiased, S_k/(n-k)) autocorrelations sum to a negative number.
    """
    n = x.shape[-1]
    s = autocovariance_sums(x)
    with np.errstate(invalid="ignore", divide="ignore"):
        biased = s / s[..., :1]
        unbiased = biased * n / (n - np.arange(n))
    npairs = n // 2

    def pair(a):  # sums of lags (0, 1), (2, 3), ...; an odd last lag is dropped
        return a[..., : 2 * npairs].reshape(*a.shape[:-1], npairs, 2).sum(-1)

    keep = np.cumsum(pair(unbiased) < 0, axis=-1) == 0
    tau = -1.0 + 2.0 * np.sum(pair(biased) * keep, axis=-1)
    last_lag = 2 * keep.sum(axis=-1) - 1
    return tau, last_lag


def geyer_ess(x) -> np.ndarray:
    """ESS of each chain of a scalar series ``x`` shaped (chain, draw) (or (draw,)).

    n / tau with tau from Geyer's initial positive sequence (see :func:`_geyer_tau`);
    a chain whose statistic never changes has no defined ESS and gives NaN (as tfp).
    """
    arr = np.asarray(x, dtype=np.float64)
    if arr.ndim not in (1, 2) or arr.shape[-1] < 4:
        raise ValueError(f"x must be shaped (chain, draw) or (draw,) with >= 4 draws, got {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError("x has non-finite entries")
    tau, _ = _geyer_tau(arr)
    with np.errstate(invalid="ignore", divide="ignore"):
        return arr.shape[-1] / tau


def ess_l1_statistic(draws, reference_state) -> np.ndarray:
    """Per-chain ESS of the statistic ||s - s_ref||_1 (Rhodes & Gutmann 2022, App. J).

    ``draws`` (chain, draw, *event); ``reference_state`` has the event shape (a random
    point of the space, chosen by the caller). Returns (chain,) Geyer ESS values.
    """
    x = as_draws(draws, min_draws=4)
    ref = np.asarray(reference_state, dtype=np.float64)
    if ref.shape != x.shape[2:]:
        raise ValueError(f"reference_state must have the event shape {x.shape[2:]}, got {ref.shape}")
    return geyer_ess(flat_coords(np.abs(x - ref)).sum(-1))
