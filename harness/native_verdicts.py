"""The verdicts on C++ trees built by their manifests: per tree, first the **list of departures** (each role the
tree plays judged on its own against the oracle, ``harness.departures``: one line per distinct departure, with
the cases and TCs it affects and the tree's function and file), then the TC table (per model, split size and TC,
pass or fail and the first reason, measured by running the suites: one pytest per tree and model).

    python -m harness.native_verdicts --tree ../shared/ports/p6_v3_latest --tree ../shared/ports/p6_v2_1ac802
    python -m harness.native_verdicts --tree T --out DIR          # also write DIR/departures.{json,md}, verdicts.md
    python -m harness.native_verdicts --tree T --against OLD      # new / gone / remaining departures since OLD
    python -m harness.native_verdicts ... --roles-only            # the departures alone (no TC run)
    python -m harness.native_verdicts ... --out DIR && python -m tools.record_native_verdicts DIR   # into the docs


Each tree runs in its own pytest process (``LWSPLIT_XLLM_SRC=<tree>``, its shipped manifest, or
``--manifest``), on each TC's standard case of the model and split size (``<model>-<s>-w4-xllm_native``;
TC-03 on the BI-V100 topology, TC-07 with the model's draft). ``OLD`` is a tree (judged the same way) or a
``departures.json`` (or a folder holding one) an earlier ``--out`` wrote.

Nothing is given as a verdict that was not measured: an unknown ``--models`` or ``--layerwise`` is one
``error:`` line before anything runs, and a tree whose cases do not collect (it does not compile) or whose
pytest writes no report is one ``error:`` line naming the tree and the first reason, with no rows and nothing
written. ``--out`` also writes ``verdicts.json`` (the rows, the notes, the trees and this command with every
option given): what ``tools.record_native_verdicts`` records into the docs (this command prints; a tool records).
"""

from __future__ import annotations

import datetime
import os
import shlex
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from dataclasses import replace
from pathlib import Path
from typing import Optional

from contract.errors import ConfigError, ImplementationFailure, UserError
from harness import departures
from harness.config.schema import group_options
from harness.files import check_output_file, write_atomic, write_json_atomic
from harness.paths import CONF_DIR, REPO_ROOT
from harness.reporting.allure_meta import git_commit, git_tracked_changes
from harness.suites import NOT_JUDGED
from harness.usage import Parser, command, fail
from implementations.xllm_native.runtime.own_tests import run as run_own_tests
from implementations.xllm_native.tree.facts import ENV_BASE_SOURCE as BASE_SOURCE_ENV
from implementations.xllm_native.tree.facts import tree_facts

COMMAND = "python -m harness.native_verdicts"
RUN_FILE = "verdicts.json"
"""What ``--out`` writes beside the departures: the TC rows, the notes, the trees and the command that measured them."""

TC_FILES = ("test_tc01_allocation.py", "test_tc02_estimation.py", "test_tc03_topology.py",
            "test_tc04_propagation.py", "test_tc05_shard_application.py", "test_tc06_fallback.py",
            "test_tc07_speculative.py")
MODELS = ("qwen3_5_moe", "deepseek_v32", "glm_moe_dsa")
LAYERWISE = ("off", "s2", "s4")
COLUMNS = ("tree", "manifest", "model", "s", "TC", "verdict", "first reason")
DEPARTURE_COLUMNS = ("tree", "role", "rule of the spec", "the tree's figure", "the spec's figure", "function",
                     "cases", "TCs")


def _env(tree: Path, manifest: Optional[str]) -> dict:
    env = {**os.environ, "LWSPLIT_XLLM_SRC": str(tree), "PYTHONPATH": str(REPO_ROOT)}
    env.pop("LW_ALLUREDIR", None)
    return env


