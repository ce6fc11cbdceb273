"""What a first run costs beyond its sampling, measured in a fresh process: the XLA
compilations of ``gradmc.from_numpyro`` and whether the checks after the run find ArviZ
loaded (its import takes 1-2 s; it should overlap the run's compilation)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("numpyro")

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
    compilations = 0

    def emit(self, record):
        Count.compilations += "Finished XLA compilation" in record.getMessage()


jax.config.update("jax_log_compiles", True)
logging.getLogger("jax").addHandler(Count())
target = gradmc.from_numpyro(model, np.array([1.2, -0.3, 2.5, 0.7, 0.1]))
compilations = Count.compilations
jax.config.update("jax_log_compiles", False)

loaded = []
checks = sampling.emit_warnings


def recording(trace, entry):
    loaded.append("arviz" in sys.modules)
    return checks(trace, entry)


sampling.emit_warnings = recording
gradmc.sample(target, "nuts", num_chains=2, num_warmup=20, num_draws=20, seed=0, progress=False)
print(json.dumps({"compilations": compilations, "arviz_loaded_for_checks": loaded[0]}))
"""


@pytest.fixture(scope="module")
def first_run():
    env = {**os.environ, "GRADMC_NO_COMPILE_CACHE": "1"}  # compiled here, not read from a cache
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_from_numpyro_searches_the_start_in_one_compiled_loop(first_run):
    # Given a single key, NumPyro evaluates the model operation by operation for its start,
    # each operation compiled on its own (about 80 compilations in all here); a batch of one
    # key compiles one loop beside the prior draw's few operations (29 in all).
    assert first_run["compilations"] < 40, first_run


def test_the_checks_after_a_run_find_arviz_imported(first_run):
    # imported in the background while the run compiles, not after it
    assert first_run["arviz_loaded_for_checks"] is True
