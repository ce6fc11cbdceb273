"""Mixed discrete-continuous models: gradmc's Gibbs composition against NumPyro's kernels.

Each model is written twice, as a log density of a dict position for gradmc (discrete
entries named in ``space=``) and as a NumPyro model with discrete latent sites, and run in
one process on the same machine with the same chains, warm-up and draws:

* gradmc ``"auto"`` (jittered HMC on the real block, its trajectory length learned from NUTS
  in warm-up; on each discrete block an exact draw of all its sites from the gradient where the
  log density is linear in them, FFBS on a chain of states, single-site Gibbs where it is far
  from quadratic, else NCG with 10 steps per sweep) and the other block choices named with
  ``--gradmc``;
* gradmc ``"auto"`` on the NumPyro model itself (``gradmc.from_numpyro``), where the
  discrete sites enter through ``jnp.where`` and indexing: ``"auto"`` gives a plate of sites
  independent given the rest plate-gibbs, sites without a gradient single-site Gibbs;
* NumPyro 0.22 ``DiscreteHMCGibbs(NUTS(model))`` (a Gibbs update of every discrete site, in
  random order, after each NUTS step) and ``MixedHMC(HMC(model))`` (Zhou 2020: discrete
  updates inside an HMC trajectory), both vectorised over chains.

Models:

* ``gmm24``: MixedHMC's 24-dimensional Gaussian mixture (Zhou 2020, §5.1; its authors'
  ``scripts/simple_gmm``): one assignment ``z ~ Categorical((0.15, 0.3, 0.3, 0.25))`` and
  ``x ~ N(mu[z], 3 I)``, the four means the rows of the 24 orderings of (-2, 0, 2, 2) stacked
  as columns; no data. The components lie 7.7 standard deviations apart, so blockwise updates
  stay in their start component: gradmc's ``"auto"`` sees the assignment freeze in warm-up and
  switches the mode shift on (:mod:`gradmc.mode_shift`; ``--gradmc "joint=none"`` shows the
  run without it). The assignment's posterior is its prior, known exactly.
* ``ssvs``: George & McCulloch's spike and slab for linear regression (n = 100, p = 20,
  five non-zero coefficients): ``gamma[j] ~ Bernoulli(0.2)``, ``beta[j] ~ N(0, 2²)`` when
  in and ``N(0, 0.1²)`` when out, unit noise.
* ``coal``: the coal-mining change point of Stan's user's guide ("latent discrete
  parameters"): yearly disaster counts 1851-1961 (T = 111), Poisson with an early rate before
  the change point ``s ~ DiscreteUniform(0, T - 1)`` and a late rate from it on, both rates
  ``Exponential(1)``. The rates' Gamma-Poisson conjugacy gives p(s | y) exactly, so the error
  column is against the exact posterior mean of ``s``.
* ``mixture``: a three-component Gaussian mixture of 100 data with explicit assignments
  ``z[n] ~ Categorical(softmax(logits))``, component means ``locs ~ N((-3, 0, 3), 1)``,
  ``logits ~ N(0, 1)``, unit noise.
* ``hmm``: a three-state hidden Markov model of T = 200 observations, states ``z[t]``
  following a transition matrix ``softmax(logits)`` row by row (``logits ~ N(2 I, 1)``),
  emissions ``N(mu[z[t]], 1)`` with ``mu ~ N((-2, 0, 2), 1)``; data simulated with
  probability 0.9 of staying. The NumPyro model states the chain's law with a
  ``numpyro.factor`` over the plate of states.
* ``logistic``: MixedHMC's Bayesian variable selection for logistic regression (Zhou 2020,
  §5.3; N = 100, p = 20, rows of X drawn from N(0, Σ) with Σ = 0.3 off the diagonal and 3 on
  it, five coefficients 0.5 in truth, our own draw of the data): ``gamma[j]`` uniform on
  {0, 1}, ``beta[j] ~ N(0, 5²)``, ``y ~ Bernoulli(logistic(X (gamma * beta)))``.
* ``sparse``: Rhodes & Gutmann's sparse regression (§5.2, App. K: 20 rows, the 20 columns
  four copies of 5, ``y`` the sum of the first 5) with the coefficients ``beta`` and the log
  noise variance ``log_var`` kept in the model: switches ``s`` under the paper's beta-binomial
  prior, ``beta ~ N(0, var (X_s^T X_s / g + lam I)^-1)``, ``y ~ N(X_s beta, var I)``,
  ``var ~ InvGamma(0.1, 0.1)``, every chain started at the paper's ``s = e_2``. Integrating
  ``beta`` and ``var`` out gives the posterior gradmc's sparse-regression target enumerates,
  so the inclusion probabilities are known exactly. (The paper's 80 appended switches,
  independent of everything else, are left out.) Blockwise sweeps barely move here; the mode
  shift that ``"auto"`` keeps, carrying the coefficients and holding the log variance, does.
  Not in the default list: its NUTS sweeps cost hundreds of gradients, and a run takes minutes.
* ``nmixture``: Royle's N-mixture model of abundance, R = 50 sites visited T = 3 times:
  ``N[r] ~ Poisson(lam)`` animals at site r, each seen at a visit with probability p,
  ``y[r, t] ~ Binomial(N[r], p)``; ``log lam ~ N(1.5, 1)``, ``logit p ~ N(0, 1.5²)``; data
  simulated with lam = 5, p = 0.4. gradmc's counts live on ``Count(50, 60)``; NumPyro's
  kernels refuse a Poisson latent, so its model draws each count from a Categorical over
  0..60 with the Poisson's probabilities (the same posterior up to mass above 60, about 1e-30).

gradmc's end to end on the NumPyro model includes ``gradmc.from_numpyro``, which reads the model
(NumPyro's includes its own reading of it).
gradmc runs without the persistent compilation cache, so that "end to end" includes its
compilation as in a first run. Each gradmc run is then repeated as a user's second run of the
same script would be: in a new process, after another new process has run it into an empty
compilation cache, so that the repeat loads the compiled programs (and must draw the same
numbers); NumPyro, which keeps no such cache by default, is given its second run in the same
process, which traces and compiles its chains again (``MCMC.run`` with ``chain_method=jax.vmap``
does so on every call), as a new process would. Reported per model and method: the smallest
bulk ESS over the continuous coordinates and the discrete sites (each site's value, as ArviZ
reads it), the seconds end to end (with compilation), of sampling alone (the warm-up and draw
phases for gradmc; for NumPyro the seconds its compiled programs ran, without its tracing and
compiling; for each, the quicker of its first run and its repeat, the same computation, whose
times differ by up to a third from run to run on a shared CPU; with ``--no-repeat``, gradmc's
one run against NumPyro's second) and of the repeated run,
min ESS per second for the three, min ESS per 1,000
gradient evaluations where the method counts them, and the largest absolute error of the
posterior means of the discrete sites (inclusion probabilities; counts; each category's share of
each assignment) against a long reference run (gradmc ``"auto"`` with ``--reference-draws``
draws per chain).

Usage: ``python benchmarks/mixed.py [--models gmm24,ssvs,coal,mixture,hmm,logistic,nmixture,sparse]
[--chains 4] [--warmup 1000] [--draws 2000] [--gradmc auto,gamma=pavg] [--slow] [--no-repeat]``
(``--slow`` also runs ``MixedHMC`` on the N-mixture model, which takes over 15 minutes a run).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import itertools
import json
import os
import subprocess
import sys
import tempfile
import time
import warnings

# every run compiles as a first run would: the persistent compilation cache (which gradmc.sample
# turns on) would otherwise let gradmc load programs compiled by an earlier run of this script;
# the repeated runs use a cache of their own (repeat_run)
os.environ.setdefault("GRADMC_NO_COMPILE_CACHE", "1")

import arviz as az
import jax
import jax.numpy as jnp
import numpy as np

import gradmc
from gradmc.compile_cache import enable_compilation_cache
from gradmc.spaces import Binary, Categorical, Ordinal

# -- the models ---------------------------------------------------------------------------


GMM24_WEIGHTS = np.array([0.15, 0.3, 0.3, 0.25], np.float32)
GMM24_MEANS = np.array(list(itertools.permutations([-2.0, 0.0, 2.0, 2.0])), np.float32).T  # (4, 24)


def gmm24(seed: int = 0):
    """MixedHMC's 24-dimensional Gaussian mixture (Zhou 2020, §5.1): the gradmc target and the NumPyro model."""
    import numpyro
    import numpyro.distributions as dist

    del seed  # the target has no data
    variance = 3.0

    def log_density(position):
        x, z = position["x"], position["z"][0]  # z: one one-hot row
        log_components = jnp.log(GMM24_WEIGHTS) - 0.5 * jnp.sum((x - GMM24_MEANS) ** 2, axis=1) / variance
        return jnp.sum(z * log_components)

    def model():
        z = numpyro.sample("z", dist.Categorical(probs=GMM24_WEIGHTS))
        numpyro.sample("x", dist.Normal(jnp.asarray(GMM24_MEANS)[z], np.sqrt(variance)).to_event(1))

    init = {"x": jnp.zeros(24), "z": jax.nn.one_hot(jnp.array([0]), 4)}
    target = gradmc.from_function(log_density, init=init, space={"z": Categorical(4, 1)}, name="gmm24")
    return target, model, {"x": jnp.zeros(24), "z": jnp.array(0)}, ("x",), ("z",)


