"""TC-03 ILU PCIe topology mapping on a live process group (see harness/suites/tc03.py)."""

from harness.suites import tc03 as SUITE


def test_tc03(lw_case, lw_run):
    facts = lw_run(SUITE.body)
    problems = SUITE.check(facts, lw_case.resolved.run)
    assert not problems, "\n".join(problems)
