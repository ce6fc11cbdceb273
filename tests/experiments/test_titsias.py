"""The titsias2019 experiments: the table's pieces (budget, rows beside the published numbers,
rank agreement, the covariance error of Figure 1); end to end at a tiny budget (slow): the
returned rows, agreement and files."""

import json

import numpy as np
import pytest

from gradmc.experiments import titsias

TINY = titsias.Budget(chains=2, warmup=60, draws=60, hmc_warmup=20, hmc_draws=20, nuts_warmup=20, nuts_draws=20)


def test_budget_kinds_and_record():
    assert TINY.repeats == 2 and TINY.iterations("plain") == (60, 60) and TINY.iterations("nuts") == (20, 20)
    assert TINY.record() == {
        "repeats": 2,
        "warmup": 60,
        "draws": 60,
        "hmc_warmup": 20,
        "hmc_draws": 20,
        "nuts_warmup": 20,
        "nuts_draws": 20,
    }
    kinds = {label: kind for label, (kind, _) in titsias.method_samplers(100).items()}
    assert kinds["gadMALAf"] == "plain" and kinds["HMC-10"] == "hmc" and kinds["NUTS"] == "nuts"
    assert set(kinds) == set(titsias.METHODS) - {"HMC"} | {f"HMC-{s}" for s in titsias.HMC_STEPS}


def _result(label, min_ess, seconds=2.0):
    ones = np.ones(2)
    return titsias.MethodResult(
        label,
        seconds * ones,
        0.5 * ones,
        np.array([[min_ess, 2 * min_ess, 3 * min_ess]] * 2),
        0.1 * ones,
        0.2 * ones,
        1000 * ones,
    )


def test_table_rows_beside_the_published():
    results = {m: _result(m, 10.0 * (i + 1)) for i, m in enumerate(titsias.METHODS) if m != "HMC"}
    results.update({f"HMC-{s}": _result(f"HMC-{s}", s) for s in titsias.HMC_STEPS})
    methods = titsias.table_methods(results)
    assert list(methods) == list(titsias.METHODS) and methods["HMC"].label == "HMC-20"  # the best of the three
    rows = titsias._table_rows("neal-100", methods)
    assert [r["method"] for r in rows] == ["gadMALAf", "gadMALAe", "gadRWM", "AM", "RWM", "MALA", "HMC-20", "NUTS"]
    assert rows[0]["paper min ESS/s (sd)"] == "161.70 (15.07)" and rows[7]["paper min ESS/s (sd)"] == "51.28 (1.64)"
    assert rows[0]["min ESS/s (sd)"] == "5 (0)" and rows[0]["min ESS/1k evals"] == 10.0
    assert rows[7]["rank"] == "1" and rows[0]["paper rank"] == "1"
    assert titsias._table_rows("logistic-german", methods)[0]["paper"] == "n/a"  # no published numbers


def test_rank_agreement_identical_and_reversed():
    paper = {m: p.min_ess_per_s for m, p in titsias.PUBLISHED["neal-100"].items()}
    same = titsias.rank_agreement(dict(paper), paper)
    assert same["spearman"] == pytest.approx(1.0) and same["same_best"] and same["methods"] == list(titsias.METHODS)
    reversed_ = titsias.rank_agreement({m: -v for m, v in paper.items()}, paper)
    assert reversed_["spearman"] == pytest.approx(-1.0) and not reversed_["same_best"]


def test_scaled_error_of_a_proportional_covariance():
    exact = np.array([[1.0, 0.99], [0.99, 1.0]])
    c, err = titsias._scaled_error(0.25 * exact, exact)
    assert c == pytest.approx(4.0) and err == pytest.approx(0.0, abs=1e-12)


@pytest.fixture(scope="module")
def table_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("titsias2019")
    return out, titsias.table_experiment(out=out, budget=TINY, seed=0, targets=("neal-100",))


@pytest.mark.slow
def test_table_has_every_method_and_the_published_numbers(table_run):
    _, result = table_run
    rows = result.rows["neal-100"]
    methods = [r["method"] for r in rows]
    assert methods[:6] == ["gadMALAf", "gadMALAe", "gadRWM", "AM", "RWM", "MALA"]
    assert methods[6] in ("HMC-5", "HMC-10", "HMC-20") and methods[7] == "NUTS"
    assert rows[0]["paper min ESS/s (sd)"] == "161.70 (15.07)" and rows[7]["paper min ESS/s (sd)"] == "51.28 (1.64)"
    assert set(result.summary["neal-100"]) == set(titsias.METHODS)
    agreement = result.agreements["neal-100"]
    assert agreement["methods"] == list(titsias.METHODS) and -1.0 <= agreement["spearman"] <= 1.0


@pytest.mark.slow
def test_table_files_and_raw_numbers(table_run):
    out, result = table_run
    assert result.figure == out / "min_ess_per_s.png" and result.figure.stat().st_size > 0
    record = json.loads((out / "titsias2019.json").read_text())
    assert record["budget"] == TINY.record()
    runs = record["runs"]["neal-100"]
    assert set(runs) == {"gadMALAf", "gadMALAe", "gadRWM", "AM", "RWM", "MALA", "HMC-5", "HMC-10", "HMC-20", "NUTS"}
    for label, r in runs.items():
        assert len(r["seconds"]) == TINY.repeats and np.all(np.asarray(r["seconds"]) > 0)
        assert np.all(np.asarray(r["ess"]) >= 0)
        assert np.all(np.asarray(r["evals"]) >= TINY.hmc_warmup + TINY.hmc_draws)
        np.testing.assert_array_equal(r["ess"], result.results["neal-100"][label].ess)


@pytest.mark.slow
def test_figure1_tiny(tmp_path):
    result = titsias.figure1_experiment(out=tmp_path, seed=0, iters_2d=200, iters_51=200, draws=50, paper_rwm_rate=None)
    assert result["figure"].stat().st_size > 0
    rows = result["rows"]
    assert [r["run"] for r in rows] == [
        "gadRWM alpha*=0.25, eta=0.001",
        "gadRWM alpha*=0.4, eta=0.001",
        "gadMALAf 51-D, eta=0.001",
    ]
    assert [r["paper beta"] for r in rows] == [7.4, 2.2, "n/a"]  # the paper's beta beside ours
    assert all(np.isfinite(r["beta"]) and 0 <= r["accept (kept)"] <= 1 for r in rows)
    assert len(result["cov_2d"]) == 2 and result["cov_51"].shape == (51, 51)
