"""TC-04's tampered layout goes unjudged only on the native adapter's word: its plan names the tree's functions
that hand its workers their split (``TREE_MESSAGE_NOTE``). The same note in any other implementation's plan is
that implementation's own claim about itself, a fact to check: its tampered layout is judged."""

from __future__ import annotations

from dataclasses import replace

from contract.plan_types import TREE_MESSAGE_NOTE
from harness.suites import tc04
from harness.suites.case import Case
from harness.suites.execute import pool_runner
from implementations.mutants import DigestUnchecked

CLAIM = f"{TREE_MESSAGE_NOTE}: claimed by a Python implementation"


class ClaimsTreeNote(DigestUnchecked):
    """Planted: workers accept a layout whatever its digest, and the plan claims a compiled tree's note."""

    def plan(self, run):
        plan = super().plan(run)
        return replace(plan, notes=(*plan.notes, CLAIM))


def test_a_note_claimed_by_another_implementation_is_not_taken_and_its_tampered_layout_is_judged():
    """Was: TC-04 read the note off any plan, so this implementation passed with the check shown as not judged."""
    case = Case(tc="TC-04", model="deepseek_v32", layerwise="s2", parallel="tp4", implementation="reference",
                extra=(f"implementation._target_={__name__}.ClaimsTreeNote",))
    facts = pool_runner(case)(tc04.body)
    assert CLAIM in tc04.plan_of(facts).notes  # the claim reached the parent: it is not what decides
    assert tc04.not_judged(facts) == ()
    problems = tc04.check(facts, case.resolved.run)
    assert "target plan rank 1 (rank 1) accepted a tampered layout" in problems, problems


def test_only_the_native_adapters_plan_is_taken_at_its_word():
    from implementations.reference import ReferenceImplementation
    from implementations.xllm_native import XllmNativeImplementation

    run = Case(tc="TC-04", model="deepseek_v32", layerwise="s2", parallel="tp4", implementation="reference").resolved.run
    plan = ClaimsTreeNote().plan(run)
    assert tc04.tamper_not_judged(plan, ClaimsTreeNote()) is None
    assert tc04.tamper_not_judged(plan, ReferenceImplementation()) is None
    adapter = object.__new__(XllmNativeImplementation)  # (its type is what counts: no tree is built)
    assert tc04.tamper_not_judged(plan, adapter) == CLAIM
    assert tc04.tamper_not_judged(replace(plan, notes=()), adapter) is None
