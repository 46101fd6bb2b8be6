"""Every wrapper of ``harness.private_apis`` against the installed dependency: a dependency that changes
an internal the harness uses fails here, by name (CI runs this under both pinned torch versions)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from harness import private_apis

# -- pytest --------------------------------------------------------------------------------------


def test_libraries_are_not_marked_for_assert_rewriting(request):
    """The plugin unmarked its libraries in this very session: pytest still keeps the marked modules in a
    set, and none of ``NOT_REWRITTEN`` is in it (else the run is only slower)."""
    from harness.pytest_plugin.rewrite import NOT_REWRITTEN

    if request.config.getoption("assertmode") != "rewrite":
        pytest.skip("assert rewriting is off in this run (--assert=plain)")
    marked = getattr(request.config.pluginmanager.rewrite_hook, "_must_rewrite", None)
    assert isinstance(marked, set) and marked, "pytest no longer keeps the modules it marks in a set"
    assert not marked & set(NOT_REWRITTEN), sorted(marked & set(NOT_REWRITTEN))


def test_unmarking_takes_only_the_names_and_forgets_the_cached_answers():
    hook = SimpleNamespace(_must_rewrite={"hydra", "tests", "harness"}, _marked_for_rewrite_cache={"hydra.x": True})
    assert private_apis.unmark_for_assert_rewriting(SimpleNamespace(rewrite_hook=hook), ("hydra", "harness"))
    assert hook._must_rewrite == {"tests"} and hook._marked_for_rewrite_cache == {}


def test_unmarking_without_the_hook_changes_nothing():
    assert not private_apis.unmark_for_assert_rewriting(SimpleNamespace(), ("hydra",))
    assert not private_apis.unmark_for_assert_rewriting(SimpleNamespace(rewrite_hook=SimpleNamespace()), ("hydra",))


# -- torch c10d ----------------------------------------------------------------------------------


def test_group_count_and_sequence_number_follow_the_collectives(tmp_path):
    """One process, one gloo group: torch's count of groups made and the group's count of collectives run."""
    import torch
    import torch.distributed as dist

    assert not dist.is_initialized(), "a test left a default process group in this worker"
    dist.init_process_group("gloo", store=dist.FileStore(str(tmp_path / "store"), 1), rank=0, world_size=1)
    try:
        cpu = torch.device("cpu")
        made = private_apis.c10d_group_count()
        assert isinstance(made, int) and made >= 1
        before = private_apis.c10d_sequence_number(dist.group.WORLD, cpu)
        assert isinstance(before, int)
        dist.all_reduce(torch.ones(1))
        assert private_apis.c10d_sequence_number(dist.group.WORLD, cpu) == before + 1
        dist.new_group([0])
        assert private_apis.c10d_group_count() == made + 1
    finally:
        dist.destroy_process_group()


def test_an_unknown_group_or_a_torch_without_the_count_is_unknown(monkeypatch):
    from torch.distributed import distributed_c10d

    assert private_apis.c10d_sequence_number(object(), "cpu") is None
    monkeypatch.delattr(distributed_c10d, "_world")
    assert private_apis.c10d_group_count() is None


# -- the standard library's multiprocessing helpers ------------------------------


def test_the_multiprocessing_helpers_are_named_once_started():
    import os
    from multiprocessing import resource_tracker

    resource_tracker.ensure_running()
    pids = private_apis.multiprocessing_helper_pids()
    assert pids and all(isinstance(pid, int) and pid != os.getpid() for pid in pids)


# -- torch storages --------------------------------------------------------------------------------


def test_storage_weak_refs_follow_the_storage_not_its_python_object():
    """A storage held only through its Python object counts alive, and dead once that is dropped (on torch 2.1
    ``weakref.ref`` of that object dies at once)."""
    import gc

    import torch

    refs = private_apis.StorageWeakRefs()
    held = [torch.ones(8), torch.ones(4)]
    for storage in [t.untyped_storage() for t in held]:
        refs.add(storage)
    del storage  # the storages' Python objects are dropped here
    gc.collect()
    assert (len(refs), refs.alive()) == (2, 2)
    kept = held[0].untyped_storage()
    held.clear()
    gc.collect()
    assert refs.alive() == 1, "the first storage is still held through its Python object"
    del kept
    gc.collect()
    assert refs.alive() == 0
