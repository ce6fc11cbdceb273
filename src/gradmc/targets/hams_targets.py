"""Targets of Zhou & Tan's DHAMS and PDHAMS papers with exact truth (the discrete-HAMS algorithm
statement, ``docs/discrete-hams.md`` §10).

* ``zhoutan-discrete-gaussian`` (§10.2): f(s) = −½ sᵀΣ⁻¹s on {−10..10}^d, Σ = σ²[ρ11ᵀ + (1−ρ)I]
  (d = 8, σ = 5, ρ = 0.9). W = −Σ⁻¹ = −αI + γ11ᵀ is exact (``metadata["W"]``). Every
  k-variate marginal is exact by the cheap formula
  p(x) ∝ exp(−(α/2)|x|²) Σ_m c_m exp((γ/2)(Σx + m)²), c the (d−k)-fold convolution over
  the lattice of exp(−(α/2)t²) (:meth:`SymmetricMarginals.marginal`).
* ``zhoutan-mixture-dhams`` (§10.3, the DHAMS paper's fully specified mixture):
  f(s) = log Σ_k exp(−|s − c_k 1|²/(2σ²)), d = 8, c = (−7, −3.5, 0, 3.5, 7), σ = 1.8.
* ``zhoutan-quadratic-mixture`` (§10.3, PDHAMS eq. 41): the paper does not give its constants;
  this is the algorithm statement's **stand-in** d = 8, K = 7, c = linspace(−7.5, 7.5, 7),
  σ_k = 1.5 + 0.1|c_k|, no σ_k^{−d} factor. Exact k-variate marginals: p(x) ∝ Σ_k Z_k^{d−k} exp(−|x − c_k 1|²/(2σ_k²)),
  Z_k = Σ_{t∈S} exp(−(t − c_k)²/(2σ_k²)).

Both families are exchangeable (every k-subset has the same marginal), so the truth is
computed once per k. The clock Potts model of §10.4 is ``clock-potts`` in
:mod:`gradmc.targets.lattice` (side L, κ, FM/AFM as options).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from scipy.special import logsumexp

from gradmc.base import Target, Truth
from gradmc.registry import register_target
from gradmc.spaces import Ordinal

__all__ = ["SymmetricMarginals", "discrete_gaussian", "quadratic_mixture", "mixture_dhams", "STAND_IN_NOTE"]

STAND_IN_NOTE = (
    "stand-in for the PDHAMS paper's quadratic mixture (the paper does not give its d, K, lattice, c_k, σ_k): "
    "the algorithm statement's default d = 8, S = {-10..10}, K = 7, c = linspace(-7.5, 7.5, 7), σ_k = 1.5 + 0.1|c_k|"
)


def _lattice(half_width) -> np.ndarray:
    if isinstance(half_width, bool) or int(half_width) != half_width or int(half_width) < 1:
        raise ValueError(f"half_width must be an integer >= 1 (the lattice is -h..h), got {half_width!r}")
    return np.arange(-int(half_width), int(half_width) + 1, dtype=np.float64)


def _check_dim(d) -> int:
    if isinstance(d, bool) or int(d) != d or int(d) < 2:
        raise ValueError(f"d must be an integer >= 2, got {d!r}")
    return int(d)


class SymmetricMarginals:
    """Exact k-variate marginals of an exchangeable target, from ``log_table(k)``: the log of
    the unnormalised (K,)*k table of any k coordinates. Normalised and cached per k.
    """

    def __init__(self, values, d: int, log_table):
        """Keep the value set and the table function (nothing is computed yet).

        Parameters
        ----------
        values : array_like
            The K values of each coordinate.
        d : int
            The number of coordinates.
        log_table : callable
            ``log_table(k)``: the unnormalised log table of any k coordinates.
        """
        self.values, self.d, self._log_table = np.asarray(values, np.float64), int(d), log_table
        self._cache: dict[int, np.ndarray] = {}

    def _table(self, k: int) -> np.ndarray:
        if k not in self._cache:
            logp = self._log_table(k)
            self._cache[k] = np.exp(logp - logsumexp(logp))
        return self._cache[k]

    def marginal(self, subset) -> np.ndarray:
        """The exact marginal table of the coordinates ``subset`` (shape (K,)*len(subset))."""
        subset = tuple(int(i) for i in subset)
        distinct = len(set(subset)) == len(subset)
        if not (distinct and all(0 <= i < self.d for i in subset) and 1 <= len(subset) <= min(self.d, 4)):
            raise ValueError(f"subset must hold 1 to 4 distinct coordinates in [0, {self.d}), got {subset}")
        return self._table(len(subset))

    __call__ = marginal

    def truth(self, source: str) -> Truth:
        """The target's :class:`~gradmc.base.Truth` (mean, covariance, marginals) from the
        uni- and bivariate tables.

        Parameters
        ----------
        source : str
            How the tables were obtained.
        """
        v, p1, p2 = self.values, self._table(1), self._table(2)
        mean, second, cross = float(p1 @ v), float(p1 @ v**2), float(v @ p2 @ v)
        cov = np.full((self.d, self.d), cross - mean**2)
        np.fill_diagonal(cov, second - mean**2)
        return Truth(mean=np.full(self.d, mean), cov=cov, marginals=np.tile(p1, (self.d, 1)), source=source)


def _grid(values, k: int) -> np.ndarray:
    """All K^k points of the lattice in k dimensions, shaped (K,)*k + (k,)."""
    return np.stack(np.meshgrid(*([values] * k), indexing="ij"), axis=-1)


# -- discrete Gaussian (§10.2) ----------------------------------------------------------------


@register_target(
    "zhoutan-discrete-gaussian",
    "discrete Gaussian on {-h..h}^d, Σ = σ²[ρ11ᵀ + (1-ρ)I] (Zhou & Tan §10.2; exact W and marginals)",
    kind="discrete",
)
def discrete_gaussian(d: int = 8, sigma: float = 5.0, rho: float = 0.9, half_width: int = 10) -> Target:
    """f(s) = −½ sᵀΣ⁻¹s; defaults are the paper's (d = 8, σ = 5, ρ = 0.9, {−10..10})."""
    d, values = _check_dim(d), _lattice(half_width)
    sigma, rho = float(sigma), float(rho)
    if not (sigma > 0 and np.isfinite(sigma)):
        raise ValueError(f"sigma must be > 0, got {sigma}")
    if not (-1.0 / (d - 1) < rho < 1.0):
        raise ValueError(f"rho must lie in (-1/(d-1), 1) for Σ to be positive definite, got {rho}")
    alpha = 1.0 / (sigma**2 * (1.0 - rho))
    gamma = alpha * rho / (1.0 + (d - 1) * rho)
    W = -alpha * np.eye(d) + gamma * np.ones((d, d))  # = −Σ⁻¹

    def logdensity_fn(s):
        return -0.5 * alpha * jnp.sum(s * s) + 0.5 * gamma * jnp.sum(s) ** 2

    weight = -0.5 * alpha * values**2  # log exp(−(α/2) t²)

    def log_table(k: int) -> np.ndarray:
        # c_m: the (d−k)-fold convolution of exp(weight) over the lattice, in log space
        log_c, offset = np.zeros(1), 0.0
        for _ in range(d - k):
            log_c = _log_convolve(log_c, weight)
            offset += values[0]
        m = offset + np.arange(log_c.size) * (values[1] - values[0])  # totals of the other d−k coordinates
        x = _grid(values, k)
        total = x.sum(-1)[..., None]
        return -0.5 * alpha * np.sum(x * x, axis=-1) + logsumexp(log_c + 0.5 * gamma * (total + m) ** 2, axis=-1)

    marginals = SymmetricMarginals(values, d, log_table)
    space = Ordinal(values, d)
    return Target(
        name="zhoutan-discrete-gaussian",
        logdensity_fn=logdensity_fn,
        space=space,
        description=f"discrete Gaussian d={d}, σ={sigma}, ρ={rho}, on {{{-int(half_width)}..{int(half_width)}}}^{d}",
        truth=marginals.truth("closed form (convolution formula, docs/discrete-hams.md §10.2)"),
        metadata={
            "W": W,
            "Sigma": sigma**2 * (rho * np.ones((d, d)) + (1 - rho) * np.eye(d)),
            "exact_marginal": marginals,
        },
    )


