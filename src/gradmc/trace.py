"""``Trace``: the result of a run — draws (chain, draw, *event), sample statistics, adapted
parameters and timings — and its conversion to ArviZ.
"""

from __future__ import annotations

import itertools
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from gradmc.base import StepStats
from gradmc.spaces import DiscreteSpace

__all__ = ["Trace", "RunningMoments", "merge_netcdf", "chunk_file", "iter_chunk_arrays"]

#: ``fold_in(key(seed), RECOVERY_STREAM)`` draws the variables summed out of the log density
#: (the runner's own streams are 0 to 2, the pseudo-extended resampling 3).
RECOVERY_STREAM = 4

_ARVIZ_NAMES = {
    "logdensity": "lp",
    "acceptance_rate": "acceptance_rate",
    "is_accepted": "is_accepted",
    "step_size": "step_size",
    "num_grad_evals": "n_grad_evals",
    "diverging": "diverging",
    "nonfinite": "nonfinite",
}


def chunk_file(directory: str | os.PathLike, phase: str, index: int) -> Path:
    """Where a checkpointed run keeps the outputs of chunk ``index`` of ``phase``:
    ``directory/chunks/{phase}_{index:06d}.npz`` (written by :class:`gradmc.run.store.RunStore`).

    Parameters
    ----------
    directory : path
        The checkpoint folder.
    phase : str
        ``"warmup"`` or ``"draws"``.
    index : int
        The chunk's number in its phase.
    """
    return Path(directory) / "chunks" / f"{phase}_{index:06d}.npz"


def iter_chunk_arrays(directory: str | os.PathLike, phase: str):
    """Yield each saved chunk of ``phase`` in order as ``{path: array}`` (one in memory at a
    time); for the draw phase, ``[0]`` holds the draws and ``[1].<stat>`` the statistics.

    Parameters
    ----------
    directory : path
        The checkpoint folder.
    phase : str
        ``"warmup"`` or ``"draws"``.
    """
    index = 0
    while (path := chunk_file(directory, phase, index)).exists():
        with np.load(path) as data:
            yield {k: data[k] for k in data.files}
        index += 1


