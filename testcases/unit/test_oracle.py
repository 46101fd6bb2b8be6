"""The oracle against FEATURE.md (version 2): its worked example and hand-computed figures.

Every expected number here is worked out by hand in the comment beside it, from the
formulas of FEATURE.md sections 4-7 and public architecture numbers. Upstream xLLM's own
test cases, run against the oracle, are in test_oracle_upstream.py.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from dataclasses import fields, replace
from types import SimpleNamespace

import pytest

from contract.specs import CacheSpec, HardwareProfile, ModelSpec, Topology
from harness import oracle
from harness.oracle import readers
from harness.paths import TOPOLOGY_DIR
from testcases import ROOT
from testcases.unit._models import (
    DEEPSEEK_MTP,
    DEEPSEEK_V3,
    DEEPSEEK_V32,
    GLM_5,
    LLAMA3_8B,
    QWEN3_5_MOE,
    QWEN3_5_MTP,
    QWEN3_NEXT,
    GiB,
    MiB,
    run_spec,
)

pytestmark = pytest.mark.unit

CPU_BUDGET = 128 * MiB  # conf/hardware/cpu.yaml: 512 - 384 MiB per card


def cache(**values):
    """A cache spec with FEATURE v2 inputs, whether or not today's CacheSpec has the fields."""
    known = {f.name for f in fields(CacheSpec)}
    if set(values) <= known:
        return CacheSpec(**values)
    base = {f.name: getattr(CacheSpec(), f.name) for f in fields(CacheSpec)}
    base.update(values)
    return SimpleNamespace(**base)


def with_model(model, **values):
    """A model spec with v2 keys (``mamba_ssm_dtype``, ``num_nextn_predict_layers``)."""
    known = {f.name for f in fields(ModelSpec)}
    if set(values) <= known:
        return replace(model, **values)
    base = {f.name: getattr(model, f.name) for f in fields(ModelSpec)}
    base.update(values)
    return SimpleNamespace(**base)


OLD_DEFAULTS = dict(max_seqs_per_batch=4, enable_prefix_cache=False)
V2_DEFAULTS = dict(max_seqs_per_batch=200, enable_prefix_cache=True, max_linear_state_cache_slots=0)


def topo_hardware(fixture: str, num_cards: int = 8, *, budget_bytes: int = 16 * GiB) -> HardwareProfile:
    """Cards named after a conf/topology fixture; the links given here are deliberately flat
    so a test shows the oracle reads the fixture itself."""
    cards = tuple(f"GPU{i}" for i in range(num_cards))
    links = tuple(tuple("X" if i == j else "PIX" for j in range(num_cards)) for i in range(num_cards))
    return HardwareProfile(
        name="t", device_type="cpu", kv_layout="heads_major", num_cards=num_cards,
        hbm_bytes_per_card=32 * GiB, reserved_bytes_per_card=32 * GiB - budget_bytes,
        topology=Topology(cards=cards, links=links, name=fixture),
    )


# ---- FEATURE section 6 worked example: DeepSeek-V3.2, bf16, block 128 ----------------------


def test_worked_example_bytes_per_layer():
    # (2 * (512 + 64) + 2 * 128) * 128 = (1152 + 256) * 128 = 180,224
    per_layer = oracle.expected_layer_bytes_per_block(DEEPSEEK_V32, CacheSpec(), 4)
    assert set(per_layer.values()) == {180_224}
    assert len(per_layer) == 61
    assert oracle.expected_scratch_bytes_per_block(DEEPSEEK_V32, CacheSpec(), 4) == 180_224
    # 61 * 180,224 = 10,993,664
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
    run = run_spec(DEEPSEEK_V32, split=split)
    assert oracle.expected_block_counts(run, 16 * GiB) == (expected_split_blocks, 1562)
    assert oracle.expected_capacity(run, 16 * GiB).n_blocks == expected_split_blocks


def test_worked_example_peak_is_32_layers_at_s2():
    run = run_spec(DEEPSEEK_V32, split=2)
    report = oracle.expected_report(run, 16 * GiB)
    # 2978 blocks * 32 layers (31 owned + scratch) * 180,224 B; no linear layers
    assert report.peak_bytes == 2978 * 32 * 180_224
    assert report.rank_bytes == (2978 * 32 * 180_224, 2978 * 31 * 180_224) * 2
    assert report.uniform_peak_bytes == 2978 * 61 * 180_224
    assert report.savings_bytes == 2978 * 29 * 180_224
    assert report.mean_bytes == 2978 * 180_224 * 63 // 2
    assert report.capacity_gain == 2978 / 1562


# ---- section 4: layers, owners, groups -------------------------------------------------------


def test_qwen3_5_full_layers_every_fourth():
    assert oracle.expected_full_layers(QWEN3_5_MOE) == (3, 7, 11, 15, 19, 23, 27, 31, 35, 39)
    assert len(oracle.expected_linear_layers(QWEN3_5_MOE)) == 30
    assert oracle.expected_full_layers(DEEPSEEK_V3) == tuple(range(61))


def test_layer_types_only_full_attention_and_attention_are_full():
    # upstream is_full_attention_layer: any other value (here indexed_attention) is linear
    model = ModelSpec(
        name="m", model_type="m", num_hidden_layers=5, attention="gqa", num_key_value_heads=2,
        head_dim=64, full_attention_interval=2,
        layer_types=("indexed_attention", "linear_attention", "attention", "full_attention"),
    )
    # layer 4 is past layer_types: the interval decides, (4 + 1) % 2 != 0 -> linear
    assert oracle.expected_full_layers(model) == (2, 3)
    assert oracle.has_linear_attention_layers(model)


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


