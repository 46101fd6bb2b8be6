"""Startup validation (FEATURE section 3): each rule one function, each failure one ConfigError.

Errors name the field in the harness's override vocabulary, the value, and the
rule, printing whole equations (``attention tp 4 % layerwise.split_size 3 = 1 != 0``).
"""

from __future__ import annotations

from implementations.errors import ConfigError
from implementations.reference import layers
from implementations.specs import (
    DTYPE_BYTES,
    INDEX_CACHE_DTYPES,
    KV_CACHE_DTYPES,
    KV_LAYOUTS,
    CacheSpec,
    HardwareProfile,
    LayerwiseFlags,
    ModelSpec,
    ParallelSpec,
    RunSpec,
)

ATTENTION_KINDS = ("mla", "gqa")
SSM_CACHE_DTYPES = ("auto",) + tuple(DTYPE_BYTES)
SUPPORTED_MODEL_TYPES = ("deepseek_v32", "glm_moe_dsa", "deepseek_v3", "qwen3_5_moe", "qwen3_next")
"""Model types whose configs set supports_layerwise_split (upstream's two, then the adaptation's)."""


def _at_least(field: str, value: int, minimum: int, detail: str = "") -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(field, value, f"a whole number >= {minimum}", detail)


def _one_of(field: str, value: object, allowed: tuple) -> None:
    if value not in allowed:
        raise ConfigError(field, value, f"one of {', '.join(map(str, allowed))}")


def check_model(model: ModelSpec, prefix: str = "model") -> None:
    """Architecture numbers the byte math needs are present and sane."""
    _at_least(f"{prefix}.num_hidden_layers", model.num_hidden_layers, 1, model.name)
    _one_of(f"{prefix}.attention", model.attention, ATTENTION_KINDS)
    _one_of(f"{prefix}.dtype", model.dtype, tuple(DTYPE_BYTES))
    layers.check_layer_types(model)
    if model.attention == "mla":
        _at_least(f"{prefix}.kv_lora_rank", model.kv_lora_rank, 1, "an MLA model")
        _at_least(f"{prefix}.qk_rope_head_dim", model.qk_rope_head_dim, 0, "an MLA model")
    else:
        _at_least(f"{prefix}.num_key_value_heads", model.num_key_value_heads, 1, "a GQA model")
        _at_least(f"{prefix}.head_dim", model.head_dim, 1, "a GQA model")
    _at_least(f"{prefix}.index_n_heads", model.index_n_heads, 0)
    if model.index_n_heads > 0:
        _at_least(f"{prefix}.index_head_dim", model.index_head_dim, 1, "index_n_heads > 0")
    if layers.linear_layers(model):
        detail = "the model has linear-attention layers"
        for name in ("linear_num_key_heads", "linear_num_value_heads", "linear_key_head_dim",
                     "linear_value_head_dim", "linear_conv_kernel_dim"):
            _at_least(f"{prefix}.{name}", getattr(model, name), 1, detail)


def check_cache(cache: CacheSpec) -> None:
    _at_least("cache.block_size", cache.block_size, 1)
    _one_of("cache.kv_cache_dtype", cache.kv_cache_dtype, KV_CACHE_DTYPES)
    _one_of("cache.index_cache_dtype", cache.index_cache_dtype, INDEX_CACHE_DTYPES)
    _one_of("cache.ssm_cache_dtype", cache.ssm_cache_dtype, SSM_CACHE_DTYPES)
    _at_least("cache.max_seqs_per_batch", cache.max_seqs_per_batch, 1)
    if cache.host_blocks_factor < 0:
        raise ConfigError("cache.host_blocks_factor", cache.host_blocks_factor, "a number >= 0")


def check_hardware(hardware: HardwareProfile) -> None:
    _one_of("hardware.kv_layout", hardware.kv_layout, KV_LAYOUTS)
    _at_least("hardware.num_cards", hardware.num_cards, 1)
    _at_least("hardware.hbm_bytes_per_card", hardware.hbm_bytes_per_card, 1)
    _at_least("hardware.reserved_bytes_per_card", hardware.reserved_bytes_per_card, 0)


def check_parallel(parallel: ParallelSpec) -> None:
    """Sizes >= 1 and world_size = dp * cp * tp for a whole tp."""
    _at_least("parallel.world_size", parallel.world_size, 1)
    _at_least("parallel.dp_size", parallel.dp_size, 1)
    _at_least("parallel.cp_size", parallel.cp_size, 1)
    _at_least("parallel.kv_split_size", parallel.kv_split_size, 1)
    dp, cp, world = parallel.dp_size, parallel.cp_size, parallel.world_size
    if world % (dp * cp) != 0:
        raise ConfigError(
            "parallel.world_size", world, "a multiple of parallel.dp_size * parallel.cp_size",
            f"world_size {world} != dp {dp} * cp {cp} * tp for any whole tp "
            f"({world} % {dp * cp} = {world % (dp * cp)})",
        )


def attn_tp_size(parallel: ParallelSpec) -> int:
    """Attention TP size = world_size / (dp_size * cp_size); ``check_parallel`` first."""
    return parallel.world_size // (parallel.dp_size * parallel.cp_size)


def check_split_size(flags: LayerwiseFlags, attn_tp: int) -> None:
    """s >= 1 even when disabled; s <= attention tp and divides it."""
    if not isinstance(flags.enable, bool):
        raise ConfigError("layerwise.enable", flags.enable, "true or false")
    s = flags.split_size
    _at_least("layerwise.split_size", s, 1, "1 disables the split; this holds even when disabled")
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


def check_active_split(run: RunSpec, full_layers: tuple[int, ...]) -> None:
    """Rules that only apply when the split is active (enabled and s > 1)."""
    model, cache, parallel = run.model, run.cache, run.parallel
    active = f"with layerwise split active (layerwise.split_size {run.layerwise.split_size})"
    if not model.supports_layerwise_split:
        raise ConfigError(
            "model", model.model_type,
            f"a model that supports layerwise split ({', '.join(SUPPORTED_MODEL_TYPES)})",
            f"{model.name} does not set supports_layerwise_split; set layerwise.enable=false",
        )
    if cache.host_blocks_factor > 1:
        raise ConfigError("cache.host_blocks_factor", cache.host_blocks_factor,
                          "<= 1 (host cache off)", f"the host cache is not supported {active}")
    if parallel.cp_size > 1:
        raise ConfigError("parallel.cp_size", parallel.cp_size, "1",
                          f"context parallel is not supported {active}")
    if parallel.kv_split_size > 1:
        raise ConfigError("parallel.kv_split_size", parallel.kv_split_size, "1",
                          f"KV split is not supported {active}")
    if cache.enable_sleep_mode:
        raise ConfigError("cache.enable_sleep_mode", True, "false",
                          f"sleep mode is not supported {active}")
    if cache.enable_xtensor:
        raise ConfigError("cache.enable_xtensor", True, "false",
                          f"xtensor is not supported {active}")
    if not full_layers:
        raise ConfigError("model", model.name, "a model with at least one full-attention layer",
                          f"nothing to split {active}")


def check_draft(draft: ModelSpec) -> None:
    """A speculative draft: a valid model of full-attention layers only (it never splits)."""
    check_model(draft, prefix="draft")
    linear = layers.linear_layers(draft)
    if linear:
        field = "draft.layer_types" if draft.layer_types is not None else "draft.full_attention_interval"
        raise ConfigError(field, draft.name, "full-attention layers only",
                          f"linear-attention layers {list(linear)} in a draft are not supported")

