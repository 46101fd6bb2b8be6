"""Field coverage (harness.coverage): every reported fact is compared with the spec by some TC case.

For each field of ``KVPlan``, ``RankPlan``, ``DraftPlan``, ``WorkerKVCache`` and each tensor property a
worker exposes, ``harness/coverage/field_catches.json`` records the first default-matrix case that catches
its field mutant, and for per-rank facts the first case at dp > 1 as well (key ``<field>@dp>1``)
(``python -m harness.coverage fields --record`` measures it). A field with no recorded case fails here;
one field of each kind runs on its recorded case, which must still catch it. Every field on its recorded
case is ``python -m harness.coverage fields --check`` (its own CI step: about two minutes on 2 cores).
"""

from __future__ import annotations

import pytest

from harness.coverage import fields
from harness.mutation import killmatrix
from implementations.mutants.fields import FieldMutant

pytestmark = pytest.mark.meta

RECORDED = fields.recorded()


def test_every_field_has_a_catching_case():
    missing = [f for f in fields.record_keys() if not RECORDED.get(f)]
    assert not missing, (f"fields no TC case catches (no check compares them with the spec): {missing}; "
                         f"measure with: python -m harness.coverage fields --record")
    assert set(RECORDED) == set(fields.record_keys()), f"stale: {sorted(set(RECORDED) - set(fields.record_keys()))}"


def test_field_mutant_changes_only_its_field():
    from testcases.unit._models import QWEN3_5_MOE, QWEN3_5_MTP, run_spec

    run = run_spec(QWEN3_5_MOE, split=2, draft=QWEN3_5_MTP)
    ref = FieldMutant("WorkerKVCache[target].rank").plan(run)  # a worker field: the plan is the reference's
    bad = FieldMutant("KVPlan.n_blocks").plan(run)
    assert bad.n_blocks == ref.n_blocks + 1
    assert {k: v for k, v in vars(bad).items() if k not in ("n_blocks", "implementation", "digest")} == \
        {k: v for k, v in vars(ref).items() if k not in ("n_blocks", "implementation", "digest")}


@pytest.mark.parametrize("field", fields.sample_keys(RECORDED))
def test_field_is_caught_by_its_recorded_case(field):
    why = fields.check_recorded(field, RECORDED[field])
    assert not why, f"{field}: {why}"


def test_a_field_mutant_on_a_case_that_does_not_check_it_passes():
    """The control: a recorded catch is the field's, not the mutant machinery's. The plan's capacity gain is
    checked by TC-02; TC-01's allocation checks do not read it, so its corruption passes there."""
    case = next(c for c in fields.field_cases("TC-01", "KVPlan.capacity_gain", fields.load())
                if killmatrix.case_key(c) == "deepseek_v32-s2-w4")
    outcome = killmatrix.run_one(killmatrix.suite_module("TC-01"), case)
    assert outcome.verdict == killmatrix.PASS, outcome


# ---- rules ---------------------------------------------------------------------------------------


def test_every_rule_has_a_mutant_or_says_why_not():
    """Each rule of FEATURE 2-8 names its mutants, or is carried out by the harness, or is a named gap;
    each mutant breaks one named rule (``test_mutation`` shows it is caught)."""
    from harness.coverage import rules
    from implementations.mutants import MUTANTS

    placed = [r for r in rules.RULES if (r in rules.MUTANTS) + (r in rules.HARNESS) + (r in rules.GAPS) != 1]
    assert not placed, f"rules with no mutant, harness note or gap (or more than one): {placed}"
    assert set(rules.MUTANTS) | set(rules.HARNESS) | set(rules.GAPS) <= set(rules.RULES)
    named = [n for names in rules.MUTANTS.values() for n in names]
    assert sorted(named) == sorted(set(named)) and set(named) == set(MUTANTS), \
        f"mutants in no rule: {sorted(set(MUTANTS) - set(named))}; unknown: {sorted(set(named) - set(MUTANTS))}"
    assert all(r.split(".")[0] in {f"F{n}" for n in range(2, 9)} for r in rules.RULES)


def test_every_mutant_has_a_recorded_first_catch_on_the_default_matrix():
    """Where each rule changes a checked fact: the case of the ci matrix that catches its mutant first, per
    expected catcher (``python -m harness.mutation --first`` measures it; ``first_catch.from_rows``)."""
    from harness.mutation.first_catch import FIRST_CATCH
    from implementations.mutants import MUTANTS

    missing = {n: [tc for tc in cls.expected_catchers if tc not in FIRST_CATCH.get(n, {})]
               for n, cls in MUTANTS.items()}
    assert not {n: tcs for n, tcs in missing.items() if tcs}, missing


@pytest.mark.parametrize("argv, gone", [(["tables"], "invalid choice: 'tables'"), (["fields", "--out", "x.md"],
                                                                                     "unrecognized arguments: --out")])
def test_the_command_writes_no_docs_page(capsys, argv, gone):
    """The command prints and records ``field_catches.json``; ``python -m tools.docs_blocks`` writes the page."""
    from harness.coverage.__main__ import main

    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2, "a docs option of old is a usage error now"
    err = capsys.readouterr().err
    assert gone in err and err.count("\n") == 1, err