@pytest.mark.parametrize(
    ("fixture", "world", "dp", "split", "groups"),
    [
        # flat PIX: upstream's consecutive groups
        ("bi_v100_pix4", 4, 1, 2, [[0, 1], [2, 3]]),
        # two switches, GPU0-3 | GPU4-7: consecutive groups are already same-switch
        ("pcie_2switch_8", 8, 1, 4, [[0, 1, 2, 3], [4, 5, 6, 7]]),
        ("pcie_2switch_8", 8, 1, 2, [[0, 1], [2, 3], [4, 5], [6, 7]]),
        # even GPUs on switch A, odd on B (NODE across): pairs / quads within a switch
        ("pcie_2switch_8_interleaved", 8, 1, 2, [[0, 2], [1, 3], [4, 6], [5, 7]]),
        ("pcie_2switch_8_interleaved", 8, 1, 4, [[0, 2, 4, 6], [1, 3, 5, 7]]),
        # world 8 = dp 2 x tp 4: TP groups {0..3} and {4..7}, each split on its switch
        ("pcie_2switch_8_interleaved", 8, 2, 2, [[0, 2], [1, 3], [4, 6], [5, 7]]),
        # hybrid cube mesh, s = 2: NV2 pairs exist for everyone; smallest such partition:
        # 0's NV2 partners 3, 4 -> [0,3]; 1's remaining NV2 partners 2, 5 -> [1,2]; then 4-7, 5-6
        ("nvlink_mesh_8", 8, 1, 2, [[0, 3], [1, 2], [4, 7], [5, 6]]),
        # s = 4: no quad is all NV2 (0's NV2 partners 3 and 4 are SYS apart), both quads of
        # the consecutive split have worst link NV1, so the tie keeps consecutive order
        ("nvlink_mesh_8", 8, 1, 4, [[0, 1, 2, 3], [4, 5, 6, 7]]),
    ],
)
def test_split_groups_topology_aware(fixture, world, dp, split, groups):
    run = replace(run_spec(DEEPSEEK_V32, world=world, dp=dp, split=split), hardware=topo_hardware(fixture))
    assert oracle.oracle_topology(run).source.endswith(fixture + ".txt")
    assert oracle.expected_split_groups(run) == groups
    assert oracle.expected_split_groups(run, rule="consecutive") == oracle.expected_split_groups_consecutive(
        world, dp, 1, split)


def test_regrouped_positions_differ_from_rank_mod_s():
    # pcie_2switch_8 with ranks 0, 2 on switch A (cards 0, 1) and 1, 3 on switch B (cards 4, 5)
    run = replace(run_spec(QWEN3_5_MOE, world=4, split=2), hardware=topo_hardware("pcie_2switch_8"),
                  placement=(0, 4, 1, 5))
    assert oracle.expected_split_groups(run) == [[0, 2], [1, 3]]
    assert [oracle.expected_split_position(run, r) for r in range(4)] == [(0, 0), (1, 0), (0, 1), (1, 1)]
    assert [oracle.expected_upstream_worker_split_rank(run, r) for r in range(4)] == [0, 1, 0, 1]
    assert oracle.expected_rank_owned_layers(run, 1) == (3, 11, 19, 27, 35)  # position 0, not rank % 2
    assert oracle.expected_rank_owned_layers(run, 2) == (7, 15, 23, 31, 39)


def test_two_ranks_on_one_card_never_share_a_group():
    # placement puts ranks 0 and 1 on card 0: the only legal pairs are [0,2]/[1,3] or [0,3]/[1,2]
    run = replace(run_spec(DEEPSEEK_V32, world=4, split=2), placement=(0, 0, 1, 2))
    assert oracle.expected_split_groups(run) == [[0, 2], [1, 3]]
    run = replace(run_spec(DEEPSEEK_V32, world=4, split=4), placement=(0, 0, 1, 2))
    assert oracle.expected_split_groups(run) is None


# ---- the oracle's own readers ------------------------------------------------------------


def test_topology_text_and_yaml_twins_agree():
    text = oracle.load_topology(TOPOLOGY_DIR / "bi_v100_pix4.txt")
    yaml = oracle.load_topology(TOPOLOGY_DIR / "bi_v100_pix4.yaml")
    assert text.cards == yaml.cards == ("GPU0", "GPU1", "GPU2", "GPU3")
    assert text.links == yaml.links
    assert text.links[0] == ("X", "PIX", "PIX", "PIX")


def test_topology_reader_handles_ansi_header_and_nic_columns():
    topo = oracle.load_topology("nvlink_8")  # ANSI-underlined header, NIC columns, Legend
    assert topo.cards == tuple(f"GPU{i}" for i in range(8))
    assert topo.links[0][:3] == ("X", "NV12", "NV12")
    assert all(len(row) == 8 for row in topo.links)
    topo = oracle.load_topology("pcie_2switch_8")
    assert topo.links[3][4] == "SYS" and topo.links[4][5] == "PIX"


def test_topology_reader_refuses_a_bad_link():
    bad = "\tGPU0\tGPU1\nGPU0\t X \tFOO\nGPU1\tPIX\t X \n"
    with pytest.raises(ValueError, match="FOO"):
        readers.parse_topology_text(bad)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("--enable_layerwise_split=true --layerwise_split_size=2", {"enable": True, "split_size": 2}),
        ("--enable_layerwise_split=t --layerwise_split_size 4", {"enable": True, "split_size": 4}),
        ("-enable_layerwise_split=yes", {"enable": True}),
        ("--enable_layerwise_split=n --layerwise_split_size=1", {"enable": False, "split_size": 1}),
        ("--enable_layerwise_split", {"enable": True}),
        ("--noenable_layerwise_split --layerwise_split_size=2", {"enable": False, "split_size": 2}),
        ("--model=/m --enable_layerwise_split=0", {"enable": False}),
    ],
)
def test_gflag_spellings(text, expected):
    assert oracle.parse_layerwise_gflags(text) == expected


def test_gflag_and_parallel_json_errors():
    with pytest.raises(ValueError, match="maybe"):
        oracle.parse_layerwise_gflags("--enable_layerwise_split=maybe")
    assert oracle.parse_parallel_config_json('{"layerwise_split_size": 4}') == {"split_size": 4}
    assert oracle.parse_parallel_config_json('{"dp_size": 2}') == {}


def test_oracle_imports_nothing_from_implementations():
    paths = sorted((ROOT / "harness" / "oracle").glob("*.py"))
    assert len(paths) > 2, paths  # the package's modules were found
    for path in paths:
        name = path.name
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                assert not any(a.name.split(".")[0] in ("implementations", "contract") for a in node.names), name
            if isinstance(node, ast.ImportFrom):
                assert (node.module or "").split(".")[0] not in ("implementations", "contract"), name
    # and it works with implementations/ unimportable
    code = "import sys; sys.modules['implementations'] = sys.modules['contract'] = None; import harness.oracle as o; print(o.dtype_bytes('bfloat16'))"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "2"