def run_pytest(args: list, env: dict, timeout: int) -> subprocess.CompletedProcess:
    """One pytest over a tree's cases; its output decoded with undecodable bytes replaced. A pytest past
    ``timeout`` s is an ``ImplementationFailure`` (the tree's cases hung)."""
    try:
        return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:randomly", "-n", "0", "-q", *args],
                              capture_output=True, text=True, encoding="utf-8", errors="replace", cwd=REPO_ROOT,
                              env=env, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise ImplementationFailure(f"xllm_native tree {env.get('LWSPLIT_XLLM_SRC')}",
                                    f"its cases still ran after {timeout} s and were stopped") from None


def _why(proc: subprocess.CompletedProcess) -> str:
    """The first ``error:`` line of a pytest's output (a tree that does not compile says so), else its last line."""
    lines = [line.strip() for line in (proc.stderr + "\n" + proc.stdout).splitlines() if line.strip()]
    found = next((line for line in lines if "error:" in line.lower()), None)
    return (found or (lines[-1] if lines else f"pytest exited {proc.returncode} with no output"))[:400]


def _overrides(model: str, manifest: Optional[str]) -> list:
    out = ["--lw-override", "implementation=xllm_native", "--lw-override", f"model={model}"]
    if manifest:
        out += ["--lw-override", f"implementation.manifest={manifest}"]
    return out


def standard_ids(tree: Path, model: str, layerwise, manifest: Optional[str], timeout: int) -> list:
    """The node ids of each TC's standard case of ``model`` at each split size."""
    files = [f"testcases/tc/{f}" for f in TC_FILES]
    proc = run_pytest(["--collect-only", *files, *_overrides(model, manifest)], _env(tree, manifest), timeout)
    if proc.returncode != 0:
        raise UserError("--tree", str(tree), f"a tree whose cases of {model} collect (it builds with its manifest)",
                        _why(proc))
    out = []
    for line in proc.stdout.splitlines():
        inside = line.strip().partition("[")[2].rstrip("]")
        for lw in layerwise:
            base = f"{model}-{lw}-w4-xllm_native"
            # the standard case; TC-03's on the BI-V100 topology; TC-07's with the model's draft
            if "::" in line and (inside in (base, f"{base}-bi_v100") or
                                 (inside.startswith(base + "-") and inside.endswith("_mtp"))):
                out.append(line.strip())
    return out


REASON_CHARS = 300
"""A row's reason keeps the first line of a failure up to this many characters, then says it was cut (``…``)."""


def first_reason(text: str) -> str:
    for line in (text or "").splitlines():
        line = line.strip().removeprefix("AssertionError: ")
        if line:
            return line if len(line) <= REASON_CHARS else line[:REASON_CHARS] + "…"
    return ""


def verdicts(junit_xml: str, tree: str, manifest: str, model: str) -> list:
    """Rows of ``COLUMNS`` from a pytest JUnit report: pass, fail (with the failure's first line), xfail, skip; the
    checks a case did not judge, and why (its ``not_judged`` property), after its reason."""
    rows = []
    for case in ET.fromstring(junit_xml).iter("testcase"):
        name = case.get("name", "")
        inside = name[name.index("[") + 1:-1] if "[" in name else name
        lw = inside.split("-")[1] if inside.count("-") >= 2 else "?"
        failure = case.find("failure")
        if failure is None:
            failure = case.find("error")
        skipped = case.find("skipped")
        if failure is not None:
            verdict, reason = "fail", first_reason(failure.get("message", "") or failure.text or "")
        elif skipped is not None:
            xfail = "xfail" in (skipped.get("type", "") + skipped.get("message", ""))
            verdict, reason = ("xfail" if xfail else "skip"), first_reason(skipped.get("message", ""))
        else:
            verdict, reason = "pass", ""
        unjudged = [p.get("value", "") for p in case.iter("property") if p.get("name") == NOT_JUDGED]
        reason = "; ".join(r for r in (reason, *unjudged) if r)
        rows.append((tree, manifest, model, lw, "TC-" + name.split("[")[0].removeprefix("test_tc"), verdict, reason))
    return rows


