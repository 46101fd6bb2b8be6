"""Model and hardware fixtures for unit tests, from public architecture numbers (FEATURE section 10).

Built here directly (not from conf/) so the unit tests depend only on specs.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Optional

from contract.specs import (
    CacheSpec,
    HardwareProfile,
    LayerwiseFlags,
    ModelSpec,
    ParallelSpec,
    RunSpec,
    Topology,
)

GiB = 1 << 30
MiB = 1 << 20

DEEPSEEK_V3 = ModelSpec(
    name="deepseek_v3", model_type="deepseek_v3", num_hidden_layers=61, attention="mla",
    kv_lora_rank=512, qk_rope_head_dim=64
)
DEEPSEEK_V32 = replace(
    DEEPSEEK_V3, name="deepseek_v32", model_type="deepseek_v32", index_n_heads=64, index_head_dim=128,
)
GLM_5 = ModelSpec(
    name="glm_moe_dsa", model_type="glm_moe_dsa", num_hidden_layers=78, attention="mla",
    kv_lora_rank=512, qk_rope_head_dim=64, index_n_heads=32, index_head_dim=128,
)
QWEN3_5_MOE = ModelSpec(
    name="qwen3_5_moe", model_type="qwen3_5_moe", num_hidden_layers=40, attention="gqa",
    num_key_value_heads=2, head_dim=256, full_attention_interval=4,
    linear_num_key_heads=16, linear_num_value_heads=32, linear_key_head_dim=128,
    linear_value_head_dim=128, linear_conv_kernel_dim=4
)
QWEN3_NEXT = replace(QWEN3_5_MOE, name="qwen3_next", model_type="qwen3_next", num_hidden_layers=48)
LLAMA3_8B = ModelSpec(
    name="llama3_8b", model_type="llama", num_hidden_layers=32, attention="gqa",
    num_key_value_heads=8, head_dim=128,
)
DEEPSEEK_MTP = replace(DEEPSEEK_V3, name="deepseek_v3_mtp", num_hidden_layers=1)
QWEN3_5_MTP = replace(
    QWEN3_5_MOE, name="qwen3_5_mtp", num_hidden_layers=1, layer_types=("full_attention",),
)

SPLIT_MODELS = (DEEPSEEK_V3, DEEPSEEK_V32, GLM_5, QWEN3_5_MOE, QWEN3_NEXT)
ALL_MODELS = SPLIT_MODELS + (LLAMA3_8B,)


def flat_topology(num_cards: int, code: str = "PIX") -> Topology:
    cards = tuple(f"GPU{i}" for i in range(num_cards))
    links = tuple(tuple("X" if i == j else code for j in range(num_cards)) for i in range(num_cards))
    return Topology(cards=cards, links=links, name=f"flat_{num_cards}")


def hardware(num_cards: int = 4, *, hbm_bytes: int = 32 * GiB, reserved_bytes: int = 16 * GiB,
             quantized: bool = True) -> HardwareProfile:
    """BI-V100-like cards (32 GiB, heads-major, flat PIX) with ``hbm - reserved`` for KV.

    ``quantized``: the cards allow every quantized KV cache and the int8 indexer
    cache (as the CPU simulation does); False: none (as BI-V100).
    """
    return HardwareProfile(
        name="test_flat", device_type="cpu", kv_layout="heads_major", num_cards=num_cards,
        hbm_bytes_per_card=hbm_bytes, reserved_bytes_per_card=reserved_bytes,
        topology=flat_topology(num_cards), warp_size=64,
        quantized_kv_cache_dtypes=("int8", "fp8_e4m3", "fp8_e5m2") if quantized else (),
        int8_indexer_cache=quantized,
    )


def run_spec(model: ModelSpec = DEEPSEEK_V32, *, world: int = 4, dp: int = 1, cp: int = 1,
             split: int = 1, enable: bool = True, cache: Optional[CacheSpec] = None,
             num_cards: Optional[int] = None, budget_bytes: int = 16 * GiB, draft: Optional[ModelSpec] = None,
             **parallel) -> RunSpec:
    """A run on one node of ``world`` cards (or ``num_cards``) with ``budget_bytes`` of KV per rank."""
    cards = num_cards or world
    hbm = 32 * GiB
    return RunSpec(
        model=model,
        parallel=ParallelSpec(world_size=world, dp_size=dp, cp_size=cp, **parallel),
        cache=cache or CacheSpec(),
        layerwise=LayerwiseFlags(enable=enable, split_size=split),
        hardware=hardware(cards, hbm_bytes=hbm, reserved_bytes=hbm - budget_bytes),
        draft=draft,
    )
