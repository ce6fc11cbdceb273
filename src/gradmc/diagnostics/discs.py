"""The DISCS benchmark's sampling metric (Goshvadi et al. 2023, ``evaluators/ess_eval.py``).

Protocol: each chain's state after every step is mapped to one number, its distance to
a fixed reference state (Hamming distance for binary states, the L1 distance of the
integer labels for categorical ones: :func:`discs_statistic`); the first half of each
chain is discarded; the ESS of what is left is computed per chain (:func:`discs_ess`),
NaN (a chain whose statistic never moved) becomes 1, and the chains' mean ESS is divided
by the number of steps kept (ESS per step) or by the log-density-and-gradient
evaluations spent on them (:func:`discs_ess_per_step`).

:func:`discs_ess` is TensorFlow Probability's ``mcmc.effective_sample_size`` with its
default arguments (``filter_threshold=0``, no ``filter_beyond_lag``, no cross-chain
pooling), which DISCS calls on a ``(steps, chains)`` array. With the centred sums
``S_k = Σ_t (x_t − x̄)(x_{t+k} − x̄)`` of one chain of length ``n``:

* TFP's auto-correlation is ``R_k = (S_k / (n − k)) / (S_0 / n)``;
* the sum is truncated before the first lag ``K`` with ``R_K < 0`` (the threshold
  filter: a lag with ``R_k`` exactly 0 is kept);
* ``ESS = n / (−1 + 2 Σ_{k<K} (n − k)/n · R_k) = n / (−1 + 2 Σ_{k<K} S_k / S_0)``.

Here it runs in float64 NumPy with one FFT over all chains (DISCS runs TFP in float32;
the two agree to float32 round-off).
"""

from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp
import numpy as np

from gradmc.diagnostics._common import autocovariance_sums
from gradmc.spaces import Categorical, DiscreteSpace

__all__ = ["DiscsESS", "discs_ess", "discs_ess_per_step", "discs_statistic", "discs_statistic_fn"]


class DiscsESS(NamedTuple):
    """The DISCS metric of one run.

    Attributes
    ----------
    ess_per_chain : numpy.ndarray
        ``(chains,)`` ESS of the statistic over the kept steps of each chain (NaN -> 1).
    ess_mean : float
        Mean over chains (DISCS's ``ESS``).
    ess_std : float
        Standard deviation over chains (population, as DISCS's ``ESS_std``).
    ess_per_step : float
        ``ess_mean / num_steps`` (DISCS's ``ESS_per_step`` for an even chain length).
    num_steps : int
        Steps kept per chain (the second half).
    ess_per_eval : float or None
        ``ess_mean`` per log-density-and-gradient evaluation of the kept steps, when an
        evaluation count was given.
    """

    ess_per_chain: np.ndarray
    ess_mean: float
    ess_std: float
    ess_per_step: float
    num_steps: int
    ess_per_eval: float | None


def _indices(x: np.ndarray, space: DiscreteSpace, what: str) -> np.ndarray:
    """Value indices ``(..., d)`` of positions ``x`` ``(..., *event_shape)``, checking that
    every entry is a value of ``space`` (to within 1e-5 relative).
    """
    if not np.all(np.isfinite(x)):
        raise ValueError(f"{what} has non-finite entries; expected values in {space}")
    if isinstance(space, Categorical):
        one_hot = np.all((x == 0.0) | (x == 1.0), axis=-1) & (x.sum(axis=-1) == 1.0)
        if not np.all(one_hot):
            bad = np.argwhere(~one_hot)[0]
            raise ValueError(f"{what} has a row at {tuple(int(i) for i in bad)} that is not one-hot; expected {space}")
        return np.argmax(x, axis=-1)
    values = np.asarray(space.values, np.float64)
    mid = 0.5 * (values[1:] + values[:-1])
    idx = np.searchsorted(mid, x, side="left")
    tol = 1e-5 * max(1.0, float(np.abs(values).max()))
    off = np.abs(x - values[idx]) > tol
    if np.any(off):
        raise ValueError(f"{what} has entries {x[off][:3].tolist()} outside the value set of {space}")
    return idx


def discs_statistic(draws, reference, space: DiscreteSpace) -> np.ndarray:
    """DISCS's scalar statistic of each state: its distance to ``reference``.

    ``Σ_i |ℓ_i(x) − ℓ_i(reference)|`` with ``ℓ_i`` the value index of coordinate ``i``: the
    Hamming distance on two-valued spaces (Binary, Spin), the L1 distance of the integer
    labels on ``Categorical`` (one-hot rows) and ``Ordinal`` spaces.

    Parameters
    ----------
    draws : array_like
        ``(chains, draws, *event_shape)`` positions of ``space``.
    reference : array_like
        One position of ``space`` (``event_shape``), e.g. a DISCS target's
        ``metadata["reference"]``.
    space : DiscreteSpace
        The target's space.

    Returns
    -------
    numpy.ndarray
        ``(chains, draws)`` float64 distances.
    """
    if not isinstance(space, DiscreteSpace):
        raise ValueError(f"the DISCS statistic needs a discrete space, got {space!r}")
    event = tuple(space.event_shape)
    x = np.asarray(draws)
    if x.ndim != 2 + len(event) or tuple(x.shape[2:]) != event:
        raise ValueError(f"draws must be shaped (chains, draws, *{event}) for {space}, got shape {x.shape}")
    if x.shape[0] < 1 or x.shape[1] < 1:
        raise ValueError(f"draws must hold at least one chain and one draw, got shape {x.shape}")
    ref = np.asarray(reference)
    if ref.shape != event:
        raise ValueError(f"reference must have the event shape {event} of {space}, got shape {ref.shape}")
    for what, arr in (("draws", x), ("reference", ref)):
        if not (np.issubdtype(arr.dtype, np.number) or arr.dtype == bool):
            raise ValueError(f"{what} must be numeric, got dtype {arr.dtype}")
    ref_index = _indices(ref.astype(np.float64), space, "reference")
    index = _indices(x.astype(np.float64), space, "draws")
    return np.abs(index - ref_index).sum(axis=-1).astype(np.float64)


