"""Where the test run spends its time: one pytest run, wall time per test group and per file.

    python -m tools.bench.suite_cost                     # the README's test command: pytest -n 4
    python -m tools.bench.suite_cost -- -n 2 testcases/unit testcases/meta
    python -m tools.bench.suite_cost --json durations.json -- -n 4
    python -m tools.bench.suite_cost --against 7d6c599 --repeat 2   # before and after, side by side

Runs pytest once (arguments after ``--``; default ``-n 4``) with a JUnit XML report and
reads each test's duration from it (setup + call + teardown). Prints the run's wall time,
then per group (``unit``, ``tc``, ``meta``, ...) and per file: the tests, the summed test
time, its share, its CPU seconds, and the slowest test, slowest first, so the next slow test
is easy to find; then the tests that cost the most CPU, and every test that failed or
errored, with the first line of its message. The first line also gives the CPU seconds
the whole machine spent busy meanwhile (``/proc/stat``; other load on the machine counts).
Under ``-n N`` the summed times add up to about N x the wall time, and a test's wall time
grows with what runs beside it; its CPU (``tools.bench.cpu_probe``: its own process and
the processes it waited for, not the pools' ranks) does not. Nothing is asserted: figures only.

``--against REV`` measures a change side by side: the same pytest command on a copy of commit
REV (a shared ``git clone`` checked out at REV, in a temporary folder, with this checkout's ``.tools`` so that both find
the same Allure CLI) and on this checkout, one after the other, ``--repeat`` times (before,
now, before, now, ...), and prints each run and the ratio of the medians (wall and CPU). Single
runs move with the machine's load, so a figure compared with another day's record says less
than this.
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path
from typing import Optional

from harness import procfs
from harness.files import write_atomic
from harness.paths import REPO_ROOT
from harness.usage import Parser, command
from tools.bench import cpu_probe

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


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed_run(cmd: list[str], probe: Path, cwd: Path = REPO_ROOT, env: Optional[dict] = None) -> dict:
    """Run ``cmd`` in ``cwd`` (the checkout), in ``env`` (default: this process's): its process, wall seconds,
    the machine's busy CPU seconds meanwhile (None without ``/proc``) and the CPU of the command's process tree
    (what it and the processes it waited for, recursively, used)."""
    env = os.environ if env is None else env
    start, cpu_start, tree_start = time.monotonic(), procfs.busy_cpu_s(), _children_cpu_s()
    # the probe plugin is this checkout's (``-p tools.bench.cpu_probe``): an older tree measured with
    # ``--against`` may have it elsewhere or not at all; its own packages still come first (``cwd``)
    pythonpath = os.pathsep.join(p for p in (env.get("PYTHONPATH"), str(REPO_ROOT)) if p)
    proc = subprocess.run(cmd, cwd=cwd, env={**env, cpu_probe.DIR_ENV: str(probe), "PYTHONPATH": pythonpath},
                          stdout=subprocess.DEVNULL)
    wall_s, cpu_end = time.monotonic() - start, procfs.busy_cpu_s()
    machine = cpu_end - cpu_start if cpu_start is not None and cpu_end is not None else None
    return {"proc": proc, "wall_s": wall_s, "cpu_s": machine, "tree_cpu_s": _children_cpu_s() - tree_start}


def pytest_command(pytest_args: list[str], xml: Path) -> list[str]:
    return [sys.executable, "-m", "pytest", *pytest_args, "-q", "-p", "no:cacheprovider", "-p", cpu_probe.__name__,
            f"--junitxml={xml}", "-o", "junit_duration_report=total", "-o", "junit_family=xunit2"]


def measure(pytest_args: list[str], cwd: Path = REPO_ROOT) -> dict:
    """One pytest run in ``cwd``: wall and machine CPU seconds, exit code, and its cases (with their CPU)."""
    with tempfile.TemporaryDirectory(prefix="lwsplit-durations-") as tmp:
        xml, probe = Path(tmp) / "junit.xml", Path(tmp) / "cpu"
        probe.mkdir()
        timed = timed_run(pytest_command(pytest_args, xml), probe, cwd)
        cases = parse_junit(xml) if xml.is_file() else []
        cpu_by_test = cpu_probe.read(probe)
        parts = cpu_probe.breakdown(probe, timed["tree_cpu_s"])
    for c in cases:
        c["cpu_s"] = cpu_by_test.get((c["file"], c["name"]))
    return {"wall_s": timed["wall_s"], "cpu_s": timed["cpu_s"], "exit_code": timed["proc"].returncode,
            "cases": cases, "breakdown": parts}


def outcome_counts(cases: list[dict]) -> str:
    """``2458 tests (2313 passed, 1 skipped, 144 xfailed)``."""
    outcomes: dict[str, int] = defaultdict(int)
    for c in cases:
        outcomes[c["outcome"]] += 1
    return f"{len(cases)} tests ({', '.join(f'{n} {o}' for o, n in sorted(outcomes.items()))})"


def resolve_commit(rev: str) -> str:
    """The full hash of ``rev`` in this checkout; UserError naming ``--against`` when it names no commit."""
    from contract.errors import UserError

    try:
        proc = subprocess.run(["git", "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"], cwd=REPO_ROOT,
                              capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise UserError("--against", rev, f"a commit of this checkout (git could not be run: {exc})") from None
    if proc.returncode != 0 or not proc.stdout.strip():
        raise UserError("--against", rev, "a commit of this git checkout (a hash, tag or branch)")
    return proc.stdout.strip()


def export_commit(commit: str, into: Path) -> Path:
    """A checkout of ``commit`` in ``into``/tree: a shared clone (it reads this repository's objects
    and writes nothing here), so that the tests that ask git about their checkout run there as
    here; with this checkout's ``.tools`` linked in, where the Allure CLI lives."""
    tree = into / "tree"
    for cmd in (["git", "clone", "--quiet", "--shared", "--no-checkout", str(REPO_ROOT), str(tree)],
                ["git", "-C", str(tree), "checkout", "--quiet", "--detach", commit]):
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd[:3])} failed (exit {done.returncode}): {done.stderr.strip()}")
    tools = REPO_ROOT / ".tools"
    if tools.is_dir() and not (tree / ".tools").exists():
        (tree / ".tools").symlink_to(tools, target_is_directory=True)
    return tree


