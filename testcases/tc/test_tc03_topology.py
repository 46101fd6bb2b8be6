"""TC-03 ILU PCIe topology mapping on a live process group (see harness/suites/tc03.py)."""

import pytest

from harness.suites import tc03 as SUITE
from harness.suites.execute import run_case


def test_tc03(lw_case, lw_run):
    problems = run_case(SUITE, lw_case, lw_run, skip=pytest.skip)
    assert not problems, "\n".join(problems)
