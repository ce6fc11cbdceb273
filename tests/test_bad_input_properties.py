"""Property-based: random bad (and good) arguments thrown at ``sample`` and the CLI end in a
clean run or a ``ValueError``/``TypeError`` with a message (exit status 2 on the CLI),
never in another exception.
"""

import math

import jax
import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import gradmc
from gradmc.cli import main

TARGETS = {"gaussian": gradmc.target("gaussian"), "ising": gradmc.target("ising", side=3)}
SAMPLERS = ["rwm", "mala", "gibbs", "ncg", "gwg", "rwm", "ncg", "no-such-sampler"]
NUMBERS = st.one_of(
    st.integers(-3, 12),
    st.floats(allow_nan=True, allow_infinity=True, width=32),
    st.sampled_from(["3", "x", None, 2.5, True]),
)
OPTION_VALUES = st.one_of(NUMBERS, st.sampled_from([[0.1, 0.2], "dual_averaging", "none", -1e9, 1e9]))
OPTION_KEYS = st.sampled_from(["step_size", "target_accept", "adapt", "num_flips", "bogus"])
FUZZ = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)


def _init(draw, target_name):
    """No init, a valid one, or one of a wrong shape / outside the space / non-finite."""
    target = TARGETS[target_name]
    shape = target.space.event_shape
    kind = _mostly(draw, st.sampled_from(["none", "valid"]), st.sampled_from(["shape", "value", "nan"]))
    if kind == "none":
        return None
    if kind == "valid":
        return np.asarray(target.draw_initial(jax.random.key(0)))
    if kind == "shape":
        return np.zeros((shape[0] + 1,))
    if kind == "value":
        return np.full(shape, 0.37)
    return np.full(shape, np.nan)


def _mostly(draw, good, bad):
    """A draw of ``good`` four times in five, else of ``bad``: most calls have few bad arguments."""
    return draw(bad if draw(st.integers(0, 4)) == 4 else good)


@st.composite
def sample_calls(draw):
    target_name = draw(st.sampled_from(sorted(TARGETS)))
    kwargs = {
        "num_chains": _mostly(draw, st.integers(1, 2), st.sampled_from([0, -1, 1.5, "2", None])),
        "num_warmup": _mostly(draw, st.integers(0, 20), st.sampled_from([-2, 0.5, "10", math.nan])),
        "num_draws": _mostly(draw, st.integers(1, 12), st.sampled_from([0, -2, 2.5, "5"])),
        "thinning": _mostly(draw, st.just(1), st.integers(-1, 3)),
        "seed": draw(st.integers(0, 3)),
        "init": _init(draw, target_name),
    }
    options = draw(st.dictionaries(OPTION_KEYS, OPTION_VALUES, max_size=1))
    return target_name, draw(st.sampled_from(SAMPLERS)), options, kwargs


@pytest.mark.slow
@FUZZ
@given(sample_calls())
def test_sample_runs_or_raises_a_clear_error(call):
    target_name, name, options, kwargs = call
    try:
        trace = gradmc.sample(TARGETS[target_name], gradmc.sampler(name, **options), progress=False, **kwargs)
    except (ValueError, TypeError) as err:
        assert str(err).strip(), "errors must say what is wrong"
        event(f"{type(err).__name__}: {str(err)[:70]}")
        return
    event("ran")
    assert trace.draws.shape[:2] == (kwargs["num_chains"], kwargs["num_draws"])


CLI_SAMPLERS = ["rwm", "mala", "nuts", "gwg", "bogus"]


@st.composite
def cli_calls(draw, tmp):
    argv = ["sample", draw(st.sampled_from(["gaussian", "ising", "nope", "model.py:f"]))]
    argv += ["--sampler", draw(st.sampled_from(CLI_SAMPLERS))]
    for flag in ("--chains", "--warmup", "--draws", "--seed"):
        value = _mostly(draw, st.integers(1, 12), st.sampled_from([-2, 0, "x", "1.5", ""]))
        argv += [flag, str(value)]
    if draw(st.integers(0, 3)) == 3:
        key, value = draw(OPTION_KEYS), draw(OPTION_VALUES)
        argv += ["--option", f"{key}={value}"]
    if draw(st.integers(0, 3)) == 3:
        argv += ["--target-option", draw(st.sampled_from(["side=3", "side=-1", "dim=2", "bogus=1", "noequals"]))]
    argv += ["--out", str(tmp / draw(st.sampled_from(["a", "b/c"]))), "--no-progress"]
    return argv


@pytest.fixture(scope="module")
def cli_folder(tmp_path_factory):
    return tmp_path_factory.mktemp("cli-fuzz")


def test_cli_exits_cleanly_on_random_arguments(cli_folder, capsys):
    @FUZZ
    @given(cli_calls(cli_folder))
    def check(argv):
        try:
            status = main(argv)
        except SystemExit as stop:  # argparse: unparsable numbers
            status = stop.code
        assert status in (0, 2), f"{argv} exited {status}"
        event(f"exit {status}")
        if status == 2:
            assert "error" in capsys.readouterr().err

    check()
