"""The recorded uniform baseline (TC-06) and the case selection of TC-05, TC-06 and TC-07.

Expected numbers are FEATURE.md's worked example and hand arithmetic from the public
model numbers (the same arithmetic is written out in harness/baselines/README.md).
"""

from __future__ import annotations

import pytest

from harness.suites import baseline, tc05, tc06, tc07
from harness.suites.matrix import load_matrix

pytestmark = pytest.mark.unit

CPU_BUDGET_BYTES = (512 - 384) * 1024 * 1024


@pytest.fixture(scope="module")
def recorded() -> dict:
    return baseline.load()["entries"]


def test_recorded_file_matches_a_fresh_computation(recorded):
    assert baseline.diff(recorded, baseline.compute()) == []


def test_recorded_file_covers_every_model_at_world_4_and_8(recorded):
    want = {baseline.key(m, p, "cpu") for m in baseline.MODELS for p in ("tp4", "dp2_tp4")}
    assert set(recorded) == want


def test_deepseek_v32_matches_the_worked_example(recorded):
    e = recorded["deepseek_v32/tp4/cpu"]
    layer_bytes_per_block = 180_224  # FEATURE section 6
    assert e["n_blocks"] == CPU_BUDGET_BYTES // (61 * layer_bytes_per_block) == 12
    assert e["rank_bytes"] == 12 * 61 * layer_bytes_per_block
    first = e["layers"][0]["tensors"]
    assert first["latent"] == {"shape": [12, 1, 128, 512], "dtype": "bfloat16", "bytes": 12 * 128 * 512 * 2}
    assert first["rope"]["shape"] == [12, 1, 128, 64]
    assert first["index"]["shape"] == [12, 1, 128, 128]
    assert all(layer["kind"] == "full" for layer in e["layers"])


def test_qwen3_5_hybrid_layers_and_block_count(recorded):
    e = recorded["qwen3_5_moe/tp4/cpu"]
    full = [l["layer"] for l in e["layers"] if l["kind"] == "full"]
    assert full == list(range(3, 40, 4))
    ls = 2 * (2 * 128 * 4 + 128 * 8) * 3 + 2 * 8 * 128 * 128  # 274,432 B per slot, tp 4
    full_per_block = 10 * 2 * 2 * 256 * 1 * 128  # 10 layers x K,V x bf16 x head_dim x 1 head x block
    # FEATURE v2 section 5, prefix cache on (the default): min(floor(C * 0.9 / 1.9) // (30 ls), cap).
    cap = min((CPU_BUDGET_BYTES - 1) // (30 * ls), (CPU_BUDGET_BYTES + 2 * full_per_block) // (30 * ls + full_per_block))
    slots = min(CPU_BUDGET_BYTES * 9 // 19 // (30 * ls), cap)
    assert (cap, slots) == (14, 7)
    linear_per_layer = slots * ls
    assert e["n_blocks"] == (CPU_BUDGET_BYTES - 30 * linear_per_layer) // full_per_block == 58
    assert e["layers"][3]["tensors"]["k"]["shape"] == [58, 1, 128, 256]  # 2 KV heads // tp 4 -> 1
    assert e["layers"][0]["tensors"]["recurrent"]["shape"] == [7, 8, 128, 128]
    assert e["layers"][0]["tensors"]["conv"]["shape"] == [7, 3, 2 * 128 * 4 + 128 * 8]  # [slots, kernel - 1, ch]
    assert e["rank_bytes"] == 58 * full_per_block + 30 * linear_per_layer


def test_dp2_entry_has_the_same_rank_allocation_as_tp4(recorded):
    a, b = recorded["glm_moe_dsa/tp4/cpu"], recorded["glm_moe_dsa/dp2_tp4/cpu"]
    assert (b["world_size"], b["dp_size"]) == (8, 2)
    assert a["layers"] == b["layers"] and a["n_blocks"] == b["n_blocks"]


def test_check_mode_reports_a_tampered_file(tmp_path, recorded, capsys):
    import json

    data = baseline.load()
    data["entries"]["llama3_8b/tp4/cpu"]["n_blocks"] += 1
    path = tmp_path / "tampered.json"
    path.write_text(json.dumps(data))
    assert baseline.main(["--check", "--path", str(path)]) == 1
    assert "llama3_8b/tp4/cpu: differs in n_blocks" in capsys.readouterr().out


def test_case_counts_of_the_default_matrix():
    matrix = load_matrix("ci")
    impls = len(matrix.implementations)
    assert impls == 3  # reference, upstream_owner_rule, xllm_upstream
    # supported models x s2,s4 x impls + dp2 pairs + the int8 exchange + regrouped topology at w4 and w8
    # + allocation on the bi_v100 (heads-major) and cuda_generic (tokens-major) profiles
    assert len(tc05.cases(matrix)) == 5 * 2 * impls + 2 * 2 * impls + impls + 2 * impls + 2 * impls
    assert len(tc06.cases(matrix)) == 6 * 2 * 2 * impls + 2 * impls  # models x off,s1 x tp4,dp2 x impls + off-s2
    # pairs x off,s2,s4 x impls + regrouped at w4, w8 + a two-layer draft, a TP-1 draft body, a smaller draft slot,
    # an indexed draft beside an unindexed target
    assert len(tc07.cases(matrix)) == 3 * 3 * impls + 2 * impls + 4 * impls
    assert all(c.draft != "none" for c in tc07.cases(matrix))


def test_narrowed_matrix_keeps_the_fallback_row_only_when_asked():
    assert tc06.cases(load_matrix("ci", ["layerwise=s2"])) == []
    assert {c.layerwise for c in tc06.cases(load_matrix("ci", ["layerwise=s1"]))} == {"s1"}
    assert tc05.cases(load_matrix("ci", ["layerwise=off"])) == []
