"""A warm-up that explores first, then fits a model of the target and runs the kernel that
needs it: how the PDHAMS samplers learn their second-order model W when none is given.

Warm-up steps 0 .. T/2 − 1 run a self-tuning *explorer* (a :class:`~gradmc.base.BoundSampler`
of its own, e.g. NCG adapting its step size) and record, over the last ``num_history`` of
them, each step's move Δs and the change of the gradient Δ∇f. At step T/2 ``fit`` turns
the records into the model, pooling them over all chains (``lax.pmean`` over the runner's
``"chain"`` axis; for PDHAMS: the forms of W of :mod:`gradmc.curvature.learned_w`), and the
main kernel starts from the explorer's position. The rest of the
warm-up runs the main kernel with the fitted model and tunes one scalar of it (PDHAMS: δ)
by a step-size rule on the acceptance rate pooled over chains; after warm-up the model is
frozen and returned in the run's ``params``, so the kept draws come from a fixed kernel.
The model is the same for every chain and is held once (:class:`~gradmc.base.Shared`), not
per chain.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from gradmc.adapt.step_size import StepSizeRule
from gradmc.adapt.warmup import WarmupKernel, bind_two_phase
from gradmc.base import BoundSampler, Shared
from gradmc.chains import pool_chains

__all__ = ["ExploreFitState", "ModelTuning", "explore_then_fit_sampler"]


class ModelTuning(NamedTuple):
    """How the scalar x of the fitted model is tuned in the second half of the warm-up.

    Parameters
    ----------
    rule : StepSizeRule
        The rule on x (the acceptance rate must fall as x grows), fed the acceptance rate
        pooled over chains, so x is the same in every chain.
    initial : float
        x at the fit.
    build : callable
        ``build(fitted, x) -> model`` the kernel runs with.
    name : str
        The name of the tuned value in ``params`` and of its statistic.
    value : callable
        ``value(x)`` reported under ``name`` (e.g. δ = 1/x).
    """

    rule: StepSizeRule
    initial: float
    build: Callable
    name: str
    value: Callable


class ExploreFitState(NamedTuple):
    """Warm-up state of :func:`explore_then_fit_sampler`.

    Parameters
    ----------
    explorer : Any
        The explorer's warm-up state.
    kernel : Any
        The main kernel's state (started afresh when the model is fitted).
    model : Shared
        The fitted model (a placeholder before the fit) and the tuning rule's state, held
        once for all chains.
    moves, gradient_changes : jax.Array
        The recorded Δs and Δ∇f, ``(num_history, d)``.
    fitted : jax.Array
        Whether the model is fitted (the main kernel's state is then the live one).
    """

    explorer: Any
    kernel: Any
    model: Shared
    moves: jax.Array
    gradient_changes: jax.Array
    fitted: jax.Array


def explore_then_fit_sampler(
    name: str,
    explorer: BoundSampler,
    gradient: Callable,
    num_warmup: int,
    dim: int,
    *,
    num_history: int,
    fit: Callable,
    placeholder_model: Any,
    kernel_init: Callable,
    kernel: Callable,
    stats_fn: Callable,
    params_of: Callable,
    tuning: ModelTuning,
) -> BoundSampler:
    """The :class:`~gradmc.base.BoundSampler` of the warm-up in the module doc.

    Parameters
    ----------
    name : str
        The sampler's name.
    explorer : BoundSampler
        Runs the first half of the warm-up (its ``warmup_step``); its step statistics must
        have the same structure as ``stats_fn``'s.
    gradient : callable
        ``gradient(explorer_state) -> ∇f`` at the explorer's position.
    num_warmup : int
        Warm-up steps T (T/2 explore, T/2 with the fitted model).
    dim : int
        d, the flattened dimension.
    num_history : int
        How many of the last exploring steps are recorded.
    fit : callable
        ``fit(moves, gradient_changes) -> model`` from one chain's records, ``(num_history,
        d)`` each; it pools them across chains itself (:func:`gradmc.chains.pool_chains`),
        so the model is the same in every chain (traced).
    placeholder_model : Any
        A model of the fitted model's structure, used before the fit.
    kernel_init : callable
        ``kernel_init(key, position) -> state`` of the main kernel.
    kernel : callable
        ``kernel(key, state, model) -> (state, info)``.
    stats_fn : callable
        ``stats_fn(state, info, value) -> StepStats`` of the main kernel, ``value`` the
        tuned value of the step.
    params_of : callable
        ``params_of(model) -> dict`` returned with the run (what was learned, held once for
        all chains); it holds the model itself under ``"model"``, which the kept kernel uses.
    tuning : ModelTuning
        The scalar of the model tuned after the fit (a rule that never moves keeps it).
    """
    fit_at = int(num_warmup) // 2
    history = max(min(int(num_history), fit_at), 1)
    first_recorded = fit_at - history

    def init(key, position):
        key_explorer, key_kernel = jax.random.split(key)
        zeros = jnp.zeros((history, dim), jnp.float32)
        return ExploreFitState(
            explorer.init(key_explorer, position),
            kernel_init(key_kernel, position),
            Shared((placeholder_model, tuning.rule.init(tuning.initial))),
            zeros,
            zeros,
            jnp.bool_(False),
        )

    def explore(key, ws, t):
        new, stats = explorer.warmup_step(key, ws.explorer, t)
        move = (explorer.position(new) - explorer.position(ws.explorer)).reshape(-1)
        change = (gradient(new) - gradient(ws.explorer)).reshape(-1)
        slot = jnp.where(t >= first_recorded, t - first_recorded, history)  # out of range: dropped
        return ws._replace(
            explorer=new,
            moves=ws.moves.at[slot].set(move, mode="drop"),
            gradient_changes=ws.gradient_changes.at[slot].set(change, mode="drop"),
        ), stats

    def switch(key, ws):
        started = kernel_init(key, explorer.position(ws.explorer))
        model = Shared((fit(ws.moves, ws.gradient_changes), tuning.rule.init(tuning.initial)))
        return ws._replace(model=model, kernel=started, fitted=jnp.bool_(True))

    def run_kernel(key, ws):
        fitted, rule_state = ws.model.value
        x = tuning.rule.current(rule_state)
        state, info = kernel(key, ws.kernel, tuning.build(fitted, x))
        rule_state = tuning.rule.update(rule_state, pool_chains(info.acceptance_rate))
        return ws._replace(kernel=state, model=Shared((fitted, rule_state))), stats_fn(state, info, tuning.value(x))

    def warmup_step(key, ws, t):
        key_switch, key_step = jax.random.split(key)
        ws = jax.lax.cond(t == fit_at, lambda w: switch(key_switch, w), lambda w: w, ws)
        return jax.lax.cond(t < fit_at, lambda w: explore(key_step, w, t), lambda w: run_kernel(key_step, w), ws)

    def finalize(ws):
        fitted, rule_state = ws.model.value
        x = tuning.rule.final(rule_state)
        return ws.kernel, Shared({**params_of(tuning.build(fitted, x)), tuning.name: tuning.value(x)})

    def step(key, state, params):
        state, info = kernel(key, state, params.value["model"])
        return state, stats_fn(state, info, params.value[tuning.name])

    def refresh(key, ws, position):
        key_explorer, key_kernel = jax.random.split(key)
        return ws._replace(
            explorer=explorer.refresh(key_explorer, ws.explorer, position),
            kernel=kernel_init(key_kernel, position),
        )

    warmup = WarmupKernel(
        init,
        warmup_step,
        position=lambda ws: jnp.where(ws.fitted, ws.kernel.position, explorer.position(ws.explorer)),
        refresh=None if explorer.refresh is None else refresh,
    )
    return bind_two_phase(name, warmup, finalize, kernel_init, step)