# ---- section 5: hand-computed bytes -------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "cache_values", "attn_tp", "expected"),
    [
        # Llama-3-8B, tp 4: 8 // 4 = 2 local heads; 2 * 2 B * 128 * 2 = 1024; * 128 = 131,072
        (LLAMA3_8B, {}, 4, 131_072),
        # tp 1: 8 heads; 2 * 2 * 128 * 8 = 4096; * 128 = 524,288
        (LLAMA3_8B, {}, 1, 524_288),
        # int8, tp 4: 2 * 1 * 128 * 2 = 512 + scales 2 * 4 * 2 = 16 -> 528 * 128 = 67,584
        (LLAMA3_8B, {"kv_cache_dtype": "int8"}, 4, 67_584),
        # block 16, tp 8: 1 head; 2 * 2 * 128 * 1 = 512 * 16 = 8192
        (LLAMA3_8B, {"block_size": 16}, 8, 8_192),
        # Qwen3.5, tp 4: max(1, 2 // 4) = 1 head; 2 * 2 * 256 * 1 = 1024 * 128 = 131,072
        (QWEN3_5_MOE, {}, 4, 131_072),
        # Qwen3.5, tp 1: 2 heads; 2 * 2 * 256 * 2 = 2048 * 128 = 262,144
        (QWEN3_5_MOE, {}, 1, 262_144),
        # Qwen3.5 fp8_e4m3, tp 4: 2 * 1 * 256 * 1 = 512 + 2 * 4 * 1 = 8 -> 520 * 128 = 66,560
        (QWEN3_5_MOE, {"kv_cache_dtype": "fp8_e4m3"}, 4, 66_560),
        # DeepSeek-V3 MLA bf16: 2 * 576 = 1152 * 128 = 147,456 (no TP dependence)
        (DEEPSEEK_V3, {}, 8, 147_456),
        # MLA int8: 576 + 4 scale = 580 * 128 = 74,240
        (DEEPSEEK_V3, {"kv_cache_dtype": "int8"}, 4, 74_240),
        # MLA fp8_e5m2: same as int8, 580 * 64 = 37,120
        (DEEPSEEK_V3, {"kv_cache_dtype": "fp8_e5m2", "block_size": 64}, 4, 37_120),
        # V3.2 int8 KV, bf16 index: 580 + 2 * 128 = 836 * 128 = 107,008
        (DEEPSEEK_V32, {"kv_cache_dtype": "int8"}, 4, 107_008),
        # V3.2 bf16 KV, int8 index: 1152 + 128 + 4 = 1284 * 128 = 164,352
        (DEEPSEEK_V32, {"indexer_cache_dtype": "int8"}, 4, 164_352),
        # GLM-5 bf16, block 64: (1152 + 256) * 64 = 90,112
        (GLM_5, {"block_size": 64}, 4, 90_112),
    ],
    ids=lambda v: v.name if isinstance(v, ModelSpec) else None,
)
def test_full_layer_bytes_hand_computed(model, cache_values, attn_tp, expected):
    per_layer = oracle.expected_layer_bytes_per_block(model, cache(**cache_values), attn_tp)
    full = oracle.expected_full_layers(model)
    assert {per_layer[layer] for layer in full} == {expected}
    assert all(per_layer[layer] == 0 for layer in per_layer if layer not in full)


def test_indexer_cache_dtype_int8_slot():
    # 1152 + 128 + 4 = 1284 per token with an int8 indexer cache (upstream's name, the config's only one)
    assert oracle.full_layer_slot_bytes(DEEPSEEK_V32, SimpleNamespace(
        kv_cache_dtype="auto", indexer_cache_dtype="int8", block_size=128), 4) == 1284


def test_qwen3_5_linear_state_per_slot_tp4():
    # tp 4: 16 // 4 = 4 key heads, 32 // 4 = 8 value heads, bf16 (2 B)
    # conv      = 2 * (2 * 128 * 4 + 128 * 8) * (4 - 1) = 2 * 2048 * 3 = 12,288
    # recurrent = 2 * 8 * 128 * 128                     = 262,144
    assert oracle.expected_linear_state_bytes_per_slot(QWEN3_5_MOE, CacheSpec(), 4) == 274_432


def test_qwen3_5_target_grows_state_with_speculative_tokens():
    # n_spec = 2: conv = 2 * 2048 * (3 + 2) = 20,480; recurrent = 262,144 * (2 + 1) = 786,432
    c = cache(num_speculative_tokens=2)
    assert oracle.expected_linear_state_bytes_per_slot(QWEN3_5_MOE, c, 4) == 806_912
    # a draft engine and a non-Qwen3.5 target never grow it
    assert oracle.expected_linear_state_bytes_per_slot(QWEN3_5_MOE, c, 4, is_draft=True) == 274_432
    assert oracle.expected_linear_state_bytes_per_slot(QWEN3_NEXT, c, 4) == 274_432


def test_mamba_ssm_dtype_sets_recurrent_bytes():
    # float32 recurrent: 4 * 8 * 128 * 128 = 524,288; conv stays bf16 12,288 -> 536,576
    model = with_model(QWEN3_5_MOE, mamba_ssm_dtype="float32")
    assert oracle.expected_linear_state_bytes_per_slot(model, CacheSpec(), 4) == 536_576


def test_linear_state_bytes_need_a_budget():
    with pytest.raises(TypeError, match="budget_bytes"):
        oracle.expected_linear_state_bytes(QWEN3_5_MOE, CacheSpec(), 4)
    assert oracle.expected_linear_state_bytes(DEEPSEEK_V32, CacheSpec(), 4) == 0


