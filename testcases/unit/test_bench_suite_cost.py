"""``python -m tools.bench.suite_cost``: per-group and per-file test time from a JUnit report."""

from __future__ import annotations

import os
import subprocess
from types import SimpleNamespace

import pytest

from tools.bench.suite_cost import parse_junit, render, summarize

pytestmark = pytest.mark.unit

JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest">
<testcase classname="testcases.unit.test_app" name="test_a" time="2.5"/>
<testcase classname="testcases.unit.test_app" name="test_b" time="0.5"/>
<testcase classname="testcases.meta.test_faults" name="test_faults_end_to_end" time="60.0"/>
<testcase classname="testcases.tc.test_tc01_allocation" name="test_tc01[x]" time="1.0"><failure message="m"/></testcase>
</testsuite></testsuites>
"""


def test_groups_and_files_slowest_first(tmp_path):
    path = tmp_path / "junit.xml"
    path.write_text(JUNIT)
    cases = parse_junit(path)
    assert [(c["group"], c["file"]) for c in cases][:1] == [("unit", "unit/test_app.py")]
    summary = summarize(cases)
    assert summary["groups"]["unit"] == {"tests": 2, "seconds": 3.0, "cpu_s": 0.0}  # no probe lines: no CPU
    assert summary["files"]["meta/test_faults.py"]["slowest"] == ("test_faults_end_to_end", 60.0)
    text = render(summary, wall_s=61.0, exit_code=0, args=["-n", "4"])
    lines = text.splitlines()
    assert lines[0].startswith("pytest -n 4: wall 61.0 s (exit 0); summed test time 64.0 s")
    groups = [line.split()[0] for line in lines[3:] if not line.startswith(" ")]
    assert groups == ["meta", "unit", "tc"]  # slowest group first
    assert "test_faults_end_to_end" in text and "94%" in text
    assert [c["outcome"] for c in cases] == ["passed", "passed", "passed", "failure"]
    failed = render(summary, wall_s=61.0, exit_code=1, args=["-n", "4"], cpu_s=100.0,
                    failed=[c for c in cases if c["outcome"] == "failure"])
    assert "machine CPU 100 s over all cores" in failed.splitlines()[0]
    assert failed.splitlines()[-3:] == ["not passed (1):", "  failure: tc/test_tc01_allocation.py::test_tc01[x]", "    m"]


def test_cpu_per_test_from_the_probe_lines_of_every_process(tmp_path):
    from tools.bench import cpu_probe

    (tmp_path / "101.jsonl").write_text(
        '{"nodeid": "testcases/unit/test_app.py::test_a", "self_s": 1.5, "children_s": 0.25}\n'
        '{"nodeid": "testcases/meta/test_faults.py::test_faults_end_to_end", "self_s": 0.5, "children_s": 9.5}\n')
    (tmp_path / "102.jsonl").write_text('{"nodeid": "testcases/tc/test_tc01_allocation.py::test_tc01[x]", '
                                         '"self_s": 0.5, "children_s": 0.0}\n')
    cpu = cpu_probe.read(tmp_path)
    assert cpu == {("unit/test_app.py", "test_a"): 1.75, ("meta/test_faults.py", "test_faults_end_to_end"): 10.0,
                   ("tc/test_tc01_allocation.py", "test_tc01[x]"): 0.5}
    path = tmp_path / "junit.xml"
    path.write_text(JUNIT)
    cases = parse_junit(path)
    for c in cases:
        c["cpu_s"] = cpu.get((c["file"], c["name"]))
    summary = summarize(cases)
    assert summary["groups"]["meta"]["cpu_s"] == 10.0 and summary["files"]["unit/test_app.py"]["cpu_s"] == 1.75
    text = render(summary, wall_s=61.0, exit_code=0, args=["-n", "4"], cpu_s=40.0, cases=cases, top=2)
    most = text.splitlines()[text.splitlines().index(next(l for l in text.splitlines() if l.startswith("most CPU"))):]
    assert "12 s in all, 31% of the machine's" in most[0]
    assert most[1:3] == ["    10.0 s  meta/test_faults.py::test_faults_end_to_end", "     1.8 s  unit/test_app.py::test_a"]


def _probe(pytester, monkeypatch) -> dict:
    """Run the test file made in ``pytester`` with the CPU probe; what the probe recorded per test."""
    from tools.bench import cpu_probe

    folder = pytester.path / "cpu"
    folder.mkdir()
    monkeypatch.setenv(cpu_probe.DIR_ENV, str(folder))
    result = pytester.runpytest_inprocess("-q", "-p", "no:cacheprovider", "-p", "no:randomly", "-p", cpu_probe.__name__)
    result.assert_outcomes(passed=1)
    return cpu_probe.read(folder)


def test_the_probe_measures_a_test_and_the_process_it_waited_for(pytester, monkeypatch):
    pytester.makepyfile(
        "import subprocess, sys\n\n"
        "def test_busy_child():\n"
        "    subprocess.run([sys.executable, '-c', 'sum(i * i for i in range(3_000_000))'], check=True)\n")
    [(key, seconds)] = _probe(pytester, monkeypatch).items()
    assert key == ("test_the_probe_measures_a_test_and_the_process_it_waited_for.py", "test_busy_child")
    assert seconds > 0.05  # the child's work, which its own process would not show


def test_the_probe_leaves_out_what_a_child_running_before_the_test_had_used(pytester, monkeypatch):
    """A rank of the worker's own pool is such a child: its earlier work is not this test's."""
    pytester.makepyfile(
        "import subprocess, sys, time\n\n"
        "from harness import procfs\n\n"
        "BURN = 'import sys, time\\nt = time.process_time()\\nwhile time.process_time() - t < 0.4: pass\\nsys.stdin.read()'\n"
        "CHILD = subprocess.Popen([sys.executable, '-c', BURN], stdin=subprocess.PIPE)\n"
        "def _cpu():\n"
        "    return procfs.stat(CHILD.pid).cpu_ticks / procfs.TICKS_PER_S\n"
        "deadline = time.monotonic() + 30\n"
        "while _cpu() < 0.35 and time.monotonic() < deadline:\n"
        "    time.sleep(0.02)\n\n"
        "def test_reaps_a_child_started_earlier():\n"
        "    CHILD.stdin.close()\n"
        "    assert CHILD.wait() == 0\n")
    [(_, seconds)] = _probe(pytester, monkeypatch).items()
    assert seconds < 0.25, f"{seconds} s: the child's 0.4 s before the test counted"


def test_an_expected_failure_is_counted_as_one_not_as_a_skip(tmp_path):
    path = tmp_path / "junit.xml"
    path.write_text("""<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest">
