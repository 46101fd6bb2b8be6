"""Local Hugging Face config.json -> ModelSpec: plain JSON, clear errors naming the key."""

from __future__ import annotations

import json

import pytest

from contract.errors import ConfigError
from harness.config.hf_loader import model_spec_from_hf_config

pytestmark = pytest.mark.unit

# Subsets of the public config.json files (the keys the loader reads, plus noise it must ignore).
DEEPSEEK_V32 = {
    "architectures": ["DeepseekV32ForCausalLM"],
    "model_type": "deepseek_v32",
    "num_hidden_layers": 61,
    "num_attention_heads": 128,
    "num_key_value_heads": 128,
    "hidden_size": 7168,
    "kv_lora_rank": 512,
    "q_lora_rank": 1536,
    "qk_rope_head_dim": 64,
    "qk_nope_head_dim": 128,
    "v_head_dim": 128,
    "index_n_heads": 64,
    "index_head_dim": 128,
    "index_topk": 2048,
    "num_nextn_predict_layers": 1,
    "torch_dtype": "bfloat16",
}
QWEN3_5_LAYER_TYPES = ["linear_attention", "linear_attention", "linear_attention", "full_attention"] * 10
QWEN3_5 = {  # multimodal: the language model's numbers live in text_config
    "model_type": "qwen3_5_moe",
    "text_config": {
        "model_type": "qwen3_5_moe_text",
        "num_hidden_layers": 40,
        "num_attention_heads": 16,
        "num_key_value_heads": 2,
        "head_dim": 256,
        "hidden_size": 2048,
        "layer_types": QWEN3_5_LAYER_TYPES,
        "full_attention_interval": 4,
        "linear_num_key_heads": 16,
        "linear_num_value_heads": 32,
        "linear_key_head_dim": 128,
        "linear_value_head_dim": 128,
        "linear_conv_kernel_dim": 4,
        "mamba_ssm_dtype": "float32",
        "mtp_num_hidden_layers": 1,
        "dtype": "bfloat16",
    },
}
LLAMA3_8B = {
    "model_type": "llama",
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "hidden_size": 4096,
    "torch_dtype": "bfloat16",
}


def _write(tmp_path, obj, name="config.json"):
    path = tmp_path / name
    path.write_text(json.dumps(obj) if not isinstance(obj, str) else obj)
    return path


def test_deepseek_like(tmp_path):
    spec = model_spec_from_hf_config(_write(tmp_path, DEEPSEEK_V32))
    assert spec.model_type == "deepseek_v32" and spec.attention == "mla"
    assert (spec.num_hidden_layers, spec.kv_lora_rank, spec.qk_rope_head_dim) == (61, 512, 64)
    assert (spec.index_n_heads, spec.index_head_dim) == (64, 128)
    assert spec.dtype == "bfloat16" and spec.mamba_ssm_dtype is None
    assert (spec.num_nextn_predict_layers, spec.num_attention_heads) == (1, 128)
    assert spec.layer_types is None and spec.full_attention_interval == 1


def test_qwen3_5_like_with_layer_types(tmp_path):
    spec = model_spec_from_hf_config(_write(tmp_path, QWEN3_5))
    assert spec.model_type == "qwen3_5_moe" and spec.attention == "gqa"
    assert (spec.num_hidden_layers, spec.num_key_value_heads, spec.head_dim) == (40, 2, 256)
    assert spec.layer_types == tuple(QWEN3_5_LAYER_TYPES)
    assert [l for l, t in enumerate(spec.layer_types) if t == "full_attention"] == list(range(3, 40, 4))
    assert (spec.linear_num_key_heads, spec.linear_num_value_heads) == (16, 32)
    assert (spec.linear_key_head_dim, spec.linear_value_head_dim, spec.linear_conv_kernel_dim) == (128, 128, 4)
    assert spec.mamba_ssm_dtype == "float32"
    assert spec.num_nextn_predict_layers == 1  # Qwen3.5 calls its MTP layers mtp_num_hidden_layers