def ssvs(seed: int = 0):
    """Spike-and-slab regression: the gradmc target and the NumPyro model."""
    import numpyro
    import numpyro.distributions as dist

    rng = np.random.default_rng(seed)
    n, p = 100, 20
    X = rng.normal(size=(n, p)).astype(np.float32)
    truth = np.zeros(p, np.float32)
    truth[:5] = [2.0, -1.5, 1.0, -0.8, 0.6]
    y = (X @ truth + rng.normal(size=n)).astype(np.float32)

    def log_normal(x, scale):
        return -0.5 * (x / scale) ** 2 - jnp.log(scale)

    def log_density(position):
        beta, gamma = position["beta"], position["gamma"]
        prior = jnp.sum(gamma * log_normal(beta, 2.0) + (1 - gamma) * log_normal(beta, 0.1))
        prior += jnp.sum(gamma) * jnp.log(0.2 / 0.8)
        return prior - 0.5 * jnp.sum((y - X @ beta) ** 2)

    def model():
        with numpyro.plate("p", p):
            gamma = numpyro.sample("gamma", dist.Bernoulli(0.2))
            beta = numpyro.sample("beta", dist.Normal(0.0, jnp.where(gamma == 1, 2.0, 0.1)))
        numpyro.sample("y", dist.Normal(X @ beta, 1.0), obs=y)

    init = {"beta": jnp.zeros(p), "gamma": jnp.zeros(p)}
    target = gradmc.from_function(log_density, init=init, space={"gamma": Binary(p)}, name="ssvs")
    return target, model, init, ("beta",), ("gamma",)


