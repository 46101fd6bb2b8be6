"""Port manifests: a tree built from its own sources through a manifest and a glue file.

The fixture port (``fixture_port``: the seed's file names, its own small API, planted defects, the
speculative role absent) proves the whole path in CI: manifest checks, build, the tree's own
validation, layouts and worker masks reaching the plan and the workers, and the harness's checks
finding each planted defect. The real trees (upstream 494f293b5 and the two BI-V100 port snapshots
under ``../shared``) are built and judged by ``real_tree`` tests: their own CI step
(``LWSPLIT_REAL_TREES=1 pytest -n 0 -m real_tree testcases/native``); elsewhere they skip, saying why.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Optional

import pytest

from contract.errors import UserError
from contract.specs import CacheSpec
from harness.suites import ownership
from harness.suites.checks import published_layout_problems
from harness.suites.expectations import expected_rejection
from implementations.xllm_native import manifest
from implementations.xllm_native.build import cache as build_cache
from implementations.xllm_native.build import cachefs, commands, diagnose, keys, library
from implementations.xllm_native.runtime import own_tests
from implementations.xllm_native.tree import cut
from implementations.xllm_native.tree import files as tree_files
from implementations.xllm_native.tree import resolve as resolve_mod
from implementations.xllm_native.tree.facts import tree_facts
from testcases import ROOT
from testcases.real_trees import PORTS, UPSTREAM, real_tree
from testcases.unit import _models as M

pytestmark = pytest.mark.slow  # builds C++: scheduled first

FIXTURE = Path(__file__).resolve().parent / "fixture_port"
FIXTURE_MANIFEST = FIXTURE / "manifest.yaml"
QWEN_TYPES = tuple("full_attention" if (layer + 1) % 4 == 0 else "linear_attention" for layer in range(40))
QWEN = replace(M.QWEN3_5_MOE, layer_types=QWEN_TYPES)
FULL = [layer for layer in range(40) if (layer + 1) % 4 == 0]


def run(split=2, *, model=QWEN, world=4, **kw):
    return M.run_spec(model, split=split, world=world, budget_bytes=1 << 20, cache=CacheSpec(block_size=16), **kw)


@pytest.fixture(scope="module")
def impl(cache):
    os.environ[build_cache.ENV_CACHE] = str(cache)
    try:
        from implementations.xllm_native import XllmNativeImplementation

        yield XllmNativeImplementation(source_dir=str(FIXTURE), manifest=str(FIXTURE_MANIFEST))
    finally:
        os.environ.pop(build_cache.ENV_CACHE, None)


def write_manifest(tmp_path: Path, old: str = "", new: str = "", *, text: str = "") -> Path:
    body = text or FIXTURE_MANIFEST.read_text()
    if old:
        assert old in body, old
        body = body.replace(old, new)
    path = tmp_path / "m.yaml"
    path.write_text(body.replace("glue: glue.cpp", f"glue: {FIXTURE / 'glue.cpp'}")
                    .replace("glue: alloc_glue.cpp", f"glue: {FIXTURE / 'alloc_glue.cpp'}"))
    return path


# ---- the manifest: one error line per mistake, naming the key ---------------------------------------------


@pytest.mark.parametrize("old, new, words", [
    ("name: fixture_port\n", "name: fixture_port\ncolour: red\n", ["colour='red'", "a key of name, description"]),
    ("  speculative: {absent: \"the fixture has no speculative engine\"}\n", "",
     ["roles.speculative=None", "{absent: <why>} or {none: <why>}", "every role is either played or marked absent"]),
    ("  worker:", "  workers:", ["roles.workers=", "a role of validation, ownership"]),
    ("defines: [FXPORT_BUILD=1]", "defines: [\"-O3 x\"]", ["defines='-O3 x'", "NAME or NAME=VALUE"]),
    ("function: fx_master_layout}", "function: fx_master_layout, absent: x}", ["roles.layout", "not both"]),
    ("function: fx_worker_mask", "", ["roles.worker.function=None", "a non-empty string"]),
    ("  torch: true\n", "  torch: maybe\n", ["allocation.torch='maybe'", "true or false"]),
    ("  torch: true\n", "  torch: true\n  split_only: maybe\n", ["allocation.split_only='maybe'", "true or false"]),
    ("  torch: true\n", "  torch: true\n  none: nobody calls it\n", ["allocation=", "{none: <why>} (with unsplit: base at most)"]),
    ("function: check_split_config}", "function: check_split_config, none: x}", ["roles.validation", "not both"]),
    ("{file: core/framework/kv_cache/layerwise_split_layout.h, function: check_split_config}", "{none: \" \"}",
     ["roles.validation.none=' '", "a reason (text)"]),
    ("  torch: true\n", "", ["allocation.sources=", "only with allocation.torch: true"]),
    ("  glue: alloc_glue.cpp\n", "", ["allocation.glue=None", "required with allocation.torch: true"]),
    ("  torch: true\n", "  torch: true\n  shim: x\n", ["allocation.shim='x'", "a key of file, function, torch"]),
    ("  torch: true\n", "  torch: true\n  layout_defines: {diagonal: [X]}\n",
     ["allocation.layout_defines.diagonal=['X']", "a key of heads_major, tokens_major"]),
    ("  torch: true\n", "  torch: true\n  layout_defines: {heads_major: [\"-O2\"]}\n",
     ["allocation.layout_defines.heads_major='-O2'", "NAME or NAME=VALUE"]),
    ("  torch: true\n", "  torch: true\n  layout_defines: [USE_ILU]\n",
     ["allocation.layout_defines=['USE_ILU']", "a mapping of heads_major and/or tokens_major"]),
    ("  worker:", "  worker: {absent: first}\n  worker:",
     ["roles.worker given twice (lines 29 and 30 of", "each key once in its mapping"]),
    ("name: fixture_port\n", "name: fixture_port\nname: other\n", ["'name given twice (lines 2 and 3 of"]),
])
def test_a_manifest_mistake_names_its_key(tmp_path, old, new, words):
    with pytest.raises(UserError) as err:
        manifest.load(write_manifest(tmp_path, old, new))
    assert str(err.value).startswith("implementation.manifest="), err.value
    for word in words:
        assert word in str(err.value), (word, str(err.value))


@pytest.mark.parametrize("old, new, words", [
    ("function: fx_master_layout", "function: fx_master_layuot",
     ["roles.layout.function='fx_master_layuot'", "fx_master_layuot not found in", "layerwise_split_master.cpp"]),
    ("file: core/runtime/worker_layerwise_init.cpp", "file: core/runtime/worker.cpp",
     ["roles.worker.file='core/runtime/worker.cpp'", "is missing"]),
    ("  - core/runtime/worker_layerwise_init.cpp\n", "  - core/runtime/nope.cpp\n",
     ["sources='core/runtime/nope.cpp'", "files of"]),
    ("function: fx_allocate_kv_tensors", "function: fx_allocate_kv",
     ["allocation.function='fx_allocate_kv'", "fx_allocate_kv not found in"]),
    ("glue: alloc_glue.cpp", "glue: alloc_missing.cpp", ["allocation.glue=", "alloc_missing.cpp is missing"]),
    ("sources: [core/framework/kv_cache/kv_cache_tensors.cpp]", "sources: [core/framework/kv_cache/nope.cpp]",
     ["allocation.sources='core/framework/kv_cache/nope.cpp'", "is missing"]),
    ("function: fx_worker_mask", "function: push_back",  # the file calls it (mask.push_back(...);), defines it not
     ["roles.worker.function='push_back'", "push_back not found in"]),
    ("file: core/distributed_runtime/layerwise_split_engine_ext.cpp", "file: core/distributed_runtime/layerwise_split_engine_ext.h",
     ["roles.engine.function='fx_engine_layout'", "fx_engine_layout not found in"]),  # the header declares it only
])
def test_a_manifest_naming_what_the_tree_lacks_names_it(tmp_path, old, new, words):
    m = manifest.load(write_manifest(tmp_path, old, new))
    with pytest.raises(UserError) as err:
        manifest.check_tree(m, FIXTURE)
    for word in words:
        assert word in str(err.value), (word, str(err.value))


def test_a_role_is_a_definition_not_a_call_or_a_declaration():
    text = ("struct Fwd;\nclass Layout final : public Base {};\nint declared(int a);\nvoid user() { v.push_back(1); "
            "p->go(2); if (check(3)) {} }\nint Engine::calc(int a) const noexcept {\n  return a;\n}\n"
            "constexpr int kLimit = 4;\nvoid f() { limit = 5; }\n")
    assert [n for n in ("Fwd", "Layout", "declared", "push_back", "go", "check", "Engine::calc", "kLimit", "limit")
            if cut.defines(text, n)] == ["Layout", "Engine::calc", "kLimit"]


@pytest.mark.parametrize("text, words", [
    ("# pad\n" * 200_000, ["a readable regular file of at most 1048576 bytes", "it has 1200000 bytes"]),
    ("name: x\nroles: " + "[" * 5000 + "]" * 5000 + "\n", ["'YAML nested 5000 deep'", "YAML nested at most 64 deep"]),
    ("name: x\nroles:\n" + "".join("  " * i + f"k{i}:\n" for i in range(1, 400)), ["YAML nested at most 64 deep"]),
])
def test_a_huge_or_deep_manifest_is_one_error_naming_it(tmp_path, text, words):
    """Refused before the YAML is built: a file over 1 MiB unread (was: 106 s for 60 MB), nesting past 64 (was:
    RecursionError)."""
    path = tmp_path / "m.yaml"
    path.write_text(text)
    with pytest.raises(UserError) as err:
        manifest.load(path)
    assert str(err.value).startswith((f"implementation.manifest={path}=", f"implementation.manifest='{path}'")), err.value
    for word in words:
        assert word in str(err.value), (word, str(err.value))


def test_a_bad_manifest_is_one_error_line_and_exit_2(tmp_path):
    bad = write_manifest(tmp_path, "function: fx_estimate", "function: fx_estimat")
    proc = subprocess.run(
        [sys.executable, "-m", "harness.plan", "implementation=xllm_native", "model=qwen3_5_moe", "layerwise=s2",
         f"implementation.source_dir={FIXTURE}", f"implementation.manifest={bad}"],
        capture_output=True, text=True, cwd=ROOT, timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: implementation.manifest="), proc.stderr
    assert "roles.estimation.function='fx_estimat'" in lines[0]


def test_a_port_with_a_shipped_ports_file_names_but_not_its_functions_is_not_that_port(tmp_path):
    """The fixture has the seed's file names and no kv_cache_estimation.cpp, as p6_v2_1ac802 detects it, but
    not its functions: no shipped manifest is picked (was: p6_v2_1ac802), and the error says why each did not fit;
    no upstream-cut manifest applies to a tree holding a port's files."""
    tree = tmp_path / "port"
    shutil.copytree(FIXTURE, tree)
    with pytest.raises(UserError, match="a tree one shipped manifest fits") as err:
        manifest.for_tree(tree)
    text = str(err.value)
    assert "p6_v2_1ac802: its detect files are there, but core/framework/kv_cache/layerwise_split_layout.h does not " \
           "define build_layer_cache_owned (roles.ownership)" in text, text  # its validation is none: not looked for
    assert "so no upstream-cut manifest applies" in text
    with pytest.raises(UserError, match="a tree one shipped manifest fits"):
        manifest.for_tree(FIXTURE / "core")


