"""The classical models of the DISCS benchmark (Goshvadi et al., NeurIPS 2023 Datasets &
Benchmarks; code google-research/discs), with DISCS's parameters and starting states.

Every model draws its parameters the way DISCS does, from ``jax.random.PRNGKey(seed)``
(DISCS always uses seed 0): the root key is split in three (parameters, starting states,
sampler state), the parameter key is split once more (``num_models = 1``), and the
starting states of ``num_chains`` chains and the reference state of the ESS statistic are
the model's own initial-state draw (:func:`discs_initial_states`, ``metadata["reference"]``).
DISCS ran on JAX 0.4, whose threefry random bits were not "partitionable"; the draws
here switch that flag off (``jax.threefry_partitionable(False)``) so that they are
bit-identical to DISCS's: the 25 × 25 high-temperature Ising model of seed 0 reproduces
the shipped DISCS parameters, starts and reference state exactly
(:func:`ising25_hightemp_reference`).

Positions use gradmc's spaces: binary models live on ``Binary(d)`` ({0, 1}, DISCS's
integer states as floats), categorical ones on ``Categorical(C, d)`` (one-hot rows;
DISCS's integer labels are the row's argmax). DISCS's grids ``(H, W)`` and ``(L, K)`` are
flattened in C order (site ``(r, c)`` is coordinate ``r·W + c``). Each log density is
DISCS's ``forward`` written for one position, on real inputs too, so gradient samplers
differentiate the same function DISCS's do.

Models (defaults are DISCS's model configs):

* ``discs-ising``: free-boundary lattice, ``s = 2x − 1``,
  ``log p(x) = λ Σ_<ij> s_i s_j − Σ_i b_i s_i``; the field ``b`` is ``σ·U(−1, 1)`` noise
  plus ``+μ`` inside the circle ``(r/H − ½)² + (c/W − ½)² < ½π⁻¹`` and ``−μ`` outside.
  High temperature λ = μ = 0.5, σ = 1.5; low temperature λ = μ = 1, σ = 3.
* ``discs-potts``: the same lattice and field (one noise draw per site and category),
  ``log p(x) = λ Σ_<ij> [x_i = x_j] − Σ_i b_{i, x_i}``, λ = 1, μ = 0.5, σ = 1.5, C = 4 or 8.
* ``discs-bernoulli``: ``log p(x) = θᵀx``, ``θ ~ N(0, σ²)``, σ = 0.5 (high) or 1.5 (low).
* ``discs-categorical``: ``log p(x) = Σ_i θ_{i, x_i}``, ``θ ~ N(0, 1.5²)``, C = 4 or 8.
* ``discs-fhmm``: factorial HMM with L time steps and K binary (or C-categorical) chains,
  observed ``y_l ~ N(Σ_k w_k(x_lk) + b, σ²)``, σ = 2, α = 0.1, β = 0.8.
* ``discs-rbm``: a restricted Boltzmann machine with random parameters (DISCS's RBMs
  were trained on MNIST / Fashion-MNIST and their checkpoints are not available here).

Quadratic models (Ising, Potts) also carry ``metadata["J"]`` / ``metadata["b"]`` with
``log p(x) = xᵀJx + bᵀx + const`` in gradmc's quadratic convention (no ½; ``J`` only when
it has at most :data:`~gradmc.targets.lattice.DENSE_J_MAX` rows), as the lattice targets do.
Targets with at most 2^20 states get their exact truth by enumeration.
"""

from __future__ import annotations

import math
import os
from functools import partial
from importlib import resources

import jax
import jax.numpy as jnp
import numpy as np

from gradmc.base import Target, Truth
from gradmc.checks import check_probability
from gradmc.enumeration import enumerate_if_small
from gradmc.registry import register_target
from gradmc.spaces import Binary, Categorical, DiscreteSpace
from gradmc.targets.lattice import DENSE_J_MAX, lattice_variables
from gradmc.targets.quadratic import quadratic_form

__all__ = [
    "BERNOULLI_TEMPERATURES",
    "ISING_TEMPERATURES",
    "discs_bernoulli",
    "discs_categorical",
    "discs_fhmm",
    "discs_initial_states",
    "discs_ising",
    "discs_keys",
    "discs_potts",
    "discs_rbm",
    "ising25_hightemp_reference",
    "ising_field",
]

#: DISCS's Ising settings (``models/configs/ising_config.py`` and the model sweeps):
#: coupling λ (DISCS ``lambdaa``), field offset μ and field noise σ (DISCS ``init_sigma``).
ISING_TEMPERATURES = {
    "high": {"strength": 0.5, "mu": 0.5, "sigma": 1.5},
    "low": {"strength": 1.0, "mu": 1.0, "sigma": 3.0},
}

#: DISCS's Bernoulli parameter scale σ (``init_sigma``) at each temperature.
BERNOULLI_TEMPERATURES = {"high": 0.5, "low": 1.5}

_DATA_FILE = "discs_ising25_hightemp.npz"


# -- DISCS's random draws ------------------------------------------------------------------


def discs_keys(seed: int = 0) -> dict[str, jax.Array]:
    """The keys DISCS derives from ``PRNGKey(seed)`` for one model.

    Parameters
    ----------
    seed : int
        DISCS's ``rnd_key`` (0 in all its experiments).

    Returns
    -------
    dict
        ``"params"`` (the model parameters' key), ``"starts"`` (the chains' initial
        states) and ``"reference"`` (the reference state of the ESS statistic), drawn with
        non-partitionable threefry as in JAX 0.4.
    """
    params, starts, reference = _with_discs_bits(_derive_keys, _check_count(seed, "seed", 0))
    return {"params": params, "starts": starts, "reference": reference}


