"""The comparison table (legend, n/a cells, divergences of warm-up and kept draws apart),
the bar chart's ranking, the per-sampler progress line, and the command's compilation cache.
"""

import json
import math
import os
import subprocess
import sys
import warnings

import jax
import numpy as np
import pytest
from jax.experimental.compilation_cache import compilation_cache

from gradmc import compile_cache
from gradmc.base import Target
from gradmc.cli import build_parser, main
from gradmc.compare import COMPARE_COLUMNS, COMPARE_LEGEND, compare, ranked, rows_as_json, trace_row
from gradmc.diagnostics.health import RunWarning
from gradmc.report import format_compare, format_params
from gradmc.spaces import Real
from gradmc.trace import Trace

BUDGET = {"num_chains": 2, "num_warmup": 50, "num_draws": 100, "seed": 0}


def _compare(target, samplers, progress=False):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RunWarning)  # short runs: R-hat warnings expected
        return compare(target, samplers, progress=progress, **BUDGET)


def _row(table: str, sampler: str) -> str:
    return next(line for line in table.splitlines() if line.startswith(sampler + " "))


def test_legend_explains_every_column_and_the_ranking(corr_gaussian):
    table = format_compare(_compare(corr_gaussian, ["mala"]).rows, title="title")
    legend = table.split("columns:")[1]
    for column in COMPARE_COLUMNS[1:]:
        assert f"  {column} " in legend and COMPARE_LEGEND[column] in legend
    assert "min_ess_per_s  ess_min / sampling_s" in legend
    assert "compare.png" in legend and "median ESS per gradient evaluation" in legend


def test_not_applicable_cells_name_why_while_rows_keep_nan(corr_gaussian):
    result = _compare(corr_gaussian, ["rwm", "mala"])
    rwm, mala = result.rows
    assert rwm["grad_evals"] == 0 and math.isnan(rwm["ess_per_grad"]) and math.isnan(rwm["median_ess_per_grad"])
    assert mala["ess_per_grad"] == pytest.approx(mala["ess_min"] / mala["grad_evals"])
    assert rwm["min_ess_per_s"] == pytest.approx(rwm["ess_min"] / rwm["sampling_s"])
    assert rwm["wall_s"] >= rwm["compile_s"] + rwm["sampling_s"]
    table = format_compare(result.rows)
    assert "n/a (no gradients)" in _row(table, "rwm") and "n/a" not in _row(table, "mala")
    assert "n/a (no exact truth)" not in table  # this target has its truth


def test_errors_are_not_applicable_without_truth(corr_gaussian):
    no_truth = Target("no-truth", corr_gaussian.logdensity_fn, Real(2))
    result = _compare(no_truth, ["mala"])
    assert math.isnan(result.rows[0]["mean_err"]) and math.isnan(result.rows[0]["sd_err"])
    assert _row(format_compare(result.rows), "mala").count("n/a (no exact truth)") == 2


def _trace(div_warmup: int, div_kept: int, grads_per_step: int) -> Trace:
    chains, draws = 2, 50
    kept = np.zeros((chains, draws), bool)
    kept.flat[:div_kept] = True
    warm = np.zeros((chains, 30), bool)
    warm.flat[:div_warmup] = True
    stats = {
        "acceptance_rate": np.full((chains, draws), 0.5),
        "num_grad_evals": np.full((chains, draws), grads_per_step),
        "diverging": kept,
        "nonfinite": np.zeros((chains, draws), bool),
    }
    return Trace(
        target="t",
        sampler="s",
        draws=np.random.default_rng(0).normal(size=(chains, draws, 2)),
        stats=stats,
        warmup_stats={"diverging": warm, "nonfinite": np.zeros((chains, 30), bool)},
        timing={"compile_s": 1.0, "warmup_s": 0.5, "sampling_s": 0.25},
    )


def test_divergences_of_warmup_and_kept_draws_are_separate_columns(corr_gaussian):
    row = trace_row(_trace(div_warmup=7, div_kept=3, grads_per_step=1), corr_gaussian)
    assert (row["div_warmup"], row["div_kept"]) == (7, 3)
    assert row["wall_s"] == 1.75  # without a measured wall time: compile + warm-up + sampling
    cells = _row(format_compare([row]), "s").split()
    header = format_compare([row]).splitlines()[0].split()
    assert cells[header.index("div_warmup")] == "7" and cells[header.index("div_kept")] == "3"


def test_learned_parameters_line_names_values_spreads_and_matrices():
    chains = 3
    params = {
        "step_size": np.array([0.2, 0.25, 0.3]),
        "W": np.broadcast_to(np.diag([1.0, 4.0]), (chains, 2, 2)),  # shared by the chains
        "M": np.zeros((chains, 2, 2)),  # learned on independent coordinates
        "fallback": np.zeros(chains, bool),  # a switch left off: not shown
    }
    assert format_params(params) == (
        "learned in warm-up: step_size 0.25 (0.2..0.3 over chains); W 2x2 (condition number 4); M 2x2 (zero)"
    )
    assert format_params({"fallback": np.ones(chains, bool)}) == "learned in warm-up: fallback on"
    assert format_params(None) == "nothing learned in warm-up"


def test_ranking_puts_samplers_without_gradients_last_in_given_order():
    rows = [
        {"sampler": "rwm", "median_ess_per_grad": math.nan},
        {"sampler": "mala", "median_ess_per_grad": 0.05},
        {"sampler": "am", "median_ess_per_grad": math.nan},
        {"sampler": "hmc", "median_ess_per_grad": 0.1},
    ]
    assert [r["sampler"] for r in ranked(rows)] == ["hmc", "mala", "rwm", "am"]


