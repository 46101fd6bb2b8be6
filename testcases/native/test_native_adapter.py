"""implementation=xllm_native on the project's C++ fixture tree (``fixture_tree``): build, bind, cache,
refusal, missing entry point, compile error, concurrent build.

The fixture has the roles' files at upstream's paths with simple math and light headers, so one
build takes a few seconds; every expected number below is worked out by hand from that math.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from contract.errors import ConfigError, PlanError, UserError
from contract.specs import CacheSpec, ModelSpec
from implementations.xllm_native import manifest
from implementations.xllm_native.build import cache as build_cache
from implementations.xllm_native.build import cachefs, commands, keys, library
from implementations.xllm_native.build import generate as generate_mod
from implementations.xllm_native.runtime import checks, native
from implementations.xllm_native.tree import cut
from implementations.xllm_native.tree import files as tree_files
from implementations.xllm_native.tree.facts import tree_facts
from testcases import ROOT
from testcases.unit import _models as M

pytestmark = pytest.mark.slow  # builds C++ (a few seconds each): scheduled first

FIXTURE = Path(__file__).resolve().parent / "fixture_tree"
LAYOUT = "xllm/core/framework/kv_cache/layerwise_split_layout.h"
ESTIMATION = "xllm/core/framework/kv_cache/kv_cache_estimation.cpp"
SPECULATIVE = "xllm/core/distributed_runtime/speculative_engine.cpp"
MASTER = "xllm/core/distributed_runtime/master.cpp"
# An MLA model of 6 full layers: slot = 2 B * (24 + 8) = 64 B, one layer of a 16-token block = 1 KiB.
MODEL = ModelSpec(name="fixture", model_type="fixture_split", num_hidden_layers=6, attention="mla",
                  kv_lora_rank=24, qk_rope_head_dim=8)
LAYER = 16 * 64
BUDGET = 100 * LAYER + 5


def run(split=2, *, model=MODEL, world=4, budget=BUDGET, **kw):
    return M.run_spec(model, split=split, world=world, budget_bytes=budget, cache=CacheSpec(block_size=16), **kw)


@pytest.fixture(scope="module")
def impl(implementation):
    return implementation()


def copy_tree(tmp_path: Path, edit_file: str = "", old: str = "", new: str = "") -> Path:
    tree = tmp_path / "tree"
    shutil.copytree(FIXTURE, tree)
    if edit_file:
        path = tree / edit_file
        text = path.read_text()
        assert old in text, (edit_file, old)
        path.write_text(text.replace(old, new))
    return tree


def entries(cache: Path) -> list[str]:
    return sorted(p.name for p in cache.iterdir() if not p.name.endswith(".lock"))


# ---- the plan comes from the compiled code ----------------------------------------------------------------


def test_plan_numbers_are_the_fixtures_math(impl):
    plan = impl.plan(run(2))
    # each split rank owns 3 layers + 1 scratch layer: 100 KiB // 4 KiB; uniform holds 6 layers
    assert (plan.n_blocks, plan.uniform_n_blocks) == (BUDGET // (4 * LAYER), BUDGET // (6 * LAYER))
    assert plan.layer_owner == tuple((layer, layer % 2) for layer in range(6))
    assert plan.scratch_bytes_per_block == LAYER and plan.slot_size == 64
    assert plan.implementation == "xllm_native"


def test_the_split_groups_are_the_trees_groups_role_cut_out_of_its_mapping_class(impl, tmp_path, implementation):
    """Role ``groups``: the tree's ``MappingNPU::get_layerwise_split_group`` (with its TP groups and ``validate``'s
    CHECKs), cut out of its file behind the project's mapping shim and called for every rank; its CHECK is a
    refusal naming the file; a copy whose method cuts the TP group differently plans those groups (was: the
    harness's Python model of upstream's consecutive groups, whatever the tree)."""
    from contract.plan_types import TREE_CARDS_NOTE, TREE_GROUPS_NOTE

    plan = impl.plan(run(2, world=8))
    assert plan.split_groups == ((0, 1), (2, 3), (4, 5), (6, 7))
    note = next(n for n in plan.notes if n.startswith(TREE_GROUPS_NOTE))
    assert "MappingNPU::get_layerwise_split_group" in note and "mapping_npu.cpp" in note
    assert TREE_CARDS_NOTE in plan.notes
    with pytest.raises(UserError) as err:
        impl.native.call("groups", {"world_size": 4, "layerwise_split_size": 3})
    assert "mapping_npu.cpp" in err.value.detail and "not divisible by layerwise_split_size" in err.value.detail
    tree = copy_tree(tmp_path, "xllm/core/framework/parallel_state/mapping_npu.cpp",
                     "groups.emplace_back(tp_group.begin() + at, tp_group.begin() + at + s);",
                     "groups.push_back({tp_group[at / s], tp_group[at / s + tp_group.size() / s]});")
    strided = implementation(source_dir=tree)
    assert strided.plan(run(2)).split_groups == ((0, 2), (1, 3))


def test_groups_that_are_not_a_partition_of_the_ranks_are_a_failure_naming_the_role(tmp_path, implementation):
    """A groups function that puts a rank in two groups (each group emitted twice) is the tree's failure, naming the
    op and what it answered, never planned with."""
    from contract.errors import ImplementationFailure

    tree = copy_tree(tmp_path, "xllm/core/framework/parallel_state/mapping_npu.cpp",
                     "groups.emplace_back(tp_group.begin() + at, tp_group.begin() + at + s);",
                     "groups.emplace_back(tp_group.begin() + at, tp_group.begin() + at + s);\n"
                     "      groups.emplace_back(tp_group.begin() + at, tp_group.begin() + at + s);")
    twice = implementation(source_dir=tree)
    with pytest.raises(ImplementationFailure) as err:
        twice.plan(run(2))
    assert "the compiled groups answered groups [[0, 1], [0, 1], [2, 3], [2, 3]]" in str(err.value), err.value


def test_the_adapter_tells_the_harness_its_trees_facts_and_how_it_was_compiled(impl):
    """What the harness asks of a built adapter (never its ``native`` or ``manifest``): the tree's facts, as
    ``tree_facts`` resolves them from the same folder, and the planning build's compiler and flags."""
    facts = impl.facts()
    assert facts == tree_facts(str(FIXTURE)), f"{facts} is not the tree's facts {tree_facts(str(FIXTURE))}"
    built = impl.compiled_with()
    assert set(built) == {"compiler", "flags"} and built["compiler"] and built["flags"], built


