"""Independent expected values for the TC suites, written from FEATURE.md (version 2).

This module is the tests' source of truth. It imports nothing from ``implementations/``
(not even a dtype table): it reads the harness's ``RunSpec`` by attribute only, the
topology fixtures and gflag spellings with its own small readers
(``harness/_oracle_formats.py``), and follows upstream xLLM at 494f293b5
(``kv_cache_estimation.cpp``, ``kv_cache_shape.cpp``, ``kv_cache_utils.cpp``,
``speculative_engine.cpp``, ``layerwise_split_layout.h``) wherever FEATURE.md says the
rule is upstream's. It is kept deliberately plain (loops, one formula per function) so
a reviewer can check it against FEATURE.md line by line. All byte counts are per rank.

Inputs newer than some RunSpecs are read with their documented defaults when absent:
``cache.max_seqs_per_batch`` (200), ``cache.max_linear_state_cache_slots`` (0),
``cache.enable_prefix_cache`` (True), ``cache.num_speculative_tokens`` (0),
``cache.indexer_cache_dtype`` (auto),
``cache.kv_budget_bytes`` (0: the hardware profile's budget), ``draft.body_tp1`` (False;
read from the run, ``run.draft_body_tp1``, or the draft model spec), model
``mamba_ssm_dtype`` (the model dtype) and ``num_nextn_predict_layers`` (0: every layer of a
draft spec), hardware ``quantized_kv_cache_dtypes`` and ``int8_indexer_cache`` (all
allowed on a ``cpu`` profile, none elsewhere).

Choices where FEATURE.md leaves one (say so if an implementation disagrees):
- KV heads per rank ``max(1, heads // attn_tp)``; GDN heads per rank ``heads // attn_tp``.
- Every full-attention layer of a model with ``index_n_heads > 0`` carries an indexer.
- Split groups on a non-flat topology: the partition of each TP group whose sorted
  vector of per-group worst links is lexicographically best (so the worst link first,
  then the next worst, ...); ties: the lexicographically smallest partition, which is
  upstream's consecutive grouping whenever that one is among the best. A rank's split
  rank is its index in its group, the group sorted by global rank.
- Peak, mean and savings are over the target's KV per rank (the draft's KV is reported
  separately); mean is the floor of the average.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache, lru_cache
from pathlib import Path
from typing import Optional, Sequence

from harness import _oracle_formats as formats

# ---- constants (the oracle's own; FEATURE sections 3 and 5) ---------------------------

DTYPE_BYTES = {
    "bfloat16": 2, "bf16": 2, "float16": 2, "half": 2, "fp16": 2,
    "float32": 4, "float": 4, "fp32": 4,
    "int8": 1, "fp8_e4m3": 1, "fp8_e5m2": 1, "float8_e4m3fn": 1, "float8_e5m2": 1,
}
TORCH_DTYPE_NAMES = {
    "bfloat16": "bfloat16", "bf16": "bfloat16", "float16": "float16", "half": "float16", "fp16": "float16",
    "float32": "float32", "float": "float32", "fp32": "float32", "int8": "int8",
    "fp8_e4m3": "float8_e4m3fn", "fp8_e5m2": "float8_e5m2",
    "float8_e4m3fn": "float8_e4m3fn", "float8_e5m2": "float8_e5m2",
}
"""dtype name -> the name torch prints (``str(tensor.dtype)`` without ``torch.``)."""
QUANTIZED_KV_DTYPES = ("int8", "fp8_e4m3", "fp8_e5m2")
FULL_TYPES = ("full_attention", "attention")
"""Section 4: every other ``layer_types`` value is linear attention (upstream's rule)."""
SCALE_BYTES = 4  # one float32 scale per head and token
PADDING_LINEAR_STATE_SLOTS = 2  # upstream kPaddingLinearStateBlocks
LINEAR_STATE_FULL_KV_MEMORY_RATIO = 0.9  # upstream kLinearStateFullKvMemoryRatio
UPSTREAM_SPLIT_MODEL_TYPES = ("deepseek_v32", "glm_moe_dsa")
SPLIT_MODEL_TYPES = UPSTREAM_SPLIT_MODEL_TYPES + ("deepseek_v3", "qwen3_5_moe", "qwen3_next")
"""Section 3: upstream's list plus the adaptation's (DeepSeek-V3 and the hybrids)."""
QWEN3_5_TARGET_MODEL_TYPES = ("qwen3_5", "qwen3_5_moe", "qwen3_5_text", "qwen3_5_moe_text")
OWNER_RULES = ("round_robin", "layer_id_mod_s")
"""Section 4: the spec's k-th-full-layer round robin, and upstream's ``layer_id % s``."""
GROUP_RULES = ("topology", "consecutive")
"""Section 4: the adaptation's topology-aware groups, and upstream's consecutive ones."""
_CPU_QUANTIZED_KV = QUANTIZED_KV_DTYPES


# ---- inputs, with their documented defaults ---------------------------------------------


def _opt(obj, name: str, default):
    value = getattr(obj, name, default)
    return default if value is None else value


def dtype_bytes(name: str) -> int:
    """Section 5: bytes per element of a dtype name."""
    key = str(name).replace("torch.", "")
    if key not in DTYPE_BYTES:
        raise ValueError(f"unknown dtype {name!r}; allowed: {', '.join(sorted(DTYPE_BYTES))}")
    return DTYPE_BYTES[key]


def torch_dtype_name(name: str) -> str:
    """Section 7: the torch name of a dtype (fp8_e4m3 -> float8_e4m3fn)."""
    return TORCH_DTYPE_NAMES[str(name).replace("torch.", "")]


def max_seqs_per_batch(cache) -> int:
    """Section 5 default 200 (upstream's)."""
    return int(_opt(cache, "max_seqs_per_batch", 200))


def max_linear_state_cache_slots(cache) -> int:
    """Section 5 default 0 (auto)."""
    return int(_opt(cache, "max_linear_state_cache_slots", 0))


def enable_prefix_cache(cache) -> bool:
    """Section 5 default True (upstream's)."""
    return bool(_opt(cache, "enable_prefix_cache", True))


def num_speculative_tokens(cache) -> int:
    """Section 5 default 0."""
    return int(_opt(cache, "num_speculative_tokens", 0))


def indexer_cache_dtype(cache) -> str:
    """Section 5: ``cache.indexer_cache_dtype`` (auto|int8), upstream's name (the config's only one)."""
    value = getattr(cache, "indexer_cache_dtype", None)
    return "auto" if value is None else str(value)


def draft_body_tp1(run) -> bool:
    """Section 6: ``draft.body_tp1`` (upstream ``enable_mtp_draft_body_tp1``), default False."""
    for holder in (run, getattr(run, "draft", None), getattr(run, "cache", None)):
        if holder is None:
            continue
        for name in ("draft_body_tp1", "body_tp1"):
            value = getattr(holder, name, None)
            if value is not None:
                return bool(value)
    return False


def run_budget_bytes(run) -> int:
    """Section 6: the per-rank KV budget C: ``cache.kv_budget_bytes`` when > 0, else the
    hardware profile's (HBM - reserved per card)."""
    override = int(_opt(run.cache, "kv_budget_bytes", 0))
    if override > 0:
        return override
    hw = run.hardware
    budget = getattr(hw, "kv_budget_bytes", None)
    if budget is None:
        budget = hw.hbm_bytes_per_card - hw.reserved_bytes_per_card
    return int(budget)


def hardware_quantized_kv_dtypes(hardware) -> tuple:
    """Section 3: the quantized KV dtypes a hardware profile supports (absent: all on cpu)."""
    value = getattr(hardware, "quantized_kv_cache_dtypes", None)
    if value is None:
        return _CPU_QUANTIZED_KV if getattr(hardware, "device_type", "") == "cpu" else ()
    return tuple(value)


def hardware_int8_indexer_cache(hardware) -> bool:
    """Section 3: whether a hardware profile supports the int8 indexer cache (absent: cpu only)."""
    value = getattr(hardware, "int8_indexer_cache", None)
    if value is None:
        return getattr(hardware, "device_type", "") == "cpu"
    return bool(value)


def attention_tp(world: int, dp: int, cp: int) -> int:
    """Section 3: attention TP = world / (dp * cp) (the oracle's one statement of it)."""
    return world // (dp * cp)


def attn_tp_size(run) -> int:
    """Section 3: the run's attention TP size (``attention_tp``)."""
    return attention_tp(run.parallel.world_size, run.parallel.dp_size, run.parallel.cp_size)


def split_size(run) -> int:
    """Section 2: the effective s: 1 unless layerwise split is enabled with s > 1."""
    if run.layerwise.enable and run.layerwise.split_size > 1:
        return run.layerwise.split_size
    return 1


def upstream_split_size(run) -> int:
    """Section 2: upstream has no enable flag: s > 1 alone turns the split on."""
    return run.layerwise.split_size if run.layerwise.split_size > 1 else 1


# ---- section 4: which layers are full attention -------------------------------------------


def is_full_attention_layer(model, layer: int) -> bool:
    """Section 4 (upstream ``is_full_attention_layer``): ``layer_types`` first, else the interval."""
    layer_types = getattr(model, "layer_types", None) or ()
    if 0 <= layer < len(layer_types):
        return layer_types[layer] in FULL_TYPES
    interval = _opt(model, "full_attention_interval", 1)
    if interval <= 1:
        return True
    return (layer + 1) % interval == 0


def expected_full_layers(model) -> tuple:
    """Section 4: ids of the full-attention layers."""
    try:
        return _full_layers(model)
    except TypeError:  # an unhashable model object: computed each time
        return tuple(layer for layer in range(model.num_hidden_layers) if is_full_attention_layer(model, layer))


@lru_cache(maxsize=1024)
def _full_layers(model) -> tuple:
    """``expected_full_layers`` once per distinct (frozen) model: every check asks again."""
    return tuple(layer for layer in range(model.num_hidden_layers) if is_full_attention_layer(model, layer))


def expected_linear_layers(model) -> tuple:
    """Section 4: ids of the linear-attention (GDN) layers."""
    full = set(expected_full_layers(model))
    return tuple(layer for layer in range(model.num_hidden_layers) if layer not in full)


def has_linear_attention_layers(model) -> bool:
    """Section 3 (upstream ``has_linear_attention_layers``): any non-full ``layer_types`` entry,
    or, without ``layer_types``, ``full_attention_interval > 1``."""
    layer_types = getattr(model, "layer_types", None)
    if layer_types:
        return any(t not in FULL_TYPES for t in layer_types)
    return _opt(model, "full_attention_interval", 1) > 1


def expected_indexer(model) -> bool:
    """Section 5: a DSA indexer (``index_n_heads > 0``) on every full-attention layer."""
    return _opt(model, "index_n_heads", 0) > 0


def draft_num_layers(draft) -> int:
    """Section 6: a draft engine's layers (upstream: ``num_nextn_predict_layers``; a draft spec
    that does not say has that many layers)."""
    nextn = int(_opt(draft, "num_nextn_predict_layers", 0))
    return nextn if nextn > 0 else draft.num_hidden_layers


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


def expected_layer_bytes_per_block(model, cache, attn_tp: int) -> dict:
    """Section 5: layer id -> KV bytes per block on one rank; 0 for linear-attention layers."""
    full = set(expected_full_layers(model))
    per_block = cache.block_size * full_layer_slot_bytes(model, cache, attn_tp) if full else 0
    return {layer: per_block if layer in full else 0 for layer in range(model.num_hidden_layers)}


def expected_scratch_bytes_per_block(model, cache, attn_tp: int) -> int:
    """Section 6: the one shared scratch layer: one full layer, with the index slot if any
    layer has an indexer."""
    return cache.block_size * full_layer_slot_bytes(model, cache, attn_tp)


def expected_full_bytes_per_block(model, cache, attn_tp: int) -> int:
    """Section 6: F, the uniform per-block cost: the sum over all full-attention layers."""
    return sum(expected_layer_bytes_per_block(model, cache, attn_tp).values())


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
        len(expected_linear_layers(model)),
        expected_linear_state_bytes_per_slot(model, cache, attn_tp, is_draft=is_draft),
        expected_block_cost_bytes(model, cache, attn_tp),
        max_seqs=max_seqs_per_batch(cache),
        max_linear_slots=max_linear_state_cache_slots(cache),
        prefix_cache=enable_prefix_cache(cache),
    )


