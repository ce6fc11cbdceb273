"""Continuous toy targets with known truth.

Registered targets (``gradmc.registry.target(name, **options)``):

* ``gaussian`` -- N(mean, cov) of any dimension (:func:`gaussian`); exact moments and sampler.
* ``gaussian-2d-corr`` -- 2-D Gaussian, unit variances, correlation rho = 0.99
  (Titsias & Dellaportas 2019, Fig. 1).
* ``neal-100`` -- Neal's 100-D Gaussian, N(0, diag(s^2)), s = 0.01, 0.02, ..., 1.00.
* ``gp-51`` -- 51-D Gaussian with the squared-exponential GP kernel of Titsias &
  Dellaportas 2019 on a regular grid of [0, 4].
* ``banana`` -- the textbook banana exp(-x^2/10 - y^4/10 - 2(y - x^2)^2); reference
  moments by quadrature (``scripts/compute_banana_moments.py``).
* ``warped-gaussian`` -- N(x1 | 0, nu) N(x2 | b(x1^2 - nu), 1), b = 0.1, nu = 100
  (Nemeth et al. 2022, §4.3); exact moments and sampler.
* ``flower`` -- -(||x|| - r - A cos(w atan2(x2, x1)))^2 / (2 sigma^2) (Nemeth et al. 2022,
  §4.3, with the squared residual of the authors' code); moments by quadrature.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources

import jax
import jax.numpy as jnp
import numpy as np
import scipy.linalg

from gradmc.base import Target, Truth
from gradmc.linalg import cholesky_factor
from gradmc.registry import register_target
from gradmc.spaces import Real

__all__ = ["gaussian", "gaussian_2d_corr", "neal_100", "gp_51", "banana", "warped_gaussian", "flower"]

_LOG_2PI = float(np.log(2 * np.pi))


def _gaussian_bounds(mean: np.ndarray, cov: np.ndarray, width: float = 4.0):
    if mean.shape != (2,):
        return None
    sd = np.sqrt(np.diag(cov))
    return tuple((float(m - width * s), float(m + width * s)) for m, s in zip(mean, sd, strict=False))


def _half_quadratic_form(precision: np.ndarray):
    """V -> v^T P v / 2 with a JVP that reuses g = P v: value and gradient cost one
    mat-vec (plain autodiff would need two); higher derivatives still work (Hessian P).
    """
    prec = jnp.asarray((precision + precision.T) / 2, jnp.float32)

    @jax.custom_jvp
    def half_quad(v):
        return 0.5 * jnp.dot(v, prec @ v)

    @half_quad.defjvp
    def _jvp(primals, tangents):
        (v,), (dv,) = primals, tangents
        g = prec @ v
        return 0.5 * jnp.dot(v, g), jnp.dot(g, dv)

    return half_quad


@register_target("gaussian", "N(mean, cov) in any dimension (default 2-D standard normal); exact moments and sampler")
def gaussian(
    mean=None,
    cov=None,
    *,
    dim: int | None = None,
    name: str = "gaussian",
    description: str | None = None,
    force_dense: bool = False,
) -> Target:
    """Multivariate normal N(mean, cov), normalised.

    ``mean`` defaults to zeros and ``cov`` to the identity (of size ``dim``, default 2).
    The log density is -1/2 (x - mean)^T P (x - mean) - log det L - d/2 log 2 pi, with
    L the Cholesky factor of ``cov`` and the precision P = L^{-T} L^{-1} precomputed in
    float64: log density and gradient together cost one O(d^2) mat-vec. A diagonal ``cov``
    uses an O(d) elementwise path unless ``force_dense``.
    """
    if mean is None:
        if dim is None:
            shape = (2, 2) if cov is None else np.shape(cov)
            if len(shape) != 2:
                raise ValueError(f"{name} covariance must be a square matrix, got shape {shape}")
            dim = shape[0]
        mean = np.zeros(int(dim))
    mean = np.asarray(mean, dtype=np.float64)
    if mean.ndim != 1 or mean.size < 1 or not np.all(np.isfinite(mean)):
        raise ValueError(f"gaussian mean must be a finite 1-D array, got shape {mean.shape}")
    d = mean.size
    if dim is not None and int(dim) != d:
        raise ValueError(f"gaussian dim={dim} does not match the mean's length {d}")
    cov = np.eye(d) if cov is None else np.asarray(cov, dtype=np.float64)
    cholesky_factor(cov, f"{name} covariance", dim=d)  # shape/symmetry/PD checks with clear errors
    chol = np.linalg.cholesky(cov)
    log_det_half = float(np.sum(np.log(np.diag(chol))))
    const = -log_det_half - 0.5 * d * _LOG_2PI
    mean_j = jnp.asarray(mean, jnp.float32)
    chol_j = jnp.asarray(chol, jnp.float32)

    if np.count_nonzero(cov - np.diag(np.diag(cov))) == 0 and not force_dense:
        inv_sd = jnp.asarray(1.0 / np.sqrt(np.diag(cov)), jnp.float32)

        def logdensity_fn(x):
            z = (x - mean_j) * inv_sd
            return -0.5 * jnp.dot(z, z) + const

    else:
        chol_inv = scipy.linalg.solve_triangular(chol, np.eye(d), lower=True)
        half_quad = _half_quadratic_form(chol_inv.T @ chol_inv)

        def logdensity_fn(x):
            return const - half_quad(x - mean_j)

    def sample(key, n):
        eps = jax.random.normal(key, (n, d), jnp.float32)
        return mean_j + eps @ chol_j.T

    return Target(
        name=name,
        logdensity_fn=logdensity_fn,
        space=Real(d),
        description=description or f"{d}-D Gaussian N(mean, cov)",
        truth=Truth(mean=mean, cov=cov, sample=sample, source="closed form (Gaussian)"),
        bounds=_gaussian_bounds(mean, cov),
        metadata={"log_normalizer": 0.0, "chol": chol},
    )


@register_target(
    "gaussian-2d-corr", "2-D Gaussian, unit variances, correlation 0.99 (Titsias & Dellaportas 2019, Fig. 1)"
)
def gaussian_2d_corr(rho: float = 0.99) -> Target:
    """The 2-D correlated Gaussian of Titsias & Dellaportas 2019, Fig. 1.

    Parameters
    ----------
    rho : float
        The correlation, in (-1, 1).
    """
    if not -1.0 < float(rho) < 1.0:
        raise ValueError(f"rho must lie in (-1, 1), got {rho}")
    description = f"2-D Gaussian, unit variances, correlation {rho} (Titsias & Dellaportas 2019, Fig. 1)"
    return gaussian(np.zeros(2), np.array([[1.0, rho], [rho, 1.0]]), name="gaussian-2d-corr", description=description)


@register_target("neal-100", "Neal's 100-D Gaussian N(0, diag(s^2)), s = 0.01, 0.02, ..., 1.00")
def neal_100() -> Target:
    """Neal's 100-D Gaussian N(0, diag(s²)), s = 0.01, 0.02, ..., 1.00."""
    sd = np.arange(1, 101) / 100.0
    description = "Neal's 100-D Gaussian N(0, diag(s^2)), s = 0.01, 0.02, ..., 1.00"
    return gaussian(np.zeros(100), np.diag(sd**2), name="neal-100", description=description)


