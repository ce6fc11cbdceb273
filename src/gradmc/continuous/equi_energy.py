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

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from gradmc.adapt.step_size import check_positive
from gradmc.base import Sampler, Target, mh_accept, step_stats
from gradmc.registry import register_sampler

__all__ = ["EEState", "build", "KOU_ENERGY_LEVELS", "KOU_TEMPERATURES"]

KOU_ENERGY_LEVELS = (0.2, 2.0, 6.3, 20.0, 63.2)
KOU_TEMPERATURES = (1.0, 2.8, 7.7, 21.6, 60.0)


class EEState(NamedTuple):
    positions: jax.Array  # (K, *event)
    energies: jax.Array  # (K,)
    buffers: jax.Array  # (K levels, K rings, C, *event)
    counts: jax.Array  # (K, K): points ever offered to each level's ring
    t: jax.Array


def _check_ladder(energy_levels, temperatures):
    h = np.asarray(energy_levels, np.float64)
    temps = np.asarray(temperatures, np.float64)
    if h.ndim != 1 or h.size < 2 or temps.shape != h.shape:
        raise ValueError(f"energy_levels and temperatures must be 1-D of the same length >= 2, got {h.shape} and {temps.shape}")
    if not (np.all(np.isfinite(h)) and np.all(np.diff(h) > 0)):
        raise ValueError(f"energy_levels must increase strictly, got {h}")
    if not (temps[0] == 1.0 and np.all(np.diff(temps) > 0)):
        raise ValueError(f"temperatures must start at 1 and increase strictly, got {temps}")
    return h, temps


@register_sampler("equi-energy", "equi-energy sampler (Kou et al. 2006): energy rings, temperature ladder, bounded ring histories")
def build(
    target: Target,
    num_warmup: int,
    energy_levels=KOU_ENERGY_LEVELS,
    temperatures=KOU_TEMPERATURES,
    p_ee=0.1,
    step_size=0.25,
    buffer_size=2000,
    stagger=None,
):
    """Options: ``energy_levels`` H_0..H_{K-1}, ``temperatures`` T_0 = 1 .. T_{K-1},
    ``p_ee`` (equi-energy jump probability), ``step_size`` tau (Metropolis sd at T = 1;
    level i uses tau sqrt(T_i)), ``buffer_size`` (points kept per level and ring),
    ``stagger`` (steps between the starts of successive levels; default num_warmup // K)."""
    h_np, t_np = _check_ladder(energy_levels, temperatures)
    if not 0.0 <= float(p_ee) < 1.0:
        raise ValueError(f"p_ee must lie in [0, 1), got {p_ee}")
    check_positive("step_size", step_size)
    check_positive("buffer_size", buffer_size, integer=True)
    k, cap = h_np.size, int(buffer_size)
    levels, temps = jnp.asarray(h_np, jnp.float32), jnp.asarray(t_np, jnp.float32)
    trunc = levels.at[0].set(-jnp.inf)  # level 0 is the target, untruncated
    scales = jnp.asarray(float(step_size) * np.sqrt(t_np), jnp.float32)
    stagger = num_warmup // k if stagger is None else int(stagger)
    if stagger < 0:
        raise ValueError(f"stagger must be >= 0, got {stagger}")
    starts = jnp.asarray((k - 1 - np.arange(k)) * stagger, jnp.int32)  # level i starts at starts[i]
    record_starts = starts + stagger // 2
    logdensity_fn = target.logdensity_fn

    def energy(x):
        value = -logdensity_fn(x)
        return jnp.where(jnp.isnan(value), jnp.inf, value)

    def log_level(h, i):
        return -jnp.maximum(h, trunc[i]) / temps[i]

    def ring(h):
        return jnp.sum(h >= levels[1:]).astype(jnp.int32)

    def level_step(key, i, x, h, buffers, counts):
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
        buffer = buffer.at[j, jnp.minimum(slot, cap - 1)].set(jnp.where(store, x, buffer[j, jnp.minimum(slot, cap - 1)]))
        return buffer, count.at[j].add(on.astype(count.dtype))

    def one_step(key, state: EEState):
        k_move, k_rec = jax.random.split(key)
        idx = jnp.arange(k)
        x, h, prob, accept, nonfinite, jump = jax.vmap(level_step, in_axes=(0, 0, 0, 0, None, None))(
            jax.random.split(k_move, k), idx, state.positions, state.energies, state.buffers, state.counts
        )
        active = state.t >= starts
        x = jnp.where(active.reshape(k, *([1] * (x.ndim - 1))), x, state.positions)
        h = jnp.where(active, h, state.energies)
        on = state.t >= record_starts
        buffers, counts = jax.vmap(record, in_axes=(0, 0, 0, 0, 0, 0))(jax.random.split(k_rec, k), state.buffers, state.counts, x, h, on)
        new = EEState(x, h, buffers, counts, state.t + 1)
        stats = step_stats(-h[0], prob[0], accept[0], scales[0], 0, nonfinite=nonfinite[0], extra={"ee_jump": jump[0] & accept[0]})
        return new, stats

    def init(key, position):
        del key
        positions = jnp.broadcast_to(position, (k, *position.shape))
        energies = jnp.full((k,), energy(position), jnp.float32)
        buffers = jnp.zeros((k, k, cap, *position.shape), position.dtype)
        return EEState(positions, energies, buffers, jnp.zeros((k, k), jnp.int32), jnp.zeros((), jnp.int32))

    return Sampler(
        "equi-energy",
        init=init,
        warmup_step=lambda key, state, t: one_step(key, state),
        finalize=lambda state: (state, {"energy_levels": levels, "temperatures": temps}),
        step=lambda key, state, params: one_step(key, state),
        position=lambda state: state.positions[0],
    )