def expected_linear_state_bytes(model, cache, attn_tp: int, budget_bytes: Optional[int] = None, *,
                                is_draft: bool = False) -> int:
    """Section 5: the per-rank linear-state reservation L * slots * ls at budget C.

    Since FEATURE v2 the slots depend on the budget: ``budget_bytes`` is required
    whenever the model has linear layers."""
    num_linear = len(expected_linear_layers(model))
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


# ---- one engine's capacity, as upstream's KVCacheCapacity -----------------------------------


@dataclass(frozen=True)
class Capacity:
    """One engine's estimate: the figures upstream's ``allocate_kv_cache`` logs (sections 5-6)."""

    cache_size_bytes: int
    block_size: int
    n_blocks: int
    slot_size: int
    index_slot_size: int
    scale_slot_size: int
    linear_slot_size: int
    n_layers: int
    num_full_attention_layers: int
    num_linear_attention_layers: int
    num_indexer_layers: int
    num_linear_state_blocks: int
    linear_cache_bytes: int
    linear_conv_state_len: int = 0
    linear_ssm_checkpoint_stride: int = 1

    @property
    def full_bytes_per_block(self) -> int:
        """Upstream ``standard_full_cache_block_size_in_bytes``."""
        return self.block_size * (
            max(self.num_full_attention_layers, 1) * (self.slot_size + self.scale_slot_size)
            + self.num_indexer_layers * self.index_slot_size
        )

    @property
    def full_slot_size(self) -> int:
        """slot + index slot + scale slot: the per-token shape a draft's KV takes (section 6)."""
        return self.slot_size + self.index_slot_size + self.scale_slot_size


