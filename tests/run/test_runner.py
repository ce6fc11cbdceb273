"""The runner and the kernel contract: determinism, user loops, ArviZ, bad input."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gradmc
from gradmc.base import Target
from gradmc.continuous import mala, rwm
from gradmc.spaces import Real


@pytest.mark.slow  # one compilation per chunk length
def test_same_seed_same_draws_whatever_the_chunking(corr_gaussian):
    kwargs = dict(num_chains=3, num_warmup=30, num_draws=40, seed=7, progress=False)
    one = gradmc.sample(corr_gaussian, "mala", **kwargs)
    chunked = gradmc.sample(corr_gaussian, "mala", chunk_size=7, **kwargs)
    np.testing.assert_array_equal(one.draws, chunked.draws)
    np.testing.assert_array_equal(one.stats["acceptance_rate"], chunked.stats["acceptance_rate"])
    other_seed = gradmc.sample(corr_gaussian, "mala", **{**kwargs, "seed": 8})
    assert not np.array_equal(one.draws, other_seed.draws)


@pytest.mark.parametrize("name", ["nuts", "mala"])
def test_a_frozen_warm_up_runs_the_kept_draws_in_its_own_program(corr_gaussian, monkeypatch, name):
    """NUTS's window adaptation and MALA's step-size rule can freeze: the warm-up's compiled
    chunk also runs the kept draws (one program, not two), and they are exactly those of the
    fixed kernel."""
    import gradmc.run.sampling as sampling

    kwargs = dict(num_chains=2, num_warmup=100, num_draws=200, seed=5, progress=False)
    programs = []
    chunk_function = sampling.chunk_function
    monkeypatch.setattr(sampling, "chunk_function", lambda *args: programs.append(args) or chunk_function(*args))
    one = gradmc.sample(corr_gaussian, name, **kwargs)
    assert len(programs) == 1
    plan = sampling._chunk_plan
    monkeypatch.setattr(sampling, "_chunk_plan", lambda *args: plan(*args)._replace(one_program=False))
    two = gradmc.sample(corr_gaussian, name, **kwargs)
    assert len(programs) == 3  # the warm-up's and the fixed kernel's
    np.testing.assert_array_equal(one.draws, two.draws)
    for stat in ("step_size", "acceptance_rate", "num_grad_evals"):
        np.testing.assert_array_equal(one.stats[stat], two.stats[stat])
    for param in one.params:
        np.testing.assert_array_equal(one.params[param], two.params[param])
    assert (one.stats["step_size"] == one.params["step_size"][:, None]).all()  # nothing adapts after warm-up
    assert type(one.final_state) is type(two.final_state)


def test_seed_none_draws_a_seed_that_repeats_the_run(corr_gaussian):
    kwargs = dict(num_chains=2, num_warmup=10, num_draws=8, progress=False)
    fresh = gradmc.sample(corr_gaussian, "rwm", seed=None, **kwargs)
    assert isinstance(fresh.seed, int) and fresh.seed >= 0
    again = gradmc.sample(corr_gaussian, "rwm", seed=fresh.seed, **kwargs)
    np.testing.assert_array_equal(fresh.draws, again.draws)
    with pytest.raises(TypeError, match="seed must be a non-negative integer or None"):
        gradmc.sample(corr_gaussian, "rwm", seed="7", **kwargs)


def test_thinning_keeps_every_kth_step(corr_gaussian):
    kwargs = dict(num_chains=2, num_warmup=10, seed=3, progress=False)
    full = gradmc.sample(corr_gaussian, "rwm", num_draws=12, **kwargs)
    thin = gradmc.sample(corr_gaussian, "rwm", num_draws=4, thinning=3, **kwargs)
    np.testing.assert_array_equal(thin.draws, full.draws[:, 2::3])
    assert thin.draws.shape == (2, 4, 2)


def test_trace_shapes_stats_and_arviz(corr_gaussian):
    trace = gradmc.sample(corr_gaussian, "hmc", num_chains=2, num_warmup=20, num_draws=15, seed=0, progress=False)
    assert trace.draws.shape == (2, 15, 2)
    for name in ("logdensity", "acceptance_rate", "step_size", "num_grad_evals", "diverging", "nonfinite"):
        assert trace.stats[name].shape == (2, 15)
    assert trace.warmup_stats["acceptance_rate"].shape == (2, 20)
    assert np.all(trace.stats["num_grad_evals"] == 10)
    idata = trace.to_arviz()
    assert idata.posterior["x"].shape == (2, 15, 2)
    assert "lp" in idata.sample_stats and "diverging" in idata.sample_stats


def test_kernel_runs_in_a_plain_user_loop():
    """A gradmc kernel behaves like a BlackJAX one: ``state, info = alg.step(key, state)``."""

    def logdensity(x):
        return -0.5 * jnp.sum(x**2)

    for alg in (rwm.as_top_level_api(logdensity, 1.0), mala.as_top_level_api(logdensity, 0.3)):
        state = alg.init(jnp.zeros(3))
        step = jax.jit(alg.step)
        for i in range(5):
            state, info = step(jax.random.key(i), state)
        assert state.position.shape == (3,) and np.isfinite(state.logdensity)
        assert 0.0 <= float(info.acceptance_rate) <= 1.0


def test_nonfinite_proposals_are_rejected_and_counted():
    """The log density is NaN for x0 > 2 and +inf for x0 < -2: never accepted, always flagged."""

    def logdensity(x):
        base = -0.5 * jnp.sum(x**2)
        return jnp.where(x[0] > 2.0, jnp.nan, jnp.where(x[0] < -2.0, jnp.inf, base))

    target = Target("holes", logdensity, Real(2))
    for name in ("rwm", "mala", "hmc", "nuts"):
        trace = gradmc.sample(
            target,
            gradmc.sampler(name, step_size=1.5, **({} if name in ("hmc", "nuts") else {"adapt": None})),
            num_chains=2,
            num_warmup=0,
            num_draws=200,
            seed=1,
            init=np.zeros(2),
            progress=False,
        )
        assert np.all(np.abs(trace.draws[..., 0]) <= 2.0), name
        assert np.all(np.isfinite(trace.stats["logdensity"])), name
        if name != "nuts":  # NUTS folds bad states into its trajectory weights; it never selects them
            assert trace.num_nonfinite > 0, name


def test_nonfinite_initial_point_names_target_and_chain():
    target = Target("bad-start", lambda x: jnp.where(x[0] > 0, jnp.nan, -jnp.sum(x**2)), Real(2))
    init = np.array([[-1.0, 0.0], [1.0, 0.0]])
    with pytest.raises(ValueError, match=r"'bad-start'.*chain 1"):
        gradmc.sample(target, "rwm", num_chains=2, num_warmup=0, num_draws=1, init=init, progress=False)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(num_chains=0), "num_chains"),
        (dict(num_draws=-1), "num_draws"),
        (dict(num_warmup=-5), "num_warmup"),
        (dict(thinning=0), "thinning"),
        (dict(init=np.zeros(3)), "init has shape"),
    ],
)
def test_bad_run_arguments(corr_gaussian, kwargs, message):
    base = dict(num_chains=2, num_warmup=1, num_draws=2, progress=False)
    with pytest.raises(ValueError, match=message):
        gradmc.sample(corr_gaussian, "rwm", **{**base, **kwargs})


@pytest.mark.parametrize(
    "name, options, message",
    [
        ("rwm", dict(step_size=-1.0), "step_size must be positive"),
        ("mala", dict(step_size=0.0), "step_size must be positive"),
        ("rwm", dict(preconditioner=[[1.0, 2.0], [2.0, 1.0]]), "positive definite"),
        ("mala", dict(preconditioner=np.eye(3)), "2x2"),
        ("rwm", dict(target_accept=1.5), r"\(0, 1\)"),
        ("hmc", dict(num_integration_steps=0), "num_integration_steps"),
    ],
)
def test_bad_sampler_options(corr_gaussian, name, options, message):
    with pytest.raises(ValueError, match=message):
        gradmc.sample(
            corr_gaussian, gradmc.sampler(name, **options), num_chains=1, num_warmup=1, num_draws=1, progress=False
        )


def test_unknown_names_list_valid_ones():
    with pytest.raises(gradmc.UnknownNameError, match="valid samplers: .*mala"):
        gradmc.sampler("no-such-sampler")
    with pytest.raises(TypeError, match="has no option"):
        gradmc.sampler("mala", stepsize=0.1)


@pytest.mark.slow
def test_sample_with_extended_switch_returns_target_draws():
    target = gradmc.target("bimodal-1d")
    trace = gradmc.sample(target, "nuts", extended=2, num_chains=2, num_warmup=50, num_draws=40, seed=0, progress=False)
    assert trace.draws.shape == (2, 40, 1) and trace.target == "bimodal-1d"
    assert trace.extended is not None
    with pytest.raises(ValueError, match="N"):
        gradmc.sample(target, "nuts", extended=0, num_chains=1, num_warmup=1, num_draws=1, progress=False)


def test_the_progress_bar_tells_warm_up_from_sampling(corr_gaussian, monkeypatch):
    from gradmc.run import sampling

    shown = []

    class Bar:  # a visible bar that records what it reads
        disable = False
        desc = ""

        def set_description_str(self, text):
            self.desc = text
            shown.append(text)

        def update(self, n):
            pass

        def close(self):
            pass

    monkeypatch.setattr(sampling, "_progress_bar", lambda *args: Bar())
    # gadrwm's kept draws compile a program of their own (its warm-up runs a kernel of its own)
    gradmc.sample(corr_gaussian, "gadrwm", num_chains=2, num_warmup=10, num_draws=8, progress=True)
    name = f"gadrwm on {corr_gaussian.name}"
    phases = [text for text in shown if not text.endswith("(compiling)")]
    assert phases[0] == f"{name}: warm-up" and phases[-1] == f"{name}: sampling"
    assert f"{name}: sampling (compiling)" in shown
