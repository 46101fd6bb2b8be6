"""TC-01 (L1) Allocation correctness.

Each rank allocates exactly the layers the spec gives its POSITION in its split group
(groups from the parallel layout and the topology, ``harness.suites.ownership``; also on
a regrouped topology at world 4 and 8, where a position differs from ``rank % s``);
non-owned full layers hold zero bytes of their own (views of the rank's scratch layer)
and expose the same tensor names, shapes and dtypes as an owned layer (every cache
dtype); per-rank totals add up to the sum of per-layer bytes plus scratch (plus linear
state); nothing survives teardown. Every startup rule of FEATURE section 3 has a case
the implementation must refuse with a UserError naming the rule's field. Expected
values come from ``harness.oracle`` (FEATURE sections 3-7), not from the plan or the workers.
"""

from __future__ import annotations

from harness import oracle
from harness.suites import Suite
from harness.suites.case import Case
from harness.suites.checks import (
    leak_problems,
    ownership_problems,
    startup_problems,
    tensor_problems,
    view_problems,
    worker_layout_problems,
)
from harness.suites.expectations import Problem, expected_rejection, owners_differ, upstream_worker_owners
from harness.suites.facts import plan_of, run_of
from harness.suites.standard import (
    REGROUPED,
    profile_cases,
    regrouped_cases,
    spelling_cases,
    standard_body,
    standard_cases,
    value_dim_cases,
    variant_cases,
)

TC = "TC-01"


# One case per startup rule of FEATURE section 3, each breaking exactly that rule:
# (variant, model, layerwise option, parallel option, hardware, key overrides). The implementation
# must refuse with a UserError naming the field ``expectations.expected_rejection`` gives.
REJECTIONS = (
    ("s0", "deepseek_v32", "s2", "tp4", "cpu", ("layerwise.split_size=0",)),
    ("s-gt-tp", "deepseek_v32", "s2", "tp4", "cpu", ("layerwise.split_size=8",)),
    ("s-not-dividing-tp", "deepseek_v32", "s2", "tp4", "cpu", ("layerwise.split_size=3",)),
    ("world-not-dp-cp", "deepseek_v32", "s2", "tp4", "cpu", ("parallel.dp_size=3",)),
    ("unsupported-model", "llama3_8b", "s2", "tp4", "cpu", ()),
    ("cp2", "deepseek_v32", "s2", "tp4", "cpu", ("parallel.cp_size=2",)),
    ("kv-split", "deepseek_v32", "s2", "tp4", "cpu", ("parallel.kv_split_size=2",)),
    ("hostcache", "deepseek_v32", "s2", "tp4", "cpu", ("cache.host_blocks_factor=2.0",)),
    ("sleep-mode", "deepseek_v32", "s2", "tp4", "cpu", ("cache.enable_sleep_mode=true",)),
    ("xtensor", "qwen3_5_moe", "s2", "tp4", "cpu", ("cache.enable_xtensor=true",)),
    ("linear-and-indexer", "qwen3_5_moe", "s2", "tp4", "cpu", ("model.index_n_heads=64", "model.index_head_dim=128")),
    ("quantized-unsupported", "deepseek_v32", "s2", "tp4", "bi_v100", ("cache.kv_cache_dtype=int8",)),
    ("fp8-unsupported", "deepseek_v32", "s2", "tp4", "bi_v100", ("cache.kv_cache_dtype=fp8_e4m3",)),
    ("int8-indexer-unsupported", "deepseek_v32", "s2", "tp4", "bi_v100", ("cache.indexer_cache_dtype=int8",)),
    ("s-negative", "deepseek_v32", "s2", "tp4", "cpu", ("layerwise.split_size=-1",)),
    ("s0-flag-off", "deepseek_v32", "off", "tp4", "cpu", ("layerwise.split_size=0",)),
    ("cp2-dp2", "deepseek_v32", "s2", "dp2_tp4", "cpu", ("parallel.cp_size=2",)),
    ("s-not-dividing-tp-dp2", "qwen3_5_moe", "s2", "dp2_tp4", "cpu", ("layerwise.split_size=3",)),
    ("slots-over-cap", "qwen3_5_moe", "s2", "tp4", "cpu", ("cache.max_linear_state_cache_slots=100000",)),
    # two rules at once: the refusal names the first in upstream's order (FEATURE 3)
    ("model-before-tp-mod-s", "llama3_8b", "s2", "tp4", "cpu", ("layerwise.split_size=3",)),
    ("cp-before-quantized", "deepseek_v32", "s2", "tp4", "bi_v100", ("parallel.cp_size=2", "cache.kv_cache_dtype=int8")),
    # at dp 2, an s that divides the world but not the attention TP group, with a later master rule: the
    # refusal names s (attention tp = world / (dp * cp)), never the later rule (a port that checks s against
    # the world names the later field; alone, forming the split groups would name s all the same)
    ("s-world-not-tp-hostcache", "deepseek_v32", "s2", "dp2_tp4", "cpu",
     ("layerwise.split_size=8", "cache.host_blocks_factor=2.0")),
    ("s-world-not-tp-cp2", "deepseek_v32", "s2", "dp2_tp4", "cpu", ("layerwise.split_size=4", "parallel.cp_size=2")),
)
# Refusals that involve the draft: (variant, model, draft, layerwise option, key overrides).
DRAFT_REJECTIONS = (
    # a one-layer draft whose layer is linear (interval 4) and carries an indexer: FEATURE 3, never both
    ("draft-linear-and-indexer", "qwen3_5_moe", "qwen3_5_mtp", "s2",
     ("draft.full_attention_interval=4", "draft.index_n_heads=64", "draft.index_head_dim=128")),
    # a draft slot larger than the target's, its body not at TP 1: FEATURE 6
    ("draft-slot-larger", "qwen3_5_moe", "qwen3_5_mtp", "s2", ("draft.num_key_value_heads=16",)),
    # an indexed draft (DeepSeek-V3.2's MTP, its body at TP 1) with an unindexed target, the int8 indexer cache
    # on cards without one: FEATURE 3 refuses it wherever an indexed cache is allocated, the draft's included
    ("draft-only-indexed-int8", "deepseek_v3", "deepseek_v32_mtp", "s2",
     ("cache.indexer_cache_dtype=int8", "hardware.int8_indexer_cache=false", "draft.body_tp1=true")),
)
def cases(matrix):
    return (standard_cases(TC, matrix) + variant_cases(TC, matrix) + rejection_cases(TC, matrix)
            + regrouped_cases(TC, matrix, ("qwen3_5_moe", "deepseek_v32"), layerwise=("s2", "s4"))
            + profile_cases(TC, matrix) + draft_rejection_cases(TC, matrix) + spelling_cases(TC, matrix)
            + tp8_cases(TC, matrix) + value_dim_cases(TC, matrix))


