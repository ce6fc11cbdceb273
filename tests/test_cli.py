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
    ],
)
def test_bad_names_and_arguments_exit_2(argv, message, capsys):
    assert main(argv) == 2
    assert message in capsys.readouterr().err


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