def mixture(seed: int = 0):
    """Gaussian mixture with explicit assignments: the gradmc target and the NumPyro model."""
    import numpyro
    import numpyro.distributions as dist

    rng = np.random.default_rng(seed)
    n, centres = 100, np.array([-3.0, 0.0, 3.0], np.float32)
    y = (centres[rng.integers(0, 3, n)] + rng.normal(size=n)).astype(np.float32)

    def log_density(position):
        locs, z, logits = position["locs"], position["z"], position["logits"]
        prior = -0.5 * jnp.sum((locs - centres) ** 2) - 0.5 * jnp.sum(logits**2)
        log_lik = -0.5 * (y[:, None] - locs) ** 2 + jax.nn.log_softmax(logits)
        return prior + jnp.sum(z * log_lik)

    def model():
        locs = numpyro.sample("locs", dist.Normal(centres, 1.0).to_event(1))
        logits = numpyro.sample("logits", dist.Normal(jnp.zeros(3), 1.0).to_event(1))
        with numpyro.plate("data", n):
            z = numpyro.sample("z", dist.Categorical(logits=logits))
            numpyro.sample("y", dist.Normal(locs[z], 1.0), obs=y)

    nearest = np.argmin(np.abs(y[:, None] - centres), axis=1)
    init = {"locs": jnp.asarray(centres), "logits": jnp.zeros(3), "z": jax.nn.one_hot(nearest, 3)}
    target = gradmc.from_function(log_density, init=init, space={"z": Categorical(3, n)}, name="mixture")
    return target, model, {**init, "z": jnp.asarray(nearest)}, ("locs", "logits"), ("z",)


def hmm(seed: int = 0):
    """A three-state hidden Markov model (T = 200) with unknown emission means and transition
    matrix: the gradmc target and the NumPyro model.
    """
    import numpyro
    import numpyro.distributions as dist

    rng = np.random.default_rng(seed)
    T, centres = 200, np.array([-2.0, 0.0, 2.0], np.float32)
    stay = np.full((3, 3), 0.05) + np.eye(3) * 0.85  # rows sum to 1: stay with probability 0.9
    states = [0]
    for _ in range(T - 1):
        states.append(rng.choice(3, p=stay[states[-1]]))
    y = (centres[np.array(states)] + rng.normal(size=T)).astype(np.float32)
    prior_logits = 2.0 * np.eye(3, dtype=np.float32)  # favours staying, as the data do

    def log_density(position):
        mu, logits, z = position["mu"], position["logits"], position["z"]  # z: one-hot rows (T, 3)
        log_A = jax.nn.log_softmax(logits, axis=-1)
        prior = -0.5 * jnp.sum((mu - centres) ** 2) - 0.5 * jnp.sum((logits - prior_logits) ** 2)
        transitions = jnp.sum((z[:-1] @ log_A) * z[1:])
        emissions = jnp.sum(z * (-0.5 * (y[:, None] - mu) ** 2))
        return prior + transitions + emissions

    def model():
        mu = numpyro.sample("mu", dist.Normal(centres, 1.0).to_event(1))
        logits = numpyro.sample("logits", dist.Normal(prior_logits, 1.0).to_event(2))
        with numpyro.plate("time", T):
            z = numpyro.sample("z", dist.Categorical(logits=jnp.zeros(3)))  # uniform; the chain's law is the factor
            numpyro.sample("y", dist.Normal(mu[z], 1.0), obs=y)
        numpyro.factor("markov", jnp.sum(jax.nn.log_softmax(logits, axis=-1)[z[:-1], z[1:]]))

    nearest = np.argmin(np.abs(y[:, None] - centres), axis=1)
    init = {"mu": jnp.asarray(centres), "logits": jnp.asarray(prior_logits), "z": jax.nn.one_hot(nearest, 3)}
    target = gradmc.from_function(log_density, init=init, space={"z": Categorical(3, T)}, name="hmm")
    return target, model, {**init, "z": jnp.asarray(nearest)}, ("mu", "logits"), ("z",)


