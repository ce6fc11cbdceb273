"""Discrete samplers against exact enumeration (Rhodes & Gutmann 2022, Algs B.1–B.3, eq. 6,
App. G; Martens & Sutskever's block Gibbs), rejection-free PAVG, non-finite handling, and
bad input.

Every sampler runs on targets small enough to enumerate — 3 ordinal coordinates with 4
values, 4 binary, 3 categorical with k = 3 — with a NON-quadratic log density, and its
long-run empirical distribution must be within the TV bound of :func:`tv_and_bound`
(derived from the number of draws and the chains' ESS, false-failure probability ≤ 1%).
A deliberately wrong kernel must exceed the same bound (the test has power).
"""

from __future__ import annotations

import itertools
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.stats import norm

import gradmc
from gradmc.adapt.warmup import bind
from gradmc.base import Target
from gradmc.diagnostics.ess import geyer_ess
from gradmc.diagnostics.health import RunWarning
from gradmc.discrete import avg, block_gibbs, fallback, gibbs, gwg, ncg, ordinal_ncg, proposals
from gradmc.discrete.gradient_samplers import MAX_STEP_SIZE, TARGET_ACCEPT
from gradmc.registry import sampler as recipe
from gradmc.run import run_chains as drive_sampler
from gradmc.spaces import Binary, Categorical, Ordinal, Real, Spin
from gradmc.targets.quadratic import quadratic


def all_states(space) -> np.ndarray:
    """Every position of a small space, shape (k^d, *event); the first coordinate varies slowest."""
    index = np.array(list(itertools.product(range(space.num_values), repeat=space.d)))
    return np.asarray(space.from_index(index))


def state_ids(space, index) -> np.ndarray:
    """Value indices (..., d) -> row in :func:`all_states`."""
    return (np.asarray(index) * space.num_values ** np.arange(space.d)[::-1]).sum(-1)


def exact_probs(target: Target) -> np.ndarray:
    """p(s) of every state by enumeration (float64 normalisation)."""
    logf = np.asarray(jax.vmap(target.logdensity_fn)(jnp.asarray(all_states(target.space))), np.float64)
    p = np.exp(logf - logf.max())
    return p / p.sum()


def nonquadratic_target(space, seed: int = 0, name: str = "nonquadratic") -> Target:
    """f(s) = bᵀs + sᵀJs + cos(wᵀs) + 0.05 Σ s³ on the flattened position: smooth on real
    inputs (so gradients exist) and not quadratic, so no sampler is exact by construction."""
    rng = np.random.default_rng(seed)
    n = space.dim
    g = rng.normal(scale=0.3, size=(n, n))
    J = jnp.asarray((g + g.T) / 2, jnp.float32)
    b = jnp.asarray(rng.normal(scale=0.5, size=n), jnp.float32)
    w = jnp.asarray(rng.normal(scale=1.0, size=n), jnp.float32)

    def logdensity(s):
        x = jnp.reshape(s, (-1,))
        return b @ x + x @ J @ x + jnp.cos(w @ x) + 0.05 * jnp.sum(x**3)

    return Target(name, logdensity, space)


ORDINAL = Ordinal([-1.0, 0.0, 0.5, 2.0], 3)  # 3 coordinates x 4 (unevenly spaced) values
BINARY = Binary(4)
CATEGORICAL = Categorical(3, 3)


def run_chains(
    sampler, target: Target, *, num_chains: int, num_draws: int, num_warmup: int = 0, seed: int = 0, init=None
):
    """Drive a :class:`~gradmc.base.BoundSampler` like the runner (chains vmapped with axis name
    "chain", one jitted scan per phase). Returns value indices (chain, draw, d) and stats."""
    key = jax.random.key(seed)
    if init is None:
        init = jax.vmap(target.space.sample_uniform)(jax.random.split(jax.random.fold_in(key, 0), num_chains))
    init = jnp.broadcast_to(jnp.asarray(init, jnp.float32), (num_chains, *target.space.event_shape))
    chain_keys = jax.random.split(jax.random.fold_in(key, 1), num_chains)

    def observe(states, stats):
        position = jax.vmap(sampler.position)(states)
        finite = jnp.all(jnp.isfinite(position), axis=tuple(range(1, position.ndim)))
        return target.space.to_index(position).astype(jnp.int8), finite, stats

    @jax.jit
    def go(init):
        _, params, out = drive_sampler(sampler, chain_keys, chain_keys, init, num_warmup, num_draws, observe)
        return out, params

    (index, finite, stats), params = go(init)
    swap = lambda x: np.swapaxes(np.asarray(x), 0, 1)  # noqa: E731
    return {"index": swap(index), "finite": swap(finite), "stats": jax.tree.map(swap, stats), "params": params}