def _shipped_with_the_fixture_port(tmp_path: Path, monkeypatch) -> None:
    """Shipped manifests: upstream's and the fixture port's, detected by two of its files."""
    shipped = tmp_path / "shipped"
    shipped.mkdir()
    shutil.copy(manifest.SHIPPED_DIR / "upstream_494f293b5.yaml", shipped)
    (shipped / "fixture_port.yaml").write_text(write_manifest(tmp_path).read_text() + "detect: {present: ["
                                               "core/runtime/worker_layerwise_init.cpp, core/framework/kv_cache/kv_cache_tensors.cpp]}\n")
    monkeypatch.setattr(manifest, "SHIPPED_DIR", shipped)


def test_a_fork_with_a_ports_files_overlaid_is_the_port_and_says_where(tmp_path, monkeypatch):
    """An upstream-shaped tree (the fixture tree) with the fixture port's core/ overlaid under xllm/, given at its
    root: the port's manifest at xllm/ (was: upstream's manifest, the port never compiled); the plain copy of the
    port is the port at its root, and the upstream-shaped tree alone upstream's."""
    _shipped_with_the_fixture_port(tmp_path, monkeypatch)
    fork = tmp_path / "fork"
    shutil.copytree(ROOT / "testcases/native/fixture_tree", fork)
    (fork / manifest.TREE_MANIFEST).unlink()
    assert manifest.for_tree(fork)[0].name == "upstream_494f293b5"
    shutil.copytree(FIXTURE / "core", fork / "xllm/core", dirs_exist_ok=True)
    m, why, root = manifest.for_tree(fork)
    assert (m.name, root) == ("fixture_port", fork / "xllm"), (m.name, root)
    assert "core/runtime/worker_layerwise_init.cpp, core/framework/kv_cache/kv_cache_tensors.cpp at xllm/" in why, why
    tree, resolved, _ = resolve_mod.resolve(str(fork))
    assert tree.port and tree.root == fork / "xllm" and resolved.name == "fixture_port"
    assert manifest.for_tree(FIXTURE)[1:] == (why.replace(" at xllm/", ""), FIXTURE)


