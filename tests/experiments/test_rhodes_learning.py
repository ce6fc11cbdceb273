"""The Rhodes & Gutmann learning experiments and the textbook denoising driver: Table 1's
cell-by-cell agreement and the posterior-mean driver's keys (fast); Table 1, Figure 7 and
Table 2 end to end at micro budgets (slow), checked on the data they return."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gradmc.discrete import ncg
from gradmc.experiments import rhodes_ebm, rhodes_ising, rhodes_step_robustness, textbook_denoising
from gradmc.spaces import Spin


def test_table1_agreement_classifies_cells():
    """Cells are 'failed' above 3× the table's best; the ratio published / ours is collected per class."""
    ours = {("NCG", 0): 10.0, ("NCG", 1): 1.0, ("GWG", 0): 1.2, ("GWG", 1): 50.0}
    paper = {("NCG", 0): 1.0, ("NCG", 1): 0.1, ("GWG", 0): 5.0, ("GWG", 1): 5.0}
    agreement = rhodes_ising.table1_agreement(ours, paper)
    assert agreement["groups"]["converged"] == pytest.approx([0.1])
    assert agreement["groups"]["failed"] == pytest.approx([0.1, 0.1])
    assert agreement["disagreeing"] == [(("GWG", 0), "failed", "converged")]
    assert agreement["spread"] == pytest.approx(1.0) and agreement["num_cells"] == 4
    assert -1.0 <= agreement["spearman"] <= 1.0


def test_posterior_mean_runs_on_the_runners_keys():
    """A chain's key at step t is fold_in(key, t) (gradmc.run.loop); a Gibbs sweep is d steps."""
    d, steps, burn_in, key = 6, 30, 10, jax.random.key(3)
    y = np.random.default_rng(0).normal(size=(2, 3))
    f = textbook_denoising.denoising_logdensity(y, 0.5, 1.0)
    start = np.ones(d)
    alg = ncg.as_top_level_api(f, Spin(d), 1.0)
    state, xs = alg.init(jnp.asarray(start, jnp.float32)), []
    for t in range(steps):
        state = alg.step(jax.random.fold_in(key, t), state)[0]
        xs.append(np.asarray(state.position))
    mean = textbook_denoising.posterior_mean(
        f, d, "NCG", num_steps=steps, burn_in=burn_in, key=key, start=start, step_size=1.0
    )
    np.testing.assert_allclose(mean, np.mean(xs[burn_in:], axis=0), atol=1e-6)
    means = textbook_denoising.posterior_mean(
        f, d, "Gibbs (systematic sweeps)", num_steps=4, burn_in=0, key=key, start=start, num_chains=3
    )
    assert means.shape == (3, d) and np.all(np.abs(means) <= 1)


@pytest.mark.slow
def test_table1_end_to_end():
    """Table 1 at a tiny budget: ‖J − J*‖_F/√d per cell beside the published cells and their
    ratio, the agreement summary and the MLE floor."""
    budget = dict(seeds=2, num_updates=20, num_data=200, data_steps=20, mle_iterations=20, columns=2)
    r = rhodes_ising.ising_experiment(full=False, seed=0, progress=False, budget=budget, methods=("NCG", "Gibbs"))
    assert r.d == 100 and set(r.cells) == {("NCG", 0), ("NCG", 1), ("Gibbs", 0), ("Gibbs", 1)}
    rows = r.tables["per_site"]
    assert [row["method"] for row in rows] == [
        "NCG (K=1,6)",
        "  paper",
        "  paper / ours",
        "Gibbs (K=2,10)",
        "  paper",
        "  paper / ours",
    ]
    assert rows[1]["K=1"] == "0.837 (0.05)"  # NCG's published K=1 cell beside ours
    assert float(rows[2]["K=1"]) == pytest.approx(0.837 / r.ours["NCG", 0], rel=1e-3)
    assert r.ours["NCG", 0] == pytest.approx(float(np.mean(r.cells["NCG", 0]["per_site"])))
    assert r.cells["NCG", 0]["frobenius"].shape == (2,)
    np.testing.assert_allclose(r.cells["NCG", 0]["per_site"], r.cells["NCG", 0]["frobenius"] / 10, rtol=1e-5)
    assert len(r.tables["frobenius"]) == len(r.tables["sq_frobenius"]) == 2
    assert r.agreement["num_cells"] == 4 and r.floor["per_site"] > 0 and r.floor_unregularised["frobenius"] > 0
    assert np.isfinite(r.data["z"]) and r.convergence is None


@pytest.mark.slow
def test_step_robustness_end_to_end(tmp_path):
    budget = dict(seeds=1, num_updates=5, num_data=100, data_steps=10)
    result = rhodes_step_robustness.step_robustness_experiment(
        full=False, seed=0, progress=False, budget=budget, multipliers=(0.3, 1.0)
    )
    assert [row["method"] for row in result["rows"]] == [
        "NCG (K=12, ε=0.5)",
        "AVG (K=10, ε=0.2)",
        "PAVG model-agnostic (K=10, ε=0.2)",
    ]
    for row in result["rows"]:
        assert row["x1"] == 1.0 and row["x0.3"] > 0 and row["error at x1"] > 0
    assert set(result["curves"]) == set(rhodes_step_robustness.METHODS)
    rhodes_step_robustness._figure(result["curves"], tmp_path / "figure7.png")
    assert (tmp_path / "figure7.png").stat().st_size > 0


@pytest.mark.slow  # compiles the CNN's gradient for the ground truth and two samplers: ~1 min
def test_ebm_end_to_end(tmp_path):
    """Table 2 at a micro budget: both scales beside the published cells, the ground truth's
    diagnostics, Figures 13 and 15."""
    budget = dict(gt_updates=2, gt_K=1, gt_lr=1e-3, buffer=50, data_steps=1, updates=2, lr=1e-3, seeds=1, columns=1)
    r = rhodes_ebm.ebm_experiment(full=False, seed=0, progress=False, budget=budget, methods=("NCG", "GWG"))
    assert [row["method"] for row in r.rows] == ["NCG (K=5)", "  paper", "GWG (K=5)", "  paper"]
    assert r.rows[1]["K=5"] == "0.128 (0.001)"  # NCG's published K=5 cell
    assert set(r.cells) == {("NCG", 5), ("GWG", 5)} and r.points.shape == (2, 4) and len(r.r2) == 3
    assert np.isfinite(float(r.ground_truth["loss"])) and 0 <= r.data_mean_pixel <= 1
    assert all(s > 0 for s in r.starts) and [row["method"] for row in r.accept_rows] == ["NCG", "GWG"]
    rhodes_ebm._figures(r, tmp_path)
    assert (tmp_path / "figure13.png").exists() and (tmp_path / "figure15.png").exists()