def tv_and_bound(space, index, probs, alpha: float = 0.01) -> tuple[float, float]:
    """Empirical TV distance to ``probs`` and the bound it must stay under.

    Derivation: p̂_x − p_x is asymptotically N(0, σ_x²) with σ_x² = p_x(1 − p_x)/ESS_x,
    ESS_x the effective sample size of the indicator 1{s = x} (summed over chains; Geyer
    initial positive sequence; chains whose indicator never changes contribute nothing,
    which can only lower ESS_x and loosen the bound). A union bound over the m states
    gives P(∃x: |p̂_x − p_x| > z σ_x) ≤ α for z = Φ⁻¹(1 − α/(2m)), and on the complement
    TV = ½ Σ_x |p̂_x − p_x| ≤ ½ z Σ_x σ_x. So a correct sampler fails with probability ≤ α.
    """
    ids = state_ids(space, index)
    m = probs.size
    p_hat = np.bincount(ids.ravel(), minlength=m) / ids.size
    ess = np.array([np.nansum(geyer_ess((ids == x).astype(np.float64))) for x in range(m)])
    ess = np.where(ess > 0, ess, np.nanmin(np.where(ess > 0, ess, np.nan)))
    sigma = np.sqrt(probs * (1 - probs) / ess)
    z = norm.ppf(1 - alpha / (2 * m))
    return 0.5 * float(np.abs(p_hat - probs).sum()), 0.5 * z * float(sigma.sum())


# ---------------------------------------------------------------------------------------
# Long-run distribution vs exact enumeration
# ---------------------------------------------------------------------------------------

SPACES = {"ordinal": ORDINAL, "binary": BINARY, "categorical": CATEGORICAL}
TARGETS = {name: nonquadratic_target(space, seed=1, name=f"nonquadratic-{name}") for name, space in SPACES.items()}
_PROBS: dict[str, np.ndarray] = {}


def probs_of(name: str) -> np.ndarray:
    if name not in _PROBS:
        _PROBS[name] = exact_probs(TARGETS[name])
    return _PROBS[name]


# (registry name, options, warm-up steps). NCG, AVG and GWG adapt their step size / number
# of flips in warm-up and PAVG learns M (Alg. F.4/F.5): the kept draws come from the kernel
# with the adapted parameters.
SAMPLERS = {
    "ncg": ("ncg", {"step_size": 1.0}, 400),
    "avg": ("avg", {"step_size": 1.0}, 400),
    "pavg": ("pavg", {"step_size": 1.0}, 400),
    "gwg": ("gwg", {}, 400),
    "gwg-one-flip": ("gwg", {"adapt": None}, 0),
    "gwg-three-flips": ("gwg", {"num_flips": 3, "adapt": None}, 0),
    "ordinal-gwg": ("ordinal-gwg", {"radius": 2}, 400),
    "ordinal-ncg": ("ordinal-ncg", {"radius": 1}, 400),
    "mh-uniform": ("mh-uniform", {"radius": 1}, 0),
    "mh-uniform-partial": ("mh-uniform", {"radius": 2, "move_probability": 0.4, "adapt": None}, 0),
    "mh-uniform-adapted": ("mh-uniform", {}, 400),
    "v-pdhams-learned-w": ("v-pdhams", {}, 400),
    "o-pdhams-learned-w": ("o-pdhams", {}, 400),
    "v-dhams": ("v-dhams", {}, 400),
    "o-dhams": ("o-dhams", {}, 400),
    "linear-gibbs": ("linear-gibbs", {}, 0),
    "gibbs-random": ("gibbs", {"scan": "random"}, 0),
    "gibbs-systematic": ("gibbs", {"scan": "systematic"}, 0),
}
# Each sampler on one space in the default run (every space kind covered several times;
# ordinal-ncg's default test is the wide ordinal space below); the full grid runs with -m slow.
DEFAULT = {
    ("ncg", "ordinal"),
    ("avg", "categorical"),
    ("pavg", "categorical"),
    ("gwg", "binary"),
    ("gwg-one-flip", "ordinal"),
    ("gwg-three-flips", "categorical"),
    ("o-pdhams-learned-w", "binary"),
    ("v-pdhams-learned-w", "categorical"),
    ("v-dhams", "categorical"),
    ("o-dhams", "categorical"),
    ("ordinal-gwg", "ordinal"),
    ("mh-uniform", "categorical"),
    ("mh-uniform-partial", "ordinal"),
    ("mh-uniform-adapted", "binary"),
    ("gibbs-random", "binary"),
    ("gibbs-systematic", "ordinal"),
    ("linear-gibbs", "categorical"),
}
GRID = [
    pytest.param(s, sp, marks=() if (s, sp) in DEFAULT else pytest.mark.slow, id=f"{s}-{sp}")
    for s in SAMPLERS
    for sp in SPACES
    if not (sp == "categorical" and s in ("ordinal-gwg", "ordinal-ncg"))
]
NUM_CHAINS, NUM_DRAWS = 32, 10_000


def _slow_unless_default(space_name):
    return pytest.param(space_name, marks=() if space_name == "categorical" else pytest.mark.slow)


@pytest.mark.parametrize("sampler_name, space_name", GRID)
def test_matches_exact_distribution(sampler_name, space_name):
    name, options, num_warmup = SAMPLERS[sampler_name]
    target = TARGETS[space_name]
    sampler = recipe(name, **options).bind(target, num_warmup)
    out = run_chains(sampler, target, num_chains=NUM_CHAINS, num_draws=NUM_DRAWS, num_warmup=num_warmup, seed=3)
    assert out["finite"].all() and not out["stats"].nonfinite.any()
    tv, bound = tv_and_bound(target.space, out["index"], probs_of(space_name))
    assert tv < bound, f"{sampler_name} on {space_name}: TV {tv:.4f} >= bound {bound:.4f}"
    jumps = out["stats"].extra["jump"]
    assert np.all(jumps >= 0) and jumps.mean() > 0


