"""Durable runs: checkpoint/resume and chunk-by-chunk storage of draws.

A checkpoint folder holds plain, documented files (NumPy ``.npz`` and JSON — readable
without gradmc, and no pickles):

* ``run.json`` — the configuration fingerprint (target, sampler, options, budget, seed, ...).
  A resume with a different configuration is refused, naming what differs.
* ``state.npz`` — the chains' latest state at a chunk boundary: phase, iterations done,
  the leaves of the warm-up or kernel state and of the adapted parameters (keyed by their
  pytree path), and the seconds spent so far.
* ``chunks/{phase}_{index:06d}.npz`` — the outputs (draws, statistics) of each chunk.

Every file is written to a temporary name and moved into place with ``os.replace``, which
is atomic on POSIX: a run killed at any moment (even SIGKILL) leaves the last complete
state, and resuming recomputes at most the chunks after it. Because the key of chain ``c``
at step ``t`` is ``fold_in(chain_key[c], t)``, the resumed draws are bit-identical.

Orbax would also do this; plain ``.npz`` keeps the format inspectable and the
dependency list short, and our states are small pytrees of arrays.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

import jax
import numpy as np

__all__ = ["RunStore", "iter_chunk_arrays"]


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
    keys are stored as their raw key data."""
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
            restored.append(jax.random.wrap_key_data(arr))
        else:
            restored.append(np.asarray(arr, dtype=leaf.dtype).reshape(leaf.shape))
    return jax.tree_util.tree_unflatten(treedef, restored)


class RunStore:
    """The checkpoint folder of one run (see module docstring)."""

    def __init__(self, directory: str | os.PathLike, fingerprint: dict[str, Any]):
        self.directory = Path(directory)
        self.fingerprint = json.loads(json.dumps(fingerprint, default=str))
        self.directory.mkdir(parents=True, exist_ok=True)
        meta = self.directory / "run.json"
        if meta.exists():
            saved = json.loads(meta.read_text())
            differ = sorted(k for k in set(saved) | set(self.fingerprint) if saved.get(k) != self.fingerprint.get(k))
            if differ:
                details = "; ".join(f"{k}: checkpoint {saved.get(k)!r} vs now {self.fingerprint.get(k)!r}" for k in differ)
                raise ValueError(f"checkpoint in {self.directory} was written by a different configuration ({details})")
        else:
            _atomic_write(meta, lambda h: h.write(json.dumps(self.fingerprint, indent=1).encode()))

    # -- chain state -------------------------------------------------------------------
    def save_state(self, phase: str, done: int, states, params=None, timing: dict | None = None) -> None:
        arrays = {f"state/{k}": v for k, v in _leaves(states).items()}
        arrays["timing"] = np.array(json.dumps(timing or {}))
        if params is not None:
            arrays.update({f"params/{k}": v for k, v in _leaves(params).items()})
        arrays["phase"] = np.array(phase)
        arrays["done"] = np.array(done)
        _atomic_write(self.directory / "state.npz", lambda h: np.savez(h, **arrays))

    def load_state(self, state_templates: dict[str, Any], params_template=None):
        """``(phase, done, states, params, timing)`` from the last save, or ``None``.

        ``state_templates`` maps each phase to a pytree of the state's structure.
        """
        path = self.directory / "state.npz"
        if not path.exists():
            return None
        with np.load(path) as data:
            phase, done = str(data["phase"]), int(data["done"])
            states = _restore(state_templates[phase], {k[6:]: data[k] for k in data.files if k.startswith("state/")})
            params = None
            if phase != "warmup" and params_template is not None:
                params = _restore(params_template, {k[7:]: data[k] for k in data.files if k.startswith("params/")})
            timing = json.loads(str(data["timing"])) if "timing" in data.files else {}
        return phase, done, states, params, timing

    # -- chunk outputs -------------------------------------------------------------------
    def _chunk_path(self, phase: str, index: int) -> Path:
        return self.directory / "chunks" / f"{phase}_{index:06d}.npz"

    def save_chunk(self, phase: str, index: int, outputs) -> None:
        _atomic_write(self._chunk_path(phase, index), lambda h: np.savez(h, **_leaves(outputs)))

    def load_chunk(self, phase: str, index: int, template):
        with np.load(self._chunk_path(phase, index)) as data:
            return _restore(template, {k: data[k] for k in data.files})

    def chunk_arrays(self, phase: str):
        return iter_chunk_arrays(self.directory, phase)


def iter_chunk_arrays(directory: str | os.PathLike, phase: str):
    """Yield each saved chunk of ``phase`` in order as ``{path: array}`` (one in memory at a
    time); for the draw phase, ``[0]`` holds the draws and ``[1].<stat>`` the statistics."""
    index = 0
    while (path := Path(directory) / "chunks" / f"{phase}_{index:06d}.npz").exists():
        with np.load(path) as data:
            yield {k: data[k] for k in data.files}
        index += 1
