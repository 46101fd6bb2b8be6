"""Rank side: master plans, engines hand the plan to their workers, workers allocate.

Every message crosses a real collective: the master (global rank 0) broadcasts the
plan over the control group, each engine's leader derives its role's message and
broadcasts it over the engine's own subgroup, workers all-gather digests. Only the
interface methods of the implementation under test are called.
"""

from __future__ import annotations

import dataclasses
import gc
import os
import socket
import weakref
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Optional

import torch
import torch.distributed as dist

from contract.errors import UserError
from harness.config.targets import build_implementation_node
from harness.private_apis import StorageWeakRefs
from harness.suites.facts import LeakFacts, MasterError, WorkerFacts, master_error_of, walked_worker
from harness.suites.measure import allocator_bytes, distinct_storage_bytes

if TYPE_CHECKING:
    from contract.interface import KVShardingImplementation, WorkerKVCache
    from contract.plan_types import KVPlan
    from contract.specs import RunSpec
    from harness.rankpool.context import RankContext

Tamper = Callable[["KVPlan", int], "KVPlan"]
"""``tamper(message, plan_rank) -> message``: alters what one worker receives after the wire."""


@dataclass(frozen=True)
class EngineLayout:
    """Which global ranks host the workers of one engine; a worker's plan rank is its index here."""

    role: str
    ranks: tuple[int, ...]


@dataclass
class Worker:
    role: str
    plan_rank: int
    cache: Optional[WorkerKVCache]
    measured_bytes: Optional[int]
    """None: measured when its facts are taken (``facts.walked_worker``: the union of its storages' ranges)."""
    message: KVPlan
    tampered: bool = False
    """The message was altered by bring_up's ``tamper`` hook before ``init_worker``."""


@dataclass(frozen=True, kw_only=True)
class InitRefusal:
    """A worker's ``init_worker`` raised (recorded only when bring_up is asked to record refusals)."""

    role: str
    plan_rank: int
    tampered: bool
    error: MasterError


@dataclass
class RankSession:
    """What one rank holds after bring-up. ``error`` is the master's refusal, if any."""

    ctx: RankContext
    run: RunSpec
    impl: Optional[KVShardingImplementation]
    plan: Optional[KVPlan] = None
    error: Optional[MasterError] = None
    workers: dict[str, Worker] = field(default_factory=dict)
    digests: dict[str, tuple] = field(default_factory=dict)
    refusals: dict[str, InitRefusal] = field(default_factory=dict)
    engines: tuple[EngineLayout, ...] = ()
    allocator_before: int = 0

    def refusal_errors(self) -> dict[str, MasterError]:
        """Role -> the error of this rank's worker that refused (``record_user_refusals``)."""
        return {role: r.error for role, r in self.refusals.items()}

    def refused_anywhere(self) -> bool:
        """Whether a worker on any rank refused: the same answer on every rank (a collective every rank calls),
        so that no rank goes on to an exchange its peers skip."""
        return any(self.ctx.all_gather_object(bool(self.refusals)))

    def teardown(self, refs: Optional[dict[str, LeakRefs]] = None) -> dict[str, LeakFacts]:
        """Drop the harness's references to every worker's cache and to the engine, then count what
        is still alive: weak references to each tensor and (C++ level) to each storage. Nothing of
        a torn-down engine, target or draft, may survive (the seed's "ASAN clean"). ``refs``: role -> the
        weak references already taken of its worker's cache (``walked``); the others' are taken here."""
        refs = {**{role: weak_refs(w.cache) for role, w in self.workers.items()
                   if w.cache is not None and role not in (refs or {})}, **(refs or {})}
        for worker in self.workers.values():
            worker.cache = None
        self.impl = None
        alive = {role: alive_count(rs) for role, rs in refs.items()}
        if any(alive.values()):  # a reference cycle may hold them until a collection
            gc.collect()
            alive = {role: alive_count(rs) for role, rs in refs.items()}
        after = allocator_bytes(self.ctx.device)
        return {role: LeakFacts(tracked=rs.tracked(), alive=alive[role], allocator_before=self.allocator_before,
                                allocator_after=after) for role, rs in refs.items()}