# Qwen3.5 tp 4 at the CPU budget C = 134,217,728: L * ls = 30 * 274,432 = 8,232,960;
# F = 10 * 131,072 = 1,310,720; cap = min((C - 1) // 8,232,960 = 16,
# (C + 2F) // (8,232,960 + F) = 136,839,168 // 9,543,680 = 14) = 14.
@pytest.mark.parametrize(
    ("cache_values", "slots"),
    [
        (dict(max_seqs_per_batch=4, enable_prefix_cache=False), 6),  # 4 + 2
        (dict(max_seqs_per_batch=0, enable_prefix_cache=False), 2),  # padding only
        (dict(max_seqs_per_batch=200, enable_prefix_cache=False), 14),  # capped
        # prefix cache: int(C * 0.9 / 1.9 / 8,232,960) = int(63,576,818.5 / 8,232,960) = 7
        (dict(max_seqs_per_batch=200, enable_prefix_cache=True), 7),
        (dict(max_linear_state_cache_slots=10, enable_prefix_cache=True), 12),  # 10 + 2 <= 14
    ],
)
def test_linear_state_slots_at_cpu_budget(cache_values, slots):
    c = cache(**cache_values)
    assert oracle.expected_linear_state_slots(QWEN3_5_MOE, c, 4, CPU_BUDGET) == slots
    assert oracle.expected_linear_state_bytes(QWEN3_5_MOE, c, 4, CPU_BUDGET) == slots * 8_232_960


def test_explicit_linear_slots_above_cap_are_refused():
    run = replace(run_spec(QWEN3_5_MOE, budget_bytes=CPU_BUDGET), cache=cache(max_linear_state_cache_slots=13))
    # 13 + 2 = 15 > cap 14
    assert oracle.expected_estimation_rejection(run).field == "cache.max_linear_state_cache_slots"
    run = replace(run, cache=cache(max_linear_state_cache_slots=12))
    assert oracle.expected_estimation_rejection(run) is None


# ---- section 6 on a hybrid model ------------------------------------------------------------


def test_qwen3_5_block_counts_tp4_old_defaults():
    # linear = 30 * 6 * 274,432 = 49,397,760; available = 16 GiB - that = 17,130,471,424
    # uniform: 10 layers * 131,072 = 1,310,720 B/block -> 13,069 blocks
    # s = 2: 5 owned + scratch = 6 * 131,072 = 786,432 -> 21,782 blocks
    # s = 4: split rank 0 owns 3 (3, 19, 35) + scratch = 4 * 131,072 = 524,288 -> 32,673 blocks
    c = cache(**OLD_DEFAULTS)
    for split, expected in ((1, 13_069), (2, 21_782), (4, 32_673)):
        assert oracle.expected_block_counts(run_spec(QWEN3_5_MOE, split=split, cache=c), 16 * GiB) == (expected, 13_069)


def _qwen_cpu_s2(cache_values):
    return run_spec(QWEN3_5_MOE, world=4, split=2, cache=cache(**cache_values), budget_bytes=CPU_BUDGET)


def test_pinned_qwen3_5_s2_upstream_owner_rule_old_defaults():
    # Old defaults (max_seqs 4, no prefix cache): 6 slots, linear 49,397,760 B,
    # available 84,819,968. layer_id % 2: split rank 1 owns all 10 full layers:
    # (10 + 1 scratch) * 131,072 = 1,441,792 B/block -> 58 blocks (rank 0 owns none).
    # Rank 1: 58 * 1,441,792 + 49,397,760 = 133,021,696 B.
    run = _qwen_cpu_s2(OLD_DEFAULTS)
    # uniform: 84,819,968 // 1,310,720 = 64 blocks
    assert oracle.expected_block_counts(run, CPU_BUDGET, owner_rule="layer_id_mod_s") == (58, 64)
    assert oracle.expected_rank_bytes(run, 58, oracle.expected_full_layers(QWEN3_5_MOE)) == 133_021_696
    report = oracle.expected_report(run, owner_rule="layer_id_mod_s")
    assert report.peak_bytes == 133_021_696
    # the rank that owns nothing keeps the scratch: 58 * 131,072 + 49,397,760
    assert report.rank_bytes == (56_999_936, 133_021_696, 56_999_936, 133_021_696)
    # uniform at the same 58 blocks: 58 * 1,310,720 + 49,397,760 = 125,419,520 < the peak
    assert report.uniform_peak_bytes == 125_419_520
    assert report.savings_bytes == -7_602_176


def test_pinned_qwen3_5_s2_upstream_owner_rule_v2_defaults():
    # v2 defaults (200 sequences, prefix cache on): 7 slots (see above), linear
    # 30 * 7 * 274,432 = 57,630,720; available 76,587,008 // 1,441,792 = 53 blocks.
    # Rank 1: 53 * 1,441,792 + 57,630,720 = 134,045,696 B; uniform count
    # 76,587,008 // 1,310,720 = 58, so the capacity gain is 53 / 58 = 0.91.
    run = _qwen_cpu_s2(V2_DEFAULTS)
    report = oracle.expected_report(run, owner_rule="layer_id_mod_s")
    assert (report.n_blocks, report.uniform_n_blocks) == (53, 58)
    assert report.peak_bytes == 134_045_696
    assert report.uniform_peak_bytes == 53 * 1_310_720 + 57_630_720 == 127_098_880
    assert round(report.capacity_gain, 2) == 0.91
    # the spec's round robin at the same budget: 5 owned + scratch = 786,432 -> 97 blocks
    # 97 * 786,432 + 57,630,720 = 133,914,624 on every rank
    spec = oracle.expected_report(run)
    assert spec.n_blocks == 97 and set(spec.rank_bytes) == {133_914_624}


def test_rank_owning_every_full_layer_still_counts_the_scratch():
    run = run_spec(QWEN3_5_MOE, split=2, cache=cache(**OLD_DEFAULTS))
    full = oracle.expected_full_layers(QWEN3_5_MOE)
    # (10 + 1) * 131,072 * 100 blocks, without the linear state
    assert oracle.expected_rank_bytes(run, 100, full, include_linear_state=False) == 144_179_200
    # s = 1: no scratch; 100 * 10 * 131,072 + 49,397,760
    uniform = run_spec(QWEN3_5_MOE, split=1, cache=cache(**OLD_DEFAULTS))
    assert oracle.expected_rank_bytes(uniform, 100, full) == 180_469_760


# ---- section 6: speculative decoding ----------------------------------------------------------


