"""The package map, held against the code: every dependency runs down the floors, and nothing goes round in a circle.

The map, as ALLOWED below encodes it (a package may import itself and exactly the packages listed;
its floor is one above the highest floor it may import; "apart" packages stand outside the floors,
and no package on a floor may import them):

  floor 6 cli           api, broker, contract, evaluation, markup, orchestrator, producer, storage, tenancy, worker
  floor 5 api           broker, contract, markup, producer, storage, tenancy
  floor 4 evaluation    broker, contract, producer, storage
  floor 4 orchestrator  broker, contract, markup, producer, storage
  floor 4 tenancy       broker, contract, producer, storage
  floor 3 producer      broker, contract, storage
  floor 3 worker        broker, contract, storage
  floor 2 broker        contract
  floor 2 markup        contract
  floor 2 storage       contract
  floor 1 contract      (nothing of ours)
  apart   bench         api, broker, contract, evaluation, markup, orchestrator, producer, storage, tenancy, worker
  apart   migrations    (nothing of ours)
  apart   tests         api, bench, broker, cli, contract, evaluation, markup, migrations, orchestrator, producer, storage, tenancy, worker

A dependency is an import (anywhere: inside functions and under ``TYPE_CHECKING`` too), a string
that names one of our modules (``"orchestrator.tasks.split_document"``: RQ, uvicorn and
``python -m`` load a module by name) or a resource load (``importlib.resources.files("migrations")``);
``tests/architecture/graph.py`` says exactly what counts. The rules (``tests/architecture/rules.py``):

- every top-level package (a folder with an ``__init__.py``, or one pyproject.toml's setuptools
  ``include`` names) is in the map, and every package the map names exists;
- dependencies run only where the map allows, save the commented ALLOWLIST entries, each still needed;
- nothing outside the CLI (and the tests) depends on the CLI;
- no import cycles, counting the ``__init__`` that importing a module below it runs first;
- a string shaped like ``module.attribute`` for one of our modules names an attribute it defines.

Each rule is shown to fail on a small fake tree written into ``tmp_path`` and to pass on a good one.
"""

from __future__ import annotations

import ast
import re
import textwrap
import tomllib
from collections.abc import Mapping, Set
from pathlib import Path

import pytest

from tests.architecture.graph import Tree, dependencies, discover, named_module
from tests.architecture.rules import (
    Allowlist,
    Dependency,
    Violation,
    dangling_names,
    floors,
    import_cycles,
    importers_of,
    stale_allowlist,
    unknown_packages,
    wrong_way,
)

ROOT = Path(__file__).resolve().parent.parent

_LIBRARY = {
    "contract",
    "markup",
    "broker",
    "storage",
    "producer",
    "worker",
    "tenancy",
    "orchestrator",
    "api",
    "evaluation",
}
# Which of our packages each package may import (besides itself). The CLI is imported by nothing but tests.
ALLOWED: dict[str, set[str]] = {
    "contract": set(),
    "broker": {"contract"},
    "markup": {"contract"},  # HTML and XML inline markup: the doors' tagger, for the segmenters to share
    "storage": {"contract"},
    "producer": {"contract", "broker", "storage"},
    "worker": {"contract", "broker", "storage"},
    "tenancy": {"contract", "broker", "storage", "producer"},
    "orchestrator": {"contract", "markup", "broker", "storage", "producer"},
    "api": {"contract", "markup", "broker", "storage", "producer", "tenancy"},
    "evaluation": {"contract", "broker", "storage", "producer"},
    "cli": set(_LIBRARY),
    "migrations": set(),
    "bench": set(_LIBRARY),
    "tests": {*_LIBRARY, "cli", "migrations", "bench"},
}
APART = {"migrations", "bench", "tests"}