def test_a_run_with_warnings_is_marked_and_ranked_after_the_clean_ones():
    rows = [
        {"sampler": "hmc", "median_ess_per_grad": 0.5, "warnings": 2},
        {"sampler": "mala", "median_ess_per_grad": 0.05, "warnings": 0},
        {"sampler": "rwm", "median_ess_per_grad": math.nan, "warnings": 0},
        {"sampler": "nuts", "median_ess_per_grad": 0.1, "warnings": 0},
    ]
    assert [r["sampler"] for r in ranked(rows)] == ["nuts", "mala", "rwm", "hmc"]
    table = format_compare([{**dict.fromkeys(COMPARE_COLUMNS, 1.0), **row} for row in rows])
    assert "hmc (!)" in table and "mala (!)" not in table and "ranked after the clean ones" in table


def test_table_json_holds_null_where_a_value_is_not_a_number():
    rows = rows_as_json([{"sampler": "rwm", "mean_err": math.nan, "sd_err": math.inf, "ess_min": np.float32(3.5)}])
    text = json.dumps(rows, allow_nan=False)  # raises on NaN
    assert json.loads(text) == [{"sampler": "rwm", "mean_err": None, "sd_err": None, "ess_min": 3.5}]


def test_a_line_per_finished_sampler_on_stderr_only_with_progress(corr_gaussian, capsys):
    _compare(corr_gaussian, ["rwm", "mala"], progress=True)
    err = capsys.readouterr().err.splitlines()
    assert [line.split(":")[0] for line in err if ": done in " in line] == ["rwm", "mala"]
    assert all("(compile " in line for line in err if ": done in " in line)
    _compare(corr_gaussian, ["rwm"], progress=False)
    assert capsys.readouterr().err == ""


CACHE_OPTIONS = (
    "jax_compilation_cache_dir",
    "jax_persistent_cache_min_compile_time_secs",
    "jax_persistent_cache_min_entry_size_bytes",
)


@pytest.fixture
def jax_cache_options():
    """JAX's cache options as the test found them, restored afterwards."""
    saved = {name: jax.config.values[name] for name in CACHE_OPTIONS}
    yield
    for name, value in saved.items():
        jax.config.update(name, value)
    compilation_cache.reset_cache()


def test_enabling_the_cache_sets_jax_options(tmp_path, monkeypatch, jax_cache_options):
    monkeypatch.delenv(compile_cache.DISABLE_VARIABLE, raising=False)
    folder = compile_cache.enable_compilation_cache(tmp_path / "cache")
    assert folder == tmp_path / "cache" and folder.is_dir()
    assert jax.config.values["jax_compilation_cache_dir"] == str(folder)
    assert jax.config.values["jax_persistent_cache_min_compile_time_secs"] == 0.0
    assert jax.config.values["jax_persistent_cache_min_entry_size_bytes"] == -1


def test_default_folder_follows_xdg_cache_home(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert compile_cache.default_cache_dir() == tmp_path / "gradmc" / "jax"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert compile_cache.default_cache_dir().parts[-3:] == (".cache", "gradmc", "jax")


@pytest.mark.parametrize("value, enabled", [("1", False), ("yes", False), ("0", True), ("", True)])
def test_environment_variable_turns_the_cache_off(value, enabled, tmp_path, monkeypatch, jax_cache_options):
    before = jax.config.values["jax_compilation_cache_dir"]
    monkeypatch.setenv(compile_cache.DISABLE_VARIABLE, value)
    folder = compile_cache.enable_compilation_cache(tmp_path)
    assert (folder is not None) == enabled
    assert jax.config.values["jax_compilation_cache_dir"] == (str(tmp_path) if enabled else before)


def test_command_enables_the_cache_unless_told_not_to(tmp_path, monkeypatch, jax_cache_options):
    monkeypatch.delenv(compile_cache.DISABLE_VARIABLE, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    before = jax.config.values["jax_compilation_cache_dir"]
    assert build_parser().parse_args(["--no-compile-cache", "list"]).no_compile_cache
    assert main(["--no-compile-cache", "list"]) == 0
    assert jax.config.values["jax_compilation_cache_dir"] == before
    assert main(["list"]) == 0
    assert jax.config.values["jax_compilation_cache_dir"] == str(tmp_path / "gradmc" / "jax")


def test_importing_the_library_leaves_the_cache_off():
    code = "import gradmc, jax; print(jax.config.values['jax_compilation_cache_dir'])"
    env = {k: v for k, v in os.environ.items() if k != "JAX_COMPILATION_CACHE_DIR"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env).stdout
    assert out.strip() == "None"


@pytest.mark.parametrize("setting", ["default", "opt-out", "caller's folder"])
def test_sample_uses_the_cache_as_the_command_does(tmp_path, setting):
    code = (
        "import jax, gradmc\n"
        "if {own!r}: jax.config.update('jax_compilation_cache_dir', {own!r})\n"
        "gradmc.sample('banana', 'rwm', num_chains=2, num_warmup=5, num_draws=5, progress=False)\n"
        "print(jax.config.values['jax_compilation_cache_dir'])"
    ).format(own=str(tmp_path / "own") if setting == "caller's folder" else "")
    env = {
        k: v for k, v in os.environ.items() if k not in ("JAX_COMPILATION_CACHE_DIR", compile_cache.DISABLE_VARIABLE)
    }
    env["XDG_CACHE_HOME"] = str(tmp_path)
    if setting == "opt-out":
        env[compile_cache.DISABLE_VARIABLE] = "1"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env).stdout
    expected = {"default": tmp_path / "gradmc" / "jax", "opt-out": None, "caller's folder": tmp_path / "own"}[setting]
    assert out.strip().splitlines()[-1] == str(expected)
    if setting == "default":
        assert any((tmp_path / "gradmc" / "jax").iterdir())  # compiled programs written
