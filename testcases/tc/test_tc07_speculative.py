"""TC-07 Speculative engine (target + draft) on a live process group (see harness/suites/tc07.py)."""

from harness.suites import tc07 as SUITE


def test_tc07(lw_case, lw_run):
    facts = lw_run(SUITE.body)
    problems = SUITE.check(facts, lw_case.resolved.run)
    assert not problems, "\n".join(problems)