def _log_convolve(log_a: np.ndarray, log_b: np.ndarray) -> np.ndarray:
    """Log of the convolution of exp(log_a) and exp(log_b) (full length)."""
    out = np.full(log_a.size + log_b.size - 1, -np.inf)
    for j, lb in enumerate(log_b):
        out[j : j + log_a.size] = np.logaddexp(out[j : j + log_a.size], log_a + lb)
    return out


# -- quadratic mixtures (§10.3) ----------------------------------------------------------------


def _mixture(name, description, d, half_width, centres, scales) -> Target:
    d, values = _check_dim(d), _lattice(half_width)
    c = np.asarray(centres, np.float64).reshape(-1)
    sd = np.broadcast_to(np.asarray(scales, np.float64), c.shape).copy()
    if c.size < 1 or np.any(~np.isfinite(c)) or np.any(~(sd > 0)):
        raise ValueError("the mixture needs finite centres and positive scales")
    cj, inv2 = jnp.asarray(c, jnp.float32), jnp.asarray(0.5 / sd**2, jnp.float32)

    def logdensity_fn(s):
        return jax.nn.logsumexp(-inv2 * jnp.sum((s[None, :] - cj[:, None]) ** 2, axis=-1))

    log_z = logsumexp(-((values[None, :] - c[:, None]) ** 2) / (2 * sd[:, None] ** 2), axis=1)  # (K,)

    def log_table(k: int) -> np.ndarray:
        x = _grid(values, k)[..., None, :]  # (..., 1, k)
        comp = (d - k) * log_z - np.sum((x - c[:, None]) ** 2, axis=-1) / (2 * sd**2)
        return logsumexp(comp, axis=-1)

    marginals = SymmetricMarginals(values, d, log_table)
    return Target(
        name=name,
        logdensity_fn=logdensity_fn,
        space=Ordinal(values, d),
        description=description,
        truth=marginals.truth("closed form (product of per-component lattice sums, docs/discrete-hams.md §10.3)"),
        metadata={"centres": c, "scales": sd, "exact_marginal": marginals},
    )


