"""The reference with one injected fault on one rank (see the package docstring)."""

from __future__ import annotations

import ctypes
import os
import sys
import time
from typing import Optional

from contract.errors import ConfigError
from contract.interface import WorkerKVCache
from contract.plan_types import KVPlan
from contract.specs import RunSpec
from contract.units import MIB
from implementations.reference.impl import ReferenceImplementation

BEHAVIOURS = {
    "raise": "raises RuntimeError (its peers go on into the next collective)",
    "exit": "leaves with os._exit(exit_code)",
    "crash": "dereferences NULL (SIGSEGV)",
    "hang": "sleeps forever",
    "layout": "allocates another split rank's layers and reports a diverging plan digest",
    "overalloc": "allocates the whole KV budget again on top of its plan",
}
POINTS = ("init_worker", "plan")
"""Where the fault fires: in the worker step (every rank), or in the master's plan (rank 0 only)."""
_WORKER_ONLY = ("layout", "overalloc")


class InjectedFault(RuntimeError):
    """What ``behaviour="raise"`` raises: a bug, not a user error (so never a ``UserError``)."""


class FaultyImplementation(ReferenceImplementation):
    """The reference; rank ``rank`` misbehaves at ``point`` as ``behaviour`` says (``BEHAVIOURS``)."""

    def __init__(self, behaviour: str, rank: int = 1, point: str = "init_worker", exit_code: int = 3) -> None:
        if behaviour not in BEHAVIOURS:
            raise ConfigError("implementation.behaviour", behaviour, f"one of {', '.join(BEHAVIOURS)}")
        if point not in POINTS:
            raise ConfigError("implementation.point", point, f"one of {', '.join(POINTS)}")
        if isinstance(rank, bool) or not isinstance(rank, int) or rank < 0:
            raise ConfigError("implementation.rank", rank, "a rank number >= 0")
        if point == "plan" and rank != 0:
            raise ConfigError("implementation.rank", rank, "0 with implementation.point=plan (only rank 0 plans)")
        if point == "plan" and behaviour in _WORKER_ONLY:
            raise ConfigError("implementation.point", point, f"init_worker for behaviour {behaviour!r}")
        self.behaviour = behaviour
        self.rank = rank
        self.point = point
        self.exit_code = exit_code
        self.name = f"fault_{behaviour}"

    def fires(self, point: str) -> bool:
        """True in the chosen rank's process at the chosen point, never outside a process group."""
        return point == self.point and _global_rank() == self.rank

    # ---- master ---------------------------------------------------------------------

    def plan(self, run: RunSpec) -> KVPlan:
        if self.fires("plan"):
            self._misbehave("plan")
        return super().plan(run)

    # ---- worker ---------------------------------------------------------------------

    def init_worker(self, message: KVPlan, run: RunSpec, *, rank: int, role: str, device: str,
                    expected_digest: str) -> WorkerKVCache:
        fire = self.fires("init_worker")
        if fire and self.behaviour not in _WORKER_ONLY:
            self._misbehave("init_worker")
        if fire and self.behaviour == "layout":
            return self._diverging_worker(message, run, rank=rank, role=role, device=device,
                                          expected_digest=expected_digest)
        cache = super().init_worker(message, run, rank=rank, role=role, device=device,
                                    expected_digest=expected_digest)
        if fire and self.behaviour == "overalloc":
            # torch only where tensors are made (3.7 s, python -X importtime): planning imports none
            import torch

            extra = run.hardware.kv_budget_bytes + MIB
            cache.scratch["injected_overflow"] = torch.empty(extra, dtype=torch.uint8, device=device)
        return cache

    def _diverging_worker(self, message: KVPlan, run: RunSpec, *, rank: int, role: str, device: str,
                          expected_digest: str) -> WorkerKVCache:
        """Allocate the layers of the next rank of this rank's split group; report another digest."""
        self.check_message(message, expected_digest, rank)
        group = next((g for g in message.split_groups if rank in g), (rank,))
        other = group[(group.index(rank) + 1) % len(group)]
        mask = self.ownership_mask(message, other)
        # torch only where tensors are made (allocation imports it): planning imports none
        from implementations.reference import allocation

        cache = allocation.allocate_worker_cache(message, run, rank=rank, role=role, mask=mask, device=device)
        cache.plan_digest = "diverged-" + message.digest[:16]
        return cache

    def _misbehave(self, where: str) -> None:
        what = f"injected fault on rank {self.rank} in {where}"
        if self.behaviour == "raise":
            raise InjectedFault(what)
        sys.stderr.write(f"{what}: {BEHAVIOURS[self.behaviour]}\n")
        sys.stderr.flush()
        if self.behaviour == "exit":
            os._exit(self.exit_code)
        if self.behaviour == "crash":
            ctypes.string_at(0)
        if self.behaviour == "hang":
            _sleep_forever()


def _global_rank() -> Optional[int]:
    """This process's torch.distributed rank, or None outside a process group (never imports torch)."""
    dist = sys.modules.get("torch.distributed")
    if dist is None or not dist.is_available() or not dist.is_initialized():
        return None
    return dist.get_rank()


def _sleep_forever() -> None:
    while True:
        time.sleep(3600)
