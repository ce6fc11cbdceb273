"""Boltzmann-machine relaxation (Nemeth et al. 2022, §4.2 and App. C; Graham & Storkey 2017).

A Boltzmann machine P(s) ∝ exp(½ sᵀWs + bᵀs) on s ∈ {-1, 1}^{d_b} becomes, by the Gaussian
integral trick with Q Qᵀ = W + D, the continuous target on x ∈ R^d

    log pi(x) = Σ_k log cosh(q_kᵀ x + b_k) - ½ xᵀx         (eq. 11 / App. C eq. 20)

with normalising constant log Z = log Z_b + ½ tr D + (d/2) log 2π - d_b log 2. D is the
diagonal that minimises λ_max(W + D) subject to W + D ⪰ 0 (a small SDP, solved with
CVXPY/Clarabel); Q = R_r diag(√e_r) from the eigendecomposition of W + D, dropping
eigenvalues <= 1e-6 (d = rank). Moments: E[x] = Qᵀ E[s], Cov[x] = Qᵀ Cov[s] Q + I, where
E[s], Cov[s] and Z_b come from enumerating all 2^{d_b} states in vectorised JAX chunks
(:func:`enumerate_moments`; cached on disk under ``~/.cache/gradmc/`` — or
``$GRADMC_CACHE`` — since d_b = 28 takes minutes). The enumeration runs only when the
truth is first read (:class:`LazyTruth`).

:func:`generate_system` draws new systems by Graham & Storkey's procedure; the paper's
system (d_b = 28, d = 27) is vendored in ``gradmc/data/boltzmann_system.npz`` with the
reference moments computed with the authors' own Q (only Q-invariant quantities are
comparable; see :func:`reference_values`).
"""

from __future__ import annotations

import hashlib
import os
from functools import lru_cache
from importlib import resources
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from gradmc.base import Target, Truth
from gradmc.checks import check_square
from gradmc.registry import register_target
from gradmc.spaces import Real

__all__ = [
    "BoltzmannSystem",
    "LazyTruth",
    "generate_system",
    "paper_system",
    "reference_values",
    "min_max_eigenvalue_diagonal",
    "enumerate_moments",
    "sample_states",
    "boltzmann_relaxation",
]

_LOG2 = float(np.log(2.0))


class BoltzmannSystem:
    """W (symmetric, zero diagonal) and b of a Boltzmann machine, checked."""

    def __init__(self, weights, biases):
        """Check and keep ``weights`` and ``biases``.

        Parameters
        ----------
        weights : array_like
            W, (d_b, d_b), symmetric with a zero diagonal.
        biases : array_like
            b, (d_b,).
        """
        w = check_square(weights, "Boltzmann weights W")
        b = np.asarray(biases, np.float64)
        if b.shape != (w.shape[0],) or not np.all(np.isfinite(b)):
            raise ValueError(f"Boltzmann biases b must be {w.shape[0]} finite numbers, got shape {b.shape}")
        if not np.allclose(w, w.T, atol=1e-10):
            raise ValueError("Boltzmann weights W must be symmetric")
        if np.any(np.diag(w) != 0):
            raise ValueError("Boltzmann weights W must have a zero diagonal")
        self.weights, self.biases = w, b

    @property
    def num_units(self) -> int:
        """The number d_b of units."""
        return self.biases.size

    def digest(self) -> str:
        """A short hash of W and b (names cached results of this system)."""
        return hashlib.sha256(self.weights.tobytes() + self.biases.tobytes()).hexdigest()[:16]


def generate_system(
    num_units: int, seed: int = 201702, lambda1: float = 6.0, lambda2: float = 2.0, bias_sd: float = 0.1
) -> BoltzmannSystem:
    """Graham & Storkey's procedure: with ``np.random.RandomState(seed)`` draw, in order, a
    random orthogonal R (Stewart 1980, via ``scipy.stats.ortho_group``), eigenvalues
    e_i = λ1 tanh(λ2 η_i), η ~ N(0, 1), and b ~ N(0, bias_sd²); W = R diag(e) Rᵀ with the
    diagonal set to 0. (This does not reproduce the paper's W bit for bit: their random
    orthogonal routine differs; the paper's system is vendored instead.)
    """
    from scipy.stats import ortho_group

    if int(num_units) < 2 or float(num_units) != int(num_units):
        raise ValueError(f"num_units must be an integer >= 2, got {num_units!r}")
    rng = np.random.RandomState(seed)
    r = ortho_group.rvs(int(num_units), random_state=rng)
    e = lambda1 * np.tanh(lambda2 * rng.normal(size=int(num_units)))
    b = bias_sd * rng.normal(size=int(num_units))
    w = r @ np.diag(e) @ r.T
    w = 0.5 * (w + w.T)
    np.fill_diagonal(w, 0.0)
    return BoltzmannSystem(w, b)


