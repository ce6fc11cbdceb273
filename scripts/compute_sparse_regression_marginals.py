"""Exact marginals of the sparse-regression posterior (Rhodes & Gutmann App. K), run once.

Enumerates the 2^20 masks of the 20 real dimensions in float64
(:func:`gradmc.targets.sparse_regression.enumerate_posterior`) and writes the exact
bivariate marginals P(s_i = a, s_j = b) (whose diagonal blocks are the univariate ones)
with the data and hyperparameters they belong to, to
``src/gradmc/data/sparse_regression_marginals.npz``. The target loads them as its truth
when its data match. A few seconds on two CPU cores.

    python scripts/compute_sparse_regression_marginals.py [--seed 0]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from gradmc.targets.sparse_regression import CACHE_FILE, Hyperparameters, enumerate_posterior, make_data

OUT = Path(__file__).resolve().parents[1] / "src" / "gradmc" / "data" / CACHE_FILE


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0, help="seed of numpy.random.default_rng for the data")
    args = parser.parse_args()
    x, y = make_data(args.seed)
    hyper = Hyperparameters()
    t0 = time.perf_counter()
    exact = enumerate_posterior(x, y, hyper)
    elapsed = time.perf_counter() - t0
    np.savez_compressed(
        OUT,
        pairwise=exact.pairwise,
        log_normaliser=exact.log_normaliser,
        x=x,
        y=y,
        seed=args.seed,
        hyper=np.asarray(hyper, np.float64),
        hyper_names=np.asarray(Hyperparameters._fields),
    )
    marg = exact.marginals[:, 1]
    print(f"enumerated 2^{x.shape[1]} states in {elapsed:.1f} s; log Z = {exact.log_normaliser:.6f}")
    print("P(s_i = 1):", np.array2string(marg, precision=4))
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
