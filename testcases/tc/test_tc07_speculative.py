"""TC-07 Speculative engine (target + draft) on a live process group (see harness/suites/tc07.py)."""

import pytest

from harness.suites import tc07 as SUITE
from harness.suites.execute import run_case


def test_tc07(lw_case, lw_run):
    problems = run_case(SUITE, lw_case, lw_run, skip=pytest.skip)
    assert not problems, "\n".join(problems)
