"""Kill-matrix bookkeeping without processes: what counts as a catch, and how rows render and round-trip."""

from __future__ import annotations

import json
from dataclasses import replace

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


def test_the_known_first_catch_is_tried_first_and_the_rest_keep_their_order():
    cases = killmatrix.cases_for("TC-02", "scale_bytes_missing")
    key = "deepseek_v32-s2-w4-int8"
    ordered = killmatrix.tried_first(cases, key)
    assert killmatrix.case_key(ordered[0]) == key and ordered[0].implementation == "mutant_scale_bytes_missing"
    assert ordered[1:] == [c for c in cases if c is not ordered[0]]
    assert killmatrix.tried_first(cases, None) == cases
    assert killmatrix.tried_first(cases, "no-such-case") == cases


def test_every_first_catch_names_one_case_of_a_predicted_tc():
    from harness.mutation.first_catch import FIRST_CATCH
    from implementations.mutants import MUTANTS

    matrix = killmatrix.load()
    for name, cells in FIRST_CATCH.items():
        assert name in MUTANTS, name
        for tc, key in cells.items():
            assert tc in MUTANTS[name].expected_catchers, (name, tc)
            keys = [killmatrix.case_key(c) for c in killmatrix.cases_for(tc, name, matrix)]
            assert keys.count(key) == 1, (name, tc, key)


def test_first_catch_table_from_rows():
    from harness.mutation.first_catch import from_rows

    r = _row({"TC-01": ["pass", "problems", "failed"], "TC-02": ["pass"], "TC-03": ["failed"]},
             expected=("TC-01", "TC-02"))
    r = Row(implementation=r.implementation, component=r.component, rule=r.rule,
            expected_catchers=r.expected_catchers,
            cells={tc: Cell(tc=tc, total_cases=c.total_cases, stopped_early=c.stopped_early,
                            outcomes=tuple(CaseOutcome(case_id=f"m-s2-w4-{r.implementation}-{o.case_id}",
                                                       verdict=o.verdict) for o in c.outcomes))
                   for tc, c in r.cells.items()})
    assert from_rows([r]) == {"x": {"TC-01": "m-s2-w4-c1"}}  # the first catch; TC-02 missed, TC-03 not predicted


@pytest.mark.parametrize(("catching", "ran"), [
    ({"qwen3_5_moe-s4-w4"}, ["qwen3_5_moe-s4-w4"]),                    # the known case catches: only it runs
    ({"qwen3_5_moe-s2-w4"}, ["qwen3_5_moe-s4-w4", "qwen3_5_moe-off-w4", "qwen3_5_moe-s2-w4"]),  # stale: in order
    (set(), ["qwen3_5_moe-s4-w4", "qwen3_5_moe-off-w4", "qwen3_5_moe-s2-w4"]),  # nothing catches: every case
])
def test_evaluate_tries_the_known_case_first_and_falls_back_to_case_order(monkeypatch, catching, ran):
    cases = [replace(CASE, layerwise=lw, implementation="mutant_x") for lw in ("off", "s2", "s4")]
    monkeypatch.setattr(killmatrix, "cases_for", lambda tc, impl, matrix=None: cases)
    monkeypatch.setattr(killmatrix, "suite_module", lambda tc: _Suite([]))
    order = []

    def run_one(suite, case, pool_getter):
        order.append(killmatrix.case_key(case))
        verdict = killmatrix.PROBLEMS if order[-1] in catching else killmatrix.PASS
        return CaseOutcome(case_id=case.id, verdict=verdict)

    monkeypatch.setattr(killmatrix, "run_one", run_one)
    cell = killmatrix.evaluate("mutant_x", "TC-02", first="qwen3_5_moe-s4-w4")
    assert order == ran and cell.caught == bool(catching) and cell.total_cases == 3
    assert cell.stopped_early == (len(ran) < 3)
    order.clear()
    killmatrix.evaluate("mutant_x", "TC-02", first="qwen3_5_moe-s4-w4", stop_at_first=False)
    assert order == ["qwen3_5_moe-off-w4", "qwen3_5_moe-s2-w4", "qwen3_5_moe-s4-w4"]  # every case, in order


def test_a_finished_run_becomes_the_docs_record_and_only_a_whole_one(tmp_path):
    """``python -m harness.mutation`` prints and writes its folder; ``tools.record_kill_matrix`` records it."""
    from contract.errors import ConfigError
    from implementations.mutants import MUTANTS
    from tools import record_kill_matrix

    names = [killmatrix.REFERENCE, *(cls.name for cls in MUTANTS.values())]
    rows = [_row({"TC-01": ["pass"] * 3}, expected=(), name=killmatrix.REFERENCE)]
    rows += [_row({"TC-01": ["pass", "problems"]}, name=name) for name in names[1:]]
    render.write_json(tmp_path / "kill_matrix.json", render.to_json(rows, matrix="ci", stop_at_first=True, wall_s=61.4))
    record = record_kill_matrix.kill_matrix_record(tmp_path)
    columns, cells, _ = render.docs_table(rows)
    assert (record.columns, record.rows) == (columns, tuple(tuple(c) for c in cells)), "not the run's own table"
    assert record.command == f"python -m harness.mutation --first --out {tmp_path} && " \
                             f"python -m tools.record_kill_matrix {tmp_path}", record.command
    assert record.notes == ("Wall time: 61 s (each cell stops at its first catching case).",), record.notes
    render.write_json(tmp_path / "kill_matrix.json", render.to_json(rows[:-1], matrix="ci", stop_at_first=True,
                                                                    wall_s=1.0))
    with pytest.raises(ConfigError, match=f"left out {names[-1]}"):
        record_kill_matrix.kill_matrix_record(tmp_path)  # a --mutant run: not what the docs show
    (tmp_path / "kill_matrix.json").write_text('{"rows": [{"implementation": "reference"}]}', encoding="utf-8")
    with pytest.raises(ConfigError, match="KeyError"):
        record_kill_matrix.kill_matrix_record(tmp_path)