@pytest.mark.parametrize("space_name", [_slow_unless_default(n) for n in SPACES])
def test_with_its_fallback_move_on_ncg_matches_exact_distribution(space_name, monkeypatch):
    """NCG followed by the fallback's single-site move (:mod:`gradmc.discrete.fallback`,
    switched on by a threshold no run stays under) keeps the target on every value set.
    """
    monkeypatch.setattr(fallback, "FROZEN_RATE", 2.0)
    target = TARGETS[space_name]
    sampler = recipe("ncg", step_size=1.0).bind(target, 400)
    out = run_chains(sampler, target, num_chains=NUM_CHAINS, num_draws=NUM_DRAWS, num_warmup=400, seed=3)
    assert np.all(np.asarray(out["params"]["fallback"].value))
    assert np.all(out["stats"].num_grad_evals == 3)
    tv, bound = tv_and_bound(target.space, out["index"], probs_of(space_name))
    assert tv < bound, f"ncg + fallback on {space_name}: TV {tv:.4f} >= bound {bound:.4f}"


def _wrong_ncg_kernel(key, state, logdensity_fn, space, step_size):
    """NCG's proposal accepted as if it were symmetric (the q-ratio of eq. 26 dropped)."""
    key_prop, key_mh = jax.random.split(key)
    a, b = ncg.coefficients(state, step_size)
    proposed = proposals.init(proposals.factorised_proposal(key_prop, a, b, space), logdensity_fn)
    return proposals.metropolis(key_mh, state, proposed, 0.0)


def test_tv_bound_detects_a_wrong_kernel():
    """The same TV bound rejects a kernel that targets the wrong distribution."""
    target = TARGETS["ordinal"]
    sampler = bind(
        "wrong-ncg",
        lambda key, x: proposals.init(x, target.logdensity_fn),
        lambda key, state, step_size: _wrong_ncg_kernel(key, state, target.logdensity_fn, target.space, step_size),
        {"step_size": jnp.float32(1.0)},
        lambda state, info, params: proposals.stats(state, info, params["step_size"]),
    )
    out = run_chains(sampler, target, num_chains=NUM_CHAINS, num_draws=NUM_DRAWS, seed=3)
    tv, bound = tv_and_bound(target.space, out["index"], probs_of("ordinal"))
    assert tv > bound, f"wrong kernel not detected: TV {tv:.4f} <= bound {bound:.4f}"


# ---------------------------------------------------------------------------------------
# Rejection-free PAVG with the true M, and block Gibbs, on quadratic targets
# ---------------------------------------------------------------------------------------

QUADRATIC_SPACES = {
    "ordinal": ORDINAL,
    "categorical": CATEGORICAL,
    "binary": BINARY,
    "spin": Spin(4),
}
QUADRATIC = {name: quadratic(space=space, scale=1.0, seed=7) for name, space in QUADRATIC_SPACES.items()}


def _slow_unless(names):
    return lambda name: pytest.param(name, marks=() if name in names else pytest.mark.slow)


@pytest.mark.parametrize(
    "space_name, step_size",
    [
        pytest.param(n, e, marks=() if (n, e) in {("ordinal", 0.5), ("categorical", 1000.0)} else pytest.mark.slow)
        for n in QUADRATIC_SPACES
        for e in (0.5, 1000.0)
    ],
)
def test_pavg_with_true_hessian_is_rejection_free(space_name, step_size):
    """For f = sᵀJs + bᵀs and M = J + Jᵀ (negative eigenvalues included, eq. 39) the
    log MH ratio of eq. 28 is 0; float32 round-off of f (|f| ≲ 30) leaves
    |log ratio| ≲ 1e-4, i.e. acceptance probability ≥ 1 − 1e-3 at every step."""
    target = QUADRATIC[space_name]
    M = block_gibbs.hessian_of(target)
    assert np.linalg.eigvalsh(M).min() < 0  # the eq. 39 shift is exercised
    sampler = recipe("pavg", step_size=step_size, M=M, adapt_gamma=False).bind(target, 0)
    out = run_chains(sampler, target, num_chains=8, num_draws=2000, seed=5)
    acc = out["stats"].acceptance_rate
    assert acc.min() >= 1 - 1e-3 and acc.mean() >= 1 - 1e-4
    assert out["stats"].extra["jump"].mean() > 0  # it moves (small ε moves rarely on Spin)


@pytest.mark.parametrize("space_name", [_slow_unless({"ordinal", "spin"})(n) for n in QUADRATIC_SPACES])
def test_block_gibbs_exact_on_quadratic(space_name):
    """Block Gibbs needs no MH test (acceptance 1 by construction) and hits the exact law."""
    target = QUADRATIC[space_name]
    sampler = recipe("block-gibbs").bind(target, 0)
    out = run_chains(sampler, target, num_chains=NUM_CHAINS, num_draws=NUM_DRAWS, seed=11)
    stats = out["stats"]
    assert stats.is_accepted.all() and (stats.acceptance_rate == 1).all() and not stats.nonfinite.any()
    tv, bound = tv_and_bound(target.space, out["index"], exact_probs(target))
    assert tv < bound, f"block Gibbs on {space_name}: TV {tv:.4f} >= bound {bound:.4f}"


