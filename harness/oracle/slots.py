"""FEATURE section 5: bytes per slot (KV, scales, index) and the linear state (slots per rank, bytes)."""

from __future__ import annotations

from functools import lru_cache, wraps
from typing import NamedTuple, Optional

from harness.oracle.inputs import (
    LINEAR_STATE_FULL_KV_MEMORY_RATIO,
    PADDING_LINEAR_STATE_SLOTS,
    QWEN3_5_TARGET_MODEL_TYPES,
    SCALE_BYTES,
    _opt,
    dtype_bytes,
    enable_prefix_cache,
    indexer_cache_dtype,
    max_linear_state_cache_slots,
    max_seqs_per_batch,
    num_speculative_tokens,
)
from harness.oracle.layers import expected_full_layers, expected_indexer, expected_linear_layer_count

# ---- section 5: bytes per slot ---------------------------------------------------------------


def kv_dtype_bytes(model, cache) -> int:
    """Section 5: d_kv, the KV cache element size (auto = model dtype)."""
    if cache.kv_cache_dtype == "auto":
        return dtype_bytes(model.dtype)
    return dtype_bytes(cache.kv_cache_dtype)


def kv_quantized(cache) -> bool:
    """Section 5: any KV dtype but ``auto`` carries scales (upstream ``scale_slot_size``)."""
    return cache.kv_cache_dtype != "auto"


