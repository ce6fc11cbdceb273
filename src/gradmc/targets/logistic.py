"""Bayesian logistic regression: the data sets of Titsias & Dellaportas (2019), and a synthetic one.

Model (paper §4.2): labels ``y_i in {0, 1}``, inputs ``s_i`` = the standardised features
(zero mean, unit sample variance, ddof=1) with a 1 appended for the intercept, prior
``w ~ N(0, I)`` and likelihood ``sum_i y_i log sigmoid(s_i.w) + (1 - y_i) log(1 - sigmoid(s_i.w))``.

The six data sets ship with the package (``gradmc/data/logistic/*.csv.gz``, byte-identical
to the published CSVs after ``gunzip``). Their reference posterior mean and standard
deviation come from long NUTS runs (``scripts/compute_logistic_reference.py``, stored in
``gradmc/data/logistic_reference.json``) and are the targets' :class:`~gradmc.base.Truth`.
Every target also carries a :class:`~gradmc.base.PerDatumModel` for minibatch samplers,
and names its position: the variable ``beta`` along the axis ``coefficient``, labelled by
the data set's column names and ``intercept``.
"""

from __future__ import annotations

import gzip
import json
from importlib import resources

import jax.numpy as jnp
import numpy as np

from gradmc.base import PerDatumModel, Target, Truth
from gradmc.registry import register_target
from gradmc.spaces import Real
from gradmc.variables import Variables

__all__ = [
    "DATASETS",
    "feature_names",
    "load_dataset",
    "design_matrix",
    "logistic_target",
    "synthetic_logistic",
    "load_reference",
]

#: name -> (number of parameters = features + intercept, description)
DATASETS = {
    "australian": (15, "Statlog Australian credit, 690 rows"),
    "german": (25, "German credit (numeric), 1000 rows"),
    "heart": (14, "Statlog heart, 270 rows"),
    "pima": (8, "Pima Indians diabetes (MASS Pima.tr + Pima.te), 532 rows"),
    "ripley": (3, "Ripley's synthetic data (MASS synth.tr), 250 rows"),
    "caravan": (86, "Caravan insurance (ISLR), 5822 rows, 348 positives"),
}

_DATA = resources.files("gradmc") / "data"


def _open_csv(name: str):
    """The vendored CSV of data set ``name``, opened as text."""
    if name not in DATASETS:
        raise ValueError(f"unknown logistic-regression data set {name!r}; expected one of {sorted(DATASETS)}")
    return gzip.open(_DATA.joinpath("logistic", f"{name}.csv.gz").open("rb"), "rt")


def feature_names(name: str) -> list[str]:
    """The column names of a vendored data set's features (its CSV header, label excluded).

    Parameters
    ----------
    name : str
        A key of :data:`DATASETS`.
    """
    with _open_csv(name) as f:
        return f.readline().strip().split(",")[:-1]


def load_dataset(name: str) -> tuple[np.ndarray, np.ndarray]:
    """Raw features ``(N, D)`` float64 and labels ``(N,)`` int32 of a vendored data set."""
    with _open_csv(name) as f:
        table = np.loadtxt(f, delimiter=",", skiprows=1, dtype=np.float64)
    return table[:, :-1], table[:, -1].astype(np.int32)


def design_matrix(features: np.ndarray) -> np.ndarray:
    """Standardise every column (ddof=1) and append an intercept column of ones."""
    x = np.asarray(features, dtype=np.float64)
    if x.ndim != 2 or x.shape[0] < 2:
        raise ValueError(f"features must be a 2-D array with at least 2 rows, got shape {x.shape}")
    sd = x.std(axis=0, ddof=1)
    if np.any(sd == 0):
        raise ValueError(f"feature columns {np.flatnonzero(sd == 0).tolist()} are constant; cannot standardise")
    return np.hstack([(x - x.mean(axis=0)) / sd, np.ones((x.shape[0], 1))])


def _loglik(w, datum):
    """Log p(y | s, w) = y z - log(1 + e^z), z = s.w (stable form of the Bernoulli-logit)."""
    s, y = datum
    z = s @ w
    return y * z - jnp.logaddexp(0.0, z)


def _logprior(w):
    return -0.5 * jnp.sum(w * w)


def load_reference(name: str) -> dict | None:
    """The stored NUTS reference of data set ``name`` (mean, sd, mcse, settings), or None."""
    path = _DATA.joinpath("logistic_reference.json")
    if not path.is_file():
        return None
    table = json.loads(path.read_text())
    return table["datasets"].get(name)