# Dependencies that break the map on purpose: (module, kind, module it depends on) -> why.
ALLOWLIST: dict[Dependency, str] = {
    # RQ runs a task by its dotted name. broker/orchestration.py queues a document's split, a group's
    # finish and a webhook by these names (contract.orchestration.TASKS) for producer/, tenancy/ and
    # orchestrator/ alike, and none below the orchestrator may import it; the names are the
    # orchestrator's contract, so they live in contract/. A task renamed in orchestrator/tasks.py but
    # not here fails test_strings_name_what_our_modules_define.
    ("contract.orchestration", "string", "orchestrator.tasks"): "RQ resolves tasks by dotted name",
    # Alembic reads the migration scripts from the migrations package's folder (script_location);
    # storage/ runs the migrations (upgrade_database, downgrade_database) and imports none of their code.
    ("storage.migrations", "resource", "migrations"): "Alembic's script_location is the migrations folder",
    # The benchmarks measure the dragoman command as users run it, in a child process
    # (`python -m cli.main ...`): a process boundary, not an import of the CLI.
    ("bench.api", "string", "cli.main"): "runs `dragoman api` (of this or another checkout) as a child process",
    ("bench.bulk_run", "string", "cli.main"): "runs `dragoman rq-worker` as a child process",
    ("bench.engines", "string", "cli.main"): "runs `dragoman worker` as a child process",
    ("bench.wait_latency", "string", "cli.main"): "runs `dragoman worker --engine echo` as a child process",
    ("bench.runaway", "string", "cli.main"): "runs `dragoman worker` (of this or another checkout) as a child process",
    ("bench.tenants", "string", "cli.main"): "runs `dragoman worker --engine echo` as a child process",
    ("bench.peer_deploy", "string", "cli.main"): "runs `dragoman api` and `dragoman worker` as child processes",
    ("bench.eval_catalogs", "string", "cli.main"): "runs `dragoman worker` and `dragoman eval` as child processes",
    ("bench.hostile_stack", "string", "cli.main"): "runs a checkout's `dragoman api`, `worker`, `rq-worker`, `db` "
    "and `api-key` as child processes",
}

TREE = discover(ROOT)
EDGES = dependencies(TREE)


def violations(tree: Tree, allowed: Mapping[str, Set[str]], allowlist: Allowlist) -> list[Violation]:
    """Every rule's violations on ``tree`` under the map ``allowed``: what the tests below assert one by one."""
    edges = dependencies(tree)
    return [
        *unknown_packages(tree, allowed),
        *wrong_way(tree, edges, allowed, allowlist),
        *importers_of(tree, edges, "cli", {"tests"}, allowlist),
        *stale_allowlist(edges, allowlist),
        *import_cycles(tree, edges),
        *dangling_names(tree),
    ]


def _fail(found: list[Violation]) -> str:
    return f"{len(found)} violation(s):\n" + "\n".join(map(str, found))


# -- the real tree --------------------------------------------------------------------------------


def test_every_package_is_in_the_map() -> None:
    found = unknown_packages(TREE, ALLOWED)
    assert not found, _fail(found)


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_dependencies_only_run_downwards(package: str) -> None:
    found = wrong_way(TREE, [e for e in EDGES if e.source.split(".")[0] == package], ALLOWED, ALLOWLIST)
    assert not found, _fail(found)


def test_nothing_imports_the_cli() -> None:
    assert not any("cli" in targets for package, targets in ALLOWED.items() if package != "tests")
    found = importers_of(TREE, EDGES, "cli", {"tests"}, ALLOWLIST)
    assert not found, _fail(found)


def test_no_import_cycles() -> None:
    found = import_cycles(TREE, EDGES)
    assert not found, _fail(found)


def test_every_allowlist_entry_is_needed() -> None:
    found = stale_allowlist(EDGES, ALLOWLIST)
    assert not found, _fail(found)


def test_strings_name_what_our_modules_define() -> None:
    found = dangling_names(TREE)
    assert not found, _fail(found)