def owner_of_layers(full_layers: Sequence[int], s: int, owner_rule: str = "round_robin") -> dict:
    """Section 4: full layer id -> owner split rank under ``owner_rule``."""
    if owner_rule == "round_robin":
        return expected_owner(full_layers, s)
    if owner_rule == "layer_id_mod_s":
        return expected_upstream_owner(full_layers, s)
    raise ValueError(f"owner_rule {owner_rule!r}; allowed: {', '.join(OWNER_RULES)}")


def split_block_count(model, cap: Capacity, s: int, available_bytes: int, additional_bytes_per_block: int = 0,
                      owner_rule: str = "round_robin") -> int:
    """Section 6 (upstream ``layerwise_split_block_count``): min over split ranks that own a
    full layer of available // (owned + scratch + additional). 0 when no rank owns a layer."""
    full = [layer for layer in range(cap.n_layers) if is_full_attention_layer(model, layer)]
    has_index = cap.index_slot_size > 0
    layer_bytes = cap.block_size * (cap.slot_size + cap.scale_slot_size + (cap.index_slot_size if has_index else 0))
    scratch = layer_bytes
    owner = owner_of_layers(full, s, owner_rule)
    best = None
    for split_rank in range(s):
        owned = sum(layer_bytes for layer in full if owner[layer] == split_rank)
        if owned == 0:
            continue
        n = available_bytes // (owned + scratch + additional_bytes_per_block)
        best = n if best is None else min(best, n)
    return 0 if best is None else best


