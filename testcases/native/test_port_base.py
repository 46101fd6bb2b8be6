"""The engine around a port: a manifest naming another manifest as its ``base``.

Every role the port's manifest leaves out (or marks ``{base: <why>}``) is the base's compiled code, built as
the base's manifest builds it, in a library of its own; ``allocation.unsplit: base`` gives the worker the
base's allocation while the split is off. In CI the fixture port is judged inside the fixture tree (an
upstream-cut tree whose speculative engine has a formula of its own); the ``real_tree`` tests judge the
BI-V100 port snapshot inside upstream 494f293b5, as its shipped manifest says.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from contract.errors import UserError
from contract.specs import CacheSpec
from implementations.xllm_native import build, manifest
from testcases.native.test_ports import FIXTURE, FIXTURE_MANIFEST, PORTS, QWEN, UPSTREAM, real_tree, tc, write_manifest
from testcases.unit import _models as M

pytestmark = pytest.mark.slow  # builds C++: scheduled first

FIXTURE_TREE = Path(__file__).resolve().parent / "fixture_tree"
SPECULATIVE_ABSENT = '  speculative: {absent: "the fixture has no speculative engine"}\n'
BLOCK_BYTES = 16 * 1024
"""The fixture port's bytes per block of one full layer (block 16 x slot 1 KiB at TP 4)."""


def based(tmp_path: Path, *, base_dir: object = FIXTURE_TREE, extra: str = "", old: str = SPECULATIVE_ABSENT,
          new: str = "") -> Path:
    """The fixture port's manifest with the fixture tree's manifest as its base (speculative left to it)."""
    path = write_manifest(tmp_path, old, new)
    text = path.read_text() + f"base: {FIXTURE_TREE / 'lwsplit-manifest.yaml'}\n"
    if base_dir is not None:
        text += f"base_source_dir: {base_dir}\n"
    path.write_text(text + extra)
    return path


def implementation(path: Path, cache: Path, **kw):
    os.environ[build.ENV_CACHE] = str(cache)
    try:
        from implementations.xllm_native import XllmNativeImplementation

        return XllmNativeImplementation(source_dir=str(FIXTURE), manifest=str(path), **kw)
    finally:
        os.environ.pop(build.ENV_CACHE, None)


def run(split: int, **kw):
    return M.run_spec(QWEN, split=split, world=4, budget_bytes=2 << 20, cache=CacheSpec(block_size=16), **kw)


# ---- the manifest ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("old, new, extra, words", [
    ("", "", "allocation_x: 1\n", ["allocation_x=1", "a key of"]),
    (SPECULATIVE_ABSENT, '  speculative: {base: ""}\n', "", ["roles.speculative.base=''", "a reason (text)"]),
    (SPECULATIVE_ABSENT, '  speculative: {base: x, file: y}\n', "", ["roles.speculative", "either base or file"]),
    ("", "", "base_sources: [a.cpp]\n", ["base_sources=['a.cpp']", "only with a base tree folder"]),
    ("  torch: true\n", "  torch: true\n  unsplit: engine\n", "", ["allocation.unsplit='engine'", "port, or base"]),
])
def test_a_base_manifest_mistake_names_its_key(tmp_path, old, new, extra, words):
    with pytest.raises(UserError) as err:
        manifest.load(based(tmp_path, old=old or SPECULATIVE_ABSENT, new=new if old else "", extra=extra))
    for word in words:
        assert word in str(err.value), (word, str(err.value))


@pytest.mark.parametrize("text, words", [
    ('  speculative: {base: "x"}\n', ["roles.speculative.base='x'", "a manifest whose base names a manifest"]),
    ("", ["allocation.unsplit='base'", "port, or base with a base manifest"]),
])
def test_base_roles_need_a_base_manifest(tmp_path, text, words):
    path = write_manifest(tmp_path, SPECULATIVE_ABSENT, text) if text else \
        write_manifest(tmp_path, "  torch: true\n", "  torch: true\n  unsplit: base\n")
    with pytest.raises(UserError) as err:
        manifest.load(path)
    for word in words:
        assert word in str(err.value), (word, str(err.value))


def test_an_unknown_base_names_the_shipped_manifests(tmp_path):
    path = write_manifest(tmp_path)
    path.write_text(path.read_text() + "base: upstream_000\n")
    with pytest.raises(UserError) as err:
        manifest.load(path)
    assert "base='upstream_000'" in str(err.value) and "upstream_494f293b5" in str(err.value), err.value


def test_the_shipped_port_manifests_leave_the_speculative_engine_and_the_unsplit_allocation_to_upstream():
    for name in ("p6_v2_1ac802", "p6_v3_latest"):
        m = manifest.load(manifest.SHIPPED_DIR / f"{name}.yaml")
        assert m.base_manifest is not None and m.base_manifest.name == "upstream_494f293b5"
        assert m.from_base("speculative") and not m.present("speculative") and m.unsplit_allocation == "base"
        assert [r for r in manifest.ROLES if m.from_base(r)] == ["speculative"]  # the port plays the rest


# ---- the roles the port leaves out are the base's compiled code -------------------------------------------


