"""The oracle against FEATURE.md's worked example and hand-computed bytes.

Every expected number here is worked out by hand in the comment beside it, from the
formulas of FEATURE.md section 5 and public architecture numbers.
"""

from __future__ import annotations

import pytest

from harness import oracle
from implementations.specs import (
    CacheSpec,
    HardwareProfile,
    LayerwiseFlags,
    ModelSpec,
    ParallelSpec,
    RunSpec,
    Topology,
)

pytestmark = pytest.mark.unit

GiB = 1 << 30

# Public architecture numbers (FEATURE section 10), shared with the other unit tests.
from testcases.unit._models import DEEPSEEK_V3, DEEPSEEK_V32, GLM_5, LLAMA3_8B, QWEN3_5_MOE  # noqa: E402


def _run(model: ModelSpec, *, world: int = 4, split: int = 1, cache: CacheSpec | None = None) -> RunSpec:
    cards = tuple(f"GPU{i}" for i in range(world))
    links = tuple(tuple("X" if i == j else "PIX" for j in range(world)) for i in range(world))
    hw = HardwareProfile(
        name="flat", device_type="cpu", kv_layout="heads_major", num_cards=world,
        hbm_bytes_per_card=32 * GiB, reserved_bytes_per_card=16 * GiB,
        topology=Topology(cards=cards, links=links),
    )
    return RunSpec(
        model=model, parallel=ParallelSpec(world_size=world), cache=cache or CacheSpec(),
        layerwise=LayerwiseFlags(enable=split > 1, split_size=split), hardware=hw,
    )


# ---- FEATURE section 6 worked example: DeepSeek-V3.2, bf16, block 128 ------------------


def test_worked_example_bytes_per_layer():
    # (2 * (512 + 64) + 2 * 128) * 128 = (1152 + 256) * 128 = 180,224
    per_layer = oracle.expected_layer_bytes_per_block(DEEPSEEK_V32, CacheSpec(), 4)
    assert set(per_layer.values()) == {180_224}
    assert len(per_layer) == 61
    assert oracle.expected_scratch_bytes_per_block(DEEPSEEK_V32, CacheSpec(), 4) == 180_224
    # 61 * 180,224 = 10,993,664
    assert sum(per_layer.values()) == 10_993_664
    assert oracle.expected_full_bytes_per_block(DEEPSEEK_V32, CacheSpec(), 4) == 10_993_664


@pytest.mark.parametrize(
    ("split", "expected_split_blocks"),
    [
        (1, 1562),  # 17,179,869,184 // 10,993,664 = 1562
        (2, 2978),  # rank 0 owns 31 + scratch = 32 layers: // 5,767,168 = 2978
        (4, 5607),  # rank 0 owns 16 + scratch = 17 layers: // 3,063,808 = 5607
    ],
)
def test_worked_example_block_counts(split, expected_split_blocks):
    split_blocks, uniform_blocks = oracle.expected_block_counts(_run(DEEPSEEK_V32, split=split), 16 * GiB)
    assert uniform_blocks == 1562
    assert split_blocks == expected_split_blocks


def test_worked_example_peak_is_32_layers_at_s2():
    run = _run(DEEPSEEK_V32, split=2)
    owner = oracle.expected_owner(oracle.expected_full_layers(DEEPSEEK_V32), 2)
    rank0 = [layer for layer, r in owner.items() if r == 0]
    rank1 = [layer for layer, r in owner.items() if r == 1]
    assert (len(rank0), len(rank1)) == (31, 30)
    # 2978 blocks * 32 layers * 180,224 B; DeepSeek has no linear layers
    assert oracle.expected_rank_bytes(run, 2978, rank0) == 2978 * 32 * 180_224
    assert oracle.expected_rank_bytes(run, 2978, rank1) == 2978 * 31 * 180_224


# ---- section 4: layers and owners --------------------------------------------------------


def test_qwen3_5_full_layers_every_fourth():
    assert oracle.expected_full_layers(QWEN3_5_MOE) == (3, 7, 11, 15, 19, 23, 27, 31, 35, 39)
    assert len(oracle.expected_linear_layers(QWEN3_5_MOE)) == 30
    assert oracle.expected_full_layers(DEEPSEEK_V3) == tuple(range(61))


def test_layer_types_override_interval():
    model = ModelSpec(
        name="m", model_type="m", num_hidden_layers=4, attention="gqa", num_key_value_heads=2,
        head_dim=64, full_attention_interval=4,
        layer_types=("indexed_attention", "linear_attention", "attention", "full_attention"),
    )
    assert oracle.expected_full_layers(model) == (0, 2, 3)