def compare(pytest_args: list[str], commit: str, repeat: int) -> dict:
    """Runs before (``commit``) and now, alternated ``repeat`` times; medians and their ratios."""
    runs: dict[str, list[dict]] = {"before": [], "now": []}
    with tempfile.TemporaryDirectory(prefix="lwsplit-against-") as tmp:
        tree = export_commit(commit, Path(tmp))
        for i in range(repeat):
            for side, cwd in (("before", tree), ("now", REPO_ROOT)):
                run = measure(pytest_args, cwd)
                runs[side].append(run)
                cpu = f", machine CPU {run['cpu_s']:.0f} s" if run["cpu_s"] is not None else ""
                print(f"[{i + 1}/{repeat}] {side:<6} wall {run['wall_s']:.1f} s{cpu} (exit {run['exit_code']}): "
                      f"{outcome_counts(run['cases'])}", flush=True)

    def median(side: str, key: str) -> Optional[float]:
        values = [r[key] for r in runs[side] if r[key] is not None]
        return statistics.median(values) if values else None

    out = {"commit": commit, "repeat": repeat, "runs": runs}
    for key in ("wall_s", "cpu_s"):
        before, now = median("before", key), median("now", key)
        out[key] = {"before": before, "now": now, "ratio": (now / before) if before and now is not None else None}
    return out


def render_comparison(result: dict, pytest_args: list[str]) -> str:
    short = result["commit"][:12]
    lines = [f"pytest {' '.join(pytest_args)}: medians of {result['repeat']} run(s) each, alternated"]
    for key, label in (("wall_s", "wall"), ("cpu_s", "machine CPU")):
        m = result[key]
        if m["before"] is None or m["now"] is None:
            continue
        lines.append(f"  {label:<12} before ({short}) {m['before']:.1f} s, now {m['now']:.1f} s: "
                     f"now/before = {m['ratio']:.2f}")
    return "\n".join(lines)


@command
def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    own, pytest_args = (argv[: argv.index("--")], argv[argv.index("--") + 1:]) if "--" in argv else (argv, [])
    parser = Parser(prog="python -m tools.bench.suite_cost", description=__doc__.split("\n")[0])
    parser.add_argument("--json", metavar="PATH", help="also write the per-test durations and the summary here")
    parser.add_argument("--docs", action="store_true", help="also record this run's figures into docs/benchmarks.md")
    parser.add_argument("--against", metavar="REV", help="also run the same command on commit REV, side by side")
    parser.add_argument("--repeat", type=int, default=1, choices=range(1, 11), metavar="N",
                        help="with --against: runs of each side, alternated (1 to 10; default 1)")
    args = parser.parse_args(own)
    if args.json:
        from harness.files import check_output_file

        check_output_file(args.json, "--json")
    pytest_args = pytest_args or list(DEFAULT_ARGS)
    target = f"{TARGET_WALL_S} s" if pytest_args == list(DEFAULT_ARGS) else ""
    if args.against is not None:
        commit = resolve_commit(args.against)
        result = compare(pytest_args, commit, args.repeat)
        print(render_comparison(result, pytest_args))
        if args.json:
            write_atomic(args.json, json.dumps(result, indent=1, default=list))
        print("\n" + "\n".join(cpu_probe.render_breakdown(median_breakdown(result["runs"]["now"]))))
        if args.docs:
            _publish(_comparison_record(result, pytest_args, target),
                     breakdown_record(result["runs"]["now"], pytest_args,
                                       f"python -m tools.bench.suite_cost --against {commit[:12]} "
                                       f"--repeat {args.repeat} --docs"))
        return 0
    run = measure(pytest_args)
    cases, wall_s, cpu_s, exit_code = run["cases"], run["wall_s"], run["cpu_s"], run["exit_code"]
    summary = summarize(cases)
    failed = [c for c in cases if c["outcome"] in ("failure", "error")]
    print(render(summary, wall_s, exit_code, pytest_args, cpu_s=cpu_s, failed=failed, cases=cases))
    print("\n" + "\n".join(cpu_probe.render_breakdown(run["breakdown"], cpu_s)))
    if args.json:
        write_atomic(args.json, json.dumps({"wall_s": wall_s, "cpu_s": cpu_s, "exit_code": exit_code,
                                               "args": pytest_args, "breakdown": run["breakdown"],
                                               "cases": cases, **summary}, indent=1, default=list))
    if args.docs:
        from tools import docs_blocks

        cpu = f"; {cpu_s:.0f} s of CPU over {os.cpu_count()} cores" if cpu_s is not None else ""
        _publish(docs_blocks.measured(
            "bench_test_groups", command=f"python -m tools.bench.suite_cost --docs -- {' '.join(pytest_args)}",
            columns=("what", "command", "result", "target"), align="llll",
            rows=[(outcome_counts(cases), f"`pytest {' '.join(pytest_args)}`",
                   f"{wall_s:.1f} s (exit {exit_code}){cpu}", target)]),
            breakdown_record([run], pytest_args, "python -m tools.bench.suite_cost --docs"))
    return 0


