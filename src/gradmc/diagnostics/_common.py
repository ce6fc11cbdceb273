"""Input checks and small shared pieces of the diagnostics (host side, NumPy).

Draws are always shaped ``(chain, draw, *event)``, the ArviZ convention.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import warnings

import numpy as np
from scipy.fft import irfft, next_fast_len, rfft

from gradmc.enumeration import check_values

#: ArviZ 0.23's once-a-day notice of its coming refactor, raised when it is imported
_ARVIZ_NOTICE = r"\s*ArviZ is undergoing a major refactor"


def arviz():
    """Import ArviZ lazily (it costs 1-2 s: SciPy's statistics, xarray, matplotlib) and
    without its once-a-day import notice."""
    if "arviz" not in sys.modules:  # the notice comes with the first import only
        warnings.filterwarnings("ignore", message=_ARVIZ_NOTICE, category=FutureWarning)
    import arviz as az

    return az


def preload_arviz() -> None:
    """Start importing ArviZ in a background thread, so that the checks after a run find it
    loaded: the import overlaps the run's compilation, which releases the interpreter. A
    failed background import is left to the checks' own import to report."""
    if "arviz" in sys.modules:
        return

    def load():
        with contextlib.suppress(Exception):  # reported by the foreground import, if it fails there too
            arviz()

    threading.Thread(target=load, name="gradmc-import-arviz", daemon=True).start()


def as_draws(draws, *, what: str = "draws", min_draws: int = 2, finite: bool = True) -> np.ndarray:
    """``draws`` as a float64 array shaped (chain, draw, *event), or a ``ValueError``."""
    arr = np.asarray(draws)
    if arr.ndim < 2:
        raise ValueError(f"{what} must be shaped (chain, draw, *event), got shape {arr.shape}")
    if not (np.issubdtype(arr.dtype, np.number) or arr.dtype == bool):
        raise ValueError(f"{what} must be numeric, got dtype {arr.dtype}")
    if arr.shape[1] < min_draws:
        raise ValueError(f"{what} needs at least {min_draws} draws per chain, got shape {arr.shape}")
    arr = arr.astype(np.float64)
    if finite and not np.all(np.isfinite(arr)):
        bad = int(np.size(arr) - np.count_nonzero(np.isfinite(arr)))
        raise ValueError(f"{what} has {bad} non-finite entries")
    return arr


def flat_coords(draws: np.ndarray) -> np.ndarray:
    """(chain, draw, *event) -> (chain, draw, num_coords); a scalar series gets one coordinate."""
    return draws.reshape(draws.shape[0], draws.shape[1], -1)


def coord_names(event_shape: tuple[int, ...], prefix: str = "x") -> list[str]:
    """``x[0]``, ``x[1]``, ... (``x[i,j]`` for matrix events) in C order."""
    if not event_shape:
        return [prefix]
    return [f"{prefix}[{','.join(map(str, idx))}]" for idx in np.ndindex(*event_shape)]


def scalar_or_array(x: np.ndarray):
    """A 0-d result as a float, any other as the array itself."""
    return float(x) if np.ndim(x) == 0 else x


def column(result) -> np.ndarray:
    """The float64 values, flat, of an ArviZ result for the draws of :func:`arviz_ess` (its variable ``x``)."""
    return np.asarray(result["x"].values, dtype=np.float64).reshape(-1)


def arviz_ess(series: np.ndarray, method: str) -> np.ndarray:
    """ArviZ's ESS (``method``: "mean", "bulk", "tail", ...) of each column of ``series``
    (chain, draw, k), shape (k,), without ArviZ's notes on shapes ("more chains than draws")."""
    az = arviz()
    with warnings.catch_warnings(action="ignore"):
        return column(az.ess(az.convert_to_dataset(np.asarray(series, dtype=np.float64)), method=method))


def ess_mean(series: np.ndarray) -> np.ndarray:
    """ArviZ's ESS for the mean (split chains, Geyer initial monotone sequence) of each column.

    ``series`` is (chain, draw, k); returns (k,). Used for the MCSE of any functional:
    MCSE(g) = sd(g) / sqrt(ESS(g)).
    """
    return arviz_ess(series, "mean")


def autocovariance_sums(x: np.ndarray) -> np.ndarray:
    """``S_k = sum_t (x_t - xbar)(x_{t+k} - xbar)`` for k = 0..n-1 of each row of ``x`` (..., n),
    by one FFT over all rows."""
    n = x.shape[-1]
    centred = x - x.mean(axis=-1, keepdims=True)
    size = next_fast_len(2 * n)
    spectrum = rfft(centred, size, axis=-1)
    return irfft(spectrum * np.conj(spectrum), size, axis=-1)[..., :n]


def mean_kl(q, p) -> np.ndarray:
    """(1/d) sum_i KL(q_i || p_i) over the last two axes (d, k), with 0 log(0/p) = 0."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(q > 0, q * (np.log(q) - np.log(p)), 0.0).sum(axis=-1).mean(axis=-1)


def value_indices(draws, values) -> np.ndarray:
    """Map discrete draws to integer value indices, shaped (chain, draw, d).

    ``draws`` is (chain, draw, d) with entries in ``values``, or (chain, draw, d, k)
    one-hot rows (categorical), with ``k == len(values)``.
    """
    v = check_values(values)
    arr = np.asarray(draws)
    if arr.ndim == 4:
        if arr.shape[-1] != v.size:
            raise ValueError(f"one-hot draws have {arr.shape[-1]} categories; values has {v.size}")
        if not (np.all((arr == 0) | (arr == 1)) and np.all(arr.sum(-1) == 1)):
            raise ValueError("one-hot draws must have exactly one 1 per row and zeros elsewhere")
        return np.argmax(arr, axis=-1)
    if arr.ndim != 3:
        raise ValueError(
            f"discrete draws must be (chain, draw, d) or one-hot (chain, draw, d, k), got shape {arr.shape}"
        )
    arr = arr.astype(np.float64)
    step = np.diff(v)
    if np.allclose(step, step[0], rtol=1e-9, atol=0):  # evenly spaced values: no search needed
        idx = np.clip(np.rint((arr - v[0]) / step[0]).astype(np.int64), 0, v.size - 1)
    else:
        idx = np.clip(np.searchsorted(v, arr), 0, v.size - 1)
    tol = 1e-6 * max(1.0, float(np.max(np.abs(v))))
    ok = np.abs(v[idx] - arr) <= tol
    if not np.all(ok):
        bad = arr[~ok].ravel()[:3]
        raise ValueError(
            f"draws contain values outside the value set, e.g. {bad.tolist()}; expected one of {v.tolist()}"
        )
    return idx
