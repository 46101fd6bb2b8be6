"""Fixtures the native adapter's tests share."""

import os

import pytest


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    """One native cache for every xdist worker of the session: its file lock has them build each tree once."""
    base = tmp_path_factory.getbasetemp()
    path = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "lwsplit-native-cache"
    path.mkdir(mode=0o700, exist_ok=True)
    return path
