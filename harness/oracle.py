"""Independent expected values for the TC suites, written straight from FEATURE.md sections 4-6.

This module is the tests' source of truth: it never imports an implementation, and it
is kept deliberately plain (loops, one formula per function) so a reviewer can check
it against FEATURE.md line by line. All byte counts are per rank.

Assumptions where FEATURE.md leaves a choice (say so if an implementation disagrees):
- KV heads per rank: ``max(1, heads // attn_tp)``; GDN heads per rank: ``heads // attn_tp``.
- Every full-attention layer of a model with ``index_n_heads > 0`` carries an indexer.
- The index slot uses the model dtype unless ``index_cache_dtype`` is ``int8``.
- GDN conv state uses the model dtype, the recurrent state ``ssm_cache_dtype``.
- ``additional_bytes_per_block`` (a draft's KV) is added to the per-block cost of both
  the split and the uniform count, so target and draft fit together either way.
"""

from __future__ import annotations

from implementations.specs import DTYPE_BYTES, CacheSpec, ModelSpec, RunSpec

QUANTIZED_KV_DTYPES = ("int8", "fp8_e4m3", "fp8_e5m2")
FULL_TYPES = ("full_attention", "attention", "indexed_attention")
SCALE_BYTES = 4  # one float32 scale per head and token


def attn_tp_size(run: RunSpec) -> int:
    return run.parallel.world_size // (run.parallel.dp_size * run.parallel.cp_size)


def split_size(run: RunSpec) -> int:
    """The effective s: 1 unless layerwise split is enabled with s > 1."""
    if run.layerwise.enable and run.layerwise.split_size > 1:
        return run.layerwise.split_size
    return 1


# ---- section 4: which layers are full attention ------------------------------------


def expected_full_layers(model: ModelSpec) -> tuple[int, ...]:
    full = []
    for layer in range(model.num_hidden_layers):
        if model.layer_types is not None:
            is_full = model.layer_types[layer] in FULL_TYPES
        elif model.full_attention_interval <= 1:
            is_full = True
        else:
            is_full = (layer + 1) % model.full_attention_interval == 0
        if is_full:
            full.append(layer)
    return tuple(full)


def expected_linear_layers(model: ModelSpec) -> tuple[int, ...]:
    full = expected_full_layers(model)
    return tuple(layer for layer in range(model.num_hidden_layers) if layer not in full)


def expected_indexer(model: ModelSpec) -> bool:
    return model.index_n_heads > 0


# ---- section 5: bytes ----------------------------------------------------------------


def kv_dtype_bytes(model: ModelSpec, cache: CacheSpec) -> int:
    if cache.kv_cache_dtype == "auto":
        return DTYPE_BYTES[model.dtype]
    return DTYPE_BYTES[cache.kv_cache_dtype]