def tp8_cases(tc: str, matrix) -> list:
    """Workers at attention TP 8 (TC-03 plans tp 8; here it is allocated), s = 4 on the regrouped topology."""
    if "deepseek_v32" not in matrix.models or not matrix.offers("layerwise", "s4") or matrix.topologies and \
            REGROUPED not in matrix.topologies:
        return []
    return [Case(tc=tc, model="deepseek_v32", layerwise="s4", parallel="tp8", implementation=impl, hardware="cpu",
                 variant=f"tp8-{REGROUPED}", extra=(f"hardware.topology={REGROUPED}", *matrix.extra_for("s4")))
            for impl in matrix.implementations]


def draft_rejection_cases(tc: str, matrix) -> list:
    """The draft refusals, on a matrix that runs the target and the split size; left out only where the
    matrix's configuration keys already break a rule (``removed_by_keys``)."""
    return [Case(tc=tc, model=model, draft=draft, layerwise=lw, parallel="tp4", implementation=impl, hardware="cpu",
                 variant=variant, extra=(*matrix.extra, *extra))
            for variant, model, draft, lw, extra in DRAFT_REJECTIONS
            if model in matrix.models and matrix.offers("layerwise", lw)
            and not _breaks_a_rule(model, lw, "tp4", "cpu", matrix.config_keys(), draft)
            for impl in matrix.implementations]


def rejection_cases(tc: str, matrix) -> list:
    """Every startup rule, on a matrix that runs the rule's model and split size. Each case breaks
    exactly one rule: where the matrix's configuration keys already break one, its cases are left out
    (``removed_by_keys``, which the session header lists); keys that only choose or locate the
    implementation never leave one out."""
    out = []
    for variant, model, lw, par, hw, extra in REJECTIONS:
        if not matrix.offers("layerwise", lw) or model not in matrix.models:
            continue
        if _breaks_a_rule(model, lw, par, hw, matrix.config_keys()):
            continue
        for impl in matrix.implementations:
            out.append(Case(tc=tc, model=model, layerwise=lw, parallel=par, implementation=impl, hardware=hw,
                            variant=variant, extra=tuple(matrix.extra) + extra))
    return out


