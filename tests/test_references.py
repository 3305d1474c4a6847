"""Words that point somewhere must still point there (docstrings named modules that no
longer existed, docs named ``evaluator/compose.py`` after it became a package).

Checked: every backticked path under one of the project's folders in ``docs/``, the README and
the source docstrings exists; every ``:mod:``/``:func:``/``:class:``/``:meth:``/``:attr:`` role
in a docstring resolves (a short name through the module's own namespace); every backticked
dotted name that starts at one of the packages and names a module resolves. Patterns
(``{name}``, ``<id>``, ``*``) are not paths.
"""

from __future__ import annotations

import ast
import builtins
import importlib
import re
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from tests.shared import REPO, module_name

FOLDERS = ("evaluator", "exporter", "gpu_health", "bench")  # source folders
PACKAGES = ("gpu_health", "bench")  # import names
ROOTS = (*(f"{p}/" for p in FOLDERS), "tests/", "docs/", "rules/", "deploy/", "grafana/",
         ".ci/", "scripts/")
TICKED = re.compile(r"`{1,2}([A-Za-z0-9_.\-/{}<>*]+)`{1,2}")
ROLE = re.compile(r":(mod|func|class|meth|attr|data):`~?([A-Za-z0-9_.]+)`")
DOTTED = re.compile(rf"(?:{'|'.join(PACKAGES)})(?:\.[A-Za-z_][A-Za-z0-9_]*)+")


def _docs() -> Iterator[Path]:
    yield REPO / "README.md"
    yield from sorted((REPO / "docs").rglob("*.md"))


def _sources() -> Iterator[Path]:
    for folder in FOLDERS:
        yield from sorted((REPO / folder).rglob("*.py"))


def _docstrings(path: Path) -> Iterator[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        documented = ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef
        if isinstance(node, documented) and (doc := ast.get_docstring(node)) is not None:
            yield doc


def _path_exists(token: str) -> bool:
    token = token.rstrip(".,:;")
    if any(c in token for c in "{}<>*") or not token.startswith(ROOTS):
        return True
    return (REPO / token.split(":")[0]).exists()


def _attr_chain(obj: object, names: list[str]) -> bool:
    for name in names:
        if not hasattr(obj, name):
            return False
        obj = getattr(obj, name)
    return True


def _dotted(name: str, *, module_only: bool) -> bool:
    """``name`` as a module plus attributes. ``module_only``: a name whose second part is not
    a module is not a reference (the Helm chart's ``evaluator.enabled`` is a value key)."""
    parts = name.split(".")
    for k in range(len(parts), 0, -1):
        try:
            module = importlib.import_module(".".join(parts[:k]))
        except ImportError:
            continue
        if module_only and k == 1:
            return True
        return _attr_chain(module, parts[k:])
    return False


def _package_modules(module: ModuleType) -> list[ModuleType]:
    """The modules of ``module``'s package (a short reference may name a sibling's name)."""
    package = module.__name__ if hasattr(module, "__path__") else module.__package__ or ""
    folder = REPO.joinpath(*package.split("."))
    names = [package, *(f"{package}.{p.stem}" for p in sorted(folder.glob("*.py"))
                        if p.stem != "__init__")]
    return [importlib.import_module(n) for n in names]


def _role(module: ModuleType, kind: str, target: str) -> bool:
    """A role's target: absolute from a package, else through the module's namespace, its
    classes (a method or attribute), or its package's modules (a sibling or its names)."""
    if target.split(".")[0] in (*PACKAGES, "tests"):
        return _dotted(target, module_only=False)
    head, *rest = target.split(".")
    space = vars(builtins) | vars(module)
    if head in space:
        return _attr_chain(space[head], rest)
    if kind in ("meth", "attr") and any(
            _attr_chain(c, [head, *rest]) for c in vars(module).values() if isinstance(c, type)):
        return True
    for sibling in _package_modules(module):
        if sibling.__name__.rsplit(".", 1)[-1] == head and _attr_chain(sibling, rest):
            return True
        if head in vars(sibling) and _attr_chain(vars(sibling)[head], rest):
            return True
    return False


def _broken_in_text(text: str) -> Iterator[str]:
    for m in TICKED.finditer(text):
        token = m.group(1)
        broken_path = "/" in token and not _path_exists(token)
        if broken_path or (DOTTED.fullmatch(token) and not _dotted(token, module_only=True)):
            yield token


def test_every_path_and_module_named_in_the_docs_exists() -> None:
    broken = [f"{path.relative_to(REPO)}: {token}" for path in _docs()
              for token in _broken_in_text(path.read_text(encoding="utf-8"))]
    assert broken == []


@pytest.mark.parametrize("path", list(_sources()), ids=lambda p: str(p.relative_to(REPO)))
def test_every_reference_in_a_docstring_resolves(path: Path) -> None:
    module = importlib.import_module(module_name(path))
    broken = []
    for doc in _docstrings(path):
        broken += list(_broken_in_text(doc))
        broken += [f":{m.group(1)}:{m.group(2)}" for m in ROLE.finditer(doc)
                   if not _role(module, m.group(1), m.group(2))]
    assert broken == []
