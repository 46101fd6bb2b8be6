"""TC-02 Memory estimation accuracy on a live process group (see harness/suites/tc02.py)."""

from harness.suites import tc02 as SUITE


def test_tc02(lw_case, lw_run):
    facts = lw_run(SUITE.body)
    problems = SUITE.check(facts, lw_case.resolved.run)
    assert not problems, "\n".join(problems)
