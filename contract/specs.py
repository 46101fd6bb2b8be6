"""Inputs of a plan: frozen, keyword-only value objects (no torch, no I/O).

These are what the harness builds from Hydra config and hands to an
implementation. Variants are made with ``dataclasses.replace``; nothing here
changes in place. Field names follow the upstream / Hugging Face config names so
a ``config.json`` maps onto them directly.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from operator import attrgetter
from typing import Optional

# Bytes per element of the dtype names the harness accepts.
DTYPE_BYTES = {
    "bfloat16": 2,
    "float16": 2,
    "float32": 4,
    "int8": 1,
    "fp8_e4m3": 1,
    "fp8_e5m2": 1,
}
KV_CACHE_DTYPES = ("auto", "int8", "fp8_e4m3", "fp8_e5m2")
QUANTIZED_KV_CACHE_DTYPES = ("int8", "fp8_e4m3", "fp8_e5m2")
INDEXER_CACHE_DTYPES = ("auto", "int8")
FULL_ATTENTION_TYPES = ("full_attention", "attention")
"""``layer_types`` values of a full-attention layer; every other value is linear (upstream's rule)."""
KV_LAYOUTS = ("heads_major", "tokens_major")


_HASH = "_hash_of_fields"
"""The instance attribute (not a field) where ``_hash_once`` keeps a spec's hash."""
_FIELDS_OF: dict = {}
"""Spec class -> a getter of its fields' values, in order, as one tuple (built once per class)."""


def _hash_once(self) -> int:
    """The hash of a spec's fields, the one the dataclass would compute (``hash`` of the tuple of its fields,
    so equal specs hash alike), computed on first use and kept in the instance: a spec is immutable, and the
    oracle's memos key on specs (a model, a cache, a hardware profile with its link matrix) thousands of times
    per exploration, each time walking every field."""
    try:
        return self.__dict__[_HASH]
    except KeyError:
        values_of = _FIELDS_OF.get(type(self))
        if values_of is None:
            names = tuple(f.name for f in fields(self))
            single = attrgetter(*names)
            values_of = _FIELDS_OF[type(self)] = single if len(names) > 1 else (lambda spec: (single(spec),))
        value = hash(values_of(self))
        object.__setattr__(self, _HASH, value)
        return value


def _state_without_hash(self) -> dict:
    """What pickling and copying keep of a spec: its fields, never the kept hash (a string's hash differs
    from one process to another)."""
    return {k: v for k, v in self.__dict__.items() if k != _HASH}


@dataclass(frozen=True, kw_only=True)
class ModelSpec:
    """Architecture numbers that decide KV bytes and which layers are full attention."""

    __hash__ = _hash_once
    __getstate__ = _state_without_hash

    name: str
    """Config name in ``conf/model`` (or the path of a loaded config.json)."""
    model_type: str
    """Hugging Face ``model_type``; decides whether layerwise split is supported (FEATURE 3)."""
    num_hidden_layers: int
    attention: str
    """``mla`` (one latent KV head) or ``gqa`` (GQA/MHA, K and V per KV head)."""
    dtype: str = "bfloat16"
    """Model (activation) dtype; KV dtype ``auto`` means this one."""
    num_key_value_heads: int = 0
    head_dim: int = 0
    kv_lora_rank: int = 0
    qk_rope_head_dim: int = 0
    index_n_heads: int = 0
    """DSA indexer heads; > 0 means full-attention layers carry an indexer cache."""
    index_head_dim: int = 0
    layer_types: Optional[tuple[str, ...]] = None
    """Per-layer kind; None means derive from ``full_attention_interval``."""
    full_attention_interval: int = 1
    linear_num_key_heads: int = 0
    linear_num_value_heads: int = 0
    linear_key_head_dim: int = 0
    linear_value_head_dim: int = 0
    linear_conv_kernel_dim: int = 0
    mamba_ssm_dtype: Optional[str] = None
    """dtype of the linear-attention recurrent (SSM) state; None means the model dtype."""
    num_attention_heads: int = 0
    """Query heads (informational; ``head_dim`` falls back to hidden_size / this)."""
    num_nextn_predict_layers: int = 0
    """MTP layers. As a speculative draft, the draft engine's layer count when > 0
    (upstream: ``n_layers = num_nextn_predict_layers`` for a draft engine)."""
    body_tp1: bool = False
    """As a speculative draft: its body runs at TP 1 (upstream ``enable_mtp_draft_body_tp1``),
    so its KV takes its own cache shape instead of the target's."""


@dataclass(frozen=True, kw_only=True)
class ParallelSpec:
    """Process layout. Attention TP size is derived: world / (dp * cp)."""

    __hash__ = _hash_once
    __getstate__ = _state_without_hash

    world_size: int
    dp_size: int = 1
    cp_size: int = 1
    kv_split_size: int = 1
    """KV split size; 0 follows cp_size (upstream). Split requires an effective size of 1."""


@dataclass(frozen=True, kw_only=True)
class CacheSpec:
    """KV cache options of the engine."""

    __hash__ = _hash_once
    __getstate__ = _state_without_hash

    block_size: int = 128
    kv_cache_dtype: str = "auto"
    """auto (model dtype), int8, fp8_e4m3 or fp8_e5m2."""
    indexer_cache_dtype: str = "auto"
    """DSA indexer cache dtype: auto (model dtype) or int8 (+ one float32 scale per token)."""
    max_seqs_per_batch: int = 200
    """Concurrent sequences; sizes the linear state without prefix cache (0 = unlimited)."""
    max_linear_state_cache_slots: int = 0
    """> 0: exactly this many linear-state slots (+ 2 padding); 0 = auto-size."""
    enable_prefix_cache: bool = True
    """Prefix cache (upstream default on): auto-sizes the linear state to ~0.9/1.9 of the budget."""
    num_speculative_tokens: int = 0
    """Speculative tokens; grow a Qwen3.5 target's conv and SSM state."""
    kv_budget_bytes: int = 0
    """> 0: the per-rank KV budget in bytes, overriding the one the hardware profile derives."""
    host_blocks_factor: float = 0.0
    """> 1 enables the host (hierarchical) cache, which split does not support."""
    enable_sleep_mode: bool = False
    enable_xtensor: bool = False


@dataclass(frozen=True, kw_only=True)
class LayerwiseFlags:
    """``--enable_layerwise_split`` and ``--layerwise_split_size``."""

    __hash__ = _hash_once
    __getstate__ = _state_without_hash

    enable: bool = False
    split_size: int = 1

    @property
    def active(self) -> bool:
        """The split is on: enabled with s > 1 (the one owner of this rule outside the oracle)."""
        return self.enable and self.split_size > 1

    @property
    def effective_split_size(self) -> int:
        """s when the split is active, else 1."""
        return self.split_size if self.active else 1


@dataclass(frozen=True, kw_only=True)
class Topology:
    """Link matrix between cards, as ``nvidia-smi topo -m`` / ``ixsmi topo -m`` print it.

    ``links[i][j]`` is one of X, PIX, PXB, PHB, NODE, SYS, NV<n> (X on the diagonal).
    """

    __hash__ = _hash_once
    __getstate__ = _state_without_hash

    cards: tuple[str, ...]
    links: tuple[tuple[str, ...], ...]
    name: str = "topology"


@dataclass(frozen=True, kw_only=True)
class HardwareProfile:
    """One machine kind: cards per node, memory, KV layout, link topology."""

    __hash__ = _hash_once
    __getstate__ = _state_without_hash

    name: str
    device_type: str
    """``cpu`` (simulated cards) or ``cuda`` (Iluvatar cards appear as CUDA devices)."""
    kv_layout: str
    """``heads_major`` [n_blocks, n_heads, block_size, head_dim] (ILU/MLU) or ``tokens_major``."""
    num_cards: int
    """Cards per node."""
    hbm_bytes_per_card: int
    reserved_bytes_per_card: int
    """Weights, activations and runtime: what is not for KV; each rank on the card keeps its own."""
    topology: Topology
    warp_size: int = 32
    quantized_kv_cache_dtypes: tuple[str, ...] = ()
    """Quantized KV cache dtypes the cards support (upstream: int8 on MLU only)."""
    int8_indexer_cache: bool = False
    """Whether the cards support the int8 DSA indexer cache (upstream: NPU and MLU)."""

    @property
    def kv_budget_bytes(self) -> int:
        """Per-rank KV budget the profile derives: HBM minus the reserve."""
        return self.hbm_bytes_per_card - self.reserved_bytes_per_card


@dataclass(frozen=True, kw_only=True)
class RunSpec:
    """Everything a master needs to validate and plan one configuration."""

    __hash__ = _hash_once
    __getstate__ = _state_without_hash

    model: ModelSpec
    parallel: ParallelSpec
    cache: CacheSpec = field(default_factory=CacheSpec)
    layerwise: LayerwiseFlags = field(default_factory=LayerwiseFlags)
    hardware: HardwareProfile
    draft: Optional[ModelSpec] = None
    """Speculative draft model (never split); None when not speculative."""
    placement: Optional[tuple[int, ...]] = None
    """Card of each rank within its node; None means rank % num_cards."""

    @property
    def kv_budget_bytes(self) -> int:
        """The per-rank KV budget: ``cache.kv_budget_bytes`` when > 0, else the hardware profile's."""
        if self.cache.kv_budget_bytes > 0:
            return self.cache.kv_budget_bytes
        return self.hardware.kv_budget_bytes
