"""Sampler-quality metrics: ESS, R-hat, MCSE, moment errors, discrete-marginal errors, TV, MMD.

All functions take NumPy-compatible draws shaped (chain, draw, *event) and return NumPy
values; one concept per module:

* :mod:`.ess` — ArviZ summary (bulk/tail ESS, R-hat, MCSE), Geyer ESS of a statistic;
* :mod:`.batch_means` — multivariate batch-means ESS (Vats et al.) and Zhou & Tan's ESS;
* :mod:`.moments` — errors and MCSE z-scores of moments, bias/variance over chains;
* :mod:`.discrete` — Rhodes & Gutmann's per-chain marginal errors;
* :mod:`.tv` — TV distances and the chance bound on them;
* exact distributions of small discrete targets (from :mod:`gradmc.enumeration`);
* :mod:`.mmd` — maximum mean discrepancy;
* :mod:`.discs` — the DISCS benchmark's ESS metric (Hamming / label-L1 distance to a reference);
* :mod:`.accumulator` — running sums of a sampler's history for errors over time.
* :mod:`.health` — the warnings attached to every run (R-hat, ESS, stuck chains, divergences,
  failed adaptation).
"""

from gradmc.diagnostics.accumulator import Accumulator
from gradmc.diagnostics.batch_means import multivariate_ess, zhoutan_ess
from gradmc.diagnostics.discrete import (
    covariance_frobenius_error,
    empirical_marginals,
    empirical_pair_marginals,
    marginal_kl,
    mean_abs_marginal_error,
    pairwise_error,
)
from gradmc.diagnostics.discs import DiscsESS, discs_ess, discs_ess_per_step, discs_statistic
from gradmc.diagnostics.ess import (
    ess_l1_statistic,
    ess_per_grad,
    ess_per_second,
    ess_stats,
    format_summary,
    geyer_ess,
    named_summary,
    summary,
)
from gradmc.diagnostics.health import RunWarning, run_warnings
from gradmc.diagnostics.mmd import mmd
from gradmc.diagnostics.moments import mcse_z, moment_bias_variance, moment_errors
from gradmc.diagnostics.tv import tv_bound, tv_distance, tv_marginals
from gradmc.enumeration import ExactDistribution, enumerate_states, exact_distribution

__all__ = [
    "Accumulator",
    "RunWarning",
    "run_warnings",
    "summary",
    "named_summary",
    "format_summary",
    "ess_stats",
    "ess_per_second",
    "ess_per_grad",
    "geyer_ess",
    "ess_l1_statistic",
    "multivariate_ess",
    "zhoutan_ess",
    "moment_errors",
    "mcse_z",
    "moment_bias_variance",
    "empirical_marginals",
    "empirical_pair_marginals",
    "marginal_kl",
    "mean_abs_marginal_error",
    "pairwise_error",
    "covariance_frobenius_error",
    "tv_distance",
    "tv_bound",
    "tv_marginals",
    "enumerate_states",
    "exact_distribution",
    "ExactDistribution",
    "mmd",
    "DiscsESS",
    "discs_ess",
    "discs_ess_per_step",
    "discs_statistic",
]
