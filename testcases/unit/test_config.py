"""Hydra config: every option composes, the numbers are the public ones, mistakes are one clear line.

Expected numbers are written here from FEATURE.md (sections 9 and 10) and the models'
public config.json files, not read back from conf/.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path
from typing import List, Optional

import pytest

from contract.errors import ConfigError
from contract.specs import HardwareProfile, ModelSpec
from contract.units import MIB
from harness.config.build import build_implementation, build_run_spec, layerwise_overrides
from harness.config.compose import compose_config
from harness.paths import CONF_DIR

pytestmark = pytest.mark.unit

# Public architecture numbers (FEATURE.md section 10; Hugging Face config.json of each model).
MODELS = {
    "deepseek_v3": dict(model_type="deepseek_v3", num_hidden_layers=61, attention="mla", kv_lora_rank=512,
                        qk_rope_head_dim=64, index_n_heads=0),
    "deepseek_v32": dict(model_type="deepseek_v32", num_hidden_layers=61, attention="mla", kv_lora_rank=512,
                         qk_rope_head_dim=64, index_n_heads=64, index_head_dim=128),
    "glm_moe_dsa": dict(model_type="glm_moe_dsa", num_hidden_layers=78, attention="mla", kv_lora_rank=512,
                        qk_rope_head_dim=64, index_n_heads=32, index_head_dim=128),
    "qwen3_5_moe": dict(model_type="qwen3_5_moe", num_hidden_layers=40, attention="gqa", num_key_value_heads=2,
                        head_dim=256, linear_num_key_heads=16, linear_num_value_heads=32, linear_key_head_dim=128,
                        linear_value_head_dim=128, linear_conv_kernel_dim=4),
    "qwen3_next": dict(model_type="qwen3_next", num_hidden_layers=48, attention="gqa", num_key_value_heads=2,
                       head_dim=256, linear_num_key_heads=16, linear_num_value_heads=32, linear_key_head_dim=128,
                       linear_value_head_dim=128, linear_conv_kernel_dim=4),
    "llama3_8b": dict(num_hidden_layers=32, attention="gqa", num_key_value_heads=8, head_dim=128,
                      kv_lora_rank=0, index_n_heads=0),
}
DRAFTS = {
    "deepseek_mtp": dict(num_hidden_layers=1, attention="mla", kv_lora_rank=512, qk_rope_head_dim=64, index_n_heads=0),
    "deepseek_v32_mtp": dict(num_hidden_layers=1, attention="mla", kv_lora_rank=512, qk_rope_head_dim=64,
                             index_n_heads=64, index_head_dim=128),
    "qwen3_5_mtp": dict(num_hidden_layers=1, attention="gqa", num_key_value_heads=2, head_dim=256),
}
PARALLEL = {"tp1": (1, 1), "tp2": (2, 1), "tp4": (4, 1), "tp8": (8, 1), "dp2_tp4": (8, 2)}
LAYERWISE = {"off": (False, 1), "s1": (True, 1), "s2": (True, 2), "s4": (True, 4)}


def _full_layers(model) -> list[int]:
    """FEATURE section 4: layer_types, else (l + 1) % interval == 0."""
    if model.layer_types is not None:
        return [l for l, t in enumerate(model.layer_types) if t in ("full_attention", "attention", "indexed_attention")]
    k = model.full_attention_interval
    return [l for l in range(model.num_hidden_layers) if k <= 1 or (l + 1) % k == 0]


def _options(group: str) -> set[str]:
    return {p.stem for p in (CONF_DIR / group).glob("*.yaml")}


# ------------------------------------------------------------------ every option composes


def test_defaults():
    cfg = compose_config([])
    assert cfg.model.name == "deepseek_v32"
    assert cfg.draft is None
    assert cfg.hardware.name == "cpu"
    assert cfg.parallel.world_size == 4 and cfg.parallel.dp_size == 1
    assert (cfg.layerwise.enable, cfg.layerwise.split_size) == (False, 1)
    assert cfg.implementation._target_ == "implementations.reference.ReferenceImplementation"
    assert (cfg.runner.backend, cfg.runner.timeout_s) == ("auto", 60.0)
    assert cfg.report.results_dir == "reports"
    assert cfg.placement is None and cfg.model_path is None


def test_shipped_options_are_the_documented_ones():
    assert set(MODELS) == _options("model")
    assert set(DRAFTS) | {"none"} == _options("draft")
    assert {"bi_v100", "cpu", "cuda_generic"} == _options("hardware")
    assert set(PARALLEL) == _options("parallel")
    assert set(LAYERWISE) == _options("layerwise")
    assert {"reference", "xllm_upstream"} <= _options("implementation")


@pytest.mark.parametrize("name", sorted(MODELS))
def test_model_numbers_are_the_public_ones(name):
    run = build_run_spec(compose_config([f"model={name}"]))
    model = run.model
    assert model.name == name and model.dtype == "bfloat16"
    for key, expected in MODELS[name].items():
        assert getattr(model, key) == expected, key


@pytest.mark.parametrize("name, n_layers", [("qwen3_5_moe", 40), ("qwen3_next", 48)])
def test_hybrids_have_full_attention_every_fourth_layer(name, n_layers):
    model = build_run_spec(compose_config([f"model={name}"])).model
    # Qwen3.5 / Qwen3-Next: full_attention_interval 4 -> full layers 3, 7, 11, ...
    assert _full_layers(model) == list(range(3, n_layers, 4))


@pytest.mark.parametrize("name", sorted(DRAFTS))
def test_draft_numbers(name):
    draft = build_run_spec(compose_config([f"draft={name}"])).draft
    assert draft is not None and draft.name == name
    assert draft.body_tp1 is False  # the draft's KV takes the target's shape unless set
    for key, expected in DRAFTS[name].items():
        assert getattr(draft, key) == expected, key
    assert _full_layers(draft) == [0]


def test_bi_v100_is_feature_section_9():
    cfg = compose_config(["hardware=bi_v100"])
    hw = build_run_spec(cfg).hardware
    assert hw.num_cards == 4
    assert hw.hbm_bytes_per_card == 32768 * MIB
    assert hw.warp_size == 64
    assert hw.device_type == "cuda"
    assert hw.kv_layout == "heads_major"
    assert hw.kv_budget_bytes == 16 * 1024**3  # the 16 GiB of FEATURE's worked example
    assert (hw.quantized_kv_cache_dtypes, hw.int8_indexer_cache) == ((), False)  # FEATURE 3: none on BI-V100
    assert len(hw.topology.cards) == 4
    assert {hw.topology.links[i][j] for i in range(4) for j in range(4) if i != j} == {"PIX"}
    facts = cfg.hardware.facts
    assert list(facts.bus_ids) == ["4B:00.0", "4C:00.0", "4D:00.0", "4E:00.0"]
    assert facts.numa_node == 1
    assert (facts.sm_clock_mhz, facts.mem_clock_mhz) == (1500, 1200)
    assert (facts.ixml_version, facts.driver_version, facts.cuda_version) == ("3.2.3", "3.2.1", "10.2")
    assert facts.corex_sdk_path == "/usr/local/corex"
    assert facts.collectives == "nccl"


def test_cpu_and_cuda_profiles():
    cpu = build_run_spec(compose_config(["hardware=cpu"])).hardware
    assert (cpu.device_type, cpu.num_cards, len(cpu.topology.cards)) == ("cpu", 8, 8)
    assert cpu.kv_budget_bytes == 128 * MIB  # small: allocations stay in memory
    assert (cpu.quantized_kv_cache_dtypes, cpu.int8_indexer_cache) == (("int8", "fp8_e4m3", "fp8_e5m2"), True)
    cuda = build_run_spec(compose_config(["hardware=cuda_generic"])).hardware
    assert (cuda.device_type, cuda.kv_layout, cuda.num_cards) == ("cuda", "tokens_major", 8)
    assert any(code.startswith("NV") for row in cuda.topology.links for code in row)


@pytest.mark.parametrize("name", sorted(PARALLEL))
def test_parallel_options(name):
    parallel = build_run_spec(compose_config([f"parallel={name}", "hardware=cpu"])).parallel
    assert (parallel.world_size, parallel.dp_size) == PARALLEL[name]
    assert (parallel.cp_size, parallel.kv_split_size) == (1, 1)


@pytest.mark.parametrize("name", sorted(LAYERWISE))
def test_layerwise_options(name):
    flags = build_run_spec(compose_config([f"layerwise={name}"])).layerwise
    assert (flags.enable, flags.split_size) == LAYERWISE[name]


def test_key_overrides_reach_the_spec():
    run = build_run_spec(compose_config([
        "layerwise.enable=true", "layerwise.split_size=2", "parallel.world_size=8", "parallel.dp_size=2",
        "cache.block_size=64", "cache.kv_cache_dtype=int8", "cache.host_blocks_factor=2.5",
        "placement=[3,2,1,0,7,6,5,4]",
    ]))
    assert (run.layerwise.enable, run.layerwise.split_size) == (True, 2)
    assert (run.parallel.world_size, run.parallel.dp_size) == (8, 2)
    assert (run.cache.block_size, run.cache.kv_cache_dtype, run.cache.host_blocks_factor) == (64, "int8", 2.5)
    assert run.placement == (3, 2, 1, 0, 7, 6, 5, 4)


@pytest.mark.parametrize("name", ["reference", "xllm_upstream"])
def test_implementation_options_instantiate(name):
    impl = build_implementation(compose_config([f"implementation={name}"]))
    assert impl.name == name
    assert all(callable(getattr(impl, m)) for m in ("plan", "engine_message", "init_worker"))


def test_no_hydra_interpolations_in_what_compose_resolves():
    for path in CONF_DIR.rglob("*.yaml"):
        assert "${hydra:" not in path.read_text(), path


# ------------------------------------------------------------------ mistakes: one clear line


@pytest.mark.parametrize("overrides, expected", [
    (["model=foo"], "model='foo': unknown option; allowed: deepseek_v3, deepseek_v32, glm_moe_dsa, llama3_8b, "
                    "qwen3_5_moe, qwen3_next"),
    (["layerwise=s3"], "layerwise='s3': unknown option; allowed: off, s1, s2, s4"),
    (["layerwise.spilt_size=2"], "layerwise.spilt_size: no such key (did you mean split_size?); "
                                 "allowed keys under layerwise: enable, split_size"),
    (["layerwise.split_size=two"], "layerwise.split_size='two': must be an int"),
    (["parallel.world_size=1.5"], "parallel.world_size=1.5: must be an int"),
    (["layerwise.enable=maybe"], "layerwise.enable='maybe': must be a bool"),
    (["placement=[0,x]"], "placement[1]='x': must be an int"),
    (["cache.block_sise=64"], "cache.block_sise: no such key (did you mean block_size?)"),
    (["+layerwise.extra=1"], "layerwise.extra: no such key"),
    (["modle=deepseek_v3"], "modle: no such key (did you mean model?); allowed keys at the top level: model,"),
    (["layerwise.split_size"], "override='layerwise.split_size': malformed"),
    (["layerwise.split_size=1,2"], "layerwise.split_size='1,2': one value here"),
    (["~model"], "model=None: missing; choose one of deepseek_v3,"),
    (["draft.num_hidden_layers=2"], "draft.num_hidden_layers='2': no draft model is selected (draft=none)"),
    (["model=/ckpt/config.json"], "(a Hugging Face config.json is given as model_path=PATH)"),
])
def test_mistakes_are_one_clear_line(overrides, expected):
    with pytest.raises(ConfigError) as info:
        compose_config(overrides)
    message = str(info.value)
    assert expected in message
    assert "\n" not in message


def test_free_form_nodes_say_how_to_add_a_key():
    with pytest.raises(ConfigError, match=r"hardware.facts.rack: no such key under hardware.facts; "
                                          r"add one with \+hardware.facts.rack=VALUE"):
        compose_config(["hardware.facts.rack=3"])
    assert compose_config(["+hardware.facts.rack=3"]).hardware.facts.rack == 3


@pytest.mark.parametrize("yaml_text, expected", [
    ("num_hidden_layer: 3", "model.num_hidden_layer: no such key (did you mean num_hidden_layers?)"),
    ("num_hidden_layers: three", "model.num_hidden_layers='three': must be an int"),
])
def test_mistakes_inside_a_yaml_option_name_the_file(tmp_path, yaml_text, expected):
    conf = tmp_path / "conf"
    shutil.copytree(CONF_DIR, conf)
    (conf / "model" / "mine.yaml").write_text(f"name: mine\nmodel_type: x\nattention: mla\n{yaml_text}\n")
    with pytest.raises(ConfigError) as info:
        compose_config(["model=mine"], config_dir=conf)
    assert expected in str(info.value) and str(info.value).endswith("(in model/mine.yaml)")


def test_bad_implementation_target_names_the_options():
    with pytest.raises(ConfigError, match=r"implementation='nowhere\.Impl'.*options: .*reference.*xllm_upstream"):
        build_implementation(compose_config(["implementation._target_=nowhere.Impl"]))
    with pytest.raises(ConfigError, match=r"implementation='builtins\.dict'.*lacks plan, engine_message, init_worker"):
        build_implementation(compose_config(["implementation._target_=builtins.dict"]))


def test_out_of_tree_subclass_is_instantiated():
    impl = build_implementation(compose_config(["implementation._target_=testcases.unit.test_config.OutOfTree"]))
    assert isinstance(impl, OutOfTree) and impl.name == "out_of_tree"


class OutOfTree:
    """An implementation the harness knows only by its ``_target_``."""

    name = "out_of_tree"

    def plan(self, run): ...

    def engine_message(self, plan, run, role): ...

    def init_worker(self, message, run, *, rank, role, device, expected_digest): ...


def test_reserve_above_hbm_is_an_error():
    with pytest.raises(ConfigError, match="hardware.reserved_mib_per_card=600: at most hardware.hbm_mib_per_card"):
        build_run_spec(compose_config(["hardware.reserved_mib_per_card=600"]))


# ------------------------------------------------------------------ other sources of config


def test_model_path_loads_a_config_json_and_model_keys_apply_on_top(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({
        "model_type": "deepseek_v3", "num_hidden_layers": 3, "kv_lora_rank": 512, "qk_rope_head_dim": 64,
        "torch_dtype": "bfloat16",
    }))
    cfg = compose_config([f"model_path={path}", "model.num_nextn_predict_layers=2"])
    model = build_run_spec(cfg).model
    assert (model.name, model.num_hidden_layers, model.attention) == (str(path), 3, "mla")
    assert model.num_nextn_predict_layers == 2  # the override, not the loader's value (0)


def test_model_path_errors_are_config_errors(tmp_path):
    with pytest.raises(ConfigError, match="model_path="):
        compose_config([f"model_path={tmp_path / 'absent.json'}"])


def test_gflags_and_parallel_config_become_layerwise_overrides(tmp_path):
    assert layerwise_overrides(gflags="--enable_layerwise_split=true --layerwise_split_size=2") == [
        "layerwise.enable=true", "layerwise.split_size=2"]
    pc = tmp_path / "parallel_config.json"
    pc.write_text(json.dumps({"dp_size": 1, "layerwise_split_size": 4}))
    # adaptation: a ParallelConfig carries only the size, so alone it leaves the split off; upstream: on
    assert layerwise_overrides(parallel_config=pc)[-2:] == ["layerwise.enable=false", "layerwise.split_size=4"]
    assert layerwise_overrides(parallel_config=pc, semantics="upstream")[-1:] == ["layerwise.split_size=4"]
    # both: they must agree where both set a value
    assert layerwise_overrides("--layerwise_split_size=4 --enable_layerwise_split", pc)[-2:] == [
        "layerwise.enable=true", "layerwise.split_size=4"]
    with pytest.raises(ConfigError, match="--parallel-config 4 vs --gflags 2"):
        layerwise_overrides("--layerwise_split_size=2", pc)
    with pytest.raises(ConfigError, match="--parallel-config="):
        layerwise_overrides(parallel_config=tmp_path / "missing.json")


def test_compose_works_inside_an_initialized_hydra():
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    with initialize_config_dir(config_dir=str(CONF_DIR), version_base=None):
        assert compose_config(["model=qwen3_next"]).model.num_hidden_layers == 48
        assert GlobalHydra.instance().is_initialized()  # the caller's Hydra is back
    assert not GlobalHydra.instance().is_initialized()


def test_registering_twice_is_harmless():
    from harness.config.store import register

    register()
    register()
    assert compose_config(["layerwise=s2"]).layerwise.split_size == 2


def test_config_dir_must_hold_config_yaml(tmp_path):
    with pytest.raises(ConfigError, match="config_dir="):
        compose_config([], config_dir=tmp_path)
    assert Path(CONF_DIR / "config.yaml").is_file()


def test_cache_inputs_and_budget_override():
    spec = build_run_spec(compose_config([]))
    assert (spec.cache.block_size, spec.cache.max_seqs_per_batch, spec.cache.enable_prefix_cache) == (128, 200, True)
    assert (spec.cache.max_linear_state_cache_slots, spec.cache.num_speculative_tokens) == (0, 0)
    assert spec.kv_budget_bytes == spec.hardware.kv_budget_bytes  # 0 = the profile's
    spec = build_run_spec(compose_config(["cache.kv_budget_bytes=1048576", "cache.indexer_cache_dtype=int8",
                                          "cache.num_speculative_tokens=2", "cache.enable_prefix_cache=false"]))
    assert spec.kv_budget_bytes == 1048576 != spec.hardware.kv_budget_bytes
    assert (spec.cache.indexer_cache_dtype, spec.cache.num_speculative_tokens) == ("int8", 2)
    assert spec.cache.enable_prefix_cache is False


def test_a_specs_config_twin_types_tuples_as_lists():
    """``structured_from_spec`` gives OmegaConf a list wherever the spec has a tuple (OmegaConf types no tuple),
    also inside ``Optional``, and keeps every other annotation."""
    import typing

    from harness.config import schema

    @dataclasses.dataclass(frozen=True)
    class Planted:
        names: tuple[str, ...]
        sizes: Optional[tuple[int, ...]]
        ids: list[int]
        count: int = 1

    got = typing.get_type_hints(schema.structured_from_spec(Planted, "PlantedConfig", ""))
    assert got == {"names": List[str], "sizes": Optional[List[int]], "ids": List[int], "count": int}, got


def test_spec_groups_have_one_definition():
    """model/draft, parallel, layerwise and cache keys ARE the domain specs' fields: same names, types, defaults."""
    import typing

    from harness.config import schema
    from harness.config.build import node_values, spec_from_node

    for config_cls in schema.SPEC_CONFIGS:
        spec = config_cls.spec
        config_fields = {f.name: f for f in dataclasses.fields(config_cls)}
        spec_fields = {f.name: f for f in dataclasses.fields(spec)}
        assert list(config_fields) == list(spec_fields), config_cls.__name__
        twin = typing.get_type_hints(schema.structured_from_spec(spec, "Twin", ""))
        for name, f in spec_fields.items():
            c = config_fields[name]
            assert twin[name] == typing.get_type_hints(config_cls)[name], \
                f"{config_cls.__name__}.{name}: {typing.get_type_hints(config_cls)[name]} is not the spec's twin {twin[name]}"
            if f.default is not dataclasses.MISSING:
                assert c.default == f.default, name
            elif f.default_factory is dataclasses.MISSING:
                assert c.default == "???", name  # OmegaConf MISSING: a YAML must set it
    cfg = compose_config(["model=qwen3_5_moe", "layerwise=s2"])
    model = spec_from_node(ModelSpec, cfg.model)
    assert isinstance(model.layer_types, tuple)  # lists in the config, tuples in the frozen spec
    assert spec_from_node(ModelSpec, node_values(model)) == model  # and back, unchanged