def test_the_names_in_pyproject_are_our_modules() -> None:
    """Console scripts name a function of ours, package data a package of ours, and mypy checks every package."""
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    scripts = pyproject["project"]["scripts"]
    assert scripts, "pyproject.toml has no [project.scripts]"
    for command, target in scripts.items():
        assert named_module(TREE, target) is not None, f"[project.scripts] {command} = {target!r} names nothing of ours"
    for package in pyproject["tool"]["setuptools"]["package-data"]:
        assert package in TREE.modules and TREE.is_package(package), f"package-data names {package!r}: no such package"
    checked = set(pyproject["tool"]["mypy"]["packages"])
    ours = TREE.packages - {"tests"}
    assert checked == ours, f"[tool.mypy] packages: add {sorted(ours - checked)}, remove {sorted(checked - ours)}"


def test_the_docstring_shows_the_map_as_allowed_encodes_it() -> None:
    levels = floors(ALLOWED, APART)
    width = max(map(len, ALLOWED))
    rows = [
        f"  {f'floor {levels[p]}' if p in levels else 'apart':<7} {p:<{width}}  "
        + (", ".join(sorted(ALLOWED[p])) or "(nothing of ours)")
        for p in [*sorted(levels, key=lambda p: (-levels[p], p)), *sorted(APART)]
    ]
    expected = "\n".join(rows)
    assert expected in (__doc__ or ""), f"the map in the docstring differs from ALLOWED; it should read:\n{expected}"


def test_no_package_on_a_floor_imports_one_apart() -> None:
    wrong = {package: ALLOWED[package] & APART for package in ALLOWED if package not in APART}
    assert not any(wrong.values()), wrong


def test_the_real_tree_is_read_as_it_is() -> None:
    """The reader finds the dependencies the allowlist is about, and a known import, on the real tree."""
    kinds = {(e.source, e.kind, e.target) for e in EDGES}
    assert ("broker.scripts.lua", "resource", "broker.scripts") in kinds  # resources.files(__package__)
    assert ("contract.orchestration", "string", "orchestrator.tasks") in kinds
    assert ("cli.main", "import", "cli.bulk") in kinds
    assert TREE.packages == set(ALLOWED)


# -- every rule fails on a bad fake tree and passes on a good one -----------------------------------

FAKE_MAP: dict[str, set[str]] = {
    "contract": set(),
    "storage": {"contract"},
    "orchestrator": {"contract", "storage"},
    "cli": {"contract", "storage", "orchestrator"},
}

GOOD: dict[str, str] = {
    "pyproject.toml": """
        [tool.setuptools.packages.find]
        include = ["contract*", "storage*", "orchestrator*", "cli*"]
    """,
    "contract/__init__.py": '"""Names every process shares."""',
    "contract/names.py": """
        QUEUE = "jobs"
        LOG_FILE = "orchestrator.log"  # a file name, not a module: orchestrator defines no `log`
    """,
    # A package __init__ re-exporting its own modules, which import each other and the floor below.
    "storage/__init__.py": "from storage.rows import Row\n\n__all__ = ['Row']",
    "storage/rows.py": """
        from contract.names import QUEUE
        from storage.connection import connect
        from . import connection

        class Row:
            queue = QUEUE
    """,
    "storage/connection.py": """
        from importlib import resources

        SCHEMA = resources.files(__package__).joinpath("schema.sql")

        def connect() -> None: ...
    """,
    "orchestrator/__init__.py": "",
    "orchestrator/templates/__init__.py": "",
    "orchestrator/render.py": """
        from importlib.resources import files

        TEMPLATES = files("orchestrator.templates")
    """,
    "orchestrator/tasks.py": """
        from typing import TYPE_CHECKING

        if TYPE_CHECKING:
            from storage import Row

        SELF = "orchestrator.tasks.run"

        def run() -> None:
            from storage.rows import Row
    """,
    "cli/__init__.py": "",
    "cli/main.py": """
        import sys

        from orchestrator.tasks import run

        ARGV = [sys.executable, "-m", "cli.main"]
    """,
}

