"""The architecture's rules as plain functions: each takes a tree or its edges and returns the violations.

A rule returns every violation it finds (an empty list when the code keeps it), each naming the
file and line, what depends on what, and the rule, so a failure says what to change.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence, Set
from dataclasses import dataclass
from itertools import pairwise

from tests.architecture.graph import Edge, EdgeKind, Tree, unresolved_names

Dependency = tuple[str, EdgeKind, str]
"""An allowlisted dependency: (source module, kind of edge, target module)."""

Allowlist = Mapping[Dependency, str]
"""Dependencies that break the map on purpose, each with why."""


@dataclass(frozen=True)
class Violation:
    """One place where the code breaks one rule."""

    rule: str
    where: str
    """File (and line) relative to the tree's root, e.g. ``contract/documents.py:33``."""
    message: str

    def __str__(self) -> str:
        return f"{self.where}: {self.message} [{self.rule}]"


def package_of(module: str) -> str:
    """The top-level package a dotted module name belongs to."""
    return module.split(".")[0]


def describe(edge: Edge) -> str:
    """``edge`` in words: who depends on whom, how, and the source text that does it."""
    if edge.kind == "string":
        return f"{edge.source} names {edge.target} in a string ({edge.text})"
    if edge.kind == "resource":
        return f"{edge.source} loads {edge.target} by name ({edge.text})"
    if edge.implied:
        return f"{edge.source} imports {edge.target} (its __init__ runs first for `{edge.text}`)"
    return f"{edge.source} imports {edge.target} (`{edge.text}`)"


def unknown_packages(tree: Tree, allowed: Mapping[str, Set[str]]) -> list[Violation]:
    """Packages in the tree that the map does not place, and map entries with no package in the tree."""
    rule = "every package is in the map"
    found = [
        Violation(rule, f"{package}/", f"package {package!r} is not in the map: give it an entry in ALLOWED")
        for package in sorted(tree.packages - set(allowed))
    ]
    found += [
        Violation(rule, f"{package}/", f"the map names package {package!r}, which the tree does not have")
        for package in sorted(set(allowed) - tree.packages)
    ]
    found += [
        Violation(rule, f"{package}/", f"the map lets {package!r} import {target!r}, which is not in the map")
        for package, targets in sorted(allowed.items())
        for target in sorted(set(targets) - set(allowed))
    ]
    return found


def wrong_way(
    tree: Tree, edges: Iterable[Edge], allowed: Mapping[str, Set[str]], allowlist: Allowlist
) -> list[Violation]:
    """Dependencies (imports, strings, resource loads) from a package to one the map does not let it import.

    Implied edges are left out: each comes with the explicit import that implies it, which says the same.
    A package the map does not hold is :func:`unknown_packages`'s to report.
    """
    found = []
    for edge in edges:
        source, target = package_of(edge.source), package_of(edge.target)
        if edge.implied or source == target or source not in allowed or target in allowed[source]:
            continue
        if (edge.source, edge.kind, edge.target) in allowlist:
            continue
        may = f"only {', '.join(sorted(allowed[source]))}" if allowed[source] else "nothing of ours"
        found.append(
            Violation(
                "dependencies run downwards",
                tree.where(edge.source, edge.line),
                f"{describe(edge)}, but {source} may import {may}",
            )
        )
    return found


def importers_of(
    tree: Tree, edges: Iterable[Edge], package: str, exempt: Set[str], allowlist: Allowlist
) -> list[Violation]:
    """Dependencies of any kind on ``package`` from outside it (bar ``exempt`` packages and the allowlist)."""
    return [
        Violation(f"nothing imports {package}", tree.where(edge.source, edge.line), describe(edge))
        for edge in edges
        if package_of(edge.target) == package
        and package_of(edge.source) not in {package, *exempt}
        and not edge.implied
        and (edge.source, edge.kind, edge.target) not in allowlist
    ]


def stale_allowlist(edges: Iterable[Edge], allowlist: Allowlist) -> list[Violation]:
    """Allowlist entries that no dependency in the tree uses any more: each exception must still be needed."""
    used = {(edge.source, edge.kind, edge.target) for edge in edges}
    return [
        Violation(
            "every allowlist entry is needed",
            "ALLOWLIST",
            f"{source} no longer {kind}-depends on {target}: remove the entry (or fix the name it was for)",
        )
        for source, kind, target in sorted(set(allowlist) - used)
    ]


def dangling_names(tree: Tree) -> list[Violation]:
    """Strings naming an attribute that the module of ours they name does not define (a renamed RQ task, say)."""
    return [
        Violation(
            "names resolve",
            tree.where(name.source, name.line),
            f"{name.source} names {name.text!r}, but {name.module} defines no {name.attribute!r} (renamed or moved?)",
        )
        for name in unresolved_names(tree)
    ]


def import_cycles(tree: Tree, edges: Iterable[Edge]) -> list[Violation]:
    """Cycles of imports (explicit and implied, so also through a package ``__init__``), one violation each.

    Strings and resource loads are left out: nothing is loaded by name while a module is being
    imported, so they cannot close an import cycle (the floors still hold them).
    """
    graph: dict[str, dict[str, Edge]] = {module: {} for module in tree.modules}
    for edge in edges:
        if edge.kind == "import":
            graph[edge.source].setdefault(edge.target, edge)
    found = []
    for component in _strongly_connected(graph):
        if len(component) < 2:
            continue
        loop = _shortest_loop(graph, min(component), component)
        steps = [f"{tree.where(a, graph[a][b].line)} {describe(graph[a][b])}" for a, b in pairwise(loop)]
        found.append(
            Violation(
                "no import cycles",
                tree.where(loop[0], graph[loop[0]][loop[1]].line),
                f"import cycle {' -> '.join(loop)}:\n    " + "\n    ".join(steps),
            )
        )
    return found


def _strongly_connected(graph: Mapping[str, Mapping[str, Edge]]) -> list[list[str]]:
    """Tarjan's strongly connected components, iteratively (no recursion limit on deep graphs)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, targets = work[-1]
            target = next(targets, None)
            if target is not None:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(graph[target]))))
                elif target in on_stack:
                    low[node] = min(low[node], index[target])
                continue
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
                components.append(sorted(component))
    return components


def _shortest_loop(graph: Mapping[str, Mapping[str, Edge]], start: str, within: Sequence[str]) -> list[str]:
    """The shortest path from ``start`` back to itself inside one strongly connected component."""
    members = set(within)
    previous: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for target in sorted(graph[node]):
                if target not in members or target in previous:
                    continue
                previous[target] = node
                if target == start:
                    loop = [start]
                    while loop[-1] != start or len(loop) == 1:
                        loop.append(previous[loop[-1]])
                    return list(reversed(loop))
                following.append(target)
        frontier = following
    raise AssertionError(f"{start} is in a strongly connected component but on no loop")


def floors(allowed: Mapping[str, Set[str]], apart: Set[str]) -> dict[str, int]:
    """Each package's floor: 1 above the highest floor it may import (1 if none); ``apart`` packages have none.

    The floors summarise the map; the rule is each package's own set in ``allowed`` (two packages on
    one floor may still not import each other). A map whose sets go round in a circle has no floors.
    """
    found: dict[str, int] = {}

    def floor(package: str, path: tuple[str, ...]) -> int:
        if package in path:
            raise ValueError(f"the map goes round in a circle: {' -> '.join([*path, package])}")
        if package not in found:
            below = [floor(p, (*path, package)) for p in allowed[package] if p not in apart]
            found[package] = 1 + max(below, default=0)
        return found[package]

    for package in allowed:
        if package not in apart:
            floor(package, ())
    return found