def test_a_tree_carrying_its_own_manifest_uses_it_and_says_so(tmp_path):
    tree = tmp_path / "port"
    shutil.copytree(FIXTURE, tree)
    (tree / manifest.TREE_MANIFEST).write_text(write_manifest(tmp_path).read_text())
    m, why, root = manifest.for_tree(tree)
    assert m.name == "fixture_port" and why == f"the tree carries {manifest.TREE_MANIFEST}" and root == tree
    assert resolve_mod.resolve(str(tree))[1].path == (tree / manifest.TREE_MANIFEST).resolve()


def test_upstreams_manifest_on_a_tree_without_its_allocation_files_names_the_first_missing(tmp_path):
    """A planning-only copy of upstream's layout (the fixture tree without the manifest it carries): the
    shipped manifest fits by its files, and the allocation it compiles is missing, named before any build."""
    tree = tmp_path / "xllm"
    shutil.copytree(ROOT / "testcases/native/fixture_tree", tree)
    (tree / manifest.TREE_MANIFEST).unlink()
    with pytest.raises(UserError) as err:
        resolve_mod.resolve(str(tree))
    text = str(err.value)
    # the fixture tree has kv_cache.cpp (the allocation's refusals of the split), not the cache classes beside it
    assert "upstream_494f293b5.yaml: allocation.sources='xllm/core/framework/kv_cache/kv_cache_impl.cpp'" in text, text
    assert "kv_cache_impl.cpp is missing" in text


def test_every_shipped_manifest_passes_the_schema():
    names = {m.name for m in manifest.shipped()}
    assert {"upstream_494f293b5", "p6_v2_1ac802", "p6_v3_latest"} <= names


# ---- the fixture port's defects are found -----------------------------------------------------------------


def test_the_plan_comes_from_the_trees_functions(impl):
    plan = impl.plan(run(2))
    # fx_estimate: slot 2 * 1 head * 256 * 2 B = 1 KiB; each split rank holds 5 layers + 1 scratch per block
    assert plan.slot_size == 1024 and plan.n_blocks == (1 << 20) // (16 * 1024 * 6)
    assert plan.layer_owner == tuple((layer, i % 2) for i, layer in enumerate(FULL))
    assert "manifest fixture_port" in plan.notes[0]


def test_the_master_layout_that_never_splits_is_found_and_the_engine_layout_passes(impl):
    r = run(2)
    problems = published_layout_problems(impl.plan(r), r)
    assert problems and all(p.startswith("master layout (fx_master_layout)") for p in problems), problems
    assert "TP rank 1 holds full layers [3, 7, 11" in problems[1] and "spec says [7, 15, 23, 31, 39]" in problems[1]


def test_the_worker_mask_is_the_trees_and_its_owner_by_layer_id_is_found(impl):
    r = run(2)
    plan = impl.plan(r)
    groups = ownership.expected_split_groups(r)
    found = {}
    for rank in range(4):
        cache = impl.init_worker(plan, r, rank=rank, role="target", device="cpu", expected_digest=plan.digest)
        found[rank] = [layer for layer in FULL if cache.owns_layer_cache(layer)]
    # full layers are 3, 7, ...: all odd, so layer id % 2 gives every one to split rank 1
    assert found == {0: [], 1: FULL, 2: [], 3: FULL}
    assert ownership.expected_owned_full(r, groups, 1) == [7, 15, 23, 31, 39] != found[1]


def test_the_worker_holds_the_tensors_the_trees_allocation_made_in_this_process(impl):
    """``allocation.torch``: fx_allocate_kv_tensors runs here and hands its tensors over (DLPack): the planted
    head count (every KV head on every rank) is in their shapes; a rank's non-owned layers share one storage."""
    r = run(2)
    plan = impl.plan(r)
    owner = impl.init_worker(plan, r, rank=1, role="target", device="cpu", expected_digest=plan.digest)
    other = impl.init_worker(plan, r, rank=0, role="target", device="cpu", expected_digest=plan.digest)
    k = owner.layer(3).tensors["k"]
    assert tuple(k.shape) == (plan.n_blocks, 2, 16, 256) and k.dtype.is_floating_point  # spec: 1 head at TP 4
    assert {n: tuple(t.shape) for n, t in other.scratch.items()} == {"k": tuple(k.shape), "v": tuple(k.shape)}
    views = {other.layer(layer).tensors["k"].untyped_storage().data_ptr() for layer in FULL}
    assert views == {other.scratch["k"].untyped_storage().data_ptr()}
    assert owner.layer(0).tensors == {} and owner.layer(0).kind == "linear"  # the fixture has no linear state
    k.fill_(1.0)  # the storage is this process's to use
    assert float(k.sum()) == k.numel()


def test_a_tree_allocation_without_torch_hands_the_worker_no_tensor(tmp_path, cache):
    """The BI-V100 port's kind: an allocation function that only counts (no ``torch``): the worker holds the tree's
    mask and nothing of its own, and TC-01 judges that."""
    start = FIXTURE_MANIFEST.read_text().index("allocation:\n")
    end = FIXTURE_MANIFEST.read_text().index("roles:")
    path = write_manifest(tmp_path, FIXTURE_MANIFEST.read_text()[start:end],
                          "allocation: {file: core/framework/kv_cache/kv_cache_layerwise.cpp, "
                          "function: fx_allocated_layers}\n")
    os.environ[build_cache.ENV_CACHE] = str(cache)
    try:
        from implementations.xllm_native import XllmNativeImplementation

        counting = XllmNativeImplementation(source_dir=str(FIXTURE), manifest=str(path))
        r = run(2)
        plan = counting.plan(r)
        worker = counting.init_worker(plan, r, rank=1, role="target", device="cpu", expected_digest=plan.digest)
    finally:
        os.environ.pop(build_cache.ENV_CACHE, None)
    assert worker.all_tensors() == [] and worker.scratch == {}
    assert [layer for layer in FULL if worker.owns_layer_cache(layer)] == FULL