<testcase classname="testcases.tc.test_tc01_allocation" name="test_tc01[a]" time="1.0">
<skipped type="pytest.xfail" message="predicted"/></testcase>
<testcase classname="testcases.unit.test_allocation" name="test_cuda" time="0.0">
<skipped type="pytest.skip" message="needs a CUDA device"/></testcase>
</testsuite></testsuites>""")
    assert [c["outcome"] for c in parse_junit(path)] == ["xfailed", "skipped"]


def test_against_takes_a_commit_of_this_checkout_or_names_the_option():
    from contract.errors import UserError
    from tools.bench.suite_cost import resolve_commit

    commit = resolve_commit("HEAD")
    assert len(commit) == 40 and all(ch in "0123456789abcdef" for ch in commit)
    with pytest.raises(UserError) as refused:
        resolve_commit("no-such-revision-of-this-checkout")
    assert refused.value.field == "--against"


def test_against_alternates_before_and_now_and_compares_medians(monkeypatch, capsys):
    """Before runs in a checkout of the commit (a git checkout, as this one is), now in this
    checkout, alternated; the printed ratios are of the medians of each side."""
    from harness.paths import REPO_ROOT
    from tools.bench import suite_cost

    seen = []

    def fake_measure(pytest_args, cwd=REPO_ROOT):
        side = "now" if cwd == REPO_ROOT else "before"
        if side == "before":
            head = subprocess.run(["git", "-C", str(cwd), "rev-parse", "HEAD"], capture_output=True, text=True)
            assert (cwd / "pyproject.toml").is_file() and head.stdout.strip() == commit  # a checkout of the commit
        seen.append(side)
        wall = {"before": [100.0, 130.0, 110.0], "now": [60.0, 40.0, 55.0]}[side][seen.count(side) - 1]
        return {"wall_s": wall, "cpu_s": 2 * wall, "exit_code": 0,
                "cases": [{"outcome": "passed"}, {"outcome": "xfailed"}]}

    monkeypatch.setattr(suite_cost, "measure", fake_measure)
    commit = suite_cost.resolve_commit("HEAD~1")
    result = suite_cost.compare(["-n", "4"], commit, repeat=3)
    assert seen == ["before", "now"] * 3
    assert result["wall_s"] == {"before": 110.0, "now": 55.0, "ratio": 0.5}
    assert result["cpu_s"]["ratio"] == 0.5
    text = suite_cost.render_comparison(result, ["-n", "4"])
    assert "wall         before (" in text and "110.0 s, now 55.0 s: now/before = 0.50" in text
    out = capsys.readouterr().out
    assert "[2/3] now    wall 40.0 s, machine CPU 80 s (exit 0): 2 tests (1 passed, 1 xfailed)" in out


def test_the_runs_cpu_is_split_by_the_processes_closing_lines(tmp_path):
    """Per worker: its own CPU in tests and outside them, what its tests waited for, and the rest of
    what it reaped (its pools' ranks); the controller's own CPU; the tree's remainder."""
    from tools.bench import cpu_probe

    (tmp_path / "11.jsonl").write_text(  # a worker: two tests, then its closing line
        '{"nodeid": "testcases/unit/test_app.py::test_a", "self_s": 2.0, "children_s": 5.0}\n'
        '{"nodeid": "testcases/tc/test_tc01_allocation.py::test_tc01[x]", "self_s": 1.0, "children_s": 0.5}\n'
        '{"process": 11, "self_s": 10.0, "children_s": 25.5}\n')
    (tmp_path / "12.jsonl").write_text(  # a worker killed before its closing line: its tests only
        '{"nodeid": "testcases/unit/test_app.py::test_b", "self_s": 0.5, "children_s": 1.5}\n')
    (tmp_path / "10.jsonl").write_text('{"process": 10, "self_s": 3.0, "children_s": 99.0}\n')  # the controller
    parts = cpu_probe.breakdown(tmp_path, tree_cpu_s=60.0)
    assert parts == {"in_tests": 3.5, "between_tests": 7.0, "started_by_tests": 7.0, "pools": 20.0,
                     "controller": 3.0, "tree": 60.0, "rest": 19.5, "incomplete": 1, "tc_cases": 1.5}
    assert cpu_probe.without_tc_matrix(parts) == 60.0 - 1.5 - 20.0
    assert cpu_probe.read(tmp_path)[("unit/test_app.py", "test_a")] == 7.0  # closing lines are not tests
    lines = cpu_probe.render_breakdown(parts, machine_cpu_s=70.0)
    assert lines[0] == "where the CPU went (60 s in the pytest command's processes; the machine was busy 70 s in all):"
    assert lines[1].split()[:2] == ["20.0", "s"] and "rank pools" in lines[1]  # largest first
    assert lines[2].split()[0] == "19.5" and "no probe line covers" in lines[2]
    assert lines[-2] == "  the TC matrix (testcases/tc/): 1.5 s in its tests, and the pools' ranks; everything else: 38.5 s"
    assert lines[-1] == "  (1 worker(s) wrote no closing line: only their tests are counted)"


def test_the_probe_writes_each_process_closing_line(pytester, monkeypatch):
    from tools.bench import cpu_probe

    pytester.makepyfile("def test_nothing():\n    assert True\n")
    folder = pytester.path / "cpu"
    folder.mkdir()
    monkeypatch.setenv(cpu_probe.DIR_ENV, str(folder))
    pytester.runpytest_inprocess("-q", "-p", "no:cacheprovider", "-p", "no:randomly",
                                 "-p", cpu_probe.__name__).assert_outcomes(passed=1)
    [entries] = cpu_probe.probe_lines(folder).values()
    assert [sorted(e) for e in entries] == [["children_s", "nodeid", "self_s"], ["children_s", "process", "self_s"]]
    assert entries[1]["self_s"] >= entries[0]["self_s"]  # the whole process's CPU, its test's with it
    parts = cpu_probe.breakdown(folder)
    assert parts["in_tests"] == entries[0]["self_s"]
    assert parts["between_tests"] == pytest.approx(entries[1]["self_s"] - entries[0]["self_s"])


def test_against_shows_the_median_of_each_part():
    from tools.bench.suite_cost import median_breakdown

    runs = [{"breakdown": {"in_tests": v, "between_tests": 1.0, "started_by_tests": 2.0, "pools": 3.0,
                           "controller": 0.5, "tree": 10 * v, "rest": None, "incomplete": n, "tc_cases": 1.0}}
            for v, n in ((1.0, 0), (5.0, 1), (3.0, 0))]
    parts = median_breakdown(runs)
    assert parts["in_tests"] == 3.0 and parts["tree"] == 30.0 and parts["rest"] is None and parts["incomplete"] == 1


def test_the_recorded_breakdown_sets_the_run_without_the_tc_matrix_beside_the_target(monkeypatch):
    from tools.bench import suite_cost

    published = []

    def _publish_breakdown(*args):
        published.append(suite_cost.breakdown_record(*args))

    monkeypatch.setattr(suite_cost.os, "cpu_count", lambda: 2)
    parts = {"in_tests": 90.0, "between_tests": 25.0, "started_by_tests": 140.0, "pools": 55.0, "controller": 5.0,
             "tree": 320.0, "rest": 5.0, "incomplete": 0, "tc_cases": 20.0}
    _publish_breakdown([{"breakdown": parts}], ["-n", "4"], "python -m tools.bench.suite_cost --docs")
    [record] = published
    assert record.name == "bench_test_cpu" and record.command.endswith("--docs -- -n 4")
    rows = {row[0]: row[1:] for row in record.rows}
    assert rows["processes the tests started and waited for (sweeps, torchrun agents, nested pytest, the Allure "
                "CLI, the compiler)"] == ("140.0", "44%")
    assert record.rows[0][1] == "140.0"  # largest part first
    assert rows["the pytest command's process tree in all"] == ("320.0", "100%")
    assert rows["of it, all but the TC cases' tests and the rank pools (what the run costs without the TC matrix)"] \
        == ("245.0", "77%")
    assert rows["the 120 s target, in CPU seconds of this machine's 2 cores"] == ("240.0", "")
    published.clear()
    _publish_breakdown([{"breakdown": parts}], ["-n", "2", "testcases/unit"], "cmd")
    assert not any("target" in row[0] for row in published[0].rows)  # another command: no target to set beside


def test_both_records_of_a_docs_run_are_made_before_either_block_is_written(monkeypatch, tmp_path):
    """Else the second record would call the checkout dirty because of the first block's write."""
    from tools import docs_blocks
    from tools.bench import suite_cost

    events = []
    monkeypatch.setattr(docs_blocks, "checkout_commit", lambda *a, **k: events.append("commit") or "abc")
    monkeypatch.setattr(docs_blocks, "publish", lambda record: events.append("write") or tmp_path / "page.md")
    parts = {"in_tests": 1.0, "between_tests": 1.0, "started_by_tests": 1.0, "pools": 1.0, "controller": 1.0,
             "tree": 5.0, "rest": 0.0, "incomplete": 0, "tc_cases": 0.5}
    case = {"file": "unit/test_x.py", "group": "unit", "name": "test_x", "seconds": 0.1, "outcome": "passed",
            "message": "", "cpu_s": 0.1}
    run = {"wall_s": 1.0, "cpu_s": 2.0, "exit_code": 0, "cases": [case], "breakdown": parts}
    result = {"commit": "f" * 40, "repeat": 1, "runs": {"before": [run], "now": [run]},
              "wall_s": {"before": 1.0, "now": 1.0, "ratio": 1.0}, "cpu_s": {"before": 2.0, "now": 2.0, "ratio": 1.0}}
    monkeypatch.setattr(suite_cost, "resolve_commit", lambda rev: "f" * 40)
    monkeypatch.setattr(suite_cost, "compare", lambda *a: result)
    monkeypatch.setattr(suite_cost, "measure", lambda *a: run)
    for argv in (["--against", "HEAD", "--docs"], ["--docs"]):
        events.clear()
        assert suite_cost.main(argv) == 0
        assert events == ["commit", "commit", "write", "write"]


def test_an_older_tree_is_measured_with_this_checkouts_probe(monkeypatch, tmp_path):
    """``--against`` runs pytest in an exported older tree with ``-p tools.bench.cpu_probe``: the probe comes
    from this checkout (on ``PYTHONPATH``, after the tree's own packages, which ``cwd`` puts first)."""
    from harness.paths import REPO_ROOT
    from tools.bench import suite_cost

    seen = {}

    def fake_run(cmd, cwd, env, stdout):
        seen.update(cwd=cwd, env=env)
        return SimpleNamespace(returncode=0)

    monkeypatch.setattr(suite_cost.subprocess, "run", fake_run)
    monkeypatch.setenv("PYTHONPATH", "/elsewhere")
    suite_cost.timed_run(["true"], tmp_path, cwd=tmp_path)
    assert seen["cwd"] == tmp_path
    assert seen["env"]["PYTHONPATH"].split(os.pathsep) == ["/elsewhere", str(REPO_ROOT)]
