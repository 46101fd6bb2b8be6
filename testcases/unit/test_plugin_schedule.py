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


class _Worker:
    """What xdist's scheduler asks of a worker: its id, the tests it is sent, whether it is shutting down."""

    def __init__(self, n: int):
        from types import SimpleNamespace

        self.gateway, self.shutting_down = SimpleNamespace(id=f"gw{n}"), False

    def send_runtest_some(self, indices):
        pass

    def shutdown(self):
        self.shutting_down = True


def test_a_worker_running_quick_tests_holds_its_test_and_the_next_never_more():
    """xdist's own ``load`` scheduler, configured by the plugin's defaults for ``-n 4``: a worker that finishes
    test after quick test (under 0.1 s) is topped up by the chunk each time. At 2 its queue grew by one per test,
    so the slow tests after them waited in one worker's queue while the others ran out of work."""
    from types import SimpleNamespace

    from xdist.scheduler import LoadScheduling

    from harness.pytest_plugin import schedule

    option = SimpleNamespace(maxschedchunk=None, tx=["4*popen"])
    config = SimpleNamespace(option=option, getoption=lambda name: getattr(option, name))
    config.getvalue = config.getoption
    schedule.pytest_configure(config)
    scheduler = LoadScheduling(config)
    workers = [_Worker(n) for n in range(4)]
    for worker in workers:
        scheduler.add_node(worker)
        scheduler.add_node_collection(worker, [f"test_{i}" for i in range(400)])
    scheduler.schedule()
    quick, held = workers[0], []
    for _ in range(100):
        scheduler.mark_test_complete(quick, scheduler.node2pending[quick][0], duration=0.01)
        held.append(len(scheduler.node2pending[quick]))
    assert max(held) <= 2, held


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
