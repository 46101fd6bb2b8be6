"""Generic distributed runner: a persistent pool of rank processes on real torch.distributed groups.

Knows nothing about KV caches: ``RankPool.run(fn, *args)`` calls ``fn(ctx, *args)`` on
every rank and returns the results ordered by rank; ``get_pool`` keeps one pool per
world size in this process. ``launcher`` runs the same bodies under torchrun.
"""

from .errors import CollectiveCheckFailed, PoolUnavailable, RankFailure, RankSkip, RankTimeout
from .pool import RankPool, preload
from .registry import close_all, get_pool

__all__ = [
    "CollectiveCheckFailed",
    "RankContext",
    "PoolUnavailable",
    "RankFailure",
    "RankPool",
    "RankSkip",
    "RankTimeout",
    "close_all",
    "get_pool",
    "preload",
]


def __getattr__(name: str):
    if name == "RankContext":  # imports torch; the parent side of the pool does not need it
        from .context import RankContext

        return RankContext
    raise AttributeError(f"module 'harness.rankpool' has no attribute {name!r}")
