"""Collection with the garbage collector paused, then what start-up and collection built frozen."""

from __future__ import annotations

import gc

import pytest


@pytest.hookimpl(wrapper=True)
def pytest_collection(session):
    """Collect with the garbage collector paused, then freeze what start-up and collection built.

    Importing torch and Hydra and building the case matrix makes about 250,000 objects that live
    until the end; Python's full collections walk every tracked object and recur as the heap
    grows: ten of them during a worker's collection and one every few dozen tests afterwards
    (about 0.2 s each, 4 to 6 s a worker). One collection, then ``gc.freeze`` (Python's public
    API for this), keeps them out of every later walk; what the tests make is collected as usual.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return (yield)
    finally:
        gc.collect()
        gc.freeze()
        if was_enabled:
            gc.enable()
