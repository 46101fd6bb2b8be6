"""Master -> engine -> worker propagation as plain objects (FEATURE section 8), through the in-process driver
``testcases/unit/_local_engine.py`` (the TCs drive the same interface over real collectives: ``harness.suites.bring_up``).

Two halves: the plumbing and the pure checks driven by a hand-written stub
implementation (so they do not depend on the planner), then the real
``ReferenceImplementation`` end to end on CPU.
"""

from __future__ import annotations

import gc
from dataclasses import replace

import pytest
from torch.multiprocessing.reductions import StorageWeakRef

from contract.errors import PlanError
from contract.interface import KVShardingImplementation
from contract.plan_types import KVPlan
from contract.specs import LayerwiseFlags, RunSpec
from implementations.reference.allocation import allocate_worker_cache, cache_bytes
from testcases.unit._local_engine import (
    Engine,
    Master,
    Worker,
    cache_coverage_errors,
    coverage_errors,
    digest_errors,
    owned_full_layers,
    plan_coverage_errors,
    start_local,
)
from testcases.unit.test_allocation import (
    GQA,
    HYBRID,
    MLA_DSA,
    MiB,
    expected_full_bytes_per_block,
    expected_linear_layer_bytes,
    full_layer_ids,
    hand_plan,
    mask_of,
    run_spec,
)

pytestmark = pytest.mark.unit


class HandImpl:
    """A stub implementation: hand-built plans, the digest check, the allocator."""

    name = "hand"

    def plan(self, run: RunSpec) -> KVPlan:
        return hand_plan(run.model, run)

    def engine_message(self, plan: KVPlan, run: RunSpec, role: str) -> KVPlan:
        if role == "target":
            return plan
        draft_run = replace(run, model=run.draft, layerwise=LayerwiseFlags())
        return hand_plan(run.draft, draft_run, n_blocks=plan.n_blocks)

    def init_worker(self, message, run, *, rank, role, device, expected_digest):
        if message.digest != expected_digest:
            raise PlanError("layout", message.digest, f"the master's digest {expected_digest}")
        return allocate_worker_cache(message, run, rank=rank, role=role,
                                     mask=mask_of(message, rank), device=device)


# ---- plumbing, with the stub -----------------------------------------------------------


def test_stub_satisfies_the_interface():
    assert isinstance(HandImpl(), KVShardingImplementation)


def test_master_keeps_its_plan_and_publishes_a_digest_per_role():
    run = run_spec(MLA_DSA, draft=GQA)
    master = Master(HandImpl(), run)
    with pytest.raises(RuntimeError, match="start"):
        master.published_digest("target")
    plan = master.start()
    assert master.plan is plan
    assert master.roles() == ("target", "draft")
    assert master.published_digest("target") == plan.digest
    assert master.published_digest("draft") != plan.digest


def test_draft_role_needs_a_draft_model():
    run = run_spec(MLA_DSA)
    assert Master(HandImpl(), run).roles() == ("target",)
    with pytest.raises(ValueError, match="draft"):
        Engine(HandImpl(), run, "draft", (0,))
    with pytest.raises(ValueError, match="role"):
        Worker(HandImpl(), run, 0, "verifier")


def test_engine_hands_every_worker_the_same_message():
    run = run_spec(MLA_DSA, world_size=4)
    plan = hand_plan(MLA_DSA, run)
    handed = Engine(HandImpl(), run, "target", (0, 1, 2, 3)).handoff(plan)
    assert sorted(handed) == [0, 1, 2, 3]
    assert {m.digest for m in handed.values()} == {plan.digest}


def test_worker_refuses_a_message_that_is_not_the_published_layout():
    run = run_spec(MLA_DSA, world_size=4)
    plan = hand_plan(MLA_DSA, run)
    worker = Worker(HandImpl(), run, 0, "target")
    with pytest.raises(PlanError):
        worker.init(replace(plan, n_blocks=plan.n_blocks + 1), plan.digest)
    assert worker.cache is None


def test_worker_teardown_frees_its_cache():
    run = run_spec(HYBRID, world_size=4)
    plan = hand_plan(HYBRID, run)
    worker = Worker(HandImpl(), run, 2, "target")
    cache = worker.init(plan, plan.digest)
    refs = [StorageWeakRef(t.untyped_storage()) for t in cache.all_tensors()]  # torch 2.1: not weakref.ref
    del cache
    worker.teardown()
    gc.collect()
    assert worker.cache is None
    assert [r for r in refs if not r.expired()] == []


