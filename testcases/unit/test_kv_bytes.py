"""Bytes per layer (FEATURE section 5), checked against numbers worked out by hand here."""

from __future__ import annotations

from dataclasses import replace

import pytest

from contract.specs import CacheSpec
from implementations.reference import ReferenceImplementation
from implementations.reference.kv_bytes import (
    GQAFullSpec,
    IndexerSpec,
    LinearStateSpec,
    MLAFullSpec,
    full_spec,
    linear_spec,
    speculative_state_tokens,
    ssm_dtype,
)
from testcases.unit._models import (
    DEEPSEEK_V3,
    DEEPSEEK_V32,
    GLM_5,
    LLAMA3_8B,
    QWEN3_5_MOE,
    QWEN3_NEXT,
)

pytestmark = pytest.mark.unit
REF = ReferenceImplementation()


def test_mla_bf16_slot():
    spec = MLAFullSpec(block_size=128, kv_dtype_bytes=2, quantized=False, kv_lora_rank=512, qk_rope_head_dim=64)
    assert spec.slot_bytes == 2 * (512 + 64) == 1152
    assert spec.scale_slot_bytes == 0
    assert spec.index_slot_bytes == 0
    assert spec.block_bytes == 128 * 1152


def test_dsa_layer_is_feature_example():
    # FEATURE section 6: DeepSeek-V3.2, bf16, block 128: one layer costs 180,224 B/block.
    spec = full_spec(DEEPSEEK_V32, CacheSpec(block_size=128), 4, with_indexer=True)
    assert spec.index_slot_bytes == 2 * 128
    assert spec.block_bytes == 180_224


@pytest.mark.parametrize("kv_dtype", ["int8", "fp8_e4m3", "fp8_e5m2"])
def test_mla_quantized_adds_one_scale(kv_dtype):
    spec = full_spec(DEEPSEEK_V3, CacheSpec(block_size=16, kv_cache_dtype=kv_dtype), 4, with_indexer=False)
    assert spec.slot_bytes == 1 * (512 + 64)
    assert spec.scale_slot_bytes == 4
    assert spec.block_bytes == 16 * (576 + 4)


def test_int8_indexer_slot():
    ix = IndexerSpec(index_head_dim=128, dtype_bytes=2, int8=True)
    assert ix.index_slot_bytes == 128 + 4
    spec = full_spec(GLM_5, CacheSpec(block_size=64, indexer_cache_dtype="int8"), 8, with_indexer=True)
    assert spec.block_bytes == 64 * (1152 + 132)


@pytest.mark.parametrize(
    "tp, local_heads",
    [(1, 2), (2, 1), (4, 1), (8, 1)],  # 2 KV heads: replicated once tp > 2
)
def test_gqa_local_heads_replicated(tp, local_heads):
    spec = full_spec(QWEN3_5_MOE, CacheSpec(), tp, with_indexer=False)
    assert spec.n_local_kv_heads == local_heads
    assert spec.slot_bytes == 2 * 2 * 256 * local_heads
    assert spec.block_bytes == 128 * 2 * 2 * 256 * local_heads


def test_gqa_quantized_scales_per_head():
    spec = GQAFullSpec(block_size=32, kv_dtype_bytes=1, quantized=True, head_dim=128, n_local_kv_heads=2)
    assert spec.slot_bytes == 2 * 128 * 2
    assert spec.scale_slot_bytes == 2 * 4 * 2
    assert spec.block_bytes == 32 * (512 + 16)


def test_llama_tp4():
    # 8 KV heads / tp 4 = 2 per rank; K and V, bf16, head_dim 128.
    spec = full_spec(LLAMA3_8B, CacheSpec(block_size=128), 4, with_indexer=False)
    assert spec.block_bytes == 128 * 2 * 2 * 128 * 2 == 131_072


def test_qwen35_linear_state_tp4():
    spec = linear_spec(QWEN3_5_MOE, CacheSpec(), 4)
    # 16 key heads / 4 = 4, 32 value heads / 4 = 8; kernel 4 keeps 3 columns.
    assert spec.conv_seq_bytes == 2 * (2 * 128 * 4 + 128 * 8) * 3 == 12_288
    assert spec.recurrent_seq_bytes == 2 * 8 * 128 * 128 == 262_144
    assert spec.seq_bytes == 274_432