def test_speculative_block_count_is_calculate_kv_cache(impl):
    draft = replace(MODEL, name="fixture_mtp", num_nextn_predict_layers=1)
    plan = impl.plan(run(2, draft=draft))
    # owner 3 layers + scratch + the draft's one layer at the target's slot
    assert plan.n_blocks == BUDGET // (5 * LAYER)
    assert plan.draft.layer_bytes_per_block == (LAYER,)


def test_the_trees_own_code_is_compiled_and_a_changed_header_rebuilds_it(tmp_path, cache, implementation):
    """A tree whose layout assigns layer l to (l + 1) % s: the plan follows the tree, not the Python model;
    then a header that no role names changes: the cached entry no longer counts (one build for both checks)."""
    tree = copy_tree(tmp_path, LAYOUT, "layer_id % group_size_", "(layer_id + 1) % group_size_")
    impl = implementation(source_dir=tree)
    assert impl.plan(run(2)).layer_owner == tuple((layer, (layer + 1) % 2) for layer in range(6))
    key = keys.source_key(tree_files.tree_map(str(tree)))
    assert build_cache.find(cache, key) == impl.native.built
    header = tree / "xllm/core/framework/kv_cache/kv_cache_capacity.h"
    header.write_text(header.read_text() + "// changed\n")  # found through the compiler's -MD list
    assert keys.source_key(tree_files.tree_map(str(tree))) == key
    assert build_cache.find(cache, key) is None


