"""harness.native_verdicts: a pytest JUnit report read as verdict rows; bad input; its ``--out`` folder recorded
into the docs by ``tools.record_native_verdicts``."""

from __future__ import annotations

import json
import subprocess
from types import SimpleNamespace

import pytest

from harness import departures, native_verdicts
from testcases import ROOT
from tools import docs_blocks, record_native_verdicts

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


def test_a_check_a_case_did_not_judge_follows_its_reason():
    """The ``not_judged`` JUnit property the pytest plugin writes (``Suite.not_judged``)."""
    junit = ('<testsuites><testsuite><testcase classname="testcases.tc.test_tc04_propagation" '
             'name="test_tc04[qwen3_5_moe-off-w4-xllm_native]"><properties><property name="not_judged" '
             'value="tampered-layout check not judged: why"/></properties></testcase></testsuite></testsuites>')
    assert native_verdicts.verdicts(junit, "t", "m", "qwen3_5_moe") == [
        ("t", "m", "qwen3_5_moe", "off", "TC-04", "pass", "tampered-layout check not judged: why")]


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


def test_a_tree_whose_cases_do_not_collect_is_one_error_line_with_no_rows(monkeypatch, capsys):
    """A tree that does not compile: its pytest collects nothing; said, never recorded as no verdicts."""
    broken = subprocess.CompletedProcess([], 2, stdout="1 error in 0.5s\n",
                                         stderr="error: implementation.source_dir=/t: does not compile: x.cpp:1: error: y\n")
    monkeypatch.setattr(native_verdicts, "run_pytest", lambda *a, **k: broken)
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
                           roles_only=True, out="reports/n")
    assert native_verdicts.command_line(args) == ("python -m harness.native_verdicts --tree '/a b' --tree /c "
                                                  "--manifest /m.yaml --models qwen3_5_moe --layerwise s2 --roles-only "
                                                  "--out reports/n")
    default = SimpleNamespace(tree=["/c"], manifest=None, models=",".join(native_verdicts.MODELS),
                              layerwise=",".join(native_verdicts.LAYERWISE), roles_only=False, out=None)
    assert native_verdicts.command_line(default) == "python -m harness.native_verdicts --tree /c"


def test_the_record_names_the_engine_around_a_port(monkeypatch):
    """A port's base tree (``LWSPLIT_XLLM_BASE_SRC``) decides its verdicts, so the recorded command carries it."""
    args = SimpleNamespace(tree=["/p"], manifest=None, models=",".join(native_verdicts.MODELS),
                           layerwise=",".join(native_verdicts.LAYERWISE), roles_only=False, out="o")
    monkeypatch.setenv("LWSPLIT_XLLM_BASE_SRC", "/src/up stream")
    assert native_verdicts.command_line(args) == ("LWSPLIT_XLLM_BASE_SRC='/src/up stream' "
                                                  "python -m harness.native_verdicts --tree /p --out o")
    monkeypatch.delenv("LWSPLIT_XLLM_BASE_SRC")
    assert native_verdicts.command_line(args) == "python -m harness.native_verdicts --tree /p --out o"


# -- the command prints and writes --out; tools.record_native_verdicts records that folder ------------------

DEPARTURE = departures.Departure(role="worker", rule="every linear layer owned", tree="none", spec="all",
                                 function="f", file="a.cpp", cases=("c1",), tcs=("TC-01",))
ROW = ("fixture_tree", "m", "qwen3_5_moe", "s2", "TC-01", "fail", "rank 0 owns []")


@pytest.fixture
def measured(monkeypatch):
    """The command with its measurements replaced: one departure and one TC row per tree, no tree built."""
    monkeypatch.setattr(native_verdicts, "tree_departures", lambda tree, *_a, **_k: departures.TreeDepartures(
        tree=tree.name, manifest="m", departures=(DEPARTURE,), roles={"worker": "played"}))
    monkeypatch.setattr(native_verdicts, "run_tree", lambda *_a, **_k: [ROW])
    monkeypatch.setattr(native_verdicts, "own_tests_note", lambda tree, _m: f"{tree.name}: 12 of 12 pass")
    monkeypatch.delenv("LWSPLIT_XLLM_BASE_SRC", raising=False)


