"""Persistent contrastive divergence, PCD (Rhodes & Gutmann 2022, App. L, Algorithm L.6).

Maximum likelihood for an unnormalised model p(s; θ) ∝ exp f(s; θ) needs the gradient
∇θ log p = ∇θ f(s; θ) − E_p(s;θ)[∇θ f(s; θ)] (eq. 50). PCD estimates the expectation with a
buffer of persistent Markov chains: every update draws a minibatch of chains from the
buffer, moves each by K steps of a discrete MCMC kernel targeting the *current* model,
writes them back, and takes an optimiser step on the contrastive loss

    L(θ) = mean_{s ∈ chains} f(s; θ) − mean_{x ∈ data batch} f(x; θ) + h(θ)

whose gradient is −g of eq. 47 (Optax minimises; Adam by default, as in the paper).

* :class:`Kernel` — any discrete kernel of :mod:`gradmc.discrete` (``init``, ``step`` and its
  parameters, fixed or computed from θ, e.g. block Gibbs with the current J);
  :func:`kernel` builds one by name. The kernel's hyperparameters stay fixed during
  learning unless ``params`` is a function of θ.
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
from dataclasses import dataclass
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from gradmc.random import bits
from gradmc.spaces import DiscreteSpace

__all__ = [
    "Kernel",
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


class Kernel(NamedTuple):
    """A discrete MCMC kernel for PCD.

    ``init(position, logdensity_fn) -> state``; ``step(key, state, logdensity_fn, space,
    **params) -> (state, info)`` with ``info.acceptance_rate`` and ``info.nonfinite``;
    ``params`` a dict, or a function θ -> dict (recomputed at every update, inside jit).
    """

    init: Callable
    step: Callable
    params: Any = None

    def params_at(self, theta) -> dict:
        if callable(self.params):
            return self.params(theta)
        return dict(self.params or {})


def kernel(name: str, **options) -> Kernel:
    """The :class:`Kernel` of a registered discrete sampler.

    ``"ncg"``, ``"avg"`` (``step_size``); ``"pavg"`` (``step_size``, ``M``: a matrix, or a
    function θ -> matrix); ``"block-gibbs"`` (``M`` as for PAVG, ``step_size``; exact only
    for quadratic f with Hessian M); ``"gwg"``; ``"gibbs"`` (random scan: one coordinate per
    step; a systematic scan would restart at coordinate 0 every update); ``"mh-uniform"``
    (``radius``). Step sizes default to the paper's Ising values.
    """
    from gradmc.adapt.preconditioner import make_preconditioner
    from gradmc.discrete import avg, block_gibbs, gibbs, gwg, ncg, pavg, uniform
    from gradmc.discrete.proposal_mh import check_positive_param, check_radius

    def take(allowed: dict) -> dict:
        unknown = sorted(set(options) - set(allowed))
        if unknown:
            raise ValueError(f"PCD kernel {name!r} has no option(s) {unknown}; its options are {sorted(allowed)}")
        return {**allowed, **options}

    if name in ("ncg", "avg"):
        module = ncg if name == "ncg" else avg
        opts = take({"step_size": 0.5 if name == "ncg" else 0.2})
        return Kernel(module.init, module.build_kernel(), {"step_size": check_positive_param(f"{name} step size", opts["step_size"])})
    if name in ("pavg", "block-gibbs"):
        module = pavg if name == "pavg" else block_gibbs
        opts = take({"step_size": 0.2, "M": None})
        step_size = check_positive_param(f"{name} step size", opts["step_size"])
        M = opts["M"]
        if M is None:
            raise ValueError(f"PCD kernel {name!r} needs M= (a matrix, or a function of the parameters returning one)")
        if callable(M):
            return Kernel(module.init, module.build_kernel(), lambda theta: {"precond": cholesky_preconditioner(M(theta), step_size)})
        return Kernel(module.init, module.build_kernel(), {"precond": make_preconditioner(np.asarray(M), step_size)})
    if name in ("gwg", "mh-uniform"):
        module = gwg if name == "gwg" else uniform
        opts = take({"radius": 1})
        return Kernel(module.init, module.build_kernel(), {"radius": check_radius(opts["radius"])})
    if name == "gibbs":
        take({})
        return Kernel(gibbs.init, gibbs.build_kernel("random"), {})
    raise ValueError(f"unknown PCD kernel {name!r}; valid: ncg, avg, pavg, block-gibbs, gwg, gibbs, mh-uniform")


def smallest_eigenvalue_bound(M, num_iterations: int = 100):
    """A cheap estimate of λ_min(M) for symmetric M, rounded down: power iteration on
    c·I − M (c the Gershgorin bound of the spectral radius) from a fixed start, minus a
    margin of 5% of c. If it is still above λ_min, M + d_ε I is not positive definite, its
    Cholesky factor is NaN and the kernel rejects (and flags) every proposal: never wrong
    samples, only lost moves."""
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
    """
    from gradmc.adapt.preconditioner import Preconditioner

    M = 0.5 * (M + M.T)
    d_eps = jnp.maximum(0.0, -smallest_eigenvalue_bound(M)) + 2.0 / step_size
    root = jnp.linalg.cholesky(M + d_eps * jnp.eye(M.shape[0], dtype=M.dtype))
    return Preconditioner(M.astype(jnp.float32), root.T.astype(jnp.float32), jnp.asarray(d_eps, jnp.float32))


