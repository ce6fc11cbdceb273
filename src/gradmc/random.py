"""Random numbers of the kernels' proposals, at half ``jax.random``'s cost for threefry keys.

``jax.random`` hashes one threefry2x32 block (two 32-bit words) per 32-bit output and
XORs the two words into one. :func:`bits` keeps both words of every block, so ``n``
words cost ``n/2`` blocks; :func:`uniform` and :func:`normal` are built on it exactly as
``jax.random.uniform`` / ``jax.random.normal`` build theirs (23 mantissa bits; inverse
CDF). The values are the same generator's, only taken differently. Keys of other PRNG
implementations fall back to ``jax.random``. On a CPU, random numbers are a large part
of a discrete step on cheap targets (``benchmarks/discrete_step_cost.py``).
"""

from __future__ import annotations

import jax
import jax.extend.random
import jax.numpy as jnp
import numpy as np

__all__ = ["bits", "uniform", "normal"]


def _threefry_data(key):
    """The ``uint32[2]`` key data of a threefry2x32 key (typed or raw), else None."""
    if jax.dtypes.issubdtype(key.dtype, jax.dtypes.prng_key):
        return jax.random.key_data(key) if str(jax.random.key_impl(key)) == "threefry2x32" else None
    if key.dtype == jnp.uint32 and key.shape == (2,) and jax.config.jax_default_prng_impl == "threefry2x32":
        return key
    return None


def bits(key, shape) -> jax.Array:
    """Random ``uint32`` words of ``shape``: both words of each threefry block."""
    key = jnp.asarray(key) if not isinstance(key, jax.Array) else key
    data = _threefry_data(key)
    shape = tuple(shape)
    if data is None:
        return jax.random.bits(key, shape, jnp.uint32)
    n = int(np.prod(shape))
    return jax.extend.random.threefry_2x32(data, jax.lax.iota(jnp.uint32, n + n % 2))[:n].reshape(shape)


def uniform(key, shape, dtype=jnp.float32) -> jax.Array:
    """Float32 uniforms on [0, 1) from :func:`bits` (23 random mantissa bits, as
    ``jax.random.uniform``); other dtypes fall back to ``jax.random.uniform``.
    """
    if jnp.dtype(dtype) != jnp.float32:
        return jax.random.uniform(key, tuple(shape), dtype)
    words = bits(key, shape)
    return jax.lax.bitcast_convert_type((words >> 9) | jnp.uint32(0x3F800000), jnp.float32) - 1.0


def normal(key, shape, dtype=jnp.float32) -> jax.Array:
    """Standard normals from :func:`uniform` by the inverse CDF, √2 erf⁻¹(2u − 1), as
    ``jax.random.normal`` computes them (u = 0 clipped to the smallest float above −1).
    """
    u = 2.0 * uniform(key, shape, dtype) - 1.0
    u = jnp.maximum(u, jnp.nextafter(jnp.asarray(-1.0, u.dtype), jnp.asarray(0.0, u.dtype)))
    return jnp.sqrt(jnp.asarray(2.0, u.dtype)) * jax.lax.erf_inv(u)