# ---- refusals: a CHECK names its field --------------------------------------------------------------------


@pytest.mark.parametrize("spec, field", [
    (dict(split=2, model=replace(MODEL, model_type="llama")), "model.model_type"),
    (dict(split=3, model=replace(MODEL, model_type="llama")), "model.model_type"),  # also tp 4 % 3: model first
    (dict(split=3), "layerwise.split_size"),
    (dict(split=2, cp=2, world=8), "parallel.cp_size"),
    (dict(split=2, kv_split_size=2), "parallel.kv_split_size"),
])
def test_a_check_failure_is_the_refusal_naming_its_field(impl, spec, field):
    with pytest.raises(ConfigError) as err:
        impl.plan(run(**spec))
    assert err.value.field == field
    assert "CHECK at " in err.value.detail


def test_an_estimation_check_is_a_plan_error_and_the_process_keeps_working(impl):
    for _ in range(30):  # each CHECK parks the thread it fired on; the library stays usable
        with pytest.raises(PlanError) as err:
            impl.plan(run(2, budget=3 * LAYER))
        assert err.value.field == "hardware.reserved_bytes_per_card"
        assert "kv_cache_estimation.cpp" in err.value.detail and "common_block_count" in err.value.detail
    assert impl.plan(run(2)).n_blocks == BUDGET // (4 * LAYER)


def test_every_model_dtype_has_a_torch_scalar_type_code():
    from contract.specs import DTYPE_BYTES
    from implementations.xllm_native.impl import TORCH_SCALAR_TYPES

    assert set(TORCH_SCALAR_TYPES) == set(DTYPE_BYTES)


def test_an_unknown_check_names_the_implementation():
    check = checks.Check(file="x.cpp", line=3, condition="CHECK(something_new())", message="")
    assert checks.field_of(check) is None
    assert checks.field_of(replace(check, condition="CHECK_EQ(attn_tp_size % layerwise_split_size, 0)")) \
        == "layerwise.split_size"


def test_a_checks_condition_is_read_only_from_a_file_inside_the_roots_and_its_first_16_mib(tmp_path):
    """``check_condition`` quotes the CHECK at ``file:line`` from a regular file inside the roots it is given, reading
    at most ``cachefs.MAX_SOURCE_BYTES``; otherwise it says why it quotes nothing."""
    src = tmp_path / "a.cpp"
    src.write_text('int f() {\n  CHECK_GT(cache_size_in_bytes,\n           0) << "none";\n}\n')
    assert checks.check_condition(str(src), 2, [tmp_path]) == ("CHECK_GT(cache_size_in_bytes, 0)", "")
    assert checks.check_condition(str(src), 2, [src]) == ("CHECK_GT(cache_size_in_bytes, 0)", "")
    assert checks.check_condition(str(src), 2, [tmp_path / "tree"]) == (
        "", f"{src} is outside the tree and the build folder")
    assert checks.check_condition("a.cpp", 2, [tmp_path]) == ("", "'a.cpp' is not an absolute path")
    big = tmp_path / "big.cpp"
    with open(big, "wb") as f:
        f.truncate(2 * cachefs.MAX_SOURCE_BYTES)  # sparse: 32 MiB without a newline
    assert checks.check_condition(str(big), 1, [tmp_path]) == (
        "", f"line 1 of {big} is not within its first {cachefs.MAX_SOURCE_BYTES >> 20} MiB")
    (tmp_path / "dir.cpp").mkdir()
    assert checks.check_condition(str(tmp_path / "dir.cpp"), 1, [tmp_path]) == ("", f"{tmp_path / 'dir.cpp'} is not a regular file")