def test_tc01_judges_the_trees_tensors_and_finds_the_planted_head_count(cache):
    proc = tc(FIXTURE, "test_tc01_allocation.py", "test_tc01[qwen3_5_moe-s2-w4-xllm_native]", cache=cache,
              manifest=FIXTURE_MANIFEST)
    assert proc.returncode == 1, proc.stdout[-3000:]
    assert "rank 1 layer 3: owns 44564480 B, spec 22282240 B" in proc.stdout, proc.stdout[-3000:]
    assert ("rank 1 target layer 3 (full, owned): tensors {'k': ((170, 2, 128, 256), 'bfloat16'), 'v': ((170, 2, 128, "
            "256), 'bfloat16')}, spec {'k': ((170, 1, 128, 256)") in proc.stdout, proc.stdout[-3000:]


def test_a_rank_whose_compiled_allocation_crashes_fails_with_the_trees_last_log_lines(cache):
    """The allocation runs in the rank: a crash there kills the rank, and the case fails with the signal, the
    rank's Python stack and what the tree logged just before (the rank's native log); the next case runs."""
    proc = tc(FIXTURE, "test_tc01_allocation.py", "test_tc01[qwen3_5_moe-s2-w4-xllm_native]", cache=cache,
              manifest=FIXTURE_MANIFEST, extra=("cache.block_size=24",))
    out = proc.stdout[-20000:]
    assert proc.returncode == 1 and "killed by signal SIGSEGV" in out, out
    assert "its compiled code's last log lines:" in out and "tensor_lib.py" in out, out
    assert "I kv_cache_tensors.cpp:13] fx: allocating " in out, out
    assert "W kv_cache_tensors.cpp:14] fx: block size 24 crashes this fixture" in out, out


def test_the_missing_tp_rule_is_found(impl):
    r = run(3)
    assert expected_rejection(r).field == "layerwise.split_size"  # the spec refuses s=3 at TP 4
    impl.plan(r)  # the fixture's check_split_config does not


def test_a_case_needing_the_absent_role_fails_naming_it(impl):
    with pytest.raises(manifest.AbsentRoleError) as err:
        impl.plan(run(2, draft=M.QWEN3_5_MTP))
    assert "the tree implements no draft capacity: manifest role `speculative` is absent" in str(err.value)
    assert err.value.field == "implementation"


def test_a_refusal_of_the_trees_validation_names_its_field(impl):
    with pytest.raises(UserError) as err:
        impl.plan(run(2, model=replace(M.LLAMA3_8B)))
    assert err.value.field == "model.model_type"
    assert "layerwise_split_layout.h" in str(err.value)


# ---- build errors: a duplicate symbol, glue that does not compile -------------------------------------------


TINY_GLUE = '#include "protocol.h"\nnamespace lwsplit {\nstd::string dispatch(const Request&) { return "{}"; }\n}\n'


def small_manifest(tmp_path: Path, sources: list, glue: Path) -> Path:
    """The fixture's manifest compiling only ``sources`` and ``glue`` (a build of a few objects)."""
    text = FIXTURE_MANIFEST.read_text()
    start, end = text.index("sources:\n"), text.index("glue: glue.cpp")
    text = text[:start] + "sources:\n" + "".join(f"  - {s}\n" for s in sources) + text[end:]
    path = tmp_path / "small.yaml"
    path.write_text(text.replace("glue: glue.cpp", f"glue: {glue}")
                    .replace("glue: alloc_glue.cpp", f"glue: {FIXTURE / 'alloc_glue.cpp'}"))
    return path


def test_a_duplicate_symbol_is_one_error_naming_the_symbol_and_both_files(tmp_path, cache):
    glue = tmp_path / "glue.cpp"
    glue.write_text(TINY_GLUE)
    m = manifest.load(small_manifest(tmp_path, ["core/config/parallel_config_layerwise.cpp",
                                                "core/framework/config/parallel_config.cpp"], glue))
    tree = tree_files.port_tree(m, FIXTURE)
    with pytest.raises(UserError) as err:
        library.build(tree, root=cache)
    text = str(err.value)
    assert "duplicate symbol fLI::FLAGS_fx_split_size at link" in text, text
    assert str(FIXTURE / "core/config/parallel_config_layerwise.cpp") in text
    assert str(FIXTURE / "core/framework/config/parallel_config.cpp") in text
    key = keys.source_key(tree)  # the objects compiled whole stay, entries of their own; the library left nothing
    assert not list(cache.glob(f"{key}-*")) and not list(cache.glob(f".tmp-{key}-*"))


def test_glue_that_does_not_compile_names_the_role_and_the_first_error(tmp_path, cache):
    glue = tmp_path / "glue.cpp"
    glue.write_text((FIXTURE / "glue.cpp").read_text().replace("fxport::fx_estimate(", "fxport::fx_estimat("))
    m = manifest.load(small_manifest(tmp_path, ["core/framework/kv_cache/kv_cache_layerwise.cpp"], glue))
    with pytest.raises(UserError) as err:
        library.build(tree_files.port_tree(m, FIXTURE), root=cache)
    text = str(err.value)
    assert f"the glue {glue} (role estimation) does not compile: {glue}:" in text and "fx_estimat" in text, text


