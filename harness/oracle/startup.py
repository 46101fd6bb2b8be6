"""FEATURE section 3: the startup rules a config breaks, in the contracted order (``Rejection``), and
sections 5-6: a config that passes startup but cannot be planned."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from harness.oracle.capacity import _draft_capacity_alone, _target_capacity_alone, expected_block_counts
from harness.oracle.inputs import (
    PADDING_LINEAR_STATE_SLOTS,
    SPEC_OWNER_RULE,
    SPLIT_MODEL_TYPES,
    UPSTREAM_SPLIT_MODEL_TYPES,
    _opt,
    attn_tp_size,
    draft_body_tp1,
    hardware_int8_indexer_cache,
    hardware_quantized_kv_dtypes,
    indexer_cache_dtype,
    max_linear_state_cache_slots,
    run_budget_bytes,
    split_size,
    upstream_split_size,
)
from harness.oracle.layers import expected_full_layers, expected_indexer, has_linear_attention_layers
from harness.oracle.memo import per_run_any_reserve
from harness.oracle.slots import kv_quantized, linear_state_slot_cap

# ---- section 3: startup rules ------------------------------------------------------------------


@dataclass(frozen=True)
class Rejection:
    """Section 3: the startup rule a config breaks: the config field named and why. A figure that cannot be
    planned (sections 5-6) may be named by any of the knobs that set it (``fields``)."""

    field: str
    reason: str
    alternatives: tuple = ()
    """Other fields an implementation may name for the same refusal (the budget has several knobs)."""

    @property
    def fields(self) -> tuple:
        return (self.field, *self.alternatives)


BUDGET_FIELDS = ("cache.kv_budget_bytes", "hardware.reserved_bytes_per_card", "hardware.hbm_bytes_per_card",
                 "cache.max_seqs_per_batch", "cache.block_size")
"""What an implementation may name when the per-rank budget holds no block, or nothing after the linear state:
the budget (``cache.kv_budget_bytes``, else the profile's HBM less its reserve), or what sizes the linear
state and one block."""


def _model_rejection(model, prefix: str) -> Optional[Rejection]:
    if has_linear_attention_layers(model) and expected_indexer(model):
        return Rejection(f"{prefix}.index_n_heads",
                         f"{model.model_type} has both linear-attention layers and a DSA indexer")
    return None


@per_run_any_reserve  # (no rule reads the reserve per card: a variant at another reserve shares the answer)
def expected_rejection(run) -> Optional[Rejection]:
    """Section 3: the FIRST startup rule the config breaks, in the contracted order, or None."""
    return _rejection(run, split_size(run), SPLIT_MODEL_TYPES)


def expected_upstream_rejection(run) -> Optional[Rejection]:
    """Sections 2-3 as upstream xLLM at 494f293b5 decides them: the same rules in the same order,
    but no enable flag (s > 1 alone is active) and only upstream's model types supported."""
    return _rejection(run, upstream_split_size(run), UPSTREAM_SPLIT_MODEL_TYPES)


UPSTREAM_BACKEND_QUANTIZED_CACHES: dict[str, tuple[tuple[str, ...], bool]] = {
    "mlu": (("int8",), True),
    "npu": ((), True),
}
"""Section 3, upstream's compiled worker per backend define (``USE_MLU`` -> ``mlu``): (the int8-family KV
dtypes it allocates, whether it allocates an int8 indexer cache). Every other backend (``ilu``, ``cuda``,
``cpu``): neither. Its worker stops only on ``kv_cache_dtype == "int8"`` (an fp8 KV dtype is not its
quantization); the int8 indexer stops in the cache's allocation, where an indexed cache is allocated."""


def expected_upstream_worker_stop(run, backend: str) -> Optional[Rejection]:
    """Section 3: where upstream's worker compiled for ``backend`` stops on a quantized cache, whatever the
    hardware profile allows (the CPU simulation allows them so their byte math is covered; upstream's own
    build does not): an int8 KV cache except on MLU (``LOG(FATAL)`` in ``allocate_kv_cache_storage``), then an
    int8 indexer cache except on NPU and MLU (a ``CHECK`` in the indexer cache's allocation). None: it
    allocates."""
    kv_dtypes, int8_indexer = UPSTREAM_BACKEND_QUANTIZED_CACHES.get(backend, ((), False))
    cache, draft = run.cache, getattr(run, "draft", None)
    if cache.kv_cache_dtype == "int8" and "int8" not in kv_dtypes:
        return Rejection("cache.kv_cache_dtype", f"upstream's worker built for {backend} stops on an int8 KV cache "
                                                 f"(MLU only)")
    indexed = expected_indexer(run.model) or (draft is not None and expected_indexer(draft))
    if indexer_cache_dtype(cache) == "int8" and indexed and not int8_indexer:
        return Rejection("cache.indexer_cache_dtype", f"upstream's cache allocation built for {backend} stops on an "
                                                      f"int8 indexer cache (NPU and MLU only)")
    return None


def _rejection(run, active_split: int, model_types: tuple) -> Optional[Rejection]:
    """The first rule broken, in upstream's order (FEATURE 3): the master's rules (s >= 1, whole
    attention TP, then with the split active the model type before attention tp % s, then host
    cache, cp, KV split), then the worker-side CHECKs (quantized caches, linear + indexer, sleep
    mode, xtensor) that run once the engine starts its workers."""
    p, cache, hw = run.parallel, run.cache, run.hardware
    s = run.layerwise.split_size
    if s < 1:
        return Rejection("layerwise.split_size", f"layerwise_split_size must be >= 1, got {s}")
    if p.world_size % (p.dp_size * p.cp_size) != 0:
        return Rejection("parallel.world_size",
                         f"world_size {p.world_size} is not divisible by dp_size * cp_size = {p.dp_size * p.cp_size}")
    active = active_split > 1
    if active and run.model.model_type not in model_types:
        return Rejection("model.model_type",
                         f"layerwise split does not support {run.model.model_type} (supported: {', '.join(model_types)})")
    tp = attn_tp_size(run)
    if tp % s != 0:
        return Rejection("layerwise.split_size", f"attention tp size {tp} is not divisible by layerwise_split_size {s}")
    if active and _opt(cache, "host_blocks_factor", 0.0) > 1:
        return Rejection("cache.host_blocks_factor", "layerwise split does not support the host cache (host_blocks_factor > 1)")
    if active and p.cp_size > 1:
        return Rejection("parallel.cp_size", f"layerwise split does not support context parallel (cp_size {p.cp_size})")
    kv_split = _opt(p, "kv_split_size", 1)
    effective = p.cp_size if kv_split == 0 else kv_split
    if active and effective > 1:
        return Rejection("parallel.kv_split_size", f"layerwise split does not support KV split (effective kv_split_size {effective})")
    # worker-side CHECKs, after the master's
    if kv_quantized(cache) and cache.kv_cache_dtype not in hardware_quantized_kv_dtypes(hw):
        allowed = hardware_quantized_kv_dtypes(hw)
        return Rejection("cache.kv_cache_dtype",
                         f"{cache.kv_cache_dtype} KV cache is not supported on {hw.name} "
                         f"(supported: {', '.join(('auto',) + tuple(allowed))})")
    draft = getattr(run, "draft", None)
    indexed = expected_indexer(run.model) or (draft is not None and expected_indexer(draft))
    # upstream's CHECK fires only where an indexed cache is allocated (its own
    # kv_cache_test IndexerInt8WithoutIndexerDoesNotCreateScaleShape accepts int8 without one)
    if indexer_cache_dtype(cache) == "int8" and indexed and not hardware_int8_indexer_cache(hw):
        return Rejection("cache.indexer_cache_dtype", f"int8 indexer cache is not supported on {hw.name} (supported: auto)")
    found = _model_rejection(run.model, "model")
    if found is None and draft is not None:
        found = _model_rejection(draft, "draft")
    if found is not None:
        return found
    if active and _opt(cache, "enable_sleep_mode", False):
        return Rejection("cache.enable_sleep_mode", "layerwise split does not support sleep mode")
    if active and _opt(cache, "enable_xtensor", False):
        return Rejection("cache.enable_xtensor", "layerwise split does not support xtensor")
    return None


@per_run_any_reserve  # (the reserve reaches it only through the per-rank budget, the same for the variant)
def expected_estimation_rejection(run, budget_bytes: Optional[int] = None) -> Optional[Rejection]:
    """Sections 5-6: a config that passes startup but cannot be planned (upstream CHECKs):
    explicit linear-state slots above the cap, no memory left after the linear state, a
    draft slot larger than the target's, no split rank owning a layer, or n_blocks < 1.
    Field names here are the oracle's own (not part of the contracted startup list)."""
    budget = run_budget_bytes(run) if budget_bytes is None else budget_bytes
    model, cache = run.model, run.cache
    target = _target_capacity_alone(run, budget, SPEC_OWNER_RULE, 1)
    requested = max_linear_state_cache_slots(cache)
    if requested > 0 and target.num_linear_attention_layers > 0 and target.linear_slot_size > 0:
        cap = linear_state_slot_cap(budget, target.num_linear_attention_layers, target.linear_slot_size,
                                    target.full_bytes_per_block)
        if requested + PADDING_LINEAR_STATE_SLOTS > cap:
            return Rejection("cache.max_linear_state_cache_slots",
                             f"{requested} + 2 linear-state slots exceed the {cap} that fit in {budget} B")
    if budget - target.linear_cache_bytes <= 0:
        return Rejection("cache.kv_budget_bytes", "no memory left for full-attention KV after the linear state",
                         BUDGET_FIELDS[1:])
    if getattr(run, "draft", None) is not None and not draft_body_tp1(run):
        draft = _draft_capacity_alone(run, budget)
        if draft.full_slot_size > target.full_slot_size:
            return Rejection("draft", f"draft slot {draft.full_slot_size} B exceeds the target slot {target.full_slot_size} B")
    if split_size(run) > 1 and not expected_full_layers(model):
        return Rejection("layerwise.split_size", "no split rank owns a full-attention layer")
    n_blocks, _ = expected_block_counts(run, budget)
    if n_blocks < 1:
        return Rejection("cache.kv_budget_bytes", f"no memory for one KV block (n_blocks {n_blocks})",
                         BUDGET_FIELDS[1:])
    return None
