"""The package map in ARCHITECTURE.md, held against the code: imports only run downwards, no cycles.

Every import counts, including ones inside functions and under ``TYPE_CHECKING``: a lazy import
that runs back up is still an arrow the wrong way.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# Which of our packages each package may import (besides itself). The CLI is imported by nothing.
ALLOWED: dict[str, set[str]] = {
    "contract": set(),
    "broker": {"contract"},
    "storage": {"contract"},
    "producer": {"contract", "broker", "storage"},
    "worker": {"contract", "broker", "storage"},
    "tenancy": {"contract", "broker", "storage", "producer"},
    "orchestrator": {"contract", "broker", "storage", "producer"},
    "api": {"contract", "broker", "storage", "producer", "tenancy"},
    "cli": {"contract", "broker", "storage", "producer", "tenancy", "worker", "orchestrator", "api"},
    "migrations": set(),
    "bench": {"contract", "broker", "storage", "producer", "tenancy", "worker", "orchestrator", "api"},
}
PACKAGES = set(ALLOWED)


def _modules() -> Iterator[tuple[str, Path]]:
    for package in sorted(PACKAGES):
        folder = ROOT / package
        for path in sorted(folder.rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            yield ".".join(parts), path


def _imports(name: str, path: Path) -> set[str]:
    """Our modules that ``name`` imports (``from a.b import c`` counts as ``a.b.c`` if that is a module)."""
    found: set[str] = set()
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base]) if base else ".".join(anchor)
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return {module for module in found if module.split(".")[0] in PACKAGES}


MODULES = dict(_modules())
GRAPH = {name: {m for m in _imports(name, path) if m in MODULES and m != name} for name, path in MODULES.items()}


def test_the_packages_exist() -> None:
    for package in (
        "contract",
        "broker",
        "storage",
        "producer",
        "tenancy",
        "worker",
        "orchestrator",
        "cli",
        "migrations",
    ):
        assert package in MODULES, f"{package}/ is missing"


@pytest.mark.parametrize("package", sorted(PACKAGES))
def test_imports_only_run_downwards(package: str) -> None:
    wrong = sorted(
        f"{module} imports {target}"
        for module, targets in GRAPH.items()
        if module.split(".")[0] == package
        for target in targets
        if target.split(".")[0] not in ALLOWED[package] | {package}
    )
    assert not wrong, "imports that run the wrong way:\n" + "\n".join(wrong)


def test_nothing_imports_the_cli() -> None:
    importers = sorted(
        m for m, targets in GRAPH.items() if not m.startswith("cli") and any(t.startswith("cli") for t in targets)
    )
    assert not importers


def test_no_import_cycles() -> None:
    """Tarjan's strongly connected components over the module graph: every component is one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in GRAPH[node]:
            # A package's __init__ re-exporting its own modules is not a cycle of behaviour.
            if target.startswith(node + "."):
                continue
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for module in sorted(GRAPH):
        if module not in index:
            visit(module)
    assert not cycles, f"import cycles: {cycles}"


def test_the_rules_can_fail() -> None:
    """The checker itself sees a wrong-way import and a cycle when there is one."""
    graph = {"worker.a": {"producer.b"}, "producer.b": {"worker.a"}}
    assert "producer" not in ALLOWED["worker"]
    assert any(t.split(".")[0] not in ALLOWED["worker"] for t in graph["worker.a"])
    assert _imports("worker.x", ROOT / "cli" / "main.py") >= {"cli.bulk", "contract.settings"}


SQL_START = re.compile(r"^\s*(SELECT|INSERT|UPDATE|DELETE|CREATE|ALTER|DROP|WITH|TRUNCATE|LOCK)\s")


def test_every_sql_statement_lives_in_storage() -> None:
    """A string that starts like an SQL statement appears only in storage/ (and migrations/)."""
    found = sorted(
        f"{name}:{node.lineno}: {node.value.strip()[:40]!r}"
        for name, path in MODULES.items()
        if name.split(".")[0] not in ("storage", "migrations", "bench")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and SQL_START.match(node.value)
    )
    assert not found, "SQL outside storage/:\n" + "\n".join(found)


def test_every_lua_script_has_one_wrapper_and_a_direct_test() -> None:
    """Each ``broker/scripts/X.lua`` is loaded by ``broker/scripts/X.py`` and exercised in test_scripts.py."""
    scripts = ROOT / "broker" / "scripts"
    direct_tests = (ROOT / "tests" / "broker" / "test_scripts.py").read_text(encoding="utf-8")
    for lua in sorted(scripts.glob("*.lua")):
        wrapper = scripts / f"{lua.stem}.py"
        assert wrapper.exists(), f"{lua.name} has no typed wrapper {wrapper.name}"
        assert f'"{lua.name}"' in wrapper.read_text(encoding="utf-8"), f"{wrapper.name} does not load {lua.name}"
        assert f"def test_{lua.stem}_" in direct_tests, f"no direct test of {lua.name} in test_scripts.py"
