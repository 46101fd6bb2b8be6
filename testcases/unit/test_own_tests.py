"""A tree's own test binary (``implementations.xllm_native.runtime.own_tests``): its verdict comes from GoogleTest's XML
report and its exit status, it runs bounded in a private folder, and nothing it starts outlives it. Fake
binaries (shell scripts that act as GoogleTest would, or would not) stand in for a compiled test file."""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

import pytest

from contract.errors import UserError
from harness.app import own_tests as app_own_tests
from implementations.xllm_native.runtime import own_tests, reaper

REPORT = """<?xml version="1.0" encoding="UTF-8"?>
<testsuites tests="3" failures="1" disabled="1" errors="0" name="AllTests">
  <testsuite name="LayerwiseSplitKV" tests="3" failures="1" disabled="1" skipped="0" errors="0">
    <testcase name="TC01" status="run" result="completed" classname="LayerwiseSplitKV" />
    <testcase name="TC02" status="run" result="completed" classname="LayerwiseSplitKV">
      <failure message="x.cpp:12&#x0A;Expected equality" type=""><![CDATA[x.cpp:12]]></failure>
    </testcase>
    <testcase name="DISABLED_TC03" status="notrun" result="suppressed" classname="LayerwiseSplitKV" />
  </testsuite>
</testsuites>
"""
PASSING = REPORT.replace('failures="1"', 'failures="0"').split("<testcase name=\"TC02\"")[0] + """
    <testcase name="TC02" status="run" result="completed" classname="LayerwiseSplitKV" />
  </testsuite>
</testsuites>
"""
SUMMARY = "[==========] 99 tests from 1 test suite ran. (1 ms total)\n[  PASSED  ] 99 tests.\n"


def fake(tmp_path: Path, body: str) -> list[str]:
    """A shell script acting as a test binary: ``$report`` is the file ``--gtest_output=xml:`` names."""
    script = tmp_path / "fake_gtest.sh"
    script.write_text("#!/bin/sh\nreport=${1#--gtest_output=xml:}\n" + body)
    script.chmod(0o700)
    return [str(script)]


def run(tmp_path: Path, body: str, timeout: float = 30.0):
    scratch = reaper.private_folder("lwsplit-own-tests-test-")
    try:
        return own_tests.run_binary(fake(tmp_path, body), file="t.cpp", field="tests", scratch=scratch,
                                    timeout=timeout)
    finally:
        assert reaper.remove_folder(scratch) is None and not scratch.exists()


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return not Path(f"/proc/{pid}/stat").read_text().split(") ")[1].startswith("Z")


def test_the_report_gives_counts_and_failed_names_and_a_disabled_test_is_not_counted():
    result = own_tests.parse_report(REPORT.encode(), "t.cpp", "exit 1")
    assert (result.total, result.passed, result.failed, result.exit_problem) == (2, 1, ("LayerwiseSplitKV.TC02",), "")
    assert result.summary() == "its own tests (t.cpp): 1 of 2 pass; failed: LayerwiseSplitKV.TC02"
    with pytest.raises(ValueError, match="root is <html>"):
        own_tests.parse_report(b"<html/>", "t.cpp")


def test_a_binary_that_prints_a_summary_and_exits_0_without_its_report_was_not_run(tmp_path):
    """Its printed "99 tests ... PASSED" is not read: no XML report, no verdict."""
    with pytest.raises(UserError) as err:
        run(tmp_path, f"printf '{SUMMARY}'\nexit 0\n")
    assert "it wrote no report and ended with exit 0" in str(err.value) and "[  PASSED  ] 99 tests." in str(err.value)


def test_a_binary_that_aborts_after_writing_a_passing_report_has_failed(tmp_path):
    found = run(tmp_path, f"cat > \"$report\" <<'EOF'\n{PASSING}EOF\nkill -ABRT $$\n")
    assert (found.total, found.passed, found.failed) == (2, 2, ()) and found.ended == "signal SIGABRT"
    assert not found.ok and "ended with signal SIGABRT" in found.summary(), found.summary()
    own = {"total": found.total, "passed": found.passed, "failed": [], "exit_problem": found.exit_problem}
    assert app_own_tests.verdict(own) == "fail"
    assert run(tmp_path, f"cat > \"$report\" <<'EOF'\n{PASSING}EOF\nexit 0\n").ok


