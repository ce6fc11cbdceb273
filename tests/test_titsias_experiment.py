"""The titsias2019 experiments at a tiny budget: table structure, published columns, files."""

import json

import numpy as np
import pytest

from gradmc.experiments import titsias

TINY = titsias.Budget(repeats=2, warmup=60, draws=60, hmc_warmup=20, hmc_draws=20, nuts_warmup=20, nuts_draws=20)


@pytest.fixture(scope="module")
def table_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("titsias2019")
    text = titsias.run_table(out=out, budget=TINY, seed=0, targets=("neal-100",))
    return out, text


def _table_lines(text, heading):
    block = text.split(f"## {heading}")[1].split("```")[1].strip().splitlines()
    return block[0], block[2:]


def test_table_has_every_method_and_published_columns(table_run):
    out, text = table_run
    header, rows = _table_lines(text, "neal-100")
    for column in ("time s", "accept", "ESS (min, med, max)", "min ESS/s (sd)", "min ESS/1k evals", "mean err", "sd err",
                   "paper time s", "paper accept", "paper ESS", "paper min ESS/s (sd)", "paper rank"):
        assert column in header
    methods = [r.split()[0] for r in rows]
    assert methods[:6] == ["gadMALAf", "gadMALAe", "gadRWM", "AM", "RWM", "MALA"]
    assert methods[6] in ("HMC-5", "HMC-10", "HMC-20") and methods[7] == "NUTS"
    assert "161.70 (15.07)" in rows[0] and "51.28 (1.64)" in rows[7]  # the paper's Table 1 beside ours
    assert "Spearman rho" in text and "gadMALAf / NUTS min ESS/s" in text


def test_table_files_and_raw_numbers(table_run):
    out, _ = table_run
    assert (out / "min_ess_per_s.png").stat().st_size > 0
    record = json.loads((out / "titsias2019.json").read_text())
    runs = record["runs"]["neal-100"]
    assert set(runs) == {"gadMALAf", "gadMALAe", "gadRWM", "AM", "RWM", "MALA", "HMC-5", "HMC-10", "HMC-20", "NUTS"}
    for r in runs.values():
        assert len(r["seconds"]) == TINY.repeats and np.all(np.asarray(r["seconds"]) > 0)
        assert np.all(np.asarray(r["ess"]) >= 0)
        assert np.all(np.asarray(r["evals"]) >= TINY.hmc_warmup + TINY.hmc_draws)


def test_rank_agreement_identical_and_reversed():
    paper = {m: p.min_ess_per_s for m, p in titsias.PUBLISHED["neal-100"].items()}
    same = titsias.rank_agreement(dict(paper), paper)
    assert same["spearman"] == pytest.approx(1.0) and same["same_best"]
    reversed_ = titsias.rank_agreement({m: -v for m, v in paper.items()}, paper)
    assert reversed_["spearman"] == pytest.approx(-1.0) and not reversed_["same_best"]


def test_figure1_tiny(tmp_path):
    text = titsias.run_figure1(out=tmp_path, seed=0, iters_2d=200, iters_51=200, draws=50, paper_rwm_rate=None)
    assert (tmp_path / "figure1.png").stat().st_size > 0
    table = text.split("```")[1]
    assert "alpha*=0.25" in table and "alpha*=0.4" in table and "gadMALAf 51-D" in table
    assert "7.4" in table and "2.2" in table  # the paper's beta beside ours