@register_target(
    "zhoutan-mixture-dhams",
    "the DHAMS paper's quadratic mixture: d=8, {-10..10}, K=5, c=(-7,-3.5,0,3.5,7), σ=1.8 "
    "(docs/discrete-hams.md §10.3)",
    kind="discrete",
)
def mixture_dhams(d: int = 8, half_width: int = 10, sigma: float = 1.8) -> Target:
    """f(s) = log Σ_k exp(−|s − c_k 1|²/(2σ²)), c = (−7, −3.5, 0, 3.5, 7)."""
    description = f"DHAMS-paper quadratic mixture, d={d}, K=5, σ={sigma}"
    centres = np.array([-7.0, -3.5, 0.0, 3.5, 7.0])
    return _mixture("zhoutan-mixture-dhams", description, d, half_width, centres, float(sigma))


@register_target(
    "zhoutan-quadratic-mixture",
    "STAND-IN for the PDHAMS paper's quadratic mixture (constants not published): d=8, K=7, "
    "c=linspace(-7.5,7.5,7), σ_k=1.5+0.1|c_k|",
    kind="discrete",
)
def quadratic_mixture(d: int = 8, half_width: int = 10, num_components: int = 7, spread: float = 7.5) -> Target:
    """PD eq. 41 with μ_k = c_k 1, Σ_k = σ_k² I; the defaults are the algorithm statement's
    stand-in (see module doc).
    """
    if isinstance(num_components, bool) or int(num_components) != num_components or int(num_components) < 1:
        raise ValueError(f"num_components must be an integer >= 1, got {num_components!r}")
    centres = np.linspace(-float(spread), float(spread), int(num_components))
    scales = 1.5 + 0.1 * np.abs(centres)
    return _mixture("zhoutan-quadratic-mixture", STAND_IN_NOTE, d, half_width, centres, scales)
