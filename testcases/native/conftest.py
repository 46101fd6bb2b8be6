"""Fixtures the native adapter's tests share."""

import os
from pathlib import Path

import pytest

from implementations.xllm_native.build import cache as build_cache

FIXTURE_TREE = Path(__file__).resolve().parent / "fixture_tree"
"""The upstream-shaped fixture tree (an upstream-cut manifest of its own)."""


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    """One native cache for every xdist worker of the session: its file lock has them build each tree once."""
    base = tmp_path_factory.getbasetemp()
    path = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "lwsplit-native-cache"
    path.mkdir(mode=0o700, exist_ok=True)
    return path


@pytest.fixture(scope="module")
def implementation(cache):
    """``implementation(manifest=None, files=None, source_dir=FIXTURE_TREE)``: a compiled tree's implementation,
    built in ``cache`` (the upstream-shaped fixture tree unless ``source_dir`` names another)."""
    os.environ[build_cache.ENV_CACHE] = str(cache)
    from implementations.xllm_native import XllmNativeImplementation

    try:
        yield lambda manifest=None, files=None, source_dir=FIXTURE_TREE: XllmNativeImplementation(
            source_dir=str(source_dir), manifest=manifest and str(manifest), files=files)
    finally:
        os.environ.pop(build_cache.ENV_CACHE, None)