def test_owner_round_robin_on_hybrid_vs_upstream():
    full = oracle.expected_full_layers(QWEN3_5_MOE)
    owner = oracle.expected_owner(full, 2)
    assert [layer for layer in full if owner[layer] == 0] == [3, 11, 19, 27, 35]
    assert [layer for layer in full if owner[layer] == 1] == [7, 15, 23, 31, 39]
    # upstream's layer % 2: every full layer is odd, so split rank 1 owns all ten
    assert set(oracle.expected_upstream_owner(full, 2).values()) == {1}
    assert set(oracle.expected_upstream_owner(full, 4).values()) == {3}


def test_split_groups_consecutive():
    assert oracle.expected_split_groups_consecutive(4, 1, 1, 2) == [[0, 1], [2, 3]]
    assert oracle.expected_split_groups_consecutive(8, 2, 1, 2) == [[0, 1], [2, 3], [4, 5], [6, 7]]
    assert oracle.expected_split_groups_consecutive(8, 2, 1, 4) == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert oracle.expected_split_groups_consecutive(4, 1, 1, 1) == [[0], [1], [2], [3]]
    # dp 1, cp 2, tp 2: TP groups {0,1} and {2,3}
    assert oracle.expected_split_groups_consecutive(4, 1, 2, 2) == [[0, 1], [2, 3]]


# ---- section 5: hand-computed bytes --------------------------------------------------


@pytest.mark.parametrize(
    ("model", "cache", "attn_tp", "expected"),
    [
        # Llama-3-8B, tp 4: 8 // 4 = 2 local heads; 2 * 2 B * 128 * 2 = 1024; * 128 = 131,072
        (LLAMA3_8B, CacheSpec(), 4, 131_072),
        # tp 1: 8 heads; 2 * 2 * 128 * 8 = 4096; * 128 = 524,288
        (LLAMA3_8B, CacheSpec(), 1, 524_288),
        # int8, tp 4: 2 * 1 * 128 * 2 = 512 + scales 2 * 4 * 2 = 16 -> 528 * 128 = 67,584
        (LLAMA3_8B, CacheSpec(kv_cache_dtype="int8"), 4, 67_584),
        # block 16, tp 8: 1 head; 2 * 2 * 128 * 1 = 512 * 16 = 8192
        (LLAMA3_8B, CacheSpec(block_size=16), 8, 8_192),
        # Qwen3.5, tp 4: max(1, 2 // 4) = 1 head; 2 * 2 * 256 * 1 = 1024 * 128 = 131,072
        (QWEN3_5_MOE, CacheSpec(), 4, 131_072),
        # Qwen3.5, tp 1: 2 heads; 2 * 2 * 256 * 2 = 2048 * 128 = 262,144
        (QWEN3_5_MOE, CacheSpec(), 1, 262_144),
        # Qwen3.5 fp8_e4m3, tp 4: 2 * 1 * 256 * 1 = 512 + 2 * 4 * 1 = 8 -> 520 * 128 = 66,560
        (QWEN3_5_MOE, CacheSpec(kv_cache_dtype="fp8_e4m3"), 4, 66_560),
        # DeepSeek-V3 MLA bf16: 2 * 576 = 1152 * 128 = 147,456 (no TP dependence)
        (DEEPSEEK_V3, CacheSpec(), 8, 147_456),
        # MLA int8: 576 + 4 scale = 580 * 128 = 74,240
        (DEEPSEEK_V3, CacheSpec(kv_cache_dtype="int8"), 4, 74_240),
        # MLA fp8_e5m2: same as int8, 580 * 64 = 37,120
        (DEEPSEEK_V3, CacheSpec(kv_cache_dtype="fp8_e5m2", block_size=64), 4, 37_120),
        # V3.2 int8 KV, bf16 index: 580 + 2 * 128 = 836 * 128 = 107,008
        (DEEPSEEK_V32, CacheSpec(kv_cache_dtype="int8"), 4, 107_008),
        # V3.2 bf16 KV, int8 index: 1152 + 128 + 4 = 1284 * 128 = 164,352
        (DEEPSEEK_V32, CacheSpec(index_cache_dtype="int8"), 4, 164_352),
        # GLM-5 bf16, block 64: (1152 + 256) * 64 = 90,112
        (GLM_5, CacheSpec(block_size=64), 4, 90_112),
    ],
    ids=lambda v: v.name if isinstance(v, ModelSpec) else None,
)
def test_full_layer_bytes_hand_computed(model, cache, attn_tp, expected):
    per_layer = oracle.expected_layer_bytes_per_block(model, cache, attn_tp)
    full = oracle.expected_full_layers(model)
    assert {per_layer[layer] for layer in full} == {expected}
    assert all(per_layer[layer] == 0 for layer in per_layer if layer not in full)