def test_hardware_schema_and_profile_keep_in_step():
    """``hardware`` is the one group with a schema of its own (MiB and a fixture name where the profile holds
    bytes and a Topology): every profile field has its key, and every key reaches the profile or the reports."""
    from harness.config import build, schema

    config_keys = {f.name for f in dataclasses.fields(schema.HardwareConfig)}
    profile_fields = {f.name for f in dataclasses.fields(HardwareProfile)}
    assert build.HARDWARE_SAME_FIELDS <= config_keys
    assert profile_fields == build.HARDWARE_SAME_FIELDS | set(build.HARDWARE_CONVERTED.values())
    assert config_keys == build.HARDWARE_SAME_FIELDS | set(build.HARDWARE_CONVERTED) | set(build.HARDWARE_CONFIG_ONLY)
    profile = build_run_spec(compose_config(["hardware=bi_v100"])).hardware
    assert (profile.hbm_bytes_per_card, profile.reserved_bytes_per_card) == (32768 * MIB, 16384 * MIB)
    assert profile.warp_size == 64 and profile.topology.name == "bi_v100_pix4"


# -- composition once per group option (harness.config.compose) ----------------------------


def _hydra_whole(overrides, conf_dir=CONF_DIR):
    from harness.config import compose as composition

    return composition.finish(composition.hydra_compose(overrides, conf_dir),
                              composition.parse_overrides(overrides), conf_dir)


