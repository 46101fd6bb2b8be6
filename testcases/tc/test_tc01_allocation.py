"""TC-01 Allocation correctness on a live process group (see harness/suites/tc01.py)."""

import pytest

from harness.suites import load_suite
from harness.suites.execute import run_case
from harness.suites.expectations import assert_verdict

SUITE = load_suite("TC-01")


def test_tc01(lw_case, lw_run):
    problems = run_case(SUITE, lw_case, lw_run, skip=pytest.skip)
    assert_verdict(SUITE.TC, lw_case, problems)
