"""What a TC case shows in its report: the implementation's numbers next to the spec's.

``report_view(facts)`` turns the per-rank facts of one case into two plain mappings
(JSON-friendly) that ``harness.reporting.attachments`` renders:

- ``layout``: per rank, the full layers the implementation's worker really owns
  (``owned``) and those the spec gives that rank (``expected_owned``, from
  ``harness.oracle``: round-robin over the full layers for the rank's split rank);
  the table marks every cell where the two differ.
- ``memory``: per rank, the implementation's estimate and the bytes the worker
  measured, the spec's bytes for the rank (``spec_bytes``), the spec's uniform
  (no split) peak and the per-rank KV budget; TC-07 adds the draft's bytes.

Expected values come from the oracle only, never from the plan under test. The plan
gives the block count the workers really allocated; the spec lines use the spec's
own block count (FEATURE section 6).

Facts are read through the accessors of ``harness.suites.facts``, so a rank fact may be
the frozen dataclass the ranks send or a mapping with the same field names; the views
need only these fields:

    rank fact:   rank, plan (rank 0), run (rank 0), error (rank 0), workers (role -> worker fact)
    worker fact: plan_rank, split_rank, measured_bytes, layers (each: layer, kind, owned)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Optional

from harness import oracle
from harness.suites.facts import fact_field, full_layers_held, owned_full, plan_of, rank_of, run_of, worker_of

TARGET, DRAFT = "target", "draft"


def _rows(facts: Sequence[Any], role: str) -> list[tuple[int, Any]]:
    return [(rank_of(f), worker_of(f, role)) for f in facts if worker_of(f, role) is not None]


# ---- spec numbers (oracle only) ---------------------------------------------------------------


def budget_bytes(run: Any) -> int:
    """The per-rank KV budget the case plans with (``cache.kv_budget_bytes``, else the hardware profile's)."""
    return oracle.run_budget_bytes(run)


def _model(run: Any, role: str) -> Any:
    return run.draft if role == DRAFT else run.model


def draft_bytes_per_block(run: Any) -> int:
    return oracle.expected_draft_bytes_per_block(run)  # D (FEATURE 6), 0 without a draft


def spec_block_counts(run: Any) -> tuple[int, int]:
    """(split, uniform) n_blocks the spec gives this run at its budget (a draft's bytes as additional)."""
    return oracle.expected_block_counts(run, budget_bytes(run))


def spec_owned(run: Any, plan_rank: int) -> list[int]:
    """Full layers the spec gives the target rank ``plan_rank``: its position in its split group from
    the oracle's groups (topology-aware), never the worker's own report of its split rank."""
    try:
        return list(oracle.expected_rank_owned_layers(run, plan_rank))
    except ValueError:  # no valid grouping: the checks report it; the view shows no expectation
        return []


def spec_rank_bytes(run: Any, plan_rank: int, n_blocks: int, role: str = TARGET) -> int:
    """The spec's bytes for one rank: target (owned + scratch + linear state) or the uniform draft."""
    if role == DRAFT:
        return oracle.expected_draft_rank_bytes(run, n_blocks)
    return oracle.expected_rank_bytes(run, n_blocks, spec_owned(run, plan_rank))


def spec_uniform_peak_bytes(run: Any, role: str = TARGET) -> int:
    """The spec's per-rank bytes without the split at the split's block count (every full layer owned):
    what a rank would need to hold as many tokens as the split gives it (above the budget when it helps)."""
    n_blocks, _ = spec_block_counts(run)
    if role == DRAFT:
        return spec_rank_bytes(run, 0, n_blocks, DRAFT)
    tp = oracle.attn_tp_size(run)
    per_layer = oracle.expected_layer_bytes_per_block(run.model, run.cache, tp)
    full = oracle.expected_full_layers(run.model)
    linear = oracle.expected_linear_state_bytes(run.model, run.cache, tp, budget_bytes(run))
    return n_blocks * sum(per_layer[layer] for layer in full) + linear


def _spec_applies(run: Any) -> bool:
    """False when the spec says the run must be refused (no layout to compare with)."""
    return oracle.expected_rejection(run) is None


def case_title(run: Any, role: str = TARGET) -> str:
    """``qwen3_5_moe, s 2, world 4`` (``draft deepseek_mtp of ...`` for the draft)."""
    model = _model(run, role)
    name = model.name
    head = f"{name}, s {oracle.split_size(run)}, world {run.parallel.world_size}"
    if run.parallel.dp_size > 1:
        head += f" (dp {run.parallel.dp_size})"
    return head if role == TARGET else f"draft {name} (never split) of {case_title(run)}"


# ---- views --------------------------------------------------------------------------------------


def layout_view(facts: Sequence[Any], role: str = TARGET) -> Optional[dict]:
    """Per rank: full layers owned by the worker and by the spec; None without a plan or rank facts."""
    plan, run = plan_of(facts), run_of(facts)
    rows = _rows(facts, role)
    if plan is None or not rows:
        return None
    num_layers = max((int(fact_field(layer, "layer")) for _, w in rows for layer in fact_field(w, "layers") or ()),
                     default=-1) + 1
    view = {
        "title": f"{role} KV layout: {case_title(run, role)}" if run is not None else f"{role} KV layout",
        "ranks": [rank for rank, _ in rows],
        "layers": list(range(num_layers)),
        "full_layers": sorted({layer for _, w in rows for layer in full_layers_held(w)}),
        "owned": {rank: owned_full(w) for rank, w in rows},
        "split_ranks": {rank: int(fact_field(w, "split_rank", 0)) for rank, w in rows},
    }
    if run is not None and (run.draft is not None if role == DRAFT else _spec_applies(run)):
        model = _model(run, role)
        if role == DRAFT:
            expected = {rank: list(oracle.expected_full_layers(model)) for rank, _ in rows}
        else:
            expected = {rank: spec_owned(run, int(fact_field(w, "plan_rank", rank))) for rank, w in rows}
        view["expected_full_layers"] = list(oracle.expected_full_layers(model))
        view["expected_owned"] = expected
    return view


def memory_view(facts: Sequence[Any], role: str = TARGET) -> Optional[dict]:
    """Keyword arguments of ``attachments.memory_chart_svg`` for the case (target and, with one, draft)."""
    plan, run = plan_of(facts), run_of(facts)
    rows = _rows(facts, role)
    if plan is None or not rows:
        return None
    estimated = {int(rp.rank): int(rp.estimated_bytes) for rp in plan.ranks}
    view: dict = {
        "ranks": [rank for rank, _ in rows],
        "estimated_bytes": [estimated.get(int(fact_field(w, "plan_rank", rank)), 0) for rank, w in rows],
        "measured_bytes": [int(fact_field(w, "measured_bytes", 0)) for _, w in rows],
        "title": f"Per-rank KV memory: {case_title(run)}" if run is not None else "Per-rank KV memory",
    }
    drafts = _rows(facts, DRAFT) if role == TARGET else []
    if drafts and len(drafts) == len(rows):
        view["draft_measured_bytes"] = [int(fact_field(w, "measured_bytes", 0)) for _, w in drafts]
        draft_estimated = {int(rp.rank): int(rp.draft_estimated_bytes) for rp in plan.ranks}
        view["draft_estimated_bytes"] = [draft_estimated.get(int(fact_field(w, "plan_rank", rank)), 0)
                                         for rank, w in drafts]
    if run is None:
        return view
    view["budget_bytes"] = budget_bytes(run)
    if _spec_applies(run):
        n_spec, _ = spec_block_counts(run)
        view["spec_bytes"] = [spec_rank_bytes(run, int(fact_field(w, "plan_rank", rank)), n_spec, role) for rank, w in rows]
        view["uniform_bytes"] = spec_uniform_peak_bytes(run, role)
        if "draft_measured_bytes" in view and run.draft is not None:
            view["draft_spec_bytes"] = [spec_rank_bytes(run, 0, n_spec, DRAFT) for _ in drafts]
    return view


def report_view(facts: Sequence[Any]) -> dict:
    """``layout`` and ``memory`` of the target, plus ``draft_layout`` when the case has a draft."""
    view = {"layout": layout_view(facts), "memory": memory_view(facts)}
    draft = layout_view(facts, DRAFT)
    if draft is not None:
        view["draft_layout"] = draft
    return view


def plan_report_view(facts: Sequence[Any]) -> dict:
    """A planning-only TC (no worker facts): the plan's owners per rank next to the spec's."""
    plan, run = plan_of(facts), run_of(facts)
    if plan is None:
        return {"layout": None, "memory": None}
    ranks = [int(rp.rank) for rp in plan.ranks]
    layout = {
        "title": f"planned KV layout: {case_title(run)}" if run is not None else "planned KV layout",
        "ranks": ranks, "layers": list(range(plan.num_layers)), "full_layers": list(plan.full_layers),
        "owned": {int(rp.rank): list(rp.owned_full_layers) for rp in plan.ranks},
        "split_ranks": {int(rp.rank): int(rp.split_rank) for rp in plan.ranks},
    }
    memory: dict = {"ranks": ranks, "estimated_bytes": [int(rp.estimated_bytes) for rp in plan.ranks],
                    "title": layout["title"].replace("planned KV layout", "Per-rank KV memory (planned)")}
    if run is not None and _spec_applies(run):
        layout["expected_full_layers"] = list(oracle.expected_full_layers(run.model))
        layout["expected_owned"] = {int(rp.rank): spec_owned(run, int(rp.rank)) for rp in plan.ranks}
        n_spec, _ = spec_block_counts(run)
        memory.update(budget_bytes=budget_bytes(run), uniform_bytes=spec_uniform_peak_bytes(run),
                      spec_bytes=[spec_rank_bytes(run, int(rp.rank), n_spec) for rp in plan.ranks])
    return {"layout": layout, "memory": memory}
