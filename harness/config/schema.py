"""Structured config schemas: what ``conf/`` may contain, key by key, with types.

Each dataclass mirrors one of ``implementations.specs`` so a YAML option or an
override maps onto a spec field of the same name. OmegaConf enforces them: a
misspelled key or a wrong type fails at composition (``compose``), before any
planning. Hardware sizes are MiB here (what a spec sheet says) and bytes in the
spec.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from omegaconf import MISSING


@dataclass
class ModelConfig:
    """One model's architecture numbers (``conf/model/<name>.yaml``); mirrors ``specs.ModelSpec``."""

    name: str = MISSING
    """Option name, or the path of a loaded config.json."""
    model_type: str = MISSING
    """Hugging Face ``model_type``."""
    num_hidden_layers: int = MISSING
    """Decoder layers."""
    attention: str = MISSING
    """``mla`` (one latent KV head) or ``gqa`` (K and V per KV head)."""
    dtype: str = "bfloat16"
    """Model dtype; KV dtype ``auto`` means this one."""
    num_key_value_heads: int = 0
    """GQA KV heads (0 for MLA)."""
    head_dim: int = 0
    """GQA head dim (0 for MLA)."""
    kv_lora_rank: int = 0
    """MLA latent rank."""
    qk_rope_head_dim: int = 0
    """MLA rope part of a key."""
    index_n_heads: int = 0
    """DSA indexer heads; > 0 means full-attention layers carry an indexer cache."""
    index_head_dim: int = 0
    """DSA indexer head dim."""
    layer_types: Optional[List[str]] = None
    """Per-layer kind (full_attention / attention are full, anything else linear); null: use the interval."""
    full_attention_interval: int = 1
    """Layer l is full iff interval <= 1 or (l + 1) % interval == 0."""
    linear_num_key_heads: int = 0
    """Gated DeltaNet key heads."""
    linear_num_value_heads: int = 0
    """Gated DeltaNet value heads."""
    linear_key_head_dim: int = 0
    """Gated DeltaNet key head dim."""
    linear_value_head_dim: int = 0
    """Gated DeltaNet value head dim."""
    linear_conv_kernel_dim: int = 0
    """Gated DeltaNet short-convolution kernel."""
    mamba_ssm_dtype: Optional[str] = None
    """Recurrent (SSM) state dtype; null: the model dtype."""
    num_attention_heads: int = 0
    """Query heads (informational)."""
    num_nextn_predict_layers: int = 0
    """MTP layers; as a draft, the draft engine's layer count when > 0."""
    body_tp1: bool = False
    """As a draft only: its body runs at TP 1 (upstream enable_mtp_draft_body_tp1) and its KV keeps its own shape."""


@dataclass
class HardwareConfig:
    """One machine kind (``conf/hardware/<name>.yaml``); mirrors ``specs.HardwareProfile``."""

    name: str = MISSING
    """Option name."""
    device_type: str = MISSING
    """``cpu`` (simulated cards) or ``cuda`` (Iluvatar cards appear as CUDA devices)."""
    kv_layout: str = MISSING
    """``heads_major`` (ILU/MLU) or ``tokens_major`` (CUDA/NPU)."""
    num_cards: int = MISSING
    """Cards per node."""
    hbm_mib_per_card: int = MISSING
    """Device memory of one card, MiB."""
    reserved_mib_per_card: int = MISSING
    """Weights, activations, runtime: what is not for KV, MiB."""
    topology: str = MISSING
    """Fixture name in ``conf/topology`` or a path to a topo -m text / YAML file."""
    warp_size: int = 32
    """Threads per warp (64 on Iluvatar)."""
    quantized_kv_cache_dtypes: List[str] = field(default_factory=list)
    """Quantized KV cache dtypes the cards support (int8, fp8_e4m3, fp8_e5m2); empty: none."""
    int8_indexer_cache: bool = False
    """Whether the cards support the int8 DSA indexer cache."""
    facts: Dict[str, Any] = field(default_factory=dict)
    """Facts the spec does not carry (bus ids, clocks, SDK versions), kept for reports."""


@dataclass
class ParallelConfig:
    """Process layout (``conf/parallel/<name>.yaml``); mirrors ``specs.ParallelSpec``."""

    world_size: int = MISSING
    """Ranks in all."""
    dp_size: int = 1
    """Data-parallel replicas."""
    cp_size: int = 1
    """Context-parallel size (split requires 1)."""
    kv_split_size: int = 1
    """KV split size; 0 follows cp_size (upstream); split requires an effective size of 1."""