def estimate_capacity(model, cache, *, attn_tp: int, budget_bytes: int, split: int = 1,
                      owner_rule: str = "round_robin", is_draft: bool = False) -> Capacity:
    """Sections 5-6 for one engine on its own (upstream ``estimate_kv_cache_capacity``):
    slots, linear-state reservation, then the uniform or split block count."""
    n_layers = draft_num_layers(model) if is_draft else model.num_hidden_layers
    if n_layers <= model.num_hidden_layers:
        num_full = sum(1 for layer in expected_full_layers(model) if layer < n_layers)
    else:  # a draft with more MTP layers than hidden layers
        num_full = sum(1 for layer in range(n_layers) if is_full_attention_layer(model, layer))
    num_linear = n_layers - num_full
    slot = kv_slot_bytes(model, cache, attn_tp)
    scale = scale_slot_bytes(model, cache, attn_tp)
    index = index_slot_bytes(model, cache)
    ls = expected_linear_state_bytes_per_slot(model, cache, attn_tp, is_draft=is_draft)
    n_spec = expected_num_speculative_tokens(model, cache, is_draft=is_draft)
    cap = Capacity(
        cache_size_bytes=budget_bytes, block_size=cache.block_size, n_blocks=0, slot_size=slot,
        index_slot_size=index, scale_slot_size=scale, linear_slot_size=ls, n_layers=n_layers,
        num_full_attention_layers=num_full, num_linear_attention_layers=num_linear,
        num_indexer_layers=num_full if index > 0 else 0, num_linear_state_blocks=0, linear_cache_bytes=0,
        linear_conv_state_len=_opt(model, "linear_conv_kernel_dim", 0) - 1 + n_spec,
        linear_ssm_checkpoint_stride=n_spec + 1,
    )
    slots = linear_state_slots(
        budget_bytes, num_linear, ls, cap.full_bytes_per_block,
        max_seqs=max_seqs_per_batch(cache), max_linear_slots=max_linear_state_cache_slots(cache),
        prefix_cache=enable_prefix_cache(cache),
    )
    linear = num_linear * slots * ls
    available = budget_bytes - linear
    if split > 1:
        n_blocks = split_block_count(model, _replace(cap, n_layers=n_layers), split, available, 0, owner_rule)
    else:
        n_blocks = available // cap.full_bytes_per_block
    return _replace(cap, n_blocks=n_blocks, num_linear_state_blocks=slots, linear_cache_bytes=linear)


def _replace(cap: Capacity, **changes) -> Capacity:
    from dataclasses import replace

    return replace(cap, **changes)


def speculative_block_count(target: Capacity, draft: Capacity, *, share_device: bool = True,
                            draft_body_tp1: bool = False, split: int = 1, target_model=None,
                            owner_rule: str = "round_robin") -> int:
    """Section 6 (upstream ``SpeculativeEngine::calculate_kv_cache`` /
    ``estimate_speculative_kv_cache_blocks``): C = min of the two budgets, only the target
    reserves linear state, the draft costs D = block_size * draft layers * target full slot
    (its own shape only with ``draft_body_tp1``); uniform (C - linear) // (F + D), split: D
    is the split count's additional bytes. Different devices: the smaller own count."""
    if not share_device:
        return min(target.n_blocks, draft.n_blocks)
    bs = target.block_size
    budget = min(target.cache_size_bytes, draft.cache_size_bytes)
    available = budget - target.linear_cache_bytes
    target_full = bs * (
        max(target.num_full_attention_layers, 1) * (target.slot_size + target.scale_slot_size)
        + target.num_indexer_layers * target.index_slot_size
    )
    draft_cost = expected_draft_cost_per_block(target, draft, draft_body_tp1=draft_body_tp1)
    if split > 1:
        if target_model is None:
            raise TypeError("speculative_block_count: a split target needs target_model for its layers")
        return split_block_count(target_model, target, split, available, draft_cost, owner_rule)
    return available // (target_full + draft_cost)


def expected_draft_cost_per_block(target: Capacity, draft: Capacity, *, draft_body_tp1: bool = False) -> int:
    """Section 6: D, the draft's KV bytes per block: its layers at the target's full slot,
    or at its own shape when the draft body runs at TP 1."""
    bs = target.block_size
    if draft_body_tp1:
        return bs * (draft.n_layers * (draft.slot_size + draft.scale_slot_size)
                     + draft.num_indexer_layers * draft.index_slot_size)
    return bs * draft.n_layers * target.full_slot_size


# ---- run level: the target and draft engines of one configuration ---------------------------


def _target_capacity_alone(run, budget_bytes: int, owner_rule: str, s: int) -> Capacity:
    return estimate_capacity(run.model, run.cache, attn_tp=attn_tp_size(run), budget_bytes=budget_bytes,
                             split=s, owner_rule=owner_rule)