INIT_CYCLE = {
    "storage/__init__.py": "from storage.rows import Row\nfrom storage.bad import helper\n",
    "storage/bad.py": "from storage import Row\n\ndef helper() -> None: ...\n",
}

# (what is wrong, files written over the good tree, the allowlist, the violations as (rule, where)).
BAD: list[tuple[str, dict[str, str], Allowlist, set[tuple[str, str]]]] = [
    (
        "an upward import, lazy, inside a function",
        {"contract/bad.py": "def later() -> None:\n    from orchestrator.tasks import run\n"},
        {},
        {("dependencies run downwards", "contract/bad.py:2")},
    ),
    (
        "an upward string dependency",
        {"contract/bad.py": "TASK = 'orchestrator.tasks.run'\n"},
        {},
        {("dependencies run downwards", "contract/bad.py:1")},
    ),
    (
        "an upward uvicorn-style string, module:attribute",
        {"storage/bad.py": "APP = 'orchestrator.tasks:run'\n"},
        {},
        {("dependencies run downwards", "storage/bad.py:1")},
    ),
    (
        "an upward resources load",
        {"storage/bad.py": "from importlib import resources\n\nT = resources.files('orchestrator.templates')\n"},
        {},
        {("dependencies run downwards", "storage/bad.py:3")},
    ),
    (
        "an upward import_module",
        {"storage/bad.py": "import importlib\n\nR = importlib.import_module('orchestrator')\n"},
        {},
        {("dependencies run downwards", "storage/bad.py:3")},
    ),
    (
        "an unknown package with an __init__.py",
        {"reports/__init__.py": "", "reports/daily.py": "from orchestrator.tasks import run\n"},
        {},
        {("every package is in the map", "reports/")},
    ),
    (
        "an unknown namespace package that pyproject.toml includes",
        {
            "pyproject.toml": '[tool.setuptools.packages.find]\ninclude = ["contract*", "extra*"]\n',
            "extra/job.py": "",
        },
        {},
        {("every package is in the map", "extra/")},
    ),
    (
        "a module importing its own package's __init__, which imports it back",
        INIT_CYCLE,
        {},
        {("no import cycles", "storage/__init__.py:2")},
    ),
    (
        "a cycle through a subpackage's __init__ that importing one of its modules runs",
        {
            "orchestrator/flows/__init__.py": "from orchestrator.tasks import run\n",
            "orchestrator/flows/steps.py": "",
            "orchestrator/tasks.py": "import orchestrator.flows.steps\n\ndef run() -> None: ...\n",
        },
        {},
        {("no import cycles", "orchestrator/flows/__init__.py:1")},
    ),
    (
        "an import of the CLI",
        {"orchestrator/bad.py": "from cli.main import ARGV\n"},
        {},
        {("dependencies run downwards", "orchestrator/bad.py:1"), ("nothing imports cli", "orchestrator/bad.py:1")},
    ),
    (
        "a child process of the CLI started by module name",
        {"orchestrator/bad.py": "import sys\n\nARGV = [sys.executable, '-m', 'cli.main']\n"},
        {},
        {("dependencies run downwards", "orchestrator/bad.py:3"), ("nothing imports cli", "orchestrator/bad.py:3")},
    ),
    (
        "an allowlist entry nothing needs",
        {},
        {("contract.names", "string", "orchestrator.tasks"): "no longer true"},
        {("every allowlist entry is needed", "ALLOWLIST")},
    ),
    (
        "a string naming an attribute its module does not define",
        {"cli/bad.py": "TASK = 'orchestrator.tasks.rerun'\n"},
        {},
        {("names resolve", "cli/bad.py:1")},
    ),
]


def _write(root: Path, files: Mapping[str, str]) -> Tree:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).strip() + "\n", encoding="utf-8")
    return discover(root)


