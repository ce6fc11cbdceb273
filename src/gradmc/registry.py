"""Name -> constructor registries for samplers and targets.

BoundSampler modules register a builder ``build(target, num_warmup, **options) -> BoundSampler``
with :func:`register_sampler`; target modules register a factory
``factory(**options) -> Target`` with :func:`register_target`. Unknown names raise
:class:`UnknownNameError`, which lists the valid ones.

A sampler's options are its builder's keyword arguments: their defaults come from the
signature (:func:`defaults`) and their meanings from the registration's ``options``, which
must name every keyword (:func:`sampler_options`, what ``gradmc describe`` prints; the
builder's docstring gets them as its "Parameters" section). A sampler's entry also says what
its warm-up tunes and how a run's health check judges it (:class:`Tuned`), which other
option cures divergences (:class:`Fix`), and, for a sampler whose kernel also runs outside
the runner (PCD's chains, plain loops), its kernel module and the options that set it
(:func:`kernel_options`, :func:`algorithm`). One concept has one name in every sampler; an
option's former name still works, with a ``DeprecationWarning`` that gives the new one
(:data:`FORMER_OPTION_NAMES`).
"""

from __future__ import annotations

import difflib
import inspect
import textwrap
import warnings
from collections.abc import Callable, Mapping
from types import MappingProxyType, ModuleType
from typing import Any, NamedTuple

from gradmc.base import Sampler, SamplingAlgorithm, Target

__all__ = [
    "UnknownNameError",
    "Entry",
    "Tuned",
    "Fix",
    "Option",
    "WARMUP_RULE_OPTION",
    "TARGET_ACCEPT_OPTION",
    "FORMER_OPTION_NAMES",
    "register_sampler",
    "register_target",
    "register_experiment",
    "experiment",
    "experiments",
    "sampler",
    "target",
    "samplers",
    "sampler_entry",
    "sampler_options",
    "defaults",
    "kernel_options",
    "algorithm",
    "targets",
    "without_adaptation",
]


class UnknownNameError(ValueError):
    """A sampler or target name that is not registered (the message lists valid ones).

    Parameters
    ----------
    message : str
        Names the unknown name and lists the valid ones.
    """


class Tuned(NamedTuple):
    """A setting a sampler learns in warm-up, and how a run's health check judges it.

    After a run, :mod:`gradmc.diagnostics.health` reads the learned value from
    ``trace.params[param]`` and its path from ``trace.warmup_stats["step_size"]``, and
    reports an adaptation that did not converge (accepting nearly everything or nothing in
    the second half of warm-up, a value that is not finite and positive) or a kept
    acceptance rate far from the one aimed at.

    Parameters
    ----------
    param : str
        Its key in ``trace.params`` (e.g. ``"step_size"``, ``"num_flips"``, ``"delta"``).
    aims_at : str or None
        The option that holds the acceptance rate the warm-up aims at (``"target_accept"``);
        None when the rule aims at none.
    switch : str or None
        The option that turns the adaptation off when it is None or False (``"adapt"``);
        None when the warm-up always adapts.
    """

    param: str
    aims_at: str | None = "target_accept"
    switch: str | None = "adapt"

    def active(self, options: dict) -> bool:
        """Whether the warm-up adapts with these options in force.

        Parameters
        ----------
        options : dict
            The sampler's options, defaults included.
        """
        return self.switch is None or options.get(self.switch) not in (None, False)


class Fix(NamedTuple):
    """Another value of an option that may cure divergent transitions, suggested when the
    option does not already have it (NUTS's ``dense_mass=True`` for correlated coordinates).

    Parameters
    ----------
    option : str
        The option.
    value : object
        The value to suggest.
    why : str
        When it helps.
    """

    option: str
    value: Any
    why: str