def test_start_local_initialises_both_engines_with_the_stub():
    run = run_spec(MLA_DSA, world_size=4, draft=GQA)
    local = start_local(HandImpl(), run)
    try:
        assert sorted(local.workers) == [(role, r) for role in ("draft", "target") for r in range(4)]
        assert digest_errors({c.rank: c.plan_digest for c in local.caches("target")},
                             local.digests["target"]) == []
        assert cache_coverage_errors(local.caches("target")) == []
        assert all(c.split_size == 1 for c in local.caches("draft"))
    finally:
        local.teardown()
    assert all(w.cache is None for w in local.workers.values())


# ---- the pure checks ---------------------------------------------------------------------


def test_coverage_exactly_once_passes():
    assert coverage_errors((1, 3, 5, 7), [(0, 1), (2, 3)],
                           {0: (1, 5), 1: (3, 7), 2: (1, 5), 3: (3, 7)}) == []


def test_coverage_reports_a_missing_owner():
    problems = coverage_errors((1, 3), [(0, 1)], {0: (1,), 1: ()})
    assert problems == ["split group (0, 1): full layer 3 owned by 0 ranks [], expected exactly 1"]


def test_coverage_reports_a_layer_owned_twice():
    problems = coverage_errors((1, 3), [(0, 1)], {0: (1, 3), 1: (3,)})
    assert problems == ["split group (0, 1): full layer 3 owned by 2 ranks [0, 1], expected exactly 1"]


def test_coverage_reports_a_linear_layer_and_a_silent_rank():
    problems = coverage_errors((3,), [(0, 1), (2, 3)], {0: (3, 2), 1: (), 2: (3,)})
    assert "split group (0, 1): rank 0 owns 2, not a full-attention layer" in problems
    assert "split group (2, 3): rank 3 reported nothing" in problems
    assert len(problems) == 2


def test_digest_errors_name_the_diverging_rank():
    assert digest_errors({0: "a", 1: "a", 2: "a"}) == []
    assert digest_errors({0: "a", 1: "b", 2: "a"}) == ["rank 1 holds layout b, expected a"]
    assert digest_errors({0: "a"}, expected="z") == ["rank 0 holds layout a, expected z"]
    assert digest_errors({}) == ["no digests to compare"]


def test_cache_coverage_catches_a_worker_that_allocated_the_wrong_layers():
    run = run_spec(MLA_DSA, world_size=2, split_size=2)
    plan = hand_plan(MLA_DSA, run)
    good = allocate_worker_cache(plan, run, rank=0, role="target", mask=mask_of(plan, 0), device="cpu")
    bad = allocate_worker_cache(plan, run, rank=1, role="target", mask=mask_of(plan, 0), device="cpu")
    assert owned_full_layers(bad) == (0, 2)
    problems = cache_coverage_errors([good, bad])
    assert len(problems) == 4  # layers 0 and 2 twice, 1 and 3 never
    assert plan_coverage_errors(plan) == []


def test_plan_coverage_of_an_inactive_plan_is_per_rank():
    run = run_spec(GQA, world_size=2, enable=False)
    assert plan_coverage_errors(hand_plan(GQA, run)) == []


# ---- the reference implementation end to end -------------------------------------------


@pytest.fixture(scope="module")
def reference():
    from implementations.reference.impl import ReferenceImplementation

    impl = ReferenceImplementation()
    assert isinstance(impl, KVShardingImplementation)
    return impl


HYBRID_16 = replace(HYBRID, name="tiny_hybrid_16", num_hidden_layers=16)  # full layers 3, 7, 11, 15
MTP_DRAFT = replace(MLA_DSA, name="tiny_dsa_mtp", num_hidden_layers=1)
BUDGET = 64 * MiB  # above the 16-layer hybrid's ~19 MiB linear state; torch.empty keeps it virtual


def expected_owned(model, split_rank: int, s: int) -> tuple[int, ...]:
    """FEATURE section 4: the k-th full layer belongs to split rank k % s."""
    return tuple(l for k, l in enumerate(full_layer_ids(model)) if k % s == split_rank)