def test_the_rules_pass_on_a_good_tree(tmp_path: Path) -> None:
    tree = _write(tmp_path, GOOD)
    assert not violations(tree, FAKE_MAP, {}), _fail(violations(tree, FAKE_MAP, {}))
    kinds = {(e.source, e.kind, e.target, e.implied) for e in dependencies(tree)}
    assert ("storage.connection", "resource", "storage", False) in kinds  # resources.files(__package__)
    assert ("orchestrator.render", "resource", "orchestrator.templates", False) in kinds
    assert ("cli.main", "string", "cli.main", False) not in kinds  # a module naming itself
    assert ("cli.main", "import", "orchestrator", True) in kinds  # orchestrator/__init__.py runs first
    assert ("storage.rows", "import", "storage", True) not in kinds  # its own package is already running


@pytest.mark.parametrize(("files", "allowlist", "expected"), [case[1:] for case in BAD], ids=[c[0] for c in BAD])
def test_each_rule_fails_on_a_bad_tree(
    tmp_path: Path, files: dict[str, str], allowlist: Allowlist, expected: set[tuple[str, str]]
) -> None:
    found = violations(_write(tmp_path, {**GOOD, **files}), FAKE_MAP, allowlist)
    assert {(v.rule, v.where) for v in found} == expected, _fail(found)


def test_an_allowlist_entry_lets_one_dependency_through(tmp_path: Path) -> None:
    tree = _write(tmp_path, {**GOOD, "contract/bad.py": "TASK = 'orchestrator.tasks.run'\n"})
    assert not violations(tree, FAKE_MAP, {("contract.bad", "string", "orchestrator.tasks"): "RQ"})
    assert violations(tree, FAKE_MAP, {("contract.bad", "import", "orchestrator.tasks"): "the wrong kind"})


def test_a_violation_says_where_what_and_which_rule(tmp_path: Path) -> None:
    tree = _write(tmp_path, {**GOOD, "contract/bad.py": "TASK = 'orchestrator.tasks.run'\n"})
    (found,) = wrong_way(tree, dependencies(tree), FAKE_MAP, {})
    assert str(found) == (
        "contract/bad.py:1: contract.bad names orchestrator.tasks in a string ('orchestrator.tasks.run'), "
        "but contract may import nothing of ours [dependencies run downwards]"
    )


def test_a_cycle_is_shown_step_by_step(tmp_path: Path) -> None:
    tree = _write(tmp_path, {**GOOD, **INIT_CYCLE})
    (found,) = import_cycles(tree, dependencies(tree))
    assert re.fullmatch(
        r"import cycle storage -> storage\.bad -> storage:\n"
        r"    storage/__init__\.py:2 storage imports storage\.bad \(`from storage\.bad import helper`\)\n"
        r"    storage/bad\.py:1 storage\.bad imports storage \(`from storage import Row`\)",
        found.message,
    ), found.message


def test_a_map_that_goes_round_in_a_circle_has_no_floors() -> None:
    with pytest.raises(ValueError, match="circle"):
        floors({"a": {"b"}, "b": {"a"}}, set())
    assert floors(FAKE_MAP, set()) == {"contract": 1, "storage": 2, "orchestrator": 3, "cli": 4}


SQL_START = re.compile(r"^\s*(SELECT|INSERT|UPDATE|DELETE|CREATE|ALTER|DROP|WITH|TRUNCATE|LOCK)\s")


def test_every_sql_statement_lives_in_storage() -> None:
    """A string that starts like an SQL statement appears only in storage/ (and migrations/)."""
    found = sorted(
        f"{TREE.where(name, node.lineno)}: {node.value.strip()[:40]!r}"
        for name, nodes in TREE.nodes.items()
        if name.split(".")[0] not in ("storage", "migrations", "bench", "tests")
        for node in nodes
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