@jax.jit
def _derive_keys(seed):
    root = jax.random.PRNGKey(seed)
    rng_param, rng_x0, _ = jax.random.split(root, 3)
    return jax.random.split(rng_param, 1)[0], rng_x0, jax.random.split(root)[0]


def _with_discs_bits(fn, *args, **kwargs):
    """``fn(*args, **kwargs)`` with JAX 0.4's (non-partitionable) threefry bits.

    The draws are jitted functions (one compilation instead of one per operation); the
    threefry flag is part of JAX's compilation key, so the same function also runs with
    the current bits elsewhere (e.g. ``draw_initial``).
    """
    with jax.threefry_partitionable(False):
        return fn(*args, **kwargs)


def _labels_to_positions(space: DiscreteSpace, labels) -> jax.Array:
    """DISCS integer states ``(n, *grid)`` -> positions ``(n, *event_shape)``."""
    labels = jnp.asarray(labels, jnp.int32)
    return space.from_index(labels.reshape(labels.shape[0], -1))


def discs_initial_states(target: Target, num_chains: int) -> jax.Array:
    """The starting states DISCS gives ``num_chains`` chains of a DISCS target.

    Parameters
    ----------
    target : Target
        A target built by this module (its metadata holds the seed and DISCS's
        initial-state sampler).
    num_chains : int
        DISCS's ``batch_size``.

    Returns
    -------
    jax.Array
        ``(num_chains, *event_shape)`` positions, bit-identical to DISCS's ``x0`` for the
        same seed; pass them as ``init=`` to the runner.
    """
    if "discs_init" not in target.metadata:
        raise ValueError(f"target {target.name!r} is not a DISCS target (no metadata['discs_init'])")
    if isinstance(num_chains, bool) or int(num_chains) != num_chains or int(num_chains) < 1:
        raise ValueError(f"num_chains must be a positive integer, got {num_chains!r}")
    key = discs_keys(target.metadata["seed"])["starts"]
    labels = _with_discs_bits(target.metadata["discs_init"], key, n=int(num_chains))
    return _labels_to_positions(target.space, labels)


@partial(jax.jit, static_argnames=("n", "shape"))
def _bernoulli_init(key, n: int, shape: tuple[int, ...]):
    """DISCS's ``get_init_samples`` of binary models: ``(key, n) -> (n, *shape)`` fair bits."""
    return jax.random.bernoulli(key, jnp.float32(0.5), (n,) + shape).astype(jnp.int32)


@partial(jax.jit, static_argnames=("n", "shape", "num_values"))
def _randint_init(key, n: int, shape: tuple[int, ...], num_values: int):
    """DISCS's ``randint`` initial states (Bernoulli, categorical and Potts models)."""
    return jax.random.randint(key, (n,) + shape, 0, num_values, dtype=jnp.int32)


@partial(jax.jit, static_argnames=("n", "shape", "num_values"))
def _categorical_init(key, n: int, shape: tuple[int, ...], num_values: int):
    """DISCS's ``jax.random.categorical`` initial states (categorical FHMM and RBM)."""
    logits = jnp.log(jnp.ones([num_values], jnp.float32))
    return jax.random.categorical(key, logits=logits, shape=(n,) + shape).astype(jnp.int32)


def _binary_or_categorical(C: int, d: int, shape: tuple[int, ...]) -> tuple[DiscreteSpace, partial]:
    """``Binary(d)`` with fair-bit starts (C = 2) or ``Categorical(C, d)`` with DISCS's categorical starts."""
    if C == 2:
        return Binary(d), partial(_bernoulli_init, shape=shape)
    return Categorical(C, d), partial(_categorical_init, shape=shape, num_values=C)


def _discs_target(name, logdensity_fn, space, init, seed: int, description, metadata, truth=None, variables=None):
    """A DISCS :class:`Target` starting from ``init`` (DISCS's initial-state sampler ``(key, n) -> labels``),
    with the seed, the reference state of the ESS statistic (DISCS's ``x0_ess``) and the sampler appended
    to ``metadata``; without a closed-form ``truth``, the exact one by enumeration (and
    ``pairwise_marginals``) when the space is small.
    """
    reference = _labels_to_positions(space, _with_discs_bits(init, discs_keys(seed)["reference"], n=1))[0]
    extra = {}
    if truth is None:
        exact = enumerate_if_small(logdensity_fn, space)
        if exact is not None:
            truth, extra = exact.truth(), {"pairwise_marginals": exact.pairwise}
    return Target(
        name=name,
        logdensity_fn=logdensity_fn,
        space=space,
        description=description,
        truth=truth,
        initial_position=lambda key: _labels_to_positions(space, init(key, n=1))[0],
        metadata={**metadata, "seed": seed, "reference": np.asarray(reference), "discs_init": init, **extra},
        variables=variables,
    )


def ising25_hightemp_reference() -> dict[str, np.ndarray]:
    """DISCS's 25 × 25 high-temperature Ising model of seed 0, as DISCS drew it.

    Returns
    -------
    dict
        ``params`` ``(3, 25, 25)`` (horizontal and vertical weights, both −λ, and the
        field b), ``x0`` ``(100, 25, 25)`` the starting states in {0, 1} and ``x_ref``
        ``(1, 625)`` the reference state, from the file shipped in ``gradmc/data``.
    """
    with resources.files("gradmc").joinpath("data", _DATA_FILE).open("rb") as fh:
        data = np.load(fh)
        return {key: np.asarray(data[key]) for key in data.files}


# -- argument checks -----------------------------------------------------------------------


