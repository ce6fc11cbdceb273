"""NumPyro models as gradmc targets, sampled on NumPyro's unconstrained space.

:func:`from_numpyro` builds the log density from NumPyro's potential energy (the negative
log joint of the latent sites, mapped to the real line, with the log-Jacobian of that
map); the trace's named variables are the constrained values of every latent site and
the deterministic sites, under their site names. NumPyro is imported only here, so
gradmc works without it (``pip install "gradmc[numpyro]"`` adds it).
"""

from __future__ import annotations

import importlib.util
import inspect
from collections.abc import Callable

import jax
from jax.flatten_util import ravel_pytree

from gradmc.base import Target
from gradmc.spaces import Real
from gradmc.variables import Variables

__all__ = ["from_numpyro", "numpyro_model_error"]

INSTALL_HINT = 'NumPyro models need NumPyro: pip install "gradmc[numpyro]"'


def _numpyro():
    try:
        import numpyro
    except ImportError:
        raise ImportError(INSTALL_HINT) from None
    return numpyro


def _model_trace(model: Callable, args: tuple, kwargs: dict) -> dict:
    """One run of ``model(*args, **kwargs)`` from its prior, recorded site by site."""
    from numpyro.handlers import seed, trace

    return trace(seed(model, 0)).get_trace(*args, **kwargs)


def numpyro_model_error(fn: Callable, kwargs: dict) -> str | None:
    """None when ``fn(**kwargs)`` runs as a NumPyro model with sample sites, else why not.

    Parameters
    ----------
    fn : callable
        A function that may be a NumPyro model.
    kwargs : dict
        Its keyword arguments (the data).
    """
    if importlib.util.find_spec("numpyro") is None:
        return "NumPyro is not installed"
    try:
        inspect.signature(fn).bind(**kwargs)
    except (TypeError, ValueError) as error:
        return f"it cannot be called with {sorted(kwargs) or 'no arguments'}: {error}"
    try:
        sites = _model_trace(fn, (), kwargs)
    except Exception as error:  # a user's function run as a model may fail in any way
        return f"running it as a model failed: {type(error).__name__}: {error}"
    if not any(site["type"] == "sample" for site in sites.values()):
        return "it has no numpyro.sample sites"
    return None


def _check_discrete_sites(sites: dict) -> None:
    """Raise ``ValueError`` for a discrete latent site NumPyro cannot sum out (enumerate)."""
    for name, site in sites.items():
        if site["type"] != "sample" or site["is_observed"] or not site["fn"].support.is_discrete:
            continue
        kind = type(site["fn"]).__name__
        if not site["fn"].has_enumerate_support:
            raise ValueError(
                f"latent site {name!r} ({kind}) is discrete with unbounded support: the samplers move the "
                "continuous sites only, and NumPyro can sum out only discrete sites of finite support "
                "(Bernoulli, Categorical); marginalise it in the model or observe it"
            )
        marked = site["infer"].get("enumerate")
        if marked not in (None, "parallel"):
            raise ValueError(
                f"latent site {name!r} ({kind}) is marked enumerate={marked!r}; it is summed out only with "
                'infer={"enumerate": "parallel"}'
            )
        if importlib.util.find_spec("funsor") is None:
            raise ValueError(
                f"latent site {name!r} ({kind}) is discrete: NumPyro sums it out by enumeration, which needs "
                "the funsor package (pip install funsor)"
            )


def from_numpyro(model: Callable, *args, **kwargs) -> Target:
    """A :class:`~gradmc.base.Target` for the NumPyro model ``model(*args, **kwargs)``.

    Positions are NumPyro's unconstrained values of the continuous latent sites, flattened
    (``ravel_pytree``); the log density is minus NumPyro's potential energy, so it includes
    the log-Jacobian of each site's transform to the real line. Discrete latent sites of
    finite support are summed out by enumeration (mark them ``infer={"enumerate":
    "parallel"}``; this needs ``funsor``). ``initial_position`` is NumPyro's default
    initialisation (uniform in (-2, 2) on the unconstrained scale, retried until the log
    density and its gradient are finite), so ``gradmc.sample`` needs no ``init``. The
    target's :class:`~gradmc.variables.Variables` give the constrained value of every
    latent site and the value of every ``numpyro.deterministic`` site, under their names.

    Parameters
    ----------
    model : callable
        A NumPyro model.
    *args, **kwargs
        Its arguments (the data), fixed for the target.

    Raises
    ------
    ImportError
        Without NumPyro installed.
    ValueError
        For a discrete latent site NumPyro cannot sum out, or a model without continuous
        latent sites.
    """
    _numpyro()
    from numpyro.infer.util import initialize_model

    if not callable(model):
        raise TypeError(f"model must be a NumPyro model function, got {type(model).__name__}")
    sites = _model_trace(model, args, kwargs)
    _check_discrete_sites(sites)
    names = [
        name
        for name, site in sites.items()
        if (site["type"] == "sample" and not site["is_observed"] and not site["fn"].support.is_discrete)
        or site["type"] == "deterministic"
    ]
    info = initialize_model(jax.random.key(0), model, model_args=args, model_kwargs=kwargs)
    flat, unravel = ravel_pytree(info.param_info.z)
    if flat.size == 0:
        raise ValueError("the NumPyro model has no continuous latent sites to sample")
    potential_fn, postprocess_fn = info.potential_fn, info.postprocess_fn

    def logdensity_fn(x):
        return -potential_fn(unravel(x))

    def initial_position(key):
        start = initialize_model(key, model, model_args=args, model_kwargs=kwargs).param_info.z
        return ravel_pytree(start)[0]

    def named(x):
        values = postprocess_fn(unravel(x))
        return {name: values[name] for name in names if name in values}

    title = getattr(model, "__name__", "numpyro-model")
    return Target(
        name=title,
        logdensity_fn=logdensity_fn,
        space=Real(int(flat.size)),
        description=f"NumPyro model {title} on its unconstrained space (d = {flat.size})",
        initial_position=initial_position,
        variables=Variables(named, flat.shape),
    )