def _hydra_answer(overrides, conf_dir=CONF_DIR) -> str:
    """What Hydra's whole composition makes of ``overrides``: the config's YAML, or the error line."""
    from omegaconf import OmegaConf

    from harness.config import compose as composition
    from harness.config import errors

    parsed = composition.parse_overrides(overrides)
    try:
        cfg = composition.hydra_compose(overrides, conf_dir)
    except Exception as exc:  # Hydra's refusal, in the harness's words
        return f"error: {errors.translate(exc, conf_dir, parsed)}"
    try:
        return OmegaConf.to_yaml(composition.finish(cfg, parsed, conf_dir))
    except ConfigError as exc:
        return f"error: {exc}"


def _answer(overrides, conf_dir=CONF_DIR) -> str:
    from omegaconf import OmegaConf

    try:
        return OmegaConf.to_yaml(compose_config(overrides, conf_dir))
    except ConfigError as exc:
        return f"error: {exc}"


def _same_config(a, b) -> None:
    from omegaconf import OmegaConf

    assert OmegaConf.to_yaml(a) == OmegaConf.to_yaml(b)
    assert OmegaConf.is_struct(a) == OmegaConf.is_struct(b)
    for group in ("model", "draft", "hardware", "parallel", "layerwise", "implementation", "cache"):
        assert OmegaConf.get_type(a, group) == OmegaConf.get_type(b, group), group


