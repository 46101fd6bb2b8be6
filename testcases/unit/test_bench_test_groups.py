"""``python -m harness.bench.test_groups``: per-group and per-file test time from a JUnit report."""

from __future__ import annotations

import pytest

from harness.bench.test_groups import parse_junit, render, summarize

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
    assert summary["groups"]["unit"] == {"tests": 2, "seconds": 3.0}
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
    assert failed.splitlines()[-2:] == ["not passed (1):", "  failure: tc/test_tc01_allocation.py::test_tc01[x]"]
