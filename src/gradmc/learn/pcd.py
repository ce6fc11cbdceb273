"""Persistent contrastive divergence, PCD (Rhodes & Gutmann 2022, App. L, Algorithm L.6).

Maximum likelihood for an unnormalised model p(s; θ) ∝ exp f(s; θ) needs the gradient
∇θ log p = ∇θ f(s; θ) − E_p(s;θ)[∇θ f(s; θ)] (eq. 50). PCD estimates the expectation with a
buffer of persistent Markov chains: every update draws a minibatch of chains from the
buffer, moves each by K steps of a discrete MCMC kernel targeting the *current* model,
writes them back, and takes an optimiser step on the contrastive loss

    L(θ) = mean_{s ∈ chains} f(s; θ) − mean_{x ∈ data batch} f(x; θ) + h(θ)

whose gradient is −g of eq. 47 (Optax minimises; Adam by default, as in the paper).

* :class:`PCDKernel` — any discrete kernel of :mod:`gradmc.discrete` (``init``, ``step`` and
  its parameters, fixed or computed from θ, e.g. block Gibbs with the current J);
  :func:`kernel` builds one by name, with the registered samplers' defaults
  (the registry entries that name a ``kernel``, :func:`gradmc.registry.kernel_options`). The
  kernel's hyperparameters stay fixed during learning unless ``params`` is a function of θ.
* :class:`PCD` — the learner: ``init`` and one pure ``update`` (jitted once by :func:`fit`).
* :func:`fit` — the loop over updates: progress bar, metrics/callback every ``every``
  updates, and a clear error naming the update at which a run diverged. ``num_runs``
  vmaps independent runs (seeds) through the same jitted update.
* :func:`exact_negative_log_likelihood` — the exact loss by enumeration, for checking PCD
  on models small enough to enumerate.

The chain state (log density and gradient) is recomputed from the buffer positions at
every update, since θ — and so the target — changed since the chains last moved: K kernel
steps cost K + 1 log-density(+gradient) evaluations per chain.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from tqdm.auto import tqdm

from gradmc import enumeration, registry
from gradmc.checks import check_positive_param, check_radius
from gradmc.curvature.pavg_model import PAVGPreconditioner, make_preconditioner
from gradmc.discrete import gibbs
from gradmc.random import bits
from gradmc.spaces import DiscreteSpace

__all__ = [
    "PCDKernel",
    "kernel",
    "PCD",
    "PCDState",
    "PCDInfo",
    "PCDResult",
    "DivergenceError",
    "fit",
    "check_data",
    "random_subset",
    "cholesky_preconditioner",
    "smallest_eigenvalue_bound",
    "exact_negative_log_likelihood",
]


class PCDKernel(NamedTuple):
    """A discrete MCMC kernel as PCD drives it: the target's log density changes with θ at
    every update, so it is passed at each call.

    Parameters
    ----------
    init : callable
        ``init(position, logdensity_fn) -> state``.
    step : callable
        ``step(key, state, logdensity_fn, space, **params) -> (state, info)`` with
        ``info.acceptance_rate`` and ``info.nonfinite``.
    params : dict or callable, optional
        The kernel's parameters, or a function θ -> dict (recomputed at every update,
        inside jit).
    """

    init: Callable
    step: Callable
    params: Any = None

    def params_at(self, theta) -> dict:
        """The kernel's parameters at the model parameters ``theta``.

        Parameters
        ----------
        theta : pytree
            The model's current parameters θ.
        """
        if callable(self.params):
            return self.params(theta)
        return dict(self.params or {})


def kernel(name: str, **options) -> PCDKernel:
    """The :class:`PCDKernel` of a registered discrete sampler whose entry names its kernel,
    with its kernel options; the defaults are the registered sampler's
    (:func:`gradmc.registry.defaults`).

    ``"ncg"``, ``"avg"`` (``step_size``); ``"pavg"`` (``step_size``, ``M``: a matrix, or a
    function θ -> matrix); ``"block-gibbs"`` (``M`` as for PAVG, ``step_size``; exact only
    for quadratic f with Hessian M); ``"gwg"``; ``"ordinal-gwg"``, ``"mh-uniform"``,
    ``"lattice-metropolis"`` (``radius``); ``"gibbs"`` (random scan only: the chains are
    re-initialised every update, so a systematic scan would restart at coordinate 0).

    Parameters
    ----------
    name : str
        The sampler's registered name.
    **options
        Its kernel options (:func:`gradmc.registry.kernel_options`).
    """
    opts = registry.kernel_options(name, **options)
    module: Any = registry.sampler_entry(name).kernel
    if module is gibbs:
        if (scan := opts["scan"]) != "random":
            raise ValueError(f"PCD re-initialises its chains every update: gibbs needs scan='random', got {scan!r}")
        return PCDKernel(gibbs.init, gibbs.build_kernel("random"), {})
    params: Any = {}
    if "step_size" in opts:
        params["step_size"] = step_size = check_positive_param(f"{name} step size", opts["step_size"])
    if "radius" in opts:
        params["radius"] = check_radius(opts["radius"])
    if "M" in opts:  # pavg, block-gibbs: the preconditioner replaces the step size
        if (M := opts["M"]) is None:
            raise ValueError(f"PCD kernel {name!r} needs M= (a matrix, or a function of the parameters returning one)")
        if callable(M):
            params = lambda theta: {"precond": cholesky_preconditioner(M(theta), step_size)}  # noqa: E731
        else:
            params = {"precond": make_preconditioner(np.asarray(M), step_size)}
    return PCDKernel(module.init, module.build_kernel(), params)


def smallest_eigenvalue_bound(M, num_iterations: int = 100):
    """A cheap estimate of λ_min(M) for symmetric M, rounded down: power iteration on
    c·I − M (c the Gershgorin bound of the spectral radius) from a fixed start, minus a
    margin of 5% of c. If it is still above λ_min, M + d_ε I is not positive definite, its
    Cholesky factor is NaN and the kernel rejects (and flags) every proposal: never wrong
    samples, only moves that are never made.

    Parameters
    ----------
    M : jax.Array
        A symmetric (n, n) matrix.
    num_iterations : int
        Power iterations.
    """
    c = jnp.max(jnp.sum(jnp.abs(M), axis=1))
    A = c * jnp.eye(M.shape[0], dtype=M.dtype) - M

    def body(i, v):
        w = A @ v
        return w / jnp.maximum(jnp.linalg.norm(w), 1e-30)

    start = jnp.sin(1.0 + 2.3 * jnp.arange(M.shape[0], dtype=M.dtype))  # fixed, generic (no lattice symmetry)
    v = jax.lax.fori_loop(0, num_iterations, body, start / jnp.linalg.norm(start))
    return c - v @ A @ v / (v @ v) - 0.05 * c


def cholesky_preconditioner(M, step_size):
    """PAVG's preconditioner for an M that changes every update (e.g. the current model's
    Hessian), without an eigendecomposition (slow on CPU, and needed at every update):
    d_ε = max(0, −λ_min) + 2/ε (eq. 39) with λ_min from :func:`smallest_eigenvalue_bound`,
    and the root is built from the Cholesky factor L of M_ε = M + d_ε I. The kernel only needs
    noise with covariance M_ε (eqs 38–40), so any d_ε ≥ −λ_min is exact — but it applies the
    root as a row-vector product ``n @ root`` (= root n only for a symmetric root), so the
    root stored is Lᵀ: ``n @ Lᵀ = L n`` has covariance L Lᵀ = M_ε (storing L itself would
    give Lᵀ n, covariance LᵀL ≠ M_ε: a biased sampler).

    Parameters
    ----------
    M : jax.Array
        A symmetric (n, n) matrix (symmetrised again here).
    step_size : float or jax.Array
        ε > 0.
    """
    M = 0.5 * (M + M.T)
    d_eps = jnp.maximum(0.0, -smallest_eigenvalue_bound(M)) + 2.0 / step_size
    root = jnp.linalg.cholesky(M + d_eps * jnp.eye(M.shape[0], dtype=M.dtype))
    return PAVGPreconditioner(M.astype(jnp.float32), root.T.astype(jnp.float32), jnp.asarray(d_eps, jnp.float32))


def random_subset(key, n: int, k: int) -> jax.Array:
    """``k`` distinct indices, a uniformly random ``k``-subset of ``range(n)`` (in no uniform
    order), by Floyd's algorithm (Bentley & Floyd 1987): for j = n − k, …, n − 1 draw
    r ~ U{0, …, j} and take r, or j if r was taken: k random words and k short steps instead
    of n uniforms and a top-k (at n = 5000, k = 50: 6–10% more updates per second in
    ``benchmarks/pcd_throughput.py``). r = word mod (j + 1) with 32-bit words, so each
    probability is within a relative (j + 1)/2³² of exact.

    Parameters
    ----------
    key : jax.Array
        Key of the k random words.
    n : int
        The size of the set, n < 2³².
    k : int
        The size of the subset, 0 ≤ k ≤ n.
    """
    if not 0 <= k <= n < 2**32:
        raise ValueError(f"random_subset needs 0 <= k <= n < 2^32, got n={n}, k={k}")
    top = jnp.arange(n - k, n, dtype=jnp.uint32)
    draws = bits(key, (k,)) % (top + 1)

    def add(i, chosen):
        return chosen.at[i].set(jnp.where(jnp.any(chosen == draws[i]), top[i], draws[i]))

    return jax.lax.fori_loop(0, k, add, jnp.full((k,), n, jnp.uint32)).astype(jnp.int32)


class PCDState(NamedTuple):
    """The learner's state: θ, the optimiser's state, the buffer of persistent chains, the
    key, the number of updates done and the first diverged update (0 if none).
    """

    params: Any
    opt_state: Any
    buffer: jax.Array  # (buffer_size, *event_shape) persistent chains
    key: jax.Array
    update: jax.Array  # updates done
    diverged_at: jax.Array  # first update (1-based) with a non-finite loss/gradient, 0 if none


class PCDInfo(NamedTuple):
    """One update's report: the contrastive loss before the step, the gradient norm, and the
    kernel's mean acceptance and fraction of non-finite proposals.
    """

    loss: jax.Array  # contrastive loss L(θ) before the step
    grad_norm: jax.Array
    acceptance_rate: jax.Array  # mean over the minibatch and the K steps
    nonfinite: jax.Array  # fraction of kernel steps that met a non-finite proposal


class DivergenceError(FloatingPointError):
    """A PCD run whose loss or gradient became non-finite (the message names the update)."""


def _check_int(name: str, value, minimum: int) -> int:
    if isinstance(value, bool) or int(value) != value or int(value) < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


@dataclass(frozen=True)
class PCD:
    """Algorithm L.6 for ``logdensity_fn(θ, s) = f(s; θ)`` on a discrete ``space``.

    Parameters
    ----------
    logdensity_fn : callable
        ``logdensity_fn(θ, s) -> f(s; θ)``.
    space : gradmc.spaces.DiscreteSpace
        The model's space.
    kernel : PCDKernel
        The MCMC kernel that moves the chains (:func:`kernel`).
    num_steps : int
        K ≥ 1 kernel steps per update.
    batch_size : int
        Chains drawn from the buffer, and data points, per update.
    buffer_size : int
        Persistent chains in the buffer (≥ ``batch_size``).
    optimizer : optax.GradientTransformation, optional
        Default ``optax.adam(3e-4)``.
    regulariser : callable, optional
        h(θ), added to the loss.
    """

    logdensity_fn: Callable
    space: DiscreteSpace
    kernel: PCDKernel
    num_steps: int
    batch_size: int = 50
    buffer_size: int = 5000
    optimizer: Any = None
    regulariser: Callable | None = None

    def __post_init__(self):
        if not isinstance(self.space, DiscreteSpace):
            raise ValueError(f"PCD needs a discrete space (Binary, Spin, Ordinal, Categorical), got {self.space}")
        _check_int("number of kernel steps per update K (num_steps)", self.num_steps, 1)
        _check_int("batch_size", self.batch_size, 1)
        _check_int("buffer_size", self.buffer_size, 1)
        if self.buffer_size < self.batch_size:
            raise ValueError(f"buffer_size ({self.buffer_size}) must be >= batch_size ({self.batch_size})")
        if not isinstance(self.kernel, PCDKernel):
            raise ValueError("kernel must be a gradmc.learn.pcd.PCDKernel (see gradmc.learn.pcd.kernel(name, ...))")

    @property
    def tx(self):
        """The optimiser (``optax.adam(3e-4)`` unless given)."""
        return self.optimizer if self.optimizer is not None else optax.adam(3e-4)

    def init(self, key, params, buffer=None) -> PCDState:
        """State with a buffer of uniform random states (Bernoulli(0.5) spins), or ``buffer``.

        Parameters
        ----------
        key : jax.Array
            The learner's key.
        params : pytree
            The initial θ (copied).
        buffer : array_like, optional
            The initial chains, (buffer_size, *event_shape).
        """
        key, key_buffer = jax.random.split(key)
        if buffer is None:
            buffer = jax.vmap(self.space.sample_uniform)(jax.random.split(key_buffer, self.buffer_size))
        buffer, shape = jnp.asarray(buffer, jnp.float32), (self.buffer_size,) + self.space.event_shape
        if buffer.shape != shape:
            raise ValueError(f"buffer must have shape {shape}, got {buffer.shape}")
        # fit donates the state: never the caller's arrays
        params, buffer = jax.tree.map(lambda x: jnp.array(x, copy=True), (params, buffer))
        return PCDState(params, self.tx.init(params), buffer, key, jnp.zeros((), jnp.int32), jnp.zeros((), jnp.int32))

    def contrastive_loss(self, params, negatives, positives):
        """L(θ) = mean f(negatives; θ) − mean f(positives; θ) + h(θ) (minus eq. 47's objective).

        Parameters
        ----------
        params : pytree
            θ.
        negatives : jax.Array
            The chains' positions, (batch, *event).
        positives : jax.Array
            A data minibatch, (batch, *event).
        """
        f = jax.vmap(lambda s: self.logdensity_fn(params, s))
        loss = jnp.mean(f(negatives)) - jnp.mean(f(positives))
        return loss + (self.regulariser(params) if self.regulariser is not None else 0.0)

    def update(self, state: PCDState, data) -> tuple[PCDState, PCDInfo]:
        """One update of Algorithm L.6 (pure; :func:`fit` jits it). A non-finite loss or
        gradient leaves θ unchanged and records the update in ``diverged_at``.

        Parameters
        ----------
        state : PCDState
            The learner's state.
        data : jax.Array
            The data set, (n, *event).
        """
        key, key_buffer, key_mcmc, key_data = jax.random.split(state.key, 4)
        index = random_subset(key_buffer, self.buffer_size, self.batch_size)
        theta = state.params
        logdensity = lambda s: self.logdensity_fn(theta, s)  # noqa: E731
        params = self.kernel.params_at(theta)

        def one_step(chains, key):
            keys = jax.random.split(key, self.batch_size)
            chains, info = jax.vmap(lambda k, c: self.kernel.step(k, c, logdensity, self.space, **params))(keys, chains)
            return chains, (jnp.mean(info.acceptance_rate), jnp.mean(info.nonfinite.astype(jnp.float32)))

        chains = jax.vmap(lambda s: self.kernel.init(s, logdensity))(state.buffer[index])
        chains, (acceptance, nonfinite) = jax.lax.scan(one_step, chains, jax.random.split(key_mcmc, self.num_steps))
        negatives = jax.lax.stop_gradient(chains.position)
        positives = data[jax.random.randint(key_data, (self.batch_size,), 0, data.shape[0])]

        loss, grads = jax.value_and_grad(self.contrastive_loss)(theta, negatives, positives)
        updates, opt_state = self.tx.update(grads, state.opt_state, theta)
        new_theta = optax.apply_updates(theta, updates)
        leaves = jax.tree.leaves((grads, new_theta))
        finite = jnp.isfinite(loss) & jnp.all(jnp.array([jnp.all(jnp.isfinite(x)) for x in leaves]))
        new_theta, opt_state = jax.tree.map(
            lambda n, o: jnp.where(finite, n, o), (new_theta, opt_state), (theta, state.opt_state)
        )
        number = state.update + 1
        diverged_at = jnp.where((state.diverged_at == 0) & ~finite, number, state.diverged_at)
        new_state = PCDState(new_theta, opt_state, state.buffer.at[index].set(negatives), key, number, diverged_at)
        return new_state, PCDInfo(loss, optax.tree.norm(grads), jnp.mean(acceptance), jnp.mean(nonfinite))


class PCDResult(NamedTuple):
    """What :func:`fit` returns: θ, the buffer, the history of checkpoints, the final state
    and the wall time of the loop.
    """

    params: Any
    buffer: np.ndarray
    history: list  # one dict per checkpoint: update, loss, acceptance, and the callback's metrics
    state: PCDState
    seconds: float  # wall time of the loop (compilation of the first update included)


def check_data(data, space: DiscreteSpace) -> jax.Array:
    """The data set as a float32 array ``(n, *event_shape)``, after checking it lies in ``space``.

    Parameters
    ----------
    data : array_like
        The data set, (n, *event_shape).
    space : gradmc.spaces.DiscreteSpace
        The model's space.
    """
    arr = np.asarray(data)
    if arr.ndim != 1 + len(space.event_shape) or arr.shape[1:] != space.event_shape:
        raise ValueError(
            f"data set has shape {arr.shape}; the model's space {space} needs "
            f"(n, {', '.join(map(str, space.event_shape))})"
            " (mismatched dimensions between data and model)"
        )
    if arr.shape[0] < 1:
        raise ValueError("data set is empty")
    space.validate(arr, what="data set")
    return jnp.asarray(arr, jnp.float32)


def _check_model(pcd: PCD, params, point, num_runs: int | None) -> None:
    if num_runs is not None:
        params = jax.tree.map(lambda x: x[0], params)
    try:
        out = jax.eval_shape(pcd.logdensity_fn, params, point)
    except Exception as error:  # shape errors from the user's model, reported in our terms
        raise ValueError(
            f"the model's log density cannot be evaluated at a data point of shape {point.shape} "
            f"(mismatched dimensions between data and model?): {error}"
        ) from error
    if out.shape != ():
        raise ValueError(f"the model's log density must return a scalar, got shape {out.shape}")


def fit(
    pcd: PCD,
    params,
    data,
    *,
    key,
    num_updates: int,
    callback: Callable | None = None,
    every: int = 100,
    progress: bool = True,
    buffer=None,
    num_runs: int | None = None,
    desc: str = "PCD",
) -> PCDResult:
    """Run ``num_updates`` updates of ``pcd`` from ``params`` on ``data``.

    Every ``every`` updates (and after the last) the host checks for divergence — raising
    :class:`DivergenceError` naming the first non-finite update — and records the loss,
    the acceptance rate and ``callback(update, state) -> dict`` in the history.

    Parameters
    ----------
    pcd : PCD
        The learner.
    params : pytree
        The initial θ (with a leading run axis when ``num_runs`` is given).
    data : array_like
        The data set, (n, *event_shape).
    key : jax.Array
        The learner's key (split per run).
    num_updates : int
        Updates to run.
    callback : callable, optional
        ``callback(update, state) -> dict`` of metrics recorded at each checkpoint.
    every : int
        Updates between checkpoints.
    progress : bool
        Show a progress bar (only on a terminal, never under CI).
    buffer : array_like, optional
        The initial chains (with a leading run axis when ``num_runs`` is given).
    num_runs : int, optional
        Independent runs vmapped through one jitted update; ``params`` (and ``buffer``)
        then carry a leading run axis, and each run has its own key.
    desc : str
        The progress bar's label.
    """
    num_updates = _check_int("num_updates", num_updates, 1)
    every = _check_int("every", every, 1)
    data = check_data(data, pcd.space)
    _check_model(pcd, params, data[0], num_runs)
    if buffer is not None:
        pcd.space.validate(np.asarray(buffer), what="initial buffer")
    if num_runs is None:
        state = pcd.init(key, params, buffer)
        step = jax.jit(pcd.update, donate_argnums=0)  # the buffer is updated in place
    else:
        num_runs = _check_int("num_runs", num_runs, 1)
        keys = jax.random.split(key, num_runs)
        state = jax.vmap(pcd.init, in_axes=(0, 0, None if buffer is None else 0))(keys, params, buffer)
        step = jax.jit(jax.vmap(pcd.update, in_axes=(0, None)), donate_argnums=0)
    history = []
    quiet = not progress or os.environ.get("CI") or not sys.stderr.isatty()
    bar = tqdm(total=num_updates, desc=desc, disable=bool(quiet), leave=False, unit="update")
    start = time.perf_counter()
    try:
        for n in range(1, num_updates + 1):
            state, info = step(state, data)
            bar.update(1)
            if n % every and n != num_updates:
                continue
            diverged = np.asarray(state.diverged_at)
            if np.any(diverged > 0):
                first = int(diverged[diverged > 0].min())
                which = "" if num_runs is None else f" (run {int(np.argmax(diverged == first))} of {num_runs})"
                raise DivergenceError(
                    f"PCD diverged at update {first} of {num_updates}{which}: the contrastive loss or its gradient "
                    "became non-finite; lower the learning rate, add a regulariser, or check the model"
                )
            loss, acceptance, nonfinite = (np.asarray(x) for x in (info.loss, info.acceptance_rate, info.nonfinite))
            record = {"update": n, "loss": loss, "acceptance": acceptance, "nonfinite": nonfinite}
            if callback is not None:
                record.update(callback(n, state) or {})
            history.append(record)
            bar.set_postfix({k: f"{np.mean(v):.3g}" for k, v in record.items() if k != "update"}, refresh=False)
    finally:
        bar.close()
    seconds = time.perf_counter() - start
    return PCDResult(state.params, np.asarray(state.buffer), history, state, seconds)


def exact_negative_log_likelihood(logdensity_fn: Callable, space: DiscreteSpace, data, regulariser=None) -> Callable:
    """``nll(θ) = log Z(θ) − mean_data f(x; θ) + h(θ)``, Z by enumerating every state.

    Its gradient is the exact-expectation version of eq. 50 (what PCD estimates); for
    checking PCD on models small enough to enumerate (``space.size`` up to ~2^16).

    Parameters
    ----------
    logdensity_fn : callable
        ``logdensity_fn(θ, s) -> f(s; θ)``.
    space : gradmc.spaces.DiscreteSpace
        The model's space (at most 2^16 states).
    data : array_like
        The data set, (n, *event_shape).
    regulariser : callable, optional
        h(θ).
    """
    total = enumeration.num_states(space)
    if total > 2**16:
        raise ValueError(f"{space} has {total} states; exact likelihood is limited to 2^16")
    states = enumeration.positions(space, enumeration.value_indices(space, 0, total))
    data = check_data(data, space).astype(states.dtype)

    def nll(theta):
        f = jax.vmap(lambda s: logdensity_fn(theta, s))
        value = jax.nn.logsumexp(f(states)) - jnp.mean(f(data))
        return value + (regulariser(theta) if regulariser is not None else 0.0)

    return nll