def _check_shape(shape, ndim: int, what: str, minimum: int = 1) -> tuple[int, ...]:
    if isinstance(shape, (int, np.integer)) and not isinstance(shape, bool):
        shape = (int(shape),) * ndim
    try:
        shape = tuple(shape)
    except TypeError:
        raise ValueError(f"{what} shape must be an integer or a tuple of {ndim} integers, got {shape!r}") from None
    if len(shape) != ndim or not all(_is_count(n, minimum) for n in shape):
        raise ValueError(f"{what} shape must be {ndim} integer(s) >= {minimum}, got {shape!r}")
    return tuple(int(n) for n in shape)


def _check_real(value, name: str, *, positive: bool = False) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number, got {value!r}") from None
    if not np.isfinite(v) or (positive and v <= 0):
        raise ValueError(f"{name} must be {'a finite number > 0' if positive else 'finite'}, got {value!r}")
    return v


def _check_scale(value, name: str) -> float:
    if (v := _check_real(value, name)) < 0:
        raise ValueError(f"{name} must be >= 0, got {value!r}")
    return v


def _is_count(value, minimum: int) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool) and int(value) >= minimum


def _check_count(value, name: str, minimum: int) -> int:
    if not _is_count(value, minimum):
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def _temperature(temperature, table: dict):
    if temperature not in table:
        raise ValueError(f"temperature must be one of {sorted(table)}, got {temperature!r}")
    return table[temperature]


def _as_float(x) -> jax.Array:
    x = jnp.asarray(x)
    return x if jnp.issubdtype(x.dtype, jnp.floating) else x.astype(jnp.result_type(float))


# -- lattices: Ising and Potts ------------------------------------------------------------


def ising_field(key: jax.Array, shape: tuple[int, ...], mu: float, sigma: float) -> jax.Array:
    """DISCS's lattice field: ``σ·U(−1, 1)`` noise plus ``±μ`` (inner circle / outside).

    Parameters
    ----------
    key : jax.Array
        The parameter key (:func:`discs_keys`).
    shape : tuple of int
        ``(H, W)`` (Ising) or ``(H, W, C)`` (Potts: one noise draw per category).
    mu : float
        Field offset: ``+μ`` where ``(r/H − ½)² + (c/W − ½)² < ½π⁻¹``, ``−μ`` elsewhere.
    sigma : float
        Noise scale.

    Returns
    -------
    jax.Array
        The float32 field of ``shape`` (draw it inside ``jax.threefry_partitionable(False)``
        for DISCS's bits).
    """
    f32 = jnp.float32
    noise = (2 * _uniform(key, tuple(shape)) - 1) * f32(sigma)
    index = jnp.indices(tuple(shape), dtype=jnp.int32).astype(f32)
    radius2 = (index[0] / f32(shape[0]) - f32(0.5)) ** 2 + (index[1] / f32(shape[1]) - f32(0.5)) ** 2
    return noise + f32(mu) * jnp.where(radius2 < f32(0.5 / np.pi), f32(1), f32(-1))


@partial(jax.jit, static_argnums=1)
def _uniform(key, shape: tuple[int, ...]):
    return jax.random.uniform(key, shape, jnp.float32)


@partial(jax.jit, static_argnums=1)
def _normal(key, shape: tuple[int, ...]):
    return jax.random.normal(key, shape, jnp.float32)


def _normal_params(seed: int, shape: tuple[int, ...], sigma: float) -> np.ndarray:
    """DISCS's factorised-model parameters ``N(0, 1) · σ`` from ``PRNGKey(seed)``, in float32 (the
    product op by op, as DISCS: inside ``jit`` XLA may fold σ into the normal's constants), as float64.
    """
    normal = _with_discs_bits(_normal, discs_keys(seed)["params"], tuple(shape))
    return np.asarray(normal * jnp.float32(sigma), np.float64)


def _bond_sum(coupling_h: np.ndarray, coupling_v: np.ndarray):
    """``X -> Σ_{j ∈ N(i)} c_ij X_j`` on a free-boundary ``(H, W, ...)`` grid, with the
    couplings ``c`` of the horizontal ``(H, W−1, ...)`` and vertical ``(H−1, W, ...)`` bonds.
    """

    def apply(grid):
        h, v = jnp.asarray(coupling_h, grid.dtype), jnp.asarray(coupling_v, grid.dtype)
        rest = [(0, 0)] * (grid.ndim - 2)
        return (
            jnp.pad(h * grid[:, 1:], [(0, 0), (0, 1)] + rest)
            + jnp.pad(h * grid[:, :-1], [(0, 0), (1, 0)] + rest)
            + jnp.pad(v * grid[1:], [(0, 1), (0, 0)] + rest)
            + jnp.pad(v * grid[:-1], [(1, 0), (0, 0)] + rest)
        )

    return apply


