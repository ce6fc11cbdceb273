"""The package's import structure: no import cycles, kernel modules below the runner, and
what ``import gradmc`` loads.

The graph is read from the source (``ast``), so imports inside functions count as much as
those at the top of a module. Nodes are modules (``gradmc.run.sampling``); a package's
``__init__.py`` is a node of its own (``gradmc.run``). ``import gradmc.a.b`` and
``from gradmc.a.b import f`` give an edge to ``gradmc.a.b`` only (not to the packages above
it, whose ``__init__`` Python also runs); ``from gradmc.a import x`` gives an edge to
``gradmc.a.x`` when that is a module, else to ``gradmc.a``.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import gradmc

SRC = Path(gradmc.__file__).resolve().parent
PACKAGE = "gradmc"
ARCHITECTURE = Path(__file__).resolve().parents[1] / "docs" / "architecture.md"

#: Modules that kernel modules may not import (the registry and everything that drives runs).
ABOVE_KERNELS = ("gradmc.registry", "gradmc.run", "gradmc.tuning", "gradmc.experiments", "gradmc.cli", "gradmc.compare")

#: Experiment-only dependencies that ``import gradmc`` must not load.
EXPERIMENT_ONLY = ("cvxpy", "equinox", "markdown")


def _module_name(path: Path) -> str:
    parts = path.relative_to(SRC.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    """Every module of the package, by dotted name."""
    return {_module_name(p): p for p in sorted(SRC.rglob("*.py"))}


def _resolve_relative(module: str, is_package: bool, level: int, name: str | None) -> str:
    """The absolute name of ``from <level dots><name> import ...`` written in ``module``."""
    package = module if is_package else module.rpartition(".")[0]
    for _ in range(level - 1):
        package = package.rpartition(".")[0]
    return f"{package}.{name}" if name else package


def _imports(module: str, is_package: bool, source: str, modules) -> set[str]:
    """The package's modules that ``module`` imports anywhere in its ``source``."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = _resolve_relative(module, is_package, node.level, node.module) if node.level else node.module
            for alias in node.names:
                found.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base)
    return {name for name in found if name == PACKAGE or name.startswith(PACKAGE + ".")}


def import_graph() -> dict[str, set[str]]:
    """``module -> modules of the package it imports`` (names that are no module are kept,
    for :func:`test_every_imported_module_exists`)."""
    modules = _modules()
    return {
        module: _imports(module, path.name == "__init__.py", path.read_text(), modules)
        for module, path in modules.items()
    }


def _strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components (iterative), each sorted."""
    index, low, stack, on_stack, out = {}, {}, [], set(), []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    out.append(sorted(component))
            elif child not in index:
                index[child] = low[child] = counter
                counter += 1
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(graph[child]))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return out


def _a_cycle(graph: dict[str, set[str]], component: list[str]) -> list[str]:
    """One cycle through the component's first module (breadth-first, shortest)."""
    start, members = component[0], set(component)
    parents, frontier = {start: None}, [start]
    while frontier:
        following = []
        for node in frontier:
            for child in sorted(graph[node] & members):
                if child == start:
                    path = [node]
                    while parents[path[-1]] is not None:
                        path.append(parents[path[-1]])
                    return [*reversed(path), start]
                if child not in parents:
                    parents[child] = node
                    following.append(child)
        frontier = following
    return component


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle (``a -> b -> ... -> a``) per strongly connected component that has one."""
    cycles = []
    for component in _strongly_connected(graph):
        if len(component) > 1 or component[0] in graph[component[0]]:
            cycles.append(_a_cycle(graph, component))
    return sorted(cycles)


def _is_kernel_module(module: str) -> bool:
    parts = module.split(".")
    return len(parts) >= 2 and parts[1] in ("continuous", "discrete") and not parts[-1].endswith("samplers")


def _is_within(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def test_the_graph_reader_resolves_names():
    """The reader on a made-up module ``gradmc.a.b`` of a made-up package."""
    modules = {"gradmc", "gradmc.a", "gradmc.a.b", "gradmc.a.c", "gradmc.d"}
    source = """
import numpy
import gradmc.d
from gradmc import a, version
from . import c
from .. import d


def lazy():
    from gradmc.a.c import f