def logistic_target(
    name: str,
    design: np.ndarray,
    labels: np.ndarray,
    truth: Truth | None = None,
    description: str = "",
    metadata: dict | None = None,
    dtype="float32",
    coefficient_names=None,
) -> Target:
    """A Bayesian logistic-regression :class:`Target` for a design matrix and 0/1 labels.

    ``dtype`` is the precision of the stored data (``"float64"`` needs ``jax_enable_x64``).
    The position is the variable ``beta`` along the axis ``coefficient``, labelled by
    ``coefficient_names`` (one per column of ``design``) when given.
    """
    design = np.asarray(design)
    labels = np.asarray(labels)
    if design.ndim != 2 or labels.shape != (design.shape[0],):
        raise ValueError(f"design must be (N, p) and labels (N,), got {design.shape} and {labels.shape}")
    if not np.all((labels == 0) | (labels == 1)):
        raise ValueError("labels must be 0 or 1")
    if dtype not in ("float32", "float64"):
        raise ValueError(f"dtype must be 'float32' or 'float64', got {dtype!r}")
    if coefficient_names is not None and len(coefficient_names) != design.shape[1]:
        raise ValueError(f"coefficient_names has {len(coefficient_names)} names for {design.shape[1]} columns")
    data = (jnp.asarray(design, dtype), jnp.asarray(labels, dtype))
    coords = None if coefficient_names is None else {"coefficient": list(coefficient_names)}

    def logdensity_fn(w):
        s, y = data
        z = s @ w
        return _logprior(w) + jnp.sum(y * z - jnp.logaddexp(0.0, z))

    return Target(
        name=name,
        logdensity_fn=logdensity_fn,
        space=Real(design.shape[1]),
        description=description,
        truth=truth,
        per_datum=PerDatumModel(_logprior, _loglik, data),
        metadata={"num_data": int(design.shape[0]), **(metadata or {})},
        variables=Variables.reshaped("beta", (design.shape[1],), dims=("coefficient",), coords=coords),
    )


def _dataset_target(name: str, dtype: str) -> Target:
    features, labels = load_dataset(name)
    dim, about = DATASETS[name]
    ref = load_reference(name)
    source = "NUTS reference, scripts/compute_logistic_reference.py"
    truth = None if ref is None else Truth(mean=np.asarray(ref["mean"]), var=np.asarray(ref["sd"]) ** 2, source=source)
    target = logistic_target(
        f"logistic-{name}",
        design_matrix(features),
        labels,
        truth,
        description=f"Bayesian logistic regression, prior N(0, I), {about}; d = {dim}",
        metadata={"dataset": name, "reference": ref},
        dtype=dtype,
        coefficient_names=[*feature_names(name), "intercept"],
    )
    assert target.dim == dim, (name, target.dim)
    return target


def _register(name: str) -> None:
    dim, about = DATASETS[name]

    @register_target(f"logistic-{name}", f"Bayesian logistic regression on {about} (d = {dim}); NUTS reference moments")
    def factory(dtype: str = "float32") -> Target:
        return _dataset_target(name, dtype)


for _name in DATASETS:
    _register(_name)


@register_target("logistic-synthetic", "Bayesian logistic regression on simulated data (num_data, num_features, seed)")
def synthetic_logistic(num_data: int = 1000, num_features: int = 10, seed: int = 0, dtype: str = "float32") -> Target:
    """Simulated data: features ~ N(0, 1), true weights ~ N(0, I), labels ~ Bernoulli(sigmoid(s.w)).

    Features are standardised and an intercept appended as for the real data sets, so the
    parameter dimension is ``num_features + 1``. No truth is known.
    """
    if int(num_data) < 2 or int(num_features) < 1:
        raise ValueError(f"need num_data >= 2 and num_features >= 1, got {num_data}, {num_features}")
    rng = np.random.default_rng(seed)
    design = design_matrix(rng.standard_normal((int(num_data), int(num_features))))
    w = rng.standard_normal(design.shape[1])
    labels = (rng.uniform(size=design.shape[0]) < 1.0 / (1.0 + np.exp(-design @ w))).astype(np.int32)
    return logistic_target(
        f"logistic-synthetic-{num_data}x{num_features}",
        design,
        labels,
        description=f"Bayesian logistic regression on {num_data} simulated points, {num_features} features",
        metadata={"true_weights": w, "seed": seed},
        dtype=dtype,
        coefficient_names=[f"x{i + 1}" for i in range(int(num_features))] + ["intercept"],
    )