def _covering_cases(matrix_name: str) -> list[tuple[str, ...]]:
    """Distinct case configurations of a matrix, few of them, together taking every group option and
    changing every key the matrix uses."""
    import importlib

    from harness.suites import TC_MODULES
    from harness.suites.matrix import load_matrix

    matrix = load_matrix(matrix_name, [])
    cases = sorted({tuple(c.overrides()) for tc, name in TC_MODULES.items()
                    for c in importlib.import_module(name).cases(matrix)})
    def facets(overrides):  # each group option, and each key a case changes (whatever its value)
        return {o if "." not in o.partition("=")[0] else o.partition("=")[0] for o in overrides}

    chosen, seen = [], set()
    for overrides in sorted(cases, key=lambda o: -len(facets(o))):  # greedy: most new facets first
        new = facets(overrides) - seen
        if new:
            chosen.append(overrides)
            seen |= new
    return chosen


@pytest.mark.slow
def test_composed_configs_are_hydras():
    """A case's config, assembled from once-read group options, is what Hydra composes whole:
    on cases of the CI matrix that together take every option and key change it uses."""
    chosen = _covering_cases("ci")
    assert len(chosen) >= 10
    for overrides in chosen:
        _same_config(compose_config(list(overrides)), _hydra_whole(list(overrides)))


