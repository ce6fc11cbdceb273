"""The equi-energy sampler (Kou, Zhou & Wong 2006).

Energy h(x) = -log gamma(x). Levels i = 0..K-1 with energy levels H_0 < ... < H_{K-1} and
temperatures 1 = T_0 < ... < T_{K-1}; level i samples pi_i(x) ∝ exp(-max(h(x), H_i) / T_i)
(level 0 is the target itself: no truncation). The energy rings D_j = {x : H_j <= h(x) <
H_{j+1}} (H_K = inf; ring 0 also holds h < H_0) partition the space. Each step, for every
level at once (``vmap``): with probability ``p_ee`` an *equi-energy jump* proposes a
point y drawn uniformly from the history of level i+1 in the ring of the current x and
accepts it with probability min(1, pi_i(y) pi_{i+1}(x) / (pi_i(x) pi_{i+1}(y))); otherwise a
Metropolis move with proposal N(x, tau^2 T_i I). The rings of each level are kept in a
bounded buffer (``buffer_size`` points per level and ring, reservoir sampling, so the
buffer stays a uniform sample of the ring's whole history). As in the paper, the levels
start one after another from the top: level i moves only from warm-up step
(K - 1 - i) * stagger on (``stagger`` = num_warmup // K by default) and records its rings
after a further burn-in of stagger // 2 steps, so each level's rings are built before the
level below draws from them; recording goes on while sampling. The chain's position is
level 0's.

Default ladder: Kou et al.'s for their 20-mode mixture, H = (0.2, 2, 6.3, 20, 63.2),
T = (1, 2.8, 7.7, 21.6, 60), p_ee = 0.1, tau = 0.25 (our reading of their §3.3).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from blackjax.base import build_sampling_algorithm

from gradmc.base import SamplingAlgorithm, mh_accept
from gradmc.checks import check_positive

__all__ = [
    "EEState",
    "EEInfo",
    "KOU_ENERGY_LEVELS",
    "KOU_TEMPERATURES",
    "check_ladder",
    "level_scales",
    "init",
    "build_kernel",
    "as_top_level_api",
]

KOU_ENERGY_LEVELS = (0.2, 2.0, 6.3, 20.0, 63.2)
KOU_TEMPERATURES = (1.0, 2.8, 7.7, 21.6, 60.0)


class EEState(NamedTuple):
    """Every level's position and energy, the ring histories, their counts, and the step number."""

    positions: jax.Array  # (K, *event)
    energies: jax.Array  # (K,)
    buffers: jax.Array  # (K levels, K rings, C, *event)
    counts: jax.Array  # (K, K): points ever offered to each level's ring
    t: jax.Array


class EEInfo(NamedTuple):
    """Per level: acceptance probability, acceptance, non-finite flag, and whether an equi-energy jump was proposed."""

    acceptance_rate: jax.Array  # (K,)
    is_accepted: jax.Array  # (K,)
    nonfinite: jax.Array  # (K,)
    ee_jump: jax.Array  # (K,)


def check_ladder(energy_levels, temperatures) -> tuple[np.ndarray, np.ndarray]:
    """``(H, T)`` as float64 arrays after checking H increases strictly and T starts at 1 and increases strictly.

    Parameters
    ----------
    energy_levels : array_like
        H_0 < ... < H_{K-1}.
    temperatures : array_like
        1 = T_0 < ... < T_{K-1}.
    """
    h = np.asarray(energy_levels, np.float64)
    temps = np.asarray(temperatures, np.float64)
    if h.ndim != 1 or h.size < 2 or temps.shape != h.shape:
        raise ValueError(
            f"energy_levels and temperatures must be 1-D of the same length >= 2, got {h.shape} and {temps.shape}"
        )
    if not (np.all(np.isfinite(h)) and np.all(np.diff(h) > 0)):
        raise ValueError(f"energy_levels must increase strictly, got {h}")
    if not (temps[0] == 1.0 and np.all(np.diff(temps) > 0)):
        raise ValueError(f"temperatures must start at 1 and increase strictly, got {temps}")
    return h, temps


def level_scales(step_size, temperatures) -> jax.Array:
    """The Metropolis standard deviations tau sqrt(T_i) of the levels.

    Parameters
    ----------
    step_size : float
        tau.
    temperatures : array_like
        T_0..T_{K-1}.
    """
    return jnp.asarray(float(step_size) * np.sqrt(np.asarray(temperatures, np.float64)), jnp.float32)


def _energy_fn(logdensity_fn: Callable) -> Callable:
    """h(x) = -log gamma(x), with NaN mapped to +inf."""

    def energy(x):
        value = -logdensity_fn(x)
        return jnp.where(jnp.isnan(value), jnp.inf, value)

    return energy


def init(position, logdensity_fn: Callable, num_levels: int, buffer_size: int) -> EEState:
    """Every level at ``position``, empty ring histories.

    Parameters
    ----------
    position : array
        The starting point.
    logdensity_fn : callable
        The target's log gamma(x).
    num_levels : int
        K.
    buffer_size : int
        C, the points kept per level and ring.
    """
    k, cap = num_levels, buffer_size
    positions = jnp.broadcast_to(position, (k, *position.shape))
    energies = jnp.full((k,), _energy_fn(logdensity_fn)(position), jnp.float32)
    buffers = jnp.zeros((k, k, cap, *position.shape), position.dtype)
    return EEState(positions, energies, buffers, jnp.zeros((k, k), jnp.int32), jnp.zeros((), jnp.int32))


