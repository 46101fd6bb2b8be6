"""Startup validation (FEATURE section 3): each rule one function, each failure one ConfigError.

Errors name the field in the harness's override vocabulary, the value, and the
rule, printing whole equations (``attention tp 4 % layerwise.split_size 3 = 1 != 0``).
"""

from __future__ import annotations

from contract.errors import ConfigError
from contract.specs import (
    DTYPE_BYTES,
    INDEXER_CACHE_DTYPES,
    KV_CACHE_DTYPES,
    KV_LAYOUTS,
    CacheSpec,
    HardwareProfile,
    LayerwiseFlags,
    ModelSpec,
    ParallelSpec,
    RunSpec,
)
from implementations.reference import layers

ATTENTION_KINDS = ("mla", "gqa")
SSM_DTYPES = ("bfloat16", "float16", "float32")
UPSTREAM_SPLIT_MODEL_TYPES = ("deepseek_v32", "glm_moe_dsa")
"""Upstream ``is_layerwise_split_supported_model`` at 494f293b5."""
_DTYPES = tuple(DTYPE_BYTES)
"""The model dtypes (``DTYPE_BYTES``'s keys), as the error lists them."""
SUPPORTED_MODEL_TYPES = UPSTREAM_SPLIT_MODEL_TYPES + ("deepseek_v3", "qwen3_5_moe", "qwen3_next")
"""Model types the adaptation supports: upstream's two, then the seed's (FEATURE section 3)."""


def _at_least(field: str, value: int, minimum: int, detail: str = "") -> None:
    if type(value) is int and value >= minimum:  # (the common case in one test: some twenty per plan)
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(field, value, f"a whole number >= {minimum}", detail)


def _one_of(field: str, value: object, allowed: tuple) -> None:
    if value not in allowed:
        raise ConfigError(field, value, f"one of {', '.join(map(str, allowed))}")


def _field_at_least(prefix: str, name: str, value: int, minimum: int, detail: str = "") -> None:
    """``_at_least`` of the field ``prefix.name``, whose name is written only for an error (a model's checks
    wrote some ten per plan, a draft's as many again)."""
    if type(value) is int and value >= minimum:
        return
    _at_least(f"{prefix}.{name}", value, minimum, detail)


def _field_one_of(prefix: str, name: str, value: object, allowed: tuple) -> None:
    """``_one_of`` of the field ``prefix.name``, its name written only for an error."""
    if value not in allowed:
        _one_of(f"{prefix}.{name}", value, allowed)


def check_model(model: ModelSpec, prefix: str = "model") -> None:
    """Architecture numbers the byte math needs are present and sane."""
    _field_at_least(prefix, "num_hidden_layers", model.num_hidden_layers, 1, model.name)
    _field_one_of(prefix, "attention", model.attention, ATTENTION_KINDS)
    _field_one_of(prefix, "dtype", model.dtype, _DTYPES)
    layers.check_layer_types(model)
    if model.attention == "mla":
        _field_at_least(prefix, "kv_lora_rank", model.kv_lora_rank, 1, "an MLA model")
        _field_at_least(prefix, "qk_rope_head_dim", model.qk_rope_head_dim, 0, "an MLA model")
    else:
        _field_at_least(prefix, "num_key_value_heads", model.num_key_value_heads, 1, "a GQA model")
        _field_at_least(prefix, "head_dim", model.head_dim, 1, "a GQA model")
    _field_at_least(prefix, "index_n_heads", model.index_n_heads, 0)
    if model.index_n_heads > 0:
        _field_at_least(prefix, "index_head_dim", model.index_head_dim, 1, "index_n_heads > 0")
    if model.mamba_ssm_dtype is not None:
        _field_one_of(prefix, "mamba_ssm_dtype", model.mamba_ssm_dtype, SSM_DTYPES)
    _field_at_least(prefix, "num_nextn_predict_layers", model.num_nextn_predict_layers, 0)
    if layers.linear_layers(model):
        detail = "the model has linear-attention layers"
        for name in ("linear_num_key_heads", "linear_num_value_heads", "linear_key_head_dim",
                     "linear_value_head_dim", "linear_conv_kernel_dim"):
            _field_at_least(prefix, name, getattr(model, name), 1, detail)


