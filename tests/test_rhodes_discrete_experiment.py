"""The rhodes2022-ordinal / -sparse-regression experiments at a tiny budget: table
structure, published columns, files; the running-sum errors equal the diagnostics'."""

import json

import numpy as np
import pytest

from gradmc import diagnostics
from gradmc.experiments import rhodes_discrete as rd

TINY_ORDINAL = rd.Budget(seconds=0.6, num_chains=8, burn_in=0.2, records=2)
TINY_REGRESSION = rd.Budget(seconds=0.6, num_chains=6, burn_in=0.2, records=2)


def _table(text, heading):
    block = text.split(f"## {heading}")[1].split("```")[1].strip().splitlines()
    return block[0], block[2:]


@pytest.fixture(scope="module")
def ordinal_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("ordinal")
    text = rd.run_ordinal(out=out, budget=TINY_ORDINAL, seed=0, targets=("poly2",), samplers=("NCG", "GWG-ordinal", "MH-uniform"))
    return out, text


@pytest.fixture(scope="module")
def regression_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("regression")
    text = rd.run_sparse_regression(out=out, budget=TINY_REGRESSION, seed=0, samplers=("NCG", "Gibbs"))
    return out, text


def test_ordinal_table_columns_and_paper_ranking(ordinal_run):
    out, text = ordinal_run
    header, rows = _table(text, "poly2")
    for column in ("step (ours)", "step (Table 4)", "iterations", "steps/s", "accept", "marginal KL",
                   "covariance error", "ESS/s median [q1, q3]", "our rank", "paper rank"):
        assert column in header
    assert [r.split()[0] for r in rows] == ["NCG", "GWG-ordinal", "MH-uniform"]
    assert "ε=0.05" in rows[0] and "r=16" in rows[1] and "r=2" in rows[2]
    assert rows[1].split()[-1] == "6" and rows[2].split()[-1] == "5"  # eq. 21's ranks
    assert "PAVG > NCG > AVG = Gibbs > MH-uniform > GWG-ordinal > GWG" in text
    assert "Spearman" in text and "scaled by 1/" in text


def test_ordinal_files_and_record(ordinal_run):
    out, _ = ordinal_run
    for name in ("poly2_time.png", "poly2_iterations.png"):
        assert (out / name).stat().st_size > 0
    record = json.loads((out / "rhodes2022-ordinal.json").read_text())["poly2"]
    for m in ("NCG", "GWG-ordinal", "MH-uniform"):
        r = record[m]
        assert len(r["seconds"]) == len(r["iterations"]) >= 1
        assert np.all(np.diff(r["iterations"]) > 0) and r["iterations"][0] > r["burn_in_steps"]
        assert len(r["ess"]) == TINY_ORDINAL.num_chains
        assert all(np.isfinite(r["errors_mean"]["kl"])) and all(np.asarray(r["errors_mean"]["cov"]) > 0)
        assert r["sampling_seconds"] >= (1 - TINY_ORDINAL.burn_in) * TINY_ORDINAL.seconds * 0.5


def test_regression_table_and_files(regression_run):
    out, text = regression_run
    header, rows = _table(text, "sparse-regression")
    for column in ("step (ours)", "step (Table 4)", "pairwise error", "marginal error", "ESS/s median [q1, q3]", "paper rank"):
        assert column in header
    assert rows[0].split()[:3] == ["NCG", "ε=0.3", "0.03"]  # the code's ε beside Table 4's
    assert rows[1].split()[-1] == "5"
    assert "PAVG > NCG > AVG > GWG > Gibbs" in text and "Table 4 prints 0.03" in text
    for name in ("sparse-regression_time.png", "sparse-regression_iterations.png", "rhodes2022-sparse-regression.json"):
        assert (out / name).stat().st_size > 0


def test_accumulator_matches_diagnostics():
    rng = np.random.default_rng(0)
    values = np.linspace(-1.5, 3.0, 50)
    draws = values[rng.integers(0, 50, size=(3, 40, 5))]
    acc = rd.Accumulator(3, values, 5)
    acc.update(draws[:, :25])
    acc.update(draws[:, 25:])
    p = rng.dirichlet(np.ones(50), size=5)
    cov = np.cov(rng.normal(size=(5, 100)))
    np.testing.assert_allclose(acc.marginal_kl(p), diagnostics.marginal_kl(draws, p, values), rtol=1e-10)
    np.testing.assert_allclose(acc.covariance_error(cov), diagnostics.covariance_frobenius_error(draws, cov), rtol=1e-6)

    binary = rng.integers(0, 2, size=(2, 30, 4)).astype(np.float32)
    acc = rd.Accumulator(2, [0.0, 1.0], 4)
    acc.update(binary)
    p1 = rng.uniform(0.1, 0.9, size=4)
    pair = np.einsum("ia,jb->ijab", np.stack([1 - p1, p1], 1), np.stack([1 - p1, p1], 1))
    idx = np.arange(4)
    pair[idx, idx] = np.einsum("ia,ab->iab", np.stack([1 - p1, p1], 1), np.eye(2))
    marg = np.stack([1 - p1, p1], 1)
    np.testing.assert_allclose(acc.mean_abs_marginal_error(p1), diagnostics.mean_abs_marginal_error(binary, marg, [0, 1]), rtol=1e-10)
    np.testing.assert_allclose(acc.pairwise_error(pair), diagnostics.pairwise_error(binary, pair, [0, 1]), rtol=1e-10)


def test_ranking_ties_and_order():
    text, ranks = rd.ranking({"a": (1.0, 0.01), "b": (1.01, 0.01), "c": (2.0, 0.01)})
    assert text == "a = b > c" and ranks == {"a": 1, "b": 1, "c": 3}
    text, _ = rd.ranking({"a": (1.0, 0.01), "c": (2.0, 0.01)}, higher_is_better=True)
    assert text == "c > a"


@pytest.mark.slow
def test_all_samplers_both_targets(tmp_path):
    text = rd.run_ordinal(out=tmp_path, budget=TINY_ORDINAL, seed=1)
    for target in ("poly2", "poly4"):
        _, rows = _table(text, target)
        assert [r.split()[0] for r in rows] == list(rd.ordinal_samplers(target))
    text = rd.run_sparse_regression(out=tmp_path, budget=TINY_REGRESSION, seed=1)
    _, rows = _table(text, "sparse-regression")
    assert [r.split()[0] for r in rows] == list(rd.regression_samplers())
