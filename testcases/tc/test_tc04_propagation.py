"""TC-04 Engine layout propagation on a live process group (see harness/suites/tc04.py)."""

from harness.suites import tc04 as SUITE


def test_tc04(lw_case, lw_run):
    facts = lw_run(SUITE.body, SUITE.separate_draft(lw_case), world_size=SUITE.world_size(lw_case))
    problems = SUITE.check(facts, lw_case.resolved.run)
    assert not problems, "\n".join(problems)
