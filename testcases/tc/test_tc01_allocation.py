"""TC-01 Allocation correctness on a live process group (see harness/suites/tc01.py)."""

from harness.suites import tc01 as SUITE


def test_tc01(lw_case, lw_run):
    facts = lw_run(SUITE.body)
    problems = SUITE.check(facts, lw_case.resolved.run)
    assert not problems, "\n".join(problems)
