"""TC-05 Worker KV shard application on a live process group (see harness/suites/tc05.py)."""

from harness.suites import tc05 as SUITE


def test_tc05(lw_case, lw_run):
    facts = lw_run(SUITE.body)
    problems = SUITE.check(facts, lw_case.resolved.run)
    assert not problems, "\n".join(problems)