def n_local_kv_heads(model, attn_tp: int) -> int:
    """Section 5: ``max(1, num_key_value_heads // attn_tp)``."""
    return max(1, model.num_key_value_heads // attn_tp)


def kv_slot_bytes(model, cache, attn_tp: int) -> int:
    """Section 5: the KV slot (upstream ``slot_size``) of one full-attention layer."""
    d_kv = kv_dtype_bytes(model, cache)
    if model.attention == "mla":
        return d_kv * (model.kv_lora_rank + model.qk_rope_head_dim)
    return 2 * d_kv * model.head_dim * n_local_kv_heads(model, attn_tp)


def scale_slot_bytes(model, cache, attn_tp: int) -> int:
    """Section 5: the scale slot (upstream ``scale_slot_size``); 0 unless quantized."""
    if not kv_quantized(cache):
        return 0
    if model.attention == "mla":
        return SCALE_BYTES
    return 2 * SCALE_BYTES * n_local_kv_heads(model, attn_tp)


def index_slot_bytes(model, cache) -> int:
    """Section 5: the indexer slot (upstream ``index_slot_size``): one head, model dtype, or
    ``index_head_dim + 4`` for an int8 indexer cache; 0 without an indexer."""
    if not expected_indexer(model):
        return 0
    if indexer_cache_dtype(cache) == "int8":
        return model.index_head_dim + SCALE_BYTES
    return dtype_bytes(model.dtype) * model.index_head_dim


def full_layer_slot_bytes(model, cache, attn_tp: int) -> int:
    """Section 5: bytes of one token slot of one full-attention layer: KV + scales + index."""
    return kv_slot_bytes(model, cache, attn_tp) + scale_slot_bytes(model, cache, attn_tp) + index_slot_bytes(model, cache)


def _memoized(compute):
    """``compute`` once per distinct (hashable) arguments: every check asks again, a report once per rank.
    Arguments that cannot be hashed (a mutable stand-in of a spec) are computed each time. What it returns is
    shared: its callers read it, never change it."""
    remembered = lru_cache(maxsize=4096)(compute)

    @wraps(compute)
    def once(*args, **kwargs):
        try:
            return remembered(*args, **kwargs)
        except TypeError:
            return compute(*args, **kwargs)

    return once


class SlotShape(NamedTuple):
    """What a token slot's bytes read of a cache (section 5): a key that two caches differing only in their budget
    share (the explorer aims a budget with the slot's bytes, then the checks ask them of the aimed cache)."""

    block_size: Optional[int]
    kv_cache_dtype: Optional[str]
    indexer_cache_dtype: str


def slot_shape(cache) -> SlotShape:
    """``cache``'s ``SlotShape`` (``full_layer_slot_bytes`` and the block size read nothing else of it)."""
    return SlotShape(getattr(cache, "block_size", None), getattr(cache, "kv_cache_dtype", None),
                     indexer_cache_dtype(cache))


def expected_layer_bytes_per_block(model, cache, attn_tp: int) -> dict:
    """Section 5: layer id -> KV bytes per block on one rank; 0 for linear-attention layers."""
    return _layer_bytes_per_block(model, slot_shape(cache), attn_tp)


@_memoized
def _layer_bytes_per_block(model, shape: SlotShape, attn_tp: int) -> dict:
    """``expected_layer_bytes_per_block`` once per distinct model, slot shape and TP (the shape stands for the
    cache: it has the fields the slot's bytes read)."""
    full = expected_full_layers(model)
    per_block = shape.block_size * full_layer_slot_bytes(model, shape, attn_tp) if full else 0
    out = dict.fromkeys(range(model.num_hidden_layers), 0)  # (in layer order, as a comprehension makes it)
    for layer in full:
        out[layer] = per_block
    return out


def expected_scratch_bytes_per_block(model, cache, attn_tp: int) -> int:
    """Section 6: the one shared scratch layer: one full layer, with the index slot if any
    layer has an indexer."""
    return _scratch_bytes_per_block(model, slot_shape(cache), attn_tp)


@_memoized
def _scratch_bytes_per_block(model, shape: SlotShape, attn_tp: int) -> int:
    """``expected_scratch_bytes_per_block`` once per distinct model, slot shape and TP (a split rank's bytes ask it,
    each slot's three sizes worked out anew: about 1 µs a time saved)."""
    return shape.block_size * full_layer_slot_bytes(model, shape, attn_tp)


def expected_full_bytes_per_block(model, cache, attn_tp: int) -> int:
    """Section 6: F, the uniform per-block cost: the sum over all full-attention layers."""
    return _full_bytes_per_block(model, slot_shape(cache), attn_tp)


@_memoized
def _full_bytes_per_block(model, shape: SlotShape, attn_tp: int) -> int:
    """``expected_full_bytes_per_block`` once per distinct model, slot shape and TP (summed once, not per ask)."""
    return sum(_layer_bytes_per_block(model, shape, attn_tp).values())


def expected_block_cost_bytes(model, cache, attn_tp: int) -> int:
    """Sections 5-6: F as the estimate divides by it (block count, linear-state cap): a model with
    no full-attention layer counts one layer's KV + scale, no index (upstream
    ``standard_full_cache_block_size_in_bytes`` takes max(full layers, 1), as ``Capacity`` does)."""
    if not expected_full_layers(model):
        return cache.block_size * (kv_slot_bytes(model, cache, attn_tp) + scale_slot_bytes(model, cache, attn_tp))
    return expected_full_bytes_per_block(model, cache, attn_tp)


def expected_num_speculative_tokens(model, cache, *, is_draft: bool = False) -> int:
    """Section 5: n_spec = ``num_speculative_tokens`` for a Qwen3.5 target engine, else 0."""
    if is_draft or model.model_type not in QWEN3_5_TARGET_MODEL_TYPES:
        return 0
    return num_speculative_tokens(cache)


def ssm_dtype(model, cache) -> str:
    """Section 5: d_ssm from the model's ``mamba_ssm_dtype`` (default: model dtype)."""
    name = getattr(model, "mamba_ssm_dtype", None)
    if name not in (None, "", "auto"):
        return str(name)
    return model.dtype


def linear_local_heads(model, attn_tp: int) -> tuple:
    """Section 5: (n_local_k_heads, n_local_v_heads) = max(1, heads // attn_tp): fewer heads than
    ranks are replicated (upstream ``LLMEngine``: ``std::max<int64_t>(1, linear_n_k_heads / world_size)``,
    and ``get_local_head_count`` in ``kv_cache_shape.cpp`` for the allocated state)."""
    return max(1, model.linear_num_key_heads // attn_tp), max(1, model.linear_num_value_heads // attn_tp)


def linear_conv_state_len(model, cache, *, is_draft: bool = False) -> int:
    """Section 5: ``linear_conv_kernel_dim - 1 + n_spec``."""
    return model.linear_conv_kernel_dim - 1 + expected_num_speculative_tokens(model, cache, is_draft=is_draft)


def expected_linear_state_bytes_per_slot(model, cache, attn_tp: int, *, is_draft: bool = False) -> int:
    """Section 5: ls = conv + recurrent state of one linear layer for one sequence slot
    (upstream ``linear_slot_size``); 0 for a model without GDN value heads."""
    if _opt(model, "linear_num_value_heads", 0) <= 0:
        return 0
    n_spec = expected_num_speculative_tokens(model, cache, is_draft=is_draft)
    d = dtype_bytes(model.dtype)
    d_ssm = dtype_bytes(ssm_dtype(model, cache))
    k_heads, v_heads = linear_local_heads(model, attn_tp)
    conv = (
        d
        * (2 * model.linear_key_head_dim * k_heads + model.linear_value_head_dim * v_heads)
        * (model.linear_conv_kernel_dim - 1 + n_spec)
    )
    recurrent = d_ssm * v_heads * model.linear_key_head_dim * model.linear_value_head_dim * (n_spec + 1)
    return conv + recurrent


def linear_state_slot_cap(budget_bytes: int, num_linear_layers: int, linear_slot_bytes: int,
                          full_bytes_per_block: int) -> int:
    """Section 5: cap = max(2, min((C - 1) // (L * ls), (C + 2F) // (L * ls + F)))."""
    if num_linear_layers <= 0 or linear_slot_bytes <= 0:
        return PADDING_LINEAR_STATE_SLOTS
    per_slot = num_linear_layers * linear_slot_bytes
    by_budget = (budget_bytes - 1) // per_slot
    balanced = (budget_bytes + PADDING_LINEAR_STATE_SLOTS * full_bytes_per_block) // (per_slot + full_bytes_per_block)
    return max(PADDING_LINEAR_STATE_SLOTS, min(by_budget, balanced))


def linear_state_slots(budget_bytes: int, num_linear_layers: int, linear_slot_bytes: int,
                       full_bytes_per_block: int, *, max_seqs: int, max_linear_slots: int,
                       prefix_cache: bool) -> int:
    """Section 5 (upstream ``calculate_linear_state_blocks``): the linear-state slots.

    ``max_linear_slots`` > 0: that + 2 (the caller refuses it above the cap; see
    ``expected_estimation_rejection``). Else without prefix cache
    ``max(2, min(max_seqs + 2, cap))``; with it ``min(max(2, int(C * 0.9 / 1.9 / (L * ls))), cap)``.
    No linear layers: 2."""
    if num_linear_layers <= 0 or linear_slot_bytes <= 0:
        return PADDING_LINEAR_STATE_SLOTS
    cap = linear_state_slot_cap(budget_bytes, num_linear_layers, linear_slot_bytes, full_bytes_per_block)
    if max_linear_slots > 0:
        return max_linear_slots + PADDING_LINEAR_STATE_SLOTS
    if not prefix_cache:
        return max(PADDING_LINEAR_STATE_SLOTS, min(max_seqs + PADDING_LINEAR_STATE_SLOTS, cap))
    per_slot = num_linear_layers * linear_slot_bytes
    fraction = LINEAR_STATE_FULL_KV_MEMORY_RATIO / (1.0 + LINEAR_STATE_FULL_KV_MEMORY_RATIO)
    auto = max(int(float(budget_bytes) * fraction / per_slot), PADDING_LINEAR_STATE_SLOTS)
    return min(auto, cap)


def expected_linear_state_slots(model, cache, attn_tp: int, budget_bytes: int, *, is_draft: bool = False) -> int:
    """Section 5: the slots a rank reserves for every linear layer at per-rank budget C."""
    return linear_state_slots(
        budget_bytes,
        expected_linear_layer_count(model),
        expected_linear_state_bytes_per_slot(model, cache, attn_tp, is_draft=is_draft),
        expected_block_cost_bytes(model, cache, attn_tp),
        max_seqs=max_seqs_per_batch(cache),
        max_linear_slots=max_linear_state_cache_slots(cache),
        prefix_cache=enable_prefix_cache(cache),
    )


@_memoized
def expected_linear_state_bytes(model, cache, attn_tp: int, budget_bytes: Optional[int] = None, *,
                                is_draft: bool = False) -> int:
    """Section 5: the per-rank linear-state reservation L * slots * ls at budget C.

    Since FEATURE v2 the slots depend on the budget: ``budget_bytes`` is required
    whenever the model has linear layers."""
    num_linear = expected_linear_layer_count(model)
    per_slot = expected_linear_state_bytes_per_slot(model, cache, attn_tp, is_draft=is_draft)
    if num_linear == 0 or per_slot == 0:
        return 0
    if budget_bytes is None:
        raise TypeError(
            "expected_linear_state_bytes: FEATURE v2 section 5 sizes linear-state slots from the "
            "per-rank budget; pass budget_bytes (e.g. oracle.run_budget_bytes(run))"
        )
    slots = expected_linear_state_slots(model, cache, attn_tp, budget_bytes, is_draft=is_draft)
    return num_linear * slots * per_slot