@dataclass(frozen=True)
class LeakRefs:
    """Weak references to a worker's tensors and to each distinct storage under them: what the leak check counts
    after the cache is dropped."""

    tensors: list
    """``weakref.ref`` of each tensor."""
    storages: StorageWeakRefs
    """Each distinct storage, at the C++ level (its Python object dies at once on torch 2.1)."""

    def tracked(self) -> int:
        return len(self.tensors) + len(self.storages)

    def alive(self) -> int:
        # (each reference called in a list comprehension, the dead counted in C: no generator frame per tensor)
        return len(self.tensors) - [r() for r in self.tensors].count(None) + self.storages.alive()


def weak_refs(cache) -> LeakRefs:
    """Weak references to every tensor of ``cache`` and to each distinct storage under them (``alive_count``)."""
    tensors, storages, seen = [], StorageWeakRefs(), set()
    for t in cache.all_tensors():
        tensors.append(weakref.ref(t))
        storage = t.untyped_storage()
        ptr = storage.data_ptr()
        if ptr not in seen:
            seen.add(ptr)
            storages.add(storage)
    return LeakRefs(tensors, storages)


def walked(worker: Worker, device: str) -> tuple[Callable[[Optional[LeakFacts]], WorkerFacts], LeakRefs]:
    """The worker's facts (given its leak facts) and the leak check's weak references (``weak_refs``'s), from one
    walk over its tensors (``facts.walked_worker``): what ``teardown(refs)`` counts."""
    storages, refs = [], StorageWeakRefs()
    facts, tensors = walked_worker(worker, device, storages=storages)
    refs.add_all(storages)
    return facts, LeakRefs(tensors, refs)


def alive_count(refs: LeakRefs) -> int:
    """How many of ``refs`` (``weak_refs``) still point at a live tensor or storage."""
    return refs.alive()


def instantiate(impl_cfg: dict) -> KVShardingImplementation:
    """The implementation under test, from its config node (``harness.config.targets``: checked,
    arguments bound, then built)."""
    return build_implementation_node(impl_cfg)


def engines_for(world_size: int, run, *, separate_draft: bool = False) -> tuple[EngineLayout, ...]:
    """Target engine over all ranks; a draft engine on the same ranks, or on its own ranks."""
    if run.draft is None:
        return (EngineLayout("target", tuple(range(world_size))),)
    if separate_draft:
        half = world_size // 2
        return (EngineLayout("target", tuple(range(half))), EngineLayout("draft", tuple(range(half, world_size))))
    everyone = tuple(range(world_size))
    return (EngineLayout("target", everyone), EngineLayout("draft", everyone))


@dataclass(frozen=True)
class Published:
    """What the master broadcasts: its plan and each engine message's digest, or its refusal."""

    plan: Optional[KVPlan]
    digests: dict[str, str]
    error: Optional[MasterError]