def _publish(*records) -> None:
    """Write every record's block; the records are all made first, so each names the checkout as
    it was measured, not as the previous block's write left it."""
    from tools import docs_blocks

    for record in records:
        print(f"wrote {docs_blocks.publish(record)}")


def median_breakdown(runs: list[dict]) -> dict:
    """Each part's median over ``runs`` (the parts of one run do not add up across runs exactly)."""
    keys = [key for key, _ in cpu_probe.BREAKDOWN] + ["tree", "rest", "tc_cases"]
    out: dict = {}
    for key in keys:
        values = [r["breakdown"][key] for r in runs if r["breakdown"].get(key) is not None]
        out[key] = statistics.median(values) if values else None
    out["incomplete"] = max((r["breakdown"].get("incomplete", 0) for r in runs), default=0)
    return out


TARGET_WALL_S = 120
"""The test command's wall-time target (``pytest -n 4`` on the 2-core CI machine)."""


def breakdown_record(runs: list[dict], pytest_args: list[str], command: str):
    """The ``bench_test_cpu`` record: where the CPU of ``runs`` (this checkout's) went, medians."""
    from tools import docs_blocks

    parts = median_breakdown(runs)
    tree = parts["tree"] or sum(parts[key] for key, _ in cpu_probe.BREAKDOWN)
    labels = dict(cpu_probe.BREAKDOWN, rest=cpu_probe.REST)
    rows = [(labels[key], f"{parts[key]:.1f}", f"{parts[key] / tree:.0%}")
            for key in sorted(labels, key=lambda k: -(parts[k] or 0.0)) if parts[key] is not None]
    rows.append(("the pytest command's process tree in all", f"{tree:.1f}", "100%"))
    if parts["tc_cases"] is not None:
        rest = cpu_probe.without_tc_matrix({**parts, "tree": tree})
        rows.append(("of it, all but the TC cases' tests and the rank pools (what the run costs without the TC "
                     "matrix)", f"{rest:.1f}", f"{rest / tree:.0%}"))
    if pytest_args == list(DEFAULT_ARGS):
        cores = os.cpu_count() or 1
        rows.append((f"the {TARGET_WALL_S} s target, in CPU seconds of this machine's {cores} cores",
                     f"{TARGET_WALL_S * cores:.1f}", ""))
    return docs_blocks.measured(
        "bench_test_cpu", command=f"{command} -- {' '.join(pytest_args)}",
        columns=("where", f"CPU s (median of {len(runs)})", "share"), align="lrr", rows=rows)


def _comparison_record(result: dict, pytest_args: list[str], target: str):
    from tools import docs_blocks

    short = result["commit"][:12]
    rows = []
    for side in ("before", "now"):
        runs = result["runs"][side]
        walls = ", ".join(f"{r['wall_s']:.1f}" for r in runs)
        cpus = ", ".join(f"{r['cpu_s']:.0f}" for r in runs if r["cpu_s"] is not None)
        exits = sorted({r["exit_code"] for r in runs})
        what = f"{outcome_counts(runs[-1]['cases'])}, {'commit ' + short if side == 'before' else 'this commit'}"
        rows.append((what, f"`pytest {' '.join(pytest_args)}`",
                     f"wall {walls} s; CPU {cpus} s over {os.cpu_count()} cores (exit {', '.join(map(str, exits))})",
                     target))
    ratios = "; ".join(f"{label} now/before {result[key]['ratio']:.2f}" for key, label in
                       (("wall_s", "wall"), ("cpu_s", "CPU")) if result[key]["ratio"] is not None)
    rows.append((f"side by side, medians of {result['repeat']} alternated run(s) each", "", ratios, ""))
    return docs_blocks.measured(
        "bench_test_groups",
        command=(f"python -m tools.bench.suite_cost --against {short} --repeat {result['repeat']} --docs -- "
                 f"{' '.join(pytest_args)}"),
        columns=("what", "command", "result", "target"), align="llll", rows=rows)


if __name__ == "__main__":
    sys.exit(main())
