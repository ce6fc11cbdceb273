"""Measure DISCS's own samplers on DISCS's models under the benchmark protocol: the reference
values that ``benchmarks/discs.py`` prints beside gradmc's (``benchmarks/discs_reference.json``).

DISCS (google-research/discs, Goshvadi et al. 2023) publishes its ESS only as log-scale bar
charts, so the references are measured by running DISCS's code, unchanged, on the same
models, starting states and reference states as gradmc's benchmark. DISCS needs JAX 0.4 and
gradmc a current JAX, so this takes three steps in two Python environments:

1. gradmc's environment: ``python benchmarks/discs_reference.py export DIR`` writes the
   random RBMs of ``discs-rbm`` (DISCS's trained RBM checkpoints are not downloadable; 784
   visible units as DISCS's MNIST RBM, model ``rbm_random``; 2,500, model ``rbm2500``; 784
   visible units of 4 categories and 50 hidden units as DISCS's Fashion-MNIST RBM, model
   ``rbm-categorical``)
   with their starting and reference states, for DISCS's samplers to run on.
2. DISCS's environment (``pip install jax==0.4.13 jaxlib==0.4.13 "numpy<2" "scipy<1.12"
   ml_collections absl-py`` and a checkout of google-research/discs, commit aa8c122, on
   ``PYTHONPATH``): ``python benchmarks/discs_reference.py run DIR --models potts,bernoulli
   --samplers dmala,gwg,path_auxiliary,dlmc``. For each model and sampler: DISCS's default
   model and sampler configurations, its parameters, starts and reference state from
   ``PRNGKey(0)`` exactly as its ``Sampling_Experiment`` draws them, 100 chains, 10,000
   steps, and its step function driven by ``lax.scan`` with the per-step keys of its
   Python loop (``fold_in(PRNGKey(10), step)``). Saves the statistic of the kept half
   (Hamming / label-L1 distance to the reference state, as DISCS's
   ``_get_mapped_samples``), the acceptance rate and DISCS's own count of likelihood
   calls. DISCS's adaptive GWG draws its L moves one at a time, each a categorical draw
   over all coordinates of every chain; on the Bernoulli and FHMM models (10,000
   coordinates, L growing during the run) that takes many hours per run on a CPU.
   ``--inverse-cdf-multinomial`` makes those draws at once with the same law (checked at
   start against DISCS's routine); on the 25x25 Ising model it reproduces DISCS's GWG.
3. gradmc's environment: ``python benchmarks/discs_reference.py summarize DIR`` computes
   the ESS per step with :func:`gradmc.diagnostics.discs.discs_ess` (TensorFlow
   Probability's estimator, per chain, averaged) and writes ``DIR/discs_reference.json``.

Run on DISCS's 25x25 Ising model this reproduces the measurement of DMALA made with
DISCS's own experiment runner (0.0190 ± 0.0007 ESS per step, acceptance 0.574). The run
records its wall-clock times too (``runs.jsonl``); they are DISCS's code on JAX 0.4.13 and
compare only with a gradmc run on the same, otherwise idle, machine.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import time
import types
from pathlib import Path

import numpy as np

# the random RBMs of ``discs-rbm`` exported for DISCS's samplers: model name of this script ->
# gradmc's options (DISCS's MNIST shape, and a larger one whose learned W in gradmc is of low rank)
RANDOM_RBMS = {
    "rbm_random": {},
    "rbm2500": {"num_visible": 2500},
    "rbm-categorical": {"num_categories": 4, "num_hidden": 50},  # the shape of DISCS's Fashion-MNIST RBM
}

# model names of this script that are a DISCS model config with other options
VARIANTS = {"ising25": ("ising", {"shape": (25, 25)})}


def export(out: Path) -> None:
    """gradmc's random ``discs-rbm`` models (parameters, DISCS-style starts of 100 chains,
    reference state), one ``NAME.npz`` per entry of :data:`RANDOM_RBMS`."""
    import gradmc
    from gradmc.targets.discs import discs_initial_states

    for name, options in RANDOM_RBMS.items():
        target = gradmc.target("discs-rbm", **options)
        meta = target.metadata
        np.savez(
            out / f"{name}.npz",
            W=np.asarray(meta["weights"], np.float32),
            b_visible=np.asarray(meta["b_visible"], np.float32),
            b_hidden=np.asarray(meta["b_hidden"], np.float32),
            starts=_labels(discs_initial_states(target, 100), meta["num_categories"]),
            reference=_labels(meta["reference"], meta["num_categories"]),
        )
        print(f"wrote {out / name}.npz")


def _labels(positions, num_categories: int) -> np.ndarray:
    """States as DISCS holds them: bits, or the category of each one-hot row."""
    positions = np.asarray(positions)
    return (positions if num_categories == 2 else positions.argmax(-1)).astype(np.int32)


def _stub_unused_imports() -> None:
    """DISCS's ``common/utils.py`` imports clu, flax and its graph loaders at module level;
    the samplers use none of them (only ``copy_pytree``), so empty modules stand in."""
    unused = ("clu", "clu.metric_writers", "clu.metric_writers.summary_writer", "flax", "discs.graph_loader.graph_gen")
    for name in unused:
        sys.modules.setdefault(name, types.ModuleType(name))
    sys.modules["clu.metric_writers.summary_writer"].SummaryWriter = object
    sys.modules["clu"].metric_writers = sys.modules["clu.metric_writers"]
    sys.modules["flax"].struct = types.SimpleNamespace(dataclass=lambda cls: cls)


class RandomRBM:
    """gradmc's random RBM behind DISCS's model interface (``forward``,
    ``get_value_and_grad``, ``get_init_samples``): DISCS's RBM energy with the hidden units
    summed out, log p(v) = Σ_h softplus(vᵀW_h + c_h) + bᵀv, on bits or on one-hot rows of
    C categories (given as labels, they are made one-hot, as DISCS's categorical RBM does)."""

    def __init__(self, path: Path):
        import jax.numpy as jnp

        data = np.load(path)
        self.W, self.b_visible, self.b_hidden = (jnp.asarray(data[k]) for k in ("W", "b_visible", "b_hidden"))
        self.starts, self.reference = jnp.asarray(data["starts"]), jnp.asarray(data["reference"])[None]
        self.num_categories = 2 if self.W.ndim == 2 else int(self.W.shape[-1])
        self.shape = (int(self.b_visible.shape[0]),)

    def make_init_params(self, rng):
        return {}

    def get_init_samples(self, rng, num_samples):
        return self.starts[:num_samples] if num_samples > 1 else self.reference

    def forward(self, params, x):
        import jax

        if self.num_categories == 2:
            x = x.astype(self.W.dtype)
            return jax.numpy.sum(jax.nn.softplus(x @ self.W + self.b_hidden), -1) + x @ self.b_visible
        if x.ndim == 2:  # labels
            x = jax.nn.one_hot(x, self.num_categories)
        x = x.astype(self.W.dtype)
        hidden = jax.numpy.einsum("bic,hic->bh", x, self.W) + self.b_hidden
        return jax.numpy.sum(jax.nn.softplus(hidden), -1) + jax.numpy.sum(x * self.b_visible, (-2, -1))

    def get_value_and_grad(self, params, x):
        import jax

        def total(z):
            values = self.forward(params, z)
            return values.sum(), values

        (_, values), grad = jax.value_and_grad(total, has_aux=True)(x.astype(self.W.dtype))
        return values, grad


def _counts_by_inverse_cdf(rng, log_prob, num_samples):
    """Counts of ``num_samples`` draws with replacement from the categorical distributions
    ``softmax(log_prob)`` along the last axis (a scalar ``num_samples`` ≤ its length): the
    law of DISCS's ``math_util.multinomial`` with ``replacement=True`` and a variable number
    of draws, which takes one categorical draw over all coordinates per iteration of a
    ``while_loop``. Here all draws are made at once by inverting each row's float32 CDF
    (a rounding error of about 6·10⁻⁸ of the row's total per coordinate)."""
    import jax
    import jax.numpy as jnp

    batch_shape, size = log_prob.shape[:-1], log_prob.shape[-1]
    rows = log_prob.reshape(-1, size)
    cdf = jnp.cumsum(jnp.exp(rows - rows.max(-1, keepdims=True)), -1)
    uniforms = jax.random.uniform(rng, rows.shape) * cdf[:, -1:]
    picked = jnp.minimum(jax.vmap(lambda c, u: jnp.searchsorted(c, u, side="right"))(cdf, uniforms), size - 1)
    counted = (jnp.arange(size) < num_samples).astype(jnp.int32)
    counts = jnp.zeros(rows.shape, jnp.int32).at[jnp.arange(rows.shape[0])[:, None], picked].add(counted)
    return counts.reshape(batch_shape + (size,))


def _check_multinomial_law(name: str, multinomial) -> None:
    """Raise unless ``multinomial``'s counts of 5 draws from 6 categories, over 20,000 rows,
    have the multinomial law's mean n p and variance n p (1 - p) (z-scores under 5)."""
    import jax
    import jax.numpy as jnp

    draws, probabilities = 5, np.array([0.5, 0.25, 0.15, 0.07, 0.03, 0.0])  # at most one draw per category
    log_prob = jnp.broadcast_to(jnp.log(jnp.asarray(probabilities)), (20_000, probabilities.size))
    counts = np.asarray(multinomial(jax.random.PRNGKey(1), log_prob, jnp.asarray(draws), True, False), np.float64)
    mean, variance = draws * probabilities, draws * probabilities * (1 - probabilities)
    # the sample variance of a count has variance (μ₄ - var²) / rows, μ₄ the binomial's fourth central moment
    fourth = variance * (1 + 3 * (draws - 2) * probabilities * (1 - probabilities))
    mean_z = (counts.mean(0) - mean) / np.sqrt(np.maximum(variance, 1e-12) / len(counts))
    var_z = (counts.var(0) - variance)[:-1] / np.sqrt((fourth - variance**2)[:-1] / len(counts))
    if not (counts.sum(1) == draws).all() or np.abs(mean_z).max() > 5 or np.abs(var_z).max() > 5:
        raise RuntimeError(f"{name}'s multinomial counts do not follow the law: {mean_z}, {var_z}")


def _use_inverse_cdf_multinomial() -> None:
    """Make DISCS's samplers draw their variable number of categorical draws with
    replacement (adaptive GWG's L moves) by :func:`_counts_by_inverse_cdf`, after
    :func:`_check_multinomial_law` passes for DISCS's routine and this one. DISCS's loop
    makes one draw over all coordinates of every chain per move, so on the Bernoulli and
    FHMM models (10,000 coordinates, L growing during the run) a run takes many hours on a
    CPU."""
    from discs.common import math_util

    original = math_util.multinomial

    def multinomial(rng, log_prob, num_samples, replacement=True, is_nsample_const=True, **options):
        if replacement and not is_nsample_const and not options.get("return_ll", False):
            return _counts_by_inverse_cdf(rng, log_prob, num_samples)
        return original(rng, log_prob, num_samples, replacement, is_nsample_const, **options)

    _check_multinomial_law("DISCS", original)
    _check_multinomial_law("inverse CDF", multinomial)
    math_util.multinomial = multinomial


def run_discs(out: Path, model_name: str, sampler_name: str, steps: int, chains: int) -> dict:
    """One DISCS sampler on one DISCS model under the protocol; saves the kept statistic."""
    import jax
    import jax.numpy as jnp
    from discs.common import configs

    config = configs.get_config()
    config.sampler.update(importlib.import_module(f"discs.samplers.configs.{sampler_name}_config").get_config())
    if model_name in RANDOM_RBMS:
        model = RandomRBM(out / f"{model_name}.npz")
        config.model.update({"name": "rbm", "shape": model.shape, "num_categories": model.num_categories})
    else:
        config_name, options = VARIANTS.get(model_name, (model_name, {}))
        config.model.update(importlib.import_module(f"discs.models.configs.{config_name}_config").get_config())
        config.model.update(options)
        model = importlib.import_module(f"discs.models.{config.model.name}").build_model(config)
    config.experiment.batch_size, config.experiment.chain_length = chains, steps
    sampler = importlib.import_module(f"discs.samplers.{sampler_name}").build_sampler(config)

    root = jax.random.PRNGKey(0)  # Sampling_Experiment.preprocess, num_models = 1
    rng_param, rng_x0, rng_state = jax.random.split(root, num=3)
    params = model.make_init_params(jax.random.split(rng_param, 1))
    x = model.get_init_samples(rng_x0, chains)
    state = sampler.make_init_state(jax.random.split(rng_state, 1))
    reference = model.get_init_samples(jax.random.split(root)[0], 1).reshape(1, -1)

    def step(carry, t):
        x, state, rng = carry
        rng = jax.random.fold_in(rng, t)
        new_x, state, acc = sampler.step(
            model=model, rng=jax.random.split(rng, 1).reshape(-1), x=x, model_param=params, state=state
        )
        statistic = jnp.sum(jnp.abs(new_x.reshape(chains, -1) - reference), -1)
        return (new_x, state, rng), (statistic, jnp.mean(acc))

    scan = jax.jit(lambda carry, ts: jax.lax.scan(step, carry, ts))
    burn_in = int(steps * 0.5) + 1
    began = time.perf_counter()
    carry, _ = jax.jit(step)((x, state, jax.random.PRNGKey(10)), 1)  # the first step fixes the state's dtypes
    carry, _ = scan(carry, jnp.arange(2, burn_in))
    jax.block_until_ready(carry)
    kept_from = time.perf_counter()
    carry, (statistic, acceptance) = scan(carry, jnp.arange(burn_in, steps + 1))
    jax.block_until_ready(statistic)
    finished = time.perf_counter()
    np.save(out / f"{model_name}__{sampler_name}.npy", np.asarray(statistic, np.float32))
    return {
        "model": model_name,
        "sampler": sampler_name,
        "steps": steps,
        "chains": chains,
        "kept_steps": int(statistic.shape[0]),
        "ll_calls": int(np.asarray(carry[1]["num_ll_calls"]).reshape(-1)[0]),
        "acceptance": float(jnp.mean(acceptance)),
        "kept_seconds": finished - kept_from,
        "warmup_seconds": kept_from - began,
    }


def summarize(out: Path) -> dict:
    """ESS per step of every saved run (gradmc's TFP-matching estimator), as JSON."""
    from gradmc.diagnostics.discs import discs_ess

    summary: dict = {}
    for line in (out / "runs.jsonl").read_text().splitlines():
        run = json.loads(line)
        statistic = np.load(out / f"{run['model']}__{run['sampler']}.npy").T  # (chains, kept steps)
        ess = discs_ess(statistic)
        kept = statistic.shape[1]
        summary.setdefault(run["model"], {})[run["sampler"]] = {
            "ess_per_step": round(float(ess.mean()) / kept, 5),
            "ess_per_step_se": round(float(ess.std(ddof=1) / np.sqrt(ess.size)) / kept, 5),
            "acceptance": round(run["acceptance"], 3) if np.isfinite(run["acceptance"]) else None,  # None: NaN
            "ll_calls_per_step": run["ll_calls"] / run["steps"],
        }
        if run.get("inverse_cdf_multinomial"):
            summary[run["model"]][run["sampler"]]["inverse_cdf_multinomial"] = True
    (out / "discs_reference.json").write_text(json.dumps(summary, indent=1) + "\n")
    return summary


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=("export", "run", "summarize"))
    parser.add_argument("out", type=Path, help="directory of the measurements")
    parser.add_argument("--models", default="potts,bernoulli,categorical,fhmm,rbm_random")
    parser.add_argument("--samplers", default="dmala,gwg,path_auxiliary,dlmc")
    parser.add_argument("--steps", type=int, default=10_000)
    parser.add_argument("--chains", type=int, default=100)
    parser.add_argument(
        "--inverse-cdf-multinomial",
        action="store_true",
        help="draw adaptive GWG's L moves at once, in the same law (see _use_inverse_cdf_multinomial)",
    )
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    if args.command == "export":
        export(args.out)
    elif args.command == "run":
        here = Path(__file__).resolve().parent  # its discs.py would shadow DISCS's package
        sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != here]
        _stub_unused_imports()
        if args.inverse_cdf_multinomial:
            _use_inverse_cdf_multinomial()
        for model in args.models.split(","):
            for sampler in args.samplers.split(","):
                record = run_discs(args.out, model, sampler, args.steps, args.chains)
                record["inverse_cdf_multinomial"] = args.inverse_cdf_multinomial
                print(json.dumps(record), flush=True)
                with open(args.out / "runs.jsonl", "a") as log:
                    log.write(json.dumps(record) + "\n")
    else:
        print(json.dumps(summarize(args.out), indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