def bring_up(
    ctx: RankContext,
    run: RunSpec,
    impl_cfg: dict,
    *,
    engines: Optional[tuple[EngineLayout, ...]] = None,
    tamper: Optional[Tamper] = None,
    record_refusals: bool = False,
    record_user_refusals: bool = False,
    plan_only: bool = False,
) -> RankSession:
    """Plan on rank 0, propagate through the engines, init every worker hosted on this rank.

    ``tamper(message, plan_rank)`` may alter a message after it crossed the wire (TC-04
    uses it to check that workers reject a layout that is not the published one). With
    ``record_refusals`` an ``init_worker`` that raises is recorded in ``session.refusals``
    instead of failing the rank, and the digest all-gather still runs (None for it), so no
    rank is left waiting in a collective; with ``record_user_refusals`` only a ``UserError`` is (the
    worker refused the config, with the field it names; anything else still fails the rank with its
    traceback). With ``plan_only`` only the master plans (a config the
    spec refuses: nothing is allocated even if the implementation wrongly accepts it).
    """
    impl = instantiate(impl_cfg)
    engines = tuple(engines or engines_for(ctx.world_size, run))
    run = _fit_to_card(ctx, run)
    session = RankSession(ctx=ctx, run=run, impl=impl, engines=engines, allocator_before=allocator_bytes(ctx.device))

    published = master_plan(impl, run, engines) if ctx.rank == 0 else None
    published = ctx.broadcast_object(published, src=0)
    if published.error is not None:
        session.error = published.error
        return session
    session.plan = published.plan
    if plan_only:
        return session

    groups = _engine_groups(ctx, engines)
    for engine in engines:
        leader = engine.ranks[0]
        message = impl.engine_message(session.plan, run, engine.role) if ctx.rank == leader else None
        message = _engine_broadcast(ctx, groups[engine.role], message, leader, engine)
        if ctx.rank not in engine.ranks:
            continue
        plan_rank = engine.ranks.index(ctx.rank)
        received = tamper(message, plan_rank) if tamper is not None else message
        tampered = received is not message
        before = allocator_bytes(ctx.device)
        try:
            cache = impl.init_worker(
                received, run, rank=plan_rank, role=engine.role, device=ctx.device,
                expected_digest=published.digests[engine.role],
            )
        except Exception as exc:  # noqa: BLE001 - recorded as data only when asked; else the rank fails
            if not (record_refusals or (record_user_refusals and isinstance(exc, UserError))):
                raise
            session.refusals[engine.role] = InitRefusal(role=engine.role, plan_rank=plan_rank, tampered=tampered,
                                                        error=master_error_of(exc))
            continue
        measured = allocator_bytes(ctx.device) - before if ctx.device.startswith("cuda") else distinct_storage_bytes(_tensors(cache))
        session.workers[engine.role] = Worker(engine.role, plan_rank, cache, measured, received, tampered)
    for engine in engines:
        worker = session.workers.get(engine.role)
        session.digests[engine.role] = tuple(ctx.all_gather_object(worker.cache.plan_digest if worker else None))
    return session


def master_plan(impl, run, engines) -> Published:
    """Rank 0: plan and hash each engine's message. A UserError is the master's refusal (data for the
    checks); any other exception is a crash and fails the rank with its type and message.
    The explorer (``harness.explore.runner``) plans in process through it too."""
    try:
        plan = impl.plan(run)
        digests = {e.role: impl.engine_message(plan, run, e.role).digest for e in engines}
    except UserError as exc:
        return Published(plan=None, digests={}, error=master_error_of(exc))
    return Published(plan=plan, digests=digests, error=None)


def _engine_groups(ctx, engines: tuple[EngineLayout, ...]) -> dict:
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

    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1)
    free_bytes, _ = torch.cuda.mem_get_info(ctx.device)
    sharing = ranks_on_my_card(ctx)
    share = ctx.all_gather_object(int(free_bytes * 0.9) // (workers * sharing))
    cap = min(share)
    hw = run.hardware
    if run.kv_budget_bytes <= cap:
        return run
    if run.cache.kv_budget_bytes > 0:  # an explicit budget (cache.kv_budget_bytes) is capped the same way
        return dataclasses.replace(run, cache=dataclasses.replace(run.cache, kv_budget_bytes=cap))
    hw = dataclasses.replace(hw, reserved_bytes_per_card=hw.hbm_bytes_per_card - cap)
    return dataclasses.replace(run, hardware=hw)


# -- one card shared by several ranks (gloo with runner device cuda; scripts/check_cards.sh) --
def ranks_on_my_card(ctx) -> int:
    """Ranks of this group on this rank's card (same host and device): 1 under NCCL, all of them on a 1-card box."""
    where = ctx.all_gather_object((socket.gethostname(), ctx.device))
    return where.count(where[ctx.rank])


def _tensors(cache) -> list:
    return list(cache.all_tensors())
