"""Startup validation (FEATURE section 3): every rule raises one ConfigError naming its field."""

from __future__ import annotations

from dataclasses import replace

import pytest

from contract.errors import ConfigError, PlanError
from contract.specs import CacheSpec, LayerwiseFlags
from implementations.reference import ReferenceImplementation
from implementations.xllm_upstream import XllmUpstreamImplementation
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
        (dict(kv_split_size=-1), "parallel.kv_split_size"),
    ],
)
def test_parallel_sizes_at_least_one(kwargs, field):
    rejected(run_spec(**kwargs), field, ">= 0" if field == "parallel.kv_split_size" else ">= 1")


# ---- active-only rules ------------------------------------------------------------


def test_unsupported_model_when_active():
    err = rejected(run_spec(LLAMA3_8B, split=2), "model.model_type", "'llama'", "deepseek_v32", "glm_moe_dsa",
                   "qwen3_5_moe")
    assert err.value == "llama"


@pytest.mark.parametrize("model", [DEEPSEEK_V3, QWEN3_5_MOE, LLAMA3_8B])
def test_upstream_supports_only_its_two_model_types(model):
    # Upstream's is_layerwise_split_supported_model: deepseek_v32 and glm_moe_dsa only.
    with pytest.raises(ConfigError) as err:
        XllmUpstreamImplementation().validate(run_spec(model, split=2))
    assert err.value.field == "model.model_type"
    XllmUpstreamImplementation().validate(run_spec(model, split=1))
    XllmUpstreamImplementation().validate(run_spec(DEEPSEEK_V32, split=2))


def test_upstream_has_no_enable_flag():
    # s > 1 alone activates the split upstream: the unsupported model is refused even with enable=false.
    with pytest.raises(ConfigError) as err:
        XllmUpstreamImplementation().validate(run_spec(LLAMA3_8B, split=2, enable=False))
    assert err.value.field == "model.model_type"
    REF.validate(run_spec(LLAMA3_8B, split=2, enable=False))


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


def test_kv_split_zero_follows_cp():
    # Upstream's 0 means "follow cp": effective 1 without context parallel.
    REF.validate(run_spec(DEEPSEEK_V32, split=2, kv_split_size=0))
    with pytest.raises(ConfigError) as err:
        REF.validate(run_spec(DEEPSEEK_V32, split=1, kv_split_size=-1))
    assert err.value.field == "parallel.kv_split_size"


def test_host_cache_factor_one_is_off():
    REF.validate(run_spec(split=2, cache=CacheSpec(host_blocks_factor=1.0)))


def test_no_full_attention_layer_when_active():
    """Nothing to split is the estimation's refusal (FEATURE 6: no split rank owns a layer), after the linear
    state is sized, as upstream's kv_cache_estimation CHECK; startup lets it through."""
    all_linear = replace(QWEN3_5_MOE, num_hidden_layers=3, layer_types=("linear_attention",) * 3)
    REF.validate(run_spec(all_linear, split=2))
    with pytest.raises(PlanError) as err:
        REF.plan(run_spec(all_linear, split=2))
    assert err.value.field == "layerwise.split_size" and "no split rank owns a full-attention layer" in str(err.value)


# ---- model ------------------------------------------------------------------------


@pytest.mark.parametrize("layers", [0, -1])
def test_num_hidden_layers(layers):
    rejected(run_spec(replace(DEEPSEEK_V3, num_hidden_layers=layers)), "model.num_hidden_layers", ">= 1")