def test_a_fatal_log_of_a_quantized_cache_names_its_field_by_the_message():
    """``LOG(FATAL)`` and ``CHECK(false)`` name nothing in their condition: the message does (upstream's texts)."""
    fatal = checks.Check(file="worker_impl.cpp", line=520, condition="LOG(FATAL)",
                         message="KV Cache quantization is only supported on MLU backend. Current backend does not "
                                 "support this feature.")
    assert checks.field_of(fatal) == "cache.kv_cache_dtype"
    indexer = replace(fatal, condition="CHECK(false)",
                      message="Check failed: false Indexer cache INT8 is unsupported on this backend.")
    assert checks.field_of(indexer) == "cache.indexer_cache_dtype"
    assert checks.field_of(replace(fatal, message="KV cache too small")) is None


def test_upstreams_manifest_builds_its_allocation_for_the_backends_the_predictions_name():
    from harness.suites.expectations import NATIVE_UPSTREAM_BACKENDS

    t = manifest.load(manifest.SHIPPED_DIR / "upstream_494f293b5.yaml").tensors
    assert set(t.layouts()) == set(NATIVE_UPSTREAM_BACKENDS) == set(manifest.KV_LAYOUTS)
    assert t.defines_for("heads_major") == ("USE_ILU",) and NATIVE_UPSTREAM_BACKENDS["heads_major"] == "ilu"
    assert t.defines_for("tokens_major") == () and NATIVE_UPSTREAM_BACKENDS["tokens_major"] == "cpu"
    assert t.defines_for(None) == ("USE_ILU",)  # the default build: the first layout


def test_the_predictions_follow_what_the_manifest_compiles(tmp_path, monkeypatch):
    """Upstream's predictions belong to upstream's own files, by sha256 (harness/baselines/upstream_sources.json):
    the fixture tree is built as upstream is (upstream-cut) but is not upstream's code, so none apply (was: all of
    them: a fixture that refused qwen3_5_moe read 17 xfailed); a tree that does not resolve gets none either. Were
    the recording the fixture's, its planning-only manifest would get upstream's modelled workers, until one
    header changes."""
    from harness.baselines import upstream_sources
    from harness.suites.expectations import NATIVE_PLANNING_ONLY, PREDICTIONS, predicted_name

    upstream = str(manifest.SHIPPED_DIR / "upstream_494f293b5.yaml")

    def label(source_dir, manifest=None, env=""):  # the environment's tree is part of the memo: a new one reads anew
        monkeypatch.setenv(tree_files.ENV_SOURCE, env)
        return predicted_name("xllm_native", {"source_dir": source_dir, "manifest": manifest})

    assert label(str(FIXTURE), env="") == "xllm_native[fixture_tree]" not in PREDICTIONS
    assert label(str(FIXTURE), upstream) == "xllm_native[unresolved]" not in PREDICTIONS
    tree = copy_tree(tmp_path)
    facts = tree_facts(str(tree))
    as_if = {g: {rel: upstream_sources.sha256(tree / rel) for rel in rels}
             for g, rels in upstream_sources.compiled_files(facts).items()}
    monkeypatch.setattr(upstream_sources, "recorded", lambda: as_if)
    assert label(str(tree), env="x") == NATIVE_PLANNING_ONLY
    header = tree / "xllm/core/framework/kv_cache/kv_cache_estimation.h"
    header.write_text(header.read_text() + "// changed\n")
    assert upstream_sources.difference(facts) == \
        "xllm/core/framework/kv_cache/kv_cache_estimation.h is not upstream 494f293b5's (sha256 differs)"
    assert label(str(tree), env="y") == "xllm_native[fixture_tree]"


# ---- cache -------------------------------------------------------------------------------------------------