def logistic(seed: int = 0):
    """Variable selection for logistic regression (MixedHMC's §5.3 model): the gradmc target and the NumPyro model."""
    import numpyro
    import numpyro.distributions as dist

    rng = np.random.default_rng(seed)
    n, p = 100, 20
    cov = np.full((p, p), 0.3) + np.eye(p) * 2.7
    X = rng.multivariate_normal(np.zeros(p), cov, size=n).astype(np.float32)
    truth = np.zeros(p, np.float32)
    truth[[1, 3, 5, 7, 9]] = 0.5
    y = rng.binomial(1, 1 / (1 + np.exp(-X @ truth))).astype(np.float32)

    def log_density(position):
        beta, gamma = position["beta"], position["gamma"]
        logits = X @ (gamma * beta)
        return -0.5 * jnp.sum((beta / 5.0) ** 2) + jnp.sum(y * logits - jnp.logaddexp(0.0, logits))

    def model():
        with numpyro.plate("p", p):
            gamma = numpyro.sample("gamma", dist.Bernoulli(0.5))
            beta = numpyro.sample("beta", dist.Normal(0.0, 5.0))
        numpyro.sample("y", dist.Bernoulli(logits=X @ (gamma * beta)), obs=y)

    init = {"beta": jnp.zeros(p), "gamma": jnp.zeros(p)}
    target = gradmc.from_function(log_density, init=init, space={"gamma": Binary(p)}, name="logistic")
    return target, model, init, ("beta",), ("gamma",)


def nmixture(seed: int = 0):
    """Royle's N-mixture model of abundance (R = 50 sites, T = 3 visits): the gradmc target (the
    counts on a Count space) and the NumPyro model, whose counts are Categorical over 0..U with
    the Poisson's probabilities, since NumPyro's kernels refuse a Poisson latent.
    """
    import numpyro
    import numpyro.distributions as dist
    from jax.scipy.special import gammaln

    from gradmc.spaces import Count

    rng = np.random.default_rng(seed)
    sites, visits, most = 50, 3, 60
    abundance = rng.poisson(5.0, sites)
    y = rng.binomial(abundance[:, None], 0.4, (sites, visits)).astype(np.float32)
    values = jnp.arange(most + 1.0)

    def log_density(position):
        log_lam, logit_p, n = position["log_lam"], position["logit_p"], position["N"]
        lam = jnp.exp(log_lam)
        prior = -0.5 * (log_lam - 1.5) ** 2 - 0.5 * (logit_p / 1.5) ** 2
        poisson = jnp.sum(n * log_lam - lam - gammaln(n + 1))
        log_p, log_q = jax.nn.log_sigmoid(logit_p), jax.nn.log_sigmoid(-logit_p)
        binomial = gammaln(n + 1)[:, None] - gammaln(n[:, None] - y + 1) + y * log_p + (n[:, None] - y) * log_q
        return prior + poisson + jnp.sum(jnp.where(n[:, None] >= y, binomial - gammaln(y + 1), -jnp.inf))

    def model():
        log_lam = numpyro.sample("log_lam", dist.Normal(1.5, 1.0))
        logit_p = numpyro.sample("logit_p", dist.Normal(0.0, 1.5))
        with numpyro.plate("site", sites):
            n = numpyro.sample("N", dist.Categorical(logits=dist.Poisson(jnp.exp(log_lam)).log_prob(values)))
            with numpyro.plate("visit", visits, dim=-2):
                numpyro.sample("y", dist.Binomial(n, logits=logit_p), obs=y.T)

    start = y.max(axis=1) + 2.0
    init = {"log_lam": jnp.asarray(1.5), "logit_p": jnp.asarray(0.0), "N": jnp.asarray(start)}
    target = gradmc.from_function(log_density, init=init, space={"N": Count(sites, most)}, name="nmixture")
    return target, model, {**init, "N": jnp.asarray(start, jnp.int32)}, ("log_lam", "logit_p"), ("N",)


def sparse(seed: int = 0):
    """Rhodes & Gutmann's sparse regression (§5.2, App. K) with the coefficients and the noise
    variance kept in the model: the gradmc target and the NumPyro model (the inclusion
    probability integrated out, as in the paper: a beta-binomial prior on the switches).
    """
    import numpyro
    import numpyro.distributions as dist
    from jax.scipy.special import gammaln

    from gradmc.targets.sparse_regression import Hyperparameters, make_data

    hyper = Hyperparameters()
    x, y = make_data(seed)
    n, d = x.shape
    z, copy_of = np.unique(x, axis=1, return_inverse=True)  # X = Z[:, copy_of]: r = 5 distinct columns
    r = z.shape[1]
    copies = np.eye(r, dtype=np.float32)[copy_of.ravel()]  # (d, r)
    gram = (z.T @ z).astype(np.float32)
    x32, y32 = x.astype(np.float32), y.astype(np.float32)

    def log_joint(s, beta, log_var):
        size = jnp.sum(s)
        log_prior_s = gammaln(size + hyper.alpha_pi) + gammaln(d - size + hyper.beta_pi)
        fitted = x32 @ (s * beta)  # X diag(s) beta
        # log det(X_s^T X_s / g + lam I_d) by Sylvester's identity on the r distinct columns
        m = (s * s) @ copies
        _, logdet = jnp.linalg.slogdet(hyper.lam * jnp.eye(r) + m[:, None] * gram / hyper.g)
        logdet = logdet + (d - r) * np.log(hyper.lam)
        var = jnp.exp(log_var)
        # beta ~ N(0, var (X_s^T X_s / g + lam I)^-1); y ~ N(X_s beta, var I); var ~ InvGamma (log scale)
        log_beta = -0.5 * (fitted @ fitted / hyper.g + hyper.lam * beta @ beta) / var + 0.5 * logdet
        log_beta = log_beta - 0.5 * d * log_var
        log_lik = -0.5 * jnp.sum((y32 - fitted) ** 2) / var - 0.5 * n * log_var
        log_var_prior = -hyper.alpha_sigma * log_var - hyper.beta_sigma / var
        return log_prior_s + log_beta + log_lik + log_var_prior

    def log_density(position):
        return log_joint(position["s"], position["beta"], position["log_var"][0])

    def model():
        with numpyro.plate("d", d):
            s = numpyro.sample("s", dist.Bernoulli(0.5))
        beta = numpyro.sample("beta", dist.ImproperUniform(dist.constraints.real, (), (d,)))
        log_var = numpyro.sample("log_var", dist.ImproperUniform(dist.constraints.real, (), (1,)))
        numpyro.factor("joint", log_joint(s, beta, log_var[0]) - d * np.log(0.5))

    start = np.zeros(d, np.float32)
    start[1] = 1.0  # the paper's start: s = e_2
    init = {"beta": jnp.zeros(d), "log_var": jnp.zeros(1), "s": jnp.asarray(start)}
    target = gradmc.from_function(log_density, init=init, space={"s": Binary(d)}, name="sparse")
    return target, model, {**init, "s": jnp.asarray(start, jnp.int32)}, ("beta", "log_var"), ("s",)