def test_indexer_only_on_dsa_models():
    assert oracle.expected_indexer(DEEPSEEK_V32)
    assert oracle.expected_indexer(GLM_5)
    assert not oracle.expected_indexer(DEEPSEEK_V3)
    assert not oracle.expected_indexer(QWEN3_5_MOE)


def test_qwen3_5_linear_state_tp4():
    # tp 4: 16 // 4 = 4 key heads, 32 // 4 = 8 value heads, bf16 (2 B)
    # conv      = 2 * (2 * 128 * 4 + 128 * 8) * (4 - 1) = 2 * 2048 * 3 = 12,288
    # recurrent = 2 * 8 * 128 * 128                     = 262,144
    # per layer and slot 274,432; 30 linear layers; 4 + 2 = 6 slots -> 49,397,760
    per_slot = oracle.expected_linear_state_bytes_per_slot(QWEN3_5_MOE, CacheSpec(), 4)
    assert per_slot == 274_432
    assert oracle.expected_linear_state_bytes(QWEN3_5_MOE, CacheSpec(), 4) == 49_397_760


def test_qwen3_5_linear_state_float32_ssm_and_more_seqs():
    # recurrent in float32: 4 * 262,144 / 2 = 524,288; conv stays bf16 12,288
    # 536,576 per layer and slot * 30 layers * (8 + 2) slots = 160,972,800
    cache = CacheSpec(ssm_cache_dtype="float32", max_seqs_per_batch=8)
    assert oracle.expected_linear_state_bytes(QWEN3_5_MOE, cache, 4) == 160_972_800


def test_no_linear_state_without_linear_layers():
    assert oracle.expected_linear_state_bytes(DEEPSEEK_V32, CacheSpec(), 4) == 0


# ---- section 6 on a hybrid model ---------------------------------------------------------


def test_qwen3_5_block_counts_tp4():
    # available = 16 GiB - 49,397,760 = 17,130,471,424
    # uniform: 10 layers * 131,072 = 1,310,720 B/block -> 13,069 blocks
    # s = 2: 5 owned + scratch = 6 * 131,072 = 786,432 -> 21,782 blocks
    # s = 4: split rank 0 owns 3 (3, 19, 35) + scratch = 4 * 131,072 = 524,288 -> 32,673 blocks
    assert oracle.expected_block_counts(_run(QWEN3_5_MOE, split=1), 16 * GiB) == (13_069, 13_069)
    assert oracle.expected_block_counts(_run(QWEN3_5_MOE, split=2), 16 * GiB) == (21_782, 13_069)
    assert oracle.expected_block_counts(_run(QWEN3_5_MOE, split=4), 16 * GiB) == (32_673, 13_069)


def test_additional_bytes_for_draft():
    # DeepSeek-V3 target s = 2 + 1-layer MTP draft (147,456 B/block, never split):
    # split cost = (31 + 1) * 147,456 + 147,456 = 33 * 147,456 = 4,866,048 -> 16 GiB // = 3530
    # uniform    = (61 + 1) * 147,456 = 9,142,272 -> 1879
    split_blocks, uniform_blocks = oracle.expected_block_counts(
        _run(DEEPSEEK_V3, split=2), 16 * GiB, additional_bytes_per_block=147_456
    )
    assert (split_blocks, uniform_blocks) == (3530, 1879)


def test_rank_bytes_uniform_includes_linear_state_and_no_scratch():
    run = _run(QWEN3_5_MOE, split=1)
    full = oracle.expected_full_layers(QWEN3_5_MOE)
    # 100 blocks * 10 * 131,072 + 49,397,760 = 131,072,000 + 49,397,760
    assert oracle.expected_rank_bytes(run, 100, full) == 180_469_760
    assert oracle.expected_rank_bytes(run, 100, full, include_linear_state=False) == 131_072_000


def test_rank_bytes_split_owner_of_nothing_still_has_scratch():
    # upstream rule at s = 2: split rank 0 owns nothing but still keeps one scratch layer
    run = _run(QWEN3_5_MOE, split=2)
    assert oracle.expected_rank_bytes(run, 10, [], include_linear_state=False) == 10 * 131_072
