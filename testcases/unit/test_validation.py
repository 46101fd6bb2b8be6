"""Startup validation (FEATURE section 3): every rule raises one ConfigError naming its field."""

from __future__ import annotations

from dataclasses import replace

import pytest

from implementations.errors import ConfigError
from implementations.reference import ReferenceImplementation
from implementations.specs import CacheSpec, LayerwiseFlags
from testcases.unit._models import (
    DEEPSEEK_MTP,
    DEEPSEEK_V3,
    DEEPSEEK_V32,
    LLAMA3_8B,
    QWEN3_5_MOE,
    QWEN3_5_MTP,
    hardware,
    run_spec,
)

pytestmark = pytest.mark.unit
REF = ReferenceImplementation()


def rejected(run, field: str, *fragments: str) -> ConfigError:
    with pytest.raises(ConfigError) as err:
        REF.validate(run)
    assert err.value.field == field, str(err.value)
    message = str(err.value)
    assert message.startswith(field)
    for fragment in fragments:
        assert fragment in message, message
    return err.value


# ---- accepted configurations ------------------------------------------------------


@pytest.mark.parametrize("model", [DEEPSEEK_V3, DEEPSEEK_V32, QWEN3_5_MOE])
@pytest.mark.parametrize("split", [1, 2, 4])
def test_supported_models_accepted(model, split):
    REF.validate(run_spec(model, split=split))


def test_disabled_ignores_active_only_rules():
    # Disabled (or s = 1) is the pre-feature behaviour: none of the split-only rules apply.
    cache = CacheSpec(host_blocks_factor=2.0, enable_sleep_mode=True, enable_xtensor=True)
    REF.validate(run_spec(LLAMA3_8B, world=8, cp=2, split=2, enable=False, cache=cache, kv_split_size=2))
    REF.validate(run_spec(LLAMA3_8B, world=8, cp=2, split=1, enable=True, cache=cache, kv_split_size=2))


def test_dp_groups_accepted():
    REF.validate(run_spec(DEEPSEEK_V32, world=8, dp=2, split=4))


# ---- split size -------------------------------------------------------------------


@pytest.mark.parametrize("split", [0, -1])
@pytest.mark.parametrize("enable", [True, False])
def test_split_size_below_one(split, enable):
    rejected(run_spec(split=split, enable=enable), "layerwise.split_size", str(split), ">= 1")


def test_split_size_not_dividing_tp():
    rejected(run_spec(split=3), "layerwise.split_size", "attention tp 4 % layerwise.split_size 3 = 1 != 0")


def test_split_size_above_tp():
    rejected(run_spec(split=8), "layerwise.split_size", "layerwise.split_size 8 > attention tp 4")


def test_split_size_against_tp_with_dp():
    # world 8 = dp 2 * tp 4: the split size is checked against attention tp 4, not world 8.
    rejected(run_spec(world=8, dp=2, split=8), "layerwise.split_size", "> attention tp 4")


def test_enable_must_be_bool():
    run = replace(run_spec(split=2), layerwise=LayerwiseFlags(enable="yes", split_size=2))
    rejected(run, "layerwise.enable")


# ---- parallel sizes ---------------------------------------------------------------


def test_world_not_divisible():
    rejected(run_spec(world=6, dp=4, num_cards=6), "parallel.world_size",
             "world_size 6 != dp 4 * cp 1 * tp", "6 % 4 = 2")


@pytest.mark.parametrize(
    "kwargs, field",
    [
        (dict(world=0, num_cards=4), "parallel.world_size"),
        (dict(dp=0), "parallel.dp_size"),
        (dict(cp=0), "parallel.cp_size"),
        (dict(dp=-2), "parallel.dp_size"),
        (dict(kv_split_size=0), "parallel.kv_split_size"),
    ],
)
def test_parallel_sizes_at_least_one(kwargs, field):
    rejected(run_spec(**kwargs), field, ">= 1")


# ---- active-only rules ------------------------------------------------------------


def test_unsupported_model_when_active():
    err = rejected(run_spec(LLAMA3_8B, split=2), "model", "'llama'", "deepseek_v32", "glm_moe_dsa")
    assert err.value == "llama"


@pytest.mark.parametrize(
    "kwargs, field",
    [
        (dict(cache=CacheSpec(host_blocks_factor=2.0)), "cache.host_blocks_factor"),
        (dict(world=8, cp=2), "parallel.cp_size"),
        (dict(kv_split_size=2), "parallel.kv_split_size"),
        (dict(cache=CacheSpec(enable_sleep_mode=True)), "cache.enable_sleep_mode"),
        (dict(cache=CacheSpec(enable_xtensor=True)), "cache.enable_xtensor"),
    ],
)
def test_incompatible_features_when_active(kwargs, field):
    rejected(run_spec(DEEPSEEK_V32, split=2, **kwargs), field, "not supported", "layerwise split active")


