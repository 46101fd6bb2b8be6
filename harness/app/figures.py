"""Plan-only numbers of one configuration (``mode=plan``): what the README figures show.

No process group and no allocation: the implementation's ``plan`` only, so a BI-V100
profile (16 GiB of KV per rank) can be charted on any machine. Besides the plan's
own numbers, a row carries the spec's limit on the peak in layers: every full layer
when the split is off, else ``ceil(full layers / s)`` owned + 1 scratch (FEATURE
sections 4 and 6, from ``harness.oracle``), next to the plan's peak expressed in the
same unit (peak bytes per block / one full layer's bytes per block), and the peak
rank's bytes at the uniform block count (``same_capacity_peak_bytes``: what a rank
needs to hold as many tokens as without the split; the planned peak itself always
fills the budget).
"""

from __future__ import annotations

import math

from harness import oracle


def plan_numbers(impl, run) -> dict:
    """``impl``'s plan of ``run`` as a JSON-able dict; ``UserError`` when the implementation refuses it."""
    return summarize_plan(impl.plan(run), run)


def limit_layers(num_full_layers: int, split_size: int) -> int:
    """The spec's per-rank peak in layers: all full layers, or ceil(F / s) owned + 1 scratch."""
    if split_size <= 1:
        return num_full_layers
    return math.ceil(num_full_layers / split_size) + 1


def summarize_plan(plan, run) -> dict:
    tp = oracle.attn_tp_size(run)
    s = oracle.split_size(run)
    full = oracle.expected_full_layers(run.model)
    layer_bytes = oracle.expected_scratch_bytes_per_block(run.model, run.cache, tp)
    peak_rank_bytes = max(rp.estimated_bytes for rp in plan.ranks)
    peak_per_block = (peak_rank_bytes - plan.linear_state_bytes) // plan.n_blocks if plan.n_blocks else 0
    return {
        "implementation": plan.implementation,
        "n_blocks": plan.n_blocks,
        "uniform_n_blocks": plan.uniform_n_blocks,
        "peak_bytes": plan.peak_bytes,
        "mean_bytes": plan.mean_bytes,
        "uniform_peak_bytes": plan.uniform_peak_bytes,
        "savings_bytes": plan.savings_bytes,
        "capacity_gain": plan.capacity_gain,
        "budget_bytes": plan.budget_bytes,
        "linear_state_bytes": plan.linear_state_bytes,
        "full_layers": len(full),
        "layer_bytes_per_block": layer_bytes,
        "peak_bytes_per_block": peak_per_block,
        "same_capacity_peak_bytes": peak_per_block * plan.uniform_n_blocks + plan.linear_state_bytes,
        "peak_layers": round(peak_per_block / layer_bytes, 4) if layer_bytes else None,
        "limit_layers": limit_layers(len(full), s),
        "ranks": [{"rank": rp.rank, "estimated_bytes": rp.estimated_bytes} for rp in plan.ranks],
    }
