"""The contract every part of gradmc speaks: targets, kernels, samplers, step statistics.

Three layers, from the inside out:

* **Kernels** follow BlackJAX's contract: a module with ``init(position, logdensity_fn)``,
  ``build_kernel() -> kernel(rng_key, state, logdensity_fn, **params)`` and
  ``as_top_level_api(...) -> SamplingAlgorithm``. ``SamplingAlgorithm`` *is* BlackJAX's
  class, so a gradmc kernel runs in a plain ``state, info = alg.step(key, state)`` loop and
  in BlackJAX's own tooling.
* **Samplers** (:class:`Sampler`) are what the registry hands out (``gradmc.sampler(name,
  **options)``): a name and the user's options, waiting for a target.
* **Bound samplers** (:class:`BoundSampler`, from ``sampler.bind(target, num_warmup)``)
  bundle a kernel with its warm-up (adaptation) for one chain: ``init`` -> ``warmup_step``
  (repeated) -> ``finalize`` -> ``step`` (repeated, a fixed kernel). The runner ``vmap``s
  them over chains with the axis name ``"chain"``, so a warm-up may pool statistics across
  chains with ``jax.lax.pmean(x, "chain")``. What a warm-up learns from all chains together
  (a pooled preconditioner) is wrapped in :class:`Shared`: the runner holds it once, not
  once per chain.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from blackjax.base import SamplingAlgorithm

from gradmc.spaces import Space
from gradmc.variables import Variables

__all__ = [
    "RunWarning",
    "FALLBACK",
    "SamplingAlgorithm",
    "Truth",
    "PerDatumModel",
    "Target",
    "StepStats",
    "step_stats",
    "Shared",
    "BoundSampler",
    "Sampler",
    "mh_accept",
    "reject_nonfinite",
    "mh_stats",
]

ArrayTree = Any
PRNGKey = jax.Array


#: The key of a run's ``params`` that says a discrete gradient sampler's proposal froze in
#: warm-up and single-site moves were added to its steps (:mod:`gradmc.discrete.fallback`).
FALLBACK = "fallback"

#: The key of a composed sampler's choice, options and statistics that names a joint move of
#: every block before each sweep (:mod:`gradmc.mode_shift`).
JOINT = "joint"

#: The key of a composed sampler's choice, and of its continuous block's options, that says the
#: block moves in coordinates fitted to its conditional (:mod:`gradmc.whitening`).
WHITEN = "whiten"

#: The key of a composed sampler's choice, and of its continuous block's options, that says which
#: discrete blocks the continuous block's moves sum out (:func:`gradmc.composed.summed_out`).
COLLAPSE = "collapse"

#: The key of a composed sampler's choice, options, parameters and statistics that names its
#: switch pairs (:mod:`gradmc.switch_pairs`).
PAIRS = "pairs"

#: The key of a target's ``metadata`` naming the discrete parts of its Product space that its log
#: density takes as integers (indices, ``locs[z]``), so has no gradient in by construction: the
#: structural probes of :func:`gradmc.composed.part_shapes` need not read them.
INDEX_PARTS = "index_parts"


class RunWarning(UserWarning):
    """A problem found in a run or in setting one up (unconverged chains, few effective
    draws, divergences, stuck chains, failed adaptation, a costly choice); the message names
    the coordinates or chains and suggests a fix. Silence with
    ``warnings.simplefilter("ignore", gradmc.RunWarning)``.
    """


@dataclass(frozen=True)
class Truth:
    """What is known exactly about a target, for judging samplers against it.

    ``mean``/``cov`` (or ``var`` alone) are moments of the coordinates; ``marginals`` is a
    ``(d, k)`` array of exact univariate marginal probabilities over a discrete space's
    ``k`` values; ``sample(key, n)`` draws ``n`` exact samples; ``source`` says how the
    truth was obtained (closed form, quadrature, enumeration, ...).

    Parameters
    ----------
    mean, cov, var : ndarray, optional
        Moments of the coordinates.
    marginals : ndarray, optional
        ``(d, k)`` univariate marginals of a discrete target.
    sample : callable, optional
        ``sample(key, n)``: exact draws.
    source : str
        How the truth was obtained.
    """

    mean: np.ndarray | None = None
    cov: np.ndarray | None = None
    var: np.ndarray | None = None
    marginals: np.ndarray | None = None
    sample: Callable[[PRNGKey, int], jax.Array] | None = None
    source: str = ""

    @property
    def variance(self) -> np.ndarray | None:
        """Var[x_i] (``var``, or the diagonal of ``cov``; None when neither is known)."""
        if self.var is not None:
            return np.asarray(self.var)
        if self.cov is not None:
            return np.diag(np.asarray(self.cov))
        return None

    @property
    def second_moment(self) -> np.ndarray | None:
        """E[x_i^2] = Var[x_i] + E[x_i]^2 (None when either is unknown)."""
        if self.mean is None or self.variance is None:
            return None
        return self.variance + np.asarray(self.mean) ** 2


class PerDatumModel(NamedTuple):
    """A posterior written as prior x product of per-datum likelihoods, for minibatching.

    ``logdensity(x) = logprior_fn(x) + sum_n loglik_fn(x, data[n])``; ``data`` is a pytree
    whose leaves share a leading axis of length N.

    Parameters
    ----------
    logprior_fn : callable
        ``logprior_fn(x)``.
    loglik_fn : callable
        ``loglik_fn(x, datum)``: one datum's log likelihood.
    data : pytree
        Leaves with a leading axis of length N.
    """

    logprior_fn: Callable[[jax.Array], jax.Array]
    loglik_fn: Callable[[jax.Array, Any], jax.Array]
    data: Any

    @property
    def num_data(self) -> int:
        """The number N of data (the leading axis of ``data``)."""
        return int(jax.tree.leaves(self.data)[0].shape[0])


@dataclass(frozen=True, eq=False)
class Target:
    """A distribution to sample: unnormalised log density on a space, with its truth.

    ``logdensity_fn`` maps one position (shape ``space.event_shape``) to a scalar; for
    discrete spaces it must also accept real-valued inputs, since the gradient samplers
    differentiate it. ``initial_position(key)`` draws a starting point (default: N(0, I)
    on ``Real``, the space's own default on discrete spaces). ``bounds`` is the plotting
    box ``((x_lo, x_hi), (y_lo, y_hi))`` for 2-D targets.

    Parameters
    ----------
    name : str
        The name the registry and traces use.
    logdensity_fn : callable
        ``logdensity_fn(x)``: the unnormalised log density.
    space : Space
        The space of positions.
    description : str
        One line for ``gradmc list``.
    truth : Truth, optional
        What is known exactly about the target.
    initial_position : callable, optional
        ``initial_position(key)``: a chain's start.
    per_datum : PerDatumModel, optional
        The posterior's per-datum form, for minibatching samplers.
    bounds : tuple, optional
        The plotting box of a 2-D target.
    metadata : dict
        Anything else (true parameters, cached tables).
    variables : Variables, optional
        How a position reads as named variables (``mu``, ``theta``, a lattice of spins),
        which traces and ArviZ output use; None: one variable ``x``, the position.
    """

    name: str
    logdensity_fn: Callable[[jax.Array], jax.Array]
    space: Space
    description: str = ""
    truth: Truth | None = None
    initial_position: Callable[[PRNGKey], jax.Array] | None = None
    per_datum: PerDatumModel | None = None
    bounds: tuple[tuple[float, float], tuple[float, float]] | None = None
    metadata: dict = field(default_factory=dict)
    variables: Variables | None = None

    @property
    def dim(self) -> int:
        """Number of coordinates of the flattened position."""
        return self.space.dim

    def draw_initial(self, key: PRNGKey) -> jax.Array:
        """One starting position for a chain.

        Parameters
        ----------
        key : jax.Array
            A PRNG key.
        """
        if self.initial_position is not None:
            return self.initial_position(key)
        if hasattr(self.space, "sample_uniform"):
            return self.space.sample_uniform(key)
        return jax.random.normal(key, self.space.event_shape)


class StepStats(NamedTuple):
    """Statistics of one transition, the same fields for every sampler.

    ``acceptance_rate`` is the Metropolis–Hastings probability min(1, r) (1 for
    rejection-free kernels); ``nonfinite`` flags a proposal rejected because its log
    density or gradient was NaN/inf; ``num_grad_evals`` counts log-density+gradient
    evaluations made by this step; ``extra`` holds sampler-specific scalars.

    Parameters
    ----------
    logdensity : jax.Array
        Log density of the state after the step.
    acceptance_rate : jax.Array
        The MH acceptance probability.
    is_accepted : jax.Array
        Whether the proposal was accepted.
    step_size : jax.Array
        The step size used (NaN when the sampler has none).
    num_grad_evals : jax.Array
        Log-density+gradient evaluations of the step.
    diverging : jax.Array
        A divergent trajectory (HMC/NUTS).
    nonfinite : jax.Array
        A proposal rejected for a non-finite log density or gradient.
    extra : dict
        Sampler-specific scalars.
    """

    logdensity: jax.Array
    acceptance_rate: jax.Array
    is_accepted: jax.Array
    step_size: jax.Array
    num_grad_evals: jax.Array
    diverging: jax.Array
    nonfinite: jax.Array
    extra: dict


def step_stats(
    logdensity,
    acceptance_rate,
    is_accepted,
    step_size=jnp.nan,
    num_grad_evals=1,
    diverging=False,
    nonfinite=False,
    extra: dict | None = None,
) -> StepStats:
    """Build :class:`StepStats` with fixed dtypes, so every sampler's stats stack alike.

    Parameters
    ----------
    logdensity, acceptance_rate, is_accepted, step_size, num_grad_evals, diverging, nonfinite : array_like
        The fields of :class:`StepStats`, cast to float32, bool or int32.
    extra : dict, optional
        Sampler-specific scalars.
    """
    return StepStats(
        logdensity=jnp.asarray(logdensity, jnp.float32),
        acceptance_rate=jnp.asarray(acceptance_rate, jnp.float32),
        is_accepted=jnp.asarray(is_accepted, bool),
        step_size=jnp.asarray(step_size, jnp.float32),
        num_grad_evals=jnp.asarray(num_grad_evals, jnp.int32),
        diverging=jnp.asarray(diverging, bool),
        nonfinite=jnp.asarray(nonfinite, bool),
        extra={} if extra is None else extra,
    )


def mh_stats(num_grad_evals: int) -> Callable:
    """``stats_fn(state, info, step_size)`` for kernels whose state has ``logdensity`` and whose
    info has ``acceptance_rate``, ``is_accepted`` and ``nonfinite``.

    Parameters
    ----------
    num_grad_evals : int
        Log-density+gradient evaluations per step.
    """

    def stats_fn(state, info, step_size):
        return step_stats(
            state.logdensity,
            info.acceptance_rate,
            info.is_accepted,
            step_size,
            num_grad_evals,
            nonfinite=info.nonfinite,
        )

    return stats_fn


class Shared(NamedTuple):
    """A part of a warm-up state, or of the adapted parameters, that is the same for every
    chain (learned from all of them), held once instead of once per chain.

    The runner ``vmap``s over chains with this part unbatched (``in_axes``/``out_axes``
    ``None``): a ``warmup_step`` may only change it from values pooled over the chains
    (``jax.lax.pmean``/``jax.lax.all_gather`` over the ``"chain"`` axis) or from the step
    counter, and ``init`` must make it from neither the key nor the position. A 3,600 ×
    3,600 preconditioner then takes 52 MB for 100 chains instead of 5.2 GB.
    ``trace.params`` shows it per chain again, as a zero-copy broadcast.

    Parameters
    ----------
    value : pytree
        The shared arrays.
    """

    value: Any


class BoundSampler(NamedTuple):
    """One chain's warm-up and fixed kernel, as the runner drives them.

    * ``init(key, position) -> warmup_state``
    * ``warmup_step(key, warmup_state, t) -> (warmup_state, StepStats)`` for t = 0..W-1
    * ``finalize(warmup_state) -> (kernel_state, params)``: adaptation stops here.
    * ``step(key, kernel_state, params) -> (kernel_state, StepStats)``: a fixed kernel.
    * ``position(state)`` reads the position from a warm-up or kernel state.
    * ``refresh(key, state, position) -> state``: the same warm-up or kernel state moved to
      ``position``, with what it caches of the log density there (value, gradient) computed
      again from the log density this sampler was bound to. A composed sampler
      (:mod:`gradmc.composed`) calls it at the state's own position after another block has
      moved, the discrete fallback (:mod:`gradmc.discrete.fallback`) at the position its move
      reached; None for a sampler whose state holds more than its position (tempering
      replicas, a temperature, a history), which cannot be moved from outside.

    ``params`` (the adapted step size, preconditioner, ...) are returned with the run.
    Parts of the warm-up state or of ``params`` wrapped in :class:`Shared` have no chain
    axis: ``init`` makes them once, and ``step`` reads them as ``params[...].value``.
    ``adapts_in_warmup`` is False when the warm-up steps are ordinary kernel steps (nothing
    is learned), so a driver may skip a separate warm-up phase.

    * ``freeze(warmup_state) -> warmup_state`` (optional): the state from which further
      ``warmup_step`` calls are ``step`` with the kept parameters, adapting nothing. The
      runner then runs the kept draws with the warm-up's compiled program instead of
      compiling the fixed kernel a second time.

    Parameters
    ----------
    name : str
        The sampler's name.
    init, warmup_step, finalize, step, position : callable
        The functions above.
    adapts_in_warmup : bool
        Whether the warm-up learns anything.
    refresh : callable, optional
        The function above (None: the sampler cannot move one block of a composed sampler).
    freeze : callable, optional
        The function above (None: the kept draws run ``step``).
    """

    name: str
    init: Callable
    warmup_step: Callable
    finalize: Callable
    step: Callable
    position: Callable
    adapts_in_warmup: bool = True
    refresh: Callable | None = None
    freeze: Callable | None = None


class Sampler(NamedTuple):
    """A sampler name, its options, and how to build the :class:`BoundSampler` for a target.

    Made by :func:`gradmc.sampler` (``gradmc.sampler("mala", step_size=0.1)``); the runner
    calls :meth:`bind` once the target and the warm-up length are known.

    Parameters
    ----------
    name : str
        The registered name.
    options : dict
        The user's options.
    build : callable
        ``build(target, num_warmup, **options) -> BoundSampler``.
    """

    name: str
    options: dict
    build: Callable[..., BoundSampler]

    def bind(self, target: Target, num_warmup: int) -> BoundSampler:
        """The :class:`BoundSampler` of these options on ``target`` with ``num_warmup`` warm-up steps.

        Parameters
        ----------
        target : Target
            The target to sample.
        num_warmup : int
            Warm-up steps per chain.
        """
        return self.build(target, num_warmup, **self.options)


def mh_accept(key: PRNGKey, log_ratio: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Metropolis–Hastings test that rejects non-finite ratios.

    Returns ``(accept, acceptance_probability, nonfinite)``. A NaN or +inf log ratio
    comes from a proposal whose log density or gradient is not finite: it is rejected
    (probability 0) and flagged, so NaN/inf never reaches the chain.

    Parameters
    ----------
    key : jax.Array
        The key of the uniform draw.
    log_ratio : jax.Array
        The log MH ratio.
    """
    nonfinite = ~jnp.isfinite(log_ratio) & ~(log_ratio == -jnp.inf)
    safe = jnp.where(nonfinite, -jnp.inf, log_ratio)
    prob = jnp.exp(jnp.minimum(safe, 0.0))
    accept = jnp.log(jax.random.uniform(key, dtype=prob.dtype)) < safe
    return accept, prob, nonfinite


def reject_nonfinite(logdensity_fn: Callable) -> Callable:
    """``logdensity_fn`` with NaN and +inf mapped to -inf (zero density).

    For kernels that are not ours (BlackJAX HMC/NUTS): a NaN or +inf log density would
    otherwise be accepted or poison a trajectory; as -inf it is simply never accepted.

    Parameters
    ----------
    logdensity_fn : callable
        The log density to guard.
    """

    def safe(x):
        value = logdensity_fn(x)
        return jnp.where(jnp.isfinite(value), value, -jnp.inf)

    return safe