def test_host_cache_factor_one_is_off():
    REF.validate(run_spec(split=2, cache=CacheSpec(host_blocks_factor=1.0)))


def test_no_full_attention_layer_when_active():
    all_linear = replace(QWEN3_5_MOE, num_hidden_layers=3, layer_types=("linear_attention",) * 3)
    rejected(run_spec(all_linear, split=2), "model", "at least one full-attention layer")


# ---- model ------------------------------------------------------------------------


@pytest.mark.parametrize("layers", [0, -1])
def test_num_hidden_layers(layers):
    rejected(run_spec(replace(DEEPSEEK_V3, num_hidden_layers=layers)), "model.num_hidden_layers", ">= 1")


def test_unknown_layer_type():
    model = replace(QWEN3_5_MOE, num_hidden_layers=2, layer_types=("linear_attention", "sliding_window"))
    rejected(run_spec(model), "model.layer_types", "'sliding_window'", "full_attention", "linear_attention")


def test_layer_types_length():
    model = replace(QWEN3_5_MOE, layer_types=("full_attention",) * 39)
    rejected(run_spec(model), "model.layer_types", "39 entries", "num_hidden_layers 40")


@pytest.mark.parametrize(
    "change, field",
    [
        (dict(attention="mha"), "model.attention"),
        (dict(dtype="float64"), "model.dtype"),
        (dict(kv_lora_rank=0), "model.kv_lora_rank"),
        (dict(index_n_heads=64, index_head_dim=0), "model.index_head_dim"),
    ],
)
def test_mla_model_fields(change, field):
    rejected(run_spec(replace(DEEPSEEK_V3, **change)), field)


@pytest.mark.parametrize(
    "change, field",
    [
        (dict(num_key_value_heads=0), "model.num_key_value_heads"),
        (dict(head_dim=0), "model.head_dim"),
        (dict(linear_num_value_heads=0), "model.linear_num_value_heads"),
        (dict(linear_conv_kernel_dim=0), "model.linear_conv_kernel_dim"),
    ],
)
def test_gqa_hybrid_model_fields(change, field):
    rejected(run_spec(replace(QWEN3_5_MOE, **change)), field)


# ---- cache and hardware -----------------------------------------------------------


@pytest.mark.parametrize(
    "cache, field, fragment",
    [
        (CacheSpec(kv_cache_dtype="fp4"), "cache.kv_cache_dtype", "auto, int8, fp8_e4m3, fp8_e5m2"),
        (CacheSpec(index_cache_dtype="fp8_e4m3"), "cache.index_cache_dtype", "auto, int8"),
        (CacheSpec(ssm_cache_dtype="int4"), "cache.ssm_cache_dtype", "float32"),
        (CacheSpec(block_size=0), "cache.block_size", ">= 1"),
        (CacheSpec(max_seqs_per_batch=0), "cache.max_seqs_per_batch", ">= 1"),
        (CacheSpec(host_blocks_factor=-1.0), "cache.host_blocks_factor", ">= 0"),
    ],
)
def test_cache_fields(cache, field, fragment):
    rejected(run_spec(cache=cache, split=2), field, fragment)


def test_hardware_layout():
    run = run_spec()
    rejected(replace(run, hardware=replace(run.hardware, kv_layout="blocks_last")), "hardware.kv_layout",
             "heads_major", "tokens_major")


# ---- draft ------------------------------------------------------------------------


def test_drafts_accepted():
    REF.validate(run_spec(DEEPSEEK_V3, split=2, draft=DEEPSEEK_MTP))
    REF.validate(run_spec(QWEN3_5_MOE, split=2, draft=QWEN3_5_MTP))


def test_draft_with_linear_layers_rejected():
    # Qwen3.5's interval 4 applied to a 1-layer draft would make layer 0 linear.
    draft = replace(QWEN3_5_MTP, layer_types=None)
    rejected(run_spec(QWEN3_5_MOE, split=2, draft=draft), "draft.full_attention_interval", "full-attention")
    draft = replace(QWEN3_5_MTP, num_hidden_layers=2, layer_types=("full_attention", "linear_attention"))
    rejected(run_spec(QWEN3_5_MOE, split=2, draft=draft), "draft.layer_types", "[1]")


def test_draft_model_fields_checked():
    rejected(run_spec(DEEPSEEK_V3, split=2, draft=replace(DEEPSEEK_MTP, num_hidden_layers=0)),
             "draft.num_hidden_layers")


def test_hardware_helper_sanity():
    # The fixture itself: a 16 GiB KV budget on a 32 GiB card.
    assert hardware().kv_budget_bytes == 16 << 30