def test_layer_types_other_than_attention_are_linear():
    # Upstream's rule: full_attention / attention are full, every other value linear.
    model = replace(QWEN3_5_MOE, num_hidden_layers=4,
                    layer_types=("linear_attention", "sliding_window", "attention", "full_attention"))
    REF.validate(run_spec(model))
    assert REF.full_layers(model) == (2, 3)


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
        (CacheSpec(indexer_cache_dtype="fp8_e4m3"), "cache.indexer_cache_dtype", "auto, int8"),
        (CacheSpec(block_size=0), "cache.block_size", ">= 1"),
        (CacheSpec(max_seqs_per_batch=-1), "cache.max_seqs_per_batch", ">= 0"),
        (CacheSpec(max_linear_state_cache_slots=-1), "cache.max_linear_state_cache_slots", ">= 0"),
        (CacheSpec(num_speculative_tokens=-1), "cache.num_speculative_tokens", ">= 0"),
        (CacheSpec(kv_budget_bytes=-1), "cache.kv_budget_bytes", ">= 0"),
        (CacheSpec(host_blocks_factor=-1.0), "cache.host_blocks_factor", ">= 0"),
    ],
)
def test_cache_fields(cache, field, fragment):
    rejected(run_spec(cache=cache, split=2), field, fragment)


def test_max_seqs_zero_is_valid():
    # Upstream: 0 sequences per batch means unlimited (2 padding slots of linear state).
    REF.validate(run_spec(QWEN3_5_MOE, cache=CacheSpec(max_seqs_per_batch=0)))


def test_mamba_ssm_dtype_checked():
    rejected(run_spec(replace(QWEN3_5_MOE, mamba_ssm_dtype="int4")), "model.mamba_ssm_dtype", "float32")


# ---- always-on rules (split or not) -----------------------------------------------


@pytest.mark.parametrize("split", [1, 2])
def test_linear_attention_with_indexer_refused(split):
    model = replace(QWEN3_5_MOE, index_n_heads=64, index_head_dim=128)
    rejected(run_spec(model, split=split), "model.index_n_heads", "linear-attention")


def test_draft_linear_attention_with_indexer_refused():
    draft = replace(QWEN3_5_MTP, num_hidden_layers=2, layer_types=("linear_attention", "full_attention"),
                    num_nextn_predict_layers=0, index_n_heads=8, index_head_dim=64)
    rejected(run_spec(QWEN3_5_MOE, draft=draft), "draft.index_n_heads")


@pytest.mark.parametrize("dtype", ["int8", "fp8_e4m3", "fp8_e5m2"])
@pytest.mark.parametrize("split", [1, 2])
def test_quantized_kv_cache_refused_where_unsupported(dtype, split):
    run = run_spec(split=split, cache=CacheSpec(kv_cache_dtype=dtype))
    REF.validate(run)  # the fixture's cards allow it
    no_quant = replace(run, hardware=replace(run.hardware, quantized_kv_cache_dtypes=()))
    rejected(no_quant, "cache.kv_cache_dtype", "test_flat", "none")
    only_int8 = replace(run, hardware=replace(run.hardware, quantized_kv_cache_dtypes=("int8",)))
    if dtype == "int8":
        REF.validate(only_int8)
    else:
        rejected(only_int8, "cache.kv_cache_dtype", "(int8)")


def test_int8_indexer_cache_refused_where_unsupported():
    run = run_spec(DEEPSEEK_V32, cache=CacheSpec(indexer_cache_dtype="int8"))
    REF.validate(run)
    no_int8 = replace(run, hardware=replace(run.hardware, int8_indexer_cache=False))
    rejected(no_int8, "cache.indexer_cache_dtype", "no int8 indexer cache")
    # No indexer, nothing to quantize (upstream's IndexerInt8WithoutIndexerDoesNotCreateScaleShape).
    REF.validate(replace(no_int8, model=DEEPSEEK_V3))


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


def test_draft_with_nextn_layers_uses_only_those():
    # A draft loaded from a full config.json: only its num_nextn_predict_layers MTP layers count.
    draft = replace(QWEN3_5_MOE, name="qwen_mtp", num_nextn_predict_layers=1, layer_types=None,
                    full_attention_interval=1)
    REF.validate(run_spec(QWEN3_5_MOE, split=2, draft=draft))


def test_draft_model_fields_checked():
    rejected(run_spec(DEEPSEEK_V3, split=2, draft=replace(DEEPSEEK_MTP, num_hidden_layers=0)),
             "draft.num_hidden_layers")


def test_hardware_helper_sanity():
    # The fixture itself: a 16 GiB KV budget on a 32 GiB card.
    assert hardware().kv_budget_bytes == 16 << 30