def test_draft_costs_the_target_slot():
    # DeepSeek-V3.2 target (slot 1152 + index 256 = 1408 B) with a 1-layer DeepSeek-V3 MTP
    # draft (own slot 1152 B): D = 128 * 1 * 1408 = 180,224, not its own 147,456.
    run = run_spec(DEEPSEEK_V32, split=2, draft=DEEPSEEK_MTP)
    assert oracle.expected_draft_bytes_per_block(run) == 180_224
    # uniform (16 GiB) // (10,993,664 + 180,224) = 1537; s = 2: 32 * 180,224 + 180,224 =
    # 5,947,392 -> 2888
    assert oracle.expected_block_counts(run, 16 * GiB) == (2888, 1537)
    target, draft = oracle.expected_capacities(run, 16 * GiB)
    assert target.n_blocks == draft.n_blocks == 2888
    assert (draft.slot_size, draft.index_slot_size, draft.n_layers) == (1152, 0, 1)
    assert oracle.expected_draft_rank_bytes(run, 2888) == 2888 * 180_224
    # the draft's layers expose the target's full-layer tensors (index included)
    assert set(oracle.expected_draft_layer_tensors(run, 5)) == {"latent", "rope", "index"}


def test_draft_body_tp1_costs_its_own_shape():
    run = run_spec(DEEPSEEK_V32, split=2, draft=with_model(DEEPSEEK_MTP, body_tp1=True))
    assert oracle.draft_body_tp1(run)
    assert oracle.expected_draft_bytes_per_block(run) == 147_456  # 128 * 1152
    assert set(oracle.expected_draft_layer_tensors(run, 5)) == {"latent", "rope"}


def test_an_indexed_draft_at_tp1_beside_an_unindexed_target_costs_its_own_index_slot():
    # DeepSeek-V3 target (slot 1152 B, no indexer) + DeepSeek-V3.2's MTP draft (one MLA layer with the indexer,
    # 64 heads x 128) at TP 1, int8 indexer cache: D = 128 * (1152 + 128 + 4) = 164,352 B per block;
    # the target's layers carry no index slot (61 x 128 x 1152 = 8,994,816 B per block uniform)
    draft = replace(DEEPSEEK_V32, name="deepseek_v32_mtp", num_hidden_layers=1, body_tp1=True)
    run = run_spec(DEEPSEEK_V3, split=2, draft=draft, cache=CacheSpec(indexer_cache_dtype="int8"))
    assert oracle.expected_draft_bytes_per_block(run) == 164_352
    assert oracle.expected_full_bytes_per_block(DEEPSEEK_V3, run.cache, 4) == 8_994_816
    assert set(oracle.expected_draft_layer_tensors(run, 5)) == {"latent", "rope", "index", "index_scale"}


def test_draft_slot_larger_than_target_is_refused():
    # Llama-3-8B target at tp 4 (1024 B/token) with a tp-4 Qwen3.5 MTP draft (1024 B): equal, fine;
    # a Llama target at tp 8 (512 B) is smaller than that draft (1024 B): refused
    ok = run_spec(LLAMA3_8B, world=4, draft=QWEN3_5_MTP)
    assert oracle.expected_estimation_rejection(ok) is None
    bad = run_spec(LLAMA3_8B, world=8, draft=replace(QWEN3_5_MTP, num_key_value_heads=16))
    assert oracle.expected_estimation_rejection(bad).field == "draft"


# ---- section 7: tensors ------------------------------------------------------------------------


def test_tensor_shapes_mla_heads_major_quantized():
    run = run_spec(DEEPSEEK_V32, cache=cache(kv_cache_dtype="int8", indexer_cache_dtype="int8"))
    t = oracle.expected_full_layer_tensors(run, 7)
    assert t["latent"] == oracle.TensorSpec((7, 1, 128, 512), "int8", 7 * 128 * 512)
    assert t["rope"] == oracle.TensorSpec((7, 1, 128, 64), "int8", 7 * 128 * 64)
    assert t["latent_scale"] == oracle.TensorSpec((7, 1, 128), "float32", 7 * 128 * 4)
    assert t["index"] == oracle.TensorSpec((7, 1, 128, 128), "int8", 7 * 128 * 128)
    assert t["index_scale"] == oracle.TensorSpec((7, 1, 128), "float32", 7 * 128 * 4)
    # the shapes add up to section 5: 7 blocks * 128 * (576 + 4 + 128 + 4)
    assert sum(x.nbytes for x in t.values()) == 7 * 128 * 712
    assert sum(x.nbytes for x in t.values()) == 7 * oracle.expected_layer_bytes_per_block(
        DEEPSEEK_V32, run.cache, 4)[0]


def test_tensor_shapes_gqa_tokens_major_fp8():
    run = run_spec(LLAMA3_8B, cache=cache(kv_cache_dtype="fp8_e4m3"))
    run = replace(run, hardware=replace(run.hardware, kv_layout="tokens_major"))
    t = oracle.expected_full_layer_tensors(run, 3)
    assert t["k"] == oracle.TensorSpec((3, 128, 2, 128), "float8_e4m3fn", 3 * 128 * 2 * 128)
    assert t["v"].shape == (3, 128, 2, 128)
    assert t["k_scale"] == oracle.TensorSpec((3, 128, 2), "float32", 3 * 128 * 2 * 4)
    assert set(t) == {"k", "v", "k_scale", "v_scale"}
    assert oracle.expected_scratch_tensors(run, 3) == t


def test_tensor_shapes_linear_state():
    run = run_spec(QWEN3_5_MOE, cache=cache(num_speculative_tokens=1, **OLD_DEFAULTS), budget_bytes=CPU_BUDGET)
    # n_spec 1: ls = 2 * 2048 * 4 + 262,144 * 2 = 540,672; L * ls = 16,220,160; F = 1,310,720
    # cap = min(134,217,727 // 16,220,160 = 8, 136,839,168 // 17,530,880 = 7) = 7 > 6 -> 6 slots
    t = oracle.expected_linear_layer_tensors(run)
    assert t["conv"] == oracle.TensorSpec((6, 4, 2 * 128 * 4 + 128 * 8), "bfloat16", 6 * 4 * 2048 * 2)
    assert t["recurrent"] == oracle.TensorSpec((12, 8, 128, 128), "bfloat16", 12 * 8 * 128 * 128 * 2)
    assert oracle.expected_layer_tensors(run, 0, 9) == t
    assert set(oracle.expected_layer_tensors(run, 3, 9)) == {"k", "v"}