_OPTIONS = {g: sorted(p.stem for p in (CONF_DIR / g).glob("*.yaml"))
            for g in ("model", "draft", "hardware", "parallel", "layerwise", "suite")}
_OPTIONS["implementation"] = ["reference", "xllm_upstream", "fault_hang", "mutant_owner_off_by_one"]


@pytest.mark.slow
def test_option_nodes_are_hydras_nodes():
    """Each option of the groups a case chooses (and each shape of implementation option) is the node
    Hydra's composition gives that group (one Hydra composition per row of options, one option of
    every group in each)."""
    from omegaconf import OmegaConf

    from harness.config.compose import hydra_compose, option_node

    for row in range(max(len(options) for options in _OPTIONS.values())):
        chosen = {g: options[row] for g, options in _OPTIONS.items() if row < len(options)}
        hydras = hydra_compose([f"{g}={o}" for g, o in chosen.items()])
        for group, option in chosen.items():
            node = option_node(group, option)
            if option == "none":
                assert node is None and hydras[group] is None, f"{group}={option}"
                continue
            assert OmegaConf.to_yaml(node) == OmegaConf.to_yaml(hydras[group]), f"{group}={option}"
            assert OmegaConf.get_type(node) == OmegaConf.get_type(hydras, group), f"{group}={option}"