def check_linear_with_indexer(model: ModelSpec, prefix: str = "model") -> None:
    """Upstream worker CHECK: no model has both linear-attention layers and a DSA indexer."""
    linear = layers.linear_layers(model)
    if linear and model.index_n_heads > 0:
        raise ConfigError(
            f"{prefix}.index_n_heads", model.index_n_heads,
            "0 on a model with linear-attention layers (no DSA indexer with linear attention)",
            f"{model.name} has {len(linear)} linear-attention layers and index_n_heads "
            f"{model.index_n_heads}; upstream refuses conv/ssm and index caches together",
        )


def check_quantized_support(run: RunSpec) -> None:
    """Quantized KV caches and the int8 indexer cache only where the hardware profile supports them."""
    cache, hw = run.cache, run.hardware
    if cache.kv_cache_dtype != "auto" and cache.kv_cache_dtype not in hw.quantized_kv_cache_dtypes:
        supported = ", ".join(hw.quantized_kv_cache_dtypes) or "none"
        raise ConfigError(
            "cache.kv_cache_dtype", cache.kv_cache_dtype,
            f"auto, or a quantized KV cache hardware {hw.name} supports ({supported})",
            "upstream allows an int8 KV cache on MLU only",
        )
    indexed = [m.name for m in (run.model, run.draft) if m is not None and m.index_n_heads > 0]
    if cache.indexer_cache_dtype == "int8" and indexed and not hw.int8_indexer_cache:
        raise ConfigError(
            "cache.indexer_cache_dtype", "int8",
            f"auto (hardware {hw.name} has no int8 indexer cache)",
            f"{', '.join(indexed)} carries a DSA indexer; upstream documents the int8 indexer "
            "cache for NPU and MLU only",
        )


def check_cache(cache: CacheSpec) -> None:
    _at_least("cache.block_size", cache.block_size, 1)
    _one_of("cache.kv_cache_dtype", cache.kv_cache_dtype, KV_CACHE_DTYPES)
    _one_of("cache.indexer_cache_dtype", cache.indexer_cache_dtype, INDEXER_CACHE_DTYPES)
    _at_least("cache.max_seqs_per_batch", cache.max_seqs_per_batch, 0, "0 = unlimited (2 padding slots)")
    _at_least("cache.max_linear_state_cache_slots", cache.max_linear_state_cache_slots, 0, "0 = auto-size")
    _at_least("cache.num_speculative_tokens", cache.num_speculative_tokens, 0)
    _at_least("cache.kv_budget_bytes", cache.kv_budget_bytes, 0, "0 = the hardware profile's budget")
    if not isinstance(cache.enable_prefix_cache, bool):
        raise ConfigError("cache.enable_prefix_cache", cache.enable_prefix_cache, "true or false")
    if cache.host_blocks_factor < 0:
        raise ConfigError("cache.host_blocks_factor", cache.host_blocks_factor, "a number >= 0")


def check_hardware(hardware: HardwareProfile) -> None:
    _one_of("hardware.kv_layout", hardware.kv_layout, KV_LAYOUTS)
    _at_least("hardware.num_cards", hardware.num_cards, 1)
    _at_least("hardware.hbm_bytes_per_card", hardware.hbm_bytes_per_card, 1)
    _at_least("hardware.reserved_bytes_per_card", hardware.reserved_bytes_per_card, 0)
    for dtype in hardware.quantized_kv_cache_dtypes:
        _one_of("hardware.quantized_kv_cache_dtypes", dtype, KV_CACHE_DTYPES[1:])


def check_parallel(parallel: ParallelSpec) -> None:
    """Sizes >= 1 and world_size = dp * cp * tp for a whole tp."""
    _at_least("parallel.world_size", parallel.world_size, 1)
    _at_least("parallel.dp_size", parallel.dp_size, 1)
    _at_least("parallel.cp_size", parallel.cp_size, 1)
    _at_least("parallel.kv_split_size", parallel.kv_split_size, 0, "0 follows cp_size (upstream)")
    dp, cp, world = parallel.dp_size, parallel.cp_size, parallel.world_size
    if world % (dp * cp) != 0:
        raise ConfigError(
            "parallel.world_size", world, "a multiple of parallel.dp_size * parallel.cp_size",
            f"world_size {world} != dp {dp} * cp {cp} * tp for any whole tp "
            f"({world} % {dp * cp} = {world % (dp * cp)})",
        )


