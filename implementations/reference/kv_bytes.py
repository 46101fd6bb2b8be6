"""Bytes of one layer's cache (FEATURE section 5): one small spec per kind of layer.

Each spec is a frozen value with its byte formula in properties named with
their unit; ``*_slot_bytes`` are per token slot, ``block_bytes`` per KV block,
``seq_bytes`` per sequence slot of linear-attention state.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Optional, Union

from contract.specs import DTYPE_BYTES, CacheSpec, ModelSpec

SCALE_BYTES = 4
"""One float32 scale per quantized vector."""
QWEN3_5_TARGET_MODEL_TYPES = ("qwen3_5", "qwen3_5_moe", "qwen3_5_text", "qwen3_5_moe_text")
"""Upstream ``is_qwen3_5_target_model_type``: speculative tokens grow their linear state."""


def dtype_bytes(name: str, model_dtype: str) -> int:
    """Bytes per element of a cache dtype name; ``auto`` means the model dtype."""
    return DTYPE_BYTES[model_dtype if name == "auto" else name]


def local_heads(num_heads: int, attn_tp_size: int) -> int:
    """Heads one TP rank holds; fewer heads than ranks are replicated (at least one)."""
    return max(1, num_heads // attn_tp_size)


@dataclass(frozen=True, kw_only=True)
class IndexerSpec:
    """DSA indexer cache of one layer: one head of ``index_head_dim``."""

    index_head_dim: int
    dtype_bytes: int
    """Bytes per element when not int8 (the model dtype)."""
    int8: bool

    @property
    def index_slot_bytes(self) -> int:
        if self.int8:
            return self.index_head_dim + SCALE_BYTES
        return self.dtype_bytes * self.index_head_dim


@dataclass(frozen=True, kw_only=True)
class FullAttentionSpec:
    """What every full-attention layer shares; subclasses give ``slot_bytes``/``scale_slot_bytes``."""

    block_size: int
    kv_dtype_bytes: int
    quantized: bool
    """KV dtype is int8/fp8: each vector carries a float32 scale."""
    indexer: Optional[IndexerSpec] = None

    @property
    def slot_bytes(self) -> int:
        raise NotImplementedError

    @property
    def scale_slot_bytes(self) -> int:
        raise NotImplementedError

    @property
    def index_slot_bytes(self) -> int:
        return self.indexer.index_slot_bytes if self.indexer is not None else 0

    @property
    def token_bytes(self) -> int:
        return self.slot_bytes + self.scale_slot_bytes + self.index_slot_bytes

    @property
    def block_bytes(self) -> int:
        return self.block_size * self.token_bytes


@dataclass(frozen=True, kw_only=True)
class MLAFullSpec(FullAttentionSpec):
    """MLA: one latent head of kv_lora_rank plus the rope part."""

    kv_lora_rank: int
    qk_rope_head_dim: int

    @property
    def slot_bytes(self) -> int:
        return self.kv_dtype_bytes * (self.kv_lora_rank + self.qk_rope_head_dim)

    @property
    def scale_slot_bytes(self) -> int:
        return SCALE_BYTES if self.quantized else 0


@dataclass(frozen=True, kw_only=True)
class GQAFullSpec(FullAttentionSpec):
    """GQA/MHA: K and V for each KV head this rank holds."""

    head_dim: int
    n_local_kv_heads: int

    @property
    def slot_bytes(self) -> int:
        return 2 * self.kv_dtype_bytes * self.head_dim * self.n_local_kv_heads

    @property
    def scale_slot_bytes(self) -> int:
        return 2 * SCALE_BYTES * self.n_local_kv_heads if self.quantized else 0


@dataclass(frozen=True, kw_only=True)
class LinearStateSpec:
    """Gated DeltaNet state of one layer: causal-conv window plus recurrent matrix.

    ``speculative_tokens`` (n_spec) is > 0 only for a Qwen3.5 target engine with
    speculative decoding: the conv window grows by n_spec and the recurrent state
    keeps n_spec + 1 checkpoints (upstream ``linear_slot_size``).
    """

    conv_dtype_bytes: int
    ssm_dtype_bytes: int
    n_local_k_heads: int
    n_local_v_heads: int
    key_head_dim: int
    value_head_dim: int
    conv_kernel_dim: int
    speculative_tokens: int = 0

    @property
    def conv_state_len(self) -> int:
        return self.conv_kernel_dim - 1 + self.speculative_tokens

    @property
    def ssm_checkpoint_stride(self) -> int:
        return self.speculative_tokens + 1

    @property
    def conv_seq_bytes(self) -> int:
        channels = 2 * self.key_head_dim * self.n_local_k_heads + self.value_head_dim * self.n_local_v_heads
        return self.conv_dtype_bytes * channels * self.conv_state_len

    @property
    def recurrent_seq_bytes(self) -> int:
        one = self.ssm_dtype_bytes * self.n_local_v_heads * self.key_head_dim * self.value_head_dim
        return one * self.ssm_checkpoint_stride

    @property
    def seq_bytes(self) -> int:
        """Bytes of one sequence slot of this layer (upstream ``linear_slot_size``)."""
        return self.conv_seq_bytes + self.recurrent_seq_bytes


FullSpec = Union[MLAFullSpec, GQAFullSpec]


def full_spec(model: ModelSpec, cache: CacheSpec, attn_tp_size: int, *, with_indexer: bool) -> FullSpec:
    """The spec of one full-attention layer of ``model`` on one rank (once per distinct arguments: a plan asks
    about nine times, for the layers' bytes, the scratch, the capacities and the draft's message); asked again about
    the same model and cache objects (held), without hashing them (each hash a Python call: most of an ask)."""
    plain = type(attn_tp_size) is int and type(with_indexer) is bool  # (keys that no equal bool or float can share)
    if plain:
        held = _held_specs.get((id(model), id(cache)))
        if held is not None:
            spec = held[2].get((attn_tp_size, with_indexer))
            if spec is not None:
                return spec
    try:
        spec = _full_spec(model, cache, attn_tp_size, with_indexer)
    except TypeError:  # a model or cache that cannot be hashed (a list where a tuple belongs): worked out each time
        return _full_spec.__wrapped__(model, cache, attn_tp_size, with_indexer)
    if plain:
        if held is None:
            if len(_held_specs) >= _HELD_PAIRS:
                _held_specs.clear()
            held = _held_specs[(id(model), id(cache))] = (model, cache, {})
        held[2][(attn_tp_size, with_indexer)] = spec
    return spec


_HELD_PAIRS = 8
_held_specs: dict[tuple[int, int], tuple] = {}
"""(id(model), id(cache)) -> (model, cache, {(attn_tp_size, with_indexer): spec}) of the last few pairs asked about:
the objects held, so that their ids are not reused while kept."""


@lru_cache(maxsize=256, typed=True)
def _full_spec(model: ModelSpec, cache: CacheSpec, attn_tp_size: int, with_indexer: bool) -> FullSpec:
    indexer = None
    if with_indexer:
        indexer = IndexerSpec(
            index_head_dim=model.index_head_dim,
            dtype_bytes=DTYPE_BYTES[model.dtype],
            int8=cache.indexer_cache_dtype == "int8",
        )
    common = dict(
        block_size=cache.block_size,
        kv_dtype_bytes=dtype_bytes(cache.kv_cache_dtype, model.dtype),
        quantized=cache.kv_cache_dtype != "auto",
        indexer=indexer,
    )
    if model.attention == "mla":
        return MLAFullSpec(kv_lora_rank=model.kv_lora_rank, qk_rope_head_dim=model.qk_rope_head_dim, **common)
    return GQAFullSpec(
        head_dim=model.head_dim,
        n_local_kv_heads=local_heads(model.num_key_value_heads, attn_tp_size),
        **common,
    )


def ssm_dtype(model: ModelSpec) -> str:
    """The recurrent state's dtype: the model's ``mamba_ssm_dtype``, else the model dtype."""
    return model.mamba_ssm_dtype or model.dtype


def speculative_state_tokens(model: ModelSpec, cache: CacheSpec, *, is_draft: bool) -> int:
    """n_spec of a linear-state slot: num_speculative_tokens for a Qwen3.5 target, else 0."""
    if is_draft or cache.num_speculative_tokens <= 0:
        return 0
    return cache.num_speculative_tokens if model.model_type in QWEN3_5_TARGET_MODEL_TYPES else 0


def linear_spec(model: ModelSpec, cache: CacheSpec, attn_tp_size: int, *,
                speculative_tokens: int = 0) -> LinearStateSpec:
    """The state spec of one linear-attention layer of ``model`` on one rank."""
    return LinearStateSpec(
        speculative_tokens=speculative_tokens,
        conv_dtype_bytes=DTYPE_BYTES[model.dtype],
        ssm_dtype_bytes=DTYPE_BYTES[ssm_dtype(model)],
        n_local_k_heads=local_heads(model.linear_num_key_heads, attn_tp_size),
        n_local_v_heads=local_heads(model.linear_num_value_heads, attn_tp_size),
        key_head_dim=model.linear_key_head_dim,
        value_head_dim=model.linear_value_head_dim,
        conv_kernel_dim=model.linear_conv_kernel_dim,
    )