def full_layer_slot_bytes(model: ModelSpec, cache: CacheSpec, attn_tp: int) -> int:
    """Bytes of one token slot of one full-attention layer: KV + scales + index."""
    d = DTYPE_BYTES[model.dtype]
    d_kv = kv_dtype_bytes(model, cache)
    quantized = cache.kv_cache_dtype in QUANTIZED_KV_DTYPES

    if model.attention == "mla":
        slot = d_kv * (model.kv_lora_rank + model.qk_rope_head_dim)
        scale = SCALE_BYTES if quantized else 0
    else:
        n_local_kv_heads = max(1, model.num_key_value_heads // attn_tp)
        slot = 2 * d_kv * model.head_dim * n_local_kv_heads
        scale = 2 * SCALE_BYTES * n_local_kv_heads if quantized else 0

    index = 0
    if expected_indexer(model):
        if cache.index_cache_dtype == "int8":
            index = model.index_head_dim + SCALE_BYTES
        else:
            index = d * model.index_head_dim
    return slot + scale + index


def expected_layer_bytes_per_block(model: ModelSpec, cache: CacheSpec, attn_tp: int) -> dict[int, int]:
    """Layer id -> KV bytes per block on one rank; 0 for linear-attention layers."""
    full = expected_full_layers(model)
    per_layer = {}
    for layer in range(model.num_hidden_layers):
        if layer in full:
            per_layer[layer] = cache.block_size * full_layer_slot_bytes(model, cache, attn_tp)
        else:
            per_layer[layer] = 0
    return per_layer


def expected_scratch_bytes_per_block(model: ModelSpec, cache: CacheSpec, attn_tp: int) -> int:
    """Bytes per block of the one shared scratch layer: the largest full layer."""
    return max(expected_layer_bytes_per_block(model, cache, attn_tp).values())


def expected_full_bytes_per_block(model: ModelSpec, cache: CacheSpec, attn_tp: int) -> int:
    """Sum over all full-attention layers: the uniform per-block cost (also a draft's `additional`)."""
    return sum(expected_layer_bytes_per_block(model, cache, attn_tp).values())


def expected_linear_state_bytes_per_slot(model: ModelSpec, cache: CacheSpec, attn_tp: int) -> int:
    """Conv + recurrent state of one linear-attention layer for one sequence slot."""
    d = DTYPE_BYTES[model.dtype]
    d_ssm = d if cache.ssm_cache_dtype == "auto" else DTYPE_BYTES[cache.ssm_cache_dtype]
    n_local_k_heads = model.linear_num_key_heads // attn_tp
    n_local_v_heads = model.linear_num_value_heads // attn_tp
    conv = (
        d
        * (2 * model.linear_key_head_dim * n_local_k_heads + model.linear_value_head_dim * n_local_v_heads)
        * (model.linear_conv_kernel_dim - 1)
    )
    recurrent = d_ssm * n_local_v_heads * model.linear_key_head_dim * model.linear_value_head_dim
    return conv + recurrent


def expected_linear_state_bytes(model: ModelSpec, cache: CacheSpec, attn_tp: int) -> int:
    """The per-rank reservation for all linear layers (slots = max_seqs_per_batch + 2)."""
    slots = cache.max_seqs_per_batch + 2
    total = 0
    for _layer in expected_linear_layers(model):
        total += expected_linear_state_bytes_per_slot(model, cache, attn_tp) * slots
    return total


# ---- section 4: split groups and ownership ---------------------------------------------


def expected_owner(full_layers: tuple[int, ...] | list[int], split_size: int) -> dict[int, int]:
    """Round-robin over full layers: the k-th full layer is owned by split rank k % s."""
    owner = {}
    for k, layer in enumerate(full_layers):
        owner[layer] = k % split_size
    return owner


def expected_upstream_owner(full_layers: tuple[int, ...] | list[int], split_size: int) -> dict[int, int]:
    """Upstream xLLM's rule, layer_id % s (wrong on hybrid models; see FEATURE section 4)."""
    owner = {}
    for layer in full_layers:
        owner[layer] = layer % split_size
    return owner


def expected_split_groups_consecutive(world: int, dp: int, cp: int, s: int) -> list[list[int]]:
    """Consecutive groups of s ranks inside each attention TP group, in rank order."""
    tp = world // (dp * cp)
    groups = []
    for dp_rank in range(dp):
        for cp_rank in range(cp):
            tp_group = [dp_rank * (cp * tp) + cp_rank * tp + tp_rank for tp_rank in range(tp)]
            for start in range(0, tp, s):
                groups.append(tp_group[start : start + s])
    return groups


# ---- section 6: block count and per-rank bytes -----------------------------------------


def expected_block_counts(
    run: RunSpec, budget_bytes: int, additional_bytes_per_block: int = 0
) -> tuple[int, int]:
    """(split n_blocks, uniform n_blocks) for one per-rank KV budget.

    With split inactive (s = 1) both are the uniform count. A value < 1 (or 0 when no
    split rank owns a layer) means the implementation must refuse the configuration.
    """
    model, cache = run.model, run.cache
    tp = attn_tp_size(run)
    per_layer = expected_layer_bytes_per_block(model, cache, tp)
    full = expected_full_layers(model)
    available = budget_bytes - expected_linear_state_bytes(model, cache, tp)

    uniform_cost = 0
    for layer in full:
        uniform_cost += per_layer[layer]
    uniform_cost += additional_bytes_per_block
    uniform_n_blocks = available // uniform_cost

    s = split_size(run)
    if s == 1:
        return uniform_n_blocks, uniform_n_blocks

    owner = expected_owner(full, s)
    scratch = expected_scratch_bytes_per_block(model, cache, tp)
    split_n_blocks = None
    for split_rank in range(s):
        owned = [layer for layer in full if owner[layer] == split_rank]
        if not owned:
            continue
        cost = sum(per_layer[layer] for layer in owned) + scratch + additional_bytes_per_block
        n_blocks = available // cost
        if split_n_blocks is None or n_blocks < split_n_blocks:
            split_n_blocks = n_blocks
    if split_n_blocks is None:
        split_n_blocks = 0
    return split_n_blocks, uniform_n_blocks


def expected_rank_bytes(
    run: RunSpec, n_blocks: int, owned_layers, *, include_linear_state: bool = True
) -> int:
    """Bytes one rank allocates: its owned full layers, one scratch layer when split is
    active and some full layer is not its own, and (by default) its linear-layer state."""
    model, cache = run.model, run.cache
    tp = attn_tp_size(run)
    per_layer = expected_layer_bytes_per_block(model, cache, tp)
    owned = set(owned_layers)

    per_block = 0
    for layer in owned:
        per_block += per_layer[layer]
    not_owned = [layer for layer in expected_full_layers(model) if layer not in owned]
    if split_size(run) > 1 and not_owned:
        per_block += expected_scratch_bytes_per_block(model, cache, tp)

    total = n_blocks * per_block
    if include_linear_state:
        total += expected_linear_state_bytes(model, cache, tp)
    return total
