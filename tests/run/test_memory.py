"""A run's peak memory stays close to the size of what it keeps: discrete draws are kept as
one-byte value indices (not float32 one-hot rows), chunks are written into one preallocated
array, and running moments work on bounded blocks.
"""

import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent(
    """
    import resource
    import jax.numpy as jnp
    import gradmc
    from gradmc.spaces import Categorical

    k, d = 4, 2500
    target = gradmc.Target("independent-sites", lambda x: jnp.sum(x * jnp.linspace(-1.0, 1.0, k)), Categorical(k, d))
    gradmc.sample(target, "gibbs", num_chains=4, num_warmup=0, num_draws=10, progress=False)  # imports, first compile
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    trace = gradmc.sample(target, "gibbs", num_chains=4, num_warmup=0, num_draws=15_000, progress=False)
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    assert trace.indices.dtype == "uint8" and trace.indices.shape == (4, 15_000, d)
    print(trace.indices.nbytes, (after - before) * 1024)
    """
)
CONSTANT = 192 * 2**20  # compilation, statistics, one chunk in flight: independent of the number of draws


@pytest.mark.slow  # 15,000 draws of 2,500 categorical sites in a fresh process: about 40 s
def test_peak_memory_is_the_kept_draws_plus_a_constant():
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, check=True).stdout
    kept, increase = map(int, out.split())
    # float32 one-hot draws alone would be 16 x kept (2.3 GB here); float64 moments of one chunk 32 x
    assert increase <= 1.25 * kept + CONSTANT, (
        f"peak grew by {increase / 2**20:.0f} MiB for {kept / 2**20:.0f} MiB kept"
    )
