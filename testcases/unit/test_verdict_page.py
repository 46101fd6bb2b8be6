"""results.md's verdicts per job and TC (the first broken rule and its figures) and a C++ tree's own
tests beside them, from hand-written job results; the own tests' record and its Allure result."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from harness.app import aggregate, own_tests
from harness.suites.case_result import first_reason
from implementations.xllm_native.tree.facts import TreeFacts

pytestmark = pytest.mark.unit

OWNS = "rank 0 (split rank 0) owns full layers [], spec says [3, 11, 19, 27, 35]"


def suite_job(num=0, own=None):
    result = {
        "job": {"num": num, "overrides": ["model=qwen3_5_moe", "layerwise=s2"]},
        "mode": "suite", "status": "failed", "message": "", "duration_s": 9.0,
        "config": {"model": "qwen3_5_moe", "implementation": "xllm_native", "parallel": "tp4", "layerwise": "s2",
                   "split_size": 2, "world_size": 4, "hardware": "cpu", "hbm_mib_per_card": 512,
                   "reserved_mib_per_card": 384, "block_size": 128, "kv_cache_dtype": "auto"},
        "counts": {"passed": 3, "failed": 2, "skipped": 1},
        "tcs": {
            "TC-01": {"counts": {"passed": 1, "failed": 2}, "cases": [
                {"tc": "TC-01", "case": "qwen3_5_moe-s2-w4-xllm_native", "outcome": "passed"},
                {"tc": "TC-01", "case": "qwen3_5_moe-s2-w8dp2-xllm_native", "outcome": "failed",
                 "reason": OWNS, "message": "Traceback ... long"},
                {"tc": "TC-01", "case": "qwen3_5_moe-s4-w4-xllm_native", "outcome": "failed",
                 "message": "E   AssertionError: other"}]},
            "TC-03": {"counts": {"passed": 2}, "cases": []},
            "TC-07": {"counts": {"skipped": 1}, "cases": []},
        },
        "plan": None, "plan_error": "",
    }
    if own is not None:
        result["own_tests"] = own
    return result


OWN = {"file": "tests/core/test_x.cpp", "total": 12, "passed": 12, "failed": [],
       "summary": "its own tests (tests/core/test_x.cpp): 12 of 12 pass"}


def test_each_tc_of_a_job_is_a_row_with_the_first_broken_rule_and_its_figures():
    results = [suite_job(own=OWN)]
    text = aggregate.to_markdown(aggregate.rows(results), results)
    section = text[text.index("## Verdicts per job and TC"):].splitlines()
    rows = [line for line in section if line.startswith("| 1 ")]
    assert rows[0] == ("| 1 | qwen3_5_moe | xllm_native | 2 | its own tests | pass | "
                       "its own tests (tests/core/test_x.cpp): 12 of 12 pass |")
    assert rows[1] == (f"| 1 | qwen3_5_moe | xllm_native | 2 | TC-01 | **✗ fail** | "
                       f"qwen3_5_moe-s2-w8dp2-xllm_native: {OWNS} (2 of 3 cases broken) |")
    assert rows[2] == "| 1 | qwen3_5_moe | xllm_native | 2 | TC-03 | pass | 2 passed |"
    assert rows[3] == "| 1 | qwen3_5_moe | xllm_native | 2 | TC-07 | 1 skipped |  |"


def test_a_case_line_without_a_reason_falls_back_to_its_message_and_plan_jobs_add_no_section():
    assert aggregate.tc_verdict({"counts": {"failed": 1}, "cases": [
        {"case": "c", "outcome": "failed", "message": "\nrank 1 holds 0 B\nmore"}]}) == (
        "fail", "c: rank 1 holds 0 B (1 of 1 case broken)")
    assert aggregate.tc_verdict({"counts": {"error": 1}, "cases": []}) == ("fail", "1 of 1 case broken")
    plan_only = [{"job": {"num": 0, "overrides": []}, "mode": "plan", "status": "planned", "config": {}}]
    assert "Verdicts per job" not in aggregate.to_markdown(aggregate.rows(plan_only), plan_only)


def test_a_tc_whose_cases_failed_only_as_predicted_says_what_was_predicted():
    stop = "upstream's worker built for ilu stops on an int8 KV cache (MLU only)"
    cases = [{"case": "a", "outcome": "xfailed", "predicted": stop}, {"case": "b", "outcome": "xfailed", "predicted": stop}]
    assert aggregate.tc_verdict({"counts": {"xfailed": 2}, "cases": cases}) == ("2 xfailed", f"as predicted: {stop}")
    cases.append({"case": "c", "outcome": "xfailed", "predicted": "upstream refuses qwen3_5_moe"})
    assert aggregate.tc_verdict({"counts": {"xfailed": 3}, "cases": cases}) == (
        "3 xfailed", f"as predicted: {stop} (+1 other prediction)")
    assert aggregate.tc_verdict({"counts": {"skipped": 1}, "cases": []}) == ("1 skipped", "")


def test_a_check_not_judged_shows_beside_the_verdict_once_and_never_makes_it_a_failure():
    why = "tampered-layout check not judged: its workers take their split from f (w.cpp)"
    cases = [{"case": c, "outcome": "passed", "not_judged": [why]} for c in ("a", "b")]
    assert aggregate.tc_verdict({"counts": {"passed": 2}, "cases": cases}) == ("pass", f"2 passed; {why}")
    cases.append({"case": "c", "outcome": "failed", "reason": OWNS, "not_judged": [why]})
    assert aggregate.tc_verdict({"counts": {"passed": 2, "failed": 1}, "cases": cases}) == (
        "fail", f"c: {OWNS} (1 of 3 cases broken); {why}")
    assert aggregate.tc_verdict({"counts": {"passed": 1}, "cases": [{"case": "a", "outcome": "passed"}]}) == (
        "pass", "1 passed")


def test_first_reason_is_the_assertions_own_first_line():
    crash = SimpleNamespace(message=f"AssertionError: {OWNS}\nassert False")
    assert first_reason(SimpleNamespace(longrepr=SimpleNamespace(reprcrash=crash))) == OWNS
    assert first_reason(SimpleNamespace(longrepr="could not append\nx")) == "could not append"


def _impl(tmp_path, tests="tests/t.cpp"):
    facts = TreeFacts(root=tmp_path, manifest_name="m", manifest_path=tmp_path / "m.yaml", why="given", port=True,
                      upstream_manifest=False, planning_files=(), allocation_files=(), allocation_backends=None,
                      own_tests=tests)
    return SimpleNamespace(facts=lambda: facts)  # what the C++ adapter tells the harness of its tree


def test_own_tests_run_once_per_tree_and_a_tree_that_cannot_build_them_is_recorded(tmp_path, monkeypatch):
    from contract.errors import UserError

    calls = []

    def fake_run(root, manifest):
        calls.append((root, manifest))
        raise UserError("implementation.manifest", "tests/t.cpp", "a test file that builds", "gtest/gtest.h: missing")

    monkeypatch.setattr(own_tests, "run", fake_run)
    monkeypatch.setattr(own_tests, "RUN", {})
    impl = _impl(tmp_path)
    first = own_tests.own_tests_of(impl)
    assert own_tests.own_tests_of(impl) is first and len(calls) == 1
    assert first["summary"].startswith("its own tests (tests/t.cpp) could not be run: ")
    assert "gtest/gtest.h: missing" in first["summary"] and own_tests.verdict(first) == "not run"
    assert own_tests.own_tests_of(_impl(tmp_path, tests=None)) is None  # no test file named
    assert own_tests.own_tests_of(SimpleNamespace()) is None  # not a C++ tree


def test_own_tests_become_one_allure_result_of_their_own(tmp_path):
    assert own_tests.write_allure(OWN, tmp_path / "missing", tree="p6") is None
    failed = {**OWN, "passed": 11, "failed": ["Suite.Case"], "summary": "11 of 12 pass; failed: Suite.Case"}
    assert own_tests.verdict(failed) == "fail"
    path = own_tests.write_allure(failed, tmp_path, tree="p6")
    data = json.loads(path.read_text())
    assert path.name.endswith("-result.json") and data["status"] == "failed"
    assert data["statusDetails"]["message"] == failed["summary"] and data["name"] == "its own tests (tests/core/test_x.cpp)"


def test_a_suite_job_on_a_tree_with_own_tests_records_them_beside_its_tcs(tmp_path, monkeypatch):
    """``run_job`` (mode=suite) on a C++ tree whose manifest names its tests: the job's result holds them and
    its Allure results gain their result; the TCs' run is stubbed (what it returns is the job's as before)."""
    from contract.errors import PlanError
    from harness.app import job, tree_departures

    overrides = ["model=qwen3_5_moe", "layerwise=s2"]
    impl = _impl(tmp_path)

    def plan(run):
        raise PlanError("plan", "the stub tree", "a tree with planning code", "it plans nothing")

    impl.plan = plan  # the job's plan figures are the refusal, as data
    monkeypatch.setattr(job, "build_implementation", lambda cfg: impl)

    def fake_suite(cfg, axes, extra, job_dir, quiet):
        (job_dir / "allure-results").mkdir(parents=True)
        return {"status": "failed", "message": "", "exit_code": 1, "counts": {"failed": 1}, "tcs": {}}

    monkeypatch.setattr(job, "run_suite", fake_suite)
    monkeypatch.setattr(tree_departures, "departures_of", lambda impl, run: None)  # no tree to judge its roles of
    monkeypatch.setattr(own_tests, "RUN", {})
    ran = []
    monkeypatch.setattr(own_tests, "run_own_tests", lambda root, manifest, file: ran.append(root) or OWN)
    choices = {"model": "qwen3_5_moe", "layerwise": "s2", "parallel": "tp4", "implementation": "reference",
               "hardware": "cpu"}
    result = job.run_job(overrides, choices, tmp_path / "job")
    assert result["mode"] == "suite" and result["own_tests"] == OWN and ran == [str(tmp_path)], result
    assert result["plan"] is None and "it plans nothing" in result["plan_error"], result
    written = json.loads((tmp_path / "job" / "result.json").read_text())
    assert written["own_tests"]["summary"] == OWN["summary"]
    [allure] = (tmp_path / "job" / "allure-results").glob("*-result.json")
    assert json.loads(allure.read_text())["status"] == "passed"
