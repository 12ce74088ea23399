"""A source tree's packages and the dependencies between its modules, read from the files (nothing is imported).

Three kinds of dependency count, because each makes one module load another:

- ``import``: every ``import`` and ``from ... import`` statement, wherever it is (inside a function
  and under ``TYPE_CHECKING`` too: a lazy import that runs back up is still an arrow the wrong way).
  Importing ``a.b.c`` also runs ``a/__init__.py`` and ``a/b/__init__.py`` first; those are *implied*
  edges, kept for every package ``__init__`` the importer is not already inside (its own ancestors
  are always initialised before it runs, so they cannot close a cycle). ``from pkg import name``
  with ``name`` not a submodule binds a name out of ``pkg/__init__.py``: an edge to ``pkg`` itself.
- ``string``: a string constant that names one of the tree's modules by its dotted name, such as
  ``"orchestrator.tasks.split_document"`` (RQ), ``"api.app:create_app"`` (uvicorn, entry points)
  or ``"cli.main"`` (after ``python -m``). Only whole strings count, with at least one ``.`` or
  ``:``, whose module part is a module of the tree and whose one trailing attribute, if any, is a
  name that module defines at top level (so ``"api.log"``, a file name, is not a dependency).
- ``resource``: a package or module named to a loader (``importlib.resources.files``,
  ``importlib.import_module``, ``pkgutil.get_data``, ``pkg_resources.resource_filename`` ...) by a
  literal name (``"migrations"``, ``"broker.scripts"``) or by ``__package__``, ``__name__`` or
  ``__spec__.parent``. A name held in a variable is not followed.
"""

from __future__ import annotations

import ast
import fnmatch
import re
import tomllib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, NamedTuple

EdgeKind = Literal["import", "string", "resource"]

# Callables that load a module or a package's files by the name given as their first argument.
LOADERS = frozenset(
    {
        *(
            f"{module}.{function}"
            for module in ("importlib.resources", "importlib_resources")
            for function in (
                "files",
                "read_text",
                "read_binary",
                "open_text",
                "open_binary",
                "path",
                "contents",
                "is_resource",
            )
        ),
        "importlib.import_module",
        "importlib.__import__",
        "importlib.util.find_spec",
        "builtins.__import__",
        "pkgutil.get_data",
        "pkgutil.resolve_name",
        "runpy.run_module",
        *(
            f"pkg_resources.{function}"
            for function in (
                "resource_filename",
                "resource_string",
                "resource_stream",
                "resource_listdir",
                "resource_exists",
                "resource_isdir",
            )
        ),
    }
)
LOADER_KEYWORDS = frozenset({"package", "anchor", "name", "mod_name", "package_or_requirement"})

_DOTTED = r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*"
_NAMED_MODULE = re.compile(rf"(?P<module>{_DOTTED})(?::(?P<attribute>{_DOTTED}))?")


@dataclass(frozen=True)
class Edge:
    """One place where ``source`` depends on ``target`` (both modules of the tree, dotted names)."""

    source: str
    target: str
    kind: EdgeKind
    line: int
    text: str
    """What in the source made the edge, e.g. ``from storage import GroupStore`` or ``'cli.main'``."""
    implied: bool = False
    """An ``__init__`` that importing a module below it runs first (``text`` is that import)."""


@dataclass(frozen=True)
class Tree:
    """The top-level packages of a source tree and every module in them, by dotted name."""

    root: Path
    packages: frozenset[str]
    modules: Mapping[str, Path]
    nodes: Mapping[str, Sequence[ast.AST]] = field(repr=False)
    """Each module's imports, calls and string constants (all that the graph reads), walked once."""
    syntax: Mapping[str, ast.Module] = field(repr=False)

    def where(self, module: str, line: int | None = None) -> str:
        """``module``'s file relative to the root, with ``:line`` if given: where a message points."""
        path = self.modules[module].relative_to(self.root).as_posix()
        return path if line is None else f"{path}:{line}"

    def is_package(self, module: str) -> bool:
        """Whether ``module`` is a package (its file is an ``__init__.py``)."""
        return self.modules[module].name == "__init__.py"