def _data_file():
    return resources.files("gradmc") / "data" / "boltzmann_system.npz"


def paper_system() -> BoltzmannSystem:
    """The d_b = 28 system of Nemeth et al. §4.2 (vendored from the authors' data)."""
    with _data_file().open("rb") as f:
        data = np.load(f)
        return BoltzmannSystem(data["weights"], data["biases"])


def reference_values() -> dict:
    """The authors' reference ``expc_x``, ``covar_x`` (for *their* Q) and ``log_norm_const_x``."""
    with _data_file().open("rb") as f:
        data = np.load(f)
        return {
            "expc_x": data["ref_expc_x"],
            "covar_x": data["ref_covar_x"],
            "log_norm_const_x": float(data["ref_log_norm_const_x"]),
        }


def min_max_eigenvalue_diagonal(weights) -> np.ndarray:
    """diag(D) = argmin_D λ_max(W + D) s.t. W + D ⪰ 0 (CVXPY, Clarabel, falling back to SCS)."""
    import cvxpy as cp

    w = np.asarray(weights, np.float64)
    d = cp.Variable(w.shape[0])
    m = w + cp.diag(d)
    problem = cp.Problem(cp.Minimize(cp.lambda_max(m)), [m >> 0])
    for solver in ("CLARABEL", "SCS"):
        try:
            problem.solve(solver=solver)
        except cp.error.SolverError:
            continue
        if problem.status in ("optimal", "optimal_inaccurate") and d.value is not None:
            break
    else:
        raise ValueError(f"the SDP for D did not solve (status {problem.status})")
    diag = np.asarray(d.value, np.float64)
    # push W + D onto the PSD cone exactly (solver tolerance can leave eigenvalues of -1e-9)
    low = np.linalg.eigvalsh(w + np.diag(diag)).min()
    return diag + max(0.0, -low)


def _cache_dir() -> Path:
    return Path(os.environ.get("GRADMC_CACHE", Path.home() / ".cache" / "gradmc"))


@lru_cache(maxsize=8)
def _chunk_fns(num_units: int, chunk_bits: int):
    """Jit functions of a chunk index c (states c * 2^chunk_bits + 0 .. 2^chunk_bits - 1):
    ``states(c)``, ``energies(c, W, b)`` and ``sums(c, W, b)`` = (max energy m, Σ e^{E-m},
    Σ e^{E-m} s, Σ e^{E-m} s sᵀ).
    """
    low = jnp.arange(2**chunk_bits, dtype=jnp.uint32)
    shifts = jnp.arange(num_units, dtype=jnp.uint32)

    def states(chunk):
        idx = (chunk.astype(jnp.uint32) << chunk_bits) | low
        return ((idx[:, None] >> shifts) & 1).astype(jnp.float32) * 2.0 - 1.0

    def energies(chunk, w, b):
        s = states(chunk)
        return 0.5 * jnp.sum((s @ w) * s, axis=1) + s @ b

    def sums(chunk, w, b):
        s = states(chunk)
        energy = 0.5 * jnp.sum((s @ w) * s, axis=1) + s @ b
        top = jnp.max(energy)
        p = jnp.exp(energy - top)
        return top, jnp.sum(p), p @ s, (s * p[:, None]).T @ s

    return jax.jit(states), jax.jit(energies), jax.jit(sums)


