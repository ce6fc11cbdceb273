"""Checkpoint/resume (SIGKILL mid-run), bounded-memory options, sharding over devices."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import gradmc

RUN = dict(num_chains=4, num_warmup=60, num_draws=240, seed=3, progress=False, chunk_size=20)

SCRIPT = textwrap.dedent(
    """
    import sys, time, numpy as np, jax.numpy as jnp, gradmc
    from gradmc.base import Target
    from gradmc.spaces import Real

    def slow_logdensity(x):
        return -0.5 * jnp.sum(x ** 2 * jnp.array([1.0, 4.0]))

    target = Target("kill-test", slow_logdensity, Real(2))
    trace = gradmc.sample(target, "mala", num_chains=4, num_warmup=60, num_draws=240, seed=3, progress=False,
                          chunk_size=20, checkpoint=sys.argv[1])
    np.save(sys.argv[2], trace.draws)
    """
)


def _target():
    import jax.numpy as jnp

    from gradmc.base import Target
    from gradmc.spaces import Real

    return Target("kill-test", lambda x: -0.5 * jnp.sum(x**2 * jnp.array([1.0, 4.0])), Real(2))


@pytest.mark.slow
def test_sigkill_then_resume_gives_identical_draws(tmp_path):
    reference = gradmc.sample(_target(), "mala", **RUN)
    ckpt = tmp_path / "ckpt"
    script = tmp_path / "run.py"
    script.write_text(SCRIPT)
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    # 1. a run that is killed once it has saved some (not all) of its draw chunks
    proc = subprocess.Popen([sys.executable, str(script), str(ckpt), str(tmp_path / "a.npy")], env=env)
    deadline = time.time() + 120
    while time.time() < deadline and proc.poll() is None:
        if len(list((ckpt / "chunks").glob("draws_*.npz"))) >= 3 if (ckpt / "chunks").exists() else False:
            break
        time.sleep(0.01)
    if proc.poll() is None:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        killed = True
    else:
        killed = False
    assert (ckpt / "state.npz").exists()
    # 2. the same call again resumes and finishes
    resumed = gradmc.sample(_target(), "mala", checkpoint=ckpt, **RUN)
    np.testing.assert_array_equal(resumed.draws, reference.draws)
    np.testing.assert_array_equal(resumed.stats["acceptance_rate"], reference.stats["acceptance_rate"])
    np.testing.assert_array_equal(resumed.warmup_stats["step_size"], reference.warmup_stats["step_size"])
    assert killed, "the run finished before it could be killed: make it longer"


def test_a_finished_checkpoint_reloads_without_recomputing(tmp_path):
    reference = gradmc.sample(_target(), "rwm", checkpoint=tmp_path, **RUN)
    again = gradmc.sample(_target(), "rwm", checkpoint=tmp_path, **RUN)
    np.testing.assert_array_equal(again.draws, reference.draws)
    np.testing.assert_array_equal(again.warmup_stats["acceptance_rate"], reference.warmup_stats["acceptance_rate"])
    assert again.timing == reference.timing  # everything came back from disk, timings included


def test_checkpoint_from_another_configuration_is_refused(tmp_path):
    gradmc.sample(_target(), "rwm", checkpoint=tmp_path, **RUN)
    with pytest.raises(ValueError, match=r"different configuration.*num_draws"):
        gradmc.sample(_target(), "rwm", checkpoint=tmp_path, **{**RUN, "num_draws": 100})
    assert json.loads((tmp_path / "run.json").read_text())["sampler"] == "rwm"


def test_keep_and_running_moments(corr_gaussian):
    full = gradmc.sample(corr_gaussian, "rwm", **RUN)
    first = gradmc.sample(corr_gaussian, "rwm", keep=lambda x: x[:1], **RUN)
    np.testing.assert_array_equal(first.draws, full.draws[..., :1])
    lean = gradmc.sample(corr_gaussian, "rwm", keep_draws=False, **RUN)
    assert lean.draws is None
    np.testing.assert_allclose(lean.moments["mean"], full.draws.mean(axis=1), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(lean.moments["var"], full.draws.var(axis=1, ddof=1), rtol=1e-4)


MULTI_DEVICE = textwrap.dedent(
    """
    import jax, numpy as np, gradmc
    assert len(jax.devices()) == 4, jax.devices()
    target = gradmc.target("gaussian-2d-corr")
    for name in ("mala", "nuts"):
        kw = dict(num_chains=8, num_warmup=50, num_draws=50, seed=1, progress=False)
        one = gradmc.sample(target, name, devices=jax.devices()[:1], **kw)
        four = gradmc.sample(target, name, **kw)
        np.testing.assert_array_equal(one.draws, four.draws)
    print("identical")
    """
)


@pytest.mark.slow
def test_sharded_over_four_cpu_devices_matches_one_device(tmp_path):
    """Bit-identical with FMA contraction off (``--xla_cpu_max_isa=AVX``): with FMA, XLA's
    CPU code rounds differently for different per-device batch widths (last-ulp changes
    that a chain then amplifies), so the guarantee needs that flag on CPU."""
    script = tmp_path / "multi.py"
    script.write_text(MULTI_DEVICE)
    env = {
        **os.environ,
        "XLA_FLAGS": "--xla_force_host_platform_device_count=4 --xla_cpu_max_isa=AVX",
        "JAX_PLATFORMS": "cpu",
    }
    out = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "identical" in out.stdout


def test_streamed_run_assembles_a_complete_arviz_trace(tmp_path, corr_gaussian):
    import arviz as az

    full = gradmc.sample(corr_gaussian, "rwm", **RUN)
    lean = gradmc.sample(corr_gaussian, "rwm", keep_draws=False, checkpoint=tmp_path / "c", **RUN)
    path = lean.save_netcdf(tmp_path / "trace.nc")
    idata = az.from_netcdf(path)
    np.testing.assert_array_equal(idata.posterior["x"].values, full.draws)
    np.testing.assert_array_equal(idata.sample_stats["acceptance_rate"].values, full.stats["acceptance_rate"])


MULTI_HOST = textwrap.dedent(
    """
    import sys, jax
    rank, port, out = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    jax.distributed.initialize(coordinator_address=f"127.0.0.1:{port}", num_processes=2, process_id=rank)
    import gradmc
    trace = gradmc.sample(gradmc.target("gaussian-2d-corr"), "mala", num_chains=8, num_warmup=40, num_draws=60,
                          seed=2, progress=False)
    assert trace.draws.shape[0] == 4 and trace.first_chain == 4 * rank
    trace.save_netcdf(f"{out}/shard{rank}.nc")
    """
)


@pytest.mark.slow
def test_two_processes_on_loopback_merge_to_the_single_process_run(tmp_path):
    import socket

    import arviz as az

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    script = tmp_path / "host.py"
    script.write_text(MULTI_HOST)
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "XLA_FLAGS": "--xla_cpu_max_isa=AVX"}
    procs = [
        subprocess.Popen(
            [sys.executable, str(script), str(r), str(port), str(tmp_path)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for r in (0, 1)
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err[-3000:]
    from gradmc.cli import main

    assert main(["merge", str(tmp_path / "merged.nc"), str(tmp_path / "shard1.nc"), str(tmp_path / "shard0.nc")]) == 0
    merged = az.from_netcdf(tmp_path / "merged.nc").posterior["x"].values
    single = subprocess.run(
        [
            sys.executable,
            "-c",
            "import gradmc, numpy as np, sys; t = gradmc.sample(gradmc.target('gaussian-2d-corr'), 'mala', "
            "num_chains=8, num_warmup=40, num_draws=60, seed=2, progress=False); np.save(sys.argv[1], t.draws)",
            str(tmp_path / "one.npy"),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert single.returncode == 0, single.stderr[-2000:]
    np.testing.assert_array_equal(merged, np.load(tmp_path / "one.npy"))


MEMORY_RUN = textwrap.dedent(
    """
    import sys, numpy as np, gradmc
    mode, draws, folder = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    target = gradmc.target("gaussian", dim=100)
    kw = dict(num_chains=200, num_warmup=0, num_draws=draws, seed=0, progress=False, chunk_size=100)
    sampler = gradmc.sampler("rwm", adapt=None)
    gradmc.sample(target, sampler, **{**kw, "num_draws": 100})  # imports and compilation, before the measurement

    def rss(field):
        for line in open("/proc/self/status"):
            if line.startswith(field):
                return int(line.split()[1]) * 1024

    open("/proc/self/clear_refs", "w").write("5")  # reset the peak (VmHWM) to the current RSS
    start = rss("VmRSS")
    if mode == "stream":
        trace = gradmc.sample(target, sampler, keep_draws=False, checkpoint=folder, **kw)
        trace.save_netcdf(folder + "/trace.nc")
    else:
        trace = gradmc.sample(target, sampler, **kw)
    print(rss("VmHWM") - start)
    """
)


@pytest.mark.slow  # four processes that each import JAX and compile: about a minute
def test_streaming_run_has_bounded_peak_memory(tmp_path):
    """Peak resident memory must not grow with the run's length when draws stream to disk.

    200 chains x 100 coordinates, chunks of 100 draws (8 MB). Going from 200 to 2,000 draws
    adds 144 MB of float32 draws: the in-memory run must grow by that less the noise allowance
    (so the test can fail), the streamed run by less than the noise allowance, 40 MB (a few
    chunks in flight and the per-draw statistics, 7 scalars per chain and draw). A peak only
    errs upwards (allocator arenas, a busy machine), so a difference of two peaks can err by
    the allowance either way; a measurement outside its bound is repeated once.
    """
    import arviz as az

    if not os.access("/proc/self/clear_refs", os.W_OK):
        pytest.skip("needs Linux /proc/self/clear_refs to measure the peak of one run")
    script = tmp_path / "mem.py"
    script.write_text(MEMORY_RUN)
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}

    def peak(mode, draws):
        folder = tmp_path / f"{mode}{draws}"
        out = subprocess.run(
            [sys.executable, str(script), mode, str(draws), str(folder)],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert out.returncode == 0, out.stderr[-2000:]
        return int(out.stdout.strip().splitlines()[-1])

    allowance = 40e6
    added_draws = 200 * 1800 * 100 * 4
    # peak memory of the run itself, above the process's resident memory when it starts
    growth_memory = peak("memory", 2000) - peak("memory", 200)
    if growth_memory < added_draws - allowance:
        growth_memory = max(growth_memory, peak("memory", 2000) - peak("memory", 200))
    growth_stream = peak("stream", 2000) - peak("stream", 200)
    if growth_stream >= allowance:  # a real leak repeats
        growth_stream = min(growth_stream, peak("stream", 2000) - peak("stream", 200))
    assert growth_memory >= added_draws - allowance, f"in-memory run grew only {growth_memory / 1e6:.0f} MB"
    assert growth_stream < allowance, f"streamed run grew {growth_stream / 1e6:.0f} MB with 10x the draws"
    posterior = az.from_netcdf(tmp_path / "stream2000" / "trace.nc").posterior["x"]
    assert posterior.shape == (200, 2000, 100) and np.isfinite(posterior.values[:, -1]).all()


# -- Ctrl-C and damaged checkpoints ------------------------------------------------------------


@pytest.fixture(scope="module")
def mala_reference():
    """The uninterrupted run the interrupted and repaired ones must reproduce."""
    return gradmc.sample(_target(), "mala", **RUN)


def _interrupt_at_save(monkeypatch, number: int) -> None:
    """Make the ``number``-th chunk save (counting from 1) raise ``KeyboardInterrupt``, as Ctrl-C would."""
    from gradmc.run.store import RunStore

    save = RunStore.save_chunk
    calls = []

    def interrupted(self, phase, index, outputs):
        calls.append((phase, index))
        if len(calls) == number:
            raise KeyboardInterrupt
        return save(self, phase, index, outputs)

    monkeypatch.setattr(RunStore, "save_chunk", interrupted)


def test_ctrl_c_leaves_a_consistent_checkpoint_that_resumes_identically(tmp_path, monkeypatch, mala_reference):
    from gradmc.run.sampling import RunInterrupted

    ckpt = tmp_path / "ckpt"
    _interrupt_at_save(monkeypatch, 5)  # 3 warm-up chunks of 20, then the second draw chunk
    with pytest.raises(RunInterrupted) as stop:
        gradmc.sample(_target(), "mala", checkpoint=ckpt, **RUN)
    assert (stop.value.done, stop.value.total, stop.value.checkpoint) == (80, 300, ckpt)
    assert isinstance(stop.value, KeyboardInterrupt)
    assert not list(ckpt.rglob("*.tmp"))  # no half-written file is left behind
    monkeypatch.undo()
    from gradmc.run import sampling

    traced = []  # the chunks reloaded are read with one trace of the chunk per phase and length
    template = sampling._Phase.output_template
    monkeypatch.setattr(sampling._Phase, "output_template", lambda self, *a: traced.append(a[1:]) or template(self, *a))
    resumed = gradmc.sample(_target(), "mala", checkpoint=ckpt, **RUN)
    np.testing.assert_array_equal(resumed.draws, mala_reference.draws)
    assert traced == [(20,), (20,)]  # 3 warm-up chunks and 1 draw chunk reloaded


def test_ctrl_c_in_a_one_program_run_resumes_identically(tmp_path, monkeypatch):
    """NUTS runs its kept draws as frozen warm-up steps; its checkpoint holds those states."""
    reference = gradmc.sample(_target(), "nuts", **RUN)
    ckpt = tmp_path / "ckpt"
    _interrupt_at_save(monkeypatch, 5)  # 3 warm-up chunks of 20, then the second draw chunk
    with pytest.raises(KeyboardInterrupt):
        gradmc.sample(_target(), "nuts", checkpoint=ckpt, **RUN)
    monkeypatch.undo()
    resumed = gradmc.sample(_target(), "nuts", checkpoint=ckpt, **RUN)
    np.testing.assert_array_equal(resumed.draws, reference.draws)
    np.testing.assert_array_equal(resumed.params["step_size"], reference.params["step_size"])


def test_ctrl_c_without_a_checkpoint_says_nothing_was_saved(monkeypatch):
    from gradmc.run import sampling

    collect = sampling._PhaseRunner.collect

    def interrupted(self, name, out):
        if name == sampling.DRAWS:
            raise KeyboardInterrupt
        return collect(self, name, out)

    monkeypatch.setattr(sampling._PhaseRunner, "collect", interrupted)
    with pytest.raises(sampling.RunInterrupted) as stop:
        gradmc.sample(_target(), "rwm", **{**RUN, "chunk_size": None})
    assert (stop.value.done, stop.value.total, stop.value.checkpoint) == (60, 300, None)
    assert "interrupted after 60 of 300 steps; nothing was saved" in str(stop.value)


def test_a_damaged_chunk_after_the_saved_state_is_recomputed(tmp_path, monkeypatch, mala_reference):
    """With a state every 4 chunks, draw chunk 4 lies after the last state (chunks 0-3): a damaged
    copy of it is redone, not read."""
    from gradmc.run.sampling import RunInterrupted
    from gradmc.trace import chunk_file

    ckpt = tmp_path / "ckpt"
    _interrupt_at_save(monkeypatch, 9)  # after draw chunks 0-4 are saved
    with pytest.raises(RunInterrupted):
        gradmc.sample(_target(), "mala", checkpoint=ckpt, checkpoint_every=4, **RUN)
    monkeypatch.undo()
    damaged = chunk_file(ckpt, "draws", 4)
    assert damaged.exists()
    damaged.write_bytes(damaged.read_bytes()[:100])
    resumed = gradmc.sample(_target(), "mala", checkpoint=ckpt, checkpoint_every=4, **RUN)
    np.testing.assert_array_equal(resumed.draws, mala_reference.draws)


def _damage_state(ckpt):
    path = ckpt / "state.npz"
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    return path


def _empty_chunk(ckpt):
    from gradmc.trace import chunk_file

    path = chunk_file(ckpt, "draws", 3)
    path.write_bytes(b"")
    return path


def _garbage_run_json(ckpt):
    path = ckpt / "run.json"
    path.write_text("{not json")
    return path


@pytest.mark.parametrize("damage", [_damage_state, _empty_chunk, _garbage_run_json])
def test_a_damaged_checkpoint_is_named_and_restart_recovers(tmp_path, damage, mala_reference):
    ckpt = tmp_path / "ckpt"
    gradmc.sample(_target(), "mala", checkpoint=ckpt, **RUN)
    path = damage(ckpt)
    with pytest.raises(ValueError, match="--restart") as error:
        gradmc.sample(_target(), "mala", checkpoint=ckpt, **RUN)
    assert f"checkpoint file {path} is damaged" in str(error.value)
    again = gradmc.sample(_target(), "mala", checkpoint=ckpt, restart=True, **RUN)
    np.testing.assert_array_equal(again.draws, mala_reference.draws)
    assert gradmc.sample(_target(), "mala", checkpoint=ckpt, **RUN).timing == again.timing  # a sound checkpoint again


def test_a_checkpoint_path_that_is_a_file_is_refused(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("mine")
    for restart in (False, True):
        with pytest.raises(ValueError, match="is a file, not a folder"):
            gradmc.sample(_target(), "rwm", checkpoint=path, restart=restart, **RUN)
    assert path.read_text() == "mine"


def test_restart_discards_only_what_runs_stored(tmp_path):
    from gradmc.run.store import discard_checkpoint

    gradmc.sample(_target(), "rwm", checkpoint=tmp_path, **RUN)
    (tmp_path / "notes.txt").write_text("mine")
    discard_checkpoint(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


@pytest.mark.slow
def test_ctrl_c_in_a_mixed_model_s_judged_warm_up_resumes_identically(tmp_path, monkeypatch):
    """A composed sampler's state (each block's, and the mode shift's trial: its counts, each
    chain's place before the trial and its log-density levels) survives a checkpoint taken
    inside the trial (warm-up steps 50 .. 74)."""
    import jax.numpy as jnp

    from gradmc.spaces import Binary

    rng = np.random.default_rng(0)
    X = jnp.asarray(rng.normal(size=(40, 4)), jnp.float32)
    y = X @ jnp.array([1.5, 0.0, -1.0, 0.0]) + 0.5 * jnp.asarray(rng.normal(size=40), jnp.float32)

    def log_p(p):
        beta, gamma = p["beta"], p["gamma"]
        spread = jnp.where(gamma == 1, 2.0, 0.1)  # compared with: a Gibbs block, beside the mode shift's trial
        return jnp.sum(-0.5 * (beta / spread) ** 2 - jnp.log(spread)) - 2 * jnp.sum((y - X @ beta) ** 2)

    run = dict(RUN, num_chains=2, num_warmup=100, num_draws=100)
    kwargs = dict(init={"beta": jnp.zeros(4), "gamma": jnp.zeros(4)}, space={"gamma": Binary(4)}, **run)
    reference = gradmc.sample(log_p, "auto", **kwargs)
    assert reference.options["joint"]["when"] == "judged"
    ckpt = tmp_path / "ckpt"
    _interrupt_at_save(monkeypatch, 4)  # the warm-up chunk of steps 60 .. 79
    with pytest.raises(KeyboardInterrupt):
        gradmc.sample(log_p, "auto", checkpoint=ckpt, **kwargs)
    monkeypatch.undo()
    resumed = gradmc.sample(log_p, "auto", checkpoint=ckpt, **kwargs)
    np.testing.assert_array_equal(resumed.draws, reference.draws)
    np.testing.assert_array_equal(resumed.params["joint"], reference.params["joint"])
