"""harness.native_verdicts: a pytest JUnit report read as verdict rows; bad input."""

from __future__ import annotations

import subprocess
from types import SimpleNamespace

import pytest

from harness import native_verdicts
from testcases import ROOT

FIXTURE_TREE = ROOT / "testcases" / "native" / "fixture_tree"

JUNIT = """<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest">
<testcase classname="testcases.tc.test_tc01_allocation" name="test_tc01[qwen3_5_moe-s2-w4-xllm_native]">
<failure message="AssertionError: rank 0 (split rank 0) owns full layers [], spec says [3, 11]&#10;rank 1 ...">x</failure>
</testcase>
<testcase classname="testcases.tc.test_tc02_estimation" name="test_tc02[qwen3_5_moe-off-w4-xllm_native]"/>
<testcase classname="testcases.tc.test_tc04_propagation" name="test_tc04[qwen3_5_moe-s4-w4-xllm_native]">
<skipped type="pytest.xfail" message="upstream refuses a config the spec accepts"/></testcase>
<testcase classname="testcases.tc.test_tc07_speculative" name="test_tc07[qwen3_5_moe-s2-w4-xllm_native-qwen3_5_mtp]">
<error message="fixture failed">y</error></testcase>
</testsuite></testsuites>"""


def test_a_junit_report_reads_as_one_row_per_case_with_the_first_reason():
    rows = native_verdicts.verdicts(JUNIT, "tree", "m", "qwen3_5_moe")
    assert rows == [
        ("tree", "m", "qwen3_5_moe", "s2", "TC-01", "fail", "rank 0 (split rank 0) owns full layers [], spec says [3, 11]"),
        ("tree", "m", "qwen3_5_moe", "off", "TC-02", "pass", ""),
        ("tree", "m", "qwen3_5_moe", "s4", "TC-04", "xfail", "upstream refuses a config the spec accepts"),
        ("tree", "m", "qwen3_5_moe", "s2", "TC-07", "fail", "fixture failed"),
    ]


def one_error(capsys, argv, code=2) -> str:
    with pytest.raises(SystemExit) as exit_:
        native_verdicts.main(argv)
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert exit_.value.code == code and len(err) == 1 and err[0].startswith("error: "), captured.err
    assert "|" not in captured.out, captured.out  # no verdict row
    return err[0]


def test_a_tree_that_is_not_a_folder_is_one_error_line(tmp_path, capsys):
    line = one_error(capsys, ["--tree", str(tmp_path / "nope")])
    assert line.startswith("error: --tree=") and "an existing folder" in line


@pytest.fixture
def nothing_runs(monkeypatch):
    def started(*_a, **_k):
        raise AssertionError("a tree's cases ran: the arguments were not checked first")

    monkeypatch.setattr(native_verdicts, "run_tree", started)


@pytest.mark.parametrize("argv, said", [
    (["--models", "qwen3_5_moe,nope"], "--models=qwen3_5_moe,nope: a comma-separated list of deepseek_v3, "),
    (["--layerwise", "s3"], "--layerwise=s3: a comma-separated list of off, s1, s2, s4"),
    (["--bogus"], "unrecognized arguments: --bogus"),
])
def test_an_unknown_option_or_value_is_one_error_line_before_anything_runs(argv, said, nothing_runs, capsys):
    assert said in one_error(capsys, ["--tree", str(FIXTURE_TREE), *argv])


def test_docs_without_the_pages_markers_is_refused_before_anything_runs_or_is_written(tmp_path, monkeypatch,
                                                                                     nothing_runs, capsys):
    (tmp_path / "native.md").write_text("# Native\n(the block's markers were deleted)\n")
    monkeypatch.setattr(native_verdicts, "DOCS_DIR", tmp_path)
    line = one_error(capsys, ["--tree", str(FIXTURE_TREE), "--docs"])
    assert "--docs: " in line and "has no <!-- generated:native_verdicts -->" in line and "nothing was run" in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["native.md"]


def test_a_tree_whose_cases_do_not_collect_is_one_error_line_with_no_rows(monkeypatch, capsys):
    """A tree that does not compile: its pytest collects nothing; said, never recorded as no verdicts."""
    broken = subprocess.CompletedProcess([], 2, stdout="1 error in 0.5s\n",
                                         stderr="error: implementation.source_dir=/t: does not compile: x.cpp:1: error: y\n")
    monkeypatch.setattr(native_verdicts, "_pytest", lambda *a, **k: broken)
    line = one_error(capsys, ["--tree", str(FIXTURE_TREE), "--models", "qwen3_5_moe"])
    assert line.startswith(f"error: --tree='{FIXTURE_TREE}'") and "does not compile: x.cpp:1: error: y" in line, line


def test_ctrl_c_is_one_line_and_exit_130(monkeypatch, capsys):
    def interrupted(*_a, **_k):
        raise KeyboardInterrupt

    monkeypatch.setattr(native_verdicts, "run_tree", interrupted)
    line = one_error(capsys, ["--tree", str(FIXTURE_TREE)], code=130)
    assert line == "error: interrupted (SIGINT); what was under way did not finish"


def test_the_record_names_every_option_it_was_measured_with():
    args = SimpleNamespace(tree=["/a b", "/c"], manifest="/m.yaml", models="qwen3_5_moe", layerwise="s2",
                           roles_only=True)
    assert native_verdicts.command_line(args) == ("python -m harness.native_verdicts --tree '/a b' --tree /c "
                                                  "--manifest /m.yaml --models qwen3_5_moe --layerwise s2 --roles-only "
                                                  "--docs")
    default = SimpleNamespace(tree=["/c"], manifest=None, models=",".join(native_verdicts.MODELS),
                              layerwise=",".join(native_verdicts.LAYERWISE), roles_only=False)
    assert native_verdicts.command_line(default) == "python -m harness.native_verdicts --tree /c --docs"


def test_the_record_names_the_engine_around_a_port(monkeypatch):
    """A port's base tree (``LWSPLIT_XLLM_BASE_SRC``) decides its verdicts, so the recorded command carries it."""
    args = SimpleNamespace(tree=["/p"], manifest=None, models=",".join(native_verdicts.MODELS),
                           layerwise=",".join(native_verdicts.LAYERWISE), roles_only=False)
    monkeypatch.setenv("LWSPLIT_XLLM_BASE_SRC", "/src/up stream")
    assert native_verdicts.command_line(args) == ("LWSPLIT_XLLM_BASE_SRC='/src/up stream' "
                                                  "python -m harness.native_verdicts --tree /p --docs")
    monkeypatch.delenv("LWSPLIT_XLLM_BASE_SRC")
    assert native_verdicts.command_line(args) == "python -m harness.native_verdicts --tree /p --docs"