def test_an_option_with_a_defaults_list_is_hydras(tmp_path):
    conf = tmp_path / "conf"
    shutil.copytree(CONF_DIR, conf)
    (conf / "layerwise" / "nested.yaml").write_text("defaults:\n  - s2\n  - _self_\nsplit_size: 4\n")
    got = compose_config(["layerwise=nested"], config_dir=conf)
    assert (got.layerwise.enable, got.layerwise.split_size) == (True, 4)  # Hydra merged s2 under it
    _same_config(got, _hydra_whole(["layerwise=nested"], conf))


@pytest.mark.parametrize("overrides", [
    ["model=qwen3_5_moe", "layerwise=s4", "layerwise.split_size=2", "cache.block_size=64"],
    ["draft=deepseek_mtp", "model=deepseek_v3", "parallel=dp2_tp4", "parallel.cp_size=1"],
    ["hardware=bi_v100", "cache.kv_cache_dtype=int8", "runner.timeout_s=30", "model.dtype=float16"],
    ["implementation=xllm_upstream", "layerwise=off", "layerwise.enable=true", "layerwise.split_size=2"],
])
def test_key_changes_are_hydras(overrides):
    _same_config(compose_config(overrides), _hydra_whole(overrides))


_OVERRIDE_FORMS = [
    ["mode=plan", "suite=quick"], ["suite=l2", "mode=plan", "launcher=slurm"], ["~model"], ["~draft", "draft=deepseek_mtp"],
    ["~suite"], ["~mode"], ["+model=qwen3_5_moe"], ["model@foo=qwen3_5_moe"], ["draft=null"], ["hydra.nope=1"],
    ["+hydra.x=1"], ["+cache.block_size=64"], ["~cache.block_size"], ["+hardware.facts.rack=3", "~hardware.facts.rack"],
    ["~placement"], ["layerwise.split_size=${parallel.tp_size}"],
]