def enumerate_moments(
    system: BoltzmannSystem, *, chunk_bits: int = 18, progress: bool = True, cache: bool = True
) -> dict:
    """Exact ``log_z_b``, ``mean_s`` = E[s], ``cov_s`` = Cov[s] by enumerating 2^{d_b} states.

    Chunks of 2^chunk_bits states are summed in JAX (float32, shifted by the chunk's
    maximum energy) and combined on the host in float64. Also returns each chunk's log
    mass (``chunk_log_mass``, for exact sampling) and ``chunk_bits``. Cached as
    ``boltzmann-<hash of W, b>-<chunk_bits>.npz`` in the cache folder.
    """
    n = system.num_units
    bits = min(int(chunk_bits), n)
    path = _cache_dir() / f"boltzmann-{system.digest()}-{bits}.npz"
    keys = ("log_z_b", "mean_s", "cov_s", "chunk_log_mass", "chunk_bits")
    if cache and path.exists():
        data = np.load(path)
        return {k: data[k] for k in keys}
    sums = _chunk_fns(n, bits)[2]
    w, b = jnp.asarray(system.weights, jnp.float32), jnp.asarray(system.biases, jnp.float32)
    num_chunks = 2 ** (n - bits)
    tops, z, s1, s2 = (np.empty((num_chunks,) + shape) for shape in ((), (), (n,), (n, n)))
    from tqdm.auto import tqdm

    desc = f"enumerating 2^{n} Boltzmann states"
    for c in tqdm(range(num_chunks), desc=desc, disable=not progress or num_chunks < 4, leave=False):
        out = sums(jnp.asarray(c, jnp.uint32), w, b)
        tops[c], z[c], s1[c], s2[c] = (np.asarray(o, np.float64) for o in out)
    scale = np.exp(tops - tops.max())
    total = np.sum(scale * z)
    mean = np.einsum("c,ci->i", scale, s1) / total
    second = np.einsum("c,cij->ij", scale, s2) / total
    cov = second - np.outer(mean, mean)
    result = {
        "log_z_b": np.asarray(tops.max() + np.log(total)),
        "mean_s": mean,
        "cov_s": 0.5 * (cov + cov.T),
        "chunk_log_mass": tops + np.log(z),
        "chunk_bits": np.asarray(bits),
    }
    if cache:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp.npz")
        np.savez(tmp, **result)
        tmp.replace(path)
    return result


def sample_states(system: BoltzmannSystem, key, n: int, *, progress: bool = True) -> np.ndarray:
    """``n`` exact draws of s ~ P(s), shape (n, d_b): a chunk by its enumerated mass, then a
    state within the chunk (only the chunks drawn are recomputed).
    """
    m = enumerate_moments(system, progress=progress)
    bits = int(m["chunk_bits"])
    states, energies = _chunk_fns(system.num_units, bits)[:2]
    k_chunk, k_state = jax.random.split(key)
    u_chunk = np.asarray(jax.random.uniform(k_chunk, (n,)), np.float64)
    u_state = np.asarray(jax.random.uniform(k_state, (n,)), np.float64)
    mass = np.exp(m["chunk_log_mass"] - m["chunk_log_mass"].max())
    cdf = np.cumsum(mass) / mass.sum()
    chunks = np.minimum(np.searchsorted(cdf, u_chunk), cdf.size - 1)
    w, b = jnp.asarray(system.weights, jnp.float32), jnp.asarray(system.biases, jnp.float32)
    out = np.empty((n, system.num_units), np.float32)
    for c in np.unique(chunks):
        rows = np.flatnonzero(chunks == c)
        energy = np.asarray(energies(jnp.asarray(c, jnp.uint32), w, b), np.float64)
        inner = np.cumsum(np.exp(energy - energy.max()))
        picks = np.minimum(np.searchsorted(inner / inner[-1], u_state[rows]), inner.size - 1)
        out[rows] = np.asarray(states(jnp.asarray(c, jnp.uint32)))[picks]
    return out