def discs_statistic_fn(reference, space: DiscreteSpace):
    """:func:`discs_statistic` of one position as a JAX function, for the runner's ``keep=``.

    A long run then records one number per step instead of the whole state:
    ``gradmc.sample(target, name, keep=discs_statistic_fn(ref, target.space), ...)`` and
    :func:`discs_ess` on ``trace.draws[:, half:]``.

    Parameters
    ----------
    reference : array_like
        One position of ``space`` (checked as in :func:`discs_statistic`).
    space : DiscreteSpace
        The target's space.
    """
    if not isinstance(space, DiscreteSpace):
        raise ValueError(f"the DISCS statistic needs a discrete space, got {space!r}")
    ref = np.asarray(reference, np.float64)
    if ref.shape != tuple(space.event_shape):
        raise ValueError(f"reference must have the event shape {tuple(space.event_shape)} of {space}, got {ref.shape}")
    ref_index = jnp.asarray(_indices(ref, space, "reference"), jnp.int32)
    values = jnp.asarray(space.values, jnp.float32)

    def statistic(x):
        if isinstance(space, Categorical):
            index = jnp.argmax(x, axis=-1)
        else:
            index = jnp.argmin(jnp.abs(x[..., None] - values), axis=-1)
        return jnp.sum(jnp.abs(index - ref_index)).astype(jnp.float32)

    return statistic


def discs_ess(statistic) -> np.ndarray:
    """Per-chain ESS of a scalar statistic, as TFP's ``mcmc.effective_sample_size``
    (default arguments) computes it, with NaN replaced by 1 as DISCS does.

    Parameters
    ----------
    statistic : array_like
        ``(chains, draws)`` (or ``(draws,)`` for one chain), at least 2 draws, finite.

    Returns
    -------
    numpy.ndarray
        ``(chains,)`` ESS (a 0-d array for one chain); a chain whose statistic is
        constant has ESS 1.
    """
    x = np.asarray(statistic, dtype=np.float64)
    if x.ndim not in (1, 2):
        raise ValueError(f"statistic must be shaped (chains, draws) or (draws,), got shape {x.shape}")
    n = x.shape[-1]
    if n < 2:
        raise ValueError(f"statistic needs at least 2 draws per chain, got shape {x.shape}")
    if not np.all(np.isfinite(x)):
        raise ValueError("statistic has non-finite entries")
    s = autocovariance_sums(x)  # S_k, k = 0..n-1
    lags = np.arange(n)
    with np.errstate(invalid="ignore", divide="ignore"):
        rho = s / s[..., :1]  # S_k / S_0 = (n - k)/n · R_k
        keep = np.cumsum(rho * (n / (n - lags)) < 0.0, axis=-1) == 0  # R_k < 0 truncates
        ess = n / (-1.0 + 2.0 * np.sum(np.where(keep, rho, 0.0), axis=-1))
    return np.where(np.isnan(ess), 1.0, ess)


def discs_ess_per_step(draws, reference, space: DiscreteSpace, *, num_evals=None, discard: float = 0.5) -> DiscsESS:
    """The DISCS metric of a run: ESS of the distance to ``reference`` over the second
    half of each chain, averaged over chains, per step and per evaluation.

    Parameters
    ----------
    draws : array_like
        ``(chains, steps, *event_shape)``: the state after each of the run's steps (DISCS's
        chain does not include the initial state).
    reference : array_like
        The reference state (``event_shape``), e.g. a DISCS target's ``metadata["reference"]``.
    space : DiscreteSpace
        The target's space.
    num_evals : float, optional
        Log-density-and-gradient evaluations per chain over the whole run (all ``steps``;
        DISCS's ``num_ll_calls``). ``ess_per_eval`` divides the mean ESS by the share of
        them spent on the kept steps, ``num_evals · kept / steps`` (DISCS: ``num_ll_calls · ½``).
    discard : float
        Fraction of each chain discarded as burn-in: the first ``int(discard · steps)``
        steps (DISCS's ``ess_ratio``, ½).

    Returns
    -------
    DiscsESS
        Per-chain ESS, mean, standard deviation, ESS per kept step, the number of kept
        steps and ESS per evaluation (None without ``num_evals``).
    """
    discard = float(discard)
    if not 0.0 <= discard < 1.0:
        raise ValueError(f"discard must lie in [0, 1), got {discard}")
    statistic = discs_statistic(draws, reference, space)
    steps = statistic.shape[1]
    kept = statistic[:, int(discard * steps) :]
    if kept.shape[1] < 2:
        raise ValueError(f"need at least 2 kept steps per chain, got {kept.shape[1]} of {steps} (discard={discard})")
    ess = discs_ess(kept)
    mean = float(ess.mean())
    per_eval = None
    if num_evals is not None:
        evals = float(num_evals)
        if not np.isfinite(evals) or evals <= 0:
            raise ValueError(f"num_evals must be a positive number, got {num_evals!r}")
        per_eval = mean / (evals * kept.shape[1] / steps)
    return DiscsESS(
        ess_per_chain=ess,
        ess_mean=mean,
        ess_std=float(ess.std()),
        ess_per_step=mean / kept.shape[1],
        num_steps=int(kept.shape[1]),
        ess_per_eval=per_eval,
    )
