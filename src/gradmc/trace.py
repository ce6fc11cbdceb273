"""``Trace``: the result of a run — draws (chain, draw, *event), sample statistics, adapted
parameters and timings — and its conversion to ArviZ."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from gradmc.base import StepStats

__all__ = ["Trace", "RunningMoments", "merge_netcdf"]

_ARVIZ_NAMES = {
    "logdensity": "lp",
    "acceptance_rate": "acceptance_rate",
    "is_accepted": "is_accepted",
    "step_size": "step_size",
    "num_grad_evals": "n_grad_evals",
    "diverging": "diverging",
    "nonfinite": "nonfinite",
}


class RunningMoments:
    """Per-chain running mean and variance of kept quantities, merged chunk by chunk
    (Chan et al.'s parallel update, float64), so a run that keeps no draws still has them."""

    def __init__(self):
        self.count = 0
        self.mean = None
        self.m2 = None

    def update(self, draws: np.ndarray) -> None:
        x = np.asarray(draws, dtype=np.float64)
        n = x.shape[1]
        if n == 0:
            return
        mean_b = x.mean(axis=1)
        m2_b = ((x - mean_b[:, None]) ** 2).sum(axis=1)
        if self.mean is None:
            self.count, self.mean, self.m2 = n, mean_b, m2_b
            return
        total = self.count + n
        delta = mean_b - self.mean
        self.mean = self.mean + delta * n / total
        self.m2 = self.m2 + m2_b + delta**2 * self.count * n / total
        self.count = total

    def result(self) -> dict | None:
        """``{"count", "mean", "var"}`` per chain (variance with ddof=1), or None."""
        if self.mean is None:
            return None
        return {"count": self.count, "mean": self.mean, "var": self.m2 / max(self.count - 1, 1)}


@dataclass
class Trace:
    """Draws and statistics of one run.

    ``draws``: ``(chain, draw, *event)`` (``None`` for a run that kept no draws in memory:
    then ``moments`` holds per-chain running means and variances, and a checkpointed run's
    draws are on disk in ``directory``); ``stats``/``warmup_stats``: name -> ``(chain, draw)``
    arrays (``logdensity``, ``acceptance_rate``, ``is_accepted``, ``step_size``,
    ``num_grad_evals``, ``diverging``, ``nonfinite`` and sampler extras); ``params``: the
    adapted parameters of each chain; ``timing``: compile, warm-up and sampling seconds.
    """

    target: str
    sampler: str
    draws: np.ndarray | None
    stats: dict[str, np.ndarray]
    warmup_stats: dict[str, np.ndarray] = field(default_factory=dict)
    params: Any = None
    options: dict = field(default_factory=dict)
    seed: int = 0
    thinning: int = 1
    timing: dict = field(default_factory=dict)
    final_state: Any = None
    moments: dict | None = None
    directory: Path | None = None
    first_chain: int = 0  # index of this trace's first chain in the whole run (multi-host shards)
    extended: Any = None  # pseudo-extended runs: particles, importance weights and their ESS

    @staticmethod
    def flatten_stats(stats: StepStats) -> dict[str, np.ndarray]:
        out = {name: np.asarray(getattr(stats, name)) for name in StepStats._fields if name != "extra"}
        out.update({name: np.asarray(value) for name, value in stats.extra.items()})
        return out

    @property
    def num_chains(self) -> int:
        return int(self.draws.shape[0])

    @property
    def num_draws(self) -> int:
        return int(self.draws.shape[1])

    @property
    def acceptance_rate(self) -> float:
        return float(np.mean(self.stats["acceptance_rate"]))

    @property
    def num_grad_evals(self) -> int:
        """Log-density+gradient evaluations of the kept phase, summed over chains."""
        return int(np.sum(self.stats["num_grad_evals"]))

    @property
    def num_nonfinite(self) -> int:
        """Proposals rejected because their log density or gradient was not finite."""
        return int(np.sum(self.stats["nonfinite"])) + int(np.sum(self.warmup_stats.get("nonfinite", 0)))

    @property
    def num_divergent(self) -> int:
        return int(np.sum(self.stats["diverging"]))

    @property
    def sampling_seconds(self) -> float:
        return float(self.timing.get("sampling_s", np.nan))

    def to_arviz(self, var_name: str = "x"):
        """An ``arviz.InferenceData`` with ``posterior[var_name]`` and ``sample_stats``."""
        import arviz as az

        sample_stats = {_ARVIZ_NAMES.get(k, k): v for k, v in self.stats.items() if v.ndim >= 2}
        warmup_stats = {_ARVIZ_NAMES.get(k, k): v for k, v in self.warmup_stats.items() if v.ndim >= 2}
        idata = az.from_dict(
            posterior={var_name: self.draws},
            sample_stats=sample_stats,
            warmup_sample_stats=warmup_stats or None,
            save_warmup=bool(warmup_stats),
        )
        idata.posterior.attrs.update({
            "target": self.target,
            "sampler": self.sampler,
            "seed": self.seed,
            "thinning": self.thinning,
            "options": repr(self.options),
            "sampling_seconds": self.sampling_seconds,
            "first_chain": self.first_chain,
            "inference_library": "gradmc",
        })
        return idata

    def save_netcdf(self, path, var_name: str = "x") -> Path:
        """Write the run as an ArviZ NetCDF file (``arviz.from_netcdf`` reads it back).

        A run that kept no draws in memory but has a checkpoint folder is assembled chunk
        by chunk from that folder, so memory holds one chunk at a time.
        """
        path = Path(path)
        if self.draws is not None:
            self.to_arviz(var_name).to_netcdf(str(path), engine="h5netcdf")
            return path
        if self.directory is None:
            raise ValueError("this trace kept no draws (keep_draws=False) and has no checkpoint folder to read them from")
        import h5netcdf

        from gradmc.checkpoint import iter_chunk_arrays

        chunks = iter_chunk_arrays(self.directory, "draws")
        first = next(chunks)["[0]"]
        num_chains, num_draws = first.shape[0], self.stats["acceptance_rate"].shape[1]
        event_dims = tuple(f"{var_name}_dim_{i}" for i in range(first.ndim - 2))
        with h5netcdf.File(path, "w") as f:
            post = f.create_group("posterior")
            post.dimensions.update({"chain": num_chains, "draw": num_draws, **dict(zip(event_dims, first.shape[2:]))})
            # chunked storage, one HDF5 chunk per saved chunk of draws: slices are written
            # straight through instead of being staged in memory
            var = post.create_variable(var_name, ("chain", "draw", *event_dims), dtype=first.dtype,
                                       chunks=(num_chains, first.shape[1], *first.shape[2:]))
            start = 0
            for block in itertools.chain([first], (c["[0]"] for c in chunks)):  # one chunk in memory at a time
                var[:, start : start + block.shape[1]] = block
                start += block.shape[1]
            stats = f.create_group("sample_stats")
            stats.dimensions.update({"chain": num_chains, "draw": num_draws})
            for name, values in self.stats.items():
                if values.ndim == 2:
                    is_bool = values.dtype == bool  # NetCDF has no booleans: int8 + xarray's marker
                    var = stats.create_variable(_ARVIZ_NAMES.get(name, name), ("chain", "draw"),
                                                data=values.astype(np.int8) if is_bool else values)
                    if is_bool:
                        var.attrs["dtype"] = "bool"
            post.attrs.update({"target": self.target, "sampler": self.sampler, "seed": self.seed, "first_chain": self.first_chain})
        return path


def merge_netcdf(shards, out) -> Path:
    """Join per-process NetCDF traces (``Trace.save_netcdf`` of each shard of a multi-host
    run) along the chain axis, ordered by their ``first_chain`` attribute."""
    import arviz as az

    loaded = [az.from_netcdf(str(p)) for p in shards]
    if not loaded:
        raise ValueError("give at least one shard to merge")
    loaded.sort(key=lambda d: int(d.posterior.attrs.get("first_chain", 0)))
    merged = az.concat(*loaded, dim="chain", reset_dim=True) if len(loaded) > 1 else loaded[0]
    merged.to_netcdf(str(out), engine="h5netcdf")
    return Path(out)
