"""Reference moments of the banana and flower targets by numerical quadrature (run once).

Writes ``src/gradmc/data/banana_moments.json``, which :mod:`gradmc.targets.continuous`
loads as the targets' :class:`~gradmc.base.Truth`. Everything is float64 NumPy.

* **banana** (textbook): log p(x, y) = -x^2/10 - y^4/10 - 2 (y - x^2)^2. Trapezoid rule
  on a uniform grid over the box [-4, 4] x [-6, 7], where the log density on the
  boundary is below -80, so the truncated mass is negligible. For a smooth integrand
  that vanishes at the box edges the trapezoid rule converges faster than any power of
  the spacing h; convergence is checked by comparing h = 0.01 with h = 0.005.
* **flower** (Nemeth et al. 2022, §4.3, squared residual): log p(x) =
  -(||x|| - r - A cos(w atan2(x2, x1)))^2 / (2 sigma^2), r = 10, A = 6, w = 6, sigma = 1.
  In polar coordinates (rho, theta) the radial integrals
  int_0^inf rho^k exp(-(rho - m)^2 / (2 sigma^2)) drho, m = r + A cos(w theta), have closed
  forms in Phi and phi (k = 1, 2, 3; rho^1 is the Jacobian); the remaining periodic theta
  integral uses the trapezoid rule (spectrally accurate for periodic integrands),
  checked by comparing 4096 with 8192 nodes.

Usage: ``python scripts/compute_banana_moments.py`` (a few seconds).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from scipy.special import ndtr

OUT = Path(__file__).resolve().parents[1] / "src" / "gradmc" / "data" / "banana_moments.json"

BANANA_BOX = ((-4.0, 4.0), (-6.0, 7.0))
BANANA_SPACINGS = (0.01, 0.005)
FLOWER = {"r": 10.0, "A": 6.0, "w": 6.0, "sigma": 1.0}
FLOWER_NODES = (4096, 8192)


def banana_logdensity(x, y):
    return -(x**2) / 10 - y**4 / 10 - 2 * (y - x**2) ** 2


def banana_grid_moments(h: float) -> dict:
    """Trapezoid-rule log Z, mean and covariance of the banana on the box with spacing h."""
    (x_lo, x_hi), (y_lo, y_hi) = BANANA_BOX
    x = np.linspace(x_lo, x_hi, int(round((x_hi - x_lo) / h)) + 1)
    y = np.linspace(y_lo, y_hi, int(round((y_hi - y_lo) / h)) + 1)
    wx = np.full(x.size, h)
    wx[[0, -1]] /= 2
    wy = np.full(y.size, h)
    wy[[0, -1]] /= 2
    X, Y = np.meshgrid(x, y, indexing="ij")
    logp = banana_logdensity(X, Y)
    edge = max(logp[[0, -1], :].max(), logp[:, [0, -1]].max())
    p = np.exp(logp) * wx[:, None] * wy[None, :]
    z = p.sum()
    mean = np.array([(X * p).sum(), (Y * p).sum()]) / z
    dx, dy = X - mean[0], Y - mean[1]
    cov = np.array([[(dx * dx * p).sum(), (dx * dy * p).sum()], [(dx * dy * p).sum(), (dy * dy * p).sum()]]) / z
    return {"log_normalizer": float(np.log(z)), "mean": mean, "cov": cov, "max_logdensity_on_boundary": float(edge)}


def _radial_moments(m: np.ndarray, s: float) -> tuple[np.ndarray, ...]:
    """J_k(m) = int_0^inf rho^k exp(-(rho - m)^2 / (2 s^2)) drho for k = 1, 2, 3 (closed form).

    With rho = m + s t: J_k = s int_{-m/s}^inf (m + s t)^k e^{-t^2/2} dt, and
    I_j = int_a^inf t^j e^{-t^2/2} dt (a = -m/s) is I_0 = sqrt(2 pi) Phi(m/s),
    I_1 = e^{-a^2/2}, I_2 = a e^{-a^2/2} + I_0, I_3 = (a^2 + 2) e^{-a^2/2}.
    """
    a = -m / s
    e = np.exp(-(a**2) / 2)
    i0 = np.sqrt(2 * np.pi) * ndtr(m / s)
    i1, i2, i3 = e, a * e + i0, (a**2 + 2) * e
    j1 = s * (m * i0 + s * i1)
    j2 = s * (m**2 * i0 + 2 * m * s * i1 + s**2 * i2)
    j3 = s * (m**3 * i0 + 3 * m**2 * s * i1 + 3 * m * s**2 * i2 + s**3 * i3)
    return j1, j2, j3


def flower_polar_moments(num_theta: int) -> dict:
    """log Z, mean and covariance of the flower: exact radial integrals, trapezoid in theta."""
    r, A, w, s = FLOWER["r"], FLOWER["A"], FLOWER["w"], FLOWER["sigma"]
    theta = 2 * np.pi * np.arange(num_theta) / num_theta
    dtheta = 2 * np.pi / num_theta
    j1, j2, j3 = _radial_moments(r + A * np.cos(w * theta), s)
    c, sn = np.cos(theta), np.sin(theta)
    z = j1.sum() * dtheta
    mean = np.array([(j2 * c).sum(), (j2 * sn).sum()]) * dtheta / z
    cross = (j3 * c * sn).sum()
    second = np.array([[(j3 * c * c).sum(), cross], [cross, (j3 * sn * sn).sum()]]) * dtheta / z
    return {"log_normalizer": float(np.log(z)), "mean": mean, "cov": second - np.outer(mean, mean)}


def _max_diff(a: dict, b: dict) -> dict:
    return {k: float(np.max(np.abs(np.asarray(a[k]) - np.asarray(b[k])))) for k in ("log_normalizer", "mean", "cov")}


def _entry(fine: dict, coarse: dict, method: str, extra: dict) -> dict:
    return {
        "mean": fine["mean"].tolist(),
        "cov": fine["cov"].tolist(),
        "log_normalizer": fine["log_normalizer"],
        "method": method,
        "max_abs_change_between_resolutions": _max_diff(fine, coarse),
        **extra,
    }


def main() -> None:
    coarse, fine = (banana_grid_moments(h) for h in BANANA_SPACINGS)
    banana = _entry(
        fine,
        coarse,
        "trapezoid rule on a uniform grid, float64",
        {
            "logdensity": "-x^2/10 - y^4/10 - 2*(y - x^2)^2 (log_normalizer: log of its integral)",
            "box": BANANA_BOX,
            "spacings": BANANA_SPACINGS,
            "max_logdensity_on_boundary": fine["max_logdensity_on_boundary"],
        },
    )
    coarse, fine = (flower_polar_moments(n) for n in FLOWER_NODES)
    flower = _entry(
        fine,
        coarse,
        "polar coordinates: closed-form radial integrals, periodic trapezoid rule in theta, float64",
        {
            "logdensity": "-(||x|| - r - A*cos(w*atan2(x2, x1)))^2 / (2*sigma^2) (log_normalizer: log of its integral)",
            "parameters": FLOWER,
            "theta_nodes": FLOWER_NODES,
        },
    )
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps({"banana": banana, "flower": flower}, indent=2) + "\n")
    print(f"wrote {OUT}")
    for name, e in (("banana", banana), ("flower", flower)):
        print(name, "mean", e["mean"], "cov", e["cov"], "change", e["max_abs_change_between_resolutions"])


if __name__ == "__main__":
    main()