@pytest.mark.parametrize("space_name", [_slow_unless_default(n) for n in SPACES])
def test_linear_gibbs_draws_the_exact_law_at_once_where_the_log_density_is_linear(space_name):
    """On f(s) = aᵀs every site is drawn from its exact conditional: acceptance 1, and the
    sites change far more often than a local move changes them."""
    space = SPACES[space_name]
    weights = jnp.asarray(np.random.default_rng(5).normal(size=space.event_shape), jnp.float32)
    target = Target("linear", lambda s: jnp.sum(weights * s), space)
    sampler = recipe("linear-gibbs").bind(target, 0)
    out = run_chains(sampler, target, num_chains=NUM_CHAINS, num_draws=2000, seed=11)
    assert (np.asarray(out["stats"].acceptance_rate) > 1 - 1e-5).all()
    tv, bound = tv_and_bound(target.space, out["index"], exact_probs(target))
    assert tv < bound, f"linear-gibbs on {space_name}: TV {tv:.4f} >= bound {bound:.4f}"


# ---------------------------------------------------------------------------------------
# Non-finite log density / gradient: rejected and flagged
# ---------------------------------------------------------------------------------------

_BAD_VALUE = float(ORDINAL.values[2])  # states with s_0 = 0.5 are made non-finite


def _nan_grad_target():
    base = TARGETS["ordinal"].logdensity_fn
    # 0·√|s_0 − v|: the value is finite everywhere, the gradient is NaN at s_0 = v
    return Target("nan-grad", lambda s: base(s) + 0.0 * jnp.sqrt(jnp.abs(s[0] - _BAD_VALUE)), ORDINAL)


def _nan_value_target():
    base = TARGETS["ordinal"].logdensity_fn
    return Target("nan-value", lambda s: base(s) + jnp.where(s[0] == _BAD_VALUE, jnp.nan, 0.0), ORDINAL)


START = np.array([-1.0, 0.0, 0.5], np.float32)  # s_0 = −1: a finite state


@pytest.mark.parametrize(
    "name, options",
    [
        ("ncg", {"step_size": 1.0}),
        pytest.param("avg", {"step_size": 1.0}, marks=pytest.mark.slow),
        ("pavg", {"step_size": 1.0, "M": -np.eye(3)}),
        ("gwg", {}),
        pytest.param("ordinal-gwg", {"radius": 3}, marks=pytest.mark.slow),
    ],
)
def test_nan_gradient_proposals_are_rejected_and_flagged(name, options):
    target = _nan_grad_target()
    sampler = recipe(name, **options).bind(target, 0)
    out = run_chains(sampler, target, num_chains=4, num_draws=1500, seed=2, init=START)
    assert out["finite"].all()
    assert not np.any(out["index"][..., 0] == 2), "the chain entered a state with a NaN gradient"
    stats = out["stats"]
    assert stats.nonfinite.any()
    assert not np.any(stats.is_accepted & stats.nonfinite)
    assert np.all(np.isfinite(stats.acceptance_rate)) and np.all(np.isfinite(stats.logdensity))


@pytest.mark.parametrize(
    "name, options",
    [("gibbs", {}), ("mh-uniform", {"radius": 2}), pytest.param("ncg", {"step_size": 1.0}, marks=pytest.mark.slow)],
)
def test_nan_logdensity_states_are_never_entered(name, options):
    target = _nan_value_target()
    sampler = recipe(name, **options).bind(target, 0)
    out = run_chains(sampler, target, num_chains=4, num_draws=1500, seed=2, init=START)
    assert out["finite"].all() and not np.any(out["index"][..., 0] == 2)
    assert out["stats"].nonfinite.any() and np.all(np.isfinite(out["stats"].logdensity))


# ---------------------------------------------------------------------------------------
# PAVG preconditioner pieces (App. F)
# ---------------------------------------------------------------------------------------

from gradmc.adapt import preconditioner as pc  # noqa: E402
from gradmc.curvature import pavg_model  # noqa: E402


def test_preconditioner_root_and_negative_eigenvalues():
    """R² = M + d_ε I with d_ε = max(0, −λ_min) + 2/ε (eq. 39)."""
    rng = np.random.default_rng(0)
    g = rng.normal(size=(5, 5))
    M = (g + g.T) / 2
    lam_min = np.linalg.eigvalsh(M).min()
    assert lam_min < 0
    p = pavg_model.make_preconditioner(M, 0.5)
    np.testing.assert_allclose(float(p.d_eps), -lam_min + 4.0, rtol=1e-5)
    np.testing.assert_allclose(np.asarray(p.root @ p.root), M + float(p.d_eps) * np.eye(5), atol=1e-4)
    np.testing.assert_allclose(np.asarray(p.root), np.asarray(p.root).T, atol=1e-5)
    psd = pavg_model.make_preconditioner(g @ g.T, 2.0)
    np.testing.assert_allclose(float(psd.d_eps), 1.0, rtol=1e-5)  # M ⪰ 0: plain 2/ε


def test_least_squares_scale_and_candidate_choice():
    """With y_t = ½ Δᵀ(3C)Δ exactly, γ0 = 3 with zero loss for C, and C wins over P (eqs 36–37)."""
    rng = np.random.default_rng(1)
    g = rng.normal(size=(4, 4))
    C = jnp.asarray(g @ g.T / 4 + np.eye(4) * 0.1, jnp.float32)
    P = jnp.linalg.inv(C)
    deltas = jnp.asarray(rng.integers(-1, 2, size=(200, 4)), jnp.float32)
    ys = 0.5 * jnp.einsum("ti,ij,tj->t", deltas, 3.0 * C, deltas)
    gamma0, loss = pc.least_squares_scale(C, deltas, ys)
    np.testing.assert_allclose(float(gamma0), 3.0, rtol=1e-5)
    assert float(loss) < 1e-3 * float(jnp.sum(ys**2))
    np.testing.assert_allclose(np.asarray(pc.choose_candidate([P, C], deltas, ys)), 3.0 * np.asarray(C), rtol=1e-4)
    zero_gamma, _ = pc.least_squares_scale(C, jnp.zeros((5, 4)), jnp.zeros(5))
    assert float(zero_gamma) == 0.0  # no moves: fall back to M = 0 (AVG)


