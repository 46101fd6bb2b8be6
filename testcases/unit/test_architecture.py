"""Rules of the house's layout that a linter does not check: which floor imports which, and the one
module each of ``/proc`` and the dependencies' private internals is reached through."""

from __future__ import annotations

import ast
import functools
from typing import Iterator, Optional, Sequence

import pytest

from testcases import ROOT

PACKAGES = ("contract", "harness", "implementations", "tools")

APP_ENTRY_POINTS = {
    "harness/__main__.py": "``python -m harness`` starts the app",
    "tools/record_figures.py": "records a finished sweep's results.csv with the app's own table builder (a "
                               "reader of the app's output, run after it)",
}
"""Modules outside ``harness/app`` that may import it: what starts the app or reads what it wrote."""


@functools.cache
def _parsed(package: str) -> tuple[tuple[str, ast.Module], ...]:
    """Every module of ``package``, parsed once for all the checks here."""
    return tuple((path.relative_to(ROOT).as_posix(), ast.parse(path.read_text(encoding="utf-8")))
                 for path in sorted((ROOT / package).rglob("*.py")))


@functools.cache
def _lines(rel: str) -> tuple[str, ...]:
    return tuple((ROOT / rel).read_text(encoding="utf-8").splitlines())


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
        elif isinstance(node, ast.Call) and _imports_by_name(node):
            found.add(node.args[0].value)
    return found


def _imports_by_name(call: ast.Call) -> bool:
    """``importlib.import_module("a.b")`` (or ``import_module`` / ``__import__`` alone) with the module's
    absolute name spelled in the call: an import the ``import`` statements do not show."""
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    return (name in ("import_module", "__import__") and bool(call.args) and isinstance(call.args[0], ast.Constant)
            and isinstance(call.args[0].value, str) and not call.args[0].value.startswith("."))


def app_imports_from_below() -> list[str]:
    return [f"{rel} imports {name}" for rel, tree in _sources()
            if not rel.startswith("harness/app/") and rel not in APP_ENTRY_POINTS
            for name in sorted(imported_modules(rel, tree)) if name == "harness.app" or name.startswith("harness.app.")]


def test_nothing_below_the_app_imports_it():
    """``harness/app`` (the sweep app) is the top floor: the utilities it shares with the rest (the atomic
    writer and output checks in ``harness.files``, ``harness.signals``) live on the ground floor."""
    assert app_imports_from_below() == [], "below the app (harness/app), a module imports it"


def test_the_import_reader_sees_every_spelling(tmp_path):
    cases = {
        "import harness.app.job": {"harness.app.job"},
        "from harness.app.validate import check_invocation": {"harness.app.validate"},
        "from harness import app": {"harness.app"},
        "def f():\n    from ..app import signals": {"harness.app", "harness.app.signals"},
        "import importlib\ndef f():\n    return importlib.import_module('harness.app.job')": {"harness.app.job"},
        "from importlib import import_module\nimport_module('harness.app.aggregate')": {"harness.app.aggregate"},
    }
    for code, expected in cases.items():
        assert expected <= imported_modules("harness/reporting/x.py", ast.parse(code)), code
    assert imported_modules("harness/reporting/__init__.py", ast.parse("from .report import main")) >= {
        "harness.reporting.report"}


def test_the_entry_points_exist():
    assert all((ROOT / rel).is_file() for rel in APP_ENTRY_POINTS)


# -- the contract, the harness and the code under test ---------------------------------------------

HARNESS_REACHES_IMPLEMENTATIONS = {
    "implementations.mutants": "the mutant registry (``MUTANTS``) and the field mutant's field names "
                               "(``field_ids``, ``LABELS``): what the mutation and coverage tools run, by name",
    "implementations.xllm_native": "the native adapter's class (what ``harness.baselines.record_native`` and "
                                   "``harness.native_verdicts`` drive; its ``facts()`` and ``compiled_with()``) and "
                                   "``call_role``: each role of a compiled tree on its own, what "
                                   "``harness.departures`` judges against the oracle",
    "implementations.xllm_native.tree.facts": "``tree_facts``: all the harness asks of a source tree (its manifest, "
                                              "the files its build compiles, the backend of each allocation build, "
                                              "its own tests), never the wing's defines or internals",
    "implementations.xllm_native.runtime.own_tests": "a source tree's own GoogleTest file, run beside the spec's "
                                                     "verdicts (``harness.native_verdicts``, ``harness.own_tests``)",
}
"""Every module of ``implementations/`` a harness module may import, and why: registries and loaders by
name, never an implementation's rules. Everything else the harness shares with the implementations is
the contract (``contract/``)."""

