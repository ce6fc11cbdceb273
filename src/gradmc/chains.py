"""Statistics shared across chains: the runner vmaps chains over a named ``"chain"`` axis,
and a warm-up that learns from all chains pools its sums over that axis (or, run outside the
runner, keeps each chain's own).
"""

from __future__ import annotations

import jax

__all__ = ["gather_chains", "pool_chains"]


def gather_chains(x):
    """``x`` of every chain stacked, ``(num_chains, ...)``, when the runner's ``"chain"`` axis
    exists (else ``x[None]``): held once, so products over chains are one matrix product.

    Parameters
    ----------
    x : jax.Array
        A per-chain array.
    """
    try:
        return jax.lax.all_gather(x, "chain")
    except NameError:
        return x[None]


def pool_chains(x):
    """Mean over the runner's ``"chain"`` axis when it exists (else ``x`` itself).

    Parameters
    ----------
    x : jax.Array
        A per-chain statistic.
    """
    try:
        return jax.lax.pmean(x, "chain")
    except NameError:
        return x
