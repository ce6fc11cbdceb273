"""The gradmc command: list, sample, compare, reproduce, merge; exit codes on bad input."""

import json

import numpy as np
import pytest

from gradmc import registry
from gradmc.cli import main
from gradmc.reproduce import run_all

SMALL = ["--chains", "2", "--warmup", "30", "--draws", "40", "--no-progress"]


def test_list_shows_targets_samplers_and_experiments(capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    assert "targets:" in out and "banana" in out and "samplers:" in out and "nuts" in out and "experiments:" in out


def test_sample_prints_summary_and_writes_trace_and_plots(tmp_path, capsys):
    assert (
        main(["sample", "banana", "--sampler", "mala", "--option", "target_accept=0.6", "--out", str(tmp_path), *SMALL])
        == 0
    )
    out = capsys.readouterr().out
    assert "ess_bulk" in out and "r_hat" in out and "acceptance" in out
    import arviz as az

    idata = az.from_netcdf(tmp_path / "trace.nc")
    assert idata.posterior["x"].shape == (2, 40, 2)
    assert (tmp_path / "trace.png").exists() and (tmp_path / "pairs.png").exists()


@pytest.mark.slow
def test_sample_extended_resamples_back_to_the_target(tmp_path, capsys):
    """--extended N runs the pseudo-extended target and reports the importance weights' ESS."""
    argv = [
        "sample",
        "banana",
        "--sampler",
        "nuts",
        "--extended",
        "2",
        "--extended-option",
        "beta_bounds=[0.1,1]",
        "--out",
        str(tmp_path),
        *SMALL,
    ]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "pseudo-extended, N = 2: importance-weight ESS" in out and "of 160 particles" in out
    import arviz as az

    assert az.from_netcdf(tmp_path / "trace.nc").posterior["x"].shape == (
        2,
        40,
        2,
    )  # draws of the target, not particles


def test_compare_table_and_figures(tmp_path, capsys):
    assert main(["compare", "banana", "--samplers", "rwm,mala", "--out", str(tmp_path), *SMALL]) == 0
    out = capsys.readouterr().out
    assert "min_ess_per_s" in out and "ess_per_grad" in out and "mean_err" in out
    rows = json.loads((tmp_path / "table.json").read_text())
    assert [r["sampler"] for r in rows] == ["rwm", "mala"]
    assert rows[0]["ess_per_grad"] is None and "NaN" not in (tmp_path / "table.json").read_text()  # JSON, no NaN
    assert (tmp_path / "compare.png").exists() and (tmp_path / "draws.png").exists()


def test_compare_with_checkpoint_resumes_identically(tmp_path, capsys):
    args = ["compare", "gaussian-2d-corr", "--samplers", "rwm", "--checkpoint", str(tmp_path / "ck"), *SMALL]
    assert main([*args, "--out", str(tmp_path / "a")]) == 0
    assert main([*args, "--out", str(tmp_path / "b")]) == 0
    a, b = (json.loads((tmp_path / x / "table.json").read_text())[0] for x in "ab")
    assert a["ess_min"] == b["ess_min"] and a["mean_err"] == b["mean_err"]
    assert any((tmp_path / "ck").iterdir())


@pytest.mark.parametrize(
    "argv, message",
    [
        (["sample", "no-such-target", "--sampler", "mala"], "valid targets"),
        (["sample", "banana", "--sampler", "no-such-sampler"], "valid samplers"),
        (["compare", "banana", "--samplers", "rwm,nope"], "valid samplers"),
        (["reproduce", "no-such-experiment"], "valid experiments"),
        (["sample", "banana", "--sampler", "mala", "--option", "bogus=1"], "has no option"),
        (["sample", "banana", "--sampler", "mala", "--chains", "0"], "num_chains"),
        (["sample", "banana", "--sampler", "nuts", "--extended", "0"], "pseudo-samples N"),
        (["sample", "banana", "--sampler", "nuts", "--extended-option", "beta_bounds=[0.1,1]"], "needs --extended"),
        (["sample", "banana", "--sampler", "mala", "--draws", "3"], "at least 4 draws per chain"),
        (["compare", "banana", "--samplers", "rwm", "--draws", "1"], "at least 4 draws per chain"),
        (["compare", "banana", "--samplers", "rwm", "--option", "mala.step_size=1"], "not among --samplers"),
        (["compare", "banana", "--samplers", "rwm", "--option", "step_size=1"], "SAMPLER.KEY=VALUE"),
        (["compare", "banana", "--samplers", "rwm,mala", "--option", "mala.bogus=1"], "has no option"),
        (["sample", "banana", "--sampler", "mala", "--restart"], "--restart discards a checkpoint"),
        (["sample", "banana", "--sampler", "mala", "--dim", "3"], "--dim applies to a model"),
        (["describe", "no-such-sampler"], "valid samplers"),
        (["sample", "banan", "--sampler", "mala"], "did you mean 'banana'?"),
        (["sample", "banana", "--sampler", "nut"], "did you mean 'nuts'?"),
        (["sample", "banana", "--sampler", "mala", "--option", "step_sise=0.1"], "did you mean 'step_size'?"),
    ],
)
def test_bad_names_and_arguments_exit_2(argv, message, capsys):
    assert main(argv) == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("flag", ["--out", "--checkpoint"])
@pytest.mark.parametrize("command", [["sample", "banana", "--sampler", "mala"], ["compare", "banana"]])
def test_a_folder_that_cannot_be_written_fails_before_sampling(tmp_path, capsys, monkeypatch, command, flag):
    import gradmc

    monkeypatch.setattr(gradmc, "sample", lambda *a, **k: pytest.fail("sampled before checking the folders"))
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    assert main([*command, flag, str(blocker / "sub"), *SMALL]) == 2
    assert f"{flag} {blocker / 'sub'}: cannot write there" in capsys.readouterr().err
    assert main([*command, flag, str(blocker), *SMALL]) == 2
    assert f"{flag} {blocker} is a file, not a folder" in capsys.readouterr().err


def test_version(capsys):
    import gradmc

    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out.strip() == f"gradmc {gradmc.__version__}"


def test_describe_shows_every_option_with_default_and_meaning(capsys):
    assert main(["describe", "hmc"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("hmc [continuous]: ")
    assert "num_integration_steps = 10  (int)\n      Leapfrog steps per trajectory." in out
    assert "target_accept = 0.8" in out and "dense_mass = False" in out


def test_list_options_shows_the_options_of_every_sampler(capsys):
    assert main(["list", "--options"]) == 0
    out = capsys.readouterr().out
    assert "num_integration_steps = 10" in out and "scan = 'random'" in out


def test_a_sampler_option_without_its_meaning_is_refused():
    def build(target, num_warmup, step_size=0.1, radius=2):
        """A toy."""

    with pytest.raises(ValueError, match=r"say what option\(s\) \['radius'\] mean"):
        registry.register_sampler("toy-unexplained", "a toy", options={"step_size": "The step."})(build)
    assert "toy-unexplained" not in {e.name for e in registry.samplers()}
    for entry in registry.samplers():
        assert [o.name for o in registry.sampler_options(entry.name)] == list(entry.options)


@pytest.mark.parametrize(
    "name, former, current",
    [
        ("rwm", "cov", "preconditioner"),
        ("parallel-tempering", "num_leapfrog_steps", "num_integration_steps"),
        ("simulated-tempering", "num_leapfrog_steps", "num_integration_steps"),
    ],
)
def test_former_option_names_still_work_with_a_deprecation_warning(name, former, current):
    with pytest.warns(DeprecationWarning, match=f"{former!r} is deprecated; use {current!r}"):
        recipe = registry.sampler(name, **{former: 3})
    assert recipe.options == {current: 3}
    with pytest.raises(TypeError, match=f"give {current} only"):
        registry.sampler(name, **{former: 3, current: 3})


def test_compare_options_go_to_their_sampler(monkeypatch, capsys):
    import gradmc
    import gradmc.compare

    given = []

    def stop(target, recipes, **budget):
        given.extend((r.name, r.options) for r in recipes)
        raise ValueError("stop here")

    monkeypatch.setattr(gradmc.compare, "compare", stop)
    argv = ["compare", "banana", "--samplers", "rwm,hmc", "--option", "hmc.num_integration_steps=3"]
    assert main([*argv, "--option", "rwm.cov=[[1.0,0.0],[0.0,1.0]]", *SMALL]) == 2
    assert given == [("rwm", {"preconditioner": [[1.0, 0.0], [0.0, 1.0]]}), ("hmc", {"num_integration_steps": 3})]
    assert "gradmc: warning: sampler 'rwm': option 'cov' is deprecated; use 'preconditioner'" in capsys.readouterr().err


def test_run_warnings_print_one_line_each(tmp_path, monkeypatch, capsys):
    import dataclasses
    import warnings

    import gradmc
    from gradmc.diagnostics.health import RunWarning

    sample = gradmc.sample

    def with_warning(*args, **kwargs):
        trace = sample(*args, **kwargs)
        warnings.warn("mala: chains disagree", RunWarning, stacklevel=1)
        return dataclasses.replace(trace, warnings=["mala: chains disagree"])

    monkeypatch.setattr(gradmc, "sample", with_warning)
    assert main(["sample", "gaussian-2d-corr", "--sampler", "mala", "--out", str(tmp_path), *SMALL]) == 0
    err = capsys.readouterr().err
    assert err.count("chains disagree") == 1 and "gradmc: warning: mala: chains disagree" in err


def _interrupt_second_draw_chunk(monkeypatch):
    from gradmc.run.store import RunStore

    save = RunStore.save_chunk

    def interrupted(self, phase, index, outputs):
        if phase == "draws" and index == 1:
            raise KeyboardInterrupt
        return save(self, phase, index, outputs)

    monkeypatch.setattr(RunStore, "save_chunk", interrupted)


@pytest.mark.slow  # two runs of the command line
def test_ctrl_c_exits_130_and_the_same_command_resumes(tmp_path, monkeypatch, capsys):
    import arviz as az

    argv = ["sample", "gaussian-2d-corr", "--sampler", "mala", *SMALL]
    assert main([*argv, "--out", str(tmp_path / "whole")]) == 0
    again = [*argv, "--out", str(tmp_path / "resumed"), "--checkpoint", str(tmp_path / "ck")]
    _interrupt_second_draw_chunk(monkeypatch)
    assert main(again) == 130
    err = capsys.readouterr().err
    assert "gradmc: mala on gaussian-2d-corr: interrupted after 32 of 70 steps; rerun the same command to resume" in err
    assert "Traceback" not in err
    monkeypatch.undo()
    assert main(again) == 0
    whole, resumed = (az.from_netcdf(tmp_path / x / "trace.nc").posterior["x"].values for x in ("whole", "resumed"))
    np.testing.assert_array_equal(resumed, whole)
    assert main([*again, "--restart"]) == 0


def test_ctrl_c_without_checkpoint_says_how_to_keep_one(tmp_path, monkeypatch, capsys):
    from gradmc.run import sampling

    def interrupted(self, name, out):
        raise KeyboardInterrupt

    monkeypatch.setattr(sampling._PhaseRunner, "collect", interrupted)
    assert main(["sample", "banana", "--sampler", "rwm", "--out", str(tmp_path), *SMALL]) == 130
    err = capsys.readouterr().err
    assert "interrupted after 0 of 70 steps; nothing was saved (with --checkpoint DIR" in err


@registry.register_experiment("test-ok", "a tiny experiment used by the test suite")
def _ok(*, out, full, seed, progress):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.plot(np.arange(3))
    plt.savefig(out / "line.png")
    plt.close()
    return f"| ours | paper |\n|---|---|\n| {seed} | 1 |"


@registry.register_experiment("test-broken", "an experiment that raises, used by the test suite")
def _broken(*, out, full, seed, progress):
    raise RuntimeError("deliberate failure")


def test_report_shows_results_figures_and_failures(tmp_path):
    index = run_all(tmp_path, names=["test-ok", "test-broken"], seed=7, progress=False)
    text = (tmp_path / "index.md").read_text()
    assert "| 7 | 1 |" in text and "test-ok/line.png" in text
    assert "FAILED" in text and "deliberate failure" in text
    page = index.read_text()
    assert "<table>" in page and "<img" in page and "jax" in page


MODEL_FILE = """
import jax.numpy as jnp
import numpyro
import numpyro.distributions as dist


def log_p(x):
    return -0.5 * jnp.sum((x - 1.0) ** 2)


def potts(x):  # one-hot rows of a 2x2 periodic lattice, 3 states
    grid = x.reshape(2, 2, 3)
    return 0.3 * (jnp.sum(grid * jnp.roll(grid, 1, axis=0)) + jnp.sum(grid * jnp.roll(grid, 1, axis=1)))


def schools(y, sigma):
    mu = numpyro.sample("mu", dist.Normal(0.0, 5.0))
    tau = numpyro.sample("tau", dist.HalfCauchy(5.0))
    with numpyro.plate("school", len(sigma)):
        eta = numpyro.sample("eta", dist.Normal(0.0, 1.0))
        theta = numpyro.deterministic("theta", mu + tau * eta)
        numpyro.sample("obs", dist.Normal(theta, sigma), obs=y)
"""


@pytest.fixture(scope="module")
def model_file(tmp_path_factory):
    folder = tmp_path_factory.mktemp("user-model")
    (folder / "model.py").write_text(MODEL_FILE)
    y, sigma = [28.0, 8.0, -3.0, 7.0, -1.0, 1.0, 18.0, 12.0], [15.0, 10.0, 16.0, 11.0, 9.0, 11.0, 10.0, 18.0]
    np.savez(folder / "schools.npz", y=np.array(y), sigma=np.array(sigma))
    return folder


@pytest.mark.parametrize(
    ("spec", "extra", "sampler", "names"),
    [
        ("log_p", ["--dim", "3"], "mala", {"x"}),
        ("log_p", ["--dim", "3"], None, {"x"}),  # no --sampler: auto, NUTS on a real target
        ("potts", ["--space", "categorical:3x4"], "gwg", {"x"}),
        pytest.param(
            "schools", ["--data", "schools.npz"], "nuts", {"mu", "tau", "eta", "theta"}, marks=pytest.mark.slow
        ),
    ],
)
def test_sample_runs_a_user_model_file(model_file, tmp_path, capsys, spec, extra, sampler, names):
    """``gradmc sample path/model.py:NAME``: a function with --dim or --space, a NumPyro model with
    --data; the summary and the trace file carry the model's names (constrained for NumPyro)."""
    extra = [str(model_file / e) if e.endswith(".npz") else e for e in extra]
    chosen = [] if sampler is None else ["--sampler", sampler]
    argv = ["sample", f"{model_file / 'model.py'}:{spec}", *extra, *chosen, "--out", str(tmp_path), *SMALL]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"{sampler or 'nuts'} on ")
    import arviz as az

    posterior = az.from_netcdf(tmp_path / "trace.nc").posterior
    assert set(posterior.data_vars) == names
    if spec == "schools":
        lines = out.splitlines()
        header = next(i for i, line in enumerate(lines) if line.split()[:2] == ["name", "mean"])
        rows = [line.split()[0] for line in lines[header + 1 : header + 11]]
        assert rows[:2] == ["mu", "tau"]  # scalars first, then the worst-converged entries of eta and theta
        assert {row.split("[")[0] for row in rows[2:]} <= {"eta", "theta"}
        assert float(posterior["tau"].min()) > 0 and posterior["theta"].shape == (2, 40, 8)
    if spec == "potts":  # categorical draws written as labels
        assert posterior["x"].shape == (2, 40, 4) and set(np.unique(posterior["x"])) <= {0, 1, 2}


def test_a_ctrl_c_while_the_finished_command_exits_is_ignored(tmp_path):
    """The console script ignores a Ctrl-C that arrives as Python shuts down after the command
    (here sent by the last exit handler): the exit status is the command's, with no stray
    ``KeyboardInterrupt`` report. Plain ``sys.exit(main())`` prints "Exception ignored" there.
    """
    import subprocess
    import sys

    script = tmp_path / "late_interrupt.py"
    script.write_text(
        "import atexit, os, signal, sys, time\n"
        "atexit.register(lambda: (os.kill(os.getpid(), signal.SIGINT), time.sleep(0.5)))\n"
        "from gradmc.cli import run_command\n"
        "sys.argv = ['gradmc', 'describe', 'mala']\n"
        "run_command()\n"
    )
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "mala [continuous]" in done.stdout
    assert "KeyboardInterrupt" not in done.stderr and "Exception ignored" not in done.stderr
