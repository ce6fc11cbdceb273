"""gradmc: gradient-based MCMC on continuous and discrete spaces, in JAX.

Quick start::

    import gradmc

    target = gradmc.target("banana")
    trace = gradmc.sample(target, "mala", num_chains=4, num_warmup=500, num_draws=1000, seed=0)
    print(gradmc.diagnostics.summary(trace.draws))
    idata = trace.to_arviz()
"""

import warnings

import gradmc.continuous.samplers  # noqa: F401  (registers samplers)
import gradmc.discrete.samplers  # noqa: F401  (registers samplers)
from gradmc import diagnostics, experiments, extended, models, spaces, targets  # noqa: F401  (registers targets and experiments)
from gradmc.base import BoundSampler, PerDatumModel, Sampler, SamplingAlgorithm, StepStats, Target, Truth
from gradmc.diagnostics.health import RunWarning
from gradmc.models import from_function
from gradmc.numpyro_models import from_numpyro
from gradmc.registry import UnknownNameError, sampler, target
from gradmc.registry import samplers as list_samplers
from gradmc.registry import targets as list_targets
from gradmc.run import sample
from gradmc.trace import Trace
from gradmc.variables import Variables

__all__ = [
    "PerDatumModel",
    "RunWarning",
    "Sampler",
    "BoundSampler",
    "SamplingAlgorithm",
    "StepStats",
    "Target",
    "Trace",
    "Truth",
    "UnknownNameError",
    "Variables",
    "from_function",
    "from_numpyro",
    "sample",
    "sampler",
    "list_samplers",
    "list_targets",
    "spaces",
    "target",
    "targets",
    "diagnostics",
    "models",
]

__version__ = "0.1.0"


def __getattr__(name: str):
    """``gradmc.Recipe``: the former name of :class:`~gradmc.base.Sampler` (deprecated).

    Parameters
    ----------
    name : str
        The attribute looked up on the package.
    """
    if name == "Recipe":
        warnings.warn(
            "gradmc.Recipe is deprecated; use gradmc.Sampler (what gradmc.sampler(...) returns)",
            DeprecationWarning,
            stacklevel=2,
        )
        return Sampler
    raise AttributeError(f"module 'gradmc' has no attribute {name!r}")
