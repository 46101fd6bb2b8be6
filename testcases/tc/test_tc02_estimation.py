"""TC-02 Memory estimation accuracy on a live process group (see harness/suites/tc02.py)."""

import pytest

from harness.suites import tc02 as SUITE
from harness.suites.execute import run_case


def test_tc02(lw_case, lw_run):
    problems = run_case(SUITE, lw_case, lw_run, skip=pytest.skip)
    assert not problems, "\n".join(problems)
