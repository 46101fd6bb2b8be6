"""Rank side: master plans, engines hand the plan to their workers, workers allocate.

Every message crosses a real collective: the master (global rank 0) broadcasts the
plan over the control group, each engine's leader derives its role's message and
broadcasts it over the engine's own subgroup, workers all-gather digests. Only the
interface methods of the implementation under test are called.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

import torch.distributed as dist

from harness.suites.measure import allocator_bytes, distinct_storage_bytes
from implementations.errors import UserError


@dataclass(frozen=True)
class EngineLayout:
    """Which global ranks host the workers of one engine; a worker's plan rank is its index here."""

    role: str
    ranks: tuple[int, ...]


@dataclass
class Worker:
    role: str
    plan_rank: int
    cache: Any
    measured_bytes: int
    message: Any


@dataclass
class RankSession:
    """What one rank holds after bring-up. ``error`` is the master's UserError text, if any."""

    ctx: Any
    run: Any
    impl: Any
    plan: Any = None
    error: Optional[str] = None
    workers: dict[str, Worker] = field(default_factory=dict)
    digests: dict[str, list] = field(default_factory=dict)

    def teardown(self) -> None:
        """Drop every reference to the caches; storage is freed by refcount (no gc pass: it costs ~0.5 s)."""
        for worker in self.workers.values():
            _release(worker.cache)
            worker.cache = None


def instantiate(impl_cfg: dict) -> Any:
    from hydra.utils import instantiate as hydra_instantiate

    return hydra_instantiate(impl_cfg)


def engines_for(world_size: int, run, *, separate_draft: bool = False) -> list[EngineLayout]:
    """Target engine over all ranks; a draft engine on the same ranks, or on its own ranks."""
    if run.draft is None:
        return [EngineLayout("target", tuple(range(world_size)))]
    if separate_draft:
        half = world_size // 2
        return [EngineLayout("target", tuple(range(half))), EngineLayout("draft", tuple(range(half, world_size)))]
    everyone = tuple(range(world_size))
    return [EngineLayout("target", everyone), EngineLayout("draft", everyone)]


def bring_up(
    ctx,
    run,
    impl_cfg: dict,
    *,
    engines: Optional[list[EngineLayout]] = None,
    tamper: Optional[Callable[[Any, int], Any]] = None,
) -> RankSession:
    """Plan on rank 0, propagate through the engines, init every worker hosted on this rank.

    ``tamper(message, plan_rank)`` may alter a message after it crossed the wire (TC-04
    uses it to check that workers reject a layout that is not the published one).
    """
    impl = instantiate(impl_cfg)
    engines = engines or engines_for(ctx.world_size, run)
    run = _fit_to_card(ctx, run)
    session = RankSession(ctx=ctx, run=run, impl=impl)

    published = None
    if ctx.rank == 0:
        published = _master(impl, run, engines)
    published = ctx.broadcast_object(published, src=0)
    if published["error"]:
        session.error = published["error"]
        return session
    session.plan = published["plan"]

    groups = _engine_groups(ctx, engines)
    for engine in engines:
        leader = engine.ranks[0]
        message = impl.engine_message(session.plan, run, engine.role) if ctx.rank == leader else None
        message = _engine_broadcast(ctx, groups[engine.role], message, leader, engine)
        if ctx.rank not in engine.ranks:
            continue
        plan_rank = engine.ranks.index(ctx.rank)
        if tamper is not None:
            message = tamper(message, plan_rank)
        before = allocator_bytes(ctx.device)
        cache = impl.init_worker(
            message, run, rank=plan_rank, role=engine.role, device=ctx.device,
            expected_digest=published["digests"][engine.role],
        )
        measured = allocator_bytes(ctx.device) - before if ctx.device.startswith("cuda") else distinct_storage_bytes(_tensors(cache))
        session.workers[engine.role] = Worker(engine.role, plan_rank, cache, measured, message)
    for engine in engines:
        worker = session.workers.get(engine.role)
        session.digests[engine.role] = ctx.all_gather_object(worker.cache.plan_digest if worker else None)
    return session


def _master(impl, run, engines) -> dict:
    try:
        plan = impl.plan(run)
        digests = {e.role: impl.engine_message(plan, run, e.role).digest for e in engines}
    except UserError as exc:
        return {"error": f"{type(exc).__name__}: {exc}", "plan": None, "digests": {}}
    return {"error": None, "plan": plan, "digests": digests}


def _engine_groups(ctx, engines: list[EngineLayout]) -> dict:
    """A real subgroup per engine; an engine over every rank uses the control group."""
    out = {}
    for engine in engines:  # same order on every rank: new_group is collective
        if len(engine.ranks) == ctx.world_size:
            out[engine.role] = ctx.control_group
        else:
            out[engine.role] = ctx.group(engine.ranks)
    return out


def _engine_broadcast(ctx, group, message, leader: int, engine: EngineLayout):
    if group is ctx.control_group:
        return ctx.broadcast_object(message, src=leader)
    if ctx.rank not in engine.ranks:
        return None
    box = [message]
    dist.broadcast_object_list(box, src=leader, group=group)
    return box[0]


def _fit_to_card(ctx, run):
    """On cards shared by several pytest-xdist workers, cap the KV budget at this worker's share.

    Each of N concurrent workers may use at most 90% of (free HBM / N), split again among
    the worker's ranks that share one card (gloo on a 1-card box); the cap lowers
    the budget (raises the reserve), so the plan itself shrinks and stays consistent.
    """
    if not ctx.device.startswith("cuda"):
        return run
    import torch

    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1)
    free_bytes, _ = torch.cuda.mem_get_info(ctx.device)
    sharing = _ranks_on_my_card(ctx)
    share = ctx.all_gather_object(int(free_bytes * 0.9) // (workers * sharing))
    cap = min(share)
    hw = run.hardware
    if hw.kv_budget_bytes <= cap:
        return run
    hw = dataclasses.replace(hw, reserved_bytes_per_card=hw.hbm_bytes_per_card - cap)
    return dataclasses.replace(run, hardware=hw)


# -- one card shared by several ranks (gloo with runner device cuda; scripts/check_cards.sh) --
def _ranks_on_my_card(ctx) -> int:
    """Ranks of this group on this rank's card (same host and device): 1 under NCCL, all of them on a 1-card box."""
    import socket

    where = ctx.all_gather_object((socket.gethostname(), ctx.device))
    return where.count(where[ctx.rank])


def _tensors(cache) -> list:
    return list(cache.all_tensors())


def _release(cache) -> None:
    if cache is None:
        return
    for layer in cache.layers:
        layer.tensors.clear()
    cache.scratch.clear()
    cache.layers.clear()