@dataclass
class LayerwiseConfig:
    """``--enable_layerwise_split`` / ``--layerwise_split_size``; mirrors ``specs.LayerwiseFlags``."""

    enable: bool = False
    """enable_layerwise_split."""
    split_size: int = 1
    """layerwise_split_size (s)."""


@dataclass
class CacheConfig:
    """KV cache options of the engine; mirrors ``specs.CacheSpec``."""

    block_size: int = 128
    """Token slots per block."""
    kv_cache_dtype: str = "auto"
    """auto (model dtype), int8, fp8_e4m3 or fp8_e5m2."""
    indexer_cache_dtype: str = "auto"
    """DSA indexer cache dtype: auto or int8."""
    max_seqs_per_batch: int = 200
    """Concurrent sequences (upstream default 200); sizes linear state without prefix cache; 0 = unlimited."""
    max_linear_state_cache_slots: int = 0
    """> 0: exactly this many linear-state slots (+ 2 padding); 0 = auto-size."""
    enable_prefix_cache: bool = True
    """Prefix cache (upstream default on): linear state auto-sized to ~0.9/1.9 of the budget."""
    num_speculative_tokens: int = 0
    """Speculative tokens per step; grow a Qwen3.5 target's linear state."""
    kv_budget_bytes: int = 0
    """> 0: per-rank KV budget in bytes, overriding the hardware profile's (hbm - reserved)."""
    host_blocks_factor: float = 0.0
    """> 1 enables the host (hierarchical) cache."""
    enable_sleep_mode: bool = False
    """Sleep mode (split requires false)."""
    enable_xtensor: bool = False
    """xtensor (split requires false)."""


@dataclass
class RunnerConfig:
    """How the distributed suites start rank processes."""

    backend: str = "auto"
    """auto, gloo or nccl."""
    timeout_s: float = 60.0
    """Seconds before a hung rank fails its test."""
    start_method: str = "spawn"
    """multiprocessing start method of rank processes."""


@dataclass
class ReportConfig:
    """Where results go."""

    results_dir: str = "reports"
    """Machine-readable results and Allure results, relative to the working directory."""


TC_IDS = ["TC-01", "TC-02", "TC-03", "TC-04", "TC-05", "TC-06", "TC-07"]


@dataclass
class SuiteConfig:
    """Which TCs ``python -m harness`` runs for its one configuration (``conf/suite/<name>.yaml``)."""

    name: str = "all"
    """Option name."""
    tcs: List[str] = field(default_factory=lambda: list(TC_IDS))
    """TC ids (TC-01 .. TC-07) to run."""
    matrix: str = "ci"
    """``conf/matrix/<name>.yaml`` the TC suites draw their cases from (narrowed to this configuration)."""
    mode: str = "suite"
    """``suite``: run the TCs on rank processes; ``plan``: only plan (no process group). Group ``mode`` sets it."""


@dataclass
class Config:
    """The whole configuration ``conf/config.yaml`` composes."""

    model: ModelConfig = MISSING
    """Target model (group ``model``)."""
    draft: Optional[ModelConfig] = None
    """Speculative draft model (group ``draft``; ``none`` = not speculative). Never split."""
    hardware: HardwareConfig = MISSING
    """Machine kind (group ``hardware``)."""
    parallel: ParallelConfig = MISSING
    """Process layout (group ``parallel``)."""
    layerwise: LayerwiseConfig = field(default_factory=LayerwiseConfig)
    """Layerwise split flags (group ``layerwise``)."""
    cache: CacheConfig = field(default_factory=CacheConfig)
    """KV cache options."""
    implementation: Any = MISSING
    """Implementation under test: a node with ``_target_`` (group ``implementation``)."""
    placement: Optional[List[int]] = None
    """Card of each rank within its node; null = rank % num_cards."""
    model_path: Optional[str] = None
    """A local Hugging Face config.json that replaces ``model`` (see ``compose``)."""
    draft_path: Optional[str] = None
    """A local Hugging Face config.json that replaces ``draft`` (see ``compose``)."""
    runner: RunnerConfig = field(default_factory=RunnerConfig)
    """Distributed runner settings."""
    report: ReportConfig = field(default_factory=ReportConfig)
    """Result locations."""
    suite: SuiteConfig = field(default_factory=SuiteConfig)
    """What ``python -m harness`` runs (groups ``suite`` and ``mode``)."""
