"""gradmc: gradient-based MCMC on continuous and discrete spaces, in JAX.

Quick start::

    import gradmc
    target = gradmc.target("banana")
    trace = gradmc.sample(target, "mala", num_chains=4, num_warmup=500, num_draws=1000, seed=0)
    print(gradmc.diagnostics.summary(trace.draws))
    idata = trace.to_arviz()
"""

from gradmc import spaces
from gradmc.base import PerDatumModel, Recipe, Sampler, SamplingAlgorithm, StepStats, Target, Truth
from gradmc import diagnostics, experiments, extended, targets  # noqa: F401  (registers targets and experiments)
from gradmc.continuous import am, ct_hmc, equi_energy, gad, hmc, mala, parallel_tempering, ram, rwm, sgld, simulated_tempering  # noqa: F401,E501  (registers samplers)
from gradmc.discrete import avg, block_gibbs, gibbs, gwg, hams, ncg, pavg, uniform  # noqa: F401  (registers samplers)
from gradmc.registry import UnknownNameError, sampler, target
from gradmc.registry import samplers as list_samplers
from gradmc.registry import targets as list_targets
from gradmc.run import sample
from gradmc.trace import Trace

__all__ = [
    "PerDatumModel",
    "Recipe",
    "Sampler",
    "SamplingAlgorithm",
    "StepStats",
    "Target",
    "Trace",
    "Truth",
    "UnknownNameError",
    "sample",
    "sampler",
    "list_samplers",
    "list_targets",
    "spaces",
    "target",
    "targets",
    "diagnostics",
]

__version__ = "0.1.0"
