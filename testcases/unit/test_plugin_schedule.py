"""How the plugin orders and hands out tests under xdist: slow tests first, a few at a time."""

from __future__ import annotations

import pytest

from harness.pytest_plugin import SCHEDULE_CHUNK

pytestmark = pytest.mark.unit

_TESTS = """
import pytest

def test_a_fast():
    pass

@pytest.mark.slow
def test_b_slow():
    pass

def test_c_fast():
    pass

@pytest.mark.slow
def test_d_slow():
    pass
"""


def test_slow_tests_are_collected_first_in_their_own_order(pytester):
    pytester.makepyfile(test_order=_TESTS)
    result = pytester.runpytest_inprocess("--collect-only", "-q", "-p", "no:cacheprovider")
    ids = [line.split("::")[-1] for line in result.outlines if "::" in line]
    assert ids == ["test_b_slow", "test_d_slow", "test_a_fast", "test_c_fast"], result.outlines


_CHUNK = """
def test_chunk(request):
    assert request.config.option.maxschedchunk == {want}
"""


@pytest.mark.parametrize("argv, want", [((), SCHEDULE_CHUNK), (("--maxschedchunk", "7"), 7)],
                         ids=["default", "given"])
def test_workers_take_a_few_tests_at_a_time_unless_told(pytester, argv, want):
    pytester.makepyfile(test_chunk=_CHUNK.format(want=want))
    result = pytester.runpytest_inprocess("-p", "xdist", "-n", "0", "-q", "-p", "no:cacheprovider", *argv)
    result.assert_outcomes(passed=1)
