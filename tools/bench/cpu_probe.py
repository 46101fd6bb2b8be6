"""pytest plugin of ``python -m tools.bench.suite_cost``: the CPU each test costs its own process.

Loaded with ``-p tools.bench.cpu_probe`` when ``LWSPLIT_CPU_PROBE_DIR`` names a folder. Each
test's setup, call and teardown are measured with ``getrusage``: the CPU of this process
(an xdist worker) plus that of the child processes it waited for meanwhile (a pytest, a sweep
or torchrun agents a test starts, with whatever they waited for in turn). A child that was
already running when the test began (a rank of the worker's own pools, which the worker forks)
and is reaped during it counts only with what it used during the test: its CPU up to the
test's start, read from /proc, is taken off. One JSON line per test goes to
``<folder>/<pid>.jsonl``, and a closing line per process (``"process"``): its whole CPU (start-up,
collection, tests, reporting) and that of every child it reaped, which with xdist are a worker's
pools' ranks too, closed with the session. ``breakdown`` splits a run's CPU from these lines.
"""

from __future__ import annotations

import json
import os
import resource
from pathlib import Path
from typing import Optional

import pytest

from harness import procfs

DIR_ENV = "LWSPLIT_CPU_PROBE_DIR"


def _cpu(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


def _live_children() -> dict[int, float]:
    """This process's running children -> CPU seconds so far (their own and their reaped children's)."""
    out: dict[int, float] = {}
    for pid in procfs.children():  # none where /proc is not (not Linux): nothing to take off
        found = procfs.stat(pid)
        if found is not None:
            out[pid] = found.cpu_with_reaped_s
    return out


def _reaped(before: dict[int, float]) -> float:
    """CPU up to the snapshot of the children in ``before`` that this process has reaped since."""
    me, gone = os.getpid(), 0.0
    for pid, cpu in before.items():
        found = procfs.stat(pid)
        if found is not None and found.ppid == me:
            continue  # still ours (running, or a zombie not reaped yet)
        gone += cpu
    return gone


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    folder = os.environ.get(DIR_ENV)
    running = _live_children() if folder else {}
    own, children = _cpu(resource.RUSAGE_SELF), _cpu(resource.RUSAGE_CHILDREN)
    yield
    if not folder:
        return
    waited = _cpu(resource.RUSAGE_CHILDREN) - children - _reaped(running)
    line = {"nodeid": item.nodeid, "self_s": round(_cpu(resource.RUSAGE_SELF) - own, 3),
            "children_s": round(max(waited, 0.0), 3)}
    with open(Path(folder) / f"{os.getpid()}.jsonl", "a", encoding="utf-8") as out:
        out.write(json.dumps(line) + "\n")


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config):
    """The process's closing line (after the session closed its pools and reaped their ranks)."""
    folder = os.environ.get(DIR_ENV)
    if not folder:
        return
    line = {"process": os.getpid(), "self_s": round(_cpu(resource.RUSAGE_SELF), 3),
            "children_s": round(_cpu(resource.RUSAGE_CHILDREN), 3)}
    with open(Path(folder) / f"{os.getpid()}.jsonl", "a", encoding="utf-8") as out:
        out.write(json.dumps(line) + "\n")


def probe_lines(folder: Path) -> dict[str, list[dict]]:
    """Each process's lines (its file's stem, the pid) in the order written."""
    out: dict[str, list[dict]] = {}
    for path in sorted(Path(folder).glob("*.jsonl")):
        out[path.stem] = [json.loads(text) for text in path.read_text(encoding="utf-8").splitlines() if text.strip()]
    return out


def read(folder: Path) -> dict[tuple[str, str], float]:
    """(file as the JUnit report names it, test name) -> CPU seconds, from every process's lines."""
    out: dict[tuple[str, str], float] = {}
    for entries in probe_lines(folder).values():
        for entry in entries:
            if "nodeid" not in entry:
                continue
            file, _, name = entry["nodeid"].partition("::")
            key = (file.removeprefix("testcases/"), name.rsplit("::", 1)[-1])
            out[key] = out.get(key, 0.0) + entry["self_s"] + entry["children_s"]
    return out