@pytest.mark.parametrize(
    "gamma, gamma_old, a_new, a_old, expected",
    [
        (2.0, 1.0, 1.0, 0.5, 2.0 * 1.25),  # increased and improved: keep going up (multiplicative)
        (2.0, 1.0, 0.5, 1.0, 2.0 * 0.75),  # increased, got worse: go down
        (0.5, 1.0, 1.0, 0.5, 0.5 - 0.25),  # decreased and improved: keep going down (additive, |γ| < 1)
        (0.5, 1.0, 0.5, 1.0, 0.5 + 0.25),  # decreased, got worse: go up
        (1.0, 1.0, 1.0, 1.0, 1.25),  # equal counts as increased and improved
    ],
)
def test_adapt_gamma_rule(gamma, gamma_old, a_new, a_old, expected):
    new, old = pc.adapt_gamma(jnp.float32(gamma), jnp.float32(gamma_old), 0.25, a_new, a_old)
    np.testing.assert_allclose(float(new), expected, rtol=1e-6)
    assert float(old) == gamma


@pytest.mark.slow
def test_pavg_learns_preconditioner_with_the_runner():
    """Alg. F.4 through gradmc.sample: pooled across chains (identical M and γ per chain),
    adaptation stops at finalize, statistics carry the jump and γ; with ε kept as given
    the kept kernel uses ``step_size`` (d_ε = max(0, −λ_min) + 2/ε), not the pre-fit
    ``initial_step_size``."""
    target = TARGETS["binary"]
    trace = gradmc.sample(
        target,
        recipe("pavg", step_size=1.0, initial_step_size=0.3, adapt=None),
        num_chains=4,
        num_warmup=400,
        num_draws=300,
        seed=0,
        progress=False,
    )
    precond, gamma = trace.params["precond"], trace.params["gamma"]
    assert precond.matrix.shape == (4, 4, 4)
    np.testing.assert_allclose(precond.matrix, np.broadcast_to(precond.matrix[:1], precond.matrix.shape), atol=1e-5)
    assert np.all(np.isfinite(precond.root)) and np.all(np.isfinite(gamma)) and np.allclose(gamma, gamma[0])
    assert np.abs(precond.matrix).max() > 0  # M was fitted (not left at 0)
    lam_min = np.linalg.eigvalsh(precond.matrix[0]).min()
    np.testing.assert_allclose(precond.d_eps[0], max(0.0, -lam_min) + 2.0, rtol=1e-4)
    assert trace.stats["jump"].shape == (4, 300) and np.all(trace.stats["gamma"] == gamma[0])
    target.space.validate(trace.draws)


def _sk_spin_target(d: int = 12, seed: int = 0) -> Target:
    """A small Sherrington–Kirkpatrick spin glass 0.5 sᵀJs + hᵀs on Spin(d)."""
    rng = np.random.default_rng(seed)
    g = rng.normal(size=(d, d)) / np.sqrt(d)
    J = (g + g.T) / 2
    np.fill_diagonal(J, 0.0)
    J, h = jnp.asarray(J, jnp.float32), jnp.asarray(rng.normal(scale=0.2, size=d), jnp.float32)
    return gradmc.from_function(lambda s: 0.5 * s @ J @ s + h @ s, space=Spin(d))


@pytest.mark.slow
def test_pavg_adapts_its_step_size_and_freezes_it():
    """On ±1 spins PAVG's d_ε s_i² term is constant, so at the default ε = 0.2 the auxiliary
    noise pins every spin (d_ε = 10: acceptance near 1, almost no moves). Adapted, ε moves
    until the pooled acceptance reaches the target (or ε its cap), the same ε for every
    chain, and the kept draws use the final ε only: the recorded step size and d_ε of the
    kept kernel agree with it."""
    target = _sk_spin_target()
    run = dict(num_chains=4, num_warmup=600, num_draws=400, seed=0, progress=False)
    fixed = gradmc.sample(target, recipe("pavg", adapt=None), **run)
    adapted = gradmc.sample(target, recipe("pavg"), **run)
    eps = np.asarray(adapted.params["step_size"])
    assert np.allclose(eps, eps[0]) and eps[0] != pytest.approx(0.2)
    assert np.all(adapted.stats["step_size"] == eps[0])  # frozen: nothing changes in the kept draws
    precond = adapted.params["precond"]
    lam_min = np.linalg.eigvalsh(precond.matrix[0]).min()
    np.testing.assert_allclose(precond.d_eps[0], max(0.0, -lam_min) + 2.0 / eps[0], rtol=1e-4)
    # the kept mean acceptance over 4 x 400 steps has a standard error below 0.02 (ESS of
    # the acceptance ≥ 600); ε stops at its cap only where the proposal accepts more than
    # the target there, else dual averaging's final ε lands near the target
    acc_fixed = float(fixed.stats["acceptance_rate"].mean())
    acc_adapted = float(adapted.stats["acceptance_rate"].mean())
    assert acc_fixed > 0.9, acc_fixed
    if eps[0] == pytest.approx(MAX_STEP_SIZE):
        assert acc_adapted > TARGET_ACCEPT - 0.05, acc_adapted
    else:
        assert abs(acc_adapted - TARGET_ACCEPT) < 0.1, acc_adapted
    jump_fixed, jump_adapted = float(fixed.stats["jump"].mean()), float(adapted.stats["jump"].mean())
    assert jump_adapted > 3 * jump_fixed, (jump_fixed, jump_adapted)