TOPOLOGIES = [  # (model, world_size, dp_size, split_size)
    (MLA_DSA, 4, 1, 2),
    (MLA_DSA, 4, 1, 4),
    (HYBRID_16, 4, 1, 2),
    (HYBRID_16, 4, 1, 4),
    (MLA_DSA, 8, 2, 2),
    (HYBRID_16, 8, 2, 4),
]


@pytest.mark.parametrize("model, world, dp, s", TOPOLOGIES,
                         ids=[f"{m.name}-w{w}-dp{d}-s{s}" for m, w, d, s in TOPOLOGIES])
def test_reference_workers_hold_one_layout_covering_every_full_layer_once(reference, model, world, dp, s):
    run = run_spec(model, world_size=world, dp_size=dp, split_size=s, budget_bytes=BUDGET)
    local = start_local(reference, run)
    try:
        caches = local.caches("target")
        plan = local.plan
        assert len(caches) == world
        assert digest_errors({c.rank: c.plan_digest for c in caches}, local.digests["target"]) == []
        assert plan_coverage_errors(plan) == []
        assert cache_coverage_errors(caches) == []
        tp = world // dp
        full_bpb = expected_full_bytes_per_block(model, run, tp)
        linear = (model.num_hidden_layers - len(full_layer_ids(model))) * expected_linear_layer_bytes(
            model, run, tp, plan.num_linear_state_blocks)
        for cache in caches:
            first = cache.rank - cache.rank % s
            assert cache.split_group == tuple(range(first, first + s))  # consecutive, inside one TP group
            assert cache.split_rank == (cache.rank % tp) % s
            owned = expected_owned(model, cache.split_rank, s)
            assert owned_full_layers(cache) == owned
            measured = cache_bytes(cache)
            assert measured == plan.n_blocks * full_bpb * (len(owned) + 1) + linear
            assert measured == plan.ranks[cache.rank].estimated_bytes
    finally:
        local.teardown()


def test_reference_disabled_gives_every_worker_every_layer(reference):
    run = run_spec(MLA_DSA, world_size=4, split_size=2, enable=False, budget_bytes=BUDGET)
    local = start_local(reference, run)
    try:
        for cache in local.caches("target"):
            assert (cache.split_size, cache.split_rank, cache.split_group) == (1, 0, (cache.rank,))
            assert owned_full_layers(cache) == (0, 1, 2, 3) and cache.scratch == {}
        assert cache_coverage_errors(local.caches("target")) == []
    finally:
        local.teardown()


def test_reference_draft_engine_workers_never_split(reference):
    run = run_spec(MLA_DSA, world_size=4, split_size=2, draft=MTP_DRAFT, budget_bytes=BUDGET)
    local = start_local(reference, run)
    try:
        plan = local.plan
        drafts = local.caches("draft")
        targets = local.caches("target")
        assert len(drafts) == 4
        assert digest_errors({c.rank: c.plan_digest for c in drafts}, local.digests["draft"]) == []
        assert digest_errors({c.rank: c.plan_digest for c in targets}, local.digests["target"]) == []
        draft_bpb = expected_full_bytes_per_block(MTP_DRAFT, run, 4)
        for draft in drafts:
            assert (draft.split_size, draft.split_rank, draft.split_group) == (1, 0, (draft.rank,))
            assert owned_full_layers(draft) == (0,) and draft.scratch == {}
            assert draft.n_blocks == plan.n_blocks
            assert cache_bytes(draft) == plan.n_blocks * draft_bpb
            assert cache_bytes(draft) == plan.ranks[draft.rank].draft_estimated_bytes
        for target in targets:
            assert target.split_size == 2
            assert cache_bytes(target) + cache_bytes(drafts[target.rank]) <= plan.budget_bytes
        assert cache_coverage_errors(targets) == [] and cache_coverage_errors(drafts) == []
    finally:
        local.teardown()


def test_reference_worker_refuses_a_tampered_message(reference):
    run = run_spec(MLA_DSA, world_size=4, split_size=2, budget_bytes=BUDGET)
    master = Master(reference, run)
    plan = master.start()
    message = Engine(reference, run, "target", (0,)).handoff(plan)[0]
    worker = Worker(reference, run, 0, "target")
    with pytest.raises(PlanError):
        worker.init(replace(message, n_blocks=message.n_blocks + 1), master.published_digest("target"))
    assert worker.cache is None
