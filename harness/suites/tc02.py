"""TC-02 (L1) Memory estimation accuracy.

On every rank the plan's estimated bytes are within 5% of the bytes really
allocated; the block counts equal the spec's (FEATURE section 6, computed by
``harness.oracle``); the measured split peak does not exceed the uniform peak at
the same number of blocks.
"""

from __future__ import annotations

from harness import oracle
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

TC = "TC-02"
LEVEL = "L1"
TITLE = "Memory estimation accuracy"
CHECKS_OWNER_RULE = True
TOLERANCE = 0.05
body = standard_body
__all__ = ["TC", "LEVEL", "TITLE", "cases", "body", "check", "report_view", "summarize"]


def cases(matrix):
    """The standard axes plus TC-01's quantized-cache variants (scale bytes change the estimate)."""
    from harness.suites.tc01 import variant_cases

    return standard_cases(TC, matrix) + variant_cases(TC, matrix, ("int8", "fp8"))


def check(facts: list[dict], run) -> list[str]:
    if expected_rejection(run):
        return [] if master_error(facts) else ["master accepted a config the spec rejects"]
    if master_error(facts):
        return [f"master rejected a valid config: {master_error(facts)}"]
    plan, run = plan_of(facts), run_of(facts)
    tp = oracle.attn_tp_size(run)
    problems = []
    split_n, uniform_n = oracle.expected_block_counts(run, run.hardware.kv_budget_bytes)
    if plan.n_blocks != split_n:
        problems.append(f"n_blocks {plan.n_blocks} != spec {split_n}")
    if plan.uniform_n_blocks != uniform_n:
        problems.append(f"uniform_n_blocks {plan.uniform_n_blocks} != spec {uniform_n}")
    estimated = {rp.rank: rp.estimated_bytes for rp in plan.ranks}
    measured = {}
    for f in facts:
        wf = f["workers"]["target"]
        m, e = wf["measured_bytes"], estimated.get(wf["plan_rank"])
        measured[f["rank"]] = m
        if e is None:
            problems.append(f"rank {f['rank']}: no estimate in the plan")
        elif m == 0 or abs(e - m) > TOLERANCE * m:
            problems.append(f"rank {f['rank']}: estimated {e} B vs measured {m} B (more than {TOLERANCE:.0%} apart)")
    per_layer = oracle.expected_layer_bytes_per_block(run.model, run.cache, tp)
    uniform_peak = plan.n_blocks * sum(per_layer[l] for l in oracle.expected_full_layers(run.model)) \
        + oracle.expected_linear_state_bytes(run.model, run.cache, tp)
    peak_rank = max(measured, key=measured.get)
    if measured[peak_rank] > uniform_peak:
        problems.append(f"split peak {measured[peak_rank]} B on rank {peak_rank} > uniform peak {uniform_peak} B "
                        f"at the same {plan.n_blocks} blocks")
    return problems