def test_every_objects_headers_and_the_bases_are_watched(tmp_path):
    """Each object's -MD rule counts, not only the first source's; the base tree's headers too: editing a
    header only the second source includes, or one of the base's, makes the entry stale (undoing it: current)."""
    tree, base = tmp_path / "port", tmp_path / "base"
    shutil.copytree(FIXTURE / "core", tree / "core")
    base.mkdir()
    (base / "base_extra.h").write_text("inline int lwsplit_base_extra() { return 1; }\n")
    (base / "base_extra.cpp").write_text('#include "base_extra.h"\nint lwsplit_base_call() { return lwsplit_base_extra(); }\n')
    glue = tmp_path / "glue.cpp"
    glue.write_text(TINY_GLUE)
    path = small_manifest(tmp_path, ["core/framework/kv_cache/kv_cache_layerwise.cpp",
                                     "core/framework/parallel_state/mapping_ilu.cpp"], glue)
    path.write_text(path.read_text() + f"base: {base}\nbase_include_dirs: [.]\nbase_sources: [base_extra.cpp]\n")
    t = tree_files.port_tree(manifest.load(path), tree)
    cache = tmp_path / "cache"
    built = library.build(t, root=cache)
    later, based = tree / "core/framework/parallel_state/mapping_ilu.h", base / "base_extra.h"
    assert {str(later), str(based)} <= set(built.manifest["deps"]), sorted(built.manifest["deps"])
    key = keys.source_key(t)
    for header in (later, based):
        text = header.read_text()
        header.write_text(text + "// edited\n")
        assert build_cache.find(cache, key) is None, header
        header.write_text(text)
        assert build_cache.find(cache, key) == built


def test_a_manifest_variant_compiling_the_same_sources_the_same_way_only_links(tmp_path, cache, monkeypatch):
    """Another manifest text is another library key, but each object's command and sources are the fixture's: the
    build runs no compile (``-c``) and adds no object entry to the cache, only its library: the fixture's bytes."""
    text = FIXTURE_MANIFEST.read_text()
    path = tmp_path / "variant.yaml"
    path.write_text(text.replace("glue: glue.cpp", f"glue: {FIXTURE / 'glue.cpp'}")
                    .replace("glue: alloc_glue.cpp", f"glue: {FIXTURE / 'alloc_glue.cpp'}") + "# a variant\n")
    fixture = library.build(tree_files.port_tree(manifest.load(FIXTURE_MANIFEST), FIXTURE), root=cache)
    before = {p.name for p in cache.iterdir()}
    variant_tree = tree_files.port_tree(manifest.load(path), FIXTURE)
    runs, run_bounded = [], cachefs.run_bounded
    monkeypatch.setattr(cachefs, "run_bounded", lambda cmd, **kw: runs.append(list(cmd)) or run_bounded(cmd, **kw))
    variant = library.build(variant_tree, root=cache)
    assert [c for c in runs if "-c" in c] == [], "the variant compiled its sources again"
    added = sorted({p.name for p in cache.iterdir()} - before)
    key = keys.source_key(variant_tree)
    assert [a for a in added if not a.startswith(key)] == [], f"the variant compiled objects anew: {added}"
    assert variant.library.parent.name in added and variant.manifest["objects"]["compiled"] == []
    assert variant.manifest["library_sha256"] == fixture.manifest["library_sha256"]


# ---- the real trees (their own CI step) -------------------------------------------------------------------

def tc(tree: Path, tc_file: str, *select: str, cache: Path, manifest: Optional[Path] = None,
       model: str = "qwen3_5_moe", extra: tuple = (), also: tuple = ()) -> subprocess.CompletedProcess:
    """Run a few cases of one TC on ``tree`` in a separate pytest (one tree's flags per process), its libraries
    built here first (a cold build inside the ranks would run into their time limit)."""
    tree_map = resolve_mod.resolve(str(tree), None, str(manifest) if manifest else None)[0]
    library.build(tree_map, root=cache)
    if tree_map.manifest is not None and tree_map.manifest.tensors is not None:
        library.build(tree_map, root=cache, tensors=True)
    env = {**os.environ, tree_files.ENV_SOURCE: str(tree), build_cache.ENV_CACHE: str(cache), "PYTHONPATH": str(ROOT)}
    env.pop("LW_ALLUREDIR", None)
    cmd = [sys.executable, "-m", "pytest", "-p", "no:randomly", "-n", "0", "-q",
           *(f"testcases/tc/{f}" for f in (tc_file, *also)),
           "--lw-override", "implementation=xllm_native", "--lw-override", f"model={model}", "-k", " or ".join(select)]
    if manifest is not None:
        cmd += ["--lw-override", f"implementation.manifest={manifest}"]
    cmd += [arg for override in extra for arg in ("--lw-override", override)]
    return subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env, timeout=600)


def plan_json(tree: Path, *overrides: str, cache: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, build_cache.ENV_CACHE: str(cache), "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "harness.plan", "implementation=xllm_native",
                           f"implementation.source_dir={tree}", *overrides],
                          capture_output=True, text=True, cwd=ROOT, env=env, timeout=600)


@pytest.mark.real_tree
@real_tree(PORTS["p6_v3_latest"])
def test_the_newest_snapshot_duplicate_flag_is_found(tmp_path):
    m = manifest.load(manifest.SHIPPED_DIR / "p6_v3_latest.yaml")
    both = replace(m, sources=("core/framework/config/parallel_config.cpp", *m.sources))
    with pytest.raises(UserError) as err:
        library.build(tree_files.port_tree(both, PORTS["p6_v3_latest"]), root=tmp_path)
    text = str(err.value)
    assert "duplicate symbol fLI::FLAGS_layerwise_split_size at link" in text, text
    assert "core/framework/config/parallel_config.cpp" in text and "core/config/parallel_config_layerwise.cpp" in text


@pytest.mark.real_tree
@real_tree(PORTS["p6_v3_latest"], UPSTREAM)
def test_the_newest_snapshot_allocates_nothing_and_tc01_says_so(cache):
    """Nothing in the snapshot's start-up path allocates (its manifest's ``allocation: {none: ...}``): TC-01's
    workers refuse naming that; its workers' masks and master layout are found role by role
    (``test_departures``). The engine around it (upstream 494f293b5, its base) computes the estimation's options."""
    library.build(resolve_mod.resolve(str(UPSTREAM), None, None)[0], root=cache)
    proc = tc(PORTS["p6_v3_latest"], "test_tc01_allocation.py", "test_tc01[qwen3_5_moe-s2-w4-xllm_native]",
              cache=cache, extra=(f"implementation.base_source_dir={UPSTREAM}",))
    assert proc.returncode == 1, proc.stdout[-3000:]
    assert "the engine's start-up path calls no KV-cache allocation: manifest role `allocation` is none" in \
        proc.stdout, proc.stdout[-3000:]


@pytest.mark.real_tree
@real_tree(PORTS["p6_v2_1ac802"])
def test_the_rewrite_snapshot_has_no_estimation_and_a_case_says_so(cache):
    proc = plan_json(PORTS["p6_v2_1ac802"], "model=qwen3_5_moe", "layerwise=s2", cache=cache)
    assert proc.returncode == 2, proc.stderr
    assert "the tree implements no block count and figures: manifest role `estimation` is absent" in proc.stderr