def test_conv_value_channels_use_the_key_head_dim():
    # Upstream's tiny GDN fixture (kv_cache_estimation_test.cpp): 2 key and 2 value heads, key dim 4,
    # value dim 8, conv kernel 3, on Qwen3-Next's 36 linear layers; tp 1; no prefix cache, 0 sequences: 2 slots.
    model = replace(QWEN3_NEXT, linear_num_key_heads=2, linear_num_value_heads=2, linear_key_head_dim=4,
                    linear_value_head_dim=8, linear_conv_kernel_dim=3)
    run = run_spec(model, world=1, cache=cache(enable_prefix_cache=False, max_seqs_per_batch=0),
                   budget_bytes=CPU_BUDGET)
    # Section 5 estimate: conv 2 B * (2 * 4 * 2 + 8 * 2 = 32 channels) * 2 = 128, recurrent 2 * 2 * 4 * 8 = 128;
    # 36 layers * 2 slots * 256 = 18,432.
    assert oracle.expected_linear_state_bytes(model, run.cache, 1, CPU_BUDGET) == 18_432
    # Section 7 tensors: conv [2, 2, 2 * 4 * 2 + 4 * 2 = 24] bf16 = 192 B, recurrent [2, 2, 4, 8] bf16 = 256 B.
    t = oracle.expected_linear_layer_tensors(run)
    assert t["conv"] == oracle.TensorSpec((2, 2, 24), "bfloat16", 192)
    assert t["recurrent"] == oracle.TensorSpec((2, 2, 4, 8), "bfloat16", 256)
    assert oracle.expected_linear_allocated_bytes(run) == 36 * (192 + 256) == 16_128
    # 36 * 2 slots * 2 B * (4 - 8) * 2 value heads * 2 = -2,304: the allocation is smaller than the estimate.
    assert oracle.expected_allocation_departure_bytes(run) == -2_304
    # Equal head dims (every real model) or no linear layer: no departure.
    assert oracle.expected_allocation_departure_bytes(run_spec(QWEN3_NEXT, budget_bytes=CPU_BUDGET)) == 0
    assert oracle.expected_allocation_departure_bytes(run_spec(DEEPSEEK_V32)) == 0
    assert oracle.expected_linear_allocated_bytes(run_spec(DEEPSEEK_V32)) == 0


# ---- section 3: startup rules -------------------------------------------------------------------


def _hw(**values):
    base = run_spec().hardware
    return SimpleNamespace(**{**{f.name: getattr(base, f.name) for f in fields(HardwareProfile)},
                              "kv_budget_bytes": base.kv_budget_bytes, **values})


@pytest.mark.parametrize(
    ("run", "field"),
    [
        (run_spec(DEEPSEEK_V32, split=0, enable=False), "layerwise.split_size"),
        (run_spec(DEEPSEEK_V32, world=6, dp=4), "parallel.world_size"),
        (run_spec(DEEPSEEK_V32, split=3), "layerwise.split_size"),
        (run_spec(DEEPSEEK_V32, split=8), "layerwise.split_size"),  # s > tp
        (run_spec(replace(DEEPSEEK_V32, full_attention_interval=4)), "model.index_n_heads"),
        (run_spec(DEEPSEEK_V3, draft=replace(DEEPSEEK_MTP, index_n_heads=4, index_head_dim=8,
                                             layer_types=("linear_attention",))), "draft.index_n_heads"),
        (replace(run_spec(DEEPSEEK_V3, cache=cache(kv_cache_dtype="int8")),
                 hardware=_hw(quantized_kv_cache_dtypes=())), "cache.kv_cache_dtype"),
        (replace(run_spec(DEEPSEEK_V32, cache=cache(indexer_cache_dtype="int8")),
                 hardware=_hw(int8_indexer_cache=False)), "cache.indexer_cache_dtype"),
        (run_spec(LLAMA3_8B, split=2), "model.model_type"),
        (run_spec(DEEPSEEK_V32, split=2, cache=cache(host_blocks_factor=2.0)), "cache.host_blocks_factor"),
        (run_spec(DEEPSEEK_V32, world=8, cp=2, split=2), "parallel.cp_size"),
        (run_spec(DEEPSEEK_V32, split=2, kv_split_size=2), "parallel.kv_split_size"),
        (run_spec(DEEPSEEK_V32, split=2, cache=cache(enable_sleep_mode=True)), "cache.enable_sleep_mode"),
        (run_spec(DEEPSEEK_V32, split=2, cache=cache(enable_xtensor=True)), "cache.enable_xtensor"),
    ],
)
def test_expected_rejection_fields(run, field):
    rejection = oracle.expected_rejection(run)
    assert rejection is not None and rejection.field == field
    assert rejection.reason


def test_no_rejection_for_valid_or_inactive_configs():
    for run in (
        run_spec(DEEPSEEK_V32, split=2),
        run_spec(QWEN3_5_MOE, split=4),
        run_spec(LLAMA3_8B, split=2, enable=False),  # inactive: the model rule does not apply
        run_spec(DEEPSEEK_V32, split=2, enable=False, cache=cache(enable_sleep_mode=True)),
        replace(run_spec(DEEPSEEK_V3, cache=cache(kv_cache_dtype="int8")),  # a profile that allows it
                hardware=_hw(quantized_kv_cache_dtypes=("int8", "fp8_e4m3", "fp8_e5m2"))),
        # int8 indexer cache on a model without an indexer allocates no indexed cache (upstream
        # kv_cache_test IndexerInt8WithoutIndexerDoesNotCreateScaleShape), so nothing refuses it
        replace(run_spec(DEEPSEEK_V3, cache=cache(indexer_cache_dtype="int8")),
                hardware=_hw(int8_indexer_cache=False)),
    ):
        assert oracle.expected_rejection(run) is None, run
    # the contracted order and field names (a startup rule names one field: no alternatives)
    assert [f.name for f in fields(oracle.Rejection)] == ["field", "reason", "alternatives"]
    r = run_spec(DEEPSEEK_V32, split=3, cache=cache(host_blocks_factor=2.0))
    assert oracle.expected_rejection(r).field == "layerwise.split_size"


