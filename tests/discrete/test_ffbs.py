"""Forward filtering–backward sampling of a chain of categorical sites (gradmc.discrete.ffbs):
its chain model is exact on a log density quadratic in the one-hot rows, its draws follow the
exact distribution (an enumeration of 3^4 states, a TV bound from the run's ESS), its MH test
makes it exact where the model is not, and "auto" gives it an HMM's states.
"""

from __future__ import annotations

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.stats import norm

import gradmc
from gradmc.base import Target
from gradmc.diagnostics.ess import geyer_ess
from gradmc.discrete import ffbs
from gradmc.spaces import Categorical, Ordinal

T, K = 4, 3
SPACE = Categorical(K, T)
STATES = np.array(list(itertools.product(range(K), repeat=T)))
_rng = np.random.default_rng(0)
UNARY = jnp.asarray(_rng.normal(size=(T, K)), jnp.float32)
PAIRWISE = jnp.asarray(_rng.normal(size=(T - 1, K, K)), jnp.float32)
WAVE = jnp.asarray(_rng.normal(size=(T - 1, K, K)), jnp.float32)


def quadratic_chain(z):
    """An HMM's log joint in its states: linear emissions, bilinear transitions."""
    return jnp.sum(UNARY * z) + jnp.einsum("ta,tab,tb->", z[:-1], PAIRWISE, z[1:])


def wavy_chain(z):
    """Still a chain (each term couples neighbours only), but not quadratic: the model is a proposal."""
    return quadratic_chain(z) + 0.5 * jnp.sum(jnp.cos(jnp.einsum("ta,tab,tb->t", z[:-1], WAVE, z[1:])))


def exact_logprobs(logdensity_fn):
    positions = jax.vmap(SPACE.from_index)(jnp.asarray(STATES)).astype(jnp.float32)
    logp = np.asarray(jax.vmap(logdensity_fn)(positions), np.float64)
    return logp - np.logaddexp.reduce(logp)


def test_the_chain_model_of_a_quadratic_log_density_is_the_distribution_itself():
    position = SPACE.from_index(jnp.asarray(STATES[17])).astype(jnp.float32)
    model = ffbs.chain_model(quadratic_chain, position)
    logq = np.asarray(jax.vmap(lambda s: ffbs.chain_logprob(s, model))(jnp.asarray(STATES)))
    np.testing.assert_allclose(logq, exact_logprobs(quadratic_chain), atol=1e-4)


def test_coupling_beyond_neighbours_is_seen():
    position = SPACE.from_index(jnp.asarray(STATES[17])).astype(jnp.float32)
    inside = ffbs.coupling_outside_chain(quadratic_chain, position, jax.random.key(0))
    outside = ffbs.coupling_outside_chain(lambda z: quadratic_chain(z) + z[0] @ z[2], position, jax.random.key(0))
    assert inside[0] < 1e-4 * inside[1]
    assert outside[0] > 0.1 * outside[1]


def _run(logdensity_fn, kernel=None, num_chains=16, num_draws=2500, space=SPACE, start=0):
    """Chains of the FFBS kernel (or ``kernel``), as state indices (chain, draw) and acceptance."""
    kernel = kernel or ffbs.build_kernel()
    start = space.from_index(jnp.full(T, start, jnp.int32)).astype(jnp.float32)

    def chain(key):
        def step(state, key):
            state, info = kernel(key, state, logdensity_fn, space)
            return state, (space.to_index(state.position), info.acceptance_rate)

        return jax.lax.scan(step, ffbs.init(start, logdensity_fn), jax.random.split(key, num_draws))[1]

    index, accept = jax.jit(jax.vmap(chain))(jax.random.split(jax.random.key(3), num_chains))
    return (np.asarray(index) * K ** np.arange(T)[::-1]).sum(-1), np.asarray(accept)


def _tv_and_bound(ids, logp, alpha=0.01):
    """TV to exp(logp) and a bound a correct kernel exceeds with probability ≤ α (union bound
    over the states of per-state z-tests whose standard errors come from each indicator's ESS).
    """
    probs = np.exp(logp)
    m = probs.size
    p_hat = np.bincount(ids.ravel(), minlength=m) / ids.size
    ess = np.array([np.nansum(geyer_ess((ids == x).astype(np.float64))) for x in range(m)])
    ess = np.where(ess > 0, ess, ids.size)
    z = norm.ppf(1 - alpha / (2 * m))
    return 0.5 * np.abs(p_hat - probs).sum(), 0.5 * z * np.sqrt(probs * (1 - probs) / ess).sum()


