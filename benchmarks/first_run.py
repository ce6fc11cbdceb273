"""A first run, as a whole Python process: gradmc's NUTS against NumPyro's on the same model.

Eight schools (non-centred) as a NumPyro model; 4 chains, 1,000 warm-up steps and 1,000
draws. Each side runs in a fresh process, alternating (gradmc, NumPyro) pairs so that the
machine's load falls on both alike:

* gradmc: ``gradmc.sample(gradmc.from_numpyro(model, ...), "nuts", ...)``, with an empty
  compilation cache folder (a true first run; the cache is written, not read);
* NumPyro: ``MCMC(NUTS(model), num_chains=4, chain_method="vectorized").run(...)``.

Reported: the median wall seconds of each process from start to end (imports included), their
ratio, the smallest bulk ESS of each (so that speed is not bought with fewer effective draws),
and for gradmc the share of the run spent in the checks after it (``gradmc.diagnostics.health``).

Usage: ``python benchmarks/first_run.py [--pairs 4]``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

MODEL = """
import numpy as np
import numpyro
import numpyro.distributions as dist

Y = np.array([28.0, 8.0, -3.0, 7.0, -1.0, 1.0, 18.0, 12.0])
SIGMA = np.array([15.0, 10.0, 16.0, 11.0, 9.0, 11.0, 10.0, 18.0])


def schools(sigma, y):
    mu = numpyro.sample("mu", dist.Normal(0.0, 5.0))
    tau = numpyro.sample("tau", dist.HalfCauchy(5.0))
    with numpyro.plate("school", len(sigma)):
        eta = numpyro.sample("eta", dist.Normal(0.0, 1.0))
        numpyro.sample("obs", dist.Normal(mu + tau * eta, sigma), obs=y)
"""

GRADMC = (
    MODEL
    + """
import json, time
import gradmc
from gradmc.diagnostics import ess_stats, health

checks = [0.0]
emit = health.emit_warnings


def timed(*args, **kwargs):
    start = time.perf_counter()
    try:
        return emit(*args, **kwargs)
    finally:
        checks[0] += time.perf_counter() - start


import gradmc.run.sampling as sampling
sampling.emit_warnings = timed
start = time.perf_counter()
trace = gradmc.sample(gradmc.from_numpyro(schools, SIGMA, Y), "nuts", num_chains=4, num_warmup=1000, num_draws=1000,
                      seed=0, progress=False)
run = time.perf_counter() - start
print(json.dumps({"ess": ess_stats(trace.draws)["min"], "checks_s": checks[0], "sample_s": run}))
"""
)

NUMPYRO = (
    MODEL
    + """
import json
import jax
import numpyro
from numpyro.infer import MCMC, NUTS
from gradmc.diagnostics import ess_stats

numpyro.set_host_device_count(1)
mcmc = MCMC(NUTS(schools), num_warmup=1000, num_samples=1000, num_chains=4, chain_method="vectorized",
            progress_bar=False)
mcmc.run(jax.random.key(0), SIGMA, Y)
samples = mcmc.get_samples(group_by_chain=True)
import numpy as np
flat = np.concatenate([np.asarray(samples[k]).reshape(4, 1000, -1) for k in ("mu", "tau", "eta")], axis=-1)
print(json.dumps({"ess": ess_stats(flat)["min"]}))
"""
)


def run(code: str, env: dict) -> tuple[float, dict]:
    """Wall seconds of a fresh process running ``code``, and the JSON it printed last."""
    import time

    start = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    return time.perf_counter() - start, json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=4)
    args = parser.parse_args()
    base = {k: v for k, v in os.environ.items() if k not in ("GRADMC_NO_COMPILE_CACHE", "JAX_COMPILATION_CACHE_DIR")}
    rows = {"gradmc": [], "numpyro": []}
    for pair in range(args.pairs):
        with tempfile.TemporaryDirectory() as cache:
            rows["gradmc"].append(run(GRADMC, {**base, "XDG_CACHE_HOME": cache}))
        rows["numpyro"].append(run(NUMPYRO, base))
        print(
            f"pair {pair + 1}: gradmc {rows['gradmc'][-1][0]:.1f} s, numpyro {rows['numpyro'][-1][0]:.1f} s", flush=True
        )
    wall = {name: statistics.median(t for t, _ in runs) for name, runs in rows.items()}
    ess = {name: statistics.median(r["ess"] for _, r in runs) for name, runs in rows.items()}
    checks = statistics.median(r["checks_s"] / r["sample_s"] for _, r in rows["gradmc"])
    ratio = wall["gradmc"] / wall["numpyro"]
    print(f"median wall s: gradmc {wall['gradmc']:.1f}, numpyro {wall['numpyro']:.1f} (ratio {ratio:.2f})")
    print(f"median min bulk ESS: gradmc {ess['gradmc']:.0f}, numpyro {ess['numpyro']:.0f}")
    print(f"checks after the run: {100 * checks:.1f} % of gradmc.sample's time")


if __name__ == "__main__":
    main()
