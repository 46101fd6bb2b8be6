"""TC-02 Memory estimation accuracy on a live process group (see harness/suites/tc02.py)."""

import pytest

from harness.suites import load_suite
from harness.suites.execute import run_case
from harness.suites.expectations import judge

SUITE = load_suite("TC-02")


def test_tc02(lw_case, lw_run):
    problems = run_case(SUITE, lw_case, lw_run, skip=pytest.skip)
    failures = judge(SUITE.TC, lw_case.implementation, lw_case.resolved.run, problems)
    assert not failures, "\n".join(failures)
