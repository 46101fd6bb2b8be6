"""Rules of the house's layout that a linter does not check: which floor imports which, and the one
module each of ``/proc`` and the dependencies' private internals is reached through."""

from __future__ import annotations

import ast
import functools
from typing import Iterator

from testcases import ROOT

PACKAGES = ("harness", "implementations")

APP_ENTRY_POINTS = {
    "harness/__main__.py": "``python -m harness`` starts the app",
    "harness/docs_blocks.py": "its ``figures`` command records a finished sweep's results.csv with the app's "
                              "own table builder (a reader of the app's output, run after it)",
}
"""Modules outside ``harness/app`` that may import it: what starts the app or reads what it wrote."""


@functools.cache
def _parsed(package: str) -> tuple[tuple[str, ast.Module], ...]:
    """Every module of ``package``, parsed once for all the checks here."""
    return tuple((path.relative_to(ROOT).as_posix(), ast.parse(path.read_text(encoding="utf-8")))
                 for path in sorted((ROOT / package).rglob("*.py")))


def _sources() -> Iterator[tuple[str, ast.Module]]:
    for package in PACKAGES:
        yield from _parsed(package)


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


# -- /proc and the dependencies' private internals: each read in one module --------------------------

PROCFS = "harness/procfs.py"
PRIVATE_APIS = "harness/private_apis.py"
DEPENDENCIES = ("torch", "hydra", "omegaconf", "pytest", "_pytest", "pluggy", "xdist", "execnet", "allure",
                "allure_commons", "allure_pytest", "hypothesis", "numpy", "yaml")
PUBLIC_UNDERSCORE = {"_replace", "_asdict", "_fields", "_make", "_field_defaults", "_exit", "_getframe",
                     "_current_frames", "_value_", "_name_", "_missing_", "_generate_next_value_"}
"""Standard-library names that are public although spelled with one underscore (namedtuple, os, sys, enum)."""


def _docstrings(tree: ast.Module) -> set[int]:
    return {id(node.body[0].value) for node in ast.walk(tree)
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body
            and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}


def proc_paths(tree: ast.Module) -> list[int]:
    """Lines of string literals (f-strings too) naming a ``/proc`` path, docstrings left out."""
    skip = _docstrings(tree)
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr) and node.values and isinstance(node.values[0], ast.Constant):
            text = node.values[0].value
        elif isinstance(node, ast.Constant) and id(node) not in skip:
            text = node.value
        else:
            continue
        if isinstance(text, str) and (text == "/proc" or text.startswith("/proc/")):
            lines.append(node.lineno)
    return sorted(set(lines))  # an f-string's first part is also a Constant of its own


def _own_names() -> set[str]:
    """Every underscore name the project defines itself (functions, classes, attributes, variables,
    arguments): accessing one of those is not reaching into a dependency."""
    names: set[str] = set()
    for package in (*PACKAGES, "testcases", "scripts"):
        for _, tree in _parsed(package):
            for node in ast.walk(tree):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    names.add(node.name)
                elif isinstance(node, ast.Name):
                    names.add(node.id)
                elif isinstance(node, ast.arg):
                    names.add(node.arg)
                elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                    names.add(node.attr)
                elif isinstance(node, ast.keyword) and node.arg:
                    names.add(node.arg)
                elif isinstance(node, ast.alias):
                    names.add(node.asname or node.name.split(".")[-1])
    return {n for n in names if n.startswith("_")}


def private_uses(tree: ast.Module, own: set[str]) -> list[tuple[int, str]]:
    """(line, what) where ``tree`` reaches a dependency's private internal: a private module or name
    imported from a dependency, a private module named in a string (``sys.modules["_pytest.x"]``), or an
    attribute ``x._name`` (or ``getattr(x, "_name")``) the project does not define itself."""
    found = []

    def private(dotted: str) -> bool:
        parts = dotted.split(".")
        return parts[0] in DEPENDENCIES and any(p.startswith("_") and not p.startswith("__") for p in parts)

    def foreign(attr: str) -> bool:
        return attr.startswith("_") and not attr.startswith("__") and attr not in own and attr not in PUBLIC_UNDERSCORE

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if private(a.name)]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            found += [(node.lineno, f"{node.module}.{a.name}") for a in node.names if private(f"{node.module}.{a.name}")]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and private(node.value) \
                and " " not in node.value:
            found.append((node.lineno, node.value))
        elif isinstance(node, ast.Attribute) and foreign(node.attr):
            found.append((node.lineno, f".{node.attr}"))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and len(node.args) >= 2 \
                and node.func.id in ("getattr", "hasattr", "setattr") and isinstance(node.args[1], ast.Constant) \
                and isinstance(node.args[1].value, str) and foreign(node.args[1].value):
            found.append((node.lineno, f".{node.args[1].value}"))
    return found


def test_proc_is_read_in_procfs_only():
    found = [f"{rel}:{line}" for rel, tree in _sources() if rel != PROCFS for line in proc_paths(tree)]
    assert found == [], f"read /proc through harness.procfs: {', '.join(found)}"


def test_private_internals_of_dependencies_are_reached_in_private_apis_only():
    own = _own_names()
    found = [f"{rel}:{line} {what}" for rel, tree in _sources() if rel != PRIVATE_APIS
             for line, what in private_uses(tree, own)]
    assert found == [], f"wrap a dependency's private internal in {PRIVATE_APIS}: {', '.join(found)}"


def test_the_checks_see_what_they_look_for():
    code = '''"""/proc/self is read here (a docstring: not a read)."""
import os
from hydra._internal.utils import get_args_parser
from torch.distributed.distributed_c10d import _world
import _pytest.outcomes


def f(cfg, pid, sys):
    os.listdir("/proc/self/task")
    open(f"/proc/{pid}/stat")
    sys.modules.get("_pytest.outcomes")
    return cfg._get_node("x"), cfg._mine, getattr(pid, "_must_rewrite", None)
'''
    tree = ast.parse(code)
    assert proc_paths(tree) == [9, 10]
    assert sorted(private_uses(tree, own={"_mine"})) == sorted(
        [(3, "hydra._internal.utils.get_args_parser"), (4, "torch.distributed.distributed_c10d._world"),
         (5, "_pytest.outcomes"), (11, "_pytest.outcomes"), (12, "._get_node"), (12, "._must_rewrite")])