def _draft_capacity_alone(run, budget_bytes: int) -> Capacity:
    tp = 1 if draft_body_tp1(run) else attn_tp_size(run)
    return estimate_capacity(run.draft, run.cache, attn_tp=tp, budget_bytes=budget_bytes, is_draft=True)


def expected_capacities(run, budget_bytes: Optional[int] = None, *, owner_rule: str = "round_robin",
                        s: Optional[int] = None, share_device: bool = True) -> tuple:
    """Sections 5-6: (target Capacity, draft Capacity or None) with the common n_blocks the
    engines allocate (upstream ``SpeculativeEngine::allocate_kv_cache``)."""
    budget = run_budget_bytes(run) if budget_bytes is None else budget_bytes
    s = split_size(run) if s is None else s
    target = _target_capacity_alone(run, budget, owner_rule, s)
    if getattr(run, "draft", None) is None:
        return target, None
    draft = _draft_capacity_alone(run, budget)
    n = speculative_block_count(target, draft, share_device=share_device, draft_body_tp1=draft_body_tp1(run),
                                split=s, target_model=run.model, owner_rule=owner_rule)
    common = min(target.cache_size_bytes, draft.cache_size_bytes)
    return (_replace(target, n_blocks=n, cache_size_bytes=common), _replace(draft, n_blocks=n, cache_size_bytes=common))


def expected_capacity(run, budget_bytes: Optional[int] = None, *, owner_rule: str = "round_robin") -> Capacity:
    """Sections 5-6: the target engine's Capacity (the figures of its ``kv cache capacity`` line)."""
    return expected_capacities(run, budget_bytes, owner_rule=owner_rule)[0]


def expected_draft_capacity(run, budget_bytes: Optional[int] = None, *, owner_rule: str = "round_robin") -> Optional[Capacity]:
    """Section 6: the draft engine's Capacity (its own slot sizes, the common n_blocks), or None."""
    return expected_capacities(run, budget_bytes, owner_rule=owner_rule)[1]


def expected_draft_bytes_per_block(run) -> int:
    """Section 6: D for the run's draft (0 without one)."""
    if getattr(run, "draft", None) is None:
        return 0
    budget = run_budget_bytes(run)
    target = _target_capacity_alone(run, budget, "round_robin", 1)
    draft = _draft_capacity_alone(run, budget)
    return expected_draft_cost_per_block(target, draft, draft_body_tp1=draft_body_tp1(run))


def expected_block_counts(run, budget_bytes: int, additional_bytes_per_block: Optional[int] = None,
                          *, owner_rule: str = "round_robin") -> tuple:
    """Section 6: (split n_blocks, uniform n_blocks) at one per-rank budget C.

    ``additional_bytes_per_block`` None: the run's draft cost D (section 6; 0 without a
    draft); a number overrides it. With split inactive both are the uniform count. A
    value < 1 (0 when no split rank owns a layer) means the implementation must refuse."""
    model, cache = run.model, run.cache
    tp = attn_tp_size(run)
    additional = expected_draft_bytes_per_block(run) if additional_bytes_per_block is None else additional_bytes_per_block
    target = _target_capacity_alone(run, budget_bytes, owner_rule, 1)
    available = budget_bytes - target.linear_cache_bytes
    uniform = available // (expected_block_cost_bytes(model, cache, tp) + additional)
    s = split_size(run)
    if s == 1:
        return uniform, uniform
    return split_block_count(model, target, s, available, additional, owner_rule), uniform


def expected_owned_full_layers(run, split_rank: int, *, owner_rule: str = "round_robin") -> tuple:
    """Section 4: the full layers split rank ``split_rank`` owns (all of them when s = 1)."""
    full = expected_full_layers(run.model)
    s = split_size(run)
    if s == 1:
        return full
    owner = owner_of_layers(full, s, owner_rule)
    return tuple(layer for layer in full if owner[layer] == split_rank)


def expected_rank_bytes(run, n_blocks: int, owned_layers, *, include_linear_state: bool = True,
                        budget_bytes: Optional[int] = None) -> int:
    """Sections 6-7: target bytes one rank allocates: its owned full layers, one scratch
    layer whenever the split is active (even for a rank that owns every full layer), and
    (by default) its linear-layer state at the run's budget (or ``budget_bytes``)."""
    model, cache = run.model, run.cache
    tp = attn_tp_size(run)
    per_layer = expected_layer_bytes_per_block(model, cache, tp)
    per_block = sum(per_layer[layer] for layer in set(owned_layers))
    if split_size(run) > 1:
        per_block += expected_scratch_bytes_per_block(model, cache, tp)
    total = n_blocks * per_block
    if include_linear_state:
        budget = run_budget_bytes(run) if budget_bytes is None else budget_bytes
        total += expected_linear_state_bytes(model, cache, tp, budget)
    return total


def expected_draft_rank_bytes(run, n_blocks: int) -> int:
    """Sections 6-7: the draft engine's bytes on one rank: n_blocks * D (never split)."""
    return n_blocks * expected_draft_bytes_per_block(run)