TC_DIR = "testcases/tc/"
"""Where the TC suites' tests live (node ids start with it)."""

BREAKDOWN = (
    ("in_tests", "pytest workers, during tests (the tests run in process; the TC cases' parent side)"),
    ("between_tests", "pytest workers, outside tests (interpreter and torch start-up, collection, reporting)"),
    ("started_by_tests", "processes the tests started and waited for (sweeps, torchrun agents, nested pytest, "
                         "the Allure CLI, the compiler)"),
    ("pools", "the workers' other children: their rank pools (the TC cases' ranks) and forkservers"),
    ("controller", "the xdist controller"),
)
"""The parts of a run's CPU, in the order shown, each with what it holds."""

REST = "the rest of the command's process tree (processes no probe line covers)"
"""What ``breakdown``'s ``rest`` holds."""


def breakdown(folder: Path, tree_cpu_s: Optional[float] = None) -> dict:
    """Where a run's CPU went, from every process's lines: seconds per ``BREAKDOWN`` part, plus
    ``tree`` (``tree_cpu_s``: the CPU of the pytest command's whole process tree, as its parent
    measured it), ``rest`` (tree minus the parts: its processes that no line covers) and
    ``incomplete`` (processes that ran tests but wrote no closing line: crashed or killed;
    only their tests' own figures count)."""
    parts = {key: 0.0 for key, _ in BREAKDOWN}
    incomplete, tc_cases = 0, 0.0
    for entries in probe_lines(folder).values():
        tests = [e for e in entries if "nodeid" in e]
        tc_cases += sum(e["self_s"] + e["children_s"] for e in tests if e["nodeid"].startswith(TC_DIR))
        closing = next((e for e in reversed(entries) if "process" in e), None)
        in_tests = sum(e["self_s"] for e in tests)
        waited = sum(e["children_s"] for e in tests)
        if not tests:  # the xdist controller runs no test; its children are the workers, counted by their own lines
            parts["controller"] += closing["self_s"] if closing else 0.0
            continue
        parts["in_tests"] += in_tests
        parts["started_by_tests"] += waited
        if closing is None:
            incomplete += 1
            continue
        parts["between_tests"] += max(closing["self_s"] - in_tests, 0.0)
        parts["pools"] += max(closing["children_s"] - waited, 0.0)
    rest = tree_cpu_s - sum(parts.values()) if tree_cpu_s is not None else None
    return {**parts, "tree": tree_cpu_s, "rest": rest, "incomplete": incomplete, "tc_cases": tc_cases}


def without_tc_matrix(parts: dict) -> float:
    """The run's CPU but the TC cases' own (their tests' time) and the rank pools' (mostly the TC
    cases' ranks): what the rest of the test command costs by itself."""
    total = parts["tree"] if parts.get("tree") is not None else sum(parts[key] for key, _ in BREAKDOWN)
    return total - parts.get("tc_cases", 0.0) - parts["pools"]


def render_breakdown(parts: dict, machine_cpu_s: Optional[float] = None) -> list[str]:
    """The lines that show ``breakdown``'s result, largest part first."""
    known = sum(parts[key] for key, _ in BREAKDOWN)
    total = parts["tree"] if parts.get("tree") is not None else known
    head = f"where the CPU went ({total:.0f} s in the pytest command's processes"
    if machine_cpu_s is not None:
        head += f"; the machine was busy {machine_cpu_s:.0f} s in all"
    lines = [head + "):"]
    rows = [(parts[key], label) for key, label in BREAKDOWN]
    if parts.get("rest") is not None:
        rows.append((parts["rest"], REST))
    for seconds, label in sorted(rows, key=lambda row: -row[0]):
        lines.append(f"  {seconds:>7.1f} s {seconds / total if total else 0:>5.0%}  {label}")
    if "tc_cases" in parts:
        lines.append(f"  the TC matrix ({TC_DIR}): {parts['tc_cases']:.1f} s in its tests, and the pools' ranks; "
                     f"everything else: {without_tc_matrix(parts):.1f} s")
    if parts.get("incomplete"):
        lines.append(f"  ({parts['incomplete']} worker(s) wrote no closing line: only their tests are counted)")
    return lines
