"""TC-06 Fallback when disabled, on a live process group (see harness/suites/tc06.py)."""

import pytest

from harness.suites import tc06 as SUITE


def test_tc06(lw_case, lw_run):
    reason = SUITE.missing_baseline(lw_case.resolved.run)
    if reason:
        pytest.skip(reason)
    facts = lw_run(SUITE.body)
    problems = SUITE.check(facts, lw_case.resolved.run)
    assert not problems, "\n".join(problems)
