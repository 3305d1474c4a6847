"""The house rules of docs/ARCHITECTURE.md that a reader could otherwise only take on trust.

The layers themselves are import-linter's contracts (``[tool.importlinter]`` in pyproject.toml,
run by ``make test``); these tests pin what a layers contract cannot express: no import cycle
at all, module size, and that each outside edge has exactly one owner.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

import grimp
import pytest

from gpu_health.evaluator.cli import COMMANDS
from gpu_health.evaluator.main import RUNNERS
from tests.shared import REPO, SOURCE_FOLDERS

PACKAGES = tuple(SOURCE_FOLDERS)  # the folders of the one import package, gpu_health
MAX_LINES = 310  # "modules under ~300 lines"


def sources() -> Iterator[Path]:
    for package in PACKAGES:
        yield from sorted((REPO / package).rglob("*.py"))


def relative(path: Path) -> str:
    return path.relative_to(REPO).as_posix()


def test_no_import_cycle() -> None:
    graph = grimp.build_graph("gpu_health")
    for module in sorted(graph.modules):
        for imported in graph.find_modules_directly_imported_by(module):
            chain = graph.find_shortest_chain(importer=imported, imported=module)
            assert chain is None, f"import cycle: {module} -> {' -> '.join(chain)}"


def test_the_layers_contract_holds() -> None:
    result = subprocess.run([str(Path(sys.executable).parent / "lint-imports")], cwd=REPO,
                            capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("path", list(sources()), ids=relative)
def test_module_size(path: Path) -> None:
    lines = len(path.read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_LINES, f"{relative(path)}: {lines} lines; split it by concept"


def calls_named(tree: ast.AST, name: str) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if called == name:
                return True
    return False


def owners(predicate_name: str) -> set[str]:
    return {relative(p) for p in sources()
            if calls_named(ast.parse(p.read_text(encoding="utf-8")), predicate_name)}


def test_one_module_creates_outbound_http_sessions() -> None:
    assert owners("ClientSession") == {"evaluator/outbound.py"}


def test_one_module_declares_each_program_s_command_line() -> None:
    assert owners("ArgumentParser") == {"evaluator/cli.py", "exporter/settings.py"}


def test_one_request_catch_all_and_one_access_check() -> None:
    found = {relative(p) for p in sources() if "@web.middleware" in p.read_text("utf-8")}
    assert found == {"evaluator/http/errors.py", "evaluator/http/access.py"}
    assert "except" not in (REPO / "evaluator/http/access.py").read_text("utf-8")


def test_only_the_store_engines_import_a_database_driver() -> None:
    """Before: the stages type against the engine-neutral Database; each driver lives in its
    engine module (import-linter keeps it inside gpu_health.evaluator.store; this, inside
    engines/)."""
    driver = re.compile(r"^\s*(import (duckdb|psycopg)|from (duckdb|psycopg)\S* import)", re.M)
    found = {relative(p) for p in sources() if driver.search(p.read_text("utf-8"))}
    assert found == {"evaluator/store/engines/duckdb.py", "evaluator/store/engines/postgres.py",
                     "evaluator/store/engines/duckdb_compact.py"}


def test_the_store_assembles_statements_one_way() -> None:
    """Before: SQL was assembled four ways (f-strings with doubled braces, ``.format``,
    ``.replace("{...}")``) with three placeholder styles. Now a template kept for later is
    filled by ``gpu_health.evaluator.store.sql.fill_statement`` only, values are ``$name``
    placeholders, and engine-specific text lives in the engines' dialect modules
    (evaluator/store/sql.py)."""
    store = sorted((REPO / "evaluator/store").rglob("*.py"))
    other_ways = re.compile(r"\{\{[a-z_]+\}\}|\.format\(|\.replace\(\s*[\"']\{")
    found = {relative(p) for p in store if other_ways.search(p.read_text("utf-8"))}
    assert found == set()
    positional = re.compile(r"\$[0-9]|[=(,]\s*\?\s*[,)]|= \?")
    found = {relative(p) for p in store if positional.search(p.read_text("utf-8"))}
    assert found == set()
    engine_text = re.compile(r"""["'](duckdb|postgresql)["']\s*:""")
    found = {relative(p) for p in store if engine_text.search(p.read_text("utf-8"))}
    assert found == set(), "engine-specific text belongs in a Dialect (engines/*_dialect.py)"


def test_numpy_is_how_duckdb_reads_a_batch_and_nothing_else() -> None:
    found = {relative(p) for p in sources()
             if re.search(r"^\s*(import numpy|from numpy)", p.read_text("utf-8"), re.M)}
    assert found == {"evaluator/store/engines/duckdb_columns.py"}


def _compares_with(tree: ast.AST, attribute: str) -> list[int]:
    return [node.lineno for node in ast.walk(tree) if isinstance(node, ast.Compare)
            and any(isinstance(part, ast.Attribute) and part.attr == attribute
                    for side in (node.left, *node.comparators) for part in ast.walk(side))]


def test_a_rule_s_growth_gate_is_written_once_in_rules() -> None:
    """Before: the worker's and the backtest's quick test over raw feature rows
    (store/predictions/features.py), the backtest's walk and the hourly-values gate each compared
    the last window's increase with ``min_increase`` themselves, beside
    ``rules.signals.could_fire``. Now they ask ``rules.signals`` (``could_fire_with``,
    ``reaches_min_increase``): outside evaluator/rules/ nothing compares with a rule's threshold."""
    found = {f"{relative(p)}:{line}" for p in sources() if not relative(p).startswith(
        "evaluator/rules/") for line in _compares_with(ast.parse(p.read_text("utf-8")),
                                                        "min_increase")}
    assert found == set()


def test_the_environment_is_read_once_per_program() -> None:
    found = {relative(p) for p in sources()
             if "os.environ" in p.read_text("utf-8").replace("``os.environ``", "")}
    assert found == {"evaluator/main.py", "exporter/settings.py"}


def test_time_formatting_and_duration_parsing_live_once() -> None:
    found = {relative(p) for p in sources() if '.replace("+00:00", "Z")' in p.read_text("utf-8")}
    assert found == {"gpu_health/clock.py"}
    found = {relative(p) for p in sources() if "def parse_duration" in p.read_text("utf-8")}
    assert found == {"gpu_health/durations.py"}
    # the API, the event files and simulate --end each parsed times their own way
    # (text parsing; a float from Prometheus's JSON goes through fromtimestamp, not here).
    found = {relative(p) for p in sources()
             if re.search(r"fromisoformat\(|strptime\(", p.read_text("utf-8"))}
    assert found == {"gpu_health/timestamps.py"}


def test_every_subcommand_has_arguments_and_a_runner() -> None:
    assert set(COMMANDS) == set(RUNNERS)


def test_every_base_module_is_kept_from_importing_the_programs() -> None:
    """The base contract names its modules one by one (a forbidden contract cannot say "all of
    gpu_health but its two programs"): a new base module must join it."""
    contracts = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]
    base = next(c for c in contracts["contracts"] if c["name"].startswith("the base imports"))
    modules = {f"gpu_health.{p.stem}" for p in (REPO / "gpu_health").glob("*.py")
               if p.stem != "__init__"}
    assert set(base["source_modules"]) == modules