WING_PUBLIC_NAMES = {
    "implementations.xllm_native": frozenset({"XllmNativeImplementation", "call_role", "ROLE_CALLS"}),
    "implementations.xllm_native.tree.facts": frozenset({"tree_facts", "TreeFacts", "ENV_BASE_SOURCE"}),
    "implementations.xllm_native.runtime.own_tests": frozenset({"run", "run_estimation_test", "ESTIMATION_TEST",
                                                                "TIMEOUT_S"}),
}
"""Of the native wing's modules above, the only names a harness module may import: its public functions (a new
need is a new public function of the wing, named here, never one of its internals)."""


@functools.cache
def _submodules(package: str) -> frozenset[str]:
    folder = ROOT / package.replace(".", "/")
    if not folder.is_dir():  # a module: nothing below it
        return frozenset()
    return frozenset(p.stem for p in folder.glob("*.py")) | frozenset(p.name for p in folder.iterdir() if p.is_dir())


def reaching_in(names: set[str]) -> set[str]:
    """The modules of ``implementations/`` among ``names`` that the allow-list does not name: ``from
    implementations.mutants import MUTANTS`` reads as ``implementations.mutants.MUTANTS``, a name the
    package exports (allowed); ``from implementations.mutants import estimation`` reaches a module in it."""
    def allowed(name: str) -> bool:
        parent, _, leaf = name.rpartition(".")
        if parent in WING_PUBLIC_NAMES:
            return leaf in WING_PUBLIC_NAMES[parent]
        return name in HARNESS_REACHES_IMPLEMENTATIONS or (
            parent in HARNESS_REACHES_IMPLEMENTATIONS and leaf not in _submodules(parent))
    return {n for n in names if n.split(".")[0] == "implementations" and not allowed(n)}


def harness_imports_of_implementations() -> list[str]:
    return [f"{rel} imports {name}" for rel, tree in _parsed("harness")
            for name in sorted(reaching_in(imported_modules(rel, tree)))]


def test_the_harness_imports_nothing_of_the_implementations_but_their_registries():
    """The harness is built on ``contract/``; of ``implementations/`` it reaches only what the allow-list
    names (``from implementations.mutants import MUTANTS`` counts as the package, a name it exports)."""
    assert harness_imports_of_implementations() == [], \
        "the harness reaches into implementations/ past HARNESS_REACHES_IMPLEMENTATIONS"


def test_the_contract_imports_neither_the_harness_nor_the_implementations():
    found = [f"{rel} imports {name}" for rel, tree in _parsed("contract")
             for name in sorted(imported_modules(rel, tree)) if name.split(".")[0] in ("harness", "implementations")]
    assert found == [], "the contract imports the harness or the code under test"


def test_the_product_imports_nothing_of_the_tooling():
    """``tools/`` (benchmarks, the docs' generated blocks, the report's browser check) is the project's own
    and not in the wheel: nothing in it is imported by what ships, also not by ``importlib`` with the name
    spelled out. The product's commands print and write their results; a recorder of ``tools/`` records them."""
    found = [f"{rel} imports {name}" for package in ("contract", "harness", "implementations")
             for rel, tree in _parsed(package)
             for name in sorted(imported_modules(rel, tree)) if name.split(".")[0] == "tools"]
    assert found == [], "what ships reaches tools/ (not in the wheel): " + "; ".join(found)


def import_graph() -> dict[str, set[str]]:
    """Module -> the modules of ``PACKAGES`` it imports (statements at any depth and ``importlib`` by name);
    a module importing its own package's ``__init__`` is not an edge (Python runs it first anyway)."""
    known = {_module_name(rel): rel for rel, _ in _sources()}
    graph: dict[str, set[str]] = {}
    for rel, tree in _sources():
        module = _module_name(rel)
        edges = set()
        for name in imported_modules(rel, tree):
            while name and name not in known:
                name = name.rpartition(".")[0]
            if name and name != module and not module.startswith(name + "."):
                edges.add(name)
        graph[module] = edges
    return graph


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
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
                if len(component) > 1:
                    cycles.append(sorted(component))
    return cycles


def test_no_import_cycle_also_through_importlib():
    """``contract``, ``harness``, ``implementations`` and ``tools`` import each other without a circle, counting
    ``importlib.import_module("...")`` (a circle once closed that way: ``harness.usage`` -> ``tools.docs_blocks``
    -> ``harness.app.aggregate`` -> ``harness.plan`` -> ``harness.usage``)."""
    cycles = import_cycles(import_graph())
    assert cycles == [], "import cycles: " + " | ".join(" <-> ".join(c) for c in cycles)


def test_the_cycle_finder_sees_a_circle():
    assert import_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert import_cycles({"a": {"b"}, "b": set()}) == []


