"""Lattice models on a periodic ``side × side`` square lattice (4 nearest neighbours).

* **Ising** (Rhodes & Gutmann §5.3, as in the authors' code): ``f(s) = sᵀJs + bᵀs`` with
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
(e.g. Ising with ``side ≤ 4``). Traces name the sites as a ``(side, side)`` lattice
(axes ``row`` and ``col``): ``spins`` for Ising, the category ``labels`` for Potts.

Ising and Potts are structured: ``J s`` is ``strength`` times the sum of the four
neighbour rolls of ``s`` on the ``(side, side)`` grid (:func:`neighbour_sum`, which is
``A s`` exactly, side 2's double bonds included), so a log density with its gradient
costs O(side²) rather than O(side⁴). Only small Ising lattices (at most
:data:`DENSE_MATVEC_MAX` sites) multiply by the dense ``J`` instead, which measured faster
there on CPU; the function is the same. The dense ``J`` (``metadata["J"]``, the "true
M" of PAVG / block Gibbs) is kept when it has at most :data:`DENSE_J_MAX` rows, or on
request (``dense_J=True``).
"""

from __future__ import annotations

import dataclasses

import jax.numpy as jnp
import numpy as np

from gradmc.base import Target
from gradmc.enumeration import enumerate_if_small
from gradmc.registry import register_target
from gradmc.spaces import Binary, Categorical, Ordinal, Spin
from gradmc.targets.quadratic import quadratic_target
from gradmc.variables import Variables

__all__ = [
    "periodic_adjacency",
    "neighbour_sum",
    "lattice_variables",
    "ising",
    "potts",
    "clock_potts",
    "CLOCK_KAPPA",
    "DENSE_J_MAX",
    "DENSE_MATVEC_MAX",
]

#: Default |J/T| of the 7-state clock model: 1.1, i.e. T ≈ 0.91 J, at the upper BKT
#: transition T₂ ≈ 0.9 J (Li et al., PRE 101, 060105, 2020; Zhou & Tan do not give their value).
CLOCK_KAPPA = 1.1

#: Ising / Potts keep the dense ``J`` as ``metadata["J"]`` when it has at most this many
#: rows (side² for Ising, side²·k for Potts): at most 8 MiB of float64, enough for every
#: user of the true J (block Gibbs / PAVG up to the 32×32 lattice, PCD on 10×10); a
#: larger dense J costs O(D²) memory and block Gibbs an O(D³) eigendecomposition.
DENSE_J_MAX = 1024

#: Ising lattices with at most this many sites evaluate ``J s`` as a dense mat-vec: on CPU
#: (NCG, 100–1000 chains) it beat the neighbour rolls by 10–25% up to 16×16 and was slower
#: from 20×20 on. Potts (``side²·k`` one-hot coordinates) always rolls: faster from 6×6, k = 3.
DENSE_MATVEC_MAX = 256


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


def neighbour_sum(side: int, categories: int = 1):
    """``x -> (A ⊗ I_categories) x`` on the flattened ``(side², categories)`` position: the
    sum of the four periodic neighbour rolls on the ``(side, side)`` grid (one grid per
    category; a single category keeps a 2-D grid, which XLA rolls about twice as fast).
    """
    shape = (side, side) if categories == 1 else (side, side, categories)

    def apply(x):
        grid = jnp.reshape(x, shape)
        total = sum(jnp.roll(grid, shift, axis) for axis in (0, 1) for shift in (1, -1))
        return jnp.reshape(total, (-1,))

    return apply


def lattice_variables(space, shape: tuple[int, int]) -> Variables:
    """The sites of an ``H × W`` lattice as one ``(H, W)`` variable (axes ``row`` and
    ``col``): ``spins`` (the values of a scalar space) or, on one-hot rows, the category
    ``labels``.

    Parameters
    ----------
    space : DiscreteSpace
        The lattice's space, ``H·W`` coordinates.
    shape : (int, int)
        ``(H, W)``.
    """
    if isinstance(space, Categorical):
        return Variables(
            lambda x: {"labels": jnp.reshape(jnp.argmax(x, axis=-1), shape)},
            space.event_shape,
            dims={"labels": ("row", "col")},
        )
    return Variables.reshaped("spins", space.event_shape, shape, dims=("row", "col"))


def _lattice_target(
    name: str, side: int, strength: float, b: np.ndarray, space, dense_J, description: str, metadata: dict
) -> Target:
    """The quadratic target ``sᵀ (strength·A ⊗ I_categories) s + bᵀs``, ``J s`` by
    :func:`neighbour_sum` (or the dense ``J`` on small Ising lattices, see :data:`DENSE_MATVEC_MAX`),
    its sites named by :func:`lattice_variables`; ``categories`` is the number of categories of a
    one-hot space (1 otherwise).
    """
    categories = space.k if isinstance(space, Categorical) else 1
    if not isinstance(dense_J, bool):
        raise ValueError(f"dense_J must be True or False, got {dense_J!r}")
    small = categories == 1 and space.dim <= DENSE_MATVEC_MAX
    keep = dense_J or space.dim <= DENSE_J_MAX
    J = np.kron(strength * periodic_adjacency(side), np.eye(categories)) if keep else None
    adjacency = neighbour_sum(side, categories)
    apply_J = None if small else (lambda x: strength * adjacency(x))
    target = quadratic_target(J, b, space, apply_J=apply_J, name=name, description=description, metadata=metadata)
    return dataclasses.replace(target, variables=lattice_variables(space, (side, side)))


@register_target(
    "ising", "periodic lattice Ising model f(s) = sᵀJs + bᵀs (no ½), J = strength·A; Spin or Binary", kind="discrete"
)
def ising(side: int = 10, strength: float = 0.2, field=0.0, spin: bool = True, dense_J: bool = False) -> Target:
    """Ising model on the periodic ``side × side`` lattice (defaults: Rhodes & Gutmann §5.3).

    ``field`` is a scalar or one value per site (``side²``). ``metadata["J"]`` is the
    dense ``J`` when ``side² <= DENSE_J_MAX`` or ``dense_J``.
    """
    side, strength = _check_side(side), _check_finite(strength, "strength")
    b = _broadcast_field(field, (side * side,))
    space = Spin(side * side) if spin else Binary(side * side)
    description = f"Ising {side}x{side} periodic, strength {strength}, field {field}, on {space}"
    metadata = {"side": side, "strength": strength, "field": b}
    return _lattice_target("ising", side, strength, b, space, dense_J, description, metadata)


@register_target(
    "potts",
    "categorical (one-hot) Potts model on a periodic lattice: Σ J_ij<S_i,S_j> + Σ <h_i,S_i>, J = strength·A",
    kind="discrete",
)
def potts(side: int = 3, num_states: int = 3, strength: float = 0.5, field=0.0, dense_J: bool = False) -> Target:
    """Categorical Potts model with ``num_states`` categories on the periodic lattice.

    ``field`` broadcasts to ``(side², num_states)`` (a scalar, a per-category ``(k,)``
    vector or a full table). ``metadata["J"]`` is the dense ``J ⊗ I_k`` when
    ``side²·k <= DENSE_J_MAX`` or ``dense_J``.
    """
    side, strength = _check_side(side), _check_finite(strength, "strength")
    space = Categorical(num_states, side * side)
    h = _broadcast_field(field, space.event_shape)
    description = f"categorical Potts {side}x{side} periodic, k={space.k}, strength {strength}"
    metadata = {"side": side, "strength": strength, "field": h}
    return _lattice_target("potts", side, strength, h.reshape(-1), space, dense_J, description, metadata)


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