"""
    assert _imports("gradmc.a.b", False, source, modules) == {"gradmc", "gradmc.a", "gradmc.a.c", "gradmc.d"}
    assert _imports("gradmc.a", True, "from .c import f\nfrom . import b", modules) == {"gradmc.a.b", "gradmc.a.c"}
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": {"d"}, "e": {"a"}}
    assert import_cycles(graph) == [["a", "b", "c", "a"], ["d", "d"]]


def test_every_imported_module_exists():
    graph = import_graph()
    missing = sorted(
        f"{module} -> {target}" for module, targets in graph.items() for target in targets if target not in graph
    )
    assert not missing, "imports of modules that do not exist:\n" + "\n".join(missing)


def test_no_import_cycles():
    graph = import_graph()
    cycles = import_cycles({module: targets & graph.keys() for module, targets in graph.items()})
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(cycle) for cycle in cycles)


def package_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """The graph of the package's sub-packages and top-level modules (``gradmc.adapt``,
    ``gradmc.registry``): an edge where any module of one imports any module of the other.
    The package's own ``__init__`` (the public surface, which imports everything) is left out.
    """

    def unit(module: str) -> str:
        return ".".join(module.split(".")[:2])

    units: dict[str, set[str]] = {unit(m): set() for m in graph if m != PACKAGE}
    for module, targets in graph.items():
        if module == PACKAGE:
            continue
        units[unit(module)] |= {unit(t) for t in targets if t in graph and t != PACKAGE} - {unit(module)}
    return units


def test_no_import_cycles_between_packages():
    """No two packages import each other, even through different modules (``adapt`` and
    ``discrete`` once did: the learned W models imported the HAMS module, whose samplers
    imported them back)."""
    cycles = import_cycles(package_graph(import_graph()))
    assert not cycles, "import cycles between packages:\n" + "\n".join(" -> ".join(cycle) for cycle in cycles)


def documented_levels() -> list[tuple[str, int]]:
    """``(entry, level)`` of the levels table of docs/architecture.md: an entry is a top-level
    module (``registry``), a package (``adapt/``), a module of a package (``discrete/proposals``)
    or every other module of one (``discrete/<kernel>``); ``__init__`` is the package's own."""
    rows = re.findall(r"^\| (\d+) \| (.*?) \|", ARCHITECTURE.read_text(), re.M)
    return [(entry, int(level)) for level, entries in rows for entry in re.findall(r"`([^`]+)`", entries)]


def level_of(module: str, levels: list[tuple[str, int]]) -> int | None:
    """The documented level of ``module``: the most specific entry that covers it (a named
    module before ``<kernel>``, before its package, before a top-level module of that name);
    a sub-package's ``__init__`` takes the lowest level of its package's entries."""
    parts = module.split(".")[1:] or ["__init__"]
    path = "/".join(parts)
    ranked = []
    for entry, level in levels:
        if entry == path:
            ranked.append((0, level))
        elif entry.endswith("/<kernel>") and len(parts) == 2 and entry.split("/")[0] == parts[0]:
            ranked.append((1, level))
        elif entry == parts[0] + "/" and len(parts) >= 2:
            ranked.append((2, level))
        elif len(parts) == 1 and entry.startswith(parts[0] + "/"):
            ranked.append((3, level))
    return min(ranked)[1] if ranked else None


def test_every_module_has_a_documented_level():
    levels = documented_levels()
    assert len(levels) > 20, "the levels table of docs/architecture.md was not found"
    unplaced = sorted(m for m in import_graph() if level_of(m, levels) is None)
    assert not unplaced, "modules without a level in docs/architecture.md:\n" + "\n".join(unplaced)


def test_no_module_imports_a_higher_level():
    """The levels of docs/architecture.md are what this enforces: a module imports only from
    its own level or below."""
    levels = documented_levels()
    graph = import_graph()
    uphill = sorted(
        f"{module} (level {level_of(module, levels)}) -> {target} (level {level_of(target, levels)})"
        for module, targets in graph.items()
        for target in targets
        if target in graph and (level_of(target, levels) or 0) > (level_of(module, levels) or 0)
    )
    assert not uphill, "imports of a higher level:\n" + "\n".join(uphill)


def test_the_level_reader_places_modules():
    levels = [("registry", 3), ("adapt/", 3), ("discrete/<kernel>", 4), ("discrete/samplers", 5), ("__init__", 9)]
    assert level_of("gradmc.discrete.ncg", levels) == 4
    assert level_of("gradmc.discrete.samplers", levels) == 5
    assert level_of("gradmc.discrete", levels) == 4
    assert level_of("gradmc.adapt.step_size", levels) == 3
    assert level_of("gradmc.registry", levels) == 3
    assert level_of("gradmc", levels) == 9
    assert level_of("gradmc.nowhere", levels) is None


def test_kernel_modules_import_nothing_that_drives_runs():
    """Kernel modules (continuous/*, discrete/* except the *samplers.py builders) stay below the registry,
    the runner, the tuning tools, the experiments, the CLI and compare."""
    graph = import_graph()
    uphill = sorted(
        f"{module} -> {target}"
        for module, targets in graph.items()
        if _is_kernel_module(module)
        for target in targets
        if any(_is_within(target, above) for above in ABOVE_KERNELS)
    )
    assert not uphill, "kernel modules import modules above them:\n" + "\n".join(uphill)


def test_import_gradmc_loads_no_experiment_only_dependency():
    code = f"import sys, gradmc; print(sorted(m for m in {EXPERIMENT_ONLY!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


def test_recipe_is_a_deprecated_name_of_sampler():
    with pytest.warns(DeprecationWarning, match="gradmc.Sampler"):
        assert gradmc.Recipe is gradmc.Sampler
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(AttributeError):
            gradmc.no_such_name  # noqa: B018