def test_ranks_over_uniform_peak_name_the_upstream_rule_problem():
    # v2 defaults at 128 MiB, upstream rule: ranks 1 and 3 (split rank 1) hold
    # 134,045,696 B vs the uniform 127,098,880 B at the same 53 blocks: 6,946,816 B more
    run = _qwen_cpu_s2(V2_DEFAULTS)
    assert oracle.expected_ranks_over_uniform_peak(run, owner_rule="layer_id_mod_s") == [
        (1, 6_946_816), (3, 6_946_816)]
    assert oracle.expected_ranks_over_uniform_peak(run) == []


def test_card_bytes_sum_the_ranks_placed_on_a_card():
    run = replace(run_spec(DEEPSEEK_V32, world=4, split=2), placement=(0, 0, 1, 2))
    cards = oracle.expected_card_bytes(run, 16 * GiB)
    # groups [0,2],[1,3]: ranks 0 and 1 are both split rank 0 (31 layers + scratch)
    assert cards == {(0, 0): 2 * 2978 * 32 * 180_224, (0, 1): 2978 * 31 * 180_224, (0, 2): 2978 * 31 * 180_224}


def test_pinned_figures_through_the_composed_cpu_profile():
    from harness.config.build import build_run_spec
    from harness.config.compose import compose_config

    run = build_run_spec(compose_config(["model=qwen3_5_moe", "hardware=cpu", "parallel=tp4", "layerwise=s2"]))
    assert oracle.run_budget_bytes(run) == CPU_BUDGET  # 512 - 384 MiB
    old = replace(run, cache=cache(**OLD_DEFAULTS))
    assert oracle.expected_report(old, owner_rule="layer_id_mod_s").peak_bytes == 133_021_696
    v2 = replace(run, cache=cache(**V2_DEFAULTS))
    assert oracle.expected_report(v2, owner_rule="layer_id_mod_s").peak_bytes == 134_045_696


def test_a_budget_that_holds_no_block_may_be_named_by_any_of_its_knobs():
    run = run_spec(DEEPSEEK_V32, split=2, cache=cache(kv_budget_bytes=1024))
    assert oracle.expected_rejection(run) is None
    no_block = oracle.expected_estimation_rejection(run)
    assert no_block.field == "cache.kv_budget_bytes" and "hardware.reserved_bytes_per_card" in no_block.fields
    assert set(no_block.fields) == set(oracle.BUDGET_FIELDS)
    startup = oracle.expected_rejection(run_spec(DEEPSEEK_V32, split=3))
    assert startup.fields == ("layerwise.split_size",)


# ---- version 2.2: the three questions it settled ------------------------------------------------


def _links_run(rows: dict, *, split: int = 2, name: str = "links_given_here"):
    """4 ranks on 4 cards whose links are ``rows[(a, b)]`` (a < b): a matrix no conf/topology fixture names."""
    links = tuple(tuple("X" if a == b else rows[min(a, b), max(a, b)] for b in range(4)) for a in range(4))
    run = run_spec(DEEPSEEK_V32, world=4, split=split)
    return replace(run, hardware=replace(run.hardware, topology=Topology(
        cards=tuple(f"GPU{i}" for i in range(4)), links=links, name=name)))


def test_grouping_key_2_the_groups_own_worst_links_decide_a_tie_on_the_worst_link():
    """FEATURE 4 key (2). Cards 0 and 3 share a switch, 1 and 2 hang off others, all under one bridge:
    consecutive [0,1] [2,3] have worst links (PXB, PXB); [0,3] [1,2] have (PXB, PIX) sorted worst to best.
    Key (1) ties (PXB = PXB), key (2) compares PIX > PXB at the second element: [0,3] [1,2]."""
    run = _links_run({(0, 1): "PXB", (0, 2): "PXB", (0, 3): "PIX", (1, 2): "PXB", (1, 3): "PXB", (2, 3): "PXB"})
    assert oracle.expected_split_groups(run) == [[0, 3], [1, 2]]
    # the shipped fixture built from it: two such bridges, NODE between them
    tp8 = replace(run_spec(DEEPSEEK_V32, world=8, split=2), hardware=topo_hardware("pcie_uneven_switches_8"))
    assert oracle.expected_split_groups(tp8) == [[0, 3], [1, 2], [4, 7], [5, 6]]
    # s = 4: [0..3] [4..7] (PXB, PXB); any quad across the bridges has a NODE link: key (1) keeps consecutive
    tp8_s4 = replace(tp8, layerwise=replace(tp8.layerwise, split_size=4))
    assert oracle.expected_split_groups(tp8_s4) == [[0, 1, 2, 3], [4, 5, 6, 7]]
    # world 4 on the fixture's first 4 cards: the first bridge alone
    tp4 = replace(run_spec(DEEPSEEK_V32, world=4, split=2), hardware=topo_hardware("pcie_uneven_switches_8"))
    assert oracle.expected_split_groups(tp4) == [[0, 3], [1, 2]]


def test_grouping_key_1_the_worst_link_of_any_group_decides_before_the_others():
    """FEATURE 4 key (1) before (2): [0,1] is NV4 but forces [2,3] onto SYS, so (SYS, NV4) loses to
    [0,2] [1,3] at (PIX, PIX) (worst links sorted worst to best; SYS < PIX at the first element)."""
    run = _links_run({(0, 1): "NV4", (0, 2): "PIX", (0, 3): "PIX", (1, 2): "PIX", (1, 3): "PIX", (2, 3): "SYS"})
    assert oracle.expected_split_groups(run) == [[0, 2], [1, 3]]


def test_grouping_key_3_keeps_consecutive_when_among_the_best_else_the_first_lexicographically():
    """FEATURE 4 key (3). All PIX: every grouping ties on (1) and (2), consecutive [0,1] [2,3] is among
    them and kept. With [0,1] and [2,3] at PXB and every other pair PIX, consecutive (PXB, PXB) is not
    among the best; [0,2] [1,3] and [0,3] [1,2] tie at (PIX, PIX); listed by smallest rank, ((0,2),(1,3))
    comes before ((0,3),(1,2)) (2 < 3 at the second member of the first group)."""
    flat = _links_run(dict.fromkeys([(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)], "PIX"))
    assert oracle.expected_split_groups(flat) == [[0, 1], [2, 3]]
    run = _links_run({(0, 1): "PXB", (0, 2): "PIX", (0, 3): "PIX", (1, 2): "PIX", (1, 3): "PIX", (2, 3): "PXB"})
    assert oracle.expected_split_groups(run) == [[0, 2], [1, 3]]
    # one more step: [0,2] at NODE leaves [0,3] [1,2] the only (PIX, PIX) grouping
    run = _links_run({(0, 1): "PXB", (0, 2): "NODE", (0, 3): "PIX", (1, 2): "PIX", (1, 3): "PIX", (2, 3): "PXB"})
    assert oracle.expected_split_groups(run) == [[0, 3], [1, 2]]


