"""The 20-D ordinal mixtures of polynomials of Rhodes & Gutmann (2022, §5.1), as in the authors' code.

On the lattice ``S^d``, ``S = linspace(−1.5, 3, 50)``, the target is an equal-weight
mixture of ``K = 50`` fully factorised components whose factors are normalised **per
dimension** over ``S`` (the paper's eq. 18 omits that normalisation; the code has it):

    p(s) = (1/K) Σ_k Π_i q_k(s_i),   q_k(u) = exp(g(u − c_k)) / Σ_{v∈S} exp(g(v − c_k))

* poly2: ``g(t) = 0.75 − 2t − 6t²``, ``c_k = linspace(0, 2, 50)[k]``
* poly4: ``g(t) = 2(−t + t² − t³ − t⁴)``, ``c_k = linspace(0, 3, 50)[k]``

(eqs 19–20 of the paper write other shifts; docs/experiments.md follows the authors' code).
``log p`` is exact (normalised), and the same formula on real ``s`` is differentiable.
Truth is exact: draws (pick a component, then each coordinate independently), marginals
``(d, 50)`` and mean/covariance in closed form. Chains start uniformly on the state
indices {10, 11, 12} of every coordinate.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
from scipy.special import logsumexp

from gradmc.base import Target, Truth
from gradmc.registry import register_target
from gradmc.spaces import Ordinal

__all__ = ["LATTICE", "ordinal_mixture_target", "poly2", "poly4"]

#: The value set of every coordinate: 50 equally spaced points in [−1.5, 3].
LATTICE = np.linspace(-1.5, 3.0, 50)

#: Chains start with every coordinate's index drawn uniformly from these.
_START_INDICES = (10, 11, 12)


def _poly2(t):
    return 0.75 - 2.0 * t - 6.0 * t**2


def _poly4(t):
    return 2.0 * (-t + t**2 - t**3 - t**4)


def ordinal_mixture_target(
    name: str, g: Callable, centres, d: int = 20, values=LATTICE, description: str = ""
) -> Target:
    """Equal-weight mixture of per-dimension-normalised components ``exp(g(u − c_k))``."""
    if isinstance(d, bool) or int(d) != d or int(d) < 1:
        raise ValueError(f"d must be an integer >= 1, got {d!r}")
    d = int(d)
    space = Ordinal(values, d)
    v = np.asarray(space.values, np.float64)
    c = np.asarray(centres, np.float64)
    logits = g(v[None, :] - c[:, None])  # (K, k)
    log_norm = logsumexp(logits, axis=1)  # per-component, per-dimension normaliser
    log_q = logits - log_norm[:, None]
    q = np.exp(log_q)
    num_components = c.size

    def logdensity_fn(s):
        s = jnp.asarray(s)
        cc = jnp.asarray(c, s.dtype)
        per_component = jnp.sum(g(s[None, :] - cc[:, None]), axis=1) - d * jnp.asarray(log_norm, s.dtype)
        return jax.nn.logsumexp(per_component) - np.log(num_components)

    # closed-form truth: coordinates are independent given the component
    mu_k, m2_k = q @ v, q @ v**2
    mean = mu_k.mean()
    between = (mu_k**2).mean() - mean**2  # Cov(s_i, s_j), i != j
    cov = np.full((d, d), between) + np.eye(d) * ((m2_k - mu_k**2).mean())
    cdf = np.cumsum(q, axis=1)
    cdf /= cdf[:, -1:]

    def sample(key: jax.Array, n: int) -> jax.Array:
        k_key, u_key = jax.random.split(key)
        comp = jax.random.randint(k_key, (n,), 0, num_components)
        u = jax.random.uniform(u_key, (n, d))
        idx = jax.vmap(lambda row, uu: jnp.searchsorted(row, uu, side="right"))(jnp.asarray(cdf)[comp], u)
        return space.from_index(jnp.minimum(idx, v.size - 1))

    def initial_position(key: jax.Array) -> jax.Array:
        lo, hi = _START_INDICES[0], _START_INDICES[-1] + 1
        return space.from_index(jax.random.randint(key, (d,), lo, hi))

    truth = Truth(
        mean=np.full(d, mean),
        cov=cov,
        marginals=np.tile(q.mean(axis=0), (d, 1)),
        sample=sample,
        source="closed form (mixture of per-dimension-normalised factorised components)",
    )
    return Target(
        name=name,
        logdensity_fn=logdensity_fn,
        space=space,
        description=description,
        truth=truth,
        initial_position=initial_position,
        metadata={"centres": c, "component_probs": q},
    )


@register_target(
    "poly2",
    "Rhodes & Gutmann §5.1: 20-D ordinal mixture of 2nd-order polynomials on linspace(-1.5, 3, 50) (authors' code)",
    kind="discrete",
)
def poly2(d: int = 20) -> Target:
    """Rhodes & Gutmann's 2nd-order polynomial mixture (§5.1).

    Parameters
    ----------
    d : int
        The number of coordinates.
    """
    description = "mixture of 50 factorised exp(0.75 - 2t - 6t^2), t = u - c_k, c_k in linspace(0, 2, 50)"
    return ordinal_mixture_target("poly2", _poly2, np.linspace(0.0, 2.0, 50), d, description=description)


@register_target(
    "poly4",
    "Rhodes & Gutmann §5.1: 20-D ordinal mixture of 4th-order polynomials on linspace(-1.5, 3, 50) (authors' code)",
    kind="discrete",
)
def poly4(d: int = 20) -> Target:
    """Rhodes & Gutmann's 4th-order polynomial mixture (§5.1).

    Parameters
    ----------
    d : int
        The number of coordinates.
    """
    description = "mixture of 50 factorised exp(2(-t + t^2 - t^3 - t^4)), t = u - c_k, c_k in linspace(0, 3, 50)"
    return ordinal_mixture_target("poly4", _poly4, np.linspace(0.0, 3.0, 50), d, description=description)