def random_subset(key, n: int, k: int) -> jax.Array:
    """``k`` distinct indices, a uniformly random ``k``-subset of ``range(n)`` (in no uniform
    order), by Floyd's algorithm (Bentley & Floyd 1987): for j = n − k, …, n − 1 draw
    r ~ U{0, …, j} and take r, or j if r was taken: k random words and k short steps instead
    of n uniforms and a top-k (at n = 5000, k = 50: 6–10% more updates per second in
    ``benchmarks/pcd_throughput.py``). r = word mod (j + 1) with 32-bit words, so each
    probability is within a relative (j + 1)/2³² of exact."""
    if not 0 <= k <= n < 2**32:
        raise ValueError(f"random_subset needs 0 <= k <= n < 2^32, got n={n}, k={k}")
    top = jnp.arange(n - k, n, dtype=jnp.uint32)
    draws = bits(key, (k,)) % (top + 1)

    def add(i, chosen):
        return chosen.at[i].set(jnp.where(jnp.any(chosen == draws[i]), top[i], draws[i]))

    return jax.lax.fori_loop(0, k, add, jnp.full((k,), n, jnp.uint32)).astype(jnp.int32)


class PCDState(NamedTuple):
    params: Any
    opt_state: Any
    buffer: jax.Array  # (buffer_size, *event_shape) persistent chains
    key: jax.Array
    update: jax.Array  # updates done
    diverged_at: jax.Array  # first update (1-based) with a non-finite loss/gradient, 0 if none