def test_dense_gqa_head_dim_from_hidden_size(tmp_path):
    _write(tmp_path, LLAMA3_8B)
    spec = model_spec_from_hf_config(tmp_path)  # a directory holding config.json works too
    assert (spec.attention, spec.num_key_value_heads, spec.head_dim) == ("gqa", 8, 4096 // 32)
    assert spec.num_attention_heads == 32 and spec.num_nextn_predict_layers == 0


# A tiny synthetic hybrid like upstream's unit-test fixtures (kv_cache_estimation_test.cpp
# make_linear_attention_args: 4 layers, head_dim 16, fp16, every 2nd layer full, GDN 2/2 heads, dims 4/8).
TINY_HYBRID = {
    "model_type": "qwen3_5",
    "num_hidden_layers": 4,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "hidden_size": 64,
    "full_attention_interval": 2,
    "linear_num_key_heads": 2,
    "linear_num_value_heads": 2,
    "linear_key_head_dim": 4,
    "linear_value_head_dim": 8,
    "linear_conv_kernel_dim": 3,
    "torch_dtype": "float16",
}
TINY_MLA_DRAFT = {
    "model_type": "deepseek_v3",
    "num_hidden_layers": 4,
    "num_attention_heads": 4,
    "kv_lora_rank": 16,
    "qk_rope_head_dim": 8,
    "num_nextn_predict_layers": 1,
    "torch_dtype": "float16",
}
UPSTREAM_OPTIONS = ["parallel=tp1", "cache.kv_budget_bytes=1048576", "cache.block_size=16",
                    "cache.max_seqs_per_batch=8", "cache.enable_prefix_cache=false"]


def test_tiny_synthetic_model_plans_like_upstream(tmp_path):
    # Upstream's ReservesLinearAttentionState numbers, reached from a config.json through model_path=.
    from harness.config.build import build_implementation, build_run_spec
    from harness.config.compose import compose_config

    path = _write(tmp_path, TINY_HYBRID)
    cfg = compose_config([f"model_path={path}", *UPSTREAM_OPTIONS])
    spec = build_run_spec(cfg)
    assert (spec.model.dtype, spec.model.head_dim, spec.model.num_hidden_layers) == ("float16", 16, 4)
    plan = build_implementation(cfg).plan(spec)
    assert (plan.num_full_attention_layers, plan.num_linear_attention_layers) == (2, 2)
    assert (plan.num_linear_state_blocks, plan.linear_slot_size, plan.linear_cache_bytes) == (10, 256, 5120)
    assert plan.n_blocks == 254


def test_draft_path_reads_a_draft(tmp_path):
    from harness.config.build import build_implementation, build_run_spec
    from harness.config.compose import compose_config

    target = _write(tmp_path, {**TINY_MLA_DRAFT, "num_nextn_predict_layers": 0}, "target.json")
    draft = _write(tmp_path, TINY_MLA_DRAFT, "draft.json")
    cfg = compose_config([f"model_path={target}", "draft=deepseek_mtp", f"draft_path={draft}", "draft.body_tp1=true",
                          *UPSTREAM_OPTIONS])
    spec = build_run_spec(cfg)
    assert spec.draft.name == str(draft) and spec.draft.body_tp1 is True
    assert (spec.draft.attention, spec.draft.kv_lora_rank, spec.draft.num_nextn_predict_layers) == ("mla", 16, 1)
    plan = build_implementation(cfg).plan(spec)
    assert plan.draft.num_layers == 1  # the draft engine holds its num_nextn_predict_layers layers
    assert plan.additional_bytes_per_block == 16 * 2 * (16 + 8)
    assert plan.n_blocks == 1048576 // (16 * 2 * (16 + 8) * 5)


def test_draft_path_errors_name_draft_path(tmp_path):
    from harness.config.compose import compose_config

    with pytest.raises(ConfigError, match=r"^draft_path="):
        compose_config([f"draft_path={tmp_path / 'missing.json'}"])


def test_bad_mamba_ssm_dtype(tmp_path):
    with pytest.raises(ConfigError, match=r"mamba_ssm_dtype='int4': one of bfloat16, float16, float32"):
        model_spec_from_hf_config(_write(tmp_path, {**TINY_HYBRID, "mamba_ssm_dtype": "int4"}))


@pytest.mark.parametrize("change, expected", [
    ({"num_hidden_layers": None}, r"num_hidden_layers=None: required: an integer >= 1"),
    ({"num_hidden_layers": "61"}, r"num_hidden_layers='61': must be an integer >= 1"),
    ({"num_hidden_layers": 0}, r"num_hidden_layers=0: must be an integer >= 1"),
    ({"num_hidden_layers": 61.0}, r"num_hidden_layers=61.0: must be an integer"),
    ({"kv_lora_rank": True}, r"kv_lora_rank=True: must be an integer"),
    ({"qk_rope_head_dim": None}, r"qk_rope_head_dim=None: required"),
    ({"index_head_dim": None}, r"index_head_dim=None: required"),
    ({"model_type": 3}, r"model_type=3: must be a non-empty string"),
    ({"model_type": None}, r"model_type=None: required: a string"),
    ({"torch_dtype": "float8"}, r"torch_dtype='float8': one of bfloat16, float16, float32"),
    ({"layer_types": ["full_attention"]}, r"layer_types=.*a list of 61 strings"),
    ({"layer_types": "full_attention"}, r"layer_types='full_attention': must be a list of strings"),
])
def test_bad_fields_name_the_key_and_type(tmp_path, change, expected):
    obj = {k: v for k, v in {**DEEPSEEK_V32, **change}.items() if v is not None}
    path = _write(tmp_path, obj)
    with pytest.raises(ConfigError, match=expected) as info:
        model_spec_from_hf_config(path)
    assert str(path) in str(info.value)


def test_text_config_errors_name_the_nested_key(tmp_path):
    obj = json.loads(json.dumps(QWEN3_5))
    obj["text_config"]["num_key_value_heads"] = "2"
    with pytest.raises(ConfigError, match=r"text_config\.num_key_value_heads='2': must be an integer"):
        model_spec_from_hf_config(_write(tmp_path, obj))


@pytest.mark.parametrize("text, expected", [
    ("{not json", "config.json line 1 column 2.: valid JSON"),
    ("[1, 2]", "a JSON object at the top level"),
])
def test_not_a_config_json(tmp_path, text, expected):
    with pytest.raises(ConfigError, match=expected):
        model_spec_from_hf_config(_write(tmp_path, text))


def test_missing_file(tmp_path):
    with pytest.raises(ConfigError, match="model_path=.*an existing local config.json"):
        model_spec_from_hf_config(tmp_path / "nope" / "config.json")


def test_remote_code_is_never_imported(tmp_path, monkeypatch):
    marker = tmp_path / "imported"
    (tmp_path / "evil_config.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    obj = {**DEEPSEEK_V32, "auto_map": {"AutoConfig": "evil_config.EvilConfig"}, "trust_remote_code": True}
    spec = model_spec_from_hf_config(_write(tmp_path, obj))
    assert spec.num_hidden_layers == 61
    assert not marker.exists()
