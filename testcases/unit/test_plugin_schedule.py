"""How the plugin orders and hands out tests under xdist: slow tests first, a few at a time."""

from __future__ import annotations

import pytest

from harness.pytest_plugin.schedule import SCHEDULE_CHUNK

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


_GC_STATE = """
import gc

def test_gc_state():
    assert gc.get_freeze_count() > 0, "collection left nothing frozen"
    assert gc.isenabled() is {enabled}
"""


@pytest.mark.parametrize("enabled", [True, False], ids=["collector-on", "collector-off-stays-off"])
def test_collection_freezes_what_it_built_and_restores_the_collector(pytester, enabled):
    """What start-up and collection built is frozen (``gc.freeze``) once collection ends, and the
    collector is back as it was before (on, or off where the run had turned it off)."""
    import gc

    pytester.makepyfile(test_gc=_GC_STATE.format(enabled=enabled))
    gc.unfreeze()  # this process froze its own collection; the inner run must freeze again
    was = gc.isenabled()
    if not enabled:
        gc.disable()
    try:
        result = pytester.runpytest_inprocess("-q", "-p", "no:cacheprovider")
    finally:
        (gc.enable if was else gc.disable)()
        gc.freeze()
    result.assert_outcomes(passed=1)


def test_each_role_of_the_plugin_is_registered_once_and_the_entry_module_holds_no_hook(request):
    """The entry point's module registers its role modules (``pytest_plugins``); a hook or fixture it also
    held (a re-export) would run twice."""
    import harness.pytest_plugin as entry

    registered = sorted(getattr(p, "__name__", "") for p in request.config.pluginmanager.get_plugins()
                        if getattr(p, "__name__", "").startswith(entry.__name__))
    assert registered == sorted([entry.__name__, *entry.pytest_plugins])
    assert [n for n in vars(entry) if n.startswith(("pytest_", "lw_")) and n != "pytest_plugins"] == []
    callers = request.config.pluginmanager.hook
    for name in ("pytest_configure", "pytest_collection_modifyitems", "pytest_sessionfinish", "pytest_addoption"):
        ours = [impl.plugin_name for impl in getattr(callers, name).get_hookimpls()
                if impl.plugin_name.startswith(entry.__name__)]
        assert len(ours) == len(set(ours)), (name, ours)