def _bond_sum_numpy(coupling_h: np.ndarray, coupling_v: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """:func:`_bond_sum` in float64 NumPy (for metadata)."""
    out = np.zeros_like(grid, dtype=np.float64)
    out[:, :-1] += coupling_h * grid[:, 1:]
    out[:, 1:] += coupling_h * grid[:, :-1]
    out[:-1] += coupling_v * grid[1:]
    out[1:] += coupling_v * grid[:-1]
    return out


def _dense_bonds(coupling_h: np.ndarray, coupling_v: np.ndarray) -> np.ndarray:
    """The dense symmetric ``A`` (``A_ij = c_ij`` on bonds) of :func:`_bond_sum`, over the
    flattened ``(H, W, ...)`` grid (a trailing category axis couples equal categories).
    """
    H, W = coupling_h.shape[0], coupling_h.shape[1] + 1
    extra = coupling_h.shape[2:]
    site = np.arange(H * W * int(np.prod(extra, dtype=int))).reshape((H, W) + extra)
    a = np.zeros((site.size, site.size))
    for i, j, c in ((site[:, :-1], site[:, 1:], coupling_h), (site[:-1], site[1:], coupling_v)):
        a[i.ravel(), j.ravel()] += c.ravel()
    return a + a.T


def _lattice_params(params, shape, ndim: int, what: str) -> np.ndarray:
    if isinstance(params, (str, os.PathLike)):
        with np.load(params) as data:
            if "params" not in data.files:
                raise ValueError(f"{params!s} has no 'params' array (keys: {data.files})")
            params = data["params"]
    p = np.asarray(params, dtype=np.float64)
    if p.ndim != ndim + 1 or p.shape[0] != 3 or min(p.shape[1:3]) < 2:
        raise ValueError(
            f"{what} params must be DISCS's (3, H, W{', C' if ndim == 3 else ''}) array "
            f"(horizontal weights, vertical weights, field), got shape {p.shape}"
        )
    if shape is not None and tuple(p.shape[1:]) != tuple(shape):
        raise ValueError(f"{what} params have shape {p.shape[1:]}, but shape={shape} was asked for")
    if not np.all(np.isfinite(p)):
        raise ValueError(f"{what} params must be finite")
    return p


def _draw_lattice(full_shape: tuple[int, ...], seed: int, strength: float, mu: float, sigma: float) -> np.ndarray:
    """DISCS's ``(3, H, W[, C])`` lattice parameters: bond weights ``−λ`` and the field."""
    field = _with_discs_bits(ising_field, discs_keys(seed)["params"], tuple(full_shape), mu, sigma)
    field = np.asarray(field, np.float64)
    weight = -strength * np.ones(full_shape)
    return np.stack([weight, weight, field])


def _lattice_settings(strength, mu, sigma) -> tuple[float, float, float]:
    return _check_real(strength, "strength"), _check_real(mu, "mu"), _check_scale(sigma, "sigma")


@register_target(
    "discs-ising",
    "DISCS Ising: free-boundary lattice, λΣ<ij> s_i s_j − Σ b_i s_i with s = 2x−1; circular ±μ field "
    "plus σ-noise, DISCS's parameters from PRNGKey(seed); temperature high/low",
    kind="discrete",
)
def discs_ising(
    shape=None, temperature: str = "high", seed: int = 0, strength=None, mu=None, sigma=None, params=None
) -> Target:
    """DISCS's Ising model (``models/ising.py``) on ``Binary(H·W)``.

    ``log p(x) = λ Σ_<ij> s_i s_j − Σ_i b_i s_i`` with ``s = 2x − 1`` over the bonds of the
    free-boundary ``H × W`` lattice (DISCS's docstring says cyclic; its code is not).

    Parameters
    ----------
    shape : int or (int, int), optional
        Lattice ``(H, W)`` (an integer means square); default DISCS's ``(50, 50)``, or the
        shape of ``params``.
    temperature : {"high", "low"}
        DISCS's settings: high λ = μ = 0.5, σ = 1.5; low λ = μ = 1, σ = 3.
    seed : int
        DISCS's ``rnd_key``: seed 0 reproduces DISCS's field bit for bit.
    strength, mu, sigma : float, optional
        Override the temperature's λ (DISCS ``lambdaa``), μ and σ (``init_sigma``).
    params : array_like or path, optional
        DISCS's ``(3, H, W)`` parameter array (weights ``−λ`` of the horizontal and
        vertical bonds, then the field), or an ``.npz`` file holding it as ``params``;
        replaces the drawn parameters.

    Returns
    -------
    Target
        Metadata: ``params`` (DISCS layout), ``field`` ``(H·W,)``, ``J``/``b``/``constant``
        (``log p = xᵀJx + bᵀx + constant``; ``J`` only for small lattices), ``reference``,
        ``seed`` and the settings.
    """
    preset = _temperature(temperature, ISING_TEMPERATURES)
    given = {"strength": strength, "mu": mu, "sigma": sigma}
    strength_, mu_, sigma_ = _lattice_settings(*(preset[k] if v is None else v for k, v in given.items()))
    seed = _check_count(seed, "seed", 0)
    shape = None if shape is None else _check_shape(shape, 2, "Ising", minimum=2)
    settings = {"temperature": temperature, "strength": strength_, "mu": mu_, "sigma": sigma_}
    if params is None:
        p = _draw_lattice(shape or (50, 50), seed, strength_, mu_, sigma_)
    else:
        p = _lattice_params(params, shape, 2, "discs-ising")
        settings = dict.fromkeys(settings)
    H, W = p.shape[1:]
    coupling_h, coupling_v, field = -p[0][:, :-1], -p[1][:-1, :], p[2]
    bonds = _bond_sum(coupling_h, coupling_v)
    space = Binary(H * W)

    spin_form = quadratic_form(lambda s: 0.5 * bonds(jnp.reshape(s, (H, W))).reshape(-1), -field.reshape(-1))

    def logdensity_fn(x):  # s -> ½ sᵀAs − bᵀs at s = 2x − 1
        return spin_form(2 * _as_float(x) - 1)

    # The same function in gradmc's quadratic convention on x: J = 2A, b = −2(A1 + field).
    a_ones = _bond_sum_numpy(coupling_h, coupling_v, np.ones((H, W)))
    metadata = {
        **({"J": 2.0 * _dense_bonds(coupling_h, coupling_v)} if H * W <= DENSE_J_MAX else {}),
        "b": (-2.0 * (a_ones + field)).reshape(-1),
        "constant": float(coupling_h.sum() + coupling_v.sum() + field.sum()),
        "params": p,
        "field": field.reshape(-1).copy(),
        "shape": (H, W),
        **settings,
    }
    source = "given params" if params is not None else f"{temperature} temperature, seed {seed}"
    init, description = partial(_bernoulli_init, shape=(H, W)), f"DISCS Ising {H}x{W} free boundaries, {source}"
    variables = lattice_variables(space, (H, W))
    return _discs_target("discs-ising", logdensity_fn, space, init, seed, description, metadata, variables=variables)


@register_target(
    "discs-potts",
    "DISCS Potts: free-boundary lattice, one-hot, λΣ<ij>[x_i = x_j] − Σ b_{i,x_i}; circular ±μ field "
    "plus σ-noise per category, DISCS's parameters from PRNGKey(seed); C = 4 (8 as option)",
    kind="discrete",
)
def discs_potts(
    shape=None,
    num_categories=None,
    seed: int = 0,
    strength: float = 1.0,
    mu: float = 0.5,
    sigma: float = 1.5,
    params=None,
) -> Target:
    """DISCS's Potts model (``models/potts.py``) on ``Categorical(C, H·W)``.

    ``log p(x) = λ Σ_<ij> [x_i = x_j] − Σ_i b_{i, x_i}`` over the bonds of the
    free-boundary ``H × W`` lattice, i.e. ``½ xᵀ(A ⊗ I_C)x − bᵀx`` on the one-hot rows.

    Parameters
    ----------
    shape : int or (int, int), optional
        Lattice ``(H, W)``; default DISCS's ``(30, 30)``, or the shape of ``params``.
    num_categories : int, optional
        C: default DISCS's 4 (its sweeps also use 8), or the categories of ``params``.
    seed : int
        DISCS's ``rnd_key``.
    strength, mu, sigma : float
        λ (DISCS ``lambdaa``), the field offset μ and noise σ (``init_sigma``); DISCS's
        1, 0.5 and 1.5 by default.
    params : array_like or path, optional
        DISCS's ``(3, H, W, C)`` parameter array (bond weights ``−λ``, then the field), or
        an ``.npz`` file holding it as ``params``.

    Returns
    -------
    Target
        Metadata: ``params``, ``field`` ``(H·W, C)``, ``b`` (= −field, flattened), ``J``
        (``½ A ⊗ I_C``, small lattices only), ``reference``, ``seed`` and the settings.
    """
    seed = _check_count(seed, "seed", 0)
    strength_, mu_, sigma_ = _lattice_settings(strength, mu, sigma)
    shape = None if shape is None else _check_shape(shape, 2, "Potts", minimum=2)
    C = None if num_categories is None else _check_count(num_categories, "num_categories", 2)
    settings = {"strength": strength_, "mu": mu_, "sigma": sigma_}
    if params is None:
        p = _draw_lattice((shape or (30, 30)) + (C or 4,), seed, strength_, mu_, sigma_)
    else:
        p = _lattice_params(params, None, 3, "discs-potts")
        for name, want, got in (("shape", shape, p.shape[1:3]), ("num_categories", C, p.shape[3])):
            if want is not None and tuple(np.atleast_1d(want)) != tuple(np.atleast_1d(got)):
                raise ValueError(f"discs-potts params have {name} {got}, but {name}={want} was asked for")
        settings = dict.fromkeys(settings)
    H, W, C = p.shape[1:]
    _check_count(C, "num_categories", 2)
    coupling_h, coupling_v, field = -p[0][:, :-1], -p[1][:-1, :], p[2]
    bonds = _bond_sum(coupling_h, coupling_v)
    space = Categorical(C, H * W)
    form = quadratic_form(lambda v: 0.5 * bonds(jnp.reshape(v, (H, W, C))).reshape(-1), -field.reshape(-1))

    def logdensity_fn(x):
        return form(_as_float(x))

    metadata = {
        **({"J": 0.5 * _dense_bonds(coupling_h, coupling_v)} if H * W * C <= DENSE_J_MAX else {}),
        "b": -field.reshape(-1),
        "params": p,
        "field": field.reshape(H * W, C).copy(),
        "shape": (H, W),
        "num_categories": C,
        **settings,
    }
    init = partial(_randint_init, shape=(H, W), num_values=C)
    description = f"DISCS Potts {H}x{W} free boundaries, C={C}, seed {seed}"
    variables = lattice_variables(space, (H, W))
    return _discs_target("discs-potts", logdensity_fn, space, init, seed, description, metadata, variables=variables)


# -- factorised models: Bernoulli and categorical -------------------------------------------


def _zero_J(size: int) -> dict:
    """``metadata["J"]`` of a factorised model: zeros, when at most :data:`DENSE_J_MAX` rows."""
    return {"J": np.zeros((size, size))} if size <= DENSE_J_MAX else {}


def _flat_shape(shape, what: str) -> tuple[int, ...]:
    if isinstance(shape, (int, np.integer)) and not isinstance(shape, bool):
        shape = (int(shape),)
    try:
        shape = tuple(shape)
    except TypeError:
        raise ValueError(f"{what} shape must be an integer or a tuple of integers, got {shape!r}") from None
    return _check_shape(shape, len(shape), what) if shape else _check_shape(shape, 1, what)


@register_target(
    "discs-bernoulli",
    "DISCS Bernoulli: independent bits, log p(x) = θᵀx with θ ~ N(0, σ²) from PRNGKey(seed); "
    "temperature high (σ = 0.5) / low (σ = 1.5); exact truth",
    kind="discrete",
)
def discs_bernoulli(shape=(10000,), temperature: str = "high", seed: int = 0, sigma=None) -> Target:
    """DISCS's factorised Bernoulli model (``models/bernoulli.py``): ``log p(x) = θᵀx``.

    Parameters
    ----------
    shape : int or tuple of int
        DISCS's ``shape`` (flattened to ``d`` bits); default ``(10000,)``.
    temperature : {"high", "low"}
        σ = 0.5 (high) or 1.5 (low).
    seed : int
        DISCS's ``rnd_key``.
    sigma : float, optional
        Overrides the temperature's σ.

    Returns
    -------
    Target
        Exact truth (``P(x_i = 1) = sigmoid(θ_i)``); metadata ``theta``, ``reference``, ``seed``.
    """
    shape = _flat_shape(shape, "Bernoulli")
    sigma_ = _check_scale(_temperature(temperature, BERNOULLI_TEMPERATURES) if sigma is None else sigma, "sigma")
    seed = _check_count(seed, "seed", 0)
    theta = _normal_params(seed, shape, sigma_).reshape(-1)

    def logdensity_fn(x):
        x = _as_float(x)
        return x @ jnp.asarray(theta, x.dtype)

    p1 = 1.0 / (1.0 + np.exp(-theta))

    def sample(key, n):
        return jax.random.bernoulli(key, jnp.asarray(p1), (int(n), theta.size)).astype(jnp.result_type(float))

    truth = Truth(
        mean=p1,
        var=p1 * (1 - p1),
        marginals=np.stack([1 - p1, p1], axis=-1),
        sample=sample,
        source="closed form (independent bits)",
    )
    metadata = {**_zero_J(theta.size), "b": theta, "theta": theta, "sigma": sigma_, "shape": shape}
    description = f"DISCS Bernoulli d={theta.size}, σ={sigma_:g}, seed {seed}"
    init = partial(_randint_init, shape=shape, num_values=2)
    return _discs_target("discs-bernoulli", logdensity_fn, Binary(theta.size), init, seed, description, metadata, truth)


@register_target(
    "discs-categorical",
    "DISCS categorical: independent one-hot variables, log p(x) = Σ θ_{i,x_i} with θ ~ N(0, σ²) "
    "from PRNGKey(seed); C = 4 (8 as option); exact truth",
    kind="discrete",
)
def discs_categorical(shape=(2000,), num_categories: int = 4, seed: int = 0, sigma: float = 1.5) -> Target:
    """DISCS's factorised categorical model (``models/categorical.py``) on ``Categorical(C, d)``.

    Parameters
    ----------
    shape : int or tuple of int
        DISCS's ``shape`` (flattened to ``d`` variables); default ``(2000,)``.
    num_categories : int
        C, DISCS's 4 (its sweeps also use 8).
    seed : int
        DISCS's ``rnd_key``.
    sigma : float
        Scale of θ (DISCS ``init_sigma``, 1.5).

    Returns
    -------
    Target
        Exact truth (marginals ``softmax(θ_i)``); metadata ``theta`` ``(d, C)``, ``reference``, ``seed``.
    """
    shape = _flat_shape(shape, "categorical")
    C = _check_count(num_categories, "num_categories", 2)
    sigma_ = _check_scale(sigma, "sigma")
    seed = _check_count(seed, "seed", 0)
    theta = _normal_params(seed, shape + (C,), sigma_).reshape(-1, C)
    d = theta.shape[0]
    space = Categorical(C, d)

    def logdensity_fn(x):
        x = _as_float(x)
        return jnp.sum(x * jnp.asarray(theta, x.dtype))

    probs = np.exp(theta - theta.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)

    def sample(key, n):
        labels = jax.random.categorical(key, jnp.asarray(np.log(probs)), shape=(int(n), d))
        return space.from_index(labels)

    truth = Truth(mean=probs, marginals=probs, sample=sample, source="closed form (independent variables)")
    metadata = {
        **_zero_J(theta.size),
        "b": theta.reshape(-1),
        "theta": theta,
        "sigma": sigma_,
        "shape": shape,
        "num_categories": C,
    }
    description = f"DISCS categorical d={d}, C={C}, σ={sigma_:g}, seed {seed}"
    init = partial(_randint_init, shape=shape, num_values=C)
    return _discs_target("discs-categorical", logdensity_fn, space, init, seed, description, metadata, truth)


# -- factorial HMM --------------------------------------------------------------------------


def _transition_weights(beta: float, num_categories: int) -> jax.Array:
    """DISCS's categorical FHMM transition weights ``(C, C)`` (``models/fhmm.py``), in
    float32 as DISCS computes them: the diagonal is ``d + (1 − d)/(C − 1)`` with
    ``d = β − (1 − β)/(C − 1)`` and every off-diagonal entry is ``1/(C − 1)``. The rows
    are not normalised; they share one sum, so a hidden chain stays in its state with
    probability ``diag / row sum`` (0.45 for C = 4, β = 0.8).
    """
    C = num_categories
    weights = jnp.eye(C, dtype=jnp.float32) * jnp.float32(beta - (1 - beta) / (C - 1))
    return weights + (1 - weights) / jnp.float32(C - 1)


def _markov_chains(rng, first, draw, L: int):
    """DISCS's FHMM hidden chains ``(L, ...)``: ``first``, then ``L − 1`` steps ``draw(rng, previous)``."""

    def step(carry, _):
        rng, prev = carry
        rng, _ = jax.random.split(rng)
        new = draw(rng, prev)
        return (rng, new), new

    _, rest = jax.lax.scan(step, (rng, first), None, length=L - 1)
    return jnp.concatenate([first[None], rest], axis=0)


@partial(jax.jit, static_argnums=(1, 2, 3, 4, 5))
def _draw_binary_fhmm(key, L: int, K: int, sigma: float, alpha: float, beta: float):
    """DISCS's BinaryFHMM draws: hidden chains x ``(L, K)``, w ``(K, 1)``, b ``(1, 1)`` and
    the observation noise ``(L, 1)`` (y = noise·σ + x w + b is formed outside ``jit``).
    """
    rng1, rng2, rng3, rng4 = jax.random.split(key, 4)
    f32 = jnp.float32
    first = jax.random.bernoulli(rng1, p=jnp.ones([K], f32) * f32(alpha)).astype(f32)

    def draw(rng, prev):
        return jax.random.bernoulli(rng, f32(beta) * prev + f32(1 - beta) * (1 - prev)).astype(f32)

    x = _markov_chains(rng1, first, draw, L)
    w = jax.random.normal(rng2, (K, 1), f32)
    b = jax.random.normal(rng3, (1, 1), f32)
    return x, w, b, jax.random.normal(rng4, (L, 1), f32)


@partial(jax.jit, static_argnums=(1, 2, 3, 4, 5))
def _draw_categorical_fhmm(key, L: int, K: int, C: int, sigma: float, alpha: float, beta):
    """DISCS's CategFHMM draws: x ``(L, K, C)`` one-hot, w ``(K, C)``, b ``(1, 1)``, the
    observation noise ``(L,)`` (y, ``(1, L)``, is formed outside ``jit``) and the
    initial-state logits ``(C,)``.
    """
    f32 = jnp.float32
    rng1, rng2, rng3, rng4 = jax.random.split(key, 4)
    weights = jax.random.uniform(rng1, [C], f32)
    weights = weights.at[0].set(f32(1 - alpha))
    weights = weights.at[1:].set(f32(alpha) * weights[1:] / jnp.sum(weights[1:]))
    alpha_logits = jnp.log(weights)
    first = jax.nn.one_hot(jax.random.categorical(rng1, logits=alpha_logits, shape=(K,)), C, dtype=f32)

    def draw(rng, prev):
        return jax.nn.one_hot(jax.random.categorical(rng, logits=jnp.log(prev @ beta), shape=(K,)), C, dtype=f32)

    x = _markov_chains(rng1, first, draw, L)
    w = jax.random.normal(rng2, (K, C), f32)
    b = jax.random.normal(rng3, (1, 1), f32)
    return x, w, b, jax.random.normal(rng4, (L,), f32), alpha_logits


@register_target(
    "discs-fhmm",
    "DISCS factorial HMM: L steps of K hidden binary (or C-categorical) chains, Gaussian "
    "observations y; DISCS's parameters from PRNGKey(seed)",
    kind="discrete",
)
def discs_fhmm(
    shape=None, num_categories: int = 2, seed: int = 0, sigma: float = 2.0, alpha: float = 0.1, beta: float = 0.8
) -> Target:
    """DISCS's factorial HMM (``models/fhmm.py``): the posterior of the hidden chains.

    Binary (C = 2, on ``Binary(L·K)``)::

        log p(x) = Σ_k log Bern(x_0k; α) + Σ_{l,k} log Bern([x_lk ≠ x_{l+1,k}]; 1 − β)
                   − Σ_l (y_l − Σ_k w_k x_lk − b)² / (2σ²)

    Categorical (C > 2, on ``Categorical(C, L·K)``): the first step has DISCS's
    multinomial log-probability ``lgamma(Σ_c x + 1) − Σ_c lgamma(x_c + 1) + Σ_c x_c a_c``
    (the lgamma terms are constant on one-hot states but shape the gradient, as in
    DISCS), transitions ``Σ x_l^T log B x_{l+1}`` with DISCS's weights ``B`` (see
    :func:`_transition_weights`), observations ``y_l ~ N(Σ_{k,c} w_kc x_lkc + b, σ²)``.

    Parameters
    ----------
    shape : (int, int), optional
        ``(L, K)``; default DISCS's ``(200, 50)`` (binary) or ``(200, 10)`` (categorical).
    num_categories : int
        2 for DISCS's BinaryFHMM, 4 or 8 (any C > 2) for its CategFHMM.
    seed : int
        DISCS's ``rnd_key``.
    sigma : float
        Observation noise σ (DISCS 2).
    alpha : float
        Probability that a chain starts away from state 0 (DISCS 0.1).
    beta : float
        Stay parameter β (DISCS 0.8).

    Returns
    -------
    Target
        Metadata: ``w``, ``b``, ``y``, ``x_true`` (the hidden chains that generated ``y``,
        as a position), ``log_beta`` / ``alpha_logits`` (categorical), ``reference``, ``seed``.
    """
    C = _check_count(num_categories, "num_categories", 2)
    shape = _check_shape(shape if shape is not None else ((200, 50) if C == 2 else (200, 10)), 2, "FHMM")
    L, K = shape
    if L < 2:
        raise ValueError(f"FHMM needs L >= 2 time steps, got shape {shape}")
    sigma_ = _check_real(sigma, "sigma", positive=True)
    alpha_, beta_ = check_probability("alpha", alpha), check_probability("beta", beta)
    seed = _check_count(seed, "seed", 0)
    key = discs_keys(seed)["params"]
    space, init = _binary_or_categorical(C, L * K, (L, K))
    if C == 2:
        x, w, b, noise = _with_discs_bits(_draw_binary_fhmm, key, L, K, sigma_, alpha_, beta_)
        y = noise * jnp.float32(sigma_) + x @ w + b  # op by op, as DISCS (bit-identical y)
        w, b, y = (np.asarray(a, np.float64) for a in (w, b, y))
        log_a, log_1a = math.log(alpha_), math.log(1 - alpha_)
        log_stay, log_move = math.log(beta_), math.log(1 - beta_)
        w_flat = w[:, 0]

        def logdensity_fn(s):
            s = _as_float(s)
            grid = jnp.reshape(s, (L, K))
            mean = grid @ jnp.asarray(w_flat, s.dtype) + b[0, 0]
            logp_y = -jnp.sum(jnp.square(jnp.asarray(y[:, 0], s.dtype) - mean)) / (2 * sigma_**2)
            cur, nxt = grid[:-1], grid[1:]
            change = cur * (1 - nxt) + (1 - cur) * nxt
            logp_0 = jnp.sum(log_a * grid[0] + log_1a * (1 - grid[0]))
            return logp_0 + jnp.sum(log_move * change + log_stay * (1 - change)) + logp_y

        extra = {}
        x_true = np.asarray(x, np.float64).reshape(-1)
    else:
        weights = _transition_weights(beta_, C)
        log_beta = np.asarray(jnp.log(weights), np.float64)
        x, w, b, noise, alpha_logits = _with_discs_bits(_draw_categorical_fhmm, key, L, K, C, sigma_, alpha_, weights)
        y = noise * jnp.float32(sigma_) + jnp.sum(x * w, [-1, -2]) + b  # op by op, as DISCS
        w, b, y, alpha_logits = (np.asarray(a, np.float64) for a in (w, b, y, alpha_logits))

        def logdensity_fn(s):
            s = _as_float(s)
            grid = jnp.reshape(s, (L, K, C))
            first = grid[0]
            logp_0 = jnp.sum(
                jax.lax.lgamma(jnp.sum(first, -1) + 1)
                - jnp.sum(jax.lax.lgamma(first + 1), -1)
                + first @ jnp.asarray(alpha_logits, s.dtype)
            )
            logp_x = jnp.sum((grid[:-1] @ jnp.asarray(log_beta, s.dtype)) * grid[1:])
            mean = jnp.sum(grid * jnp.asarray(w, s.dtype), axis=(1, 2)) + b[0, 0]
            logp_y = -jnp.sum(jnp.square(jnp.asarray(y[0], s.dtype) - mean)) / (2 * sigma_**2)
            return logp_0 + logp_x + logp_y

        extra = {"log_beta": log_beta, "alpha_logits": alpha_logits}
        x_true = np.asarray(x, np.float64).reshape(L * K, C)
    metadata = {"w": w, "b": b, "y": y, "x_true": x_true, **extra, "shape": (L, K), "num_categories": C}
    metadata |= {"sigma": sigma_, "alpha": alpha_, "beta": beta_}
    description = f"DISCS factorial HMM L={L}, K={K}, C={C}, seed {seed}"
    return _discs_target("discs-fhmm", logdensity_fn, space, init, seed, description, metadata)


# -- restricted Boltzmann machine -----------------------------------------------------------


@register_target(
    "discs-rbm",
    "DISCS-shaped RBM (784 visible, 25 hidden; binary or C-categorical visibles) with random "
    "parameters as in Grathwohl et al. 2021 (DISCS's trained MNIST checkpoints are not available)",
    kind="discrete",
)
def discs_rbm(
    num_visible: int = 784,
    num_hidden: int = 25,
    num_categories: int = 2,
    seed: int = 0,
    weight_std: float = 0.05**0.5,
    bias_std: float = 1.0,
) -> Target:
    """A restricted Boltzmann machine with DISCS's energy (``models/rbm.py``), hidden units summed out.

    Binary visibles (C = 2, on ``Binary(V)``)::

        log p(v) = Σ_h softplus(vᵀW_{:,h} + c_h) + bᵀv

    Categorical visibles (C > 2, on ``Categorical(C, V)``):
    ``log p(v) = Σ_h softplus(Σ_{i,c} v_ic W_hic + c_h) + Σ_{i,c} v_ic b_ic``.

    DISCS samples RBMs trained on MNIST (``mnist-2-25``, ``mnist-2-200``) and Fashion-MNIST
    (``fashion_mnist-4-50``, ``-8-50``); those checkpoints are not downloadable here, so the
    parameters are random, as in Grathwohl et al. (2021)'s RBM sampler benchmark: W with
    N(0, 0.05) entries, biases N(0, 1), drawn with ``numpy.random.default_rng(seed)``.

    Parameters
    ----------
    num_visible : int
        V, default 784 (DISCS's MNIST RBMs).
    num_hidden : int
        Hidden units, default 25 (``mnist-2-25``).
    num_categories : int
        2 (binary visibles) or C > 2.
    seed : int
        Seed of the parameters.
    weight_std, bias_std : float
        Standard deviations of the weights and biases.

    Returns
    -------
    Target
        Metadata ``weights`` (``(V, H)`` or ``(H, V, C)``; not called ``W``, which names the
        second-order model the HAMS samplers read), ``b_visible``, ``b_hidden``, ``reference``, ``seed``.
    """
    V = _check_count(num_visible, "num_visible", 1)
    H = _check_count(num_hidden, "num_hidden", 1)
    C = _check_count(num_categories, "num_categories", 2)
    seed = _check_count(seed, "seed", 0)
    w_std, b_std = _check_scale(weight_std, "weight_std"), _check_scale(bias_std, "bias_std")
    rng = np.random.default_rng(seed)
    binary = C == 2
    W = rng.normal(scale=w_std, size=(V, H) if binary else (H, V, C))
    b_v = rng.normal(scale=b_std, size=V if binary else (V, C))
    b_h = rng.normal(scale=b_std, size=H)
    space, init = _binary_or_categorical(C, V, (V,))

    def logdensity_fn(x):
        x = _as_float(x)
        W_x, b_v_x = jnp.asarray(W, x.dtype), jnp.asarray(b_v, x.dtype)
        hidden = (x @ W_x if binary else jnp.einsum("ic,hic->h", x, W_x)) + jnp.asarray(b_h, x.dtype)
        return jnp.sum(jax.nn.softplus(hidden)) + (x @ b_v_x if binary else jnp.sum(x * b_v_x))

    metadata = {"weights": W, "b_visible": b_v, "b_hidden": b_h, "num_categories": C}
    description = f"RBM V={V}, H={H}, C={C}, random parameters (seed {seed}) in DISCS's energy"
    return _discs_target("discs-rbm", logdensity_fn, space, init, seed, description, metadata)