def removed_by_keys(matrix) -> list[str]:
    """Ids of the refusal cases the matrix's configuration keys leave out (they break a rule already)."""
    rows = [(variant, model, "none", lw, par, hw) for variant, model, lw, par, hw, _ in REJECTIONS]
    rows += [(variant, model, draft, lw, "tp4", "cpu") for variant, model, draft, lw, _ in DRAFT_REJECTIONS]
    return [Case(tc=TC, model=model, draft=draft, layerwise=lw, parallel=par, implementation=impl, hardware=hw,
                 variant=variant, extra=tuple(matrix.extra)).id
            for variant, model, draft, lw, par, hw in rows
            if matrix.offers("layerwise", lw) and model in matrix.models
            and _breaks_a_rule(model, lw, par, hw, matrix.config_keys(), draft)
            for impl in matrix.implementations]


def _breaks_a_rule(model, lw, par, hw, keys, draft: str = "none") -> bool:
    """Whether the configuration keys ``keys`` alone make the spec refuse the case's base configuration
    (composed with the reference: keys that choose the implementation are not among them)."""
    if not keys:
        return False

    base = Case(tc=TC, model=model, layerwise=lw, parallel=par, implementation="reference", hardware=hw,
                draft=draft, extra=tuple(keys))
    return expected_rejection(base.resolved.run) is not None


def check(facts: list, run) -> list[str]:
    """Problems found (empty: pass). ``run`` is the composed RunSpec of the case."""
    verdict = startup_problems(facts, run)
    if verdict is not None:
        return verdict
    plan, run = plan_of(facts), run_of(facts)
    tp = oracle.attn_tp_size(run)
    s = oracle.split_size(run)
    full = oracle.expected_full_layers(run.model)
    per_layer = oracle.expected_layer_bytes_per_block(run.model, run.cache, tp)
    scratch = oracle.expected_scratch_bytes_per_block(run.model, run.cache, tp) if s > 1 else 0
    linear = oracle.expected_linear_allocated_bytes(run)  # upstream's tensor shapes (FEATURE 7)
    n = plan.n_blocks
    problems = []
    if tuple(plan.full_layers) != tuple(full):
        problems.append(f"plan full layers {list(plan.full_layers)} != spec {list(full)}")
    problems += ownership_problems(facts, run)
    problems += worker_layout_problems(facts, run)
    for f in facts:
        wf = f.workers["target"]
        r = f.rank
        got = sorted(wf.owned_full())
        for layer in wf.layers:
            lid = layer.layer
            if layer.kind == "linear":
                if not layer.owned or layer.own_bytes == 0:
                    problems.append(f"rank {r} layer {lid}: linear layer must be held on every rank")
            elif layer.owned:
                want = n * per_layer[lid]
                if layer.own_bytes != want:
                    problems.append(f"rank {r} layer {lid}: owns {layer.own_bytes} B, spec {want} B")
            else:
                if layer.own_bytes != 0 or not layer.scratch_view:
                    problems.append(f"rank {r} layer {lid}: not owned but holds {layer.own_bytes} B of its own "
                                    f"(scratch view: {layer.scratch_view})")
        want_total = sum(n * per_layer[l] for l in got) + n * scratch + linear
        if wf.measured_bytes != want_total:
            problems.append(Problem(f"rank {r}: allocated {wf.measured_bytes} B, spec sum of its owned layers + "
                                    f"scratch + linear state = {want_total} B", rule="bytes", rank=r))
        if wf.scratch_bytes != n * scratch:
            problems.append(f"rank {r}: scratch holds {wf.scratch_bytes} B, spec {n * scratch} B")
    problems += view_problems(facts)
    problems += tensor_problems(facts, run)
    problems += leak_problems(facts)
    return problems


SUITE = Suite(
    TC=TC,
    LEVEL="L1",
    TITLE="Allocation correctness",
    cases=cases,
    body=standard_body,
    check=check,
    removed_by_keys=removed_by_keys,
    predict_owner_rule=owners_differ,
    predict_upstream_layout=upstream_worker_owners,
)