def test_a_warm_start_does_not_compile(impl, cache):
    key = impl.native.built.library.parent.name.split("-")[0]

    def mine():  # this tree's: other xdist workers build other trees in the same cache meanwhile
        return sorted(p.name for p in cache.iterdir() if p.name.startswith((key, f".tmp-{key}")))

    before = mine()
    again = library.build(tree_files.tree_map(str(FIXTURE)), root=cache)
    assert again.library == impl.native.built.library  # a build places a new entry (``-1``) beside the old one
    assert mine() == before, "a warm start left a new cache entry or build folder"
    manifest = again.manifest
    assert manifest["source"] == str(FIXTURE) and manifest["flags"] == list(commands.CXX_FLAGS)
    assert str(FIXTURE / "xllm/core/framework/kv_cache/kv_cache_capacity.h") in manifest["deps"]


# ---- broken trees ------------------------------------------------------------------------------------------


def test_a_missing_entry_point_names_the_function_and_file(tmp_path):
    tree = copy_tree(tmp_path, SPECULATIVE, "SpeculativeEngine::calculate_kv_cache(", "SpeculativeEngine::other(")
    cache = tmp_path / "cache"
    with pytest.raises(UserError) as err:
        native.load(str(tree), cache=cache)
    assert "SpeculativeEngine::calculate_kv_cache not found in" in str(err.value)
    assert str(tree / SPECULATIVE) in str(err.value)
    assert entries(cache) == []  # nothing half-built left


def test_a_compile_error_names_the_file_and_first_error(tmp_path):
    tree = copy_tree(tmp_path, ESTIMATION, "namespace {\n", "namespace {\nint broken = ;\n")
    cache = tmp_path / "cache"
    with pytest.raises(UserError) as err:
        native.load(str(tree), cache=cache)
    text = str(err.value)
    assert f"the estimation role ({tree / ESTIMATION}) does not compile" in text
    assert "kv_cache_estimation.cpp:14:14: error: expected primary-expression" in text
    assert entries(cache) == []


