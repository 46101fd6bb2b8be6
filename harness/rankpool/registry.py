"""One pool per (world_size, backend, device_type) in this process, closed at interpreter exit.

Each pytest (or xdist) worker process has its own registry: nothing is shared between
workers. ``max_live_ranks`` bounds the rank processes kept alive at once (least
recently used pools are closed first) so a worker holding pools of 4 and 8 ranks
does not crowd a small machine; None keeps every pool.

``close_idle`` closes the CPU pools that no ``run`` has used for ``IDLE_CLOSE_S``; their
next ``run`` starts them again. An idle rank is not free: gloo's TCP loop in every rank
wakes every 10 ms, for each of its groups, and four pytest workers holding pools of 4 and
8 ranks spent a tenth of a 2-core machine on that. A CPU pool starts again in about 0.1 s
(``python -m tools.bench.runner_overhead``); a pool on cards pays CUDA and NCCL set-up
again, so it is kept.
"""

from __future__ import annotations

import atexit
import threading
import time
from collections import OrderedDict
from typing import Optional

from contract.errors import ConfigError

from .backend import DEFAULT_MAX_WORLD_SIZE, check_seconds, check_world_size, resolve_backend
from .pool import RankPool

_pools: OrderedDict[tuple[int, str, str], RankPool] = OrderedDict()
_lock = threading.Lock()
_settings = {"max_live_ranks": None}
IDLE_CLOSE_S = {"cpu": 5.0, "cuda": None}
"""Device type -> seconds without a ``run`` after which ``close_idle`` closes a pool (None: never)."""


def configure(*, max_live_ranks: Optional[int]) -> None:
    """Set the cap on live rank processes held by the registry (None: no cap)."""
    if max_live_ranks is not None and (isinstance(max_live_ranks, bool) or not isinstance(max_live_ranks, int) or max_live_ranks < 1):
        raise ConfigError("runner.max_live_ranks", max_live_ranks, "an integer >= 1, or null for no cap")
    _settings["max_live_ranks"] = max_live_ranks


def get_pool(
    world_size: int,
    backend: str = "auto",
    *,
    device_type: str = "auto",
    timeout_s: float = 60.0,
    max_world_size: int = DEFAULT_MAX_WORLD_SIZE,
) -> RankPool:
    """The live pool for this key, created on first use (ranks start lazily on the first run).

    Raises ConfigError for a bad world size or backend name, PoolUnavailable when the
    machine cannot host it. ``timeout_s`` becomes the pool's default run timeout.
    """
    check_world_size(world_size, max_world_size)
    choice = resolve_backend(backend, world_size, device_type=device_type)
    key = (world_size, choice.backend, choice.device_type)  # "auto" shares the pool it resolves to
    with _lock:
        pool = _pools.pop(key, None)
        if pool is None:
            pool = RankPool(
                world_size,
                backend=choice.backend,
                device_type=choice.device_type,
                timeout_s=timeout_s,
                max_world_size=max_world_size,
            )
        else:
            pool.timeout_s = check_seconds("runner.timeout_s", timeout_s)
        _pools[key] = pool  # most recently used last
        _evict(keep=pool)
    close_idle(keep=pool)  # not the pool asked for: closing it now would only start it again
    return pool


def _evict(keep: RankPool) -> None:
    cap = _settings["max_live_ranks"]
    if cap is None:
        return
    live = sum(p.world_size for p in _pools.values() if p.started or p is keep)
    for key, pool in list(_pools.items()):
        if live <= cap:
            break
        if pool is not keep and pool.started:
            pool.close()
            del _pools[key]
            live -= pool.world_size


def close_idle(now: Optional[float] = None, *, keep: Optional[RankPool] = None) -> list[RankPool]:
    """Close the started pools (but ``keep``) idle longer than ``IDLE_CLOSE_S`` allows for their
    device type; returns them (they stay registered and start again on their next ``run``)."""
    now = time.monotonic() if now is None else now
    with _lock:
        idle = [pool for pool in _pools.values()
                if pool is not keep and pool.started and IDLE_CLOSE_S.get(pool.choice.device_type) is not None
                and now - pool.idle_since > IDLE_CLOSE_S[pool.choice.device_type]]
    for pool in idle:
        pool.close()
    return idle


def live_pools() -> list[RankPool]:
    with _lock:
        return list(_pools.values())


def close_all() -> None:
    """Close every registered pool (also run at interpreter exit)."""
    with _lock:
        pools = list(_pools.values())
        _pools.clear()
    for pool in pools:
        pool.close()


atexit.register(close_all)