def test_exact_on_a_quadratic_chain():
    ids, accept = _run(quadratic_chain)
    # the model is the target (the first test): only moves scored by the defensive mixture's
    # one-site part, the 5 % of one-site changes and draws that differ in one site, can be refused
    assert accept.mean() > 0.8
    tv, bound = _tv_and_bound(ids, exact_logprobs(quadratic_chain))
    assert tv < bound, (tv, bound)


def test_exact_on_a_chain_that_is_not_quadratic():
    ids, accept = _run(wavy_chain)
    assert accept.mean() < 0.99  # the MH test is at work
    tv, bound = _tv_and_bound(ids, exact_logprobs(wavy_chain))
    assert tv < bound, (tv, bound)


def test_without_the_reverse_move_the_bound_fails():
    """The test above has power: proposals accepted as if the model were exact miss the target."""

    def uncorrected(key, state, logdensity_fn, space):
        states, _ = ffbs.sample_chain(key, ffbs.chain_model(logdensity_fn, state.position))
        proposed = ffbs.init(space.from_index(states).astype(state.position.dtype), logdensity_fn)
        return proposed, ffbs.DiscreteInfo(1.0, True, False, 0.0, 0.0)

    ids, _ = _run(wavy_chain, kernel=uncorrected)
    tv, bound = _tv_and_bound(ids, exact_logprobs(wavy_chain))
    assert tv > bound, (tv, bound)


