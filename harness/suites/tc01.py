"""TC-01 (L1) Allocation correctness.

Each rank allocates exactly the layers the layout gives it; non-owned full layers
hold zero bytes of their own (views of the rank's scratch layer); per-rank totals
add up to the sum of per-layer bytes plus scratch (plus linear state). Expected
values come from ``harness.oracle`` (FEATURE sections 4-7), not from the plan.
"""

from __future__ import annotations

from harness import oracle
from harness.suites.case import Case
from harness.suites.common import (
    expected_rejection,
    master_error,
    plan_of,
    report_view,
    run_of,
    standard_body,
    standard_cases,
    summarize,
)

TC = "TC-01"
LEVEL = "L1"
TITLE = "Allocation correctness"
CHECKS_OWNER_RULE = True
body = standard_body
__all__ = ["TC", "LEVEL", "TITLE", "cases", "body", "check", "report_view", "summarize"]


# Startup rules (FEATURE section 3) and exact byte math of quantized caches (section 5),
# each on one supported model: (variant, layerwise option, parallel option, key overrides).
VARIANTS = (
    ("cp2", "s2", "dp2_tp4", ("parallel.dp_size=1", "parallel.cp_size=2")),
    ("hostcache", "s2", "tp4", ("cache.host_blocks_factor=2.0",)),
    ("int8", "s2", "tp4", ("cache.kv_cache_dtype=int8", "cache.indexer_cache_dtype=int8")),
    ("fp8", "s4", "tp4", ("cache.kv_cache_dtype=fp8_e4m3",)),
)
VARIANT_MODELS = ("deepseek_v32", "qwen3_5_moe")


def cases(matrix):
    return standard_cases(TC, matrix) + variant_cases(TC, matrix)


def variant_cases(tc: str, matrix, names=None) -> list:
    out = []
    for variant, lw, par, extra in VARIANTS:
        if names is not None and variant not in names:
            continue
        if lw not in matrix.layerwise:
            continue  # a narrowed matrix (one job's split size) keeps only its own variants
        for model in (m for m in VARIANT_MODELS if m in matrix.models):
            for impl in matrix.implementations:
                out.append(Case(tc=tc, model=model, layerwise=lw, parallel=par, implementation=impl,
                                hardware=matrix.hardware[0], variant=variant, extra=tuple(matrix.extra) + extra))
    return out


def check(facts: list[dict], run) -> list[str]:
    """Problems found (empty: pass). ``run`` is the composed RunSpec of the case."""
    reason = expected_rejection(run)
    if reason:
        err = master_error(facts)
        if not err:
            return [f"master accepted a config the spec rejects ({reason})"]
        return []
    if master_error(facts):
        return [f"master rejected a valid config: {master_error(facts)}"]
    plan, run = plan_of(facts), run_of(facts)
    tp = oracle.attn_tp_size(run)
    s = oracle.split_size(run)
    full = oracle.expected_full_layers(run.model)
    per_layer = oracle.expected_layer_bytes_per_block(run.model, run.cache, tp)
    owner = oracle.expected_owner(full, s)
    scratch = oracle.expected_scratch_bytes_per_block(run.model, run.cache, tp) if s > 1 else 0
    linear = oracle.expected_linear_state_bytes(run.model, run.cache, tp)
    n = plan.n_blocks
    problems = []
    if tuple(plan.full_layers) != tuple(full):
        problems.append(f"plan full layers {list(plan.full_layers)} != spec {list(full)}")
    for f in facts:
        wf = f["workers"]["target"]
        r = f["rank"]
        mine = sorted(l for l, o in owner.items() if o == wf["split_rank"]) if s > 1 else list(full)
        got = sorted(l["layer"] for l in wf["layers"] if l["kind"] == "full" and l["owned"])
        if got != mine:
            problems.append(f"rank {r} (split rank {wf['split_rank']}) owns full layers {got}, spec says {mine}")
        for layer in wf["layers"]:
            lid = layer["layer"]
            if layer["kind"] == "linear":
                if not layer["owned"] or layer["own_bytes"] == 0:
                    problems.append(f"rank {r} layer {lid}: linear layer must be held on every rank")
            elif layer["owned"]:
                want = n * per_layer[lid]
                if layer["own_bytes"] != want:
                    problems.append(f"rank {r} layer {lid}: owns {layer['own_bytes']} B, spec {want} B")
            else:
                if layer["own_bytes"] != 0 or not layer["scratch_view"]:
                    problems.append(f"rank {r} layer {lid}: not owned but holds {layer['own_bytes']} B of its own "
                                    f"(scratch view: {layer['scratch_view']})")
        want_total = sum(n * per_layer[l] for l in mine) + n * scratch + linear
        if wf["measured_bytes"] != want_total:
            problems.append(f"rank {r}: allocated {wf['measured_bytes']} B, spec sum of owned layers + scratch + "
                            f"linear state = {want_total} B")
        if wf["scratch_bytes"] != n * scratch:
            problems.append(f"rank {r}: scratch holds {wf['scratch_bytes']} B, spec {n * scratch} B")
    return problems
