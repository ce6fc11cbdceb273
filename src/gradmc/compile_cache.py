"""JAX's persistent compilation cache, as the ``gradmc`` command turns it on.

Compiled programs are kept in a folder on disk, so that running the same command again
loads them instead of compiling: on a CPU most of a short run is compilation. The command
line enables the cache by default (in ``$XDG_CACHE_HOME/gradmc/jax``, or
``~/.cache/gradmc/jax``); ``GRADMC_NO_COMPILE_CACHE=1`` or ``gradmc --no-compile-cache``
turn it off. ``import gradmc`` does not enable it; the first ``gradmc.sample`` of a process
does, with the same folder and the same opt-out, unless the caller set JAX's
``jax_compilation_cache_dir`` already (then the caller's folder is used).
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["DISABLE_VARIABLE", "default_cache_dir", "enable_compilation_cache"]

#: The environment variable that turns the cache off (any value but empty or ``0``).
DISABLE_VARIABLE = "GRADMC_NO_COMPILE_CACHE"

#: Programs that compile faster than this are not written to the cache (seconds).
MIN_COMPILE_SECONDS = 0.0


def default_cache_dir() -> Path:
    """The cache folder: ``$XDG_CACHE_HOME/gradmc/jax``, else ``~/.cache/gradmc/jax``.

    Returns
    -------
    Path
        The folder (not created).
    """
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "gradmc" / "jax"


def enable_compilation_cache(path: str | os.PathLike | None = None) -> Path | None:
    """Keep JAX's compiled programs in ``path``, so later processes load instead of compiling.

    Sets JAX's options ``jax_compilation_cache_dir``,
    ``jax_persistent_cache_min_compile_time_secs`` (every program is cached, however fast
    it compiled) and ``jax_persistent_cache_min_entry_size_bytes`` (however small). Call it
    before the first compilation of the process. Does nothing when the environment variable
    ``GRADMC_NO_COMPILE_CACHE`` is set to anything but an empty string or ``0``.

    Parameters
    ----------
    path : path, optional
        The cache folder (default :func:`default_cache_dir`); created when missing.

    Returns
    -------
    Path or None
        The folder in use, or None when the cache stays off (disabled by the environment
        variable, or the folder cannot be created).
    """
    if os.environ.get(DISABLE_VARIABLE, "") not in ("", "0"):
        return None
    folder = Path(path) if path is not None else default_cache_dir()
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None  # a read-only home: run without the cache rather than fail
    import jax

    jax.config.update("jax_compilation_cache_dir", str(folder))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", MIN_COMPILE_SECONDS)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
    return folder