def _layers_of(container: str) -> set[str]:
    contracts = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]
    layers = next(c["layers"] for c in contracts["contracts"]
                  if c.get("containers") == [container])
    return {name.strip() for layer in layers for name in layer.split("|")}


def test_the_store_s_layers_name_every_folder_and_core_module() -> None:
    """The store is stage folders (readings, predictions, statistics, operations, history) over
    an engine-neutral core (db, sql, the migrations, the engines): its layers contract names each
    of them, so a new folder or core module joins the order instead of escaping it."""
    store = REPO / "evaluator" / "store"
    parts = {p.stem for p in store.glob("*.py") if p.stem != "__init__"}
    parts |= {p.name for p in store.iterdir() if (p / "__init__.py").is_file()}
    assert _layers_of("gpu_health.evaluator.store") == parts


def _names_used(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Name):
            names.add(node.id)
        elif isinstance(node, ast.Attribute):
            names.add(node.attr)
        elif isinstance(node, ast.ImportFrom):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.keyword) and node.arg == "tzinfo" and \
                isinstance(node.value, ast.Constant) and node.value.value is None:
            names.add("tzinfo=None")
    return names


def test_naive_utc_is_converted_at_the_store_s_one_door() -> None:
    """The store's TIMESTAMP columns are naive UTC; everything else holds aware datetimes.
    Before, 87 ``to_naive_utc`` and 43 ``from_naive_utc`` uses were spread over the store's
    modules and the backtest; now ``Database`` converts every statement's values and every
    result's TIMESTAMP columns, and no other module names the helpers or drops a zone by hand."""
    helpers = {"to_naive_utc", "from_naive_utc", "tzinfo=None"}
    users = {relative(p) for p in sources() if _names_used(p) & helpers}
    assert users == {"gpu_health/clock.py", "evaluator/store/db.py"}