@register_target(
    "gp-51",
    "51-D Gaussian, GP kernel exp(-(t_i - t_j)^2 / (2*0.16)) + 0.01 delta_ij on a grid of [0, 4] "
    "(0.16 read as the squared length scale)",
)
def gp_51(num_points: int = 51, length_scale_sq: float = 0.16, nugget: float = 0.01) -> Target:
    """The 51-D Gaussian process target of Titsias & Dellaportas 2019, Fig. 1 (right).

    The paper's text does not show the kernel's scale symbol; 0.16 is read as the squared
    length scale (length scale 0.4).

    Parameters
    ----------
    num_points : int
        Grid points on [0, 4] (the dimension).
    length_scale_sq : float
        Squared length scale of the kernel exp(-(t_i - t_j)^2 / (2 length_scale_sq)).
    nugget : float
        Added to the diagonal.
    """
    if int(num_points) < 2 or length_scale_sq <= 0 or nugget < 0:
        raise ValueError(
            f"gp-51 needs num_points >= 2, length_scale_sq > 0, nugget >= 0; "
            f"got {num_points}, {length_scale_sq}, {nugget}"
        )
    t = np.linspace(0.0, 4.0, int(num_points))
    cov = np.exp(-((t[:, None] - t[None, :]) ** 2) / (2 * length_scale_sq)) + nugget * np.eye(t.size)
    description = (
        f"{t.size}-D zero-mean Gaussian with covariance exp(-(t_i - t_j)^2 / (2*{length_scale_sq})) "
        f"+ {nugget} delta_ij on a regular grid of [0, 4] (Titsias & Dellaportas 2019, Fig. 1; "
        f"{length_scale_sq} read as the squared length scale)"
    )
    target = gaussian(np.zeros(t.size), cov, name="gp-51", description=description)
    target.metadata["grid"] = t
    return target


@cache
def _quadrature_moments(name: str) -> dict:
    text = resources.files("gradmc").joinpath("data", "banana_moments.json").read_text()
    return json.loads(text)[name]


def _quadrature_truth(name: str) -> tuple[Truth, float]:
    entry = _quadrature_moments(name)
    change = entry["max_abs_change_between_resolutions"]
    source = (
        f"{entry['method']} (scripts/compute_banana_moments.py, stored in gradmc/data/banana_moments.json); "
        f"max change between two resolutions: mean {change['mean']:.1e}, cov {change['cov']:.1e}"
    )
    truth = Truth(mean=np.asarray(entry["mean"]), cov=np.asarray(entry["cov"]), source=source)
    return truth, float(entry["log_normalizer"])