@pytest.mark.slow
def test_auto_gives_ffbs_to_an_hmm_states_and_it_recovers_them():
    rng = np.random.default_rng(2)
    n, centres = 60, np.array([-2.0, 2.0], np.float32)
    states = np.repeat([0, 1, 0], n // 3)
    y = jnp.asarray(centres[states] + 0.7 * rng.normal(size=n), jnp.float32)
    log_a = jnp.log(jnp.asarray([[0.9, 0.1], [0.1, 0.9]], jnp.float32))

    def log_density(x):
        mu, z = x["mu"], x["z"]
        emissions = jnp.sum(z * (-0.5 * ((y[:, None] - mu) / 0.7) ** 2))
        return -0.5 * jnp.sum((mu - centres) ** 2) + jnp.sum((z[:-1] @ log_a) * z[1:]) + emissions

    init = {"mu": jnp.asarray(centres), "z": jax.nn.one_hot(np.zeros(n, int), 2)}
    target = gradmc.from_function(log_density, init=init, space={"z": Categorical(2, n)}, name="hmm")
    trace = gradmc.sample(target, "auto", num_chains=2, num_warmup=200, num_draws=300, seed=0, progress=False)
    assert trace.sampler == "mu=jittered-hmc, z=ffbs"
    z = np.asarray(trace.posterior()["z"]).reshape(-1, n)
    assert np.mean(z == states) > 0.95


def test_refuses_a_space_it_cannot_move():
    target = Target("one site", lambda s: jnp.sum(s), gradmc.spaces.Binary(1))
    with pytest.raises(ValueError, match="ffbs draws a chain of discrete sites"):
        gradmc.sample(target, "ffbs", num_warmup=10, num_draws=10, progress=False)


# -- sites that enter only as indices: the chain from evaluations ------------------------------

VALUES = Ordinal([0.0, 1.0, 2.0], T)  # three values, T sites, indices into the tables


def indexed_chain(x):
    """The wavy chain written as NumPyro writes an HMM, by indexing with the sites: no gradient."""
    z = x.astype(jnp.int32)
    steps = jnp.arange(T - 1)
    pair = PAIRWISE[steps, z[:-1], z[1:]] + 0.5 * jnp.cos(WAVE[steps, z[:-1], z[1:]])
    return jnp.sum(UNARY[jnp.arange(T), z]) + jnp.sum(pair)


def indexed_loop(x):
    """Not a chain: the first and third sites are coupled too."""
    z = x.astype(jnp.int32)
    return indexed_chain(x) + 1.5 * jnp.cos(PAIRWISE[0, z[0], z[2]])


def test_the_chain_from_evaluations_of_any_chain_is_the_distribution_itself():
    """wavy_chain is not quadratic, so its second-order model is only a proposal; read from
    evaluations it is exact, from any position."""
    assert np.all(np.asarray(jax.grad(indexed_chain)(jnp.ones(T))) == 0)
    # compiled, as the sampler and the probe of "auto" run them (op by op, they take 20 s)
    chain_model = jax.jit(ffbs.chain_model_by_values, static_argnums=(0, 2))
    logprobs = jax.jit(jax.vmap(ffbs.chain_logprob, (0, None)))
    for start in (17, 60):
        model = chain_model(indexed_chain, jnp.asarray(STATES[start], jnp.float32), VALUES)
        logq = np.asarray(logprobs(jnp.asarray(STATES), model))
        np.testing.assert_allclose(logq, exact_logprobs(wavy_chain), atol=1e-4)
    position = jnp.asarray(STATES[17], jnp.float32)
    coupling = jax.jit(ffbs.coupling_outside_chain_by_values, static_argnums=(0, 2))
    inside = coupling(indexed_chain, position, VALUES)
    outside = coupling(indexed_loop, position, VALUES)
    assert inside[0] < 1e-4 * inside[1]
    assert outside[0] > 0.1 * outside[1]


def test_a_coupling_far_along_the_chain_is_found_from_evaluations():
    """Sites coupled a grid's row apart (a 2-D Potts field flattened) or at the chain's two ends
    lie beyond the pairs one to three apart that the probe moves: its random halves find them,
    and the chain's own halves agree with its single and neighbouring changes to rounding."""
    length, width = 48, 6  # an 8 x 6 grid, row by row
    values = Ordinal([0.0, 1.0, 2.0], length)
    unary = jnp.asarray(np.random.default_rng(1).normal(size=(length, 3)), jnp.float32)

    def along(z):  # agreement of neighbours along the rows only: a chain
        return jnp.sum(unary[jnp.arange(length), z]) + 0.8 * jnp.sum(z[1:] == z[:-1])

    def grid(x):
        z = x.astype(jnp.int32)
        return along(z) + 0.8 * jnp.sum(z[width:] == z[:-width])

    def ends(x):
        z = x.astype(jnp.int32)
        return along(z) + 0.8 * (z[0] == z[-1])

    coupling = jax.jit(ffbs.coupling_outside_chain_by_values, static_argnums=(0, 2))
    position = jnp.asarray(np.random.default_rng(2).integers(0, 3, length), jnp.float32)
    chain = coupling(lambda x: along(x.astype(jnp.int32)), position, values)
    assert chain[0] < 1e-4 * chain[1] and chain[2] > 0
    for beyond in (grid, ends):
        outside, whole, _ = coupling(beyond, position, values)
        assert outside > 0.01 * whole


def test_exact_from_evaluations_on_a_chain_and_beyond():
    """On a chain every proposal but the defensive one-site changes is the exact conditional;
    beyond a chain the MH test corrects the model."""
    ids, accept = _run(indexed_chain, space=VALUES)
    assert accept.mean() > 0.8
    tv, bound = _tv_and_bound(ids, exact_logprobs(wavy_chain))
    assert tv < bound, (tv, bound)
    ids, accept = _run(indexed_loop, space=VALUES)
    assert accept.mean() < 0.99
    logp = np.asarray(jax.vmap(indexed_loop)(jnp.asarray(STATES, jnp.float32)), np.float64)
    tv, bound = _tv_and_bound(ids, logp - np.logaddexp.reduce(logp))
    assert tv < bound, (tv, bound)


def test_exact_from_evaluations_where_the_reference_is_impossible():
    """The chain is read with every site at its first value; where that has log density −∞
    (here the first site may not take it) the steps change one site at a time, still exact."""

    def first_site_barred(x):
        return jnp.where(x[0] == 0, -jnp.inf, indexed_chain(x))

    ids, accept = _run(first_site_barred, space=VALUES, start=1)
    assert 0.05 < accept.mean() < 0.99
    positions = jnp.asarray(STATES, jnp.float32)
    logp = np.asarray(jax.vmap(first_site_barred)(positions), np.float64)
    tv, bound = _tv_and_bound(ids, logp - np.logaddexp.reduce(logp))
    assert tv < bound, (tv, bound)


def homogeneous_chain(x):
    """An HMM written for NumPyro: one transition table at every step, indexed by the sites."""
    z = x.astype(jnp.int32)
    pair = PAIRWISE[0, z[:-1], z[1:]] + 0.5 * jnp.cos(WAVE[0, z[:-1], z[1:]])
    return jnp.sum(UNARY[jnp.arange(T), z]) + jnp.sum(pair)


def test_shared_transitions_read_at_one_pair_give_the_whole_chain_of_a_homogeneous_one():
    chain_model = jax.jit(ffbs.chain_model_by_values, static_argnums=(0, 2, 3))
    reference = jnp.zeros(T)
    each, shared = (chain_model(homogeneous_chain, reference, VALUES, s) for s in (False, True))
    np.testing.assert_allclose(shared.pairwise, each.pairwise, atol=1e-5)
    np.testing.assert_allclose(shared.unary, each.unary)
    assert float(ffbs.pairwise_spread(each)) < 1e-5
    assert float(ffbs.pairwise_spread(chain_model(indexed_chain, reference, VALUES, False))) > 0.1


def test_exact_with_shared_transitions_on_a_homogeneous_chain_and_on_any_other():
    """Shared transitions are the conditional itself on a homogeneous chain (only the defensive
    one-site changes can be refused) and a proposal the MH test corrects on one whose
    transitions change with the step."""
    kernel = ffbs.build_kernel(shared=True)
    ids, accept = _run(homogeneous_chain, kernel=kernel, space=VALUES)
    assert accept.mean() > 0.9
    logp = np.asarray(jax.vmap(homogeneous_chain)(jnp.asarray(STATES, jnp.float32)), np.float64)
    tv, bound = _tv_and_bound(ids, logp - np.logaddexp.reduce(logp))
    assert tv < bound, (tv, bound)
    ids, accept = _run(indexed_chain, kernel=kernel, space=VALUES)
    assert accept.mean() < 0.9  # the pair read stands for the others, which differ
    tv, bound = _tv_and_bound(ids, exact_logprobs(wavy_chain))
    assert tv < bound, (tv, bound)


def test_shared_transitions_refused_where_they_do_not_apply():
    target = Target("chain", homogeneous_chain, VALUES)
    with pytest.raises(ValueError, match="ffbs transitions must be one of 'each', 'shared', got 'same'"):
        gradmc.sample(target, gradmc.sampler("ffbs", transitions="same"), num_warmup=10, num_draws=10, progress=False)
    one_hot = Target("one-hot chain", quadratic_chain, SPACE)
    shared = gradmc.sampler("ffbs", transitions="shared")
    with pytest.raises(ValueError, match="transitions='shared' reads the chain from evaluations"):
        gradmc.sample(one_hot, shared, num_warmup=10, num_draws=10, progress=False)


def test_auto_reads_a_chain_of_indexed_sites_and_gives_it_ffbs():
    def log_density(x):
        return indexed_chain(x["z"]) - 0.5 * jnp.sum(x["mu"] ** 2) + jnp.sum(x["mu"]) * 0.1

    init = {"mu": jnp.zeros(2), "z": jnp.zeros(T)}
    target = gradmc.from_function(log_density, init=init, space={"z": VALUES}, name="indexed")
    assert gradmc.composed.composed_sampler(target).name == "mu=jittered-hmc, z=ffbs"  # what "auto" runs
    homogeneous = gradmc.from_function(
        lambda x: log_density(x) + homogeneous_chain(x["z"]) - indexed_chain(x["z"]), init=init, space={"z": VALUES}
    )
    assert gradmc.composed.composed_sampler(homogeneous).name == "mu=jittered-hmc, z=ffbs (shared transitions)"
    looped = gradmc.from_function(
        lambda x: log_density(x) + indexed_loop(x["z"]) - indexed_chain(x["z"]), init=init, space={"z": VALUES}
    )
    assert gradmc.composed.composed_sampler(looped).name == "mu=jittered-hmc, z=gibbs"


def test_auto_reads_a_chain_of_sites_written_one_per_step():
    """The same chain with one entry per site, as a model written in a loop has it: the entries
    share one block, whose chain is read from evaluations."""

    def log_density(x):
        z = jnp.concatenate([x[f"z{t}"] for t in range(T)])
        return indexed_chain(z) - 0.5 * jnp.sum(x["mu"] ** 2)

    one_site = Ordinal([0.0, 1.0, 2.0], 1)
    init = {"mu": jnp.zeros(2), **{f"z{t}": jnp.zeros(1) for t in range(T)}}
    space = {f"z{t}": one_site for t in range(T)}
    target = gradmc.from_function(log_density, init=init, space=space, name="one per step")
    assert gradmc.composed.composed_sampler(target).name == "mu=jittered-hmc, z0..z3=ffbs"
