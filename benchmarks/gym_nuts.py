"""gradmc's NUTS against raw BlackJAX on an Inference Gym posterior, from the same starts.

Both runs take the same log density (the Gym model on its unconstrained space, by its
default event-space bijector), the same starts (uniform on [-2, 2] in every unconstrained
coordinate, as NumPyro and Stan start), the same number of chains and the same budget:

* gradmc: ``gradmc.sample(gradmc.from_function(logp, ...), "nuts", init=starts)``;
* BlackJAX: ``window_adaptation(nuts)`` per chain, then ``nuts`` under ``scan``, the chains
  under ``vmap``, each jitted once.

Printed per side: wall seconds (compilation included), the smallest bulk ESS over the
coordinates, min ESS per second, and each chain's adapted step size and mean number of
gradient evaluations (leapfrog steps) per draw, so that a difference in speed can be traced to the adaptation.
A chain whose step size collapsed in warm-up (a bad start) makes every chain of its batch
wait for its 1,023-step trajectories: look at the step sizes before the ratio.

Needs ``pip install inference-gym`` and ``pip install --pre tfp-nightly``. Usage:
``python benchmarks/gym_nuts.py [--model SyntheticLogGaussianCoxProcess] [--chains 4]
[--warmup 1000] [--draws 2000] [--seed 0]``.
"""

from __future__ import annotations

import argparse
import time
import warnings

import blackjax
import jax
import jax.numpy as jnp
import numpy as np

import gradmc
from gradmc.diagnostics import ess_stats


def unconstrained_logdensity(model):
    """The Gym model's log density on its flat unconstrained space, and that space's size."""
    bijectors = model.default_event_space_bijector
    shapes = {name: tuple(shape) for name, shape in model.event_shape.items()}
    sizes = {name: int(np.prod(shape)) for name, shape in shapes.items()}
    offsets = np.cumsum([0, *sizes.values()])

    def logp(x):
        total = 0.0
        values = {}
        for (name, shape), start in zip(shapes.items(), offsets[:-1], strict=True):
            z = x[start : start + sizes[name]].reshape(shape)
            values[name] = bijectors[name](z)
            total += jnp.sum(bijectors[name].forward_log_det_jacobian(z, event_ndims=len(shape)))
        return model.unnormalized_log_prob(values) + total

    return logp, int(offsets[-1])


def run_gradmc(logp, starts, warmup: int, draws: int, seed: int):
    target = gradmc.from_function(logp, jnp.zeros(starts.shape[1]), name="gym")
    trace = gradmc.sample(
        target,
        "nuts",
        num_chains=starts.shape[0],
        num_warmup=warmup,
        num_draws=draws,
        seed=seed,
        progress=False,
        init=starts,
    )
    steps = np.asarray(trace.stats["num_grad_evals"]).mean(axis=1)  # one per leapfrog step
    return np.asarray(trace.draws), np.asarray(trace.params["step_size"]), steps


def run_blackjax(logp, starts, warmup: int, draws: int, seed: int):
    def adapt(key, start):
        (state, params), _ = blackjax.window_adaptation(blackjax.nuts, logp).run(key, start, num_steps=warmup)
        return state, params

    def sample(key, state, params):
        step = blackjax.nuts(logp, **params).step

        def body(state, key):
            state, info = step(key, state)
            return state, (state.position, info.num_integration_steps)

        return jax.lax.scan(body, state, jax.random.split(key, draws))[1]

    keys = jax.random.split(jax.random.key(seed), (2, starts.shape[0]))
    states, params = jax.jit(jax.vmap(adapt))(keys[0], starts)
    positions, steps = jax.jit(jax.vmap(sample))(keys[1], states, params)
    return np.asarray(positions), np.asarray(params["step_size"]), np.asarray(steps).mean(axis=1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="SyntheticLogGaussianCoxProcess")
    parser.add_argument("--chains", type=int, default=4)
    parser.add_argument("--warmup", type=int, default=1000)
    parser.add_argument("--draws", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    with warnings.catch_warnings():  # TensorFlow Probability's float64 requests under float32 JAX
        warnings.simplefilter("ignore", UserWarning)
        from inference_gym import using_jax as gym

        logp, dim = unconstrained_logdensity(getattr(gym.targets, args.model)())
    starts = jax.random.uniform(jax.random.key(args.seed), (args.chains, dim), minval=-2.0, maxval=2.0)
    print(f"{args.model}: d = {dim}, {args.chains} chains x ({args.warmup} + {args.draws}), the same starts")
    rate = {}
    for name, run in (("gradmc", run_gradmc), ("blackjax", run_blackjax)):
        t0 = time.perf_counter()
        draws, step_sizes, steps = run(logp, starts, args.warmup, args.draws, args.seed)
        seconds = time.perf_counter() - t0
        ess = ess_stats(draws)["min"]
        rate[name] = ess / seconds
        print(
            f"{name:8s} {seconds:7.1f} s  min bulk ESS {ess:7.1f}  min ESS/s {rate[name]:.3f}  "
            f"step sizes {np.array2string(step_sizes, precision=3)}  "
            f"gradient evaluations per draw {np.array2string(steps, precision=1)}"
        )
    print(f"min ESS per second, gradmc / BlackJAX: {rate['gradmc'] / rate['blackjax']:.2f} (goal >= 0.9)")


if __name__ == "__main__":
    main()
