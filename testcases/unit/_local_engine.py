"""Master, engine and worker as plain objects in one process: a unit-test driver (FEATURE section 8).

The upstream roles with no process group: the master validates and plans once, each
engine hands its workers the plan for its role, each worker checks what it got against
the digest the master published and allocates. Messages move as Python values, so a
unit test can drive any ``KVShardingImplementation`` (the reference, a mutant, a stub)
through the interface without starting ranks.

This is test support, not the harness's model of the protocol: the TCs run
``harness.suites.bring_up``, where every message crosses a real collective and TC-04
judges coverage over the real split subgroups. The pure checks at the bottom (digests,
coverage of full layers) serve the unit tests only; coverage judges by TC-04's rule
(``harness.suites.ownership.not_owned_once``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Mapping, Optional

from contract.interface import ROLES, KVShardingImplementation, WorkerKVCache
from contract.plan_types import KVPlan
from contract.specs import RunSpec
from harness.suites.ownership import layer_owners, not_owned_once


def _check_role(role: str, run: RunSpec) -> None:
    if role not in ROLES:
        raise ValueError(f"role must be one of {ROLES}, got {role!r}")
    if role == "draft" and run.draft is None:
        raise ValueError("role 'draft' needs run.draft (a speculative draft model)")


class Master:
    """Validates the config and computes the plan once; publishes a digest per role."""

    def __init__(self, impl: KVShardingImplementation, run: RunSpec) -> None:
        self.impl = impl
        self.run = run
        self.plan: Optional[KVPlan] = None

    def start(self) -> KVPlan:
        """Validate and plan (raises ``UserError`` on a bad config); keeps the plan."""
        self.plan = self.impl.plan(self.run)
        return self.plan

    def roles(self) -> tuple[str, ...]:
        return ("target", "draft") if self.run.draft is not None else ("target",)

    def published_digest(self, role: str) -> str:
        """The digest the workers of ``role`` must hold: that of the message derived from the plan."""
        if self.plan is None:
            raise RuntimeError("Master.start() has not run")
        _check_role(role, self.run)
        return self.impl.engine_message(self.plan, self.run, role).digest


class Engine:
    """Drives the workers of one role; hands each the plan message for that role."""

    def __init__(self, impl: KVShardingImplementation, run: RunSpec, role: str,
                 worker_ranks: tuple[int, ...]) -> None:
        _check_role(role, run)
        self.impl = impl
        self.run = run
        self.role = role
        self.worker_ranks = tuple(worker_ranks)

    def message(self, plan: KVPlan) -> KVPlan:
        return self.impl.engine_message(plan, self.run, self.role)

    def handoff(self, plan: KVPlan) -> dict[int, KVPlan]:
        """What each of this engine's workers receives, by rank."""
        message = self.message(plan)
        return {rank: message for rank in self.worker_ranks}


class Worker:
    """One rank of one engine: checks its message, allocates, and tears down."""

    def __init__(self, impl: KVShardingImplementation, run: RunSpec, rank: int, role: str,
                 device: str = "cpu") -> None:
        _check_role(role, run)
        self.impl = impl
        self.run = run
        self.rank = rank
        self.role = role
        self.device = device
        self.cache: Optional[WorkerKVCache] = None

    def init(self, message: KVPlan, expected_digest: str) -> WorkerKVCache:
        """Check ``message`` against ``expected_digest`` and allocate (raises ``PlanError``)."""
        self.cache = self.impl.init_worker(message, self.run, rank=self.rank, role=self.role,
                                           device=self.device, expected_digest=expected_digest)
        return self.cache

    def teardown(self) -> None:
        if self.cache is not None:
            from implementations.reference.allocation import release  # torch only where tensors are

            release(self.cache)
            self.cache = None