class Entry(NamedTuple):
    """A registered constructor.

    Parameters
    ----------
    name : str
        The registered name.
    constructor : callable
        The builder (samplers), factory (targets) or run function (experiments).
    description : str
        One line for ``gradmc list``.
    kind : str
        ``"continuous"``, ``"discrete"`` or ``"any"``.
    tuned : tuple of Tuned
        Samplers: what the warm-up tunes.
    fixes : tuple of Fix
        Samplers: options that may cure divergences.
    kernel : module, optional
        Samplers whose kernel also runs outside the runner: the pure kernel module.
    kernel_options : tuple of str
        The options that set that kernel (``kernel.as_top_level_api`` takes them by name).
    options : dict of str to str
        Samplers: what each option means.
    exact_conditionals : bool
        Samplers: every step draws its sites from their exact conditionals, so a step that
        keeps the current state is a draw like any other, not a proposal that failed.
    """

    name: str
    constructor: Callable
    description: str
    kind: str  # "continuous", "discrete" or "any"
    tuned: tuple[Tuned, ...] = ()
    fixes: tuple[Fix, ...] = ()
    kernel: ModuleType | None = None
    kernel_options: tuple[str, ...] = ()
    options: Mapping[str, str] = MappingProxyType({})
    exact_conditionals: bool = False

    def defaults(self) -> dict:
        """A sampler's default options, read from its builder's signature (after ``target``
        and ``num_warmup``; an option without a default is left out).
        """
        return {p.name: p.default for p in _option_parameters(self.constructor) if p.default is not p.empty}


def _option_parameters(build: Callable) -> list[inspect.Parameter]:
    """A sampler builder's keywords after ``target`` and ``num_warmup``: its options."""
    params = list(inspect.signature(build).parameters.values())[2:]
    return [p for p in params if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]


def _type_text(default) -> str:
    """An option's type as its default shows it (``"float"``; ``"optional"`` for None)."""
    return "optional" if default is None else type(default).__name__


def _with_parameters(doc: str | None, options: Mapping[str, str], defaults: dict, kind: str) -> str:
    """``doc`` with a numpy-style "Parameters" section written from ``options``, indented as
    ``doc``'s own lines are.
    """
    doc = (doc or "").rstrip()
    body = [line for line in doc.splitlines()[1:] if line.strip()]
    indent = min((len(line) - len(line.lstrip()) for line in body), default=4) * " "
    space = "a discrete" if kind == "discrete" else "a continuous" if kind == "continuous" else "any"
    entries = [
        ("target : gradmc.base.Target", f"A target on {space} space."),
        ("num_warmup : int", "Warm-up steps: the sampler tunes itself during them and is frozen after."),
    ]
    for name, meaning in options.items():
        default = defaults.get(name)
        entries.append((f"{name} : {_type_text(default)}, default {default!r}", meaning))
    lines = ["", "", f"{indent}Parameters", f"{indent}----------"]
    for head, meaning in entries:
        lines.append(indent + head)
        lines += textwrap.wrap(meaning, 88, initial_indent=indent + "    ", subsequent_indent=indent + "    ")
    return doc + "\n".join(lines) + "\n" + indent


class _Registry:
    def __init__(self, what: str):
        self.what = what
        self.entries: dict[str, Entry] = {}

    def add(self, entry: Entry) -> None:
        if entry.name in self.entries:
            raise ValueError(f"{self.what} {entry.name!r} is registered twice")
        if entry.kind not in ("continuous", "discrete", "any"):
            raise ValueError(f"kind must be continuous, discrete or any, got {entry.kind!r}")
        self.entries[entry.name] = entry

    def get(self, name: str) -> Entry:
        try:
            return self.entries[name]
        except KeyError:
            valid = ", ".join(sorted(self.entries))
            close = difflib.get_close_matches(str(name), self.entries, n=1, cutoff=0.6)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise UnknownNameError(f"unknown {self.what} {name!r}{hint}; valid {self.what}s: {valid}") from None

    def check_options(self, entry: Entry, options: dict, skip: int) -> None:
        params = list(inspect.signature(entry.constructor).parameters.values())[skip:]
        if any(p.kind is p.VAR_KEYWORD for p in params):
            return
        allowed = {p.name for p in params}
        unknown = sorted(set(options) - allowed)
        if unknown:
            close = [m for u in unknown for m in difflib.get_close_matches(u, allowed, n=1, cutoff=0.6)]
            hint = f" (did you mean {', '.join(map(repr, close))}?)" if close else ""
            raise TypeError(
                f"{self.what} {entry.name!r} has no option(s) {unknown}{hint}; its options are: "
                f"{sorted(allowed) or 'none'}"
            )


