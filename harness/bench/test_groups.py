"""Where the test run spends its time: one pytest run, wall time per test group and per file.

    python -m harness.bench.test_groups                     # the README's test command: pytest -n 4
    python -m harness.bench.test_groups -- -n 2 testcases/unit testcases/meta
    python -m harness.bench.test_groups --json durations.json -- -n 4

Runs pytest once (arguments after ``--``; default ``-n 4``) with a JUnit XML report and
reads each test's duration from it (setup + call + teardown). Prints the run's wall time,
then per group (``unit``, ``tc``, ``meta``, ...) and per file: the tests, the summed test
time, its share, its CPU seconds, and the slowest test, slowest first, so the next slow test
is easy to find; then the tests that cost the most CPU, and every test that failed or
errored, with the first line of its message. The first line also gives the CPU seconds
the whole machine spent busy meanwhile (``/proc/stat``; other load on the machine counts).
Under ``-n N`` the summed times add up to about N x the wall time, and a test's wall time
grows with what runs beside it; its CPU (``harness.bench.cpu_probe``: its own process and
the processes it waited for, not the pools' ranks) does not. Nothing is asserted: figures only.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path
from typing import Optional

from harness import procfs
from harness.app.atomic import write_atomic
from harness.bench import cpu_probe
from harness.cli import Parser, command
from harness.paths import REPO_ROOT

DEFAULT_ARGS = ("-n", "4")


def parse_junit(path: Path) -> list[dict]:
    """One dict per test case: file (``unit/test_app.py``), group (``unit``), name, seconds."""
    out = []
    for case in ET.parse(path).getroot().iter("testcase"):
        classname = case.get("classname", "")
        parts = classname.split(".")
        if parts and parts[0] == "testcases":
            parts = parts[1:]
        module = [p for p in parts if p.startswith("test_")]
        stem = parts[: parts.index(module[0]) + 1] if module else parts
        file = "/".join(stem) + ".py" if stem else "(unknown)"
        found = next((child for child in case if child.tag in ("failure", "error", "skipped")), None)
        outcome = found.tag if found is not None else "passed"
        if outcome == "skipped" and found.get("type") == "pytest.xfail":  # junit writes an expected failure so
            outcome = "xfailed"
        message = (found.get("message") or "").strip() if found is not None else ""
        out.append({"file": file, "group": stem[0] if len(stem) > 1 else "(top)",
                    "name": case.get("name", ""), "seconds": float(case.get("time", 0) or 0), "outcome": outcome,
                    "message": message.splitlines()[0][:300] if message else ""})
    return out


def summarize(cases: list[dict]) -> dict:
    files: dict[str, dict] = defaultdict(lambda: {"tests": 0, "seconds": 0.0, "cpu_s": 0.0, "slowest": ("", 0.0)})
    groups: dict[str, dict] = defaultdict(lambda: {"tests": 0, "seconds": 0.0, "cpu_s": 0.0})
    for c in cases:
        f, g = files[c["file"]], groups[c["group"]]
        f["group"] = c["group"]
        for entry in (f, g):
            entry["tests"] += 1
            entry["seconds"] += c["seconds"]
            entry["cpu_s"] += c.get("cpu_s") or 0.0
        if c["seconds"] > f["slowest"][1]:
            f["slowest"] = (c["name"], c["seconds"])
    return {"groups": dict(groups), "files": dict(files)}


def render(summary: dict, wall_s: float, exit_code: int, args: list[str], *, cpu_s: Optional[float] = None,
           failed: list[dict] = (), cases: list[dict] = (), top: int = 15) -> str:
    total = sum(g["seconds"] for g in summary["groups"].values()) or 1.0
    cpu = f"; machine CPU {cpu_s:.0f} s over all cores" if cpu_s is not None else ""
    measured = [c for c in cases if c.get("cpu_s") is not None]
    lines = [f"pytest {' '.join(args)}: wall {wall_s:.1f} s (exit {exit_code}){cpu}; summed test time {total:.1f} s", "",
             f"{'group / file':<48} {'tests':>6} {'summed s':>9} {'share':>6} {'CPU s':>7}  slowest test"]
    for group, g in sorted(summary["groups"].items(), key=lambda kv: -kv[1]["seconds"]):
        lines.append(f"{group:<48} {g['tests']:>6} {g['seconds']:>9.1f} {g['seconds'] / total:>6.0%} {g['cpu_s']:>7.1f}")
        members = [(name, f) for name, f in summary["files"].items() if f["group"] == group]
        for name, f in sorted(members, key=lambda kv: -kv[1]["seconds"]):
            slow_name, slow_s = f["slowest"]
            lines.append(f"  {name:<46} {f['tests']:>6} {f['seconds']:>9.1f} {f['seconds'] / total:>6.0%}"
                         f" {f['cpu_s']:>7.1f}  {slow_s:.1f} s {slow_name[:60]}")
    if measured:
        attributed = sum(c["cpu_s"] for c in measured)
        share = f", {attributed / cpu_s:.0%} of the machine's" if cpu_s else ""
        lines += ["", f"most CPU (the test's own process and the processes it waited for: {attributed:.0f} s in all"
                      f"{share}; the rest is pools' ranks, forkservers, start-up):"]
        lines += [f"  {c['cpu_s']:>6.1f} s  {c['file']}::{c['name']}"
                  for c in sorted(measured, key=lambda c: -c["cpu_s"])[:top]]
    if failed:
        lines += ["", f"not passed ({len(failed)}):"]
        for c in failed:
            lines.append(f"  {c['outcome']}: {c['file']}::{c['name']}")
            if c.get("message"):
                lines.append(f"    {c['message']}")
    return "\n".join(lines)


def timed_run(cmd: list[str], probe: Path) -> tuple[subprocess.CompletedProcess, float, Optional[float], Optional[float]]:
    """Run ``cmd`` in the checkout: (its process, wall seconds, the machine's busy CPU seconds before and after)."""
    start, cpu_start = time.monotonic(), procfs.busy_cpu_s()
    proc = subprocess.run(cmd, cwd=REPO_ROOT, env={**os.environ, cpu_probe.DIR_ENV: str(probe)},
                          stdout=subprocess.DEVNULL)
    return proc, time.monotonic() - start, cpu_start, procfs.busy_cpu_s()


@command
def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    own, pytest_args = (argv[: argv.index("--")], argv[argv.index("--") + 1:]) if "--" in argv else (argv, [])
    parser = Parser(prog="python -m harness.bench.test_groups", description=__doc__.split("\n")[0])
    parser.add_argument("--json", metavar="PATH", help="also write the per-test durations and the summary here")
    parser.add_argument("--docs", action="store_true", help="also record this run's figures into docs/benchmarks.md")
    args = parser.parse_args(own)
    if args.json:
        from harness.app.validate import check_output_file

        check_output_file(args.json, "--json")
    pytest_args = pytest_args or list(DEFAULT_ARGS)
    with tempfile.TemporaryDirectory(prefix="lwsplit-durations-") as tmp:
        xml, probe = Path(tmp) / "junit.xml", Path(tmp) / "cpu"
        probe.mkdir()
        cmd = [sys.executable, "-m", "pytest", *pytest_args, "-q", "-p", "no:cacheprovider", "-p", cpu_probe.__name__,
               f"--junitxml={xml}", "-o", "junit_duration_report=total", "-o", "junit_family=xunit2"]
        proc, wall_s, cpu_start, cpu_end = timed_run(cmd, probe)
        cases = parse_junit(xml) if xml.is_file() else []
        cpu_by_test = cpu_probe.read(probe)
    for c in cases:
        c["cpu_s"] = cpu_by_test.get((c["file"], c["name"]))
    cpu_s = cpu_end - cpu_start if cpu_start is not None and cpu_end is not None else None
    summary = summarize(cases)
    failed = [c for c in cases if c["outcome"] in ("failure", "error")]
    print(render(summary, wall_s, proc.returncode, pytest_args, cpu_s=cpu_s, failed=failed, cases=cases))
    if args.json:
        write_atomic(args.json, json.dumps({"wall_s": wall_s, "cpu_s": cpu_s, "exit_code": proc.returncode,
                                               "args": pytest_args,
                                               "cases": cases, **summary}, indent=1, default=list))
    if args.docs:
        from harness import docs_blocks

        outcomes: dict[str, int] = defaultdict(int)
        for c in cases:
            outcomes[c["outcome"]] += 1
        cpu = f"; {cpu_s:.0f} s of CPU over {os.cpu_count()} cores" if cpu_s is not None else ""
        page = docs_blocks.publish(docs_blocks.measured(
            "bench_test_groups", command=f"python -m harness.bench.test_groups --docs -- {' '.join(pytest_args)}",
            columns=("what", "command", "result", "target"), align="llll",
            rows=[(f"{len(cases)} tests ({', '.join(f'{n} {o}' for o, n in sorted(outcomes.items()))})",
                   f"`pytest {' '.join(pytest_args)}`", f"{wall_s:.1f} s (exit {proc.returncode}){cpu}",
                   "120 s" if pytest_args == list(DEFAULT_ARGS) else "")]))
        print(f"wrote {page}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