def test_linear_state_ssm_dtype():
    spec = linear_spec(replace(QWEN3_NEXT, mamba_ssm_dtype="float32"), CacheSpec(), 8)
    # conv stays model dtype; recurrent in float32. 16/8 = 2 key heads, 32/8 = 4 value heads.
    assert spec.conv_seq_bytes == 2 * (2 * 128 * 2 + 128 * 4) * 3
    assert spec.recurrent_seq_bytes == 4 * 4 * 128 * 128


def test_linear_state_heads_floor_at_one():
    spec = LinearStateSpec(conv_dtype_bytes=2, ssm_dtype_bytes=2, n_local_k_heads=1, n_local_v_heads=1,
                           key_head_dim=8, value_head_dim=4, conv_kernel_dim=1)
    assert spec.conv_seq_bytes == 0  # kernel 1 keeps no window
    assert spec.recurrent_seq_bytes == 2 * 8 * 4
    tiny = linear_spec(replace(QWEN3_5_MOE, linear_num_key_heads=2, linear_num_value_heads=2), CacheSpec(), 4)
    assert (tiny.n_local_k_heads, tiny.n_local_v_heads) == (1, 1)


def test_layer_bytes_per_block_hybrid_zero_on_linear():
    per_layer = REF.layer_bytes_per_block(QWEN3_5_MOE, CacheSpec(), 4)
    assert len(per_layer) == 40
    assert [l for l, b in enumerate(per_layer) if b] == list(range(3, 40, 4))
    assert set(per_layer[l] for l in range(3, 40, 4)) == {128 * 2 * 2 * 256}


def test_layer_bytes_indexer_only_on_dsa():
    assert set(REF.layer_bytes_per_block(DEEPSEEK_V32, CacheSpec(), 4)) == {180_224}
    assert set(REF.layer_bytes_per_block(DEEPSEEK_V3, CacheSpec(), 4)) == {128 * 1152}


def test_scratch_is_one_full_layer_with_index():
    assert REF.scratch_bytes_per_block(DEEPSEEK_V32, CacheSpec(), 4) == 180_224
    assert REF.scratch_bytes_per_block(QWEN3_5_MOE, CacheSpec(), 4) == 128 * 1024


def test_linear_slot_bytes_qwen35():
    assert REF.linear_slot_bytes(QWEN3_5_MOE, CacheSpec(), 4) == 274_432
    assert REF.linear_slot_bytes(DEEPSEEK_V3, CacheSpec(), 4) == 0


@pytest.mark.parametrize("n_spec", [1, 3])
def test_speculative_tokens_grow_qwen35_target_state(n_spec):
    # FEATURE 5: conv window kernel - 1 + n_spec, recurrent state n_spec + 1 checkpoints (Qwen3.5 targets only).
    cache = CacheSpec(num_speculative_tokens=n_spec)
    conv = 2 * (2 * 128 * 4 + 128 * 8) * (3 + n_spec)
    recurrent = 2 * 8 * 128 * 128 * (n_spec + 1)
    assert REF.linear_slot_bytes(QWEN3_5_MOE, cache, 4) == conv + recurrent
    # Qwen3-Next is not a Qwen3.5 target: no growth; nor is any draft engine.
    assert REF.linear_slot_bytes(QWEN3_NEXT, cache, 4) == 274_432
    assert speculative_state_tokens(QWEN3_5_MOE, cache, is_draft=True) == 0
    assert speculative_state_tokens(replace(QWEN3_5_MOE, model_type="qwen3_5_moe_text"), cache, is_draft=False) == n_spec


def test_mamba_ssm_dtype_defaults_to_model_dtype():
    assert ssm_dtype(QWEN3_5_MOE) == "bfloat16"
    assert ssm_dtype(replace(QWEN3_5_MOE, mamba_ssm_dtype="float32")) == "float32"