@pytest.mark.slow
def test_every_override_form_is_hydras():
    """Choices of the app's groups (which write outside their node: ``mode=plan`` sets ``suite.mode``),
    deleted and added groups and keys, ``hydra.*`` keys: the same config as Hydra's, or the same error line."""
    for overrides in _OVERRIDE_FORMS:
        assert _answer(overrides) == _hydra_answer(overrides), overrides


def test_an_option_that_writes_outside_its_group_is_hydras(tmp_path):
    """An option with ``@package _global_`` that sets another group's key keeps that key, after the other
    groups' nodes, as Hydra merges it."""
    conf = tmp_path / "conf"
    shutil.copytree(CONF_DIR, conf)
    text = (conf / "model" / "qwen3_5_moe.yaml").read_text()
    body = "\n".join("  " + line for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#"))
    (conf / "model" / "wide.yaml").write_text(f"# @package _global_\ncache:\n  block_size: 32\nmodel:\n{body}\n")
    for overrides in (["model=wide", "layerwise=s2"], ["model=wide", "cache.block_size=16"]):
        got = compose_config(overrides, config_dir=conf)
        assert got.cache.block_size == (32 if len(overrides[1]) < 14 else 16), overrides
        _same_config(got, _hydra_whole(overrides, conf))


def test_an_option_that_chooses_another_groups_option_is_refused(tmp_path):
    """What the composer cannot assemble as Hydra composes it (an option whose defaults list chooses another
    group's option) is one error line naming the option, never another config."""
    conf = tmp_path / "conf"
    shutil.copytree(CONF_DIR, conf)
    (conf / "mode" / "card.yaml").write_text("# @package _global_\ndefaults:\n  - override /hardware: bi_v100\n")
    assert _hydra_whole(["mode=card"], conf).hardware.name != _hydra_whole([], conf).hardware.name
    with pytest.raises(ConfigError, match=r"mode='card': an option that sets keys; not one that chooses"):
        compose_config(["mode=card"], config_dir=conf)


def test_an_option_that_leaves_out_a_key_the_default_option_writes_outside_its_group_is_refused(tmp_path):
    """The default option of ``mode`` writes a key into another group's open node (``hardware.facts``); an option
    that does not write it composes, in Hydra, to a config without that key, which the composer's default config
    plus the option's own keys cannot give: one error line naming the option, never another config."""
    conf = tmp_path / "conf"
    shutil.copytree(CONF_DIR, conf)
    (conf / "mode" / "suite.yaml").write_text("# @package _global_\nsuite:\n  mode: suite\nhardware:\n  facts:\n"
                                              "    planted: 1\n")
    (conf / "mode" / "bare.yaml").write_text("# @package _global_\nsuite:\n  mode: plan\n")
    assert "planted" in _hydra_whole([], conf).hardware.facts, "the planted default option wrote no key"
    with pytest.raises(ConfigError, match=r"mode='bare': .*removes keys outside its group"):
        compose_config(["mode=bare"], config_dir=conf)


@pytest.mark.parametrize("overrides, field", [
    (["model=no_such_model"], "model"),
    (["layerwise.spilt_size=2"], "layerwise.spilt_size"),
    (["layerwise=s2", "layerwise.split_size=two"], "layerwise.split_size"),
    (["+cache.extra=1"], "cache.extra"),
])
def test_assembly_errors_are_hydras_errors(overrides, field):
    """A mistake is never assembled: Hydra composes it whole and the error names the field."""
    with pytest.raises(ConfigError) as info:
        compose_config(overrides)
    assert info.value.field == field


@pytest.mark.parametrize("group, option, key", [("draft", "deepseek_mtp", "num_hidden_layers"),
                                                ("model", "qwen3_5_moe", "num_hidden_layers")],
                         ids=["null-by-default", "set-by-default"])
def test_a_key_change_on_an_assembled_option_changes_that_config_only(group, option, key):
    """Each group option's node is composed once and shared: a case's key change lands on its own copy,
    whether the default config sets the group to null (``draft``) or to a node of its own (``model``)."""
    from harness.config.compose import option_node

    shipped = getattr(option_node(group, option), key)
    changed = compose_config([f"{group}={option}", f"{group}.{key}={shipped + 6}"])
    assert getattr(changed[group], key) == shipped + 6
    again = compose_config([f"{group}={option}"])
    assert (getattr(again[group], key), getattr(option_node(group, option), key)) == (shipped, shipped), \
        f"{group}={option}: the shared node took another case's {group}.{key}={shipped + 6}"