# ---------------------------------------------------------------------------------------
# Bad input
# ---------------------------------------------------------------------------------------

BIN = TARGETS["binary"]


@pytest.mark.parametrize(
    "name, options, match",
    [
        ("ncg", {"step_size": 0.0}, "step size"),
        ("avg", {"step_size": -1.0}, "step size"),
        ("pavg", {"step_size": np.nan, "M": np.eye(4)}, "step size"),
        ("pavg", {"initial_step_size": 0.0}, "initial step size"),
        ("pavg", {"M": np.eye(3)}, "4x4"),
        ("pavg", {"M": np.full((4, 4), np.nan)}, "non-finite"),
        ("pavg", {"M": np.triu(np.ones((4, 4)))}, "symmetric"),
        ("ordinal-gwg", {"radius": 0}, "radius"),
        ("ordinal-gwg", {"radius": 1.5}, "radius"),
        ("mh-uniform", {"radius": 0}, "radius"),
        ("mh-uniform", {"move_probability": 0.0}, "move_probability"),
        ("mh-uniform", {"move_probability": 1.5}, "move_probability"),
        ("mh-uniform", {"move_probability": np.nan}, "move_probability"),
        ("gibbs", {"scan": "sideways"}, "scan"),
        ("block-gibbs", {}, "quadratic.*pavg-variance"),
        ("block-gibbs", {"M": np.eye(4), "step_size": 0}, "step size"),
    ],
)
def test_bad_options_raise(name, options, match):
    with pytest.raises(ValueError, match=match):
        recipe(name, **options).bind(BIN, 1000)


def test_pavg_learning_needs_warmup():
    with pytest.raises(ValueError, match="num_warmup"):
        recipe("pavg").bind(BIN, 50)


def test_pavg_warns_that_a_dense_m_is_slow_at_large_d(monkeypatch):
    """Above the dense limit a learned M costs a d × d eigendecomposition per refit: the
    warning names the samplers that learn a sparse W instead; a given M does not warn."""
    import gradmc.discrete.gradient_samplers as gradient_samplers

    monkeypatch.setattr(gradient_samplers, "MAX_LEARNED_W_DIM", 3)
    with pytest.warns(RunWarning, match="dense 4 x 4 M.*pavg-variance"):
        recipe("pavg").bind(BIN, 400)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        recipe("pavg", M=np.eye(4)).bind(BIN, 400)


def test_ordinal_gwg_rejects_categorical():
    with pytest.raises(ValueError, match="ordered"):
        recipe("ordinal-gwg", radius=2).bind(TARGETS["categorical"], 0)


@pytest.mark.parametrize("name", ["ncg", "avg", "gwg", "mh-uniform", "gibbs", "block-gibbs"])
def test_continuous_target_is_refused(name):
    target = Target("gauss", lambda x: -0.5 * jnp.sum(x**2), Real(2))
    with pytest.raises(ValueError, match="discrete"):
        recipe(name).bind(target, 0)


def test_runner_refuses_start_outside_space():
    with pytest.raises(ValueError, match="outside the value set"):
        gradmc.sample(BIN, recipe("ncg"), num_chains=2, num_warmup=0, num_draws=5, init=np.full(4, 0.5), progress=False)


def test_top_level_api_runs_a_plain_loop():
    """BlackJAX contract: ``alg.init(x)`` / ``alg.step(key, state)`` in a user loop."""
    target = TARGETS["ordinal"]
    alg = ncg.as_top_level_api(target.logdensity_fn, ORDINAL, 1.0)
    state = alg.init(START)
    state, info = jax.jit(alg.step)(jax.random.key(0), state)
    ORDINAL.validate(np.asarray(state.position))
    assert set(info._fields) >= {"acceptance_rate", "is_accepted", "nonfinite", "jump"}
    with pytest.raises(ValueError, match="step size"):
        avg.as_top_level_api(target.logdensity_fn, ORDINAL, -1.0)
    with pytest.raises(ValueError, match="radius"):
        gwg.as_top_level_api(target.logdensity_fn, ORDINAL, 0)


# ---------------------------------------------------------------------------------------
# Ordinal NCG on a wide value set: two ordinal coordinates with 8 unevenly spaced values
# (64 states). With radius 1 or 2 most moves are cut by the window and, at the ends of the
# value set, the window holds fewer values, so the forward and reverse normalisers differ; a
# kernel that forgets the reverse window's normaliser must exceed the TV bound.
# ---------------------------------------------------------------------------------------

WIDE = Ordinal([-2.0, -1.5, -0.5, 0.0, 0.3, 1.0, 1.2, 2.5], 2)
TARGET = nonquadratic_target(WIDE, seed=4, name="nonquadratic-wide-ordinal")


