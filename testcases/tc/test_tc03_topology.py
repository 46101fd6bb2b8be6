"""TC-03 ILU PCIe topology mapping on a live process group (see harness/suites/tc03.py)."""

import pytest

from harness.suites import load_suite
from harness.suites.execute import run_case
from harness.suites.expectations import assert_verdict

SUITE = load_suite("TC-03")


def test_tc03(lw_case, lw_run):
    problems = run_case(SUITE, lw_case, lw_run, skip=pytest.skip)
    assert_verdict(SUITE.TC, lw_case, problems)
