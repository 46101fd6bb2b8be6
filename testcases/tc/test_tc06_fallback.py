"""TC-06 Fallback when disabled, on a live process group (see harness/suites/tc06.py)."""

import pytest

from harness.suites import tc06 as SUITE
from harness.suites.execute import run_case


def test_tc06(lw_case, lw_run):
    problems = run_case(SUITE, lw_case, lw_run, skip=pytest.skip)
    assert not problems, "\n".join(problems)