@pytest.fixture(scope="module")
def wide_probs():
    return exact_probs(TARGET)


@pytest.mark.parametrize("radius", [1, pytest.param(2, marks=pytest.mark.slow)])
def test_ordinal_ncg_matches_exact_distribution(radius, wide_probs):
    sampler = recipe("ordinal-ncg", radius=radius).bind(TARGET, 400)
    out = run_chains(sampler, TARGET, num_chains=NUM_CHAINS, num_draws=NUM_DRAWS, num_warmup=400, seed=5)
    assert out["finite"].all() and not out["stats"].nonfinite.any()
    tv, bound = tv_and_bound(WIDE, out["index"], wide_probs)
    assert tv < bound, f"ordinal-ncg r={radius}: TV {tv:.4f} >= bound {bound:.4f}"
    index = out["index"].astype(np.int32)
    assert np.abs(np.diff(index, axis=1)).max() <= radius  # no move leaves the window
    assert np.asarray(out["params"]["step_size"]).std() == 0  # one adapted ε per chain, frozen


def _forgetful_kernel(key, state, logdensity_fn, space, step_size, radius):
    """Ordinal NCG scoring the reverse move with the forward window's normaliser: wrong
    wherever the two windows hold different numbers of values (near the ends)."""
    key_prop, key_mh = jax.random.split(key)
    index = space.to_index(state.position)
    logits, window = ordinal_ncg.window_logits(index, *ncg.coefficients(state, step_size), space, radius)
    chosen, log_forward = proposals.sample_logits_scored(key_prop, logits)
    new_index = jnp.take_along_axis(window, chosen[:, None], axis=1)[:, 0]
    proposed = proposals.init(space.from_index(new_index), logdensity_fn)
    rev, _ = ordinal_ncg.window_logits(new_index, *ncg.coefficients(proposed, step_size), space, radius)
    back = jnp.take_along_axis(rev, (index - new_index + radius)[:, None], axis=1)[:, 0]
    log_reverse = back - jax.nn.logsumexp(logits, axis=1)  # the wrong normaliser
    return proposals.metropolis(key_mh, state, proposed, jnp.sum(log_reverse) - jnp.sum(log_forward))


def test_tv_bound_detects_ordinal_ncg_with_the_wrong_normaliser(wide_probs):
    sampler = bind(
        "forgetful-ordinal-ncg",
        lambda key, x: proposals.init(x, TARGET.logdensity_fn),
        lambda key, state, step_size: _forgetful_kernel(key, state, TARGET.logdensity_fn, WIDE, step_size, 1),
        {"step_size": jnp.float32(50.0)},
        lambda state, info, params: proposals.stats(state, info, params["step_size"]),
    )
    out = run_chains(sampler, TARGET, num_chains=NUM_CHAINS, num_draws=NUM_DRAWS, seed=5)
    tv, bound = tv_and_bound(WIDE, out["index"], wide_probs)
    assert tv > bound, f"wrong kernel not detected: TV {tv:.4f} <= bound {bound:.4f}"


@pytest.mark.parametrize("radius", [1, pytest.param(2, marks=pytest.mark.slow)])
def test_gibbs_on_a_window_of_values_matches_exact_distribution(radius, wide_probs):
    """Gibbs drawing from the conditional on 2r + 1 values around the current one keeps the
    exact law by its MH test, where the windows at the ends of the value set hold fewer values."""
    sampler = recipe("gibbs", radius=radius).bind(TARGET, 0)
    out = run_chains(sampler, TARGET, num_chains=NUM_CHAINS, num_draws=NUM_DRAWS, seed=5)
    assert out["finite"].all() and not out["stats"].nonfinite.any()
    tv, bound = tv_and_bound(WIDE, out["index"], wide_probs)
    assert tv < bound, f"gibbs r={radius}: TV {tv:.4f} >= bound {bound:.4f}"
    index = out["index"].astype(np.int32)
    assert np.abs(np.diff(index, axis=1)).max() <= radius  # one site a step, within its window
    acceptance = np.asarray(out["stats"].acceptance_rate)
    assert acceptance.min() < 1 and acceptance.mean() > 0.5  # the test rejects some moves, not most


def _window_draw_without_test(key, state, logdensity_fn, space, radius):
    """Gibbs on a window of values, every draw kept: wrong wherever the windows' normalisers differ."""
    key_site, key_value = jax.random.split(key)
    site = jax.random.randint(key_site, (), 0, space.d)
    window = space.to_index(state.position[site]) + jnp.arange(-radius, radius + 1)
    values, logits, _ = gibbs._conditional(state.position, site, window, logdensity_fn, space)
    chosen = proposals.sample_logits(key_value, logits)
    new = gibbs.GibbsState(state.position.at[site].set(values[chosen]), logits[chosen], state.counter + 1)
    jump = jnp.sum(jnp.abs(new.position - state.position))
    return new, proposals.DiscreteInfo(jnp.float32(1), jnp.bool_(True), jnp.bool_(False), jnp.float32(0), jump)


def test_tv_bound_detects_gibbs_on_a_window_without_its_test(wide_probs):
    sampler = bind(
        "window-gibbs-without-test",
        lambda key, x: gibbs.init(x, TARGET.logdensity_fn),
        lambda key, state: _window_draw_without_test(key, state, TARGET.logdensity_fn, WIDE, 1),
        {},
        lambda state, info, params: proposals.stats(state, info, num_grad_evals=0),
    )
    out = run_chains(sampler, TARGET, num_chains=NUM_CHAINS, num_draws=NUM_DRAWS, seed=5)
    tv, bound = tv_and_bound(WIDE, out["index"], wide_probs)
    assert tv > bound, f"wrong kernel not detected: TV {tv:.4f} <= bound {bound:.4f}"


