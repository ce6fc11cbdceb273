"""Lattice models on a periodic ``side × side`` square lattice (4 nearest neighbours).

* **Ising** (Rhodes & Gutmann §5.3, as coded): ``f(s) = sᵀJs + bᵀs`` with
  ``J = strength · A``, ``b = field · 1``, on ``Spin`` ({−1, +1}) or ``Binary`` ({0, 1}).
  There is **no** ½: ``sᵀJs`` visits every bond twice, so a bond contributes
  ``2 · strength · s_i s_j``.
* **Categorical Potts** (one-hot rows, ``Categorical(k, side²)``):
  ``f(S) = Σ_ij J_ij ⟨S_i, S_j⟩ + Σ_i ⟨h_i, S_i⟩`` with the same ``J``: the Ising
  convention applied to one-hot vectors, i.e. ``sᵀ (J ⊗ I_k) s + hᵀs`` with
  ``s = vec(S)``; a bond contributes ``2 · strength · [S_i = S_j]``.
* **Clock Potts** (Zhou & Tan §10.4): values ``{0, ..., q−1}`` (``Ordinal``),
  ``f(s) = coupling · Σ_{bonds <ij>} cos(2π (s_i − s_j) / q)``, every bond counted
  **once**, coupling ``+κ`` (ferromagnetic) or ``−κ`` (antiferromagnetic). Extended to
  real ``s`` by the same formula.

``A`` is the adjacency of the periodic lattice: site ``(r, c)`` (index ``r·side + c``) is
linked to ``(r±1, c)`` and ``(r, c±1)`` modulo ``side``. With ``side = 2`` the wrap
links each pair of neighbours twice (``A_ij = 2``), as the periodic sum does. Every model
has its exact truth by enumeration when its state space has at most 2^20 states
(e.g. Ising with ``side ≤ 4``).
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from gradmc.base import Target
from gradmc.registry import register_target
from gradmc.spaces import Binary, Categorical, Ordinal, Spin
from gradmc.targets.enumerate import enumerate_if_small
from gradmc.targets.quadratic import quadratic_target

__all__ = ["periodic_adjacency", "ising", "potts", "clock_potts", "CLOCK_KAPPA"]

#: Default |J/T| of the 7-state clock model: 1.1, i.e. T ≈ 0.91 J, at the upper BKT
#: transition T₂ ≈ 0.9 J (Li et al., PRE 101, 060105, 2020; the Zhou & Tan value is lost).
CLOCK_KAPPA = 1.1


def _check_side(side) -> int:
    if isinstance(side, bool) or int(side) != side or int(side) < 2:
        raise ValueError(f"side must be an integer >= 2 (the lattice is side x side), got {side!r}")
    return int(side)


def _check_finite(value, name: str) -> float:
    value = float(value)
    if not np.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value}")
    return value


def _broadcast_field(field, shape: tuple[int, ...]) -> np.ndarray:
    try:
        h = np.broadcast_to(np.asarray(field, np.float64), shape)
    except ValueError:
        raise ValueError(f"field must broadcast to shape {shape}, got shape {np.shape(field)}") from None
    if not np.all(np.isfinite(h)):
        raise ValueError("field must be finite")
    return h.copy()


def periodic_adjacency(side: int) -> np.ndarray:
    """``(side², side²)`` adjacency of the periodic square lattice (symmetric, zero diagonal)."""
    side = _check_side(side)
    site = np.arange(side * side).reshape(side, side)
    a = np.zeros((side * side, side * side))
    for neighbour in (np.roll(site, 1, axis=0), np.roll(site, 1, axis=1)):
        np.add.at(a, (site.ravel(), neighbour.ravel()), 1.0)
    return a + a.T


@register_target(
    "ising",
    "periodic lattice Ising model f(s) = sᵀJs + bᵀs (no ½), J = strength·A; Spin or Binary",
    kind="discrete",
)
def ising(side: int = 10, strength: float = 0.2, field=0.0, spin: bool = True) -> Target:
    """Ising model on the periodic ``side × side`` lattice (defaults: Rhodes & Gutmann §5.3).

    ``field`` is a scalar or one value per site (``side²``).
    """
    side = _check_side(side)
    strength = _check_finite(strength, "strength")
    b = _broadcast_field(field, (side * side,))
    space = Spin(side * side) if spin else Binary(side * side)
    return quadratic_target(
        strength * periodic_adjacency(side),
        b,
        space,
        name="ising",
        description=f"Ising {side}x{side} periodic, strength {strength}, field {field}, on {space}",
        metadata={"side": side, "strength": strength, "field": b},
    )


@register_target(
    "potts",
    "categorical (one-hot) Potts model on a periodic lattice: Σ J_ij<S_i,S_j> + Σ <h_i,S_i>, J = strength·A",
    kind="discrete",
)
def potts(side: int = 3, num_states: int = 3, strength: float = 0.5, field=0.0) -> Target:
    """Categorical Potts model with ``num_states`` categories on the periodic lattice.

    ``field`` broadcasts to ``(side², num_states)`` (a scalar, a per-category ``(k,)``
    vector or a full table).
    """
    side = _check_side(side)
    strength = _check_finite(strength, "strength")
    space = Categorical(num_states, side * side)
    h = _broadcast_field(field, space.event_shape)
    return quadratic_target(
        np.kron(strength * periodic_adjacency(side), np.eye(space.k)),
        h.reshape(-1),
        space,
        name="potts",
        description=f"categorical Potts {side}x{side} periodic, k={space.k}, strength {strength}",
        metadata={"side": side, "strength": strength, "field": h},
    )


@register_target(
    "clock-potts",
    "q-state clock Potts model coupling·Σ_<ij> cos(2π(s_i−s_j)/q) on a periodic lattice (FM or AFM)",
    kind="discrete",
)
def clock_potts(side: int = 20, q: int = 7, kappa: float = CLOCK_KAPPA, antiferromagnetic: bool = False) -> Target:
    """Clock Potts model, values ``0..q−1``; coupling ``J/T = −κ`` if ``antiferromagnetic`` else ``+κ``."""
    side = _check_side(side)
    if isinstance(q, bool) or int(q) != q or int(q) < 2:
        raise ValueError(f"q must be an integer >= 2, got {q!r}")
    q = int(q)
    kappa = _check_finite(kappa, "kappa")
    if kappa <= 0:
        raise ValueError(f"kappa = |J/T| must be > 0 (choose the sign with antiferromagnetic=), got {kappa}")
    coupling = -kappa if antiferromagnetic else kappa
    space = Ordinal(np.arange(q, dtype=np.float64), side * side)

    def logdensity_fn(s):
        grid = jnp.reshape(s, (side, side))
        angle = 2.0 * jnp.pi / q
        down = jnp.cos(angle * (grid - jnp.roll(grid, 1, axis=0)))
        right = jnp.cos(angle * (grid - jnp.roll(grid, 1, axis=1)))
        return coupling * jnp.sum(down + right)

    exact = enumerate_if_small(logdensity_fn, space)
    metadata = {"side": side, "q": q, "coupling": coupling}
    if exact is not None:
        metadata["pairwise_marginals"] = exact.pairwise
    kind = "AFM" if antiferromagnetic else "FM"
    return Target(
        name="clock-potts",
        logdensity_fn=logdensity_fn,
        space=space,
        description=f"{q}-state clock Potts {side}x{side} periodic, {kind}, |J/T| = {kappa}",
        truth=None if exact is None else exact.truth(),
        metadata=metadata,
    )
