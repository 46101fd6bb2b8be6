"""The oracle's constants and its inputs, read with their documented defaults (FEATURE sections 2, 3, 5 and 6)."""

from __future__ import annotations

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
SPEC_OWNER_RULE = "round_robin"
"""Section 4: the spec's owner rule, the k-th full layer to split rank k % s."""
UPSTREAM_OWNER_RULE = "layer_id_mod_s"
"""Section 4: upstream's owner rule ``layer_id % s`` (wrong on hybrid models)."""
OWNER_RULES = (SPEC_OWNER_RULE, UPSTREAM_OWNER_RULE)
SPEC_GROUP_RULE = "topology"
"""Section 4: the adaptation's topology-aware split groups."""
UPSTREAM_GROUP_RULE = "consecutive"
"""Section 4: upstream's consecutive split groups."""
GROUP_RULES = (SPEC_GROUP_RULE, UPSTREAM_GROUP_RULE)
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
