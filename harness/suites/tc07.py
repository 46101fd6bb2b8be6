"""TC-07 (L2) Speculative engine: target (split) + draft (never split) on the same ranks.

Both engines run on all 4 ranks (bring_up's default for a run with a draft). Pass when:
no crash and no rejection; the target's KV is partitioned by its rules (owned full
layers = the spec's round-robin for the rank's split rank, non-owned ones scratch views,
bytes per the spec); the draft's KV is uniform on every rank (every draft layer owned,
no scratch, split size 1 / rank 0, the target's block count); both fit the budget
together: per rank target + draft bytes <= the KV budget, and n_blocks is the spec's
count with the draft's full-attention bytes per block as ``additional`` (FEATURE section 6);
target ownership by the spec's split groups and positions (also on a regrouped topology at
world 4 and 8); after teardown nothing of either engine is alive.
"""

from __future__ import annotations

import itertools

from harness import oracle
from harness.suites import Suite
from harness.suites.case import Case
from harness.suites.checks import (
    draft_message_problems,
    draft_plan_problems,
    leak_problems,
    ownership_problems,
    startup_problems,
    tensor_problems,
    worker_layout_problems,
)
from harness.suites.expectations import Problem, owners_differ, upstream_worker_owners
from harness.suites.facts import plan_of, run_of
from harness.suites.standard import PAIRS, regrouped_cases, standard_body

TC = "TC-07"

DRAFT_VARIANTS = (
    ("deepseek_v32", "deepseek_v32_mtp", "mtp2", ("draft.num_hidden_layers=2",)),
    ("qwen3_5_moe", "qwen3_5_mtp", "body_tp1", ("draft.body_tp1=true",)),
    ("deepseek_v32", "deepseek_v32_mtp", "small_slot", ("draft.kv_lora_rank=256",)),
    ("deepseek_v3", "deepseek_v32_mtp", "indexed_draft", ("draft.body_tp1=true", "cache.indexer_cache_dtype=int8")),
)
"""A draft of two layers, a draft whose body runs at TP 1 (its own cache shape), a draft with a smaller
slot than the target's (its KV still takes the target's shape) (FEATURE 6), and a draft unlike its target:
DeepSeek-V3.2's indexed MTP draft at TP 1 beside the unindexed DeepSeek-V3, its int8 index slot its own
(index_head_dim + 4 on the draft's layer, none on the target's; FEATURE 5-6)."""


def cases(matrix) -> list[Case]:
    """The target/draft pairs whose target the matrix runs x layerwise x tp4 x implementations, and one
    pair on the regrouped topology at world 4 and 8."""
    pairs = [(t, d) for t, d in PAIRS if t in matrix.models]
    pars = matrix.offered("parallel", ["tp4"]) or list(matrix.parallel)[:1]
    out = []
    for hw, (target, draft), lw, par, impl in itertools.product(
        matrix.hardware, pairs, matrix.layerwise, pars, matrix.implementations
    ):
        out.append(Case(tc=TC, model=target, draft=draft, layerwise=lw, parallel=par, implementation=impl,
                        hardware=hw, variant=draft, extra=matrix.extra_for(lw, par)))
    if pairs:
        out += regrouped_cases(TC, matrix, [t for t, _ in pairs], draft=dict(PAIRS))
    for target, draft, variant, extra in DRAFT_VARIANTS:
        lw = matrix.offered("layerwise", ["s2"])
        if target in matrix.models and lw and pars:
            out += [Case(tc=TC, model=target, draft=draft, layerwise=lw[0], parallel=pars[0], implementation=impl,
                         hardware=matrix.hardware[0], variant=variant, extra=(*extra, *matrix.extra_for(lw[0], pars[0])))
                    for impl in matrix.implementations]
    return out