#: Coal-mining disasters in Britain per year, 1851-1961 (Jarrett 1979), as in Stan's user's
#: guide chapter on latent discrete parameters.
COAL_DISASTERS = np.array(
    [4, 5, 4, 0, 1, 4, 3, 4, 0, 6, 3, 3, 4, 0, 2, 6, 3, 3, 5, 4, 5, 3, 1, 4, 4, 1, 5, 5, 3, 4, 2, 5, 2, 2, 3, 4, 2, 1]
    + [3, 2, 2, 1, 1, 1, 1, 3, 0, 0, 1, 0, 1, 1, 0, 0, 3, 1, 0, 3, 2, 2, 0, 1, 1, 1, 0, 1, 0, 1, 0, 0, 0, 2, 1, 0]
    + [0, 0, 1, 1, 0, 2, 3, 3, 1, 1, 2, 1, 1, 1, 1, 2, 4, 2, 0, 0, 1, 4, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1, 0, 0, 1, 0, 1],
    np.float32,
)
#: The rate of the disaster rates' exponential priors.
COAL_PRIOR_RATE = 1.0


def coal_change_point_exact() -> tuple[np.ndarray, np.ndarray]:
    """The exact posterior of :func:`coal`'s change point s and the exact posterior means of the
    early and late rates: an Exponential(r) prior is Gamma(1, r), conjugate to the Poisson
    counts on either side of s, so p(s | y) ∝ Γ(1 + S₁) / (r + n₁)^(1 + S₁) · Γ(1 + S₂) / (r + n₂)^(1 + S₂)
    with S₁, n₁ the sum and number of the counts before s and S₂, n₂ those from s on.
    """
    from scipy.special import gammaln, softmax

    y = COAL_DISASTERS.astype(np.float64)
    s = np.arange(len(y))
    before = np.concatenate([[0.0], np.cumsum(y)[:-1]])  # S1 for s = 0, 1, ..., T - 1
    n1, n2, after = s, len(y) - s, y.sum() - before
    r = COAL_PRIOR_RATE
    log_p = gammaln(1 + before) - (1 + before) * np.log(r + n1) + gammaln(1 + after) - (1 + after) * np.log(r + n2)
    p = softmax(log_p)
    return p, np.array([p @ ((1 + before) / (r + n1)), p @ ((1 + after) / (r + n2))])


