"""TC-04 Engine layout propagation on a live process group (see harness/suites/tc04.py)."""

import pytest

from harness.suites import tc04 as SUITE
from harness.suites.execute import run_case


def test_tc04(lw_case, lw_run):
    problems = run_case(SUITE, lw_case, lw_run, skip=pytest.skip)
    assert not problems, "\n".join(problems)
