"""FEATURE section 7: the tensors a layer must expose (shape, torch dtype, bytes)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from harness.oracle.inputs import (
    attn_tp_size,
    draft_body_tp1,
    dtype_bytes,
    indexer_cache_dtype,
    run_budget_bytes,
    torch_dtype_name,
)
from harness.oracle.layers import expected_indexer, expected_linear_layers, is_full_attention_layer
from harness.oracle.slots import (
    expected_linear_state_bytes,
    expected_linear_state_slots,
    expected_num_speculative_tokens,
    kv_quantized,
    n_local_kv_heads,
    ssm_dtype,
)

# ---- section 7: tensors a layer must expose --------------------------------------------------


@dataclass(frozen=True)
class TensorSpec:
    """Section 7: one tensor's shape, torch dtype name and bytes."""

    shape: tuple
    dtype: str
    nbytes: int


def _tensor(shape, dtype: str) -> TensorSpec:
    numel = 1
    for dim in shape:
        numel *= dim
    return TensorSpec(shape=tuple(shape), dtype=torch_dtype_name(dtype), nbytes=numel * dtype_bytes(dtype))


def _block_shape(layout: str, n_blocks: int, block_size: int, heads: int, dim: int) -> tuple:
    if layout == "heads_major":  # ILU / MLU
        return (n_blocks, heads, block_size, dim)
    if layout == "tokens_major":  # CUDA / NPU
        return (n_blocks, block_size, heads, dim)
    raise ValueError(f"kv_layout {layout!r}; allowed: heads_major, tokens_major")


def full_layer_tensor_specs(model, cache, attn_tp: int, layout: str, n_blocks: int) -> dict:
    """Section 7 (upstream ``KVCacheShape`` + ``kv_cache_utils``): name -> TensorSpec of an
    owned full layer: ``latent``/``rope`` (MLA) or ``k``/``v`` (GQA) in the KV dtype;
    ``latent_scale`` or ``k_scale``/``v_scale`` (float32, the cache shape without its last
    dim) when quantized; ``index`` (one head; int8 or the model dtype) and ``index_scale``
    (float32, the index shape without its last dim) for an int8 indexer cache."""
    bs = cache.block_size
    kv_dtype = model.dtype if cache.kv_cache_dtype == "auto" else cache.kv_cache_dtype
    out = {}
    if model.attention == "mla":
        out["latent"] = _tensor(_block_shape(layout, n_blocks, bs, 1, model.kv_lora_rank), kv_dtype)
        out["rope"] = _tensor(_block_shape(layout, n_blocks, bs, 1, model.qk_rope_head_dim), kv_dtype)
        if kv_quantized(cache):
            out["latent_scale"] = _tensor(out["latent"].shape[:-1], "float32")
    else:
        heads = n_local_kv_heads(model, attn_tp)
        out["k"] = _tensor(_block_shape(layout, n_blocks, bs, heads, model.head_dim), kv_dtype)
        out["v"] = _tensor(_block_shape(layout, n_blocks, bs, heads, model.head_dim), kv_dtype)
        if kv_quantized(cache):
            out["k_scale"] = _tensor(out["k"].shape[:-1], "float32")
            out["v_scale"] = _tensor(out["v"].shape[:-1], "float32")
    if expected_indexer(model):
        int8 = indexer_cache_dtype(cache) == "int8"
        out["index"] = _tensor(_block_shape(layout, n_blocks, bs, 1, model.index_head_dim),
                               "int8" if int8 else model.dtype)
        if int8:
            out["index_scale"] = _tensor(out["index"].shape[:-1], "float32")
    return out