def coal(seed: int = 0):
    """The coal-mining change point (Stan's user's guide, "latent discrete parameters"): the
    gradmc target (log rates, the change point an ordinal site) and the NumPyro model.
    """
    import numpyro
    import numpyro.distributions as dist

    del seed  # the data are the disasters'
    y, r = jnp.asarray(COAL_DISASTERS), COAL_PRIOR_RATE
    T = len(COAL_DISASTERS)

    def log_density(position):
        # the rates as logs (so the sites' names match the NumPyro model's: a bulk ESS, rank-based,
        # is the same for a rate and its log); the log's Jacobian adds the logs themselves
        log_early, log_late, s = position["early"][0], position["late"][0], position["s"][0]
        early, late = jnp.exp(log_early), jnp.exp(log_late)
        rate = jnp.where(jnp.arange(T) < s, early, late)
        return log_early + log_late - r * (early + late) + jnp.sum(y * jnp.log(rate) - rate)

    def model():
        early = numpyro.sample("early", dist.Exponential(r))
        late = numpyro.sample("late", dist.Exponential(r))
        s = numpyro.sample("s", dist.DiscreteUniform(0, T - 1))
        numpyro.sample("y", dist.Poisson(jnp.where(jnp.arange(T) < s, early, late)), obs=y)

    init = {"early": jnp.zeros(1), "late": jnp.zeros(1), "s": jnp.array([T // 2], jnp.float32)}
    space = {"s": Ordinal(np.arange(T), 1)}
    target = gradmc.from_function(log_density, init=init, space=space, name="coal")
    return (
        target,
        model,
        {"early": jnp.array(1.0), "late": jnp.array(1.0), "s": jnp.array(T // 2)},
        ("early", "late"),
        ("s",),
    )


def sparse_inclusion() -> np.ndarray:
    """The exact inclusion probabilities of :func:`sparse`'s 20 switches (gradmc's enumeration)."""
    from gradmc.targets.sparse_regression import load_cache

    pairwise = load_cache()["pairwise"]
    return np.array([pairwise[i, i, 1, 1] for i in range(pairwise.shape[0])])


#: Models whose discrete marginals are known exactly (the posterior means of their discrete
#: sites, and the number of values of each categorical site): no reference run is needed.
EXACT = {
    "gmm24": (GMM24_WEIGHTS, {"z": 4}),
    "sparse": (sparse_inclusion(), None),
    "coal": (np.array([coal_change_point_exact()[0] @ np.arange(len(COAL_DISASTERS))]), None),
}

MODELS = {
    "gmm24": gmm24,
    "ssvs": ssvs,
    "coal": coal,
    "mixture": mixture,
    "hmm": hmm,
    "logistic": logistic,
    "nmixture": nmixture,
    "sparse": sparse,
}

# -- measuring ----------------------------------------------------------------------------


def min_ess(posterior: dict, names) -> float:
    """The smallest bulk ESS over every coordinate of ``names`` (chain, draw, ...)."""
    values = []
    for name in names:
        x = np.asarray(posterior[name], np.float64)
        x = x.reshape(x.shape[0], x.shape[1], -1)
        if np.all(x == x[:, :1]):  # a site that never changes in any chain: no ESS to speak of
            continue
        ess = az.ess(az.convert_to_dataset({"x": x}))["x"].values
        values.append(np.nanmin(ess))
    return float(min(values)) if values else float("nan")


def run_gradmc(target, choice, args, init=None) -> dict:
    """One gradmc run (from ``init``, else the target's own start): its draws, timings and evaluation count."""
    t0 = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", gradmc.RunWarning)
        trace = gradmc.sample(
            target,
            choice,
            num_chains=args.chains,
            num_warmup=args.warmup,
            num_draws=args.draws,
            seed=args.seed,
            init=init,
            progress=False,
        )
    total = time.perf_counter() - t0
    posterior = trace.posterior()
    return {
        "method": f"gradmc {trace.sampler}" + (" (+ mode shift)" if np.any(trace.params.get("joint", False)) else ""),
        "posterior": posterior,
        "end_to_end_s": total,
        "sampling_s": trace.timing["warmup_s"] + trace.timing["sampling_s"],
        "grad_evals": float(np.sum(trace.stats["num_grad_evals"]) + np.sum(trace.warmup_stats["num_grad_evals"])),
        "warnings": len(caught),
    }


def unconstrained(model, values: dict) -> dict:
    """``values`` of ``model``'s sites with each continuous one mapped to the unconstrained space."""
    from numpyro import handlers
    from numpyro.distributions.transforms import biject_to

    sites = handlers.trace(handlers.substitute(handlers.seed(model, 0), data=values)).get_trace()
    return {
        name: value if sites[name]["fn"].is_discrete else biject_to(sites[name]["fn"].support).inv(value)
        for name, value in values.items()
    }


@contextlib.contextmanager
def execution_seconds():
    """A one-element list that, by the block's end, holds the seconds spent running compiled
    programs inside it, each waited for, without tracing or compiling them: JAX's Python-side
    calls of a compiled program, timed (calls its C++ path makes after the first call of a
    jitted function are missed; a NumPyro run makes its chains' one call of its compiled loop
    through the Python side).
    """
    from jax._src.interpreters import pxla

    call = pxla.ExecuteReplicated.__call__
    spent = [0.0]

    def timed(self, *args):
        t0 = time.perf_counter()
        out = jax.block_until_ready(call(self, *args))
        spent[0] += time.perf_counter() - t0
        return out

    pxla.ExecuteReplicated.__call__ = timed
    try:
        yield spent
    finally:
        pxla.ExecuteReplicated.__call__ = call


def run_numpyro(model, init: dict, kernel_name: str, args) -> dict:
    """One NumPyro run (``DiscreteHMCGibbs(NUTS)`` or ``MixedHMC(HMC)``) from the same start as
    gradmc's, then a second in the same process. Each ``MCMC.run`` with ``chain_method=jax.vmap``
    traces and compiles its chains again, so the second run's seconds are those of a rerun, and
    its sampling alone is the time its compiled programs ran (:func:`execution_seconds`): the
    quicker of the two runs', or the second's with ``--no-repeat`` (gradmc then runs once).
    """
    from numpyro.infer import HMC, MCMC, NUTS, DiscreteHMCGibbs, MixedHMC, init_to_value

    start = init_to_value(values=init)

    def kernel():
        if kernel_name == "DiscreteHMCGibbs(NUTS)":
            return DiscreteHMCGibbs(NUTS(model, init_strategy=start))
        return MixedHMC(HMC(model, trajectory_length=1.2, init_strategy=start), num_discrete_updates=20)

    def once(seed):
        mcmc = MCMC(
            kernel(),
            num_warmup=args.warmup,
            num_samples=args.draws,
            num_chains=args.chains,
            chain_method=jax.vmap,  # vectorised over chains; the Gibbs kernels refuse "vectorized"
            progress_bar=False,
        )
        mcmc.run(jax.random.key(seed))
        samples = mcmc.get_samples(group_by_chain=True)
        jax.block_until_ready(samples)
        return samples

    from numpyro import validation_enabled

    # NumPyro's support checks compare on the host and fail under tracing where a Binomial's total
    # count is a latent count (the N-mixture); gradmc turns them off inside its log density too
    with validation_enabled(False):
        with execution_seconds() as first_running:
            t0 = time.perf_counter()
            samples = once(args.seed)
            total = time.perf_counter() - t0
        with execution_seconds() as running:
            t0 = time.perf_counter()
            once(args.seed + 1)  # the same program, traced and compiled again
            again = time.perf_counter() - t0
    posterior = {name: np.asarray(value) for name, value in samples.items()}
    return {
        "method": f"numpyro {kernel_name}",
        "posterior": posterior,
        "end_to_end_s": total,
        # sampling alone: the quicker of the two runs' (one run's without gradmc's repeats, as gradmc's)
        "sampling_s": running[0] if args.no_repeat else min(first_running[0], running[0]),
        "repeat_s": again,
        "grad_evals": float("nan"),
        "warnings": 0,
    }


#: An integer site whose draws reach this value is a count, compared by its mean (fewer values: a label).
COUNT_LIKE = 16


def site_kinds(posterior: dict, discrete, categories: dict | None = None) -> dict:
    """How each discrete site's posterior mean is compared, read once from one run (the
    reference, else the first) so that every run is compared alike: the number of categories
    of a label (``categories[name]`` where given, else as many as were drawn), else None (the
    mean of its value: a count, or a 0/1 site).
    """
    kinds = {}
    for name in discrete:
        x = np.asarray(posterior[name])
        label = x.dtype.kind in "iu" and x.max() < COUNT_LIKE and (name in (categories or {}) or x.max() > 1)
        kinds[name] = (categories or {}).get(name, int(x.max()) + 1) if label else None
    return kinds


def discrete_means(posterior: dict, kinds: dict) -> np.ndarray:
    """Posterior means of the discrete sites' values, or of each category's indicator for a
    label (:func:`site_kinds`).
    """
    out = []
    for name, num in kinds.items():
        x = np.asarray(posterior[name])
        if num is None:
            out.append(x.mean(axis=(0, 1)).ravel())
        else:
            out.append(np.stack([(x == k).mean(axis=(0, 1)) for k in range(num)], -1).ravel())
    return np.concatenate(out)


def report(run: dict, continuous, discrete, ref_means, kinds: dict) -> None:
    """One row of the table, printed as soon as its run ends."""
    ess = min_ess(run["posterior"], continuous + discrete)
    err = np.max(np.abs(discrete_means(run["posterior"], kinds) - ref_means))
    cells = (
        ess,
        run["end_to_end_s"],
        run["sampling_s"],
        run["repeat_s"],
        ess / run["end_to_end_s"],
        ess / run["sampling_s"],
        ess / run["repeat_s"],
        1000 * ess / run["grad_evals"],
        err,
        run["warnings"],
    )
    print(f"{run['method']:48s} " + " ".join(f"{c:12.4g}" for c in cells), flush=True)


def run_form(built: tuple, form: str, text: str, args) -> dict:
    """gradmc's run of a model (``built``, as a :data:`MODELS` entry returns it) in one form:
    ``"own"``, its log density with the choice ``text``; ``"numpyro"``, ``"auto"`` on
    ``gradmc.from_numpyro`` of its NumPyro model, whose reading of the model counts in its end
    to end, from the NumPyro runs' start.
    """
    target, model, init, _, _ = built
    if form == "own":
        choice = "auto" if text == "auto" else dict(pair.split("=") for pair in text.split(";"))
        return run_gradmc(target, choice, args)
    t0 = time.perf_counter()
    numpyro_target = gradmc.from_numpyro(model)
    reading = time.perf_counter() - t0  # part of a first run, as NumPyro's own reading of the model is
    # the NumPyro runs' start, its continuous sites unconstrained as gradmc.from_numpyro samples them
    start = unconstrained(model, init)
    start = np.concatenate([np.ravel(start[name]) for name in numpyro_target.space.parts]).astype(np.float32)
    run = run_gradmc(numpyro_target, "auto", args, init=start)
    run["method"] = run["method"].replace("gradmc", "gradmc from_numpyro:")
    run["end_to_end_s"] += reading
    return run


def draws_digest(posterior: dict) -> str:
    """A digest of a run's draws: the same for runs that drew the same numbers."""
    digest = hashlib.sha1()
    for name in sorted(posterior):
        digest.update(np.ascontiguousarray(posterior[name]).tobytes())
    return digest.hexdigest()


#: NumPyro kernels left out of a model's rows unless ``--slow`` is given: MixedHMC on the
#: N-mixture model had not finished one run after 15 minutes (its discrete updates, taken inside
#: every trajectory, step through 50 counts of 61 values each).
SLOW = {"nmixture": ("MixedHMC(HMC)",)}

#: The environment variable that hands a repeated run's process its compilation cache folder.
REPEAT_CACHE = "GRADMC_MIXED_REPEAT_CACHE"


def repeat_run(model_name: str, form: str, text: str, args) -> dict:
    """The run of :func:`run_form` as a user's second run of the same script: a new process runs
    it into an empty compilation cache, then another loads the compiled programs from there.
    The second's seconds end to end and of sampling alone, and its draws' digest.
    """
    options = ["--chains", args.chains, "--warmup", args.warmup, "--draws", args.draws, "--seed", args.seed]
    command = [sys.executable, __file__, "--models", model_name, "--gradmc", text, "--repeat-of", form]
    command += [str(option) for option in options]
    with tempfile.TemporaryDirectory(prefix="gradmc-mixed-cache-") as cache:
        env = {**os.environ, "GRADMC_NO_COMPILE_CACHE": "0", REPEAT_CACHE: cache}
        for _ in range(2):
            out = subprocess.run(command, env=env, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def with_repeat(run: dict, model_name: str, form: str, text: str, args) -> dict:
    """``run`` with the seconds end to end of its :func:`repeat_run`, which must draw the same
    numbers, and the quicker of the two runs' sampling alone."""
    again = repeat_run(model_name, form, text, args)
    if again["digest"] != draws_digest(run["posterior"]):
        raise RuntimeError(f"{model_name} ({form}, {text}): the run in a new process drew other numbers")
    # sampling alone: the quicker of the first run's and the repeat's, as NumPyro's is of its two runs
    return {**run, "repeat_s": again["end_to_end_s"], "sampling_s": min(run["sampling_s"], again["sampling_s"])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="gmm24,ssvs,coal,mixture,hmm,logistic,nmixture")
    parser.add_argument("--chains", type=int, default=4)
    parser.add_argument("--warmup", type=int, default=1000)
    parser.add_argument("--draws", type=int, default=2000)
    parser.add_argument("--reference-draws", type=int, default=10000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--gradmc", default="auto", help="gradmc choices: auto, or PART=NAME;PART=NAME, comma-separated"
    )
    parser.add_argument("--slow", action="store_true", help="also run the NumPyro kernels left out as too slow")
    parser.add_argument(
        "--no-repeat",
        action="store_true",
        help="leave out gradmc's repeated runs (the repeat columns read nan; sampling alone is one run each)",
    )
    parser.add_argument("--repeat-of", choices=("own", "numpyro"), help=argparse.SUPPRESS)  # repeat_run's process
    args = parser.parse_args()
    if args.repeat_of:
        enable_compilation_cache(os.environ[REPEAT_CACHE])
        run = run_form(MODELS[args.models](), args.repeat_of, args.gradmc, args)
        out = {key: run[key] for key in ("end_to_end_s", "sampling_s")}
        print(json.dumps({**out, "digest": draws_digest(run["posterior"])}))
        return
    for model_name in args.models.split(","):
        built = MODELS[model_name]()
        target, model, init, continuous, discrete = built
        ref_means, categories = EXACT.get(model_name, (None, None))
        kinds = None
        if ref_means is None:
            reference = gradmc.sample(
                target,
                "auto",
                num_chains=args.chains,
                num_warmup=args.warmup,
                num_draws=args.reference_draws,
                seed=args.seed + 100,
                progress=False,
            ).posterior()
            kinds = site_kinds(reference, discrete)
            ref_means = discrete_means(reference, kinds)
        print(f"\n{model_name}: {args.chains} chains, {args.warmup} warm-up steps, {args.draws} draws")
        columns = (
            "min ESS",
            "end-to-end s",
            "sampling s",
            "repeat s",
            "ESS/s e2e",
            "ESS/s samp",
            "ESS/s repeat",
            "ESS/1k grad",
            "max |err|",
            "warn",
        )
        print(f"{'method':48s} " + " ".join(f"{c:>12s}" for c in columns), flush=True)
        runs = [("own", text) for text in args.gradmc.split(",")] + [("numpyro", "auto")]
        for form, text in runs:
            run = run_form(built, form, text, args)
            if args.no_repeat:
                run = {**run, "repeat_s": float("nan")}
            else:
                run = with_repeat(run, model_name, form, text, args)
            kinds = kinds or site_kinds(run["posterior"], discrete, categories)
            report(run, continuous, discrete, ref_means, kinds)
        for kernel_name in ("DiscreteHMCGibbs(NUTS)", "MixedHMC(HMC)"):
            if kernel_name in SLOW.get(model_name, ()) and not args.slow:
                print(f"{'numpyro ' + kernel_name:48s} left out: over 15 minutes a run (--slow runs it)", flush=True)
                continue
            report(run_numpyro(model, init, kernel_name, args), continuous, discrete, ref_means, kinds)


if __name__ == "__main__":
    main()
