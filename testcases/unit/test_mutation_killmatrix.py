"""Kill-matrix bookkeeping without processes: what counts as a catch, and how rows render and round-trip."""

from __future__ import annotations

import json

import pytest

from harness.mutation import killmatrix, render
from harness.mutation.killmatrix import CaseOutcome, Cell, Row
from harness.rankpool import RankFailure, RankSkip
from harness.suites.case import Case

pytestmark = pytest.mark.unit

CASE = Case(tc="TC-02", model="qwen3_5_moe", layerwise="s2", parallel="tp4", implementation="reference")


class _Suite:
    """A stand-in TC module whose body outcome the test chooses."""

    TC, LEVEL, TITLE = "TC-02", "L1", "stand-in"

    def __init__(self, outcome):
        self.outcome = outcome

    @staticmethod
    def missing_baseline(run):
        return None

    @staticmethod
    def separate_draft(case):
        return False

    @staticmethod
    def world_size(case):
        return case.world_size

    @staticmethod
    def body(ctx, run, impl_cfg):  # never called: the fake pool answers instead
        raise AssertionError

    def check(self, facts, run):
        return list(facts)


def _pool_getter(outcome, calls):
    class Pool:
        def run(self, body, run, impl_cfg, *args):
            calls.append(args)
            if isinstance(outcome, BaseException):
                raise outcome
            return outcome

    def get(world_size, backend, *, timeout_s):
        calls.append(world_size)
        return Pool()

    return get


@pytest.mark.parametrize(("outcome", "verdict", "catches"), [
    ([], killmatrix.PASS, False),
    (["n_blocks 3 != spec 2"], killmatrix.PROBLEMS, True),
    (RankFailure("rank 1 raised ValueError"), killmatrix.FAILED, True),
    (ValueError("bad shape"), killmatrix.FAILED, True),
    (RankSkip("no baseline"), killmatrix.SKIPPED, False),
])
def test_a_case_catches_exactly_when_the_pytest_test_would_fail(outcome, verdict, catches):
    calls = []
    result = killmatrix.run_one(_Suite(outcome), CASE, _pool_getter(outcome, calls))
    assert (result.verdict, result.catches) == (verdict, catches)
    assert calls[0] == 4  # the case's world size (tp4)
    if verdict in (killmatrix.PROBLEMS, killmatrix.FAILED):
        assert result.detail


def test_missing_baseline_skips_without_running():
    suite = _Suite([])
    suite.missing_baseline = lambda run: "nothing recorded"
    calls = []
    result = killmatrix.run_one(suite, CASE, _pool_getter([], calls))
    assert (result.verdict, result.detail, calls) == (killmatrix.SKIPPED, "nothing recorded", [])


def test_world_size_and_extra_argument_hooks_are_used():
    suite = _Suite([])
    suite.world_size = lambda case: 8
    suite.separate_draft = lambda case: True
    calls = []
    killmatrix.run_one(suite, CASE, _pool_getter([], calls))
    assert calls == [8, (True,)]


def _row(kills_by_tc: dict, expected=("TC-01",), name="mutant_x") -> Row:
    cells = {}
    for tc, verdicts in kills_by_tc.items():
        outcomes = tuple(CaseOutcome(case_id=f"c{i}", verdict=v, detail="why" if v != "pass" else "")
                         for i, v in enumerate(verdicts))
        cells[tc] = Cell(tc=tc, total_cases=3, outcomes=outcomes, stopped_early=len(outcomes) < 3)
    return Row(implementation=name, cells=cells, component="layout", rule="rule (FEATURE 4)",
               expected_catchers=expected)


def test_row_caught_by_and_cell_text():
    r = _row({"TC-01": ["pass", "problems"], "TC-02": ["pass", "pass", "skipped"]}, expected=("TC-01", "TC-02"))
    assert r.caught_by == ("TC-01",)
    assert render.cell_text(r, "TC-01") == "**1/2+***"
    assert render.cell_text(r, "TC-02") == "0/3*"
    assert render.cell_text(r, "TC-05") == "·"


def test_markdown_names_survivors_and_missed_predictions():
    survivor = _row({"TC-01": ["pass"] * 3}, name="mutant_survivor")
    missed = _row({"TC-01": ["pass"] * 3, "TC-02": ["failed"]}, name="mutant_missed")
    text = render.markdown([survivor, missed])
    assert "| survivor | layout | 0/3* | · | SURVIVES |" in text
    assert "caught (missed by expected TC-01)" in text
    assert "**survivor** (rule (FEATURE 4)): not caught by any TC" in text


def test_json_round_trip(tmp_path):
    r = _row({"TC-01": ["pass", "problems"], "TC-03": ["failed"]})
    data = render.to_json([r], matrix="mutation")
    path = tmp_path / "out" / "row.json"
    render.write_json(path, data)
    loaded = json.loads(path.read_text())
    assert loaded["matrix"] == "mutation" and loaded["rows"][0]["caught_by"] == ["TC-01", "TC-03"]
    assert render.row_from_json(loaded["rows"][0]) == r
    assert [p.name for p in path.parent.iterdir()] == ["row.json"]  # no temporary file left


def test_cases_replace_the_implementation_axis():
    cases = killmatrix.cases_for("TC-06", "owner_off_by_one")
    assert cases and {c.implementation for c in cases} == {"mutant_owner_off_by_one"}
    with pytest.raises(ValueError, match="unknown implementation"):
        killmatrix.cases_for("TC-06", "no_such_mutant")
