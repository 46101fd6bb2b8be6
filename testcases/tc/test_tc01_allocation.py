"""TC-01 Allocation correctness on a live process group (see harness/suites/tc01.py)."""

import pytest

from harness.suites import tc01 as SUITE
from harness.suites.execute import run_case


def test_tc01(lw_case, lw_run):
    problems = run_case(SUITE, lw_case, lw_run, skip=pytest.skip)
    assert not problems, "\n".join(problems)