def test_no_tree_is_one_error_line(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != tree_files.ENV_SOURCE}
    env["PYTHONPATH"] = str(ROOT)
    proc = subprocess.run([sys.executable, "-m", "harness.plan", "implementation=xllm_native",
                           f"implementation.source_dir={tmp_path / 'none'}"],
                          capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("error: implementation.source_dir=") and proc.stderr.count("\n") == 1
    assert "Traceback" not in proc.stderr


def test_a_refusal_is_one_error_line(impl, cache):
    """The CHECK's refusal through harness.plan: one line naming the field, nothing else glog writes."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), build_cache.ENV_CACHE: str(cache)}
    proc = subprocess.run([sys.executable, "-m", "harness.plan", "implementation=xllm_native",
                           f"implementation.source_dir={FIXTURE}", "model=llama3_8b", "layerwise=s2"],
                          capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("error: model.model_type='llama': a model type the tree splits (CHECK at "
                                  "layerwise_split_layout.h:"), proc.stderr
    assert proc.stderr.count("\n") == 1


def test_no_compiler(monkeypatch):
    monkeypatch.setenv("CXX", "no-such-compiler-lwsplit")
    with pytest.raises(UserError) as err:
        commands.compiler()
    assert err.value.field == "CXX" and "C++20 compiler" in str(err.value)


def test_not_a_tree():
    with pytest.raises(UserError) as err:
        tree_files.tree_map(str(FIXTURE / "xllm"))
    assert err.value.field == "implementation.files.estimation"
    env = os.environ.pop(tree_files.ENV_SOURCE, None)
    try:
        with pytest.raises(UserError) as err:
            tree_files.tree_map(None)
        assert err.value.field == tree_files.FIELD
    finally:
        if env is not None:
            os.environ[tree_files.ENV_SOURCE] = env


# ---- concurrent builds -------------------------------------------------------------------------------------

_BUILDER = """
import sys
from pathlib import Path
from implementations.xllm_native.build import library
from implementations.xllm_native.tree import files as tree_files
print(library.build(tree_files.tree_map(sys.argv[1]), root=Path(sys.argv[2])).library)
"""


def test_two_processes_build_once_and_share_it(tmp_path):
    tree = copy_tree(tmp_path)
    cache = tmp_path / "cache"
    log = tmp_path / "compiles.log"
    cxx = tmp_path / "cxx"
    cxx.write_text(f'#!/bin/sh\ncase "$*" in *--version*|*" -E -v "*) ;; *) echo x >> {log} ;; esac\nexec g++ "$@"\n')
    cxx.chmod(0o755)
    env = {**os.environ, "CXX": str(cxx), "PYTHONPATH": str(ROOT)}
    procs = [subprocess.Popen([sys.executable, "-c", _BUILDER, str(tree), str(cache)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    try:
        outs = [p.communicate(timeout=300) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    assert [p.returncode for p in procs] == [0, 0], outs
    assert outs[0][0] == outs[1][0]
    assert log.read_text().count("x") == 1
    assert len(entries(cache)) == 1


# ---- cutting functions out -----------------------------------------------------------------------------------


def test_extract_takes_the_definition_not_a_call():
    text = ("int f(int a);\nvoid g() { f(1); if (f(2)) { } }\n// f(3) {\ntemplate <typename T>\n"
            "inline int f(int a) {\n  return a + 1;  // }\n}\nconstexpr int k = f(4);\n")
    line, snippet = cut.extract(text, "f")
    assert line == 4 and snippet.startswith("template <typename T>\ninline int f(int a) {")
    assert snippet.endswith("// }\n}")
    assert cut.extract(text, "k") == (8, "constexpr int k = f(4);")
    assert cut.extract(text, "h") is None


NPU_FIRST = """#if defined(USE_NPU)
void validate(int s) {}  // accepts everything
#elif !defined(USE_ILU) && LWSPLIT_LEVEL >= 2
void validate(int s) { CHECK(s < 9); }
#else
void validate(int s) {
#ifdef USE_NPU
  {
#endif
  CHECK(s != 3);
}
#endif
"""


@pytest.mark.parametrize("defines, line, body", [
    ((), 6, "CHECK(s != 3);"),
    (("USE_NPU",), 2, "{}"),
    (("LWSPLIT_LEVEL=2",), 4, "CHECK(s < 9);"),
    (("LWSPLIT_LEVEL=2", "USE_ILU"), 6, "CHECK(s != 3);"),
])
def test_extract_cuts_the_version_the_preprocessor_keeps(defines, line, body):
    """upstream's master.cpp pattern: an accept-everything version under #if defined(USE_NPU), the real one
    after #else; the cut is the live one under the manifest's defines, at its own line (an unbalanced brace in
    a dropped group inside it does not end it early)."""
    found, snippet = cut.extract(NPU_FIRST, "validate", defines)
    assert found == line and body in snippet, (found, snippet)


def test_the_cut_of_a_tree_with_a_dead_version_first_is_the_real_one(tmp_path):
    """Generated sources only (no compile): the master's cut is the #else version, at the tree's line; a
    condition the cut cannot evaluate is one error naming the file and line."""
    name = "void validate_layerwise_split_size_startup_config("
    tree = copy_tree(tmp_path, MASTER, name, "#if defined(USE_NPU)\n" + name + "const Options&, const std::string&, "
                     "int32_t) {}\n#else\n" + name)
    path = tree / MASTER
    path.write_text(path.read_text().replace("\n}  // namespace\n", "\n#endif\n}  // namespace\n"))
    gen = tmp_path / "gen"
    generate_mod.generate(tree_files.tree_map(str(tree)), gen)
    cut = (gen / "lwsplit_master.inc").read_text()
    assert f'#line 16 "{path}"' in cut and "validate_layerwise_split_enablement(" in cut, cut
    assert "int32_t) {}" not in cut
    path.write_text(path.read_text().replace("#if defined(USE_NPU)", "#if __has_include(<npu.h>)"))
    with pytest.raises(UserError) as err:
        generate_mod.generate(tree_files.tree_map(str(tree)), tmp_path / "gen2")
    assert "implementation.files.master=" in str(err.value) and f"{path}:13: #if __has_include" in str(err.value)