@pytest.mark.parametrize("split, owned_layers", [(1, 10), (2, 10 + 1)])
def test_the_draft_capacity_is_the_bases_speculative_engine_on_the_ports_capacities(tmp_path, cache, split,
                                                                                    owned_layers):
    """The fixture port has no speculative engine; its base's calculate_kv_cache (the fixture tree's formula:
    budget / (block x (the target's slot x full layers a split rank holds, its scratch included) + block x draft
    layers x the target's slot)) gives the block count, on the port's own capacities. At s 2 the base's
    split count uses the base's owner rule (layer id % s: split rank 1 holds all 10 odd full layers). Without
    the base's draft term the count would be the port's own (12 at s 1, 2 MiB)."""
    impl = implementation(based(tmp_path), cache)
    assert impl.plays("speculative") == "base" and impl.plays("estimation") == "port"
    plan = impl.plan(run(split, draft=M.QWEN3_5_MTP))
    assert plan.n_blocks == (2 << 20) // (BLOCK_BYTES * owned_layers + BLOCK_BYTES), plan.n_blocks
    assert impl.plan(run(1)).n_blocks == (2 << 20) // (BLOCK_BYTES * 10) == 12
    assert plan.draft is not None and plan.draft.layer_bytes_per_block == (BLOCK_BYTES,)


def test_a_base_whose_tree_is_not_given_leaves_its_roles_absent_naming_how_to_give_it(tmp_path, cache, monkeypatch):
    monkeypatch.delenv("LWSPLIT_XLLM_BASE_SRC", raising=False)
    impl = implementation(based(tmp_path, base_dir=None), cache)
    assert impl.base is None
    with pytest.raises(manifest.AbsentRoleError) as err:
        impl.plan(run(2, draft=M.QWEN3_5_MTP))
    text = str(err.value)
    assert "manifest role `speculative`" in text and "left to the base fixture_tree" in text, text
    assert "implementation.base_source_dir=<path> or $LWSPLIT_XLLM_BASE_SRC" in text, text
    impl.plan(run(2))  # a case without a draft needs no base


def test_a_base_that_does_not_compile_is_named_as_the_base_not_the_port(tmp_path, cache):
    tree = tmp_path / "base"
    shutil.copytree(FIXTURE_TREE, tree)
    source = tree / "xllm/core/framework/kv_cache/kv_cache_estimation.cpp"
    source.write_text(source.read_text() + "\nint broken = ;\n")
    with pytest.raises(UserError) as err:
        implementation(based(tmp_path, base_dir=tree), cache)
    text = str(err.value)
    assert "base=" in text and f"the base fixture_tree (tree {tree}) failed, not the port" in text, text
    assert "kv_cache_estimation.cpp" in text and "does not compile" in text, text


def test_the_unsplit_allocation_left_to_a_base_without_one_is_absent_and_the_split_one_is_the_ports(tmp_path, cache):
    """``allocation.unsplit: base``: with the split off the worker's allocation is the base's; the fixture tree
    compiles none, so the worker role is absent there, naming why; with the split on, the port's own runs."""
    path = based(tmp_path, old="  torch: true\n", new="  torch: true\n  unsplit: base\n")
    impl = implementation(path, cache)
    off = run(1)
    plan = impl.plan(off)
    with pytest.raises(manifest.AbsentRoleError) as err:
        impl.init_worker(plan, off, rank=0, role="target", device="cpu", expected_digest=plan.digest)
    assert "the allocation with the split off is left to the base fixture_tree, whose manifest compiles no " \
           "allocation" in str(err.value), err.value
    on = run(2)
    plan = impl.plan(on)
    worker = impl.init_worker(plan, on, rank=1, role="target", device="cpu", expected_digest=plan.digest)
    assert worker.layer(3).tensors  # the port's fx_allocate_kv_tensors


# ---- the BI-V100 port inside upstream 494f293b5 (their own CI step) ------------------------------------------


@pytest.mark.real_tree
@real_tree(PORTS["p6_v3_latest"], UPSTREAM)
def test_the_newest_snapshot_inside_upstream_plans_a_draft_and_allocates_with_the_split_off(cache, monkeypatch):
    """The port has no speculative engine: upstream's runs around it, on the port's own capacities; with the
    flag off the worker holds upstream's ordinary allocation (was: the port's counting function, 0 B)."""
    monkeypatch.setenv("LWSPLIT_XLLM_BASE_SRC", str(UPSTREAM))
    proc = tc(PORTS["p6_v3_latest"], "test_tc06_fallback.py", "test_tc06[qwen3_5_moe-off-w4-xllm_native]",
              cache=cache)
    assert "allocated 0 B" not in proc.stdout, proc.stdout[-3000:]
    os.environ[build.ENV_CACHE] = str(cache)
    try:
        from implementations.xllm_native import XllmNativeImplementation

        impl = XllmNativeImplementation(source_dir=str(PORTS["p6_v3_latest"]))
    finally:
        os.environ.pop(build.ENV_CACHE, None)
    assert impl.plays("speculative") == "base" and impl.base.manifest.name == "upstream_494f293b5"
    r = M.run_spec(M.QWEN3_5_MOE, split=1, world=4, budget_bytes=1 << 30, draft=M.QWEN3_5_MTP)
    with_draft, alone = impl.plan(r), impl.plan(M.run_spec(M.QWEN3_5_MOE, split=1, world=4, budget_bytes=1 << 30))
    assert 0 < with_draft.n_blocks < alone.n_blocks and with_draft.draft is not None