@pytest.mark.real_tree
@real_tree(UPSTREAM)
def test_upstream_is_built_by_its_manifest_and_judged_as_before(cache):
    """upstream 494f293b5 given alone: its shipped manifest, its predictions (xfail), nothing unexplained."""
    proc = tc(UPSTREAM, "test_tc01_allocation.py", "test_tc01[qwen3_5_moe-s2-w4-xllm_native]",
              "test_tc01[qwen3_5_moe-off-w4-xllm_native]", cache=cache)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "1 passed" in proc.stdout and "1 xfailed" in proc.stdout, proc.stdout[-1000:]
    assert "upstream refuses a config the spec accepts: layerwise split does not support qwen3_5_moe" in proc.stdout


@pytest.mark.real_tree
@real_tree(UPSTREAM)
def test_upstreams_predictions_hold_for_its_own_files_only(tmp_path, monkeypatch):
    """The recorded sha256 of every file upstream's build compiles (harness/baselines/upstream_sources.json) are
    upstream's tree's today; a copy of those files is upstream's too, and with one line changed it is not."""
    from harness.baselines import upstream_sources
    from harness.suites.expectations import predicted_name

    def label(source_dir, env=""):  # the environment's tree is part of the memo: a new one reads anew
        monkeypatch.setenv(tree_files.ENV_SOURCE, env)
        return predicted_name("xllm_native", {"source_dir": source_dir})

    assert label(str(UPSTREAM), env="") == "xllm_native"
    copy = tmp_path / "upstream"
    for rel in sorted({r for rels in upstream_sources.compiled_files(tree_facts(str(UPSTREAM))).values() for r in rels}):
        (copy / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(UPSTREAM / rel, copy / rel)
    assert label(str(copy), env="") == "xllm_native"
    master = copy / "xllm/core/distributed_runtime/master.cpp"
    master.write_text(master.read_text() + "// a fork's line\n")
    assert label(str(copy), env="changed") == "xllm_native[upstream_494f293b5]"


@pytest.mark.real_tree
@real_tree(UPSTREAM, PORTS["p6_v3_latest"])
def test_an_xllm_fork_with_the_newest_snapshot_overlaid_is_the_port(tmp_path):
    """upstream's planning files with the p6_v3_latest snapshot's core/ overlaid under xllm/ (its files replace
    upstream's where both have one), given at the fork's root: the port at xllm/, not upstream's manifest."""
    fork = tmp_path / "fork"
    for rel in manifest.load(manifest.SHIPPED_DIR / "upstream_494f293b5.yaml").detect_present:
        (fork / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(UPSTREAM / rel, fork / rel)
    shutil.copytree(PORTS["p6_v3_latest"] / "core", fork / "xllm/core", dirs_exist_ok=True)
    m, why, root = manifest.for_tree(fork)
    assert (m.name, root) == ("p6_v3_latest", fork / "xllm"), (m.name, why)
    assert resolve_mod.resolve(str(fork))[0].root == fork / "xllm"


@pytest.mark.real_tree
@real_tree(UPSTREAM)
def test_upstreams_own_allocation_fills_the_ranks_and_tc01_tc05_pass_on_its_tensors(cache):
    """The workers hold what upstream's allocate_kv_caches made in each rank (its KVCacheShape, its scratch
    views); TC-01 and TC-05 judge those tensors: the split and unsplit cases of a model upstream splits."""
    for n, tc_file, splits in ((1, "test_tc01_allocation.py", ("off", "s2", "s4")),
                               (5, "test_tc05_shard_application.py", ("s2", "s4"))):  # TC-05 cases are split ones
        select = [f"test_tc0{n}[deepseek_v32-{s}-w4-xllm_native]" for s in splits]
        proc = tc(UPSTREAM, tc_file, *select, cache=cache, model="deepseek_v32")
        assert proc.returncode == 0 and f"{len(splits)} passed" in proc.stdout, proc.stdout[-3000:]


@pytest.mark.real_tree
@real_tree(UPSTREAM)
def test_an_upstream_allocation_that_ignores_the_mask_is_found_by_tc01(tmp_path, cache):
    """A porting bug in the compiled allocation itself: allocate_kv_caches gives every layer its own cache
    (the non-owner branch never taken). Only the tensors show it: the plan is upstream's own."""
    tree = tmp_path / "upstream"
    shutil.copytree(UPSTREAM, tree)
    source = tree / "xllm/core/framework/kv_cache/kv_cache.cpp"
    text = source.read_text()
    owner_branch = "if (!layer_cache_owned[static_cast<size_t>(layer_idx)]) {"
    assert text.count(owner_branch) == 1
    source.write_text(text.replace(owner_branch, "if (false && !layer_cache_owned[static_cast<size_t>(layer_idx)]) {"))
    proc = tc(tree, "test_tc01_allocation.py", "test_tc01[deepseek_v32-s2-w4-xllm_native]", cache=cache,
              model="deepseek_v32")
    assert proc.returncode == 1, proc.stdout[-3000:]
    assert "rank 0 (split rank 0) owns full layers [0, 1, 2, 3, 4, 5" in proc.stdout, proc.stdout[-3000:]
    assert "rank 0: scratch holds 0 B, spec 4145152 B" in proc.stdout, proc.stdout[-3000:]


@pytest.mark.real_tree
@real_tree(UPSTREAM)
def test_record_native_takes_upstreams_tree_and_refuses_a_copy_with_one_line_changed(tmp_path):
    """What upstream's compiled code answers is recorded from upstream's files only, identified by content
    (the sha256 digests harness/baselines/upstream_sources.json records), wherever the tree sits."""
    from contract.errors import ConfigError
    from harness.baselines.record_native import check_upstream

    check_upstream(str(UPSTREAM))  # upstream's own tree passes
    tree = tmp_path / "xllm-fork"
    shutil.copytree(UPSTREAM / "xllm", tree / "xllm")
    check_upstream(str(tree))  # so does a copy of it elsewhere
    master = tree / "xllm/core/distributed_runtime/master.cpp"
    master.write_text(master.read_text() + "\n// a fork\n")
    with pytest.raises(ConfigError, match="master.cpp is not upstream 494f293b5's"):
        check_upstream(str(tree))


@pytest.mark.real_tree
@real_tree(*PORTS.values())
@pytest.mark.parametrize("name", sorted(PORTS))
def test_each_snapshots_own_tests_run_beside_the_spec(name):
    """The manifest's ``tests``: the port's own GoogleTest file, built with the manifest's sources (12 of 12)."""

    result = own_tests.run(str(PORTS[name]))
    assert (result.total, result.passed, result.failed) == (12, 12, ()), result


# ---- the tensor library: its errors ------------------------------------------------------------------------


def test_a_tensor_the_library_cannot_hand_over_is_an_error_of_the_tree_and_the_rank_goes_on(impl):
    """fx_allocate_kv_tensors on the meta device: DLPack cannot carry such a tensor (c10 throws inside
    lwsplit_take_tensor); the throw stops at the library's C boundary and comes back as the tree's failure,
    in this process, and the next allocation works."""
    from contract.errors import ImplementationFailure

    r = run(2)
    plan = impl.plan(r)
    with pytest.raises(ImplementationFailure) as err:
        impl.init_worker(plan, r, rank=1, role="target", device="meta", expected_digest=plan.digest)
    assert "the compiled allocate's tensor 0 cannot be handed to the rank (DLPack): " in str(err.value), err.value
    again = impl.init_worker(plan, r, rank=1, role="target", device="cpu", expected_digest=plan.digest)
    assert again.layer(3).tensors["k"].device.type == "cpu"


ALIASED_BLOCK_SIZE = 48
"""The block size on which the fixture carves its owned layers out of one pool (README: planted)."""


def _owned_bytes_seen(impl, block_size: int, rank: int = 1):
    """(bytes measured by address, bytes of the distinct storage objects, TC-05's mark problems, TC-05's overlap
    problems) of one worker, and its k tensor."""
    from harness.suites import tc05
    from harness.suites.measure import distinct_storage_bytes

    r = M.run_spec(QWEN, split=2, world=4, budget_bytes=1 << 20, cache=CacheSpec(block_size=block_size))
    plan = impl.plan(r)
    worker = impl.init_worker(plan, r, rank=rank, role="target", device="cpu", expected_digest=plan.digest)
    tensors = worker.all_tensors()
    objects = sum(s.nbytes() for s in {t.untyped_storage().data_ptr(): t.untyped_storage() for t in tensors}.values())
    return (distinct_storage_bytes(tensors), objects, tc05.marked_blocks(rank, worker)[0],
            tc05.overlaps(rank, tc05.regions(worker)), worker.layer(3).tensors["k"])


def test_the_fixtures_own_layers_hold_distinct_memory_by_address_and_by_mark(impl):
    measured, objects, marks, overlaps, _ = _owned_bytes_seen(impl, 16)
    assert measured == objects and marks == [] and overlaps == []


def test_owned_layers_carved_out_of_one_pool_are_measured_by_address_and_read_each_others_marks(impl):
    """The planted aliasing (block size 48): each layer's storage object says a whole layer, the addresses say
    two pools; the marks show which layer's block landed where."""
    measured, objects, marks, overlaps, k = _owned_bytes_seen(impl, ALIASED_BLOCK_SIZE)
    n, block = k.shape[0], k[0].numel() * k.element_size()
    stride = (n + 2) // 3
    assert objects == 10 * 2 * n * block, objects  # rank 1 owns all ten full layers (the planted mask): k and v
    assert measured == 2 * (9 * stride + n) * block, (measured, n, block)  # two pools: nine strides and a layer
    assert marks and marks[0].startswith(f"rank 1 layer 3 tensor k: block {stride} holds the mark of layer 7 "
                                         "tensor #0 block 0"), marks
    assert any("layer 3/k and layer 7/k overlap in memory" in o for o in overlaps), overlaps


def test_tc01_and_tc05_find_owned_layers_that_share_memory(cache):
    """End to end: on the aliased allocation TC-01 reports the bytes it measured by address, TC-05 the marks
    another layer overwrote and the overlapping extents (on top of the fixture's other planted defects)."""
    proc = tc(FIXTURE, "test_tc01_allocation.py", "test_tc01[qwen3_5_moe-s2-w4-xllm_native]", "test_tc05[qwen3_5_moe-s2-w4-xllm_native]",
              cache=cache, manifest=FIXTURE_MANIFEST, extra=(f"cache.block_size={ALIASED_BLOCK_SIZE}",),
              also=("test_tc05_shard_application.py",))
    out = proc.stdout[-30000:]
    assert proc.returncode == 1 and "2 failed" in out, out
    allocated = re.search(r"rank 1: allocated (\d+) B, spec sum of its owned layers", out)
    owned = re.search(r"rank 1 layer 3: owns (\d+) B", out)
    assert allocated and owned and int(allocated.group(1)) < 10 * int(owned.group(1)), out  # less than its layers
    assert "rank 1 layer 3 tensor k: block " in out and " holds the mark of layer 7 tensor #0 block 0" in out, out
    assert "layer 3/k and layer 7/k overlap in memory" in out, out


def test_a_check_inside_the_trees_allocation_is_a_refusal_and_the_rank_goes_on(impl):
    """fx_allocate_kv_tensors CHECKs n_blocks > 0: the CHECK comes back as the field it guards, in this process,
    and the next allocation works."""
    r = run(2)
    plan = impl.plan(r)
    empty = replace(plan, n_blocks=0)
    with pytest.raises(UserError) as err:
        impl.init_worker(empty, r, rank=1, role="target", device="cpu", expected_digest=empty.digest)
    assert err.value.field == "hardware.reserved_bytes_per_card", str(err.value)
    assert "kv_cache_tensors.cpp" in str(err.value) and "CHECK_GT(n_blocks, 0)" in str(err.value)
    again = impl.init_worker(plan, r, rank=1, role="target", device="cpu", expected_digest=plan.digest)
    assert again.layer(3).tensors["k"].shape[0] == plan.n_blocks


def test_allocation_glue_that_does_not_compile_names_it_and_the_first_error(tmp_path):
    """``unity: true``: the broken glue is the one file compiled, so the test never parses torch's headers for the
    fixture's allocation source first (about 9 s of CPU); the fixture's own build compiles each source apart."""
    glue = tmp_path / "alloc_broken.cpp"
    glue.write_text('#error "the allocation glue is broken"\n')
    path = write_manifest(tmp_path, "glue: alloc_glue.cpp", f"glue: {glue}\n  unity: true")
    tree = tree_files.port_tree(manifest.load(path), FIXTURE)
    with pytest.raises(UserError) as err:
        library.build(tree, root=tmp_path / "cache", tensors=True)
    text = str(err.value)
    assert f"the allocation glue {glue} does not compile" in text and "the allocation glue is broken" in text, text


def test_prepare_builds_both_libraries_before_any_case(cache, monkeypatch):
    """What the pytest controller runs at start-up (``prepare_implementation``): afterwards a rank finds both
    libraries in the cache and compiles nothing within its case's time limit."""
    from harness.config.build import prepare_implementation

    monkeypatch.setenv(build_cache.ENV_CACHE, str(cache))
    prepare_implementation({"_target_": "implementations.xllm_native.XllmNativeImplementation",
                            "source_dir": str(FIXTURE), "manifest": str(FIXTURE_MANIFEST)})
    tree = resolve_mod.resolve(str(FIXTURE), None, str(FIXTURE_MANIFEST))[0]
    entries = sorted(cache.iterdir())
    planning, tensors = library.build(tree).library.parent, library.build(tree, tensors=True).library.parent
    assert planning in entries, "a rank compiled its planning library"
    assert tensors in entries, "a rank compiled its tensor library"
    keys = tuple(p.name.split("-")[0] for p in (planning, tensors))
    ours = keys + tuple(f".tmp-{k}" for k in keys)  # other xdist workers build other trees in the same cache meanwhile
    assert [p for p in sorted(cache.iterdir()) if p.name.startswith(ours)] == \
        [p for p in entries if p.name.startswith(ours)], "a rank left a new cache entry or build folder"


def test_a_layout_the_manifest_builds_no_allocation_for_is_one_error_naming_hardware_kv_layout(tmp_path):
    m = manifest.load(write_manifest(tmp_path, "  torch: true\n",
                                     "  torch: true\n  layout_defines: {heads_major: [FX_HEADS=1]}\n"))
    tree = tree_files.port_tree(m, FIXTURE)
    assert m.tensors.defines_for("heads_major")[-1] == "FX_HEADS=1"
    with pytest.raises(UserError) as err:
        library.build(tree, root=tmp_path / "cache", tensors=True, kv_layout="tokens_major")
    assert err.value.field == "hardware.kv_layout" and "one of heads_major" in str(err.value), str(err.value)
    heads = commands.tensor_commands(tree, tmp_path, tmp_path / "l.so", "heads_major")[0]
    assert "-DFX_HEADS=1" in heads and "-DFX_HEADS=1" not in commands.tensor_commands(
        tree_files.port_tree(manifest.load(FIXTURE_MANIFEST), FIXTURE), tmp_path, tmp_path / "l.so", "heads_major")[0]
    assert keys.tensor_key(tree, "heads_major") != keys.tensor_key(tree_files.port_tree(manifest.load(FIXTURE_MANIFEST),
                                                                                         FIXTURE), "heads_major")


def test_a_torch_on_the_old_cxx_abi_links_glog_through_the_bridge(monkeypatch, tmp_path):
    """On torch's pre-C++11 ABI the tensor library adds glog's bridge: the twin of glog's one ABI-tagged symbol
    on torch's ABI and its caller on glog's (CI runs the build itself on torch 2.1, whose ABI is the old one)."""
    tree = tree_files.port_tree(manifest.load(FIXTURE_MANIFEST), FIXTURE)
    for abi, bridged in ((0, True), (1, False)):
        monkeypatch.setattr(commands, "torch_build", lambda abi=abi: {"version": "x", "abi": abi, "include": [],
                                                                   "lib": "", "std": "-std=c++20"})
        cmds = commands.tensor_commands(tree, tmp_path, tmp_path / "lib.so")
        sources = {c[c.index("-c") + 1]: c for c in cmds if "-c" in c}
        old, new = str(commands.CPP_DIR / "glog_old_abi.cpp"), str(commands.CPP_DIR / "glog_cxx11_bridge.cpp")
        assert (old in sources and new in sources) == bridged
        if bridged:
            assert "-D_GLIBCXX_USE_CXX11_ABI=0" in sources[old] and "-D_GLIBCXX_USE_CXX11_ABI=1" in sources[new]
            assert all(o in cmds[-1] for o in (sources[old][-1], sources[new][-1]))  # both linked


def test_a_torch_on_the_old_cxx_abi_is_one_error_naming_torch_and_glog(monkeypatch):
    """PyPI's torch 2.1 is built with _GLIBCXX_USE_CXX11_ABI=0, Debian's glog with the C++11 ABI: where a tree
    reaches a glog symbol the bridge does not cover, the tensor library cannot link it. The error says so
    instead of quoting a linker log."""
    monkeypatch.setattr(commands, "torch_build", lambda: {"version": "2.1.0", "abi": 0, "include": [], "lib": "",
                                                       "std": "-std=c++20"})
    tree = tree_files.port_tree(manifest.load(FIXTURE_MANIFEST), FIXTURE)
    log = ("k.o: in function `google::MakeCheckOpString<long, long>': undefined reference to "
           "`google::base::CheckOpMessageBuilder::NewString()'\ncollect2: error: ld returned 1 exit status\n")
    err = diagnose.tensor_compile_error(tree, log)
    assert err.field == "torch" and "a torch built with the C++11 ABI, as glog is" in str(err)
    assert "CheckOpMessageBuilder::NewString()" in str(err)


@pytest.mark.parametrize("which", ["port", "upstream-cut"])
def test_a_compile_that_fails_on_glog_says_to_install_it_and_another_failure_does_not(which):
    """A missing glog header (or a link without gflags) names the two packages to install, for a port's build and
    an upstream-cut build alike; any other compile error carries no such hint."""
    tree = (tree_files.port_tree(manifest.load(FIXTURE_MANIFEST), FIXTURE) if which == "port"
            else tree_files.tree_map(str(ROOT / "testcases/native/fixture_tree")))
    missing = "x.cpp:1:10: fatal error: glog/logging.h: No such file or directory\n"
    other = "x.cpp:3:1: error: expected ';' before '}' token\n"
    hint = "install glog and gflags (Debian: libgoogle-glog-dev libgflags-dev)"
    assert hint in str(diagnose.compile_error(tree, missing)), str(diagnose.compile_error(tree, missing))
    assert hint not in str(diagnose.compile_error(tree, other)), str(diagnose.compile_error(tree, other))
