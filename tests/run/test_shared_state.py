"""What a warm-up learns from all chains together is held once, not once per chain: PAVG's M
and PDHAMS's learned W live outside the per-chain state, come back per chain as zero-copy
views, survive chunking and an interrupted run, and keep peak memory independent of the
number of chains times the matrix size.
"""

import subprocess
import sys
import textwrap

import jax
import numpy as np
import pytest

import gradmc
from gradmc.base import Shared
from gradmc.run import loop
from gradmc.run.sampling import RunInterrupted
from gradmc.run.store import RunStore

CHAINS = 4
RUN = dict(num_chains=CHAINS, num_warmup=240, num_draws=60, seed=5, progress=False)


@pytest.fixture(scope="module")
def ising():
    return gradmc.target("discs-ising", shape=4)  # 16 spins


@pytest.fixture(scope="module")
def pavg_reference(ising):
    return gradmc.sample(ising, "pavg", **RUN)


def test_the_warmup_state_holds_the_pooled_model_once(ising):
    bound = gradmc.sampler("pavg").bind(ising, RUN["num_warmup"])
    keys = jax.random.split(jax.random.key(0), CHAINS)
    starts = jax.vmap(ising.space.sample_uniform)(keys)
    states = loop.init_states(bound, keys, starts)
    learning = states.inner.state  # PAVG's learning state, inside the fallback's and the warm-up's wrappers
    assert isinstance(learning.pooled, Shared)
    assert learning.pooled.value.eigvecs.shape == (16, 16)  # no chain axis
    assert learning.kernel.position.shape == (CHAINS, 16)
    assert isinstance(states.judged, Shared)  # the fallback's decision: one for all chains
    step = jax.jit(loop.warmup_step_fn(bound))
    after, _ = step(jax.vmap(jax.random.fold_in, (0, None))(keys, 0), states, 0, None)
    assert after.inner.state.pooled.value.sum_ss.shape == (16, 16)


@pytest.mark.parametrize("name, field", [("pavg", "precond"), pytest.param("v-pdhams", "W", marks=pytest.mark.slow)])
def test_params_show_the_shared_model_per_chain_without_copies(ising, pavg_reference, name, field):
    trace = pavg_reference if name == "pavg" else gradmc.sample(ising, name, **RUN)
    value = trace.params[field]
    matrix = value.matrix if field == "precond" else value
    assert matrix.shape == (CHAINS, 16, 16)
    assert matrix.strides[0] == 0  # one matrix, seen from every chain
    assert np.all(np.isfinite(matrix[0])) and np.abs(matrix[0]).max() > 0  # it was learned
    assert "16x16" in gradmc.report.format_params({field: matrix})


@pytest.mark.slow
def test_chunking_does_not_change_a_pooled_warmup(ising, pavg_reference):
    chunked = gradmc.sample(ising, "pavg", chunk_size=50, **RUN)
    np.testing.assert_array_equal(chunked.indices, pavg_reference.indices)
    np.testing.assert_array_equal(chunked.params["precond"].matrix, pavg_reference.params["precond"].matrix)


@pytest.mark.slow
def test_an_interrupted_pooled_warmup_resumes_identically(ising, pavg_reference, tmp_path, monkeypatch):
    save = RunStore.save_chunk
    calls = []

    def interrupted(self, phase, index, outputs):
        calls.append(index)
        if len(calls) == 3:  # inside the warm-up, after M is fitted (step 120)
            raise KeyboardInterrupt
        return save(self, phase, index, outputs)

    monkeypatch.setattr(RunStore, "save_chunk", interrupted)
    with pytest.raises(RunInterrupted):
        gradmc.sample(ising, "pavg", checkpoint=tmp_path, chunk_size=60, checkpoint_every=1, **RUN)
    monkeypatch.undo()
    resumed = gradmc.sample(ising, "pavg", checkpoint=tmp_path, chunk_size=60, checkpoint_every=1, **RUN)
    np.testing.assert_array_equal(resumed.indices, pavg_reference.indices)


MEMORY_SCRIPT = textwrap.dedent(
    """
    import resource
    import gradmc
    from gradmc.spaces import Categorical
    import jax.numpy as jnp

    k, d = 4, 300  # n = 1,200 one-hot coordinates: M is 1,200 x 1,200 (5.8 MB)
    weights = jnp.linspace(-1.0, 1.0, k * d).reshape(d, k)
    target = gradmc.Target("independent-sites", lambda x: jnp.sum(x * weights), Categorical(k, d))
    run = dict(num_chains=100, num_warmup=240, num_draws=10, progress=False, keep=lambda x: x[0])
    gradmc.sample(target, "ncg", **run)  # imports and the runner's own compilations
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    trace = gradmc.sample(target, "pavg", **run)
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    assert trace.params["precond"].matrix.shape == (100, 1200, 1200)
    print((after - before) * 1024)
    """
)


@pytest.mark.slow
def test_pavg_memory_does_not_grow_with_chains_times_the_matrix():
    increase = int(
        subprocess.run([sys.executable, "-c", MEMORY_SCRIPT], capture_output=True, text=True, check=True).stdout
    )
    per_chain_copies = 100 * 4 * 1200 * 1200 * 4  # M, its root, eigenvectors, second moments in every chain: 2.3 GB
    # held once: a few 5.8 MB matrices, 100 chains x 120 recent moves x 1,200 floats (58 MB), compilation
    assert increase < 640 * 2**20 < per_chain_copies / 3, f"peak grew by {increase / 2**20:.0f} MiB"
