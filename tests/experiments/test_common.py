"""What every experiment shares: table cells, rank agreement, budgets; the registry of
experiments; ``gradmc reproduce`` naming the ``experiments`` extra when a module is missing;
``import gradmc`` loading no experiment-only dependency."""

import math
import os
import subprocess
import sys
import types
from pathlib import Path

import numpy as np
import pytest

import gradmc
from gradmc import registry, reproduce
from gradmc.experiments import common

EXPERIMENTS = {
    "nemeth-boltzmann",
    "nemeth-challenging",
    "nemeth-mixture",
    "rhodes2022-ebm",
    "rhodes2022-ising",
    "rhodes2022-ordinal",
    "rhodes2022-sparse-regression",
    "rhodes2022-step-robustness",
    "textbook-denoising",
    "titsias2019",
    "titsias2019-figure1",
    "zhoutan2025-discrete-gaussian",
    "zhoutan2025-potts",
    "zhoutan2025-quadratic-mixture",
}


def test_every_experiment_is_registered():
    # other test modules register small experiments of their own; count gradmc's only
    built_in = {e.name for e in registry.experiments() if e.constructor.__module__.startswith("gradmc.")}
    assert built_in == EXPERIMENTS


def test_mean_sd_cells():
    assert common.mean_sd_cell(4.4711, 0.0912) == "4.471 (0.091)"
    assert common.mean_sd_cell(0.837, None) == "0.837"
    assert common.mean_sd_cell(0.12, 0.0003, sd_fmt=".3g") == "0.120 (0.0003)"
    assert common.mean_sd_cell(161.7, 15.07, ".2f") == "161.70 (15.07)"
    assert common.seeds_cell([1.0, 2.0, 3.0]) == "2.000 (1)" and common.seeds_cell([0.5]) == "0.500"
    assert common.fenced("a\nb") == "```\na\nb\n```"


def test_spearman_and_rank_agreement():
    paper = {"a": 3.0, "b": 2.0, "c": 1.0}
    assert common.spearman({"a": 30, "b": 20, "c": 10, "x": 5}, paper) == pytest.approx(1.0)
    assert common.spearman({"c": 1.0, "b": 2.0, "a": 3.0}, paper) == pytest.approx(1.0)  # by key, not by order
    assert math.isnan(common.spearman({"a": 1.0}, paper))
    assert math.isnan(common.spearman({"a": 1, "b": 1, "c": 1}, paper))  # all tied: undefined
    agreement = common.rank_agreement({"a": 1.0, "b": 2.0, "c": 3.0}, paper, keys=["c", "b", "a", "z"])
    assert agreement["methods"] == ["c", "b", "a"] and agreement["spearman"] == pytest.approx(-1.0)
    np.testing.assert_array_equal(agreement["ours_rank"], [1, 2, 3])
    np.testing.assert_array_equal(agreement["paper_rank"], [3, 2, 1])
    assert not agreement["same_best"]
    np.testing.assert_array_equal(common.descending_ranks([1.0, 3.0, 3.0]), [3, 1.5, 1.5])


def test_budget_is_the_base_of_the_experiments_budgets():
    from gradmc.experiments import nemeth, titsias, zhoutan

    assert nemeth.Budget is common.Budget and common.Budget(2, 30, 60).chains == 2
    assert issubclass(titsias.Budget, common.Budget) and issubclass(zhoutan.Budget, common.Budget)
    assert zhoutan.GAUSSIAN_BUDGET[False].draws == 3000


def _fake_experiment(monkeypatch, error):
    def constructor(*, out, full, seed, progress):
        raise error

    monkeypatch.setattr(
        registry, "experiment", lambda name: types.SimpleNamespace(constructor=constructor, description="")
    )


def test_reproduce_names_the_extra_for_a_missing_module(monkeypatch, tmp_path):
    _fake_experiment(monkeypatch, ModuleNotFoundError("No module named 'equinox'", name="equinox"))
    result = reproduce.run_experiment("x", tmp_path, full=False, seed=0, progress=False)
    assert not result["ok"]
    assert "needs the optional dependencies: pip install -e '.[experiments]' in the gradmc repository" in result["text"]
    assert "'equinox'" in result["text"] and (tmp_path / "report.md").read_text().strip() == result["text"]


def test_reproduce_reports_other_failures_with_their_traceback(monkeypatch, tmp_path):
    _fake_experiment(monkeypatch, ModuleNotFoundError("No module named 'nope'", name="nope"))
    result = reproduce.run_experiment("x", tmp_path, full=False, seed=0, progress=False)
    assert not result["ok"] and "Traceback" in result["text"] and ".[experiments]" not in result["text"]


def test_reproduce_all_needs_markdown_up_front(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "markdown", None)  # find_spec then reports it missing
    with pytest.raises(
        reproduce.MissingExtraError, match=r"pip install -e '\.\[experiments\]' in the gradmc repository"
    ):
        reproduce.run_all(tmp_path, names=["titsias2019"])
    assert not (tmp_path / "titsias2019").exists()


def test_import_gradmc_loads_no_experiment_only_dependency():
    code = (
        "import sys, gradmc, gradmc.experiments; "
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'cvxpy', 'equinox', 'markdown'}))"
    )
    env = dict(os.environ, PYTHONPATH=str(Path(gradmc.__file__).parents[1]))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True).stdout
    assert out.strip() == "[]"
