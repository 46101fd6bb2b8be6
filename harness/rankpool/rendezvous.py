"""How ranks find each other: a FileStore in a fresh temp dir (pool) or env:// (torchrun).

The pool never opens a rendezvous port, so concurrent pools (xdist workers, two pools
in one process) cannot race for one. Gloo's data connections are pinned to loopback.
"""

from __future__ import annotations

import datetime
import os
import tempfile

STORE_FILE = "filestore"


def make_pool_dir() -> str:
    """A fresh private directory for one pool generation (store, stack dumps, tmp files)."""
    return tempfile.mkdtemp(prefix=f"lwsplit-pool-{os.getpid()}-")


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
    import torch.distributed as dist

    dist.init_process_group(backend, init_method="env://", timeout=datetime.timedelta(seconds=timeout_s))