def test_the_wheel_leaves_the_tooling_out():
    import re

    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    section = text.split("[tool.setuptools.packages.find]", 1)[1].split("\n[", 1)[0]
    include = re.findall(r'"([^"]+)"', re.search(r"^include = \[(.*)\]$", section, re.M).group(1))
    assert {"harness*", "contract*", "implementations*"} <= set(include) and not any(
        pattern.startswith("tools") for pattern in include)


def test_the_implementation_check_sees_a_reach_into_internals():
    names = imported_modules("harness/x.py", ast.parse(
        "import implementations.reference.layout\n"
        "from implementations.mutants import MUTANTS\n"
        "def f():\n    from implementations.mutants import estimation, field_ids\n"
        "    from implementations.xllm_native.tree.resolve import resolve"))
    assert reaching_in(names) == {"implementations.reference.layout", "implementations.mutants.estimation",
                                  "implementations.xllm_native.tree.resolve", "implementations.xllm_native.tree.resolve.resolve"}


def test_the_implementation_check_lets_the_harness_ask_the_native_wing_only_its_public_names():
    names = imported_modules("harness/x.py", ast.parse(
        "from implementations.xllm_native import XllmNativeImplementation, call_role\n"
        "from implementations.xllm_native.tree.facts import TreeFacts, tree_facts\n"
        "from implementations.xllm_native.runtime.own_tests import run\n"
        "def f():\n    from implementations.xllm_native import roles, manifest\n"
        "    from implementations.xllm_native.tree.facts import facts_of, UPSTREAM_MANIFEST\n"
        "    from implementations.xllm_native.runtime.own_tests import TestRun"))
    assert reaching_in(names) == {
        "implementations.xllm_native.roles", "implementations.xllm_native.manifest",
        "implementations.xllm_native.tree.facts.facts_of", "implementations.xllm_native.tree.facts.UPSTREAM_MANIFEST",
        "implementations.xllm_native.runtime.own_tests.TestRun"}, "a wing internal passed, or a public name was refused"


def test_the_native_wings_role_calls_are_its_roles_functions():
    import inspect

    from implementations.xllm_native import ROLE_CALLS, roles

    public = {name for name, f in inspect.getmembers(roles, inspect.isfunction)
              if f.__module__ == roles.__name__ and not name.startswith("_")}
    assert ROLE_CALLS == public, f"call_role calls {sorted(ROLE_CALLS)}; roles defines {sorted(public)}"


def test_call_role_refuses_a_name_that_is_no_role_call():
    from implementations.xllm_native import call_role

    with pytest.raises(ValueError, match=r"call_role: '_kv_heads' is none of \['activation'"):
        call_role(None, "_kv_heads")


def tc_imports_of_other_tcs() -> list[str]:
    """``harness/suites/tcNN.py`` importing another TC's module (its cases, its data)."""
    import re

    return [f"{rel} imports {name}" for rel, tree in _parsed("harness")
            if re.fullmatch(r"harness/suites/tc\d\d\.py", rel)
            for name in sorted(imported_modules(rel, tree))
            if re.fullmatch(r"harness\.suites\.tc\d\d", name) and name != _module_name(rel)]


def test_no_tc_imports_another_tcs_case_data():
    """Case data more than one TC runs (cache variants, target/draft pairs) lives in ``harness.suites.standard``:
    a TC changed for its own sake cannot change another TC's cases."""
    found = tc_imports_of_other_tcs()
    assert found == [], "a TC imports another TC: " + "; ".join(found)


# -- one owner per spec constant -------------------------------------------------------------------

ONE_OWNER_LITERALS = {
    "round_robin": "harness/oracle/inputs.py",  # SPEC_OWNER_RULE
    "layer_id_mod_s": "harness/oracle/inputs.py",  # UPSTREAM_OWNER_RULE
}
"""Spec names the harness spells in one module only; every other module imports the constant (the
explorer once kept a copy of ``SPEC_OWNER_RULE`` that could have drifted from the oracle's)."""


def literal_spellings(rel: str, tree: ast.Module) -> list[str]:
    """``rel:line spells 'name'`` for each string constant of ``tree`` that is one of
    ``ONE_OWNER_LITERALS`` outside its owner (docstrings and comments mention the rules in words)."""
    return [f"{rel}:{node.lineno} spells {node.value!r}" for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
            and ONE_OWNER_LITERALS.get(node.value, rel) != rel]