# ---- section 4: split groups and ownership -----------------------------------------------------


def expected_owner(full_layers, split_size: int) -> dict:
    """Section 4: round robin over full layers: the k-th full layer is owned by split rank k % s."""
    owner = {}
    for k, layer in enumerate(full_layers):
        owner[layer] = k % split_size
    return owner


def expected_upstream_owner(full_layers, split_size: int) -> dict:
    """Section 4: upstream xLLM's rule, layer_id % s (wrong on hybrid models)."""
    owner = {}
    for layer in full_layers:
        owner[layer] = layer % split_size
    return owner


def _tp_groups(world: int, dp: int, cp: int) -> list:
    tp = attention_tp(world, dp, cp)
    groups = []
    for dp_rank in range(dp):
        for cp_rank in range(cp):
            groups.append([dp_rank * (cp * tp) + cp_rank * tp + tp_rank for tp_rank in range(tp)])
    return groups


def expected_split_groups_consecutive(world: int, dp: int, cp: int, s: int) -> list:
    """Section 4: consecutive groups of s ranks inside each attention TP group, in rank order
    (upstream ``get_layerwise_split_group``)."""
    groups = []
    for tp_group in _tp_groups(world, dp, cp):
        for start in range(0, len(tp_group), s):
            groups.append(tp_group[start : start + s])
    return groups


def link_score(link: str) -> int:
    """Section 4: how good a link is: NV# (more links better) > PIX > PXB > PHB > NODE > SYS >
    another node (``NET``). ``X`` (the same card) cannot join a split group: -1."""
    if link == "X":
        return -1
    if link.startswith("NV") and link[2:].isdigit():
        return 100 + int(link[2:])
    order = {"PIX": 6, "PXB": 5, "PHB": 4, "NODE": 3, "SYS": 2, "NET": 1}
    if link not in order:
        raise ValueError(f"unknown link {link!r}; allowed: X, PIX, PXB, PHB, NODE, SYS, NV#")
    return order[link]


def oracle_topology(run) -> formats.OracleTopology:
    """Section 4: the run's link matrix as the oracle reads it: the fixture named by
    ``hardware.topology.name`` in conf/topology (its own parser), else the RunSpec's matrix
    (synthetic topologies built in tests)."""
    topo = run.hardware.topology
    name = getattr(topo, "name", None)
    fixture = _fixture_topology(str(name)) if name else None
    if fixture is not None:
        return fixture
    return formats.OracleTopology(name=str(name), cards=tuple(topo.cards),
                                  links=tuple(tuple(r) for r in topo.links), source="run")


@lru_cache(maxsize=64)
def _fixture_topology(name: str) -> Optional[formats.OracleTopology]:
    """The shipped fixture ``name`` (read once per process: conf/topology is part of the checkout), or None."""
    for suffix in (".txt", ".yaml"):
        if (formats.TOPOLOGY_DIR / f"{name}{suffix}").is_file():
            return formats.load_topology(name)
    return None


def expected_rank_location(run, rank: int) -> tuple:
    """Section 4: (node, card) of a rank: node rank // num_cards, card ``placement[rank]``,
    else rank % num_cards."""
    return _location(rank, run.hardware.num_cards, _placement(run))


def _placement(run) -> Optional[tuple]:
    placement = getattr(run, "placement", None)
    return None if placement is None else tuple(placement)


def _location(rank: int, num_cards: int, placement: Optional[tuple]) -> tuple:
    return rank // num_cards, placement[rank] if placement is not None else rank % num_cards


def rank_link(run, a: int, b: int, links=None) -> str:
    """Section 4: the link between two ranks' cards (``NET`` across nodes, ``X`` same card)."""
    links = oracle_topology(run).links if links is None else links
    return _link(a, b, links, run.hardware.num_cards, _placement(run))


def _link(a: int, b: int, links, num_cards: int, placement: Optional[tuple]) -> str:
    node_a, card_a = _location(a, num_cards, placement)
    node_b, card_b = _location(b, num_cards, placement)
    if node_a != node_b:
        return "NET"
    if card_a == card_b:
        return "X"
    forward, backward = links[card_a][card_b], links[card_b][card_a]
    return forward if link_score(forward) <= link_score(backward) else backward


def best_partition(members: Sequence[int], s: int, score) -> Optional[list]:
    """Section 4, exact search: the partition of ``members`` into groups of s whose sorted
    vector of per-group worst-link scores is lexicographically largest; ties: the
    lexicographically smallest partition (groups sorted, ordered by first member). None
    when every partition puts two ranks of one group on one card (score < 0)."""
    members = sorted(members)
    if s == 1:
        return [[m] for m in members]
    n = len(members)

    def group_score(group) -> int:
        worst = None
        for i in range(len(group)):
            for j in range(i + 1, len(group)):
                value = score(group[i], group[j])
                worst = value if worst is None else min(worst, value)
        return worst

    from itertools import combinations

    @cache
    def solve(remaining: tuple):
        if not remaining:
            return (), ()
        first, rest = remaining[0], remaining[1:]
        best = None
        for others in combinations(rest, s - 1):
            group = (first,) + others
            gs = group_score(group)
            if gs < 0:
                continue
            left = tuple(m for m in rest if m not in others)
            sub = solve(left)
            if sub is None:
                continue
            scores = tuple(sorted(sub[0] + (gs,)))
            partition = (group,) + sub[1]
            if best is None or scores > best[0] or (scores == best[0] and partition < best[1]):
                best = (scores, partition)
        return best

    if n % s:
        return None
    result = solve(tuple(members))
    return None if result is None else [list(g) for g in result[1]]