@register_target("banana", "textbook banana exp(-x^2/10 - y^4/10 - 2(y - x^2)^2); moments by grid quadrature")
def banana() -> Target:
    """The banana exp(-x²/10 - y⁴/10 - 2(y - x²)²); its moments come from grid quadrature."""
    truth, log_z = _quadrature_truth("banana")

    def logdensity_fn(z):
        x, y = z[0], z[1]
        return -(x**2) / 10 - y**4 / 10 - 2 * (y - x**2) ** 2

    return Target(
        name="banana",
        logdensity_fn=logdensity_fn,
        space=Real(2),
        description="textbook banana, log density -x^2/10 - y^4/10 - 2(y - x^2)^2 (unnormalised)",
        truth=truth,
        bounds=((-3.0, 3.0), (-3.0, 5.0)),
        metadata={"log_normalizer": log_z},
    )


@register_target("warped-gaussian", "warped Gaussian N(x1|0, nu) N(x2|b(x1^2 - nu), 1), b=0.1, nu=100 (Nemeth §4.3)")
def warped_gaussian(b: float = 0.1, nu: float = 100.0) -> Target:
    """Haario et al.'s banana as in Nemeth et al. 2022 §4.3 (nu is the variance of x1).

    Exact moments: E x = 0, Var x1 = nu, Var x2 = 1 + 2 b^2 nu^2, Cov(x1, x2) = b E x1^3 = 0.
    """
    if not (np.isfinite(b) and np.isfinite(nu) and nu > 0):
        raise ValueError(f"warped-gaussian needs finite b and nu > 0, got b={b}, nu={nu}")
    b, nu = float(b), float(nu)
    sd1 = float(np.sqrt(nu))
    const = float(-0.5 * np.log(nu) - _LOG_2PI)

    def logdensity_fn(z):
        x1, x2 = z[0], z[1]
        return -0.5 * x1**2 / nu - 0.5 * (x2 - b * (x1**2 - nu)) ** 2 + const

    def sample(key, n):
        e = jax.random.normal(key, (n, 2), jnp.float32)
        x1 = sd1 * e[:, 0]
        return jnp.stack([x1, b * (x1**2 - nu) + e[:, 1]], axis=1)

    x1_hi = 2.5 * sd1
    return Target(
        name="warped-gaussian",
        logdensity_fn=logdensity_fn,
        space=Real(2),
        description=(
            f"warped Gaussian N(x1|0, {nu}) N(x2|{b}(x1^2 - {nu}), 1), nu a variance (Nemeth et al. 2022, §4.3)"
        ),
        truth=Truth(
            mean=np.zeros(2),
            cov=np.diag([nu, 1.0 + 2.0 * b**2 * nu**2]),
            sample=sample,
            source="closed form (x1 ~ N(0, nu), x2 | x1 ~ N(b(x1^2 - nu), 1))",
        ),
        bounds=((-x1_hi, x1_hi), (-b * nu - 4.0, b * (x1_hi**2 - nu) + 4.0)),
        metadata={"log_normalizer": 0.0},
    )


@register_target(
    "flower", "flower -(||x|| - 10 - 6 cos(6 atan2(x2, x1)))^2 / 2 (Nemeth §4.3, squared residual); quadrature moments"
)
def flower() -> Target:
    """Sejdinovic et al.'s flower in Nemeth et al.'s code (normal_lpdf of the radius):
    the paper's printed formula drops the square of the residual.
    """
    truth, log_z = _quadrature_truth("flower")
    par = _quadrature_moments("flower")["parameters"]
    r, amp, w, sigma = par["r"], par["A"], par["w"], par["sigma"]

    def logdensity_fn(x):
        resid = jnp.sqrt(jnp.sum(x**2)) - r - amp * jnp.cos(w * jnp.arctan2(x[1], x[0]))
        return -0.5 * (resid / sigma) ** 2

    def initial_position(key):
        # on the flower's ridge (the density near the origin is below exp(-8))
        k1, k2 = jax.random.split(key)
        angle = jax.random.uniform(k1, (), jnp.float32, 0.0, 2 * jnp.pi)
        radius = r + amp * jnp.cos(w * angle) + sigma * jax.random.normal(k2, (), jnp.float32)
        return radius * jnp.stack([jnp.cos(angle), jnp.sin(angle)])

    edge = r + amp + 4 * sigma
    return Target(
        name="flower",
        logdensity_fn=logdensity_fn,
        space=Real(2),
        description=(
            f"flower, log density -(||x|| - {r:g} - {amp:g} cos({w:g} atan2(x2, x1)))^2 / (2*{sigma:g}^2) "
            "(Nemeth et al. 2022, §4.3; squared residual as in the authors' code, unnormalised)"
        ),
        truth=truth,
        initial_position=initial_position,
        bounds=((-edge, edge), (-edge, edge)),
        metadata={"log_normalizer": log_z, **par},
    )
