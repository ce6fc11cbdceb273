"""Quadratic log densities on any discrete space: f(s) = bᵀs + sᵀJs.

The convention is Rhodes & Gutmann's code: ``f(s) = sᵀ J s + bᵀ s`` with **no** factor
½ (so a symmetric ``J`` contributes ``2 J_ij s_i s_j`` per pair i≠j). On
``Categorical(k, d)`` the position is flattened to the ``d*k`` one-hot vector. The
function is the same formula on real inputs, so gradient samplers can differentiate it;
its Hessian is ``2 J`` — the "true M" of PAVG / block Gibbs is ``metadata["J"]``.

A structured ``J`` (e.g. a lattice's neighbour sums) is given as ``apply_J``, the
mat-vec ``x -> J x`` on the flattened position; the dense ``J`` is then optional and only
kept as metadata. Either way the log density and its gradient ``2 J s + b`` cost one
mat-vec together (a custom JVP reuses ``J s``, as J is symmetric).

Exact truth (marginals, mean, covariance, exact samples) comes from enumeration when
the space has at most ``max_enumerate`` states.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

from gradmc.base import Target
from gradmc.enumeration import ENUMERATE_LIMIT, enumerate_if_small
from gradmc.registry import register_target
from gradmc.spaces import Binary, Categorical, DiscreteSpace, Ordinal, Spin

__all__ = ["quadratic_form", "quadratic_target", "quadratic"]


def _check_coefficients(J, b, size: int) -> tuple[np.ndarray | None, np.ndarray]:
    b = np.zeros(size) if b is None else np.asarray(b, dtype=np.float64)
    if b.shape != (size,):
        raise ValueError(f"b must have shape ({size},), got {b.shape}")
    if not np.all(np.isfinite(b)):
        raise ValueError("J and b must be finite")
    if J is None:
        return None, b
    J = np.asarray(J, dtype=np.float64)
    if J.shape != (size, size):
        raise ValueError(f"J must have shape ({size}, {size}) for a space of {size} coordinates, got {J.shape}")
    if not np.all(np.isfinite(J)):
        raise ValueError("J and b must be finite")
    if not np.allclose(J, J.T, rtol=1e-12, atol=1e-12):
        raise ValueError("J must be symmetric (sᵀJs only sees the symmetric part; pass (J + Jᵀ)/2)")
    return J, b


def quadratic_form(apply_J: Callable, b: np.ndarray) -> Callable:
    """``s -> sᵀJs + bᵀs`` for a symmetric ``J`` given by its mat-vec ``apply_J`` (on the
    flattened ``s``), in the input's dtype. The JVP reuses ``g = J s``: value and gradient
    ``2 J s + b`` cost one mat-vec (plain autodiff would need two); higher derivatives
    still work (Hessian ``2 J``).
    """
    b64 = np.asarray(b, np.float64)

    @jax.custom_jvp
    def form(x):
        return x @ apply_J(x) + jnp.asarray(b64, x.dtype) @ x

    @form.defjvp
    def _jvp(primals, tangents):
        (x,), (dx,) = primals, tangents
        g = apply_J(x)
        bx = jnp.asarray(b64, x.dtype)
        return x @ g + bx @ x, (2 * g + bx) @ dx

    def logdensity_fn(s):
        return form(jnp.reshape(s, (-1,)))

    return logdensity_fn


def quadratic_target(
    J,
    b,
    space: DiscreteSpace,
    *,
    name: str = "quadratic",
    description: str = "",
    initial_position=None,
    max_enumerate: int = ENUMERATE_LIMIT,
    metadata: dict | None = None,
    apply_J: Callable | None = None,
) -> Target:
    """The target ``f(s) = sᵀJs + bᵀs`` on ``space`` (``J`` symmetric ``(D, D)``, ``b`` ``(D,)``, D = space.dim).

    ``apply_J`` (optional) is the mat-vec ``x -> J x`` of a structured symmetric ``J`` on
    the flattened ``(D,)`` position, in jax and in the input's dtype; the log density uses
    it instead of the dense ``J``, which may then be ``None`` (not kept). The truth is
    exact (enumeration) when ``space`` has at most ``max_enumerate`` states, else ``None``.
    ``metadata`` gets ``b`` and ``J`` (when given; float64 numpy) and, when enumerated,
    ``pairwise_marginals`` ``(d, d, k, k)``.
    """
    if not isinstance(space, DiscreteSpace):
        raise ValueError(f"quadratic targets live on a discrete space, got {space}")
    if J is None and apply_J is None:
        raise ValueError("a quadratic target needs J (a dense (D, D) matrix) or apply_J (its mat-vec)")
    J, b = _check_coefficients(J, b, space.dim)
    if apply_J is None:
        J64 = J

        def apply_J(x):
            return jnp.asarray(J64, x.dtype) @ x

    logdensity_fn = quadratic_form(apply_J, b)
    exact = enumerate_if_small(logdensity_fn, space, max_enumerate)
    extra = {} if exact is None else {"pairwise_marginals": exact.pairwise}
    return Target(
        name=name,
        logdensity_fn=logdensity_fn,
        space=space,
        description=description or f"quadratic log density sᵀJs + bᵀs on {space}",
        truth=None if exact is None else exact.truth(),
        initial_position=initial_position,
        metadata={**({} if J is None else {"J": J}), "b": b, **extra, **(metadata or {})},
    )


def _make_space(space: str, d: int, num_values: int) -> DiscreteSpace:
    if space == "binary":
        return Binary(d)
    if space == "spin":
        return Spin(d)
    if space == "ordinal":
        return Ordinal(np.arange(num_values, dtype=np.float64), d)
    if space == "categorical":
        return Categorical(num_values, d)
    raise ValueError(f"space must be one of 'binary', 'spin', 'ordinal', 'categorical', got {space!r}")


@register_target(
    "quadratic",
    "quadratic log density sᵀJs + bᵀs (no ½) on any discrete space; exact truth by enumeration",
    kind="discrete",
)
def quadratic(
    J=None,
    b=None,
    space: str | DiscreteSpace = "binary",
    d: int = 4,
    num_values: int = 3,
    scale: float = 0.5,
    seed: int = 0,
) -> Target:
    """``sᵀJs + bᵀs`` on ``space``.

    ``space`` is a :class:`~gradmc.spaces.DiscreteSpace` or one of ``"binary"``,
    ``"spin"``, ``"ordinal"`` (values 0..num_values-1) and ``"categorical"``
    (``num_values`` categories), with ``d`` coordinates. ``J``/``b`` default to a random
    symmetric ``J`` with N(0, scale²/D) entries (zero diagonal) and ``b ~ N(0, scale²)``,
    drawn with ``numpy.random.default_rng(seed)``.
    """
    sp = space if isinstance(space, DiscreteSpace) else _make_space(space, d, num_values)
    if float(scale) < 0 or not np.isfinite(scale):
        raise ValueError(f"scale must be a finite number >= 0, got {scale}")
    rng = np.random.default_rng(seed)
    size = sp.dim
    if J is None:
        g = rng.normal(scale=scale / np.sqrt(size), size=(size, size))
        J = np.triu(g, 1) + np.triu(g, 1).T
    if b is None:
        b = rng.normal(scale=scale, size=size)
    return quadratic_target(J, b, sp, name="quadratic")