def test_gibbs_reads_the_current_values_log_density_from_its_state():
    """A step over the whole value set evaluates the k − 1 other values and takes the current
    one's log density from the state (which a composed sweep's refresh keeps current): a state
    that claims an overwhelming density stays, one that claims none moves, one that is NaN
    moves and is flagged."""
    space = Ordinal(np.arange(5), 1)
    kernel = gibbs.build_kernel()

    def logdensity_fn(x):
        return -0.5 * jnp.sum((x - 2.0) ** 2)

    position = jnp.array([1.0])
    keys = jax.random.split(jax.random.key(0), 200)

    def steps(claimed):
        state = gibbs.GibbsState(position, jnp.float32(claimed), jnp.int32(0))
        new, info = jax.vmap(lambda key: kernel(key, state, logdensity_fn, space))(keys)
        return np.asarray(new.position[:, 0]), np.asarray(info.nonfinite)

    stayed, flagged = steps(1e4)
    assert (stayed == 1.0).all() and not flagged.any()
    moved, flagged = steps(-1e4)
    assert (moved != 1.0).all() and not flagged.any()
    moved, flagged = steps(np.nan)
    assert (moved != 1.0).all() and np.isin(moved, [0.0, 2.0, 3.0, 4.0]).all() and flagged.all()
    stats = recipe("gibbs").bind(Target("ordinal", logdensity_fn, space), 0)
    state = stats.init(jax.random.key(0), position)
    assert float(stats.step(jax.random.key(1), state, {})[1].extra["logdensity_evals"]) == space.num_values - 1


def test_gibbs_radius_needs_ordered_values_and_an_integer():
    with pytest.raises(ValueError, match="Ordinal or Count"):
        recipe("gibbs", radius=2).bind(TARGETS["binary"], 0)
    with pytest.raises(ValueError, match="radius"):
        recipe("gibbs", radius=0).bind(TARGET, 0)


def test_an_ordinal_ncg_window_holding_every_value_is_ncg():
    """With r ≥ k − 1 the window holds the whole value set: the proposal is NCG's (and the
    default radius is k − 1 on small value sets, 8 on large ones)."""
    assert ordinal_ncg.radius_for(WIDE) == WIDE.num_values - 1 == 7
    assert ordinal_ncg.radius_for(Ordinal(np.arange(60.0), 2)) == ordinal_ncg.MAX_DEFAULT_RADIUS == 8
    assert ordinal_ncg.radius_for(BINARY) == 1 and ordinal_ncg.radius_for(WIDE, 2) == 2
    states = jnp.asarray(all_states(WIDE))  # the kernel's binary search finds the space's own indices
    np.testing.assert_array_equal(jax.vmap(lambda x: ordinal_ncg.value_index(WIDE, x))(states), WIDE.to_index(states))
    state = proposals.init(jnp.asarray([-0.5, 2.5]), TARGET.logdensity_fn)
    a, b = ncg.coefficients(state, 0.7)
    logits, window = ordinal_ncg.window_logits(WIDE.to_index(state.position), a, b, WIDE, WIDE.num_values - 1)
    full = proposals.factorised_logits(a, b, WIDE)
    for i in range(2):
        inside = np.isfinite(np.asarray(logits[i]))
        order = np.asarray(window[i])[inside]
        np.testing.assert_array_equal(order, np.arange(WIDE.num_values))
        np.testing.assert_allclose(jax.nn.softmax(logits[i][inside]), jax.nn.softmax(full[i]), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("options, match", [({"radius": 0}, "radius"), ({"step_size": 0.0}, "step size")])
def test_ordinal_ncg_bad_options_raise(options, match):
    with pytest.raises(ValueError, match=match):
        recipe("ordinal-ncg", **options).bind(TARGET, 100)


def test_ordinal_ncg_refuses_categorical_rows():
    target = nonquadratic_target(Categorical(3, 2))
    with pytest.raises(ValueError, match="ordered values"):
        recipe("ordinal-ncg").bind(target, 100)
    with pytest.raises(ValueError, match="ordered values"):
        ordinal_ncg.as_top_level_api(target.logdensity_fn, target.space, 1.0)


def test_a_proposal_outside_the_support_is_a_plain_rejection():
    """f(s') = −∞ with a NaN gradient term there (lgamma at a non-positive integer, a count
    below what the data allow) is rejected without the non-finite flag that a NaN or +∞ log
    density gets.
    """
    from gradmc.discrete.proposals import ValueState, metropolis

    state = ValueState(jnp.array([4.0]), jnp.array(-1.0))
    outside = ValueState(jnp.array([1.0]), jnp.array(-jnp.inf))
    kept, info = metropolis(jax.random.key(0), state, outside, jnp.array(jnp.nan))
    assert not bool(info.is_accepted) and not bool(info.nonfinite) and float(kept.position[0]) == 4.0
    nan_state = outside._replace(logdensity=jnp.array(jnp.nan))
    assert bool(metropolis(jax.random.key(0), state, nan_state, jnp.array(0.0))[1].nonfinite)