class RunningMoments:
    """Per-chain running mean and variance of kept quantities, merged chunk by chunk
    (Chan et al.'s parallel update, float64), so a run that keeps no draws still has them.
    Chunks arrive through :meth:`update`; :meth:`result` reads the moments.
    """

    BLOCK_ELEMENTS = 1 << 22  # float64 elements of one block's temporaries (32 MiB)

    def __init__(self, decode=None):
        """No quantities seen yet; ``decode`` (optional) maps a block of stored draws (e.g.
        value indices) to the quantities whose moments are kept.
        """
        self.decode = decode
        self.count = 0
        self.mean = None
        self.m2 = None

    def update(self, draws: np.ndarray) -> None:
        """Merge a chunk of kept quantities, a block of draws at a time, so the float64
        temporaries stay under :attr:`BLOCK_ELEMENTS` elements whatever the chunk's size.

        Parameters
        ----------
        draws : ndarray
            Shaped ``(chain, draw, ...)``.
        """
        decode = self.decode or (lambda block: block)
        draws = np.asarray(draws)
        per_draw = max(1, draws.shape[0] * int(np.prod(decode(draws[:, :1]).shape[2:], dtype=np.int64)))
        step = max(1, self.BLOCK_ELEMENTS // per_draw)
        for start in range(0, draws.shape[1], step):
            self._merge(np.asarray(decode(draws[:, start : start + step]), dtype=np.float64))

    def _merge(self, x: np.ndarray) -> None:
        """Chan et al.'s merge of one block ``(chain, draw, ...)`` into the running moments."""
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
        if self.mean is None or self.m2 is None:
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

    Parameters
    ----------
    target, sampler : str
        Names of the target and the sampler.
    draws : ndarray or None
        ``(chain, draw, *event)``.
    stats, warmup_stats : dict of str to ndarray
        Statistics of the kept and the warm-up steps.
    params : pytree
        The adapted parameters.
    options : dict
        The sampler's options.
    seed, thinning : int
        The run's seed and thinning.
    timing : dict
        Seconds of compilation, warm-up and sampling.
    final_state : pytree
        The chains' last kernel state.
    moments : dict, optional
        Running per-chain means and variances of the kept quantity.
    directory : Path, optional
        The checkpoint folder.
    first_chain : int
        Index of this trace's first chain in the whole run.
    extended : ExtendedDraws, optional
        Particles and importance weights of a pseudo-extended run.
    warnings : list of str
        One line per problem found in the run (:func:`gradmc.diagnostics.health.run_warnings`).
    indices : ndarray, optional
        How a discrete run keeps its draws: the value index of every coordinate,
        ``(chain, draw, d)`` in ``space.index_dtype`` (one byte per coordinate for up to 256
        values, 16 times smaller than float32 one-hot rows of 4 values). ``draws`` decodes
        them on first use.
    space : Space, optional
        The target's space when the kept draws are its positions (a discrete space's
        ``decode`` turns ``indices`` into them).
    variables : Variables, optional
        How a position reads as named variables (the target's
        :class:`~gradmc.variables.Variables`; None: one variable ``x``, the position),
        which :meth:`posterior`, :meth:`to_arviz` and :meth:`save_netcdf` use.
    """

    target: str
    sampler: str
    draws: np.ndarray | None = field(repr=False)
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
    warnings: list[str] = field(default_factory=list)
    indices: np.ndarray | None = field(default=None, repr=False)
    space: Any = None
    variables: Any = None

    @staticmethod
    def flatten_stats(stats: StepStats) -> dict[str, np.ndarray]:
        """``name -> array`` of every statistic, the sampler's extras included.

        Parameters
        ----------
        stats : StepStats
            Stacked statistics of a phase.
        """
        out = {name: np.asarray(getattr(stats, name)) for name in StepStats._fields if name != "extra"}
        out.update({name: np.asarray(value) for name, value in stats.extra.items()})
        return out

    @property
    def num_chains(self) -> int:
        """Number of chains."""
        return int(self.stats["acceptance_rate"].shape[0])

    @property
    def num_draws(self) -> int:
        """Kept draws per chain."""
        return int(self.stats["acceptance_rate"].shape[1])

    @property
    def acceptance_rate(self) -> float:
        """Mean acceptance probability of the kept phase, over chains and draws."""
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
        """Divergent transitions of the kept phase."""
        return int(np.sum(self.stats["diverging"]))

    @property
    def sampling_seconds(self) -> float:
        """Seconds spent in the kept phase (compilation excluded)."""
        return float(self.timing.get("sampling_s", np.nan))

    def posterior(self, structured: bool = False) -> dict[str, np.ndarray] | Any:
        """The draws as named variables: name -> ``(chain, draw, *shape)`` array.

        A target without named variables gives ``{"x": draws}`` (on a categorical space,
        ``x`` holds each coordinate's label ``(chain, draw, d)`` instead of one-hot rows).

        Parameters
        ----------
        structured : bool
            Return the model's own pytree instead (the dict, NamedTuple or tuple its log
            density takes), each leaf with the leading ``(chain, draw)`` axes; only for
            models whose positions are pytrees.
        """
        if self.draws is None:
            raise ValueError("this trace kept no draws (keep_draws=False); its named draws are not in memory")
        if structured:
            unflatten = getattr(self.variables, "unflatten", None)
            if unflatten is None:
                raise ValueError(f"target {self.target!r} was not written on pytree positions; use posterior()")
            import jax

            return jax.device_get(jax.jit(jax.vmap(jax.vmap(unflatten)))(self.draws))
        if self.variables is None:
            if self.indices is not None and self.space.values.ndim == 2:
                return {"x": self.indices}  # one-hot rows, written as their labels
            return {"x": self.draws}
        return self.variables.of_draws(self.draws, key=self.recovery_key)

    @property
    def recovery_key(self):
        """The key of the draws of variables summed out of the log density (a NumPyro model's
        enumerated sites, :meth:`posterior`): ``fold_in(key(seed), 4)``, the same at every call.
        """
        import jax

        return jax.random.fold_in(jax.random.key(self.seed), RECOVERY_STREAM)

    def to_arviz(self, var_name: str | None = None):
        """An ``arviz.InferenceData`` with the named variables in ``posterior`` and ``sample_stats``.

        The posterior holds the target's named variables (``mu``, ``theta`` with axis
        ``theta_dim_0``, or the axis names and labels the target gives), or a single
        variable ``x`` for a target without names.

        Parameters
        ----------
        var_name : str, optional
            Write the flat draws ``(chain, draw, *event)`` as this one variable instead.
        """
        import arviz as az

        sample_stats = {_ARVIZ_NAMES.get(k, k): v for k, v in self.stats.items() if v.ndim >= 2}
        warmup_stats = {_ARVIZ_NAMES.get(k, k): v for k, v in self.warmup_stats.items() if v.ndim >= 2}
        named = var_name is None and self.variables is not None
        idata = az.from_dict(
            posterior=self.posterior() if var_name is None else {var_name: self.draws},
            sample_stats=sample_stats,
            warmup_sample_stats=warmup_stats or None,
            save_warmup=bool(warmup_stats),
            dims={name: list(axes) for name, axes in self.variables.dims.items()} if named else None,
            coords=self.variables.coords if named else None,
        )
        idata.posterior.attrs.update(
            {
                "target": self.target,
                "sampler": self.sampler,
                "seed": self.seed,
                "thinning": self.thinning,
                "options": repr(self.options),
                "sampling_seconds": self.sampling_seconds,
                "first_chain": self.first_chain,
                "inference_library": "gradmc",
            }
        )
        return idata

    def _named_blocks(self, blocks, var_name: str | None):
        """``name -> block`` for each chunk of stored draws ``(chain, draw, ...)``: the target's
        named variables (value indices decoded first), or the stored block as ``var_name``.
        """
        for block in blocks:
            if var_name is None and self.variables is not None:
                decoded = self.space.decode(block) if isinstance(self.space, DiscreteSpace) else block
                yield self.variables.of_draws(decoded)
            else:
                yield {var_name or "x": block}

    def save_netcdf(self, path, var_name: str | None = None) -> Path:
        """Write the run as an ArviZ NetCDF file (``arviz.from_netcdf`` reads it back).

        A run that kept no draws in memory but has a checkpoint folder is assembled chunk
        by chunk from that folder, so memory holds one chunk at a time; there the named
        variables are written with their axis names, but without the axes' labels (coords).

        Parameters
        ----------
        path : path
            The file to write.
        var_name : str, optional
            Write the flat draws as this one variable instead of the named variables.
        """
        path = Path(path)
        if self.draws is not None:
            self.to_arviz(var_name).to_netcdf(str(path), engine="h5netcdf")
            return path
        if self.directory is None:
            raise ValueError(
                "this trace kept no draws (keep_draws=False) and has no checkpoint folder to read them from"
            )
        import h5netcdf

        blocks = self._named_blocks((c["[0]"] for c in iter_chunk_arrays(self.directory, "draws")), var_name)
        first = next(blocks)
        num_chains, num_draws = next(iter(first.values())).shape[0], self.stats["acceptance_rate"].shape[1]
        dims = self.variables.dims if var_name is None and self.variables is not None else {}
        with h5netcdf.File(path, "w") as f:
            post = f.create_group("posterior")
            post.dimensions.update({"chain": num_chains, "draw": num_draws})
            written = {}
            for name, block in first.items():
                axes = dims.get(name) or tuple(f"{name}_dim_{i}" for i in range(block.ndim - 2))
                sizes = dict(zip(axes, block.shape[2:], strict=True))
                post.dimensions.update({a: n for a, n in sizes.items() if a not in post.dimensions})
                # chunked storage, one HDF5 chunk per saved chunk of draws: slices are written
                # straight through instead of being staged in memory
                written[name] = post.create_variable(
                    name, ("chain", "draw", *axes), dtype=block.dtype, chunks=(num_chains, *block.shape[1:])
                )
            start = 0
            for named in itertools.chain([first], blocks):  # one chunk in memory at a time
                for name, block in named.items():
                    written[name][:, start : start + block.shape[1]] = block
                start += block.shape[1]
            stats = f.create_group("sample_stats")
            stats.dimensions.update({"chain": num_chains, "draw": num_draws})
            for name, values in self.stats.items():
                if values.ndim == 2:
                    is_bool = values.dtype == bool  # NetCDF has no booleans: int8 + xarray's marker
                    var = stats.create_variable(
                        _ARVIZ_NAMES.get(name, name),
                        ("chain", "draw"),
                        data=values.astype(np.int8) if is_bool else values,
                    )
                    if is_bool:
                        var.attrs["dtype"] = "bool"
            post.attrs.update(
                {"target": self.target, "sampler": self.sampler, "seed": self.seed, "first_chain": self.first_chain}
            )
        return path


def merge_netcdf(shards, out) -> Path:
    """Join per-process NetCDF traces (``Trace.save_netcdf`` of each shard of a multi-host
    run) along the chain axis, ordered by their ``first_chain`` attribute.

    Parameters
    ----------
    shards : sequence of path
        The per-process files.
    out : path
        The merged file.
    """
    import arviz as az

    loaded = [az.from_netcdf(str(p)) for p in shards]
    if not loaded:
        raise ValueError("give at least one shard to merge")
    loaded.sort(key=lambda d: int(d.posterior.attrs.get("first_chain", 0)))
    if len(loaded) > 1:
        merged = az.concat(*loaded, dim="chain", reset_dim=True)  # type: ignore[call-overload]
    else:
        merged = loaded[0]
    merged.to_netcdf(str(out), engine="h5netcdf")
    return Path(out)


def _decoded_draws(trace: Trace) -> np.ndarray | None:
    """``trace.draws``: the stored draws, or the positions of ``trace.indices`` decoded on
    first use and kept (a discrete run stores only the indices).
    """
    draws = trace.__dict__.get("draws")
    if draws is None and trace.indices is not None:
        draws = trace.space.decode(trace.indices)
        trace.__dict__["draws"] = draws
    return draws


def _set_draws(trace: Trace, value) -> None:
    trace.__dict__["draws"] = value


Trace.draws = property(_decoded_draws, _set_draws, doc="Draws ``(chain, draw, *event)``, or None.")  # type: ignore[assignment]