_samplers = _Registry("sampler")
_targets = _Registry("target")
_experiments = _Registry("experiment")


def register_sampler(
    name: str,
    description: str,
    kind: str = "continuous",
    *,
    options: Mapping[str, str] | None = None,
    tuned: tuple[Tuned, ...] = (),
    fixes: tuple[Fix, ...] = (),
    kernel: ModuleType | None = None,
    kernel_options: tuple[str, ...] = (),
    exact_conditionals: bool = False,
):
    """Decorator: register ``build(target, num_warmup, **options) -> BoundSampler`` under ``name``.

    Parameters
    ----------
    name : str
        The name ``gradmc.sampler(name)`` looks up.
    description : str
        One line for ``gradmc list``.
    kind : str
        ``"continuous"``, ``"discrete"`` or ``"any"``: the spaces the sampler runs on.
    options : mapping of str to str
        What each of the builder's keywords after ``target`` and ``num_warmup`` means, one
        entry for each (``gradmc describe`` prints them; the builder's docstring gets them
        as its "Parameters" section).
    tuned : tuple of Tuned
        What the warm-up tunes, and how a run's health check judges it.
    fixes : tuple of Fix
        Options that may cure divergent transitions.
    kernel : module, optional
        The pure kernel module, for a sampler whose kernel also runs outside the runner.
    kernel_options : tuple of str
        The options that set that kernel.
    exact_conditionals : bool
        Every step draws from exact conditionals (Gibbs): the health check then reads a chain
        that kept its state as a concentrated conditional, not as a stuck proposal.
    """
    meanings = dict(options or {})

    def decorate(build):
        params = [p.name for p in _option_parameters(build)]
        missing = sorted(
            {*kernel_options, *(t.aims_at for t in tuned if t.aims_at), *(f.option for f in fixes), *meanings}
            - set(params)
        )
        if missing:
            raise ValueError(f"sampler {name!r} declares option(s) {missing} that its builder does not take")
        unexplained = [p for p in params if p not in meanings]
        if unexplained:
            raise ValueError(f"sampler {name!r}: say what option(s) {unexplained} mean in its registration's options")
        ordered = {p: meanings[p] for p in params}
        entry = Entry(
            name,
            build,
            description,
            kind,
            tuple(tuned),
            tuple(fixes),
            kernel,
            tuple(kernel_options),
            ordered,
            exact_conditionals,
        )
        _samplers.add(entry)
        for documented in {build, inspect.unwrap(build)}:
            documented.__doc__ = _with_parameters(documented.__doc__, ordered, entry.defaults(), kind)
        return build

    return decorate


def register_target(name: str, description: str, kind: str = "continuous"):
    """Decorator: register ``factory(**options) -> Target`` under ``name``.

    Parameters
    ----------
    name : str
        The name ``gradmc.target(name)`` looks up.
    description : str
        One line for ``gradmc list``.
    kind : str
        ``"continuous"`` or ``"discrete"``.
    """

    def decorate(factory):
        _targets.add(Entry(name, factory, description, kind))
        return factory

    return decorate


def register_experiment(name: str, description: str, kind: str = "any"):
    """Decorator: register ``run(*, out: Path, full: bool, seed: int, progress: bool) -> str``
    (the experiment writes its tables and figures into ``out`` and returns its report text).

    Parameters
    ----------
    name : str
        The name ``gradmc reproduce NAME`` looks up.
    description : str
        One line for ``gradmc list``.
    kind : str
        ``"continuous"``, ``"discrete"`` or ``"any"``.
    """

    def decorate(run):
        _experiments.add(Entry(name, run, description, kind))
        return run

    return decorate