def expected_split_groups(run, *, rule: str = "topology") -> Optional[list]:
    """Section 4: the split groups (global ranks, in split-rank order) of every attention TP
    group: ``topology`` (the adaptation: best worst-link groups, ties consecutive) or
    ``consecutive`` (upstream). s = 1: one group per rank. None when no grouping keeps
    the ranks of each group on distinct cards."""
    p = run.parallel
    s = split_size(run) if rule == "topology" else upstream_split_size(run)
    if rule == "consecutive":
        return expected_split_groups_consecutive(p.world_size, p.dp_size, p.cp_size, s)
    if rule != "topology":
        raise ValueError(f"rule {rule!r}; allowed: {', '.join(GROUP_RULES)}")
    groups = _topology_groups(p.world_size, p.dp_size, p.cp_size, s, oracle_topology(run).links,
                              run.hardware.num_cards, _placement(run))
    return None if groups is None else [list(g) for g in groups]


@cache
def _topology_groups(world: int, dp: int, cp: int, s: int, links, num_cards: int, placement) -> Optional[tuple]:
    """``expected_split_groups``'s search, once per distinct layout (every check asks again)."""
    groups = []
    for tp_group in _tp_groups(world, dp, cp):
        part = best_partition(tp_group, s, lambda a, b: link_score(_link(a, b, links, num_cards, placement)))
        if part is None:
            return None
        groups.extend(tuple(g) for g in part)
    return tuple(groups)


def expected_split_position(run, rank: int, *, rule: str = "topology") -> tuple:
    """Section 4: (index of the rank's split group, its split rank = position in that group)."""
    groups = expected_split_groups(run, rule=rule)
    if groups is None:
        raise ValueError("no split grouping keeps each group's ranks on distinct cards")
    for index, group in enumerate(groups):
        if rank in group:
            return index, group.index(rank)
    raise ValueError(f"rank {rank} is not in any split group (world {run.parallel.world_size})")


def expected_rank_owned_layers(run, rank: int, *, owner_rule: str = "round_robin", rule: str = "topology") -> tuple:
    """Sections 4 and 7: the full layers a global rank must allocate (from its position)."""
    if split_size(run) == 1:
        return expected_full_layers(run.model)
    _, position = expected_split_position(run, rank, rule=rule)
    return expected_owned_full_layers(run, position, owner_rule=owner_rule)


def expected_upstream_worker_split_rank(run, rank: int) -> int:
    """Section 4: what upstream's worker computes: global ``rank % s``."""
    return rank % upstream_split_size(run)


# ---- section 6: report per rank --------------------------------------------------------------


@dataclass(frozen=True)
class Report:
    """Section 6 "Report per rank" at one budget."""

    n_blocks: int
    uniform_n_blocks: int
    rank_bytes: tuple
    """Target KV of each global rank (owned + scratch when split, + linear state)."""
    draft_rank_bytes: int
    """The draft's KV on every rank (0 without a draft)."""
    peak_bytes: int
    mean_bytes: int
    uniform_peak_bytes: int
    """Every rank allocating every full layer at the same n_blocks, + linear state."""
    savings_bytes: int
    capacity_gain: float
    """n_blocks / uniform_n_blocks at the same budget."""
    linear_state_bytes: int = 0
    budget_bytes: int = 0
    rank_owned_layers: tuple = field(default_factory=tuple)


def expected_report(run, budget_bytes: Optional[int] = None, *, owner_rule: str = "round_robin",
                    rule: str = "topology") -> Report:
    """Section 6: per-rank estimates, peak, mean, uniform peak, savings and capacity gain."""
    budget = run_budget_bytes(run) if budget_bytes is None else budget_bytes
    tp = attn_tp_size(run)
    n_blocks, uniform = expected_block_counts(run, budget, owner_rule=owner_rule)
    linear = expected_linear_state_bytes(run.model, run.cache, tp, budget)
    owned = tuple(expected_rank_owned_layers(run, r, owner_rule=owner_rule, rule=rule)
                  for r in range(run.parallel.world_size))
    ranks = tuple(expected_rank_bytes(run, n_blocks, layers, budget_bytes=budget) for layers in owned)
    peak = max(ranks)
    uniform_peak = n_blocks * expected_full_bytes_per_block(run.model, run.cache, tp) + linear
    return Report(
        n_blocks=n_blocks, uniform_n_blocks=uniform, rank_bytes=ranks,
        draft_rank_bytes=expected_draft_rank_bytes(run, n_blocks) if getattr(run, "draft", None) is not None else 0,
        peak_bytes=peak, mean_bytes=sum(ranks) // len(ranks), uniform_peak_bytes=uniform_peak,
        savings_bytes=uniform_peak - peak, capacity_gain=(n_blocks / uniform) if uniform > 0 else 0.0,
        linear_state_bytes=linear, budget_bytes=budget, rank_owned_layers=owned,
    )