def run_tree(tree: Path, models, layerwise, manifest: Optional[str] = None, timeout: int = 1800) -> list:
    """Rows of ``COLUMNS`` for one tree."""
    name = tree_facts(str(tree), None, manifest).manifest_name
    rows = []
    for model in models:
        ids = standard_ids(tree, model, layerwise, manifest, timeout)
        if not ids:
            raise UserError("--tree", str(tree), f"a tree with a standard case of {model} at "
                                                 f"{', '.join(layerwise)}", "none was collected")
        with tempfile.TemporaryDirectory() as tmp:
            junit = Path(tmp) / "junit.xml"
            proc = run_pytest([*ids, *_overrides(model, manifest), f"--junitxml={junit}"], _env(tree, manifest), timeout)
            if not junit.is_file():
                raise ImplementationFailure(f"xllm_native tree {tree}", f"the pytest of its {model} cases wrote no "
                                                                        f"report: {_why(proc)}")
            rows += verdicts(junit.read_text(encoding="utf-8", errors="replace"), tree.name, name, model)
    return sorted(rows, key=lambda r: (r[2], r[3], r[4]))


def own_tests_note(tree: Path, manifest: Optional[str]) -> str:
    """The tree's own GoogleTest file's result, beside the spec's verdicts (its manifest's ``tests``)."""
    try:
        result = run_own_tests(str(tree), manifest)
    except (UserError, ImplementationFailure) as exc:
        return f"{tree.name}: its own tests could not be run: {exc}"
    return f"{tree.name}: " + (result.summary() if result is not None else "its manifest names no test file")


def tree_departures(tree: Path, models, layerwise, manifest: Optional[str] = None):
    """``harness.departures.TreeDepartures`` of one tree: its roles judged on the standard cases of ``models`` x
    ``layerwise``, TC-01's refusal cases and TC-03's topologies (the groups alone). The tree's code runs in its host process, never here."""
    # 1.3 s of start-up (the TC case data and the adapter, with torch), measured with /usr/bin/time on
    # ``import harness.native_verdicts``: only a run that judges a tree's departures needs them, never --help
    from harness.departures import cases, judge
    from implementations.xllm_native import XllmNativeImplementation

    impl = XllmNativeImplementation(source_dir=str(tree), manifest=manifest)  # builds its planning library
    found = judge.judge(impl, cases.standard_cases(models, layerwise) + cases.refusal_cases()
                        + cases.topology_cases())
    return replace(found, tree=tree.name)