@pytest.mark.parametrize("roles_only", [False, True])
def test_a_run_written_by_out_becomes_the_docs_records(roles_only, measured, tmp_path, capsys):
    out = tmp_path / "out"
    assert native_verdicts.main(["--tree", str(FIXTURE_TREE), "--out", str(out)] + ["--roles-only"] * roles_only) == 0
    assert "wrote " + str(out / native_verdicts.RUN_FILE) in capsys.readouterr().out
    records = record_native_verdicts.native_records(out)
    run = f"python -m harness.native_verdicts --tree {FIXTURE_TREE}{' --roles-only' * roles_only} --out {out}"
    assert [r.command for r in records] == [f"{run} && python -m tools.record_native_verdicts {out}"] * len(records)
    by_name = {r.name: r for r in records}
    assert by_name["native_departures"].rows == (("fixture_tree", "worker", "every linear layer owned", "none", "all",
                                                  "f", "c1", "TC-01"),), by_name["native_departures"].rows
    if roles_only:
        assert list(by_name) == ["native_departures"], "a --roles-only run recorded a TC table it did not measure"
    else:
        assert by_name["native_verdicts"].rows == (ROW,), by_name["native_verdicts"].rows
        assert by_name["native_verdicts"].notes == ("- fixture_tree: 12 of 12 pass",)


def test_the_records_carry_the_commit_and_date_the_run_measured_at_not_the_recorders(measured, tmp_path, monkeypatch):
    """Recording the TC table writes docs/native.md before the departures are recorded: a stamp taken at record
    time would call the second record's commit dirty. The run's own stamp is what both records say."""
    monkeypatch.setattr(native_verdicts, "git_commit", lambda *_a: "0123456789abcdef")
    monkeypatch.setattr(native_verdicts, "git_tracked_changes", lambda *_a: False)
    out = tmp_path / "out"
    assert native_verdicts.main(["--tree", str(FIXTURE_TREE), "--out", str(out)]) == 0
    monkeypatch.setattr(record_native_verdicts.docs_blocks, "checkout_commit", lambda *_a: "fedcba987654 dirty")
    stamps = {(r.commit, r.date) for r in record_native_verdicts.native_records(out)}
    run_date = json.loads((out / native_verdicts.RUN_FILE).read_text())["measured"]["date"]
    assert stamps == {("0123456789ab", run_date)}, f"records stamped {stamps}, the run measured at 0123456789ab"


def test_a_folder_without_a_run_is_one_error_line_and_nothing_written(tmp_path, capsys):
    (tmp_path / native_verdicts.RUN_FILE).write_text('{"command": "x", "trees": []}', encoding="utf-8")
    with pytest.raises(SystemExit) as stop:
        record_native_verdicts.main([str(tmp_path)])
    err = capsys.readouterr().err.splitlines()
    assert stop.value.code == 2 and len(err) == 1 and err[0].startswith("error: results_dir=") and "KeyError" in err[0], err
    assert sorted(p.name for p in tmp_path.iterdir()) == [native_verdicts.RUN_FILE], "a refused folder was written to"


def test_a_page_without_a_blocks_markers_is_refused_before_either_record_is_written(tmp_path, capsys):
    """Both blocks go to one page: with one block's markers gone, neither record nor block is written."""
    page = "<!-- generated:native_departures -->\nold\n<!-- /generated:native_departures -->\n"
    (tmp_path / "native.md").write_text(page, encoding="utf-8")
    records = [docs_blocks.measured(name, command="c", columns=("a",), rows=[("1",)])
               for name in ("native_departures", "native_verdicts")]
    with pytest.raises(SystemExit) as stop:
        docs_blocks.publish_all(records, docs_dir=tmp_path)
    err = capsys.readouterr().err
    assert stop.value.code == 2 and "has no <!-- generated:native_verdicts -->" in err and "nothing was written" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["native.md"], "a record was written before the check"
    assert (tmp_path / "native.md").read_text(encoding="utf-8") == page, "the page was written before the check"


def test_a_reason_cut_at_its_length_says_so_before_what_follows_it():
    long = "x" * (native_verdicts.REASON_CHARS + 5)
    assert native_verdicts.first_reason(f"AssertionError: {long}\nmore") == long[:native_verdicts.REASON_CHARS] + "…"
    assert native_verdicts.first_reason("short\nmore") == "short"