#: Former option names that still work: sampler -> {former name: name}. A former name
#: gives a ``DeprecationWarning`` naming the new one. The names follow one rule: one concept,
#: one name in every sampler — ``num_integration_steps`` (leapfrog steps per trajectory, as
#: BlackJAX), ``preconditioner`` (the positive-definite matrix that shapes a continuous
#: proposal, MALA's M and RWM's proposal covariance), ``target_accept`` (the acceptance
#: probability warm-up aims at).
FORMER_OPTION_NAMES: dict[str, dict[str, str]] = {
    "rwm": {"cov": "preconditioner"},
    "parallel-tempering": {"num_leapfrog_steps": "num_integration_steps"},
    "simulated-tempering": {"num_leapfrog_steps": "num_integration_steps"},
}


def _current_names(name: str, options: dict, stacklevel: int) -> dict:
    """``options`` with former names (:data:`FORMER_OPTION_NAMES`) replaced, warning once each."""
    former = FORMER_OPTION_NAMES.get(name, {})
    renamed = {}
    for key, value in options.items():
        if key in former:
            new = former[key]
            if new in options:
                raise TypeError(f"sampler {name!r}: give {new} only ({key} is its former name)")
            warnings.warn(
                f"sampler {name!r}: option {key!r} is deprecated; use {new!r}",
                DeprecationWarning,
                stacklevel=stacklevel + 1,
            )
            key = new
        renamed[key] = value
    return renamed


def sampler(name: str, **options) -> Sampler:
    """The sampler ``name`` with ``options`` (e.g. ``sampler("mala", step_size=0.1)``).

    Parameters
    ----------
    name : str
        A registered sampler name.
    **options
        The sampler's options (checked against its builder's signature; former names of
        :data:`FORMER_OPTION_NAMES` are replaced, with a ``DeprecationWarning``).
    """
    entry = _samplers.get(name)
    options = _current_names(name, options, stacklevel=2)
    _samplers.check_options(entry, options, skip=2)
    return Sampler(name, dict(options), entry.constructor)


def sampler_entry(name: str) -> Entry:
    """The registry entry of the sampler ``name``.

    Parameters
    ----------
    name : str
        A registered sampler name.
    """
    return _samplers.get(name)


def defaults(name: str) -> dict:
    """The default options of the registered sampler ``name``, read from its builder's
    signature (an option without a default is left out).

    Parameters
    ----------
    name : str
        A registered sampler name.
    """
    return _samplers.get(name).defaults()


def kernel_options(name: str, **options) -> dict:
    """The options that set the kernel of the sampler ``name``: its builder's defaults,
    updated by ``options``.

    Raises ``ValueError`` for a sampler whose kernel does not run outside the runner, or an
    option that does not set the kernel.

    Parameters
    ----------
    name : str
        A registered sampler with a ``kernel``.
    **options
        Values for some of the kernel's options.
    """
    entry = _samplers.get(name)
    if entry.kernel is None:
        valid = ", ".join(e.name for e in samplers() if e.kernel is not None)
        raise ValueError(f"{name!r} has no kernel to run outside the runner; valid: {valid}")
    unknown = sorted(set(options) - set(entry.kernel_options))
    if unknown:
        raise ValueError(
            f"{name!r} has no option(s) {unknown} that set its kernel; its kernel options are "
            f"{sorted(entry.kernel_options)}"
        )
    return {**{key: value for key, value in defaults(name).items() if key in entry.kernel_options}, **options}


def algorithm(name: str, logdensity_fn: Callable, space, **options) -> SamplingAlgorithm:
    """The BlackJAX ``SamplingAlgorithm`` of the sampler ``name`` with its kernel options
    (defaults from :func:`defaults`), for a plain ``state, info = alg.step(key, state)`` loop.

    Parameters
    ----------
    name : str
        A registered sampler with a ``kernel``.
    logdensity_fn : callable
        The target's log density.
    space : gradmc.spaces.Space
        The target's space.
    **options
        Kernel options, as for :func:`kernel_options`.
    """
    options = kernel_options(name, **options)
    kernel: Any = _samplers.get(name).kernel
    return kernel.as_top_level_api(logdensity_fn, space, **options)


