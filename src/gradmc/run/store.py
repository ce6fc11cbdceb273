"""Durable runs: checkpoint/resume and chunk-by-chunk storage of draws.

A checkpoint folder holds plain, documented files (NumPy ``.npz`` and JSON — readable
without gradmc, and no pickles):

* ``run.json`` — the configuration fingerprint (:func:`run_fingerprint`: target, sampler,
  options, budget, seed, ...). A resume with a different configuration is refused, naming
  what differs.
* ``state.npz`` — the chains' latest state at a chunk boundary: phase, iterations done,
  the leaves of the warm-up or kernel state and of the adapted parameters (keyed by their
  pytree path), and the seconds spent so far.
* ``chunks/{phase}_{index:06d}.npz`` — the outputs (draws, statistics) of each chunk
  (:func:`gradmc.trace.chunk_file`; :meth:`gradmc.trace.Trace.save_netcdf` reads them back).

Every file is written to a temporary name and moved into place with ``os.replace``, which
is atomic on POSIX: a run killed at any moment (even SIGKILL) leaves the last complete
state, and resuming recomputes at most the chunks after it. Because the key of chain ``c``
at step ``t`` is ``fold_in(chain_key[c], t)``, the resumed draws are bit-identical.

A file damaged all the same (a full disk, a copy cut short) is reported as a ``ValueError``
naming it: chunks after the saved state are recomputed anyway, so a damaged one there does
no harm; a damaged ``run.json``, ``state.npz`` or chunk before the state leaves the run
nothing to resume from, and :func:`discard_checkpoint` (``gradmc ... --restart``,
``gradmc.sample(..., restart=True)``) starts it again.

Orbax would also do this; plain ``.npz`` keeps the format inspectable and the
dependency list short, and our states are small pytrees of arrays.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import zipfile
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import numpy as np

from gradmc.base import Sampler, Target
from gradmc.trace import chunk_file, iter_chunk_arrays

__all__ = ["RunStore", "iter_chunk_arrays", "run_fingerprint", "open_store", "discard_checkpoint"]

#: How a checkpoint that cannot be resumed is discarded, for the messages.
RESTART_HINT = "rerun with --restart (gradmc.sample(..., restart=True)) to discard the checkpoint and start again"

#: What reading a damaged ``.npz`` or JSON file raises.
_UNREADABLE = (OSError, EOFError, ValueError, KeyError, UnicodeDecodeError, zipfile.BadZipFile, zlib.error)


def _damaged(path: Path, error: BaseException) -> ValueError:
    """The error of a checkpoint file that cannot be read."""
    return ValueError(f"checkpoint file {path} is damaged ({type(error).__name__}: {error}); {RESTART_HINT}")


def _read_npz(path: Path) -> dict[str, np.ndarray]:
    """All arrays of the ``.npz`` file ``path``, or a ``ValueError`` naming it when it is damaged."""
    try:
        with np.load(path) as data:
            return {k: data[k] for k in data.files}
    except _UNREADABLE as error:
        raise _damaged(path, error) from None


def _is_store_file(path: Path) -> bool:
    """Whether ``path`` is a file a :class:`RunStore` writes (or a temporary file of one)."""
    name = path.name
    if name.startswith(".") and name.endswith(".tmp"):
        return True
    if path.parent.name == "chunks":
        return name.endswith(".npz")
    return name in ("run.json", "state.npz")


def discard_checkpoint(directory: str | os.PathLike) -> None:
    """Delete the files that runs stored in ``directory`` and its sub-folders (``run.json``,
    ``state.npz``, ``chunks/*.npz``, temporary files), then the folders they leave empty;
    other files stay. Works on one run's checkpoint and on a :func:`gradmc.run.checkpoint_root`.

    Parameters
    ----------
    directory : path
        The checkpoint folder (nothing happens when it does not exist).
    """
    directory = Path(directory)
    if not directory.is_dir():
        return
    for folder, _, files in os.walk(directory, topdown=False):
        for name in files:
            path = Path(folder) / name
            if _is_store_file(path):
                path.unlink()
        if Path(folder) != directory and not any(Path(folder).iterdir()):
            Path(folder).rmdir()


def _atomic_write(path: Path, write) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _leaves(tree) -> dict[str, np.ndarray]:
    """Leaves of a pytree keyed by their path (e.g. ``[1].acceptance_rate``); typed PRNG
    keys are stored as their raw key data.
    """
    out = {}
    for path, leaf in jax.tree_util.tree_flatten_with_path(jax.device_get(tree))[0]:
        if jax.dtypes.issubdtype(leaf.dtype, jax.dtypes.prng_key):
            leaf = jax.random.key_data(leaf)
        out[jax.tree_util.keystr(path) or "[]"] = np.asarray(leaf)
    return out


def _restore(template, arrays: dict[str, np.ndarray]):
    """Rebuild a pytree shaped like ``template`` from :func:`_leaves`' arrays."""
    paths_leaves, treedef = jax.tree_util.tree_flatten_with_path(template)
    restored = []
    for path, leaf in paths_leaves:
        name = jax.tree_util.keystr(path) or "[]"
        if name not in arrays:
            raise ValueError(f"checkpoint lacks {name!r}: it was written by a sampler with another state structure")
        arr = arrays[name]
        if jax.dtypes.issubdtype(leaf.dtype, jax.dtypes.prng_key):
            restored.append(jax.random.wrap_key_data(arr))  # type: ignore[arg-type]
        else:
            restored.append(np.asarray(arr, dtype=leaf.dtype).reshape(leaf.shape))
    return jax.tree_util.tree_unflatten(treedef, restored)


def run_fingerprint(
    target: Target,
    sampler: Sampler,
    positions,
    *,
    num_chains: int,
    num_warmup: int,
    num_draws: int,
    seed: int,
    thinning: int,
    chunk_sizes: tuple[int, int],
    keep: Callable | None,
) -> dict[str, Any]:
    """The configuration of a run that a checkpoint must match to be resumed.

    Parameters
    ----------
    target : Target
        The target sampled; the summed log density at the starting ``positions`` tells
        targets of one name but other data apart.
    sampler : Sampler
        Its name and options.
    positions : array
        The chains' starting positions, ``(num_chains, *event_shape)``.
    num_chains, num_warmup, num_draws, seed, thinning : int
        The run's budget and seed.
    chunk_sizes : tuple of int
        Iterations per chunk of the warm-up and of the draw phase.
    keep : callable or None
        The function of a position recorded instead of it (named by its qualified name).
    """
    return {
        "target": target.name,
        "sampler": sampler.name,
        "options": repr(sorted(sampler.options.items())),
        "num_chains": num_chains,
        "num_warmup": num_warmup,
        "num_draws": num_draws,
        "seed": seed,
        "thinning": thinning,
        "chunk_size": list(chunk_sizes),
        "start_logdensity": float(np.sum(np.asarray(jax.vmap(target.logdensity_fn)(positions), np.float64))),
        "keep": None if keep is None else getattr(keep, "__qualname__", repr(keep)),
    }


def open_store(
    checkpoint: str | os.PathLike | None, root: Path | None, fingerprint: dict[str, Any], restart: bool = False
) -> RunStore:
    """The :class:`RunStore` of a run: in ``checkpoint``, or else in a folder of ``root`` named
    ``<target>-<sampler>-<hash of the fingerprint>``; one sub-folder per process under
    ``jax.distributed``.

    Parameters
    ----------
    checkpoint : path or None
        The run's own checkpoint folder.
    root : Path or None
        The folder of :func:`gradmc.run.checkpoint_root` (used when ``checkpoint`` is None).
    fingerprint : dict
        :func:`run_fingerprint` of the run.
    restart : bool
        Discard what the folder holds first (:func:`discard_checkpoint`).
    """
    if checkpoint is None:
        if root is None:
            raise ValueError("a run's store needs a checkpoint folder or a checkpoint root")
        digest = hashlib.sha1(json.dumps(fingerprint, sort_keys=True, default=str).encode()).hexdigest()[:16]
        checkpoint = root / f"{fingerprint['target']}-{fingerprint['sampler']}-{digest}"
    if jax.process_count() > 1:
        checkpoint = Path(checkpoint) / f"process_{jax.process_index()}"
    return RunStore(checkpoint, fingerprint, restart=restart)


class RunStore:
    """The checkpoint folder of one run (see module docstring).

    Parameters
    ----------
    directory : path
        The checkpoint folder.
    fingerprint : dict
        The run's configuration (:func:`run_fingerprint`).
    restart : bool
        Discard what the folder holds first.
    """

    def __init__(self, directory: str | os.PathLike, fingerprint: dict[str, Any], restart: bool = False):
        """Open (or create) the folder; refuse one written by another configuration.

        Parameters
        ----------
        directory : path
            The checkpoint folder.
        fingerprint : dict
            :func:`run_fingerprint` of the run, compared with the folder's ``run.json``.
        restart : bool
            Discard what the folder holds first (:func:`discard_checkpoint`).
        """
        self.directory = Path(directory)
        self.fingerprint = json.loads(json.dumps(fingerprint, default=str))
        if self.directory.exists() and not self.directory.is_dir():
            raise ValueError(f"checkpoint {self.directory} is a file, not a folder; give a folder for the checkpoint")
        if restart:
            discard_checkpoint(self.directory)
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise ValueError(
                f"cannot create the checkpoint folder {self.directory}: {error.strerror or error}"
            ) from None
        meta = self.directory / "run.json"
        if meta.exists():
            try:
                saved = json.loads(meta.read_text())
            except _UNREADABLE as error:
                raise _damaged(meta, error) from None
            if not isinstance(saved, dict):
                raise _damaged(meta, ValueError(f"a JSON {type(saved).__name__}, not an object"))
            differ = sorted(k for k in set(saved) | set(self.fingerprint) if saved.get(k) != self.fingerprint.get(k))
            if differ:
                details = "; ".join(
                    f"{k}: checkpoint {saved.get(k)!r} vs now {self.fingerprint.get(k)!r}" for k in differ
                )
                raise ValueError(
                    f"checkpoint in {self.directory} was written by a different configuration ({details}); "
                    f"use another folder, or {RESTART_HINT}"
                )
        else:
            _atomic_write(meta, lambda h: h.write(json.dumps(self.fingerprint, indent=1).encode()))

    # -- chain state -------------------------------------------------------------------
    def save_state(self, phase: str, done: int, states, params=None, timing: dict | None = None) -> None:
        """Save the chains' state atomically (``state.npz``).

        Parameters
        ----------
        phase : str
            ``"warmup"`` or ``"draws"``.
        done : int
            Iterations of that phase done.
        states : pytree
            The chains' warm-up or kernel states.
        params : pytree, optional
            The adapted parameters (draw phase).
        timing : dict, optional
            Seconds spent so far.
        """
        arrays = {f"state/{k}": v for k, v in _leaves(states).items()}
        arrays["timing"] = np.array(json.dumps(timing or {}))
        if params is not None:
            arrays.update({f"params/{k}": v for k, v in _leaves(params).items()})
        arrays["phase"] = np.array(phase)
        arrays["done"] = np.array(done)
        _atomic_write(self.directory / "state.npz", lambda h: np.savez(h, **arrays))  # type: ignore[arg-type]

    def load_state(self, state_templates: dict[str, Any], params_template=None):
        """``(phase, done, states, params, timing)`` from the last save, or ``None``.

        Parameters
        ----------
        state_templates : dict
            Maps each phase to a pytree of the state's structure.
        params_template : pytree, optional
            The structure of the adapted parameters.
        """
        path = self.directory / "state.npz"
        if not path.exists():
            return None
        data = _read_npz(path)
        try:
            phase, done = str(data["phase"]), int(data["done"])
            timing = json.loads(str(data["timing"])) if "timing" in data else {}
            template = state_templates[phase]
        except _UNREADABLE as error:
            raise _damaged(path, error) from None
        states = _restore(template, {k[6:]: v for k, v in data.items() if k.startswith("state/")})
        params = None
        if phase != "warmup" and params_template is not None:
            params = _restore(params_template, {k[7:]: v for k, v in data.items() if k.startswith("params/")})
        return phase, done, states, params, timing

    # -- chunk outputs -------------------------------------------------------------------
    def save_chunk(self, phase: str, index: int, outputs) -> None:
        """Save one chunk's outputs atomically.

        Parameters
        ----------
        phase : str
            ``"warmup"`` or ``"draws"``.
        index : int
            The chunk's number in its phase.
        outputs : pytree
            Its outputs, chains first.
        """
        _atomic_write(chunk_file(self.directory, phase, index), lambda h: np.savez(h, **_leaves(outputs)))  # type: ignore[arg-type]

    def load_chunk(self, phase: str, index: int, template):
        """One saved chunk's outputs, shaped like ``template``.

        Parameters
        ----------
        phase : str
            ``"warmup"`` or ``"draws"``.
        index : int
            The chunk's number in its phase.
        template : pytree
            Shapes and dtypes of the outputs.
        """
        return _restore(template, _read_npz(chunk_file(self.directory, phase, index)))