ROUTE_ADDERS = ("add_ops_routes", "add_node_routes", "add_index_route", "add_ui_routes",
                "add_api_routes")


def test_one_module_puts_the_routes_on_the_server() -> None:
    """Each area declares its routes (and their access rules); ``http/site.py`` alone adds
    them to the server. Before, the process host added three areas while claiming to wire
    nothing, and the composition root added the other two in two modules."""
    callers = {relative(p) for p in sources() for name in ROUTE_ADDERS
               if calls_named(ast.parse(p.read_text(encoding="utf-8")), name)}
    assert callers == {"evaluator/http/site.py"}


def _declares_settings(node: ast.ClassDef) -> bool:
    """A class whose fields include a ``key`` and a ``kind``: a way of declaring settings."""
    fields = {s.target.id for s in node.body
              if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)}
    return {"key", "kind"} <= fields


def test_a_file_s_keys_are_declared_one_way() -> None:
    """The config file's sections and a rule file's parameters are both tables of
    ``setting_tables.Setting`` (before: the config's Table and the rules' own ParamSpec)."""
    declaring = {relative(p) for p in (REPO / "evaluator").rglob("*.py")
                 for node in ast.walk(ast.parse(p.read_text(encoding="utf-8")))
                 if isinstance(node, ast.ClassDef) and _declares_settings(node)}
    assert declaring == {"evaluator/setting_tables.py"}

# File names that said several things at once (the model, the metrics, the pipeline, the loop
# and the params of several folders): each may name one module of the package at most.
GENERIC_NAMES = ("model.py", "metrics.py", "pipeline.py", "loop.py", "params.py")


def test_a_generic_module_name_names_one_module() -> None:
    for name in GENERIC_NAMES:
        found = [relative(p) for p in sources() if p.name == name]
        assert len(found) <= 1, f"{name} names {found}: give each a name of its own"


def _public_classes(paths: list[Path]) -> dict[str, list[str]]:
    classes: dict[str, list[str]] = {}
    for path in paths:
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                classes.setdefault(node.name, []).append(relative(path))
    return classes


@pytest.mark.parametrize("program", ["evaluator", "exporter"])
def test_a_class_name_means_one_class_in_each_program(program: str) -> None:
    """Within one program and the base they share (the two programs are independent of each
    other, so each may have its own card reading), a public class name is defined once."""
    base = sorted((REPO / "gpu_health").glob("*.py"))
    classes = _public_classes(base + sorted((REPO / program).rglob("*.py")))
    assert {name: where for name, where in classes.items() if len(where) > 1} == {}


def _tuple_aliases(path: Path) -> list[str]:
    """Module-level names bound to a ``tuple[...]`` type (``Card = tuple[str, int]``)."""
    found = []
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Subscript) and \
                isinstance(node.value.value, ast.Name) and node.value.value.id == "tuple":
            found += [t.id for t in node.targets if isinstance(t, ast.Name)]
    return found


def test_a_card_has_its_shapes_in_one_module() -> None:
    """``CardKey``, ``CardSlot``, ``PhysicalCard`` and ``FirstFault`` live in
    evaluator/model.py; no other module of the evaluator names a card (or a fault) with a tuple
    alias of its own. The one exception is not a card of the store: the events file's name for
    a device, before it is matched to a slot."""
    model = REPO / "evaluator" / "model.py"
    assert {"CardSlot", "PhysicalCard", "FirstFault"} <= set(_tuple_aliases(model))
    others = {relative(p): names for p in sorted((REPO / "evaluator").rglob("*.py"))
              if p != model and (names := [n for n in _tuple_aliases(p)
                                           if n.startswith(("Card", "Fault", "FirstFault"))])}
    assert others == {"evaluator/backtest/events.py": ["CardName"]}
    spelled_out = [relative(p) for p in sorted((REPO / "evaluator").rglob("*.py"))
                   if p != model and "tuple[str, int, str | None]" in p.read_text()]
    assert spelled_out == [], "a physical card is model.PhysicalCard"