def discover(root: Path) -> Tree:
    """Every top-level package under ``root`` and its modules, parsed.

    A package is a top-level folder with an ``__init__.py``, or a folder of Python files that
    pyproject.toml's ``[tool.setuptools]`` ``packages`` (a list, or ``find``'s ``include``
    patterns) names: a namespace package is still a package.
    """
    folders = sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".") and p.name != "__pycache__")
    packages = {p.name for p in folders if (p / "__init__.py").is_file()}
    for pattern in _pyproject_packages(root):
        top = pattern.split(".")[0]
        packages.update(p.name for p in folders if fnmatch.fnmatch(p.name, top) and any(p.rglob("*.py")))
    modules: dict[str, Path] = {}
    for package in sorted(packages):
        for path in sorted((root / package).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            if any(not part.isidentifier() for part in parts):
                continue  # not importable by name (a folder such as ``my-data``): not a module
            modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    syntax = {name: ast.parse(path.read_bytes(), filename=str(path)) for name, path in modules.items()}
    nodes = {name: _read(module) for name, module in syntax.items()}
    return Tree(root=root, packages=frozenset(packages), modules=modules, nodes=nodes, syntax=syntax)


_READ = (ast.Import, ast.ImportFrom, ast.Call, ast.Constant)


def _read(syntax: ast.Module) -> list[ast.AST]:
    """The nodes of ``syntax`` that the graph reads, in one walk shared by every rule (not in source order)."""
    found: list[ast.AST] = []
    stack: list[ast.AST] = [syntax]
    while stack:
        node = stack.pop()
        if isinstance(node, _READ):
            found.append(node)
        for name in node._fields:
            value = getattr(node, name, None)
            if isinstance(value, list):
                stack.extend(reversed([item for item in value if isinstance(item, ast.AST)]))
            elif isinstance(value, ast.AST) and not isinstance(value, ast.expr_context):
                stack.append(value)
    return found


def _pyproject_packages(root: Path) -> list[str]:
    pyproject = root / "pyproject.toml"
    if not pyproject.is_file():
        return []
    packages = tomllib.loads(pyproject.read_text(encoding="utf-8")).get("tool", {}).get("setuptools", {})
    packages = packages.get("packages", [])
    if isinstance(packages, list):
        return [str(name) for name in packages]
    return [str(pattern) for pattern in packages.get("find", {}).get("include", [])]


def dependencies(tree: Tree) -> list[Edge]:
    """Every edge of the tree, in module order then line order (no edge from a module to itself)."""
    edges: list[Edge] = []
    for name in sorted(tree.modules):
        edges.extend(sorted(set(_module_edges(tree, name)), key=lambda e: (e.line, e.target, e.kind, e.implied)))
    return edges


def _module_edges(tree: Tree, name: str) -> Iterator[Edge]:
    nodes = tree.nodes[name]
    package = name if tree.is_package(name) else name.rpartition(".")[0]
    aliases = _aliases(nodes)
    loaded: set[int] = set()  # string constants already counted as a loader's argument
    for node in nodes:
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield from _import(tree, name, alias.name, node.lineno, f"import {alias.name}")
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(package, node.module, node.level)
            text = f"from {'.' * node.level}{node.module or ''} import {', '.join(a.name for a in node.names)}"
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                target = submodule if submodule in tree.modules else base
                yield from _import(tree, name, target, node.lineno, text)
        elif isinstance(node, ast.Call) and _qualified(node.func, aliases) in LOADERS:
            argument = _loader_argument(node)
            if argument is None:
                continue
            if isinstance(argument, ast.Constant):
                loaded.add(id(argument))
            resource = _loaded_module(tree, name, package, argument)
            if resource is not None and resource != name:
                yield Edge(name, resource, "resource", node.lineno, ast.unparse(node))
    for node in nodes:
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in loaded:
            named = named_module(tree, node.value)
            if named is not None and named != name:
                yield Edge(name, named, "string", node.lineno, repr(node.value))


def _import(tree: Tree, source: str, dotted: str, line: int, text: str) -> Iterator[Edge]:
    target = _longest_module(tree, dotted)
    if target is None:
        return
    if target != source:
        yield Edge(source, target, "import", line, text)
    parts = target.split(".")
    for depth in range(1, len(parts)):
        above = ".".join(parts[:depth])
        inside = source == above or source.startswith(above + ".")
        if above in tree.modules and not inside:
            yield Edge(source, above, "import", line, text, implied=True)


def _absolute(package: str, module: str | None, level: int) -> str:
    if not level:
        return module or ""
    parts = package.split(".")
    anchor = parts[: len(parts) - level + 1]
    return ".".join([*anchor, module] if module else anchor)


def _longest_module(tree: Tree, dotted: str) -> str | None:
    parts = dotted.split(".")
    for end in range(len(parts), 0, -1):
        candidate = ".".join(parts[:end])
        if candidate in tree.modules:
            return candidate
    return None


def _aliases(nodes: Iterable[ast.AST]) -> dict[str, str]:
    """Local name -> what it was imported as, e.g. ``resources`` -> ``importlib.resources``."""
    aliases: dict[str, str] = {}
    for node in nodes:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    aliases[alias.asname] = alias.name
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return aliases


def _qualified(function: ast.expr, aliases: Mapping[str, str]) -> str:
    parts: list[str] = []
    while isinstance(function, ast.Attribute):
        parts.append(function.attr)
        function = function.value
    if not isinstance(function, ast.Name):
        return ""
    head = "builtins.__import__" if function.id == "__import__" and not parts else function.id
    return ".".join([aliases.get(head, head), *reversed(parts)])


def _loader_argument(call: ast.Call) -> ast.expr | None:
    if call.args:
        return call.args[0]
    return next((k.value for k in call.keywords if k.arg in LOADER_KEYWORDS), None)


def _loaded_module(tree: Tree, source: str, package: str, argument: ast.expr) -> str | None:
    if isinstance(argument, ast.Constant) and isinstance(argument.value, str):
        named = _NAMED_MODULE.fullmatch(argument.value)
        module = named["module"] if named else None
    elif isinstance(argument, ast.Name) and argument.id in ("__package__", "__name__"):
        module = package if argument.id == "__package__" else source
    elif isinstance(argument, ast.Attribute) and ast.unparse(argument) == "__spec__.parent":
        module = package
    else:
        module = None
    return module if module in tree.modules else None


def named_module(tree: Tree, text: str) -> str | None:
    """The module of ours that a string names (see the module docstring), or None."""
    named = _NAMED_MODULE.fullmatch(text)
    if named is None or not ("." in text or ":" in text) or text.split(".")[0].split(":")[0] not in tree.packages:
        return None
    if named["attribute"] is not None:
        module = named["module"]
        if module not in tree.modules:
            return None
        return module if named["attribute"].split(".")[0] in _top_level_names(tree, module) else None
    module = _longest_module(tree, text)
    if module is None:
        return None
    rest = text[len(module) + 1 :].split(".") if text != module else []
    if not rest:
        return module
    return module if len(rest) == 1 and rest[0] in _top_level_names(tree, module) else None


class UnresolvedName(NamedTuple):
    """A string that names an attribute which the module it names does not define."""

    source: str
    line: int
    text: str
    module: str
    attribute: str


def unresolved_names(tree: Tree) -> Iterator[UnresolvedName]:
    """Strings shaped like ``module.attribute`` or ``module:attribute`` for a (non-package) module of
    the tree that defines no such attribute.

    These are names that went stale, such as an RQ task renamed in ``orchestrator/tasks.py`` but not
    where it is queued. A package followed by a word is left alone: ``"api.log"`` is a file name.
    """
    for name in sorted(tree.modules):
        for node in tree.nodes[name]:
            if not (isinstance(node, ast.Constant) and isinstance(node.value, str)):
                continue
            named = _NAMED_MODULE.fullmatch(node.value)
            if named is None or named["module"].split(".")[0] not in tree.packages:
                continue
            if named["attribute"] is not None:
                module, attribute = named["module"], named["attribute"]
            else:
                module = _longest_module(tree, node.value) or ""
                attribute = node.value[len(module) + 1 :]
            if module not in tree.modules or tree.is_package(module) or not attribute:
                continue
            if attribute.split(".")[0] not in _top_level_names(tree, module):
                yield UnresolvedName(name, node.lineno, node.value, module, attribute)


def _top_level_names(tree: Tree, module: str) -> set[str]:
    names: set[str] = set()
    for node in tree.syntax[module].body:
        names.update(_bound(node))
    return names


def _bound(node: ast.stmt) -> Iterable[str]:
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return [node.name]
    if isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        return [n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]
    if isinstance(node, ast.Import | ast.ImportFrom):
        return [(a.asname or a.name).split(".")[0] for a in node.names]
    if isinstance(node, ast.If | ast.Try):
        blocks = [node.body, node.orelse, *([h.body for h in node.handlers] if isinstance(node, ast.Try) else [])]
        return [name for block in blocks for statement in block for name in _bound(statement)]
    return []
