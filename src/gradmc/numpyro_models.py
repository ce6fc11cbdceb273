"""NumPyro models as gradmc targets, sampled on NumPyro's unconstrained space.

:func:`from_numpyro` builds the log density from NumPyro's potential energy (the negative
log joint of the latent sites, mapped to the real line, with the log-Jacobian of that
map); the trace's named variables are the constrained values of every latent site and
the deterministic sites, under their site names. NumPyro is imported only here, so
gradmc works without it (``pip install -e ".[numpyro]"`` in the repository adds it).
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import inspect
import warnings
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree

from gradmc.base import INDEX_PARTS, RunWarning, Target
from gradmc.discrete.plate_gibbs import SITE_TERMS
from gradmc.mode_shift import LABELS
from gradmc.spaces import Binary, Count, Ordinal, Product, Real, Space
from gradmc.variables import Variables

__all__ = ["from_numpyro", "numpyro_model_error"]

INSTALL_HINT = (
    'NumPyro models need NumPyro: pip install -e ".[numpyro]" in the gradmc repository, '
    'or pip install "numpyro>=0.22,<0.23"'
)


def _numpyro():
    try:
        import numpyro
    except ImportError:
        raise ImportError(INSTALL_HINT) from None
    return numpyro


#: An unbounded count is kept at most ``COUNT_REACH`` times its reach in the prior runs (the
#: largest draw, or its distribution's mean plus ten standard deviations), plus ``COUNT_MARGIN``;
#: a run whose draws reach that bound warns (``infer={"max_value": N}`` on the site sets it).
COUNT_REACH, COUNT_MARGIN = 2, 50


def _without_validation(fn: Callable) -> Callable:
    """``fn`` run with NumPyro's support checks off. Under tracing they compare on the host
    (a Binomial whose ``total_count`` is a sampled count fails there), and gradmc's positions
    are in the support by construction.
    """

    @functools.wraps(fn)
    def run(*args, **kwargs):
        from numpyro import validation_enabled

        with validation_enabled(False):
            return fn(*args, **kwargs)

    return run


def _start_of_improper(site):
    """NumPyro's uniform start for a latent site whose distribution cannot be sampled (an
    ``ImproperUniform``, which gives a support and no prior); None for any other site.
    """
    from numpyro.distributions import ImproperUniform
    from numpyro.infer.initialization import init_to_uniform

    if site["type"] != "sample" or site["is_observed"]:
        return None
    fn = site["fn"]
    while hasattr(fn, "base_dist"):  # Independent, ExpandedDistribution, MaskedDistribution
        fn = fn.base_dist
    return init_to_uniform(site) if isinstance(fn, ImproperUniform) else None


def _seeded(model: Callable, seed) -> Callable:
    """``model`` run from its prior with ``seed`` (an int or a key); a site with an improper
    prior at a uniform start in (−2, 2), unconstrained, as NumPyro starts it.
    """
    from numpyro import handlers

    return handlers.substitute(handlers.seed(model, seed), substitute_fn=_start_of_improper)


def _model_trace(model: Callable, args: tuple, kwargs: dict, seed: int = 0) -> dict:
    """One run of ``model(*args, **kwargs)`` from its prior (:func:`_seeded`), recorded site by site."""
    from numpyro import handlers

    return handlers.trace(_seeded(model, seed)).get_trace(*args, **kwargs)


#: What a site recorded by :func:`_prior_runs` keeps beside its value (and a sample site's
#: distribution): the model's structure, the same in every run.
_SITE_KEYS = ("type", "name", "is_observed", "infer", "cond_indep_stack")


def _prior_runs(model: Callable, args: tuple, kwargs: dict, seeds: tuple[int, ...]) -> list[dict]:
    """Runs of ``model(*args, **kwargs)`` from its prior (:func:`_seeded`), one per seed, each
    recorded site by site in the model's order (its :data:`_SITE_KEYS`, ``value`` and, for a
    sample site, ``fn``, the distribution with concrete parameters): one compiled program run
    once per seed, where eager runs compile the model's operations one by one (0.5-1.5 s on
    a first call).
    """
    from numpyro import handlers

    structure = {}

    @jax.jit
    def run(key):
        sites = handlers.trace(_seeded(model, key)).get_trace(*args, **kwargs)
        structure.update({name: {field: site.get(field) for field in _SITE_KEYS} for name, site in sites.items()})
        return {
            name: {"value": site["value"], **({"fn": site["fn"]} if site["type"] == "sample" else {})}
            for name, site in sites.items()
            if site["type"] in ("sample", "deterministic")
        }

    with _traceable(model):
        recorded = [run(jax.random.key(seed)) for seed in seeds]
    return [{name: {**structure[name], **values.get(name, {})} for name in structure} for values in recorded]


def _marked(site: dict):
    """How the site is marked to be enumerated (``infer={"enumerate": ...}``), or None."""
    return site["infer"].get("enumerate")


def _enumerated(sites: dict) -> list[str]:
    """The discrete latent sites marked ``infer={"enumerate": "parallel"}``: NumPyro sums them out."""
    return [name for name, site in sites.items() if _is_discrete_latent(site) and _marked(site) == "parallel"]


def _recover_enumerated(model: Callable, args: tuple, kwargs: dict, sites: dict) -> Callable | None:
    """``recover(named, key)`` for the target's :class:`~gradmc.variables.Variables`: each site
    marked ``infer={"enumerate": "parallel"}`` drawn from its conditional given the other
    latent sites' draws (NumPyro's ``Predictive(..., infer_discrete=True)``, which runs
    ``infer_discrete`` on every draw); None when the model has no such site. Where NumPyro
    cannot draw them (a site marked inside ``scan``, which its ``infer_discrete`` does not
    handle), ``recover`` warns with the fix and leaves them out.
    """
    enumerated = _enumerated(sites)
    if not enumerated:
        return None
    latent = [n for n, s in sites.items() if s["type"] == "sample" and not s["is_observed"] and n not in enumerated]
    failed: list[str] = []  # why NumPyro could not draw them, once known: not tried again

    @_without_validation
    def recover(named: dict, key) -> dict:
        from numpyro.infer import Predictive

        if not failed:
            given = {name: jnp.asarray(named[name]) for name in latent if name in named}
            draw = Predictive(model, given, infer_discrete=True, return_sites=enumerated, batch_ndims=2)
            try:
                with warnings.catch_warnings():  # funsor asks for float64 on some models (a Poisson's)
                    warnings.filterwarnings("ignore", "Explicitly requested dtype float64", UserWarning)
                    return {name: np.asarray(value) for name, value in draw(key, *args, **kwargs).items()}
            except Exception as error:  # NumPyro's infer_discrete may fail in any way on a model it does not handle
                failed.append(f"{type(error).__name__}: {error}".strip(": "))
        names = ", ".join(map(repr, enumerated))
        warnings.warn(
            f"NumPyro's infer_discrete could not draw the summed-out sites {names} back from their conditionals "
            f"({failed[0]}), so the posterior leaves them out; without infer={{'enumerate': 'parallel'}} on them "
            "gradmc samples them instead (states written in scan are drawn together by FFBS)",
            RunWarning,
            stacklevel=5,  # the caller of trace.posterior()
        )
        return {}

    return recover


def _plates_of(site: dict) -> tuple | None:
    """The plates along which a discrete site's entries lie, one per axis of its value (a
    vector of N > 1 entries in a plate of size N at dim -1; an (G, N) array in plates at dims
    -2 and -1; an (N, 1) array in a plate at dim -2, its last axis a broadcast one, ...), in the
    order of the axes; None where an axis of more than one entry lies in no plate.
    """
    shape = np.shape(site["value"])
    if not shape or int(np.prod(shape)) < 2:
        return None
    frames = []
    for dim, size in zip(range(-len(shape), 0), shape, strict=True):
        frame = next((f for f in site["cond_indep_stack"] if f.dim == dim and f.size == size), None)
        if frame is None and size > 1:
            return None
        frames += [] if frame is None else [frame]
    return tuple(frames)


#: How many random halves of a site's entries :func:`_independence_moves` moves, and their seed:
#: a coupling of two entries escapes all of them with probability 2^-16.
CHECK_HALVES, CHECK_SEED = 16, 0


def _independence_moves(start: np.ndarray, index: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """How :func:`_site_terms` moves a site's entries (at ``index`` in the flat position
    ``start``, each on the value set ``values``) to check their independence: ``changed``, one
    row per move, which entries it changes (all of them, entry 0 alone, and :data:`CHECK_HALVES`
    random halves), and ``positions``, ``start`` and then each move's position
    (a changed entry goes to the first value, or from it to the last). A single pattern can miss
    a coupling: a Markov chain's factor over 0/1 states sees only which neighbours agree, which
    flipping every state keeps.
    """
    halves = np.random.default_rng(CHECK_SEED).random((CHECK_HALVES, index.size)) < 0.5
    changed = np.concatenate([np.ones((1, index.size), bool), np.eye(1, index.size, dtype=bool), halves])
    current = start[index]
    positions = np.repeat(start[None], 1 + len(changed), axis=0)
    positions[1:, index] = np.where(changed, np.where(current == values[0], values[-1], values[0]), current)
    return changed, positions


def _site_terms(model_trace: Callable, space: Product, discrete: dict, sites: dict, start) -> dict[str, Callable]:
    """``{part: terms(x)}`` for each discrete site in plates whose entries are conditionally
    independent given the rest (:mod:`gradmc.discrete.plate_gibbs`): ``terms(x)[n]`` sums the
    log-probabilities of entry n (in the flat order of the site's value) of every site in
    those plates. Independence is checked at ``start`` (a position), with the site's entries
    moved in several ways (:func:`_independence_moves`): no move may change the sites outside the
    plates, nor the terms of an entry it left. A site that fails gets no terms.
    """

    def in_plates(site, frames):
        names = {f.name for f in site["cond_indep_stack"]}
        return all(frame.name in names for frame in frames)

    @_without_validation
    def log_prob(site):
        value = site["fn"].log_prob(site["value"])
        return value if site.get("scale") is None else value * site["scale"]

    def terms_of(frames):
        def terms(x):
            total = jnp.zeros(tuple(frame.size for frame in frames))
            for site in model_trace(x).values():
                if site["type"] == "sample" and in_plates(site, frames):
                    lp = jnp.broadcast_to(log_prob(site), site["fn"].batch_shape)
                    kept = [lp.ndim + frame.dim for frame in frames]
                    total = total + jnp.sum(lp, axis=tuple(i for i in range(lp.ndim) if i not in kept))
            return jnp.ravel(total)

        return terms

    def outside(x, frames):
        return sum(
            jnp.sum(log_prob(s)) for s in model_trace(x).values() if s["type"] == "sample" and not in_plates(s, frames)
        )

    found: dict[str, Callable] = {}
    for name in discrete:
        frames = _plates_of(sites[name])
        if frames is None:
            continue
        index = np.arange(space.slices[name].start, space.slices[name].stop)
        if index.size != np.prod([frame.size for frame in frames], dtype=int):
            continue  # not one entry per term
        changed, positions = _independence_moves(np.asarray(start), index, np.asarray(space.parts[name].values))
        terms = terms_of(frames)

        @jax.jit
        def check(positions, terms=terms, frames=frames):  # one program, the model's ops not one by one
            return jax.vmap(lambda x: outside(x, frames))(positions), jax.vmap(terms)(positions)

        outsides, each = (np.asarray(v) for v in check(jnp.asarray(positions)))
        if not np.allclose(outsides, outsides[0], rtol=1e-6, atol=1e-6):
            continue
        if not np.allclose(np.where(changed, each[0], each[1:]), each[0], rtol=1e-6, atol=1e-6):
            continue
        found[name] = terms
    return found


def _mixed_target(model: Callable, args: tuple, kwargs: dict, sites: dict, discrete: dict[str, Space]) -> Target:
    """:func:`from_numpyro` for a model with discrete latent sites gradmc samples: a target on a
    :class:`~gradmc.spaces.Product` of the continuous sites' unconstrained values and the
    discrete sites' values; the log density is minus NumPyro's potential energy of the model
    conditioned on the discrete values. 0/1 sites and counts of unbounded support enter it as
    floats (the gradient samplers differentiate it in them: a count's log-pmf continues to
    real values through lgamma), unless the model cannot take them so (it indexes an array
    with them, ``locs[z]``; one-site parts on equal spaces, a model's states written one site
    per time step, are tried together, :meth:`~gradmc.spaces.Product.discrete_groups`); those
    and the other discrete sites enter as integers of their own dtype (indices), where the
    gradient is zero and exact conditionals or ordinal-NCG's window proposal do the moving
    (``metadata["index_parts"]`` names them).
    """
    from numpyro.handlers import condition, substitute, trace
    from numpyro.infer.util import constrain_fn, potential_energy

    prototype = _unconstrained_prototype(sites)
    flat, unravel = ravel_pytree(prototype)
    continuous = {name: Real(int(np.size(value))) for name, value in sorted(prototype.items())}
    space = Product({**continuous, **discrete})
    num_continuous = int(flat.size)
    shapes = {name: np.shape(sites[name]["value"]) for name in discrete}
    dtypes = {name: sites[name]["value"].dtype for name in discrete}

    def split_with(continued: set[str]) -> Callable:
        """``split(x) -> (continuous sites, discrete sites)``, the ``continued`` ones as floats."""

        def split(x):
            values = {}
            for name in discrete:
                value = space.part(x, name).reshape(shapes[name])
                values[name] = value if name in continued else jnp.round(value).astype(dtypes[name])
            return unravel(x[:num_continuous]), values

        return split

    summed_out = bool(_enumerated(sites))
    if summed_out:  # NumPyro's enumeration, with its dims to the left of every plate's
        from numpyro.contrib.funsor import enum
        from numpyro.infer.util import _guess_max_plate_nesting

        first_enum_dim = -_guess_max_plate_nesting(sites) - 1

    def given(values: dict) -> Callable:
        """The model with its sampled discrete sites at ``values`` and its enumerated ones summed out."""
        conditioned = condition(model, data=values)
        return enum(conditioned, first_available_dim=first_enum_dim) if summed_out else conditioned

    def logdensity_with(split: Callable) -> Callable:
        @_without_validation
        def logdensity_fn(x):
            z, values = split(x)
            return -potential_energy(given(values), args, kwargs, z, enum=summed_out)

        return logdensity_fn

    def takes_floats(continued: set[str]) -> bool:
        position = jax.ShapeDtypeStruct((space.dim,), flat.dtype)
        try:
            jax.eval_shape(logdensity_with(split_with(continued)), position)
        except TypeError:  # an array indexed by a float, a shape from a traced value
            return False
        return True

    real_valued = {name for name, part in discrete.items() if isinstance(part, (Binary, Count))}
    if not takes_floats(real_valued):  # each group on its own: one-site parts on equal spaces (a model's
        groups = [set(group) & real_valued for group in space.discrete_groups()]  # states one per step) together
        real_valued = set().union(*(group for group in groups if group and takes_floats(group)))
    indices = frozenset(discrete) - real_valued
    split = split_with(real_valued)
    logdensity_fn = logdensity_with(split)

    def encoded(values: dict):
        """The discrete sites' ``values`` as the position's discrete entries."""
        return [_into(part, jnp.ravel(jnp.asarray(values[name])).astype(flat.dtype)) for name, part in discrete.items()]

    # the discrete values a chain's continuous start is searched at: the prior run's, unless the
    # log density is finite with each site at its largest value (a count above every observation
    # it must exceed) and not with them, with the continuous sites at 0 (unconstrained)
    prior_values = jnp.concatenate(encoded({name: sites[name]["value"] for name in discrete}))
    top_values = jnp.concatenate(encoded({name: _largest(sites[name], part) for name, part in discrete.items()}))

    def continuous_start(key):
        """NumPyro's uniform start (:func:`_uniform_start`) given those discrete values; NaN
        where it finds no finite log density and gradient.
        """
        finite = [jnp.isfinite(logdensity_fn(jnp.concatenate([flat, v]))) for v in (prior_values, top_values)]
        values = jnp.where(finite[0] | ~finite[1], prior_values, top_values)
        z = _uniform_start(key, lambda z: logdensity_fn(jnp.concatenate([z, values])), flat)
        value, grad = jax.value_and_grad(logdensity_fn)(jnp.concatenate([z, values]))
        return jnp.where(jnp.isfinite(value) & jnp.all(jnp.isfinite(grad)), z, jnp.nan)

    @jax.jit  # one compiled program: the model's operations one by one take seconds on a first call
    def initial_position(key):
        key_discrete, key_continuous = jax.random.split(key)
        prior = trace(_seeded(model, key_discrete)).get_trace(*args, **kwargs)
        values = encoded({name: prior[name]["value"] for name in discrete})
        return _lift_ordered(jnp.concatenate([continuous_start(key_continuous), *values]), space, logdensity_fn)

    @_without_validation
    def model_trace(x):
        z, values = split(x)
        conditioned = condition(model, data=values)
        latent = constrain_fn(conditioned, args, kwargs, z)
        return trace(substitute(conditioned, data=latent)).get_trace(*args, **kwargs)

    def named(x):
        z, values = split(x)
        out = constrain_fn(given(values), args, kwargs, z, return_deterministic=True)
        latent = {name: out[name] for name in out if name not in discrete}
        return {**latent, **{name: jnp.asarray(value, jnp.int32) for name, value in values.items()}}

    title = getattr(model, "__name__", "numpyro-model")
    start = initial_position(jax.random.key(0))
    if not np.all(np.isfinite(np.asarray(start[:num_continuous]))):
        raise ValueError(
            "NumPyro finds no finite log density for the continuous sites, with the discrete sites at their draws "
            f"from the prior or at their largest values ({', '.join(discrete)}); check the model's support"
        )
    site_terms = {}  # where sites are summed out, a site's log-probabilities are not its entries' terms
    if not summed_out:  # the independence check's tolerance is below a GPU's TF32 rounding: highest precision
        with jax.default_matmul_precision("highest"):
            site_terms = _site_terms(model_trace, space, discrete, sites, start)
    return Target(
        name=title,
        logdensity_fn=logdensity_fn,
        space=space,
        description=f"NumPyro model {title}: continuous sites unconstrained, discrete sites sampled ({space})",
        initial_position=initial_position,
        metadata={
            SITE_TERMS: site_terms,
            LABELS: _label_sites(sites, discrete, indices),
            INDEX_PARTS: indices,
        },
        variables=Variables(
            named,
            space.event_shape,
            recover=_recover_enumerated(model, args, kwargs, sites),
            derived=_deterministic(sites),
        ),
    )


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


def _deterministic(sites: dict) -> list[str]:
    """The model's ``numpyro.deterministic`` sites: computed from the others."""
    return [name for name, site in sites.items() if site["type"] == "deterministic"]


def _label_sites(sites: dict, discrete, indices: frozenset[str]) -> frozenset[str]:
    """The discrete sites drawn from a ``Categorical`` (through any ``expand``, ``mask`` or
    ``to_event``), and the 0/1 sites the model takes as ``indices`` (``level[s]`` of a
    ``Bernoulli`` state): their values name categories, which the mode shift may swap. (A 0/1
    site the model takes as a number, a switch multiplying a coefficient, is not one.)
    """
    from numpyro.distributions import BernoulliLogits, BernoulliProbs, CategoricalLogits, CategoricalProbs

    def base(fn):
        return base(fn.base_dist) if hasattr(fn, "base_dist") else fn

    def is_label(name):
        fn = base(sites[name]["fn"])
        return isinstance(fn, CategoricalProbs | CategoricalLogits) or (
            name in indices and isinstance(fn, BernoulliProbs | BernoulliLogits)
        )

    return frozenset(name for name in discrete if is_label(name))


def _is_discrete_latent(site: dict) -> bool:
    return site["type"] == "sample" and not site["is_observed"] and site["fn"].support.is_discrete


def _support(site: dict) -> np.ndarray:
    """The values a discrete site's distribution allows (over all its batch entries): where
    they differ between entries (a Binomial with one total count per entry), every value some
    entry allows; the log density is −∞ at an entry's values outside its own support.
    """
    fn = site["fn"]
    while hasattr(fn, "base_dist"):  # .to_event() and .expand() wrappers
        fn = fn.base_dist
    try:
        return np.unique(np.asarray(fn.enumerate_support(expand=False)))
    except NotImplementedError:  # NumPyro enumerates only supports that all entries share
        support = fn.support
        lower, upper = np.min(support.lower_bound), np.max(support.upper_bound)
        return np.arange(lower, upper + 1)


def _reach(site: dict) -> float:
    """The largest value a count site's prior run suggests: its draw, or its distribution's
    mean plus ten standard deviations, whichever is larger.
    """
    reach = float(np.max(site["value"]))
    try:
        reach = max(reach, float(np.max(site["fn"].mean + 10 * np.sqrt(site["fn"].variance))))
    except NotImplementedError:  # a distribution without moments: its draws alone
        pass
    return reach


def _count_space(name: str, kind: str, site: dict, again: list[dict]) -> Count:
    """The :class:`~gradmc.spaces.Count` of a latent site of unbounded support: from its
    support's lower bound to ``infer={"max_value": N}``, else to :data:`COUNT_REACH` times its
    reach over the prior runs (``site`` and ``again``) plus :data:`COUNT_MARGIN`.
    """
    low = int(getattr(site["fn"].support, "lower_bound", 0))
    high = site["infer"].get("max_value")
    if high is None:
        high = int(np.ceil(COUNT_REACH * max(_reach(s) for s in [site, *again]))) + COUNT_MARGIN
    try:
        return Count(int(np.size(site["value"])), high, low)
    except ValueError as error:
        raise ValueError(
            f"latent site {name!r} ({kind}) has unbounded support, which gradmc keeps between {low} and a bound; "
            f"{error}: set the bound with infer={{'max_value': N}} on the site"
        ) from None


def _into(space: Space, values):
    """A prior draw moved into ``space``: a count's beyond its bound kept at the bound."""
    return jnp.clip(values, space.low, space.high) if isinstance(space, Count) else values


#: The shares of the way from an ordered site's prior draw up to its largest value tried as
#: starts, in turn.
_LIFTS = (0.0, 0.125, 0.25, 0.5, 1.0)


def _lift_ordered(start, space: Product, logdensity_fn: Callable):
    """``start`` with its ordered sites (counts, integer ranges) raised towards their largest
    values (:data:`_LIFTS`, the first share where the log density is finite): a prior draw of
    a count is often below what the data imply (an N-mixture's N under its largest observed
    count), where the density is 0.
    """
    ordered = [name for name, part in space.parts.items() if isinstance(part, Ordinal)]
    if not ordered:
        return start

    def lifted(share):
        position = start
        for name in ordered:
            part, where = space.parts[name], space.slices[name]
            index = part.to_index(start[where])
            raised = jnp.round(index + share * (part.num_values - 1 - index)).astype(jnp.int32)
            position = position.at[where].set(part.from_index(raised).astype(start.dtype))
        return position

    tried = jnp.stack([lifted(share) for share in _LIFTS])
    finite = jnp.isfinite(jax.vmap(logdensity_fn)(tried))
    return tried[jnp.argmax(finite)]


#: NumPyro's default start: each unconstrained coordinate uniform in (-RADIUS, RADIUS), drawn
#: again (up to MAX_TRIES times) until the log density and its gradient are finite.
UNIFORM_START_RADIUS = 2.0
UNIFORM_START_MAX_TRIES = 100


def _uniform_start(key: jax.Array, logdensity_fn: Callable, like: jax.Array) -> jax.Array:
    """NumPyro's ``init_to_uniform`` on the flat unconstrained position (shape and dtype of
    ``like``), as one loop on the log density alone: a chain's start costs no trace of the model.
    """

    def invalid(x):
        value, grad = jax.value_and_grad(logdensity_fn)(x)
        return ~(jnp.isfinite(value) & jnp.all(jnp.isfinite(grad)))

    def draw(key):
        radius = UNIFORM_START_RADIUS
        return jax.random.uniform(key, like.shape, like.dtype, minval=-radius, maxval=radius)

    def again(state):
        tries, _, x = state
        return (tries < UNIFORM_START_MAX_TRIES) & invalid(x)

    def retry(state):
        tries, key, _ = state
        key, sub = jax.random.split(key)
        return tries + 1, key, draw(sub)

    key, sub = jax.random.split(key)
    return jax.lax.while_loop(again, retry, (1, key, draw(sub)))[2]


def _potential(model: Callable, args: tuple, kwargs: dict):
    """NumPyro's potential energy of ``model``, its ``postprocess_fn`` and the unconstrained
    values of one prior draw (the sites' shapes): ``initialize_model``'s preparation of the
    model, without its search for a start, which :func:`_uniform_start` does per chain.
    """
    from numpyro.infer.util import (
        _get_model_transforms,
        _prepare_model_for_potential,
        get_potential_fn,
        transform_fn,
    )

    inv_transforms, replay_model, enumerated, model_trace = _get_model_transforms(_seeded(model, 0), args, kwargs)
    prepared = _prepare_model_for_potential(model, model_trace, enum=enumerated)
    potential_fn, postprocess_fn = get_potential_fn(
        prepared, inv_transforms, replay_model=replay_model, enum=enumerated, model_args=args, model_kwargs=kwargs
    )
    constrained = {
        name: site["value"]
        for name, site in model_trace.items()
        if site["type"] == "sample" and not site["is_observed"] and not site["fn"].support.is_discrete
    }
    return potential_fn, postprocess_fn, transform_fn(inv_transforms, constrained, invert=True)


def _unconstrained_prototype(sites: dict) -> dict:
    """Zeros in the shapes of the continuous latent sites' unconstrained values (each through
    the inverse of ``biject_to`` of its support, as NumPyro's samplers move it), by name.
    """
    from numpyro.distributions.transforms import biject_to

    def unconstrained(site):
        shape = jax.eval_shape(biject_to(site["fn"].support).inv, site["value"])
        return jnp.zeros(shape.shape, shape.dtype)

    return {
        name: unconstrained(site)
        for name, site in sites.items()
        if site["type"] == "sample" and not site["is_observed"] and not site["fn"].support.is_discrete
    }


def _largest(site: dict, space: Space) -> np.ndarray:
    """Each entry of a discrete site at the largest value its own support allows (a Binomial's
    total count where each entry has its own), else the largest value of its space.
    """
    value = np.asarray(site["value"])
    upper = getattr(site["fn"].support, "upper_bound", None)
    if upper is None or not np.all(np.isfinite(np.asarray(upper))):
        upper = np.asarray(space.values)[-1]
    return np.broadcast_to(np.minimum(upper, np.asarray(space.values)[-1]), value.shape).astype(value.dtype)


def _sampled_discrete_sites(sites: dict, others: list[dict]) -> dict[str, Space]:
    """The discrete latent sites gradmc samples, each with its space (0/1 sites ``Binary``, any
    other finite support ``Ordinal`` over its values, unbounded supports ``Count``), after
    checking every discrete latent site: sites marked ``infer={"enumerate": "parallel"}`` are
    left to NumPyro to sum out (which needs funsor); other enumeration marks and supports that
    depend on other unknowns (that differ in ``others``, more runs of the model from its prior)
    are refused.
    """
    parts = {}
    for name, site in sites.items():
        if not _is_discrete_latent(site):
            continue
        kind = type(site["fn"]).__name__
        marked = _marked(site)
        if marked == "parallel":
            if importlib.util.find_spec("funsor") is None:
                raise ValueError(
                    f"latent site {name!r} ({kind}) is marked to be summed out (enumerate='parallel'), which "
                    'needs the funsor package (pip install -e ".[numpyro]" in the gradmc repository); without the '
                    "mark gradmc samples it"
                )
            continue
        if marked is not None:
            raise ValueError(
                f"latent site {name!r} ({kind}) is marked enumerate={marked!r}; sum it out with "
                'infer={"enumerate": "parallel"}, or drop the mark and gradmc samples it'
            )
        if not site["fn"].has_enumerate_support:
            parts[name] = _count_space(name, kind, site, [other[name] for other in others if name in other])
            continue
        values = _support(site)
        for other in others:
            if name in other and not np.array_equal(_support(other[name]), values):
                raise ValueError(
                    f"latent site {name!r} ({kind}) has a support that depends on other unknowns of the model "
                    f"({values.size} values in one run of the model from its prior, {_support(other[name]).size} "
                    "in another): gradmc needs each discrete site's values fixed; draw it over its widest range "
                    "and write the constraint as a factor, e.g. numpyro.factor('order', jnp.where(s1 < s2, 0.0, "
                    "-jnp.inf))"
                )
        size = int(np.size(site["value"]))
        parts[name] = Binary(size) if np.array_equal(values, [0, 1]) else Ordinal(values, size)
    return parts


#: What JAX raises where a model turns a traced value into a NumPy array or a Python value.
_CONCRETE_VALUE_ERRORS = (
    jax.errors.TracerArrayConversionError,
    jax.errors.ConcretizationTypeError,
    jax.errors.TracerIntegerConversionError,
)


@contextlib.contextmanager
def _traceable(model: Callable):
    """Re-raise JAX's errors for a model that needs concrete values of its latent sites as a
    ValueError that says what to change.
    """
    try:
        yield
    except _CONCRETE_VALUE_ERRORS as error:
        title = getattr(model, "__name__", "numpyro-model")
        raise ValueError(
            f"the NumPyro model {title!r} cannot run with its latent sites as traced JAX values "
            f"({type(error).__name__}): it turns a sampled value into a NumPy array or a Python value, "
            "as NumPy indexing does (X[:, k] with X a NumPy array), or np.* functions, if, int() or range() "
            "on a sampled value. Write those steps with jax.numpy (jnp.asarray(X)[:, k], jnp.where), as "
            "NumPyro's own samplers also need"
        ) from error


def from_numpyro(model: Callable, *args, **kwargs) -> Target:
    """A :class:`~gradmc.base.Target` for the NumPyro model ``model(*args, **kwargs)``.

    Positions are NumPyro's unconstrained values of the continuous latent sites, flattened
    (``ravel_pytree``); the log density is minus NumPyro's potential energy, so it includes
    the log-Jacobian of each site's transform to the real line. Discrete latent sites are
    sampled: the target lives on a :class:`~gradmc.spaces.Product` of the continuous sites
    and the discrete ones (0/1 sites ``Binary``, other finite supports ``Ordinal`` over their
    values, unbounded ones such as Poisson a ``Count`` up to a bound set from the prior,
    :data:`COUNT_REACH`, or by ``infer={"max_value": N}``), and ``gradmc.sample(target,
    "auto")`` moves each block with its own sampler (:mod:`gradmc.composed`). Sites marked
    ``infer={"enumerate": "parallel"}`` are summed out by NumPyro instead (this needs
    ``funsor``), given the sampled ones where a model has both, and ``trace.posterior()`` draws
    them back from their conditionals given each draw (as NumPyro's ``infer_discrete`` does).
    ``initial_position`` is NumPyro's default initialisation (uniform in (-2, 2) on the
    unconstrained scale, retried until the log density and its gradient are finite; counts and
    other ordered sites raised towards their largest value until the log density is finite),
    so ``gradmc.sample`` needs no ``init``. The target's :class:`~gradmc.variables.Variables`
    give the constrained value of every latent site and the value of every
    ``numpyro.deterministic`` site, under their names.

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
        For a discrete latent site whose support depends on other unknowns, a count whose
        bound is not between its lower bound and 65,535 above it, a site marked for another
        kind of enumeration, a model without latent sites, or one that needs concrete values of
        its latent sites (NumPy indexing or Python control flow on them).
    """
    _numpyro()
    if not callable(model):
        raise TypeError(f"model must be a NumPyro model function, got {type(model).__name__}")
    sites, *others = _prior_runs(model, args, kwargs, (0, 1, 2))
    discrete = _sampled_discrete_sites(sites, others)
    if discrete:
        with _traceable(model):
            return _mixed_target(model, args, kwargs, sites, discrete)
    names = [
        name
        for name, site in sites.items()
        if (site["type"] == "sample" and not site["is_observed"] and not site["fn"].support.is_discrete)
        or site["type"] == "deterministic"
    ]
    potential_fn, postprocess_fn, prototype = _potential(model, args, kwargs)
    flat, unravel = ravel_pytree(prototype)
    if flat.size == 0:
        raise ValueError("the NumPyro model has no continuous latent sites to sample")

    @_without_validation  # an enumerated count as a Binomial's total would fail NumPyro's check under tracing
    def logdensity_fn(x):
        return -potential_fn(unravel(x))

    with _traceable(model):
        jax.eval_shape(logdensity_fn, flat)

    def initial_position(key):
        return _uniform_start(key, logdensity_fn, flat)

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
        variables=Variables(
            named, flat.shape, recover=_recover_enumerated(model, args, kwargs, sites), derived=_deterministic(sites)
        ),
    )