def check(facts: list, run) -> list[str]:
    verdict = startup_problems(facts, run)
    if verdict is not None:
        return verdict
    plan, run = plan_of(facts), run_of(facts)  # run_of: the budget the ranks really planned with
    budget = oracle.run_budget_bytes(run)
    draft_per_block = oracle.expected_draft_bytes_per_block(run)  # D: the target's slot unless the body runs at TP 1
    n, _ = oracle.expected_block_counts(run, budget)
    problems = []
    if plan.n_blocks != n:
        problems.append(Problem(f"n_blocks {plan.n_blocks} != spec {n} (budget {budget} B, draft additional "
                                f"{draft_per_block} B/block)", rule="n_blocks"))
    for role in ("target", "draft"):
        digests = {f.workers[role].digest if role in f.workers else None for f in facts}
        if len(digests) != 1 or None in digests:
            problems.append(f"{role} workers hold different layouts: {sorted(map(str, digests))}")
    problems += ownership_problems(facts, run)
    problems += worker_layout_problems(facts, run) + worker_layout_problems(facts, run, "draft")
    problems += draft_plan_problems(plan, run) + draft_message_problems(facts, run)
    problems += tensor_problems(facts, run, "draft")
    draft_estimate = {rp.rank: rp.draft_estimated_bytes for rp in plan.ranks}
    spec_bytes: dict = {}
    for f in facts:
        wf = f.workers.get("draft")
        if wf is not None and wf.measured_bytes != draft_estimate.get(wf.plan_rank):
            problems.append(Problem(f"rank {f.rank} draft: allocated {wf.measured_bytes} B, the plan's "
                                    f"draft_estimated_bytes {draft_estimate.get(wf.plan_rank)} B", rule="bytes",
                                    rank=f.rank))
    for f in facts:
        r, workers = f.rank, f.workers
        if set(workers) != {"target", "draft"}:
            problems.append(f"rank {r} hosts {sorted(workers)}, expected target and draft")
            continue
        problems += _target_problems(r, workers["target"], run, plan.n_blocks, spec_bytes)
        problems += _draft_problems(r, workers["draft"], run, plan.n_blocks)
        total = workers["target"].measured_bytes + workers["draft"].measured_bytes
        if total > budget:
            problems.append(f"rank {r}: target {workers['target'].measured_bytes} B + draft "
                            f"{workers['draft'].measured_bytes} B = {total} B > KV budget {budget} B")
    problems += leak_problems(facts)
    return problems


def _target_problems(r: int, wf, run, n: int, spec_bytes: dict) -> list[str]:
    """``spec_bytes``: the full layers a rank owns -> the spec's bytes of such a rank, filled as ranks ask (the
    ranks at one position of their groups own the same layers: asked once)."""
    s = oracle.split_size(run)
    got = tuple(sorted(wf.owned_full())) if s > 1 else None  # None: not split, every full layer
    out = []
    if wf.split_size != s:
        out.append(f"rank {r} target: split size {wf.split_size}, spec {s}")
    for layer in wf.layers:
        if layer.kind == "full" and not layer.owned and (layer.own_bytes or not layer.scratch_view):
            out.append(f"rank {r} target layer {layer.layer}: not owned but holds {layer.own_bytes} B of its own")
    want = spec_bytes.get(got)
    if want is None:
        want = spec_bytes[got] = (oracle.expected_rank_bytes(run, n, oracle.expected_full_layers(run.model)
                                                             if got is None else got)
                                  + oracle.expected_allocation_departure_bytes(run))
    if wf.measured_bytes != want:
        out.append(Problem(f"rank {r} target: allocated {wf.measured_bytes} B, spec {want} B for its layers",
                           rule="bytes", rank=r))
    return out


def _draft_problems(r: int, wf, run, n: int) -> list[str]:
    """The draft engine: never split, the target's block count, D bytes per block over its layers
    (FEATURE 6: the target's cache shape unless the draft body runs at TP 1)."""
    n_layers = oracle.draft_num_layers(run.draft)
    per_block = oracle.expected_draft_bytes_per_block(run)
    per_layer = per_block // n_layers if n_layers else 0
    out = []
    if (wf.split_size, wf.split_rank) != (1, 0):
        out.append(f"rank {r} draft: split size {wf.split_size} rank {wf.split_rank}, spec 1 / 0 (never split)")
    if wf.scratch_bytes or wf.scratch_tensors:
        out.append(f"rank {r} draft: holds a scratch of {wf.scratch_bytes} B, spec none")
    if wf.n_blocks != n:
        out.append(f"rank {r} draft: n_blocks {wf.n_blocks}, the target's is {n}")
    layers = {l.layer: l for l in wf.layers}
    if sorted(layers) != list(range(n_layers)):
        out.append(f"rank {r} draft: layers {sorted(layers)}, spec 0..{n_layers - 1}")
    for lid, layer in layers.items():
        want = n * per_layer
        if not layer.owned or layer.own_bytes != want:
            out.append(f"rank {r} draft layer {lid}: owned={layer.owned} with {layer.own_bytes} B, "
                       f"spec owned with {want} B")
    if wf.measured_bytes != n * per_block:
        out.append(Problem(f"rank {r} draft: allocated {wf.measured_bytes} B, spec {n * per_block} B "
                           f"({n} blocks x {per_block} B/block)", rule="bytes", rank=r))
    return out


SUITE = Suite(
    TC=TC,
    LEVEL="L2",
    TITLE="Speculative engine",
    cases=cases,
    body=standard_body,
    check=check,
    predict_owner_rule=owners_differ,
    predict_upstream_layout=upstream_worker_owners,
)
