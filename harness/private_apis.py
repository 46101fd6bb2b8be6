"""The dependencies' private internals the harness uses, each behind one function here and nowhere else.

Each wrapper says why no public API serves and what happens where the internal is missing, and
``testcases/unit/test_private_apis.py`` runs every one against the installed dependency (CI runs the
unit tests under both pinned torch versions), so a dependency that changes one fails there, by name,
rather than somewhere downstream. ``testcases/unit/test_architecture.py`` fails when a private
internal of a dependency is reached outside this module.

Light on purpose: nothing is imported until a wrapper is called (the rank processes, the pytest
plugin and ``python -m harness`` each use one of them).
"""

from __future__ import annotations

from multiprocessing import forkserver, resource_tracker
from typing import Any, Optional


def unmark_for_assert_rewriting(pluginmanager: Any, names: tuple[str, ...]) -> bool:
    """Take ``names`` (top-level packages) off the set of modules pytest rewrites the asserts of
    (``rewrite_hook._must_rewrite``, and its ``_marked_for_rewrite_cache``); True if it was done.

    pytest marks every module of an installed distribution that ships a pytest plugin, and has no
    public way to unmark one. Where the hook or the set is missing (``-p no:assertion``, another
    pytest) nothing changes and False is returned: those modules are rewritten, which is only slower."""
    hook = getattr(pluginmanager, "rewrite_hook", None)
    marked = getattr(hook, "_must_rewrite", None)
    if not isinstance(marked, set):
        return False
    marked.difference_update(names)
    getattr(hook, "_marked_for_rewrite_cache", {}).clear()
    return True


def c10d_group_count() -> Optional[int]:
    """Process groups this process has created so far (``distributed_c10d._world.group_count``), or None.

    torch counts group creations to name groups, and a rank that made one more or fewer than its
    peers has left a collective unjoined; no public API exposes the count. None where this torch
    does not have it: the rank pool then cannot tell that its ranks are in step after a failure,
    and rebuilds the pool (slower, never wrong)."""
    try:
        # ranks ask this; the controller imports this module and never imports torch (3.7 s, python -X importtime)
        from torch.distributed import distributed_c10d as c10d

        count = c10d._world.group_count
    except Exception:  # noqa: BLE001 - a private API: any change means "unknown"
        return None
    return count if isinstance(count, int) else None


def c10d_sequence_number(group: Any, device: Any) -> Optional[int]:
    """The number of collectives ``group`` has run on ``device``'s backend
    (``group._get_backend(device)._get_sequence_number_for_group()``), or None.

    Equal numbers on every rank mean no rank skipped a collective the others ran. torch has no
    public reader of it (its flight recorder and debug modes log it, but need an environment set
    before the group is made). None where this torch does not have it: the pool rebuilds, as for
    ``c10d_group_count``."""
    try:
        number = group._get_backend(device)._get_sequence_number_for_group()
    except Exception:  # noqa: BLE001 - a private API: any change means "unknown"
        return None
    return number if isinstance(number, int) else None


def multiprocessing_helper_pids() -> set[int]:
    """Process ids of the helpers ``multiprocessing`` keeps for this process until it exits (the
    forkserver, the resource tracker): ``forkserver._forkserver._forkserver_pid`` and
    ``resource_tracker._resource_tracker._pid``.

    The standard library starts them on demand and has no public way to name them; a check for
    processes left behind must not count them. Missing or not started: not in the set."""
    pids = {getattr(getattr(forkserver, "_forkserver", None), "_forkserver_pid", None),
            getattr(getattr(resource_tracker, "_resource_tracker", None), "_pid", None)}
    return {pid for pid in pids if isinstance(pid, int)}


class StorageWeakRefs:
    """Weak references to many storages (their C++ ``StorageImpl``, which outlives the Python storage object
    that named it), counted alive at once: ``add(storage)``, ``alive()``, ``len()``; freed when this is dropped.

    torch's public ``torch.multiprocessing.reductions.StorageWeakRef`` is one Python object per storage whose
    making, ``expired()`` and ``__del__`` are each a Python call over three internals (``_weak_ref`` of a
    storage, ``UntypedStorage._expired`` and ``_free_weak_ref``), and a worker's cache holds hundreds of
    storages: these hold the internals' references in one list. The public class is built on the same three,
    so a torch without them fails here and there alike (``testcases/unit/test_private_apis.py`` names it)."""

    def __init__(self) -> None:
        # ranks make these; the controller imports this module and never imports torch (3.7 s, python -X importtime)
        import torch

        self._weak_ref = torch.UntypedStorage._weak_ref
        self._expired = torch.UntypedStorage._expired
        self._free = torch.UntypedStorage._free_weak_ref  # kept: torch may be torn down before this at exit
        self._refs: list = []

    def add(self, storage: Any) -> None:
        self._refs.append(storage._weak_ref())

    def add_all(self, storages: Any) -> None:
        """``add`` each of ``storages`` (one call for a worker's hundreds)."""
        self._refs.extend(map(self._weak_ref, storages))  # (the loop in C, no method looked up per storage)

    def alive(self) -> int:
        """How many of the storages added are still alive."""
        return len(self._refs) - sum(map(self._expired, self._refs))  # (one C-level pass over hundreds)

    def __len__(self) -> int:
        return len(self._refs)

    def __del__(self) -> None:
        for _ in map(self._free, self._refs):  # (the loop in C: a worker's hundreds of storages)
            pass
        self._refs.clear()