class PCDInfo(NamedTuple):
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

    ``num_steps`` K >= 1 kernel steps per update; minibatches of ``batch_size`` chains from
    a buffer of ``buffer_size`` and ``batch_size`` data points; ``optimizer`` any Optax
    gradient transformation (default ``optax.adam(3e-4)``); ``regulariser`` h(θ) or None.
    """

    logdensity_fn: Callable
    space: DiscreteSpace
    kernel: Kernel
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
        if not isinstance(self.kernel, Kernel):
            raise ValueError("kernel must be a gradmc.learn.pcd.Kernel (see gradmc.learn.pcd.kernel(name, ...))")

    @property
    def tx(self):
        return self.optimizer if self.optimizer is not None else optax.adam(3e-4)

    def init(self, key, params, buffer=None) -> PCDState:
        """State with a buffer of uniform random states (Bernoulli(0.5) spins), or ``buffer``."""
        key, key_buffer = jax.random.split(key)
        if buffer is None:
            buffer = jax.vmap(self.space.sample_uniform)(jax.random.split(key_buffer, self.buffer_size))
        buffer = jnp.asarray(buffer, jnp.float32)
        if buffer.shape != (self.buffer_size,) + self.space.event_shape:
            raise ValueError(f"buffer must have shape {(self.buffer_size,) + self.space.event_shape}, got {buffer.shape}")
        params = jax.tree.map(lambda x: jnp.array(x, copy=True), params)  # fit donates the state: never the caller's arrays
        buffer = jnp.array(buffer, copy=True)
        return PCDState(params, self.tx.init(params), buffer, key, jnp.zeros((), jnp.int32), jnp.zeros((), jnp.int32))

    def contrastive_loss(self, params, negatives, positives):
        """L(θ) = mean f(negatives; θ) − mean f(positives; θ) + h(θ) (minus eq. 47's objective)."""
        f = jax.vmap(lambda s: self.logdensity_fn(params, s))
        loss = jnp.mean(f(negatives)) - jnp.mean(f(positives))
        return loss + (self.regulariser(params) if self.regulariser is not None else 0.0)

    def update(self, state: PCDState, data) -> tuple[PCDState, PCDInfo]:
        """One update of Algorithm L.6 (pure; :func:`fit` jits it). A non-finite loss or
        gradient leaves θ unchanged and records the update in ``diverged_at``."""
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
        finite = jnp.isfinite(loss) & jnp.all(jnp.array([jnp.all(jnp.isfinite(x)) for x in jax.tree.leaves((grads, new_theta))]))
        keep = lambda new, old: jax.tree.map(lambda n, o: jnp.where(finite, n, o), new, old)  # noqa: E731
        number = state.update + 1
        new_state = PCDState(
            keep(new_theta, theta),
            keep(opt_state, state.opt_state),
            state.buffer.at[index].set(negatives),
            key,
            number,
            jnp.where((state.diverged_at == 0) & ~finite, number, state.diverged_at),
        )
        return new_state, PCDInfo(loss, optax.tree.norm(grads), jnp.mean(acceptance), jnp.mean(nonfinite))


class PCDResult(NamedTuple):
    params: Any
    buffer: np.ndarray
    history: list  # one dict per checkpoint: update, loss, acceptance, and the callback's metrics
    state: PCDState
    seconds: float  # wall time of the loop (compilation of the first update included)


def check_data(data, space: DiscreteSpace) -> jax.Array:
    """The data set as a float32 array ``(n, *event_shape)``, after checking it lies in ``space``."""
    arr = np.asarray(data)
    if arr.ndim != 1 + len(space.event_shape) or arr.shape[1:] != space.event_shape:
        raise ValueError(
            f"data set has shape {arr.shape}; the model's space {space} needs (n, {', '.join(map(str, space.event_shape))})"
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


def _progress_bar(total: int, enabled: bool, desc: str):
    from tqdm.auto import tqdm

    quiet = not enabled or os.environ.get("CI") or not sys.stderr.isatty()
    return tqdm(total=total, desc=desc, disable=bool(quiet), leave=False, unit="update")


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
    ``num_runs``: independent runs vmapped through one jitted update; ``params`` (and
    ``buffer``) then carry a leading run axis, and each run has its own key.
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
    bar = _progress_bar(num_updates, progress, desc)
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
            record = {
                "update": n,
                "loss": np.asarray(info.loss),
                "acceptance": np.asarray(info.acceptance_rate),
                "nonfinite": np.asarray(info.nonfinite),
            }
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
    """
    from gradmc.targets.enumerate import num_states, positions, value_indices

    total = num_states(space)
    if total > 2**16:
        raise ValueError(f"{space} has {total} states; exact likelihood is limited to 2^16")
    states = positions(space, value_indices(space, 0, total))
    data = check_data(data, space).astype(states.dtype)

    def nll(theta):
        f = jax.vmap(lambda s: logdensity_fn(theta, s))
        value = jax.nn.logsumexp(f(states)) - jnp.mean(f(data))
        return value + (regulariser(theta) if regulariser is not None else 0.0)

    return nll
