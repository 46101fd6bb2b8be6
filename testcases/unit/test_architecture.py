"""Rules of the house's layout that a linter does not check: which floor imports which, and the one
module each of ``/proc`` and the dependencies' private internals is reached through."""

from __future__ import annotations

import ast
from typing import Iterator

from testcases import ROOT

PACKAGES = ("harness", "implementations")

APP_ENTRY_POINTS = {
    "harness/__main__.py": "``python -m harness`` starts the app",
    "harness/docs_blocks.py": "its ``figures`` command records a finished sweep's results.csv with the app's "
                              "own table builder (a reader of the app's output, run after it)",
}
"""Modules outside ``harness/app`` that may import it: what starts the app or reads what it wrote."""


def _sources() -> Iterator[tuple[str, ast.Module]]:
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            yield path.relative_to(ROOT).as_posix(), ast.parse(path.read_text(encoding="utf-8"))


def _module_name(rel: str) -> str:
    parts = rel[:-3].split("/")
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(rel: str, tree: ast.Module) -> set[str]:
    """Every module ``tree`` imports (also inside functions), relative imports made absolute; ``from a
    import b`` counts as ``a`` and ``a.b`` (``b`` may be a module)."""
    package = _module_name(rel).split(".")
    if not rel.endswith("__init__.py"):
        package = package[:-1]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else []
            module = ".".join(base + ([node.module] if node.module else []))
            found.add(module)
            found.update(f"{module}.{alias.name}" for alias in node.names)
    return found


def app_imports_from_below() -> list[str]:
    return [f"{rel} imports {name}" for rel, tree in _sources()
            if not rel.startswith("harness/app/") and rel not in APP_ENTRY_POINTS
            for name in sorted(imported_modules(rel, tree)) if name == "harness.app" or name.startswith("harness.app.")]


def test_nothing_below_the_app_imports_it():
    """``harness/app`` (the sweep app) is the top floor: the utilities it shares with the rest (the atomic
    writer and output checks in ``harness.files``, ``harness.signals``) live on the ground floor."""
    assert app_imports_from_below() == []


def test_the_import_reader_sees_every_spelling(tmp_path):
    cases = {
        "import harness.app.job": {"harness.app.job"},
        "from harness.app.validate import check_invocation": {"harness.app.validate"},
        "from harness import app": {"harness.app"},
        "def f():\n    from ..app import signals": {"harness.app", "harness.app.signals"},
    }
    for code, expected in cases.items():
        assert expected <= imported_modules("harness/reporting/x.py", ast.parse(code)), code
    assert imported_modules("harness/reporting/__init__.py", ast.parse("from .report import main")) >= {
        "harness.reporting.report"}


def test_the_entry_points_exist():
    assert all((ROOT / rel).is_file() for rel in APP_ENTRY_POINTS)