@dataclass
class LocalRun:
    """Every role's workers of one configuration, initialised in this process."""

    plan: KVPlan
    digests: dict[str, str]
    """Published digest per role."""
    workers: dict[tuple[str, int], Worker] = field(default_factory=dict)
    """(role, rank) -> worker."""

    def caches(self, role: str = "target") -> list[WorkerKVCache]:
        return [w.cache for (r, _), w in sorted(self.workers.items()) if r == role]

    def teardown(self) -> None:
        for worker in self.workers.values():
            worker.teardown()


def start_local(impl: KVShardingImplementation, run: RunSpec, *, device: str = "cpu") -> LocalRun:
    """Master -> engines (target, and draft when speculative) -> a worker per rank, in process.

    Every engine drives all ``world_size`` ranks, as upstream's target and draft
    engines share the cards.
    """
    master = Master(impl, run)
    plan = master.start()
    local = LocalRun(plan=plan, digests={role: master.published_digest(role) for role in master.roles()})
    ranks = tuple(range(run.parallel.world_size))
    try:
        for role in master.roles():
            for rank, message in Engine(impl, run, role, ranks).handoff(plan).items():
                worker = Worker(impl, run, rank, role, device=device)
                local.workers[(role, rank)] = worker
                worker.init(message, local.digests[role])
    except BaseException:
        local.teardown()
        raise
    return local


# ---- checks the unit tests use (pure, plain data in, problems out) ----------------


def digest_errors(digests: Mapping[int, str], expected: Optional[str] = None) -> list[str]:
    """Problems if the ranks' digests differ from each other (or from ``expected``)."""
    if not digests:
        return ["no digests to compare"]
    reference = expected if expected is not None else digests[min(digests)]
    return [f"rank {rank} holds layout {digest}, expected {reference}"
            for rank, digest in sorted(digests.items()) if digest != reference]


def coverage_errors(full_layers: Iterable[int], split_groups: Iterable[Iterable[int]],
                    owned_by_rank: Mapping[int, Iterable[int]]) -> list[str]:
    """Problems if, in some split group, a full layer is owned by no rank or by several (TC-04's rule,
    ``harness.suites.ownership.not_owned_once``), a rank reported nothing or owns a layer that is not full.

    ``owned_by_rank`` maps each rank to the full layers it really owns.
    """
    full = tuple(full_layers)
    problems = []
    for group in split_groups:
        group = tuple(group)
        reported = {}
        for rank in group:
            if rank not in owned_by_rank:
                problems.append(f"split group {group}: rank {rank} reported nothing")
                continue
            reported[rank] = tuple(owned_by_rank[rank])
            problems += [f"split group {group}: rank {rank} owns {layer}, not a full-attention layer"
                         for layer in reported[rank] if layer not in full]
        for layer, ranks in not_owned_once(layer_owners(full, reported)).items():
            problems.append(f"split group {group}: full layer {layer} owned by "
                            f"{len(ranks)} ranks {ranks}, expected exactly 1")
    return problems


def plan_coverage_errors(plan: KVPlan) -> list[str]:
    """``coverage_errors`` of what the plan says each rank owns."""
    owned = {r.rank: r.owned_full_layers for r in plan.ranks}
    groups = plan.split_groups if plan.active else [(r.rank,) for r in plan.ranks]
    return coverage_errors(plan.full_layers, groups, owned)


def owned_full_layers(cache: WorkerKVCache) -> tuple[int, ...]:
    """The full layers this worker really allocated as its own."""
    return tuple(l.layer_id for l in cache.layers if l.kind == "full" and l.owned)


def cache_coverage_errors(caches: Iterable[WorkerKVCache]) -> list[str]:
    """``coverage_errors`` of what the workers really allocated, grouped by their split groups."""
    caches = list(caches)
    if not caches:
        return ["no worker caches to check"]
    full = sorted({l.layer_id for c in caches for l in c.layers if l.kind == "full"})
    groups = sorted({c.split_group for c in caches})
    return coverage_errors(full, groups, {c.rank: owned_full_layers(c) for c in caches})