def test_capacity_gain_is_null_when_no_uniform_block_fits():
    """FEATURE 6 (2.2): DeepSeek-V3.2 at s = 4 with 8 MiB per rank. One layer 180,224 B/block; uniform
    61 layers = 10,993,664 B > 8,388,608 B: 0 uniform blocks. Split: 61 full layers round-robin over 4
    -> 16, 15, 15, 15 owned; the largest owner + scratch = 17 x 180,224 = 3,063,808 B/block;
    8,388,608 // 3,063,808 = 2 blocks. The gain 2 / 0 is undefined: None (JSON null), never inf or 0."""
    run = run_spec(DEEPSEEK_V32, split=4, budget_bytes=8 * MiB)
    assert oracle.expected_block_counts(run, 8 * MiB) == (2, 0)
    report = oracle.expected_report(run)
    assert report.capacity_gain is None
    assert oracle.expected_notes(run) == (oracle.GAIN_UNDEFINED_NOTE,)
    assert oracle.GAIN_UNDEFINED_NOTE == "the uniform allocation fits no block"
    # 11 MiB = 11,534,336 B: one uniform block (10,993,664 B) and 11,534,336 // 3,063,808 = 3 split blocks
    fits = run_spec(DEEPSEEK_V32, split=4, budget_bytes=11 * MiB)
    assert oracle.expected_report(fits).capacity_gain == 3.0 and oracle.expected_notes(fits) == ()
    assert oracle.expected_capacity_gain(3, 0) is None and oracle.expected_capacity_gain(3, 2) == 1.5


def test_the_split_raises_the_peak_with_one_full_layer_and_carries_the_note():
    """FEATURE 6 (2.2): the split lowers the peak only where the largest owner's bytes + scratch do not
    exceed all full layers' bytes, ceil(L_full / s) + 1 <= L_full with equal layers. DeepSeek-V3, one
    layer of 128 x 2 x (512 + 64) = 147,456 B/block: s = 2 puts 1 owned + 1 scratch = 294,912 B on split
    rank 0 against 147,456 B uniform, so the plan carries "the split raises the peak". Two layers:
    1 + 1 = 2 <= 2 (equal, not raised); Qwen3.5's 10 full layers at s = 4: 3 + 1 = 4 <= 10."""
    one = run_spec(with_model(DEEPSEEK_V3, num_hidden_layers=1), split=2)
    assert oracle.expected_split_raises_peak(one)
    assert oracle.expected_notes(one) == (oracle.RAISES_PEAK_NOTE,)
    assert oracle.RAISES_PEAK_NOTE == "the split raises the peak"
    report = oracle.expected_report(one)
    assert report.peak_bytes - report.uniform_peak_bytes == report.n_blocks * 147_456
    two = run_spec(with_model(DEEPSEEK_V3, num_hidden_layers=2), split=2)
    assert not oracle.expected_split_raises_peak(two)
    assert oracle.expected_report(two).peak_bytes == oracle.expected_report(two).uniform_peak_bytes
    assert not oracle.expected_split_raises_peak(run_spec(QWEN3_5_MOE, split=4))
    assert not oracle.expected_split_raises_peak(run_spec(with_model(DEEPSEEK_V3, num_hidden_layers=1), split=1))


def test_rank_coordinates_invert_the_global_rank():
    """FEATURE 3: global rank = dp_rank * (cp*tp) + cp_rank * tp + tp_rank, read back both ways."""
    run = SimpleNamespace(parallel=SimpleNamespace(world_size=16, dp_size=2, cp_size=2))  # attention TP 4
    coords = [oracle.expected_rank_coordinates(run, r) for r in range(16)]
    assert coords[0] == (0, 0, 0) and coords[5] == (0, 1, 1) and coords[11] == (1, 0, 3) and coords[15] == (1, 1, 3)
    assert [oracle.global_rank(*c, cp=2, tp=4) for c in coords] == list(range(16))
    assert oracle.expected_split_groups_consecutive(16, 2, 2, 4) == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11],
                                                                      [12, 13, 14, 15]]


def test_a_card_check_counts_each_ranks_draft_kv():
    # DeepSeek-V3.2 + its one-layer indexed MTP draft, tp 4, s 2, two ranks per card (placement 0,0,1,1),
    # 100 MiB = 104,857,600 B of KV per rank, 512 MiB = 536,870,912 B HBM per card.
    # one layer = 128 * (1152 + 256) = 180,224 B/block; D = 180,224 (the target's shape, one layer);
    # split rank 0 costs 31 owned + scratch + D = 33 x 180,224 = 5,947,392: n_blocks = 104,857,600 // that = 17.
    # groups [0,2],[1,3] (ranks 0 and 1 share card 0): ranks 0, 1 split rank 0 = 17 x 32 x 180,224 = 98,041,856;
    # ranks 2, 3 split rank 1 = 17 x 31 x 180,224 = 94,978,048; draft 17 x 180,224 = 3,063,808 on every rank.
    # card 0: 2 x (98,041,856 + 3,063,808) = 202,211,328; card 1: 2 x (94,978,048 + 3,063,808) = 196,083,712.
    draft = replace(DEEPSEEK_V32, name="deepseek_v32_mtp", num_hidden_layers=1)
    base = run_spec(DEEPSEEK_V32, split=2, draft=draft, cache=CacheSpec(kv_budget_bytes=100 * MiB))
    assert oracle.expected_block_counts(base, 100 * MiB)[0] == 17
    assert oracle.expected_draft_rank_bytes(base, 17) == 3_063_808
    assert oracle.expected_card_bytes(replace(base, placement=(0, 0, 1, 1))) == {
        (0, 0): 202_211_328, (0, 1): 196_083_712}
