"""What ``gradmc sample`` shows of a run: trace panels and summary rows named as the model
names them, scalars first, then the worst-converged entries."""

import jax.numpy as jnp
import numpy as np
import pytest

import gradmc
from gradmc import report

SMALL = dict(num_chains=2, num_warmup=30, num_draws=40, progress=False)


def test_worst_first_puts_scalars_first_then_the_largest_r_hat():
    r_hat = np.array([1.0, 1.3, np.nan, 1.1, 1.5])
    scalar = np.array([False, False, False, True, False])
    np.testing.assert_array_equal(report.worst_first(r_hat, scalar, 4), [3, 4, 1, 0])
    np.testing.assert_array_equal(report.worst_first(r_hat, scalar, 10), [3, 4, 1, 0, 2])
    # a mixed model: continuous entries first, then a discrete scalar (a change point), then discrete entries
    discrete = np.array([True, False, False, True, True])
    np.testing.assert_array_equal(report.worst_first(r_hat, scalar, 10, discrete), [1, 2, 3, 4, 0])
    # many discrete scalars (one site per time step) rank by R-hat after every continuous coordinate
    r_hat = np.array([1.0, 1.02, 1.2, 1.01, 1.3, 1.05])
    scalar = np.array([True, False, True, True, True, False])
    discrete = np.array([False, False, True, True, True, False])
    np.testing.assert_array_equal(report.worst_first(r_hat, scalar, 5, discrete), [0, 5, 1, 4, 2])


@pytest.fixture(scope="module")
def named_trace():
    def log_p(x):  # the pytree's order is alpha, sigma: the scalar comes last there
        return -0.5 * x["sigma"] ** 2 - 0.5 * jnp.sum((x["alpha"] - x["sigma"]) ** 2)

    return gradmc.sample(log_p, "mala", init={"alpha": jnp.zeros(5), "sigma": jnp.zeros(())}, **SMALL)


def test_trace_panels_name_the_model_scalars_first(named_trace):
    labels = [label for label, _ in report.trace_panels(named_trace, max_panels=4)]
    assert labels[0].startswith("sigma")
    assert all(label.startswith("alpha[") for label in labels[1:4])
    r_hats = [float(label.split("R-hat ")[1].rstrip(")")) for label in labels[1:4]]
    assert r_hats == sorted(r_hats, reverse=True)
    assert labels[4] == "log density" and labels[5].startswith("acceptance rate")
    values, names, scalar, discrete = report.named_coordinates(named_trace.posterior())
    assert values.shape == (2, 40, 6) and names[0] == "alpha[0]" and scalar.tolist() == [False] * 5 + [True]
    assert not discrete.any()


def test_trace_panels_of_a_discrete_target_show_mixing_statistics():
    trace = gradmc.sample("ising", "ncg", **SMALL)
    panels = report.trace_panels(trace)
    labels = [label for label, _ in panels]
    assert labels[:2] == ["mean value of the coordinates", "share of coordinates changed since the first draw"]
    changed = panels[1][1]
    assert changed.shape == (2, 40) and np.all(changed[:, 0] == 0) and np.all((changed >= 0) & (changed <= 1))
    accept = panels[-1][1]
    np.testing.assert_allclose(accept[:, -1], trace.stats["acceptance_rate"][:, -40:].mean(axis=1), rtol=1e-6)


def test_value_frequencies_of_discrete_variables():
    posterior = {"s": np.array([[3, 3, 4, 5], [3, 4, 4, 4]]), "z": np.zeros((2, 4, 3), int), "mu": np.zeros((2, 4))}
    lines = report.format_value_frequencies(posterior, max_values=2).splitlines()
    assert lines[1] == "  s: 4 50.0%, 3 37.5% (2 most frequent of 3 values)"
    assert lines[2] == "  z (3 entries pooled): 0 100.0%"
    assert len(lines) == 3  # mu is real-valued
    assert report.format_value_frequencies({"mu": np.zeros((2, 4))}) == ""
    # with each coordinate's R-hat and ESS (named_coordinates' order: s, z[0..2], mu)
    r_hat, ess = np.array([1.2, np.nan, np.nan, np.nan, 1.0]), np.array([3.0, np.nan, np.nan, np.nan, 8.0])
    lines = report.format_value_frequencies(posterior, max_values=2, r_hat=r_hat, ess=ess).splitlines()
    assert lines[1].endswith("values); R-hat 1.200, bulk ESS 3") and lines[2].endswith("0 100.0%")


def test_many_discrete_sites_show_the_worst_mixed_and_sum_up_the_rest():
    """Five scalar sites (a model written one site per step), three lines at most: the two with
    the largest R-hat, in the model's order, and one line for the other three."""
    posterior = {f"s{t}": np.array([[0, 1, 1, 1], [0, 0, 1, 1]]) for t in range(5)}
    r_hat, ess = np.array([1.01, 1.3, 1.0, 1.2, 1.02]), np.array([900.0, 40.0, 1000.0, 60.0, 800.0])
    lines = report.format_value_frequencies(posterior, r_hat=r_hat, ess=ess, max_lines=2).splitlines()
    assert lines[0] == "values drawn of the discrete variables (2 of 5 with the largest R-hat):"
    assert [line.split(":")[0] for line in lines[1:3]] == ["  s1", "  s3"]
    assert lines[3] == "  and 3 more: R-hat at most 1.020, bulk ESS at least 800"


def test_the_mode_shift_s_moves_show_only_where_warm_up_kept_it():
    params = {"beta": {"step_size": np.full(2, 0.5)}, "joint": np.zeros(2, bool), "joint_moves": np.zeros(2, int)}
    assert report.format_params(params) == "learned in warm-up: beta: step_size 0.5"
    params.update(joint=np.ones(2, bool), joint_moves=np.full(2, 3))
    assert report.format_params(params) == "learned in warm-up: beta: step_size 0.5; joint on; joint_moves 3"