def build_kernel(
    energy_levels=KOU_ENERGY_LEVELS,
    temperatures=KOU_TEMPERATURES,
    p_ee=0.1,
    step_size=0.25,
    buffer_size=2000,
    stagger=0,
):
    """``kernel(key, state, logdensity_fn) -> (EEState, EEInfo)``: one move of every level (the module docstring).

    Parameters
    ----------
    energy_levels : array_like
        H_0..H_{K-1}, increasing.
    temperatures : array_like
        T_0 = 1 .. T_{K-1}, increasing.
    p_ee : float
        The equi-energy jump probability, in [0, 1).
    step_size : float
        tau, the Metropolis standard deviation at T = 1.
    buffer_size : int
        C, the points kept per level and ring.
    stagger : int
        Steps between the starts of successive levels.
    """
    h_np, t_np = check_ladder(energy_levels, temperatures)
    if not 0.0 <= float(p_ee) < 1.0:
        raise ValueError(f"p_ee must lie in [0, 1), got {p_ee}")
    check_positive("step_size", step_size)
    check_positive("buffer_size", buffer_size, integer=True)
    k, cap = h_np.size, int(buffer_size)
    levels, temps = jnp.asarray(h_np, jnp.float32), jnp.asarray(t_np, jnp.float32)
    trunc = levels.at[0].set(-jnp.inf)  # level 0 is the target, untruncated
    scales = level_scales(step_size, t_np)
    stagger = int(stagger)
    if stagger < 0:
        raise ValueError(f"stagger must be >= 0, got {stagger}")
    starts = jnp.asarray((k - 1 - np.arange(k)) * stagger, jnp.int32)  # level i starts at starts[i]
    record_starts = starts + stagger // 2

    def log_level(h, i):
        return -jnp.maximum(h, trunc[i]) / temps[i]

    def ring(h):
        return jnp.sum(h >= levels[1:]).astype(jnp.int32)

    def level_step(key, i, x, h, buffers, counts, energy):
        """One move of level i; ``buffers``/``counts`` are all levels' (read level i+1)."""
        k_choice, k_prop, k_pick, k_acc = jax.random.split(key, 4)
        upper = jnp.minimum(i + 1, k - 1)
        j = ring(h)
        available = jnp.minimum(counts[upper, j], cap)
        jump = (i < k - 1) & (available > 0) & jax.random.bernoulli(k_choice, p_ee)
        y_ee = buffers[upper, j, jax.random.randint(k_pick, (), 0, jnp.maximum(available, 1))]
        y_mh = x + scales[i] * jax.random.normal(k_prop, x.shape, x.dtype)
        y = jnp.where(jump, y_ee, y_mh)
        hy = energy(y)
        log_ratio = log_level(hy, i) - log_level(h, i)
        log_ratio = log_ratio + jnp.where(jump, log_level(h, upper) - log_level(hy, upper), 0.0)
        accept, prob, nonfinite = mh_accept(k_acc, log_ratio)
        return jnp.where(accept, y, x), jnp.where(accept, hy, h), prob, accept, nonfinite, jump

    def record(key, buffer, count, x, h, on):
        """Reservoir-sample x into its ring of one level's buffer (K rings, C, *event)."""
        j = ring(h)
        n = count[j]
        slot = jnp.where(n < cap, n, jax.random.randint(key, (), 0, jnp.maximum(n + 1, 1)))
        store = on & (slot < cap)
        buffer = buffer.at[j, jnp.minimum(slot, cap - 1)].set(
            jnp.where(store, x, buffer[j, jnp.minimum(slot, cap - 1)])
        )
        return buffer, count.at[j].add(on.astype(count.dtype))

    def kernel(rng_key, state: EEState, logdensity_fn):
        energy = _energy_fn(logdensity_fn)
        k_move, k_rec = jax.random.split(rng_key)
        idx = jnp.arange(k)
        x, h, prob, accept, nonfinite, jump = jax.vmap(
            partial(level_step, energy=energy), in_axes=(0, 0, 0, 0, None, None)
        )(jax.random.split(k_move, k), idx, state.positions, state.energies, state.buffers, state.counts)
        active = state.t >= starts
        x = jnp.where(active.reshape(k, *([1] * (x.ndim - 1))), x, state.positions)
        h = jnp.where(active, h, state.energies)
        on = state.t >= record_starts
        buffers, counts = jax.vmap(record, in_axes=(0, 0, 0, 0, 0, 0))(
            jax.random.split(k_rec, k), state.buffers, state.counts, x, h, on
        )
        return EEState(x, h, buffers, counts, state.t + 1), EEInfo(prob, accept, nonfinite, jump)

    return kernel


def as_top_level_api(
    logdensity_fn: Callable,
    energy_levels=KOU_ENERGY_LEVELS,
    temperatures=KOU_TEMPERATURES,
    p_ee=0.1,
    step_size=0.25,
    buffer_size=2000,
    stagger=0,
) -> SamplingAlgorithm:
    """The equi-energy sampler as a BlackJAX ``SamplingAlgorithm``.

    Parameters
    ----------
    logdensity_fn : callable
        The target's log gamma(x).
    energy_levels, temperatures, p_ee, step_size, buffer_size, stagger
        As in :func:`build_kernel`.
    """
    kernel = build_kernel(energy_levels, temperatures, p_ee, step_size, buffer_size, stagger)
    init_args = (len(energy_levels), int(buffer_size))
    return build_sampling_algorithm(kernel, init, logdensity_fn, init_args=init_args)