def linear_layer_tensor_specs(model, cache, attn_tp: int, slots: int, *, is_draft: bool = False) -> dict:
    """Section 7 (upstream ``init_conv_cache_shape`` / ``init_ssm_cache_shape``, every backend
    but MUSA): ``conv`` [slots, conv_state_len, 2 * key_dim * k_heads + key_dim * v_heads]
    (upstream counts the value channels with ``linear_key_head_dim``) in the model dtype;
    ``recurrent`` [slots * (n_spec + 1), v_heads, key_dim, value_dim] in the SSM dtype."""
    k_heads, v_heads = max(1, model.linear_num_key_heads // attn_tp), max(1, model.linear_num_value_heads // attn_tp)
    n_spec = expected_num_speculative_tokens(model, cache, is_draft=is_draft)
    kdim = model.linear_key_head_dim
    channels = kdim * k_heads * 2 + kdim * v_heads
    return {
        "conv": _tensor((slots, model.linear_conv_kernel_dim - 1 + n_spec, channels), model.dtype),
        "recurrent": _tensor((slots * (n_spec + 1), v_heads, kdim, model.linear_value_head_dim), ssm_dtype(model, cache)),
    }


def expected_full_layer_tensors(run, n_blocks: int) -> dict:
    """Section 7: the tensors of an owned full layer of the target, on the run's layout.
    A non-owned full layer's scratch view exposes exactly these too."""
    return full_layer_tensor_specs(run.model, run.cache, attn_tp_size(run), run.hardware.kv_layout, n_blocks)


def expected_scratch_tensors(run, n_blocks: int) -> dict:
    """Sections 6-7: the one scratch layer: the same tensors as an owned full layer."""
    return expected_full_layer_tensors(run, n_blocks)


def expected_linear_layer_tensors(run, budget_bytes: Optional[int] = None) -> dict:
    """Section 7: a linear layer's conv and recurrent state on every rank."""
    tp = attn_tp_size(run)
    budget = run_budget_bytes(run) if budget_bytes is None else budget_bytes
    slots = expected_linear_state_slots(run.model, run.cache, tp, budget)
    return linear_layer_tensor_specs(run.model, run.cache, tp, slots)


def expected_linear_allocated_bytes(run, budget_bytes: Optional[int] = None) -> int:
    """Section 7: the bytes a rank allocates for all its linear layers' state: each linear layer's
    conv and recurrent tensors in upstream's shapes (``expected_linear_layer_tensors``)."""
    linear = len(expected_linear_layers(run.model))
    if not linear:
        return 0
    return linear * sum(t.nbytes for t in expected_linear_layer_tensors(run, budget_bytes).values())


def expected_allocation_departure_bytes(run, budget_bytes: Optional[int] = None) -> int:
    """Section 7: allocated minus estimated bytes of a target rank. Upstream's conv state counts its
    value channels with ``linear_key_head_dim`` where section 5's estimate uses ``linear_value_head_dim``:
    L * slots * d * (key_dim - value_dim) * v_heads * conv_state_len, 0 when the two head dims are equal
    (every real model) or the model has no linear layer."""
    tp = attn_tp_size(run)
    budget = run_budget_bytes(run) if budget_bytes is None else budget_bytes
    return expected_linear_allocated_bytes(run, budget) - expected_linear_state_bytes(run.model, run.cache, tp, budget)


def expected_layer_tensors(run, layer_id: int, n_blocks: int, budget_bytes: Optional[int] = None) -> dict:
    """Section 7: the tensors layer ``layer_id`` of the target exposes (owned or a view)."""
    if is_full_attention_layer(run.model, layer_id):
        return expected_full_layer_tensors(run, n_blocks)
    return expected_linear_layer_tensors(run, budget_bytes)


def expected_draft_layer_tensors(run, n_blocks: int) -> dict:
    """Sections 6-7: a draft layer's tensors: the target's full-layer shape (upstream allocates
    draft KV with the target's KVCacheShape), or the draft's own at TP 1 with ``draft.body_tp1``."""
    if draft_body_tp1(run):
        return full_layer_tensor_specs(run.draft, run.cache, 1, run.hardware.kv_layout, n_blocks)
    return expected_full_layer_tensors(run, n_blocks)