#: What ``adapt`` means for a sampler whose warm-up tunes one setting by a step-size rule.
WARMUP_RULE_OPTION = (
    'One of {"dual_averaging", "robbins_monro", None}: the rule that tunes the setting in warm-up (dual '
    "averaging of its log towards ``target_accept``), frozen after; None keeps the value given throughout."
)
#: What ``target_accept`` means for a sampler whose warm-up aims at an acceptance rate.
TARGET_ACCEPT_OPTION = "The mean acceptance probability the warm-up aims at."


class Option(NamedTuple):
    """One option of a registered sampler (:func:`sampler_options`).

    Parameters
    ----------
    name : str
        The keyword of ``gradmc.sampler(name, **options)`` and ``--option KEY=VALUE``.
    default : object
        Its default (from the builder's signature).
    type : str
        Its type as the default shows it (``"float"``; ``"optional"`` for a default of None).
    doc : str
        What it means (from the registration).
    """

    name: str
    default: Any
    type: str
    doc: str


def sampler_options(name: str) -> list[Option]:
    """The options of the registered sampler ``name``, in its builder's order, each with its
    default and meaning (what ``gradmc describe NAME`` prints).

    Parameters
    ----------
    name : str
        A registered sampler name.

    Returns
    -------
    list of Option
        One per keyword the builder takes after ``target`` and ``num_warmup``.
    """
    entry = _samplers.get(name)
    defaults = {p.name: None if p.default is p.empty else p.default for p in _option_parameters(entry.constructor)}
    return [
        Option(option, defaults[option], _type_text(defaults[option]), entry.options[option]) for option in defaults
    ]


def target(name: str, **options) -> Target:
    """Build the registered target ``name`` (e.g. ``target("gaussian-2d-corr")``).

    Parameters
    ----------
    name : str
        A registered target name.
    **options
        The target's options (checked against its factory's signature).
    """
    entry = _targets.get(name)
    _targets.check_options(entry, options, skip=0)
    return entry.constructor(**options)


def without_adaptation(name: str, options: dict) -> dict:
    """``options`` with ``adapt=None`` added when the sampler ``name`` adapts its settings in
    warm-up through an ``adapt`` option and ``options`` do not set it: the settings given
    are then used throughout (a paper's tuned values, or a search over one of them).

    Parameters
    ----------
    name : str
        A registered sampler.
    options : dict
        Its options.
    """
    entry = _samplers.get(name)
    if "adapt" in inspect.signature(entry.constructor).parameters:
        return {"adapt": None, **options}
    return dict(options)


def samplers(kind: str | None = None) -> list[Entry]:
    """Registered samplers, sorted by name, optionally only those of one kind.

    Parameters
    ----------
    kind : str, optional
        ``"continuous"`` or ``"discrete"`` (samplers of kind ``"any"`` are always listed).
    """
    return [e for _, e in sorted(_samplers.entries.items()) if kind is None or e.kind in (kind, "any")]


def targets(kind: str | None = None) -> list[Entry]:
    """Registered targets, sorted by name, optionally only those of one kind.

    Parameters
    ----------
    kind : str, optional
        ``"continuous"`` or ``"discrete"``.
    """
    return [e for _, e in sorted(_targets.entries.items()) if kind is None or e.kind == kind]


def experiment(name: str) -> Entry:
    """The registered experiment ``name`` (``entry.constructor`` runs it).

    Parameters
    ----------
    name : str
        A registered experiment name.
    """
    return _experiments.get(name)


def experiments() -> list[Entry]:
    """Registered experiments (``gradmc reproduce NAME``), sorted by name."""
    return [e for _, e in sorted(_experiments.entries.items())]