def expected_ranks_over_uniform_peak(run, budget_bytes: Optional[int] = None, *,
                                     owner_rule: str = "round_robin", rule: str = "topology") -> list:
    """Section 4: [(rank, bytes above the uniform peak)] for every rank whose estimate exceeds
    the uniform allocation at the same n_blocks (what upstream's ``layer_id % s`` does to a
    hybrid model: the predicted problem an expected failure names). Empty when none does."""
    report = expected_report(run, budget_bytes, owner_rule=owner_rule, rule=rule)
    return [(rank, b - report.uniform_peak_bytes) for rank, b in enumerate(report.rank_bytes)
            if b > report.uniform_peak_bytes]


def expected_card_bytes(run, budget_bytes: Optional[int] = None, *, owner_rule: str = "round_robin") -> dict:
    """Section 4: (node, card) -> planned bytes of every rank placed on it (target + draft),
    to compare with the card's HBM (no card may be oversubscribed)."""
    report = expected_report(run, budget_bytes, owner_rule=owner_rule)
    out = {}
    for rank, b in enumerate(report.rank_bytes):
        where = expected_rank_location(run, rank)
        out[where] = out.get(where, 0) + b + report.draft_rank_bytes
    return out


def spec_refuses_cards(run) -> Optional[str]:
    """Section 4: why the spec forbids this placement outright, from its own numbers; None if it does not.

    A lower bound per rank (the smallest split rank's bytes at the spec's block count)
    is enough: if even that overfills a card's HBM with its reserve, no plan can fit.
    """
    s = split_size(run)
    if s > 1 and expected_split_groups(run) is None:
        return "no split grouping keeps each TP group's split groups on distinct cards"
    hw = run.hardware
    n_blocks, _ = expected_block_counts(run, run_budget_bytes(run))
    full = expected_full_layers(run.model)
    owner = expected_owner(full, s)
    least = min(expected_rank_bytes(run, n_blocks, [l for l in full if owner[l] == r]) for r in range(s))
    ranks_on: dict = {}
    for rank in range(run.parallel.world_size):
        card = expected_rank_location(run, rank)
        ranks_on[card] = ranks_on.get(card, 0) + 1
    for card, count in sorted(ranks_on.items()):
        if count * (least + hw.reserved_bytes_per_card) > hw.hbm_bytes_per_card:
            return (f"node {card[0]} card {card[1]} holds {count} ranks: at least {count} x ({least} B KV + "
                    f"{hw.reserved_bytes_per_card} B reserved) > HBM {hw.hbm_bytes_per_card} B")
    return None


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


def expected_rejection(run) -> Optional[Rejection]:
    """Section 3: the FIRST startup rule the config breaks, in the contracted order, or None."""
    return _rejection(run, split_size(run), SPLIT_MODEL_TYPES)


def expected_upstream_rejection(run) -> Optional[Rejection]:
    """Sections 2-3 as upstream xLLM at 494f293b5 decides them: the same rules in the same order,
    but no enable flag (s > 1 alone is active) and only upstream's model types supported."""
    return _rejection(run, upstream_split_size(run), UPSTREAM_SPLIT_MODEL_TYPES)


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


def expected_estimation_rejection(run, budget_bytes: Optional[int] = None) -> Optional[Rejection]:
    """Sections 5-6: a config that passes startup but cannot be planned (upstream CHECKs):
    explicit linear-state slots above the cap, no memory left after the linear state, a
    draft slot larger than the target's, no split rank owning a layer, or n_blocks < 1.
    Field names here are the oracle's own (not part of the contracted startup list)."""
    budget = run_budget_bytes(run) if budget_bytes is None else budget_bytes
    model, cache = run.model, run.cache
    target = _target_capacity_alone(run, budget, "round_robin", 1)
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


# ---- readers of outside formats (sections 2 and 4), re-exported ------------------------------


def load_topology(name_or_path) -> formats.OracleTopology:
    """Section 4: a ``topo -m`` text or YAML fixture, read by the oracle's own parser."""
    return formats.load_topology(name_or_path)


def parse_layerwise_gflags(text: str, semantics: str = "adaptation") -> dict:
    """Section 2: the layerwise keys a gflags command line sets (``enable``, ``split_size``)."""
    return formats.parse_layerwise_gflags(text, semantics)


def parse_parallel_config_json(text: str, semantics: str = "adaptation") -> dict:
    """Section 2: ``split_size`` (and the adaptation's ``enable``) from a ParallelConfig JSON."""
    return formats.parse_parallel_config_json(text, semantics)


def expected_split_active(semantics: str, settings: dict) -> bool:
    """Section 2 (v2.1): whether the split is on, given what the flags set, under ``semantics``:
    adaptation: enable and s > 1; upstream: s > 1 alone (no enable flag)."""
    return formats.split_active(semantics, settings)


TOPOLOGY_DIR: Path = formats.TOPOLOGY_DIR
