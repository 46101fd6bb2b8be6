"""How ranks find each other: a FileStore in a fresh temp dir (pool) or env:// (torchrun).

The pool never opens a rendezvous port, so concurrent pools (xdist workers, two pools
in one process) cannot race for one. Gloo's data connections are pinned to loopback.
"""

from __future__ import annotations

import datetime
import os
import shutil
import tempfile
from typing import Optional

STORE_FILE = "filestore"


OWNED_DIR_KINDS = ("pool", "job", "torchrun")
"""Temp folders this harness makes, each named ``lwsplit-<kind>-<owner pid>-<random>``."""


def make_owned_dir(kind: str) -> str:
    """A fresh private (0700) temp folder named after its owner process, so a sweep can find it if the owner dies."""
    if kind not in OWNED_DIR_KINDS:
        raise ValueError(f"kind {kind!r}: one of {', '.join(OWNED_DIR_KINDS)}")
    return tempfile.mkdtemp(prefix=f"lwsplit-{kind}-{os.getpid()}-")


def make_pool_dir() -> str:
    """A fresh private directory for one pool generation (store, stack dumps, tmp files)."""
    remove_stale_dirs()
    return make_owned_dir("pool")


def remove_stale_dirs(root: Optional[str] = None) -> list[str]:
    """Remove this user's harness temp folders whose owner process is gone; returns what went.

    A process killed with SIGKILL (an xdist worker, the app) runs no clean-up; the
    next pool, the pytest controller at session end and the app at exit sweep its
    folders instead. A folder whose owner is alive, or not this user's, is left alone.
    """
    root = root or tempfile.gettempdir()
    removed = []
    try:
        entries = list(os.scandir(root))
    except OSError:
        return removed
    for entry in entries:
        owner = _owner_pid(entry.name)
        if owner is None or _alive(owner):
            continue
        try:
            if not entry.is_dir(follow_symlinks=False) or entry.stat(follow_symlinks=False).st_uid != os.getuid():
                continue
        except OSError:
            continue
        shutil.rmtree(entry.path, ignore_errors=True)
        removed.append(entry.path)
    return removed


def _owner_pid(name: str) -> Optional[int]:
    parts = name.split("-")
    if len(parts) < 4 or parts[0] != "lwsplit" or parts[1] not in OWNED_DIR_KINDS or not parts[2].isdigit():
        return None
    return int(parts[2])


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's live process
        return True
    return True


LOOPBACK_IFNAME = "lo"


def pin_gloo_to_loopback() -> None:
    """Single-host gloo talks over ``lo``, whatever ``GLOO_SOCKET_IFNAME`` was inherited.

    Nothing of a single-host run listens on another interface; only the launcher's
    ``--multi-node`` mode honours an inherited interface. This also sidesteps gloo's
    failure on hosts whose hostname does not resolve.
    """
    os.environ["GLOO_SOCKET_IFNAME"] = LOOPBACK_IFNAME


def init_from_file_store(
    *, backend: str, store_dir: str, rank: int, world_size: int, timeout_s: float
) -> None:
    # the pool's parent imports this module and never imports torch (3.7 s, python -X importtime): ranks only
    import torch.distributed as dist

    store = dist.FileStore(os.path.join(store_dir, STORE_FILE), world_size)
    dist.init_process_group(
        backend,
        store=store,
        rank=rank,
        world_size=world_size,
        timeout=datetime.timedelta(seconds=timeout_s),
    )


def init_from_env(*, backend: str, timeout_s: float) -> None:
    """env:// rendezvous as set up by torchrun (MASTER_ADDR/PORT, RANK, WORLD_SIZE)."""
    # the pool's parent imports this module and never imports torch (3.7 s, python -X importtime): ranks only
    import torch.distributed as dist

    dist.init_process_group(backend, init_method="env://", timeout=datetime.timedelta(seconds=timeout_s))
