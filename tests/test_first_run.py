"""What a first run costs beyond its sampling, measured in a fresh process: the XLA
compilations of ``gradmc.from_numpyro`` and of ``gradmc.sample``, and whether the checks
after the run find ArviZ loaded (its import takes 1-2 s; it should overlap the run's
compilation)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("numpyro")
pytestmark = pytest.mark.slow  # a fresh Python process, compiled from an empty cache

SCRIPT = """
import json, logging, sys
import numpy as np
import jax
import numpyro
import numpyro.distributions as dist
import gradmc
import gradmc.run.sampling as sampling


def model(y):
    loc = numpyro.sample("loc", dist.Normal(0.0, 10.0))
    scale = numpyro.sample("scale", dist.HalfNormal(5.0))
    with numpyro.plate("data", len(y)):
        numpyro.sample("obs", dist.StudentT(4.0, loc, scale), obs=y)


class Count(logging.Handler):
    names = []

    def emit(self, record):
        message = record.getMessage()
        if message.startswith("Finished XLA compilation of "):
            Count.names.append(message.split(" of ")[1].split(" in ")[0])


jax.config.update("jax_log_compiles", True)
logging.getLogger("jax").addHandler(Count())
target = gradmc.from_numpyro(model, np.array([1.2, -0.3, 2.5, 0.7, 0.1]))
from_numpyro = list(Count.names)
Count.names.clear()

loaded = []
checks = sampling.emit_warnings


def recording(trace, entry):
    loaded.append("arviz" in sys.modules)
    return checks(trace, entry)


sampling.emit_warnings = recording
gradmc.sample(target, "nuts", num_chains=2, num_warmup=20, num_draws=20, seed=0, progress=False)
print(json.dumps({"from_numpyro": from_numpyro, "sample": Count.names, "arviz_loaded_for_checks": loaded[0]}))
"""


@pytest.fixture(scope="module")
def first_run():
    env = {**os.environ, "GRADMC_NO_COMPILE_CACHE": "1"}  # compiled here, not read from a cache
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_from_numpyro_compiles_no_search_for_a_start(first_run):
    # NumPyro's initialize_model searches a start in a compiled loop (1-2 s); gradmc needs only
    # the model's potential from it, and searches each chain's start in gradmc.sample. What is
    # left are the prior draw's few operations.
    assert len(first_run["from_numpyro"]) < 25, first_run["from_numpyro"]


def test_the_chains_starts_are_one_compiled_program(first_run):
    # vmapped without jit, the starts' search ran operation by operation, each compiled on
    # its own (about 90 compilations); jitted it is one program
    assert first_run["sample"].count("jit(draw_initial)") == 1, first_run["sample"]
    assert len(first_run["sample"]) < 20, first_run["sample"]


def test_the_checks_after_a_run_find_arviz_imported(first_run):
    # imported in the background while the run compiles, not after it
    assert first_run["arviz_loaded_for_checks"] is True