def test_a_grandchild_that_setsids_and_holds_stdout_neither_stalls_the_run_nor_outlives_it(tmp_path):
    pidfile = tmp_path / "grandchild.pid"
    started = time.monotonic()
    found = run(tmp_path, f"setsid sh -c 'echo $$ > {pidfile}; exec sleep 300' &\n"
                          f"while [ ! -s {pidfile} ]; do sleep 0.01; done\n"
                          f"cat > \"$report\" <<'EOF'\n{PASSING}EOF\nexit 0\n")
    assert found.ok and time.monotonic() - started < 20
    pid = int(pidfile.read_text())
    assert not alive(pid), f"the setsid grandchild {pid} outlived the test binary"


def test_a_binary_past_its_limit_is_stopped_with_everything_it_started(tmp_path):
    pidfile = tmp_path / "child.pid"
    with pytest.raises(UserError, match="tests that finish in 0.5 s"):
        run(tmp_path, f"setsid sh -c 'echo $$ > {pidfile}; exec sleep 300' &\nsleep 300\n", timeout=0.5)
    assert not pidfile.exists() or not alive(int(pidfile.read_text()))


def test_non_utf8_output_is_read_with_replacement_and_the_working_folder_is_private(tmp_path):
    with pytest.raises(UserError) as err:
        run(tmp_path, "printf 'GBK \\326\\320\\316\\304 %s %s' \"$PWD\" \"$(stat -c %a .)\"; exit 3\n")
    text = str(err.value)
    assert "GBK \ufffd" in text and "ended with exit 3" in text, text
    where = text.split("GBK ")[1].rstrip(")").split()
    assert "lwsplit-own-tests-test-" in text and where[-1] == "700" and where[-2].endswith("/cwd"), text


def test_a_folder_the_binary_made_read_only_and_full_is_removed(tmp_path):
    top = reaper.private_folder("lwsplit-own-tests-test-")
    deep = top / "a" / "b"
    deep.mkdir(parents=True)
    for i in range(200):
        (deep / f"f{i}").write_text("x")
    for folder in (deep, deep.parent):
        folder.chmod(stat.S_IRUSR | stat.S_IXUSR)
    (top / "c").mkdir(mode=0)
    assert reaper.remove_folder(top) is None and not top.exists()


def test_the_command_is_one_line_on_a_bad_option_and_on_ctrl_c(monkeypatch, capsys):
    from harness import own_tests as command

    with pytest.raises(SystemExit) as exit_:
        command.main(["--source", "x", "--bogus"])
    err = capsys.readouterr().err.strip().splitlines()
    assert exit_.value.code == 2 and len(err) == 1 and err[0].startswith("error: unrecognized arguments: --bogus")

    def interrupted(*_a, **_k):
        raise KeyboardInterrupt

    monkeypatch.setattr(command, "run", interrupted)
    with pytest.raises(SystemExit) as exit_:
        command.main(["--source", "x"])
    err = capsys.readouterr().err.strip().splitlines()
    assert exit_.value.code == 130 and err == ["error: interrupted (SIGINT); what was under way did not finish"]


def test_a_suite_jobs_own_tests_that_print_gbk_and_write_no_report_read_not_run(tmp_path, monkeypatch):
    """The app's record of them (``harness.app.own_tests``): "not run" with the reason, never an error of the job."""
    body = "printf 'GBK \\326\\320\\316\\304\\n'; exit 0\n"
    monkeypatch.setattr(app_own_tests, "run", lambda root, manifest: run(tmp_path, body))
    own = app_own_tests.run_own_tests(str(tmp_path), "m.yaml", file="t.cpp")
    assert app_own_tests.verdict(own) == "not run" and "it wrote no report and ended with exit 0" in own["summary"], own