class LazyTruth(Truth):
    """A :class:`Truth` whose moments come from a function run on first access."""

    def __init__(self, compute, source: str, sample=None):
        """Defer ``compute`` until ``mean`` or ``cov`` is read.

        Parameters
        ----------
        compute : callable
            Returns ``{"mean": ..., "cov": ...}``; run once.
        source : str
            How the truth is obtained.
        sample : callable, optional
            ``sample(key, n)``: exact draws.
        """
        for name, value in (("var", None), ("marginals", None), ("sample", sample), ("source", source)):
            object.__setattr__(self, name, value)
        object.__setattr__(self, "_compute", compute)
        object.__setattr__(self, "_values", None)

    def _get(self):
        if self._values is None:
            object.__setattr__(self, "_values", self._compute())
        return self._values

    mean = property(lambda self: self._get()["mean"])
    cov = property(lambda self: self._get()["cov"])
    __eq__ = object.__eq__
    __hash__ = object.__hash__

    def __repr__(self) -> str:
        """Name the source and whether the moments are computed yet."""
        return f"LazyTruth(source={self.source!r}, computed={self._values is not None})"


def boltzmann_relaxation(
    system: BoltzmannSystem, name: str = "boltzmann", *, eig_tol: float = 1e-6, progress: bool = True
) -> Target:
    """The relaxation target of ``system`` (module docstring); ``metadata`` holds W, b, D, Q,
    the eigenvalues kept, ``moments()`` (the enumeration, including log Z of x) and
    ``sample_exact(key, n)`` (exact s by enumeration, then x ~ N(Qᵀs, I)).
    """
    w, b = system.weights, system.biases
    diag = min_max_eigenvalue_diagonal(w)
    evals, evecs = np.linalg.eigh(w + np.diag(diag))
    keep = evals > eig_tol
    q = evecs[:, keep] * np.sqrt(evals[keep])  # (d_b, d), Q Qᵀ = W + D
    d_b, d = q.shape
    q_j, b_j = jnp.asarray(q, jnp.float32), jnp.asarray(b, jnp.float32)

    def logdensity_fn(x):
        a = q_j @ x + b_j
        abs_a = jnp.abs(a)
        log_cosh = abs_a + jnp.log1p(jnp.exp(-2.0 * abs_a)) - _LOG2
        return jnp.sum(log_cosh) - 0.5 * jnp.dot(x, x)

    def moments():
        m = enumerate_moments(system, progress=progress)
        log_z = float(m["log_z_b"]) + 0.5 * float(np.sum(diag)) + 0.5 * d * np.log(2 * np.pi) - d_b * _LOG2
        return {"mean": q.T @ m["mean_s"], "cov": q.T @ m["cov_s"] @ q + np.eye(d), "log_z": log_z, **m}

    def sample_exact(key, n):
        """Exact draws of x: s ~ P(s) (:func:`sample_states`), then x = Qᵀs + N(0, I)."""
        k_s, k_x = jax.random.split(key)
        s = jnp.asarray(sample_states(system, k_s, n, progress=progress))
        return s @ q_j + jax.random.normal(k_x, (n, d), jnp.float32)

    truth = LazyTruth(
        lambda: {k: v for k, v in moments().items() if k in ("mean", "cov")},
        f"exact enumeration of the 2^{d_b} Boltzmann states, mapped by E[x] = QᵀE[s], Cov[x] = QᵀCov[s]Q + I",
        sample=sample_exact,
    )
    return Target(
        name=name,
        logdensity_fn=logdensity_fn,
        space=Real(d),
        description=f"Boltzmann machine relaxation, d_b = {d_b}, d = {d} (Nemeth et al. 2022 §4.2, App. C)",
        truth=truth,
        metadata={
            "weights": w,
            "biases": b,
            "D": diag,
            "Q": q,
            "eigenvalues": evals[keep],
            "moments": moments,
            "sample_exact": sample_exact,
        },
    )


@register_target(
    "boltzmann", "Boltzmann machine relaxation (Nemeth §4.2): the paper's d_b = 28 system or a generated one"
)
def boltzmann(num_units: int | None = None, seed: int = 201702, progress: bool = True) -> Target:
    """``num_units=None``: the paper's vendored system (d_b = 28, d = 27; its truth enumerates
    2^28 states on first use, then is cached). Otherwise a system generated by
    :func:`generate_system` (e.g. ``num_units=12`` for tests: instant truth).
    """
    if num_units is None:
        return boltzmann_relaxation(paper_system(), "boltzmann", progress=progress)
    system = generate_system(num_units, seed)
    return boltzmann_relaxation(system, f"boltzmann-{int(num_units)}-{seed}", progress=progress)