def test_each_owner_rule_is_spelled_by_the_oracle_alone():
    """The owner rules' names are ``harness.oracle``'s constants (``SPEC_OWNER_RULE``,
    ``UPSTREAM_OWNER_RULE``); the explorer, the suites and the oracle's other modules import them."""
    assert all((ROOT / owner).is_file() for owner in ONE_OWNER_LITERALS.values())
    found = [line for rel, tree in _parsed("harness") for line in literal_spellings(rel, tree)]
    assert found == [], "an owner rule's name spelled outside harness/oracle/inputs.py (import its constant)"


def test_the_literal_check_sees_a_copy_and_leaves_the_owner_and_prose_alone():
    copy = ast.parse('"""Round robin: round_robin."""\nSPEC_OWNER_RULE = "round_robin"\ndef f(r="layer_id_mod_s"): ...')
    assert literal_spellings("harness/explore/x.py", copy) == [
        "harness/explore/x.py:2 spells 'round_robin'", "harness/explore/x.py:3 spells 'layer_id_mod_s'"]
    owner = ast.parse('SPEC_OWNER_RULE = "round_robin"\nUPSTREAM_OWNER_RULE = "layer_id_mod_s"')
    assert literal_spellings("harness/oracle/inputs.py", owner) == []


# -- imports at the module's top -------------------------------------------------------------------

def _import_runs(tree: ast.Module) -> Iterator[tuple[list[ast.stmt], Optional[ast.stmt]]]:
    """Each run of consecutive import statements inside a function, and the block statement (``try``, ``if``,
    ``with``...) whose body it opens, if it does."""
    def visit(node: ast.AST, in_function: bool) -> Iterator[tuple[list[ast.stmt], Optional[ast.stmt]]]:
        inside = in_function or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        for field in ("body", "orelse", "finalbody") if inside else ():
            statements = getattr(node, field, None)
            if not isinstance(statements, list):
                continue
            run: list[ast.stmt] = []
            for stmt in [*statements, None]:
                if isinstance(stmt, (ast.Import, ast.ImportFrom)):
                    run.append(stmt)
                    continue
                if run:
                    opens = in_function and field == "body" and statements[0] is run[0]
                    yield run, node if opens else None
                run = []
        for child in ast.iter_child_nodes(node):
            yield from visit(child, inside)

    yield from visit(tree, False)


def unexplained_function_imports(rel: str, tree: ast.Module, lines: Sequence[str]) -> list[str]:
    """``rel:line`` of each import inside a function that no comment explains (``lines``: the module's text).
    A run of consecutive imports is explained by a comment on one of its lines, or by a comment alone on the line
    above it (above the ``try:`` it opens, for an optional dependency): the start-up cost it saves (measured,
    ``python -X importtime``), a rank's start-up, an optional dependency, a cycle."""
    def alone(line: int) -> bool:
        return 1 <= line <= len(lines) and lines[line - 1].lstrip().startswith("#")

    def trailing(first: int, last: int) -> bool:  # an import statement holds no "#" but its comment's
        return any("#" in lines[line - 1] for line in range(first, last + 1))

    found = []
    for run, opens in _import_runs(tree):
        explained = trailing(run[0].lineno, run[-1].end_lineno) or alone(run[0].lineno - 1)
        if opens is not None:
            explained = explained or trailing(opens.lineno, opens.lineno) or alone(opens.lineno - 1)
        if not explained:
            found += [f"{rel}:{stmt.lineno}" for stmt in run]
    return found


def _unexplained(rel: str, tree: ast.Module) -> list[str]:
    return unexplained_function_imports(rel, tree, _lines(rel))


def test_an_import_inside_a_function_says_why():
    """Imports sit at the module's top; one inside a function says in a comment why (a measured start-up cost,
    a rank's start-up, an optional dependency, a cycle), in every module of what ships."""
    found = [line for package in ("contract", "harness", "implementations") for rel, tree in _parsed(package)
             for line in _unexplained(rel, tree)]
    assert found == [], "imports inside a function with no comment saying why: " + ", ".join(found)


def test_the_import_check_sees_an_unexplained_import_and_takes_a_reason():
    code = ("def a():\n    import json\n    import os\n"
            "def b():\n    # torch: 3.7 s of start-up (python -X importtime) that the command's --help does not need\n"
            "    import torch\n    from torch import nn\n"
            "def c():\n    x = 1\n    import yaml  # cycle: yaml_loader imports this module\n"
            "def d():\n    # optional: without safetensors, one error line\n    try:\n        import safetensors\n"
            "    except ImportError:\n        pass\n"
            "def e():\n    if True:\n        import hydra\n"
            "def f():\n    check()  # a comment about the call, not the import\n    import numpy\n")
    found = unexplained_function_imports("m.py", ast.parse(code), code.splitlines())
    assert found == ["m.py:2", "m.py:3", "m.py:19", "m.py:22"], found
