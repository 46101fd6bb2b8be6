"""TC-05 Worker KV shard application on a live process group (see harness/suites/tc05.py)."""

import pytest

from harness.suites import tc05 as SUITE
from harness.suites.execute import run_case


def test_tc05(lw_case, lw_run):
    problems = run_case(SUITE, lw_case, lw_run, skip=pytest.skip)
    assert not problems, "\n".join(problems)