def table_markdown(rows: list) -> str:
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(str(c).replace("|", "\\|") for c in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def _against(spec: str, models, layerwise, manifest: Optional[str]) -> list:
    """The departures an earlier snapshot had: a tree judged now, or a recorded ``departures.json``."""
    path = Path(spec).expanduser()
    if path.is_file() or (path / departures.DEPARTURES_FILE).is_file():
        try:
            return departures.load(path)
        except ValueError as exc:
            raise ConfigError("--against", spec, "a departures.json written by --out", str(exc)) from None
    if path.is_dir():
        return [tree_departures(path.resolve(), models, layerwise, manifest)]
    raise ConfigError("--against", spec, "a C++ tree, or a departures.json (or a folder holding one) written by --out")


def write_out(out: Path, found: list, rows: list, notes: list, diffs: str, run: dict) -> list:
    """``departures.json``, ``departures.md``, ``verdicts.json`` (``run``: the rows, the notes, the trees and the
    command) and (with TCs run) ``verdicts.md`` in ``out``, each written atomically; the paths written."""
    text = departures.markdown(found) + (("\n" + diffs) if diffs else "")
    written = [write_atomic(out / "departures.md", text)]
    if rows:
        written.append(write_atomic(out / "verdicts.md", table_markdown(rows) + "".join(f"\n- {n}" for n in notes)))
    written.append(write_json_atomic(out / RUN_FILE, run))
    written.append(write_json_atomic(out / departures.DEPARTURES_FILE, departures.to_json(found)))
    return written


def _choices(key: str, text: str, allowed: list) -> list:
    """``text`` (comma-separated) as a list of options of ``allowed``; one ``error:`` line naming ``key`` else."""
    chosen = [c.strip() for c in text.split(",") if c.strip()]
    unknown = [c for c in chosen if c not in allowed]
    if unknown or not chosen:
        fail(f"{key}={text}: a comma-separated list of {', '.join(allowed)}")
    return chosen


def command_line(args) -> str:
    """The command that measures what ``args`` asked for, every option given (the record's ``command``)."""
    words = [w for t in args.tree for w in ("--tree", t)]
    words += ["--manifest", args.manifest] if args.manifest else []
    words += ["--models", args.models] if args.models != ",".join(MODELS) else []
    words += ["--layerwise", args.layerwise] if args.layerwise != ",".join(LAYERWISE) else []
    words += ["--roles-only"] if args.roles_only else []
    words += ["--out", args.out] if args.out else []
    base = os.environ.get(BASE_SOURCE_ENV)  # the engine around a port (a manifest's ``base``) is part of the run
    prefix = f"{BASE_SOURCE_ENV}={shlex.quote(base)} " if base else ""
    return f"{prefix}{COMMAND} {shlex.join(words)}"


@command
def main(argv=None) -> int:
    parser = Parser(prog=COMMAND, description=__doc__.splitlines()[0])
    parser.add_argument("--tree", action="append", required=True, help="a C++ tree (repeatable)")
    parser.add_argument("--manifest", default=None, help="a manifest for every tree (default: the shipped one that fits)")
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--layerwise", default=",".join(LAYERWISE))
    parser.add_argument("--out", default=None, help="a folder to write departures.json, departures.md and verdicts.md in")
    parser.add_argument("--against", default=None,
                        help="an earlier tree or departures.json: say which departures are new, gone and remaining")
    parser.add_argument("--roles-only", action="store_true", help="the departures alone: run no TC")
    args = parser.parse_args(argv)
    models = _choices("--models", args.models, group_options(CONF_DIR, "model"))
    layerwise = _choices("--layerwise", args.layerwise, group_options(CONF_DIR, "layerwise"))
    trees = [Path(t).expanduser().resolve() for t in args.tree]
    for t in trees:
        if not t.is_dir():
            fail(f"--tree={t}: an existing folder holding a C++ tree")
    if args.out:
        for name in (RUN_FILE, departures.DEPARTURES_FILE):
            check_output_file(Path(args.out) / name, "--out")
    before = _against(args.against, models, layerwise, args.manifest) if args.against else None
    # what the verdicts were measured at (the recorder stamps the docs with it, not with its own checkout's state)
    measured_at = {"commit": git_commit(REPO_ROOT)[:12], "tracked_changes": git_tracked_changes(REPO_ROOT),
                   "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")}
    rows, notes, found = [], [], []
    for t in trees:
        found.append(tree_departures(t, models, layerwise, args.manifest))
        if not args.roles_only:
            rows += run_tree(t, models, layerwise, args.manifest)
            notes.append(own_tests_note(t, args.manifest))
    diffs = ""
    if before is not None:
        old = [d for t in before for d in t.departures]
        names = ", ".join(t.tree for t in before)
        diffs = "".join(departures.diff_markdown(names, t.tree, departures.diff(old, t.departures)) for t in found)
    print(departures.markdown(found))
    if diffs:
        print(diffs)
    for row in rows:
        print(" | ".join(row))
    for note in notes:
        print(note)
    if args.out:
        run = {"command": command_line(args), "trees": [str(t) for t in trees], "roles_only": args.roles_only,
               "rows": rows, "notes": notes, "measured": measured_at}
        for path in write_out(Path(args.out), found, rows, notes, diffs, run):
            print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