def effective_kv_split_size(parallel: ParallelSpec) -> int:
    """Upstream ``kv_split_size_effective``: 0 means follow the context-parallel size."""
    return parallel.cp_size if parallel.kv_split_size == 0 else parallel.kv_split_size


def check_split_size_positive(flags: LayerwiseFlags) -> None:
    """s >= 1 even when disabled."""
    if not isinstance(flags.enable, bool):
        raise ConfigError("layerwise.enable", flags.enable, "true or false")
    _at_least("layerwise.split_size", flags.split_size, 1, "1 disables the split; this holds even when disabled")


def check_split_size(flags: LayerwiseFlags, attn_tp: int) -> None:
    """s <= attention tp and divides it."""
    s = flags.split_size
    if s > attn_tp:
        raise ConfigError(
            "layerwise.split_size", s, f"a divisor of attention tp {attn_tp}",
            f"layerwise.split_size {s} > attention tp {attn_tp}",
        )
    if attn_tp % s != 0:
        raise ConfigError(
            "layerwise.split_size", s, f"a divisor of attention tp {attn_tp}",
            f"attention tp {attn_tp} % layerwise.split_size {s} = {attn_tp % s} != 0",
        )


def check_supported_model(model: ModelSpec, supported: tuple[str, ...], split_size: int) -> None:
    """Active split: the model's ``model_type`` must be one the feature supports."""
    if model.model_type not in supported:
        raise ConfigError(
            "model.model_type", model.model_type,
            f"a model type that supports layerwise split ({', '.join(supported)})",
            f"{model.name} with layerwise.split_size {split_size}; use layerwise.split_size=1",
        )


def _active(run: RunSpec) -> str:
    return f"with layerwise split active (layerwise.split_size {run.layerwise.split_size})"


def check_active_master(run: RunSpec) -> None:
    """The master's rules of an active split, in upstream's order: host cache, cp, KV split."""
    cache, parallel = run.cache, run.parallel
    if cache.host_blocks_factor > 1:
        raise ConfigError("cache.host_blocks_factor", cache.host_blocks_factor,
                          "<= 1 (host cache off)", f"the host cache is not supported {_active(run)}")
    if parallel.cp_size > 1:
        raise ConfigError("parallel.cp_size", parallel.cp_size, "1",
                          f"context parallel is not supported {_active(run)}")
    if effective_kv_split_size(parallel) > 1:
        raise ConfigError("parallel.kv_split_size", parallel.kv_split_size, "1 (or 0 with cp_size 1)",
                          f"KV split is not supported {_active(run)}")


def check_active_worker(run: RunSpec) -> None:
    """The worker-side rules of an active split: no sleep mode, no xtensor (a model with nothing to split is
    refused by the estimation: no split rank owns a layer, FEATURE 6)."""
    cache = run.cache
    if cache.enable_sleep_mode:
        raise ConfigError("cache.enable_sleep_mode", True, "false",
                          f"sleep mode is not supported {_active(run)}")
    if cache.enable_xtensor:
        raise ConfigError("cache.enable_xtensor", True, "false",
                          f"xtensor is not supported {_active(run)}")


def check_draft(draft: ModelSpec, *, worker_rule: bool = True) -> None:
    """A speculative draft: a valid model of full-attention layers only (it never splits). ``worker_rule``: with the
    worker's start-up rule too (no linear layers with an indexer, FEATURE 3); a compiled tree's worker checks that
    itself (``worker_checks``), and what stays here is the harness's input domain (the draft models it can build)."""
    check_model(draft, prefix="draft")
    _one_of("draft.body_tp1", draft.body_tp1, (False, True))
    if worker_rule:
        check_linear_with_indexer(draft, prefix="draft")
    linear = [l for l in layers.linear_layers(draft) if l < draft_num_layers(draft)]
    if linear:
        field = "draft.layer_types" if draft.layer_types is not None else "draft.full_attention_interval"
        raise ConfigError(field, draft.name, "full-attention layers only",
                          f"linear-attention layers {list(linear)} in a draft are not supported")



def draft_num_layers(draft: ModelSpec) -> int:
    """Layers a draft engine holds: ``num_nextn_predict_layers`` when > 0 (upstream), else all."""
    return draft.num_nextn_predict_layers if draft.num_nextn_predict_layers > 0 else draft.num_hidden_layers
