"""The order tests run in and the chunks xdist hands them out in: slow tests first, then by world size."""

from __future__ import annotations

import pytest

from harness.pytest_plugin.parametrize import case_of

SCHEDULE_CHUNK = 1
"""Tests an xdist worker is handed at a time (``--maxschedchunk``) unless the command line says.

xdist's ``load`` default hands each worker a quarter of its share up front, in collection
order: whichever worker drew the subprocess-heavy self-tests ran them one after another
while the other three went idle (measured: 213 s with one worker busy 80 s after the rest,
185 s handing out 2 at a time with slow tests first, on 2 cores). Two at a time still let a
queue grow: after each test shorter than 0.1 s the scheduler tops a worker up by the chunk,
one more than it took, so a worker running the quick cases of a slow-marked module (the
manifest checks of ``test_ports.py``) gathered about a hundred tests, the last slow ones among
them, and ran those alone at the end (measured: one worker 29 s after the other three, the
unit tests' sweeps and torchrun runs in its queue). One at a time, a worker holds the test it
runs and the next one, never more."""


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config) -> None:
    if getattr(config.option, "maxschedchunk", 0) is None:  # xdist is loaded and no --maxschedchunk was given
        config.option.maxschedchunk = SCHEDULE_CHUNK


@pytest.hookimpl(trylast=True)  # a stable sort of what is left once the others have deselected and marked
def pytest_collection_modifyitems(items) -> None:
    # Slow tests first, so that no xdist worker is left with one at the end while the others
    # idle (each worker takes SCHEDULE_CHUNK tests at a time, see pytest_configure); then
    # same world sizes together: each worker then rarely switches pools.
    items.sort(key=lambda item: (item.get_closest_marker("slow") is None, _pool_size(item)))


def _pool_size(item) -> int:
    """Rank processes the case needs: the suite's ``world_size(case)`` hook, else the plan's world size."""
    case = case_of(item)
    if case is None:
        return 0
    hook = getattr(item.module.SUITE, "world_size", None)
    return hook(case) if hook else case.world_size
