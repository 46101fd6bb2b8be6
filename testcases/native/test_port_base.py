"""The engine around a port: a manifest naming another manifest as its ``base``.

Every role the port's manifest leaves out (or marks ``{base: <why>}``) is the base's compiled code, built as
the base's manifest builds it, in a library of its own; ``allocation.unsplit: base`` gives the worker the
base's allocation while the split is off. In CI the fixture port is judged inside the fixture tree (an
upstream-cut tree whose speculative engine has a formula of its own); the ``real_tree`` tests judge the
BI-V100 port snapshot inside upstream 494f293b5, as its shipped manifest says.
"""

from __future__ import annotations

import copy
import os
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from contract.errors import UserError
from contract.plan_types import TREE_CARDS_NOTE, TREE_GROUPS_NOTE
from contract.specs import CacheSpec, ModelSpec
from implementations.xllm_native import manifest
from implementations.xllm_native.build import cache as build_cache
from implementations.xllm_native.tree import resolve as resolve_mod
from testcases.native.test_allocation_checks import PLANTED_DEFINES
from testcases.native.test_ports import FIXTURE, QWEN, tc, write_manifest
from testcases.real_trees import PORTS, UPSTREAM, real_tree
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


@pytest.fixture(scope="module")
def shared(tmp_path_factory) -> Path:
    """One based manifest (speculative and the unsplit allocation left to the fixture tree), its tree given by
    ``base_source_dir=`` per test: the port is built once for every test that uses it."""
    folder = tmp_path_factory.mktemp("based")
    path = based(folder, base_dir=None)
    path.write_text(path.read_text().replace("  torch: true\n", "  torch: true\n  unsplit: base\n"))
    return path


def implementation(path: Path, cache: Path, **kw):
    os.environ[build_cache.ENV_CACHE] = str(cache)
    try:
        from implementations.xllm_native import XllmNativeImplementation

        return XllmNativeImplementation(source_dir=str(FIXTURE), manifest=str(path), **kw)
    finally:
        os.environ.pop(build_cache.ENV_CACHE, None)


def run(split: int, model: ModelSpec = QWEN, **kw):
    return M.run_spec(model, split=split, world=4, budget_bytes=2 << 20, cache=CacheSpec(block_size=16), **kw)


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
        # the port plays the rest; the worker's start-up checks, its allocation's refusals of the split and the engine's
        # option values are upstream's compiled cuts (the default with a base: the port has no engine computing them)
        assert [r for r in manifest.ROLES if m.from_base(r)] == ["speculative", "worker_checks", "engine_options",
                                                                  "allocation_checks"]


def test_the_base_tree_is_the_manifests_then_the_option_then_the_environment(tmp_path, monkeypatch):

    monkeypatch.setenv(resolve_mod.ENV_BASE_SOURCE, str(tmp_path))
    named = manifest.load(based(tmp_path, base_dir="../fixture_tree_elsewhere"))
    with pytest.raises(UserError, match="base_source_dir='.*fixture_tree_elsewhere'"):
        resolve_mod.base_tree_dir(named, str(FIXTURE))
    plain = manifest.load(based(tmp_path, base_dir=None))
    assert resolve_mod.base_tree_dir(plain, str(FIXTURE))[0] == FIXTURE.resolve()
    assert resolve_mod.base_tree_dir(plain)[0] == tmp_path.resolve()
    monkeypatch.delenv(resolve_mod.ENV_BASE_SOURCE)
    assert resolve_mod.base_tree_dir(plain) == (None, "")


# ---- the roles the port leaves out are the base's compiled code -------------------------------------------


@pytest.mark.parametrize("split, owned_layers", [(1, 10), (2, 10 + 1)])
def test_the_draft_capacity_is_the_bases_speculative_engine_on_the_ports_capacities(tmp_path, shared, cache, split,
                                                                                    owned_layers):
    """The fixture port has no speculative engine; its base's calculate_kv_cache (the fixture tree's formula:
    budget / (block x (the target's slot x full layers a split rank holds, its scratch included) + block x draft
    layers x the target's slot)) gives the block count, on the port's own capacities. At s 2 the base's
    split count uses the base's owner rule (layer id % s: split rank 1 holds all 10 odd full layers). Without
    the base's draft term the count would be the port's own (12 at s 1, 2 MiB)."""
    impl = implementation(shared, cache, base_source_dir=str(FIXTURE_TREE))
    assert impl.plays("speculative") == "base" and impl.plays("estimation") == "port"
    plan = impl.plan(run(split, draft=M.QWEN3_5_MTP))
    assert plan.n_blocks == (2 << 20) // (BLOCK_BYTES * owned_layers + BLOCK_BYTES), plan.n_blocks
    assert impl.plan(run(1)).n_blocks == (2 << 20) // (BLOCK_BYTES * 10) == 12
    assert plan.draft is not None and plan.draft.layer_bytes_per_block == (BLOCK_BYTES,)


def test_the_drafts_estimation_is_asked_once_per_configuration_and_again_for_the_next(shared, cache, monkeypatch):
    """An active split asks the estimation at s and at s 1 (the uniform count); the draft's question is the same in
    both (never split), so one configuration asks the tree once, and the next configuration (equal or not) asks
    it again: nothing the tree answered is kept from one configuration to the next."""
    impl = implementation(shared, cache, base_source_dir=str(FIXTURE_TREE))
    asked = []
    call = impl.native.call
    monkeypatch.setattr(impl.native, "call", lambda op, values, **kw: (
        asked.append(op) if op == "estimate" and values.get("is_draft_engine") else None, call(op, values, **kw))[1])
    first = impl.plan(run(2, draft=M.QWEN3_5_MTP))
    assert asked == ["estimate"], asked
    assert impl.plan(run(2, draft=M.QWEN3_5_MTP)) == first and asked == ["estimate"] * 2, asked


def test_a_base_whose_tree_is_not_given_leaves_its_roles_absent_naming_how_to_give_it(tmp_path, shared, cache, monkeypatch):
    monkeypatch.delenv("LWSPLIT_XLLM_BASE_SRC", raising=False)
    impl = implementation(shared, cache)
    assert impl.base is None
    with pytest.raises(manifest.AbsentRoleError) as err:
        impl.plan(run(2, draft=M.QWEN3_5_MTP))
    text = str(err.value)
    assert "manifest role `speculative`" in text and "left to the base fixture_tree" in text, text
    assert "implementation.base_source_dir=<path> or $LWSPLIT_XLLM_BASE_SRC" in text, text
    impl.plan(run(2))  # a case without a draft needs no base


WORKER_CHECKS_LINE = "  worker_checks: {file: core/runtime/worker_layerwise_init.cpp, function: fx_worker_checks}\n"
LINEAR_AND_INDEXER = replace(QWEN, index_n_heads=8, index_head_dim=128)
DRAFT_WITH_INDEXER = replace(M.QWEN3_5_MTP, index_n_heads=4, index_head_dim=64)


def based_leaving_to_the_base(tmp_path, role_line: str, planted_base: bool):
    """``based``'s manifest without ``role_line`` (the role left to the base); with ``planted_base``, its base the
    fixture tree built with the planted defects (``PLANTED_DEFINES``)."""
    path = based(tmp_path)
    text = path.read_text().replace(role_line, "")
    if planted_base:
        base = tmp_path / "planted-base.yaml"
        base.write_text((FIXTURE_TREE / "lwsplit-manifest.yaml").read_text().replace(
            "compile: upstream-cut\n", f"compile: upstream-cut\ndefines: [{PLANTED_DEFINES}]\n"))
        text = text.replace(f"base: {FIXTURE_TREE / 'lwsplit-manifest.yaml'}", f"base: {base}")
    path.write_text(text)
    return path


@pytest.mark.parametrize("planted_base", [False, True])
def test_worker_checks_left_to_the_base_are_the_bases_compiled_check(tmp_path, cache, planted_base):
    """A port whose manifest names no worker checks of its own, with a base manifest: the worker's start-up checks
    are the base's compiled cut (the fixture tree's ``worker_impl.cpp``), refusing linear attention with an
    indexer on the target and on the draft naming the field; a base built without that CHECK
    (``FIXTURE_PLANT_NO_WORKER_CHECK``) lets both through, so nothing else refuses them."""
    path = based_leaving_to_the_base(tmp_path, WORKER_CHECKS_LINE, planted_base)
    impl = implementation(path, cache)
    assert impl.plays("worker_checks") == "base"
    target, draft = run(2, model=LINEAR_AND_INDEXER), run(2, draft=DRAFT_WITH_INDEXER)
    if planted_base:
        impl.validate(target)
        impl.validate(draft)
        return
    with pytest.raises(UserError) as err:
        impl.validate(target)
    assert (err.value.field, err.value.value) == ("model.index_n_heads", 8), err.value
    assert "CHECK at worker_impl.cpp:20 `CHECK(!(enable_linear_attention && enable_lighting_indexer))`" in str(err.value)
    with pytest.raises(UserError) as err:
        impl.validate(draft)
    assert (err.value.field, err.value.value) == ("draft.index_n_heads", 4), err.value
    impl.validate(run(2))


def test_a_port_with_no_worker_checks_and_no_base_fails_the_cases_that_need_them_naming_the_role(tmp_path, cache):
    impl = implementation(write_manifest(tmp_path, WORKER_CHECKS_LINE, ""), cache)
    assert impl.manifest.role("worker_checks").state == "absent"
    with pytest.raises(manifest.AbsentRoleError) as err:
        impl.validate(run(2, model=LINEAR_AND_INDEXER))
    assert err.value.role == "worker_checks" and "manifest role `worker_checks` is absent" in str(err.value), err.value
    impl.validate(run(2))  # a case the worker's checks do not decide starts


ALLOCATION_CHECKS_LINE = ("  allocation_checks: {file: core/framework/kv_cache/kv_cache_layerwise.cpp, "
                          "function: fx_allocation_checks}\n")
SLEEP_S2 = M.run_spec(QWEN, split=2, world=4, budget_bytes=2 << 20, cache=CacheSpec(block_size=16, enable_sleep_mode=True))


@pytest.mark.parametrize("planted_base", [False, True])
def test_allocation_checks_left_to_the_base_are_the_bases_compiled_check(tmp_path, cache, planted_base):
    """A port whose manifest names no allocation refusals of its own, with a base manifest: the base's compiled cut
    of ``allocate_kv_caches`` (the fixture tree's ``kv_cache.cpp``), handed the port's worker's mask, refuses the
    split with sleep mode naming the field; a base built without that CHECK (``FIXTURE_PLANT_SLEEP_ACCEPTED``)
    takes it, so nothing else refuses it (was: the Python model refused it for upstream's tree only)."""
    path = based_leaving_to_the_base(tmp_path, ALLOCATION_CHECKS_LINE, planted_base)
    impl = implementation(path, cache)
    assert impl.plays("allocation_checks") == "base"
    if planted_base:
        impl.plan(SLEEP_S2)
        return
    with pytest.raises(UserError) as err:
        impl.plan(SLEEP_S2)
    assert err.value.field == "cache.enable_sleep_mode", err.value
    assert "CHECK at kv_cache.cpp:19 `CHECK(layer_cache_owned.empty())`" in str(err.value), err.value
    impl.validate(SLEEP_S2)  # the master's start-up lets it through: the refusal is the worker's allocation's


def test_a_port_with_no_allocation_checks_and_no_base_fails_the_cases_that_need_them_naming_the_role(tmp_path, cache):
    impl = implementation(write_manifest(tmp_path, ALLOCATION_CHECKS_LINE, ""), cache)
    assert impl.manifest.role("allocation_checks").state == "absent"
    with pytest.raises(manifest.AbsentRoleError) as err:
        impl.plan(SLEEP_S2)
    assert err.value.role == "allocation_checks" and "manifest role `allocation_checks` is absent" in str(err.value)
    impl.plan(run(2))  # a case the allocation's refusals do not decide starts
    impl.plan(replace(SLEEP_S2, layerwise=replace(SLEEP_S2.layerwise, split_size=1)))  # no split: no mask


def test_a_base_that_does_not_compile_is_named_as_the_base_not_the_port(tmp_path, shared, cache):
    tree = tmp_path / "base"
    shutil.copytree(FIXTURE_TREE, tree)
    source = tree / "xllm/core/framework/kv_cache/kv_cache_estimation.cpp"
    source.write_text(source.read_text() + "\nint broken = ;\n")
    with pytest.raises(UserError) as err:
        implementation(shared, cache, base_source_dir=str(tree))
    text = str(err.value)
    assert "base=" in text and f"the base fixture_tree (tree {tree}) failed, not the port" in text, text
    assert "kv_cache_estimation.cpp" in text and "does not compile" in text, text


def test_the_unsplit_allocation_left_to_a_base_without_one_is_absent_and_the_split_one_is_the_ports(tmp_path, shared, cache):
    """``allocation.unsplit: base``: with the split off the worker's allocation is the base's; the fixture tree
    compiles none, so the worker role is absent there, naming why; with the split on, the port's own runs."""
    impl = implementation(shared, cache, base_source_dir=str(FIXTURE_TREE))
    off = run(1)
    plan = impl.plan(off)
    with pytest.raises(manifest.AbsentRoleError) as err:
        impl.init_worker(plan, off, rank=0, role="target", device="cpu", expected_digest=plan.digest)
    assert "the allocation with the split off is left to the base fixture_tree, whose manifest compiles no " \
           "allocation" in str(err.value), err.value
    on = run(2)
    assert not impl.unsplit_by_base(impl.plan(on), "target", on)  # split on: the port's fx_allocate_kv_tensors
    assert impl.unsplit_by_base(impl.plan(on), "draft", on)  # the draft is never split


# ---- the BI-V100 port inside upstream 494f293b5 (their own CI step) ------------------------------------------


@pytest.mark.real_tree
@real_tree(PORTS["p6_v3_latest"], UPSTREAM)
def test_the_newest_snapshot_inside_upstream_plans_a_draft_and_allocates_with_the_split_off(cache, monkeypatch):
    """The port has no speculative engine: upstream's runs around it, on the port's own capacities; with the
    flag off the worker holds upstream's ordinary allocation (was: the port's counting function, 0 B)."""
    monkeypatch.setenv("LWSPLIT_XLLM_BASE_SRC", str(UPSTREAM))
    proc = tc(PORTS["p6_v3_latest"], "test_tc06_fallback.py", "test_tc06[qwen3_5_moe-off-w4-xllm_native]",
              cache=cache)
    assert proc.returncode == 0 and "allocated 0 B" not in proc.stdout, proc.stdout[-3000:]  # was: 0 B of 133652480
    os.environ[build_cache.ENV_CACHE] = str(cache)
    try:
        from implementations.xllm_native import XllmNativeImplementation

        impl = XllmNativeImplementation(source_dir=str(PORTS["p6_v3_latest"]))
    finally:
        os.environ.pop(build_cache.ENV_CACHE, None)
    assert impl.plays("speculative") == "base" and impl.base.manifest.name == "upstream_494f293b5"
    r = M.run_spec(M.QWEN3_5_MOE, split=1, world=4, budget_bytes=1 << 30, draft=M.QWEN3_5_MTP)
    with_draft, alone = impl.plan(r), impl.plan(M.run_spec(M.QWEN3_5_MOE, split=1, world=4, budget_bytes=1 << 30))
    assert 0 < with_draft.n_blocks < alone.n_blocks and with_draft.draft is not None


# ---- no role of a port comes from the Python model: split groups and the card check ----------------------------


def test_a_ports_split_groups_are_read_off_its_worker_role(impl_plain):
    """The fixture's worker takes split rank ``rank % s`` (as the BI-V100 port's does): its groups are the
    consecutive ones, and the plan says where they come from and that no role reads the topology."""
    plan = impl_plain.plan(run(2))
    assert plan.split_groups == ((0, 1), (2, 3))
    note = next(n for n in plan.notes if n.startswith(TREE_GROUPS_NOTE))
    assert "worker role (fx_worker_mask)" in note and "no topology-aware grouping" in note, note


def test_a_worker_taking_another_split_rank_gives_other_groups(tmp_path, cache):
    """Planted: a glue handing the worker ``rank / 2`` (so ranks 0 and 1 take the same split rank): the groups
    follow the tree's masks, (0, 2) and (1, 3), where the consecutive model would say (0, 1) and (2, 3)."""
    glue = tmp_path / "glue_half.cpp"
    text = (FIXTURE / "glue.cpp").read_text()
    rank = 'static_cast<int>(req.i64("rank"))'
    assert text.count(rank) == 1
    glue.write_text(text.replace(rank, 'static_cast<int>(req.i64("rank") / 2)'))
    path = write_manifest(tmp_path)
    path.write_text(path.read_text().replace(f"glue: {FIXTURE / 'glue.cpp'}", f"glue: {glue}"))
    plan = implementation(path, cache).plan(run(2))
    assert plan.split_groups == ((0, 2), (1, 3)), plan.split_groups


def test_a_port_without_a_worker_role_has_no_split_groups_and_says_so(impl_plain):
    """The same tree with its manifest marking ``worker`` absent (no rebuild: the manifest's roles alone change)."""
    impl = copy.copy(impl_plain)
    impl.manifest = replace(impl_plain.manifest, roles={**impl_plain.manifest.roles,
                                                        "worker": manifest.Role(name="worker", absent="no worker")})
    with pytest.raises(manifest.AbsentRoleError) as err:
        impl.plan(run(2))
    assert "manifest role `worker` is absent" in str(err.value)
    assert impl.plan(run(1)).split_groups == ((0,), (1,), (2,), (3,))  # the split off: no group to form


def test_no_compiled_tree_is_credited_with_a_card_check_and_its_plan_says_so(impl_plain, cache):
    """Two ranks of one split group on one card: the spec's master refuses. No compiled code of a tree checks cards
    (upstream's neither: its engine sizes the KV cache to each device's free memory and forms its groups without
    the cards), so the port's plan and the upstream-shaped tree's go through, each saying it has no card check
    (TC-03 then fails them naming that); was: upstream's tree refused by the harness's Python model of it."""
    from implementations.reference import ReferenceImplementation
    from implementations.xllm_native import XllmNativeImplementation

    crowded = replace(run(2), placement=(0, 0, 1, 1))
    with pytest.raises(UserError):
        ReferenceImplementation().plan(crowded)
    plan = impl_plain.plan(crowded)
    assert plan.split_groups == ((0, 1), (2, 3)) and TREE_CARDS_NOTE in plan.notes
    os.environ[build_cache.ENV_CACHE] = str(cache)
    try:
        upstream_shaped = XllmNativeImplementation(source_dir=str(FIXTURE_TREE))
    finally:
        os.environ.pop(build_cache.ENV_CACHE, None)
    ds = M.run_spec(ModelSpec(name="fixture", model_type="fixture_split", num_hidden_layers=6, attention="mla",
                              kv_lora_rank=24, qk_rope_head_dim=8), split=2, world=4, budget_bytes=1 << 20,
                    cache=CacheSpec(block_size=16))
    crowded_plan = upstream_shaped.plan(replace(ds, placement=(0, 0, 1, 1)))
    assert TREE_CARDS_NOTE in crowded_plan.notes, crowded_plan.notes


def test_tc03_names_the_trees_groups_with_a_grouping_problem(impl_plain):
    from harness.suites import tc03

    plan = impl_plain.plan(run(2))
    wrong = replace(plan, split_groups=((0, 2), (1, 3)))
    problems = tc03.check_groups(wrong, run(2))
    assert problems and TREE_GROUPS_NOTE in problems[0], problems
    reference_problems = tc03.check_groups(replace(wrong, notes=()), run(2))
    assert reference_problems and TREE_GROUPS_NOTE not in " ".join(reference_problems)


@pytest.fixture(scope="module")
def impl_plain(cache):
    os.environ[build_cache.ENV_CACHE] = str(cache)
    try:
        from implementations.xllm_native import XllmNativeImplementation

        yield XllmNativeImplementation(source_dir=str(FIXTURE), manifest=str(FIXTURE / "manifest.yaml"))
    finally:
        os.environ.pop(build_cache.ENV_CACHE, None)


# ---- the explorer drives a compiled tree's roles through its host ---------------------------------------------


def test_the_explorer_drives_the_ports_compiled_roles_and_shrinks_a_departure(cache, monkeypatch):
    """``implementation=xllm_native`` on the fixture port: drawn configurations go through the host (the plan is
    the tree's), judged by the spec alone (``xllm_native[fixture_port]``: no upstream prediction excuses it), and
    the first departure shrinks to a small configuration with a command naming the tree."""
    from harness.explore.runner import runner_for
    from harness.explore.search import explore
    from harness.suites.matrix import load_matrix

    monkeypatch.setenv(build_cache.ENV_CACHE, str(cache))
    overrides = ["implementation=xllm_native", f"implementation.source_dir={FIXTURE}",
                 f"implementation.manifest={FIXTURE / 'manifest.yaml'}"]
    runner = runner_for(load_matrix("ci", overrides), "xllm_native")
    assert runner.judged_as == "xllm_native[fixture_port]"
    finding = explore(runner, examples=40, allocate=False)
    assert finding is not None, "the fixture port's planted defects are departures the draws reach"
    report = finding.report()
    assert f"implementation.source_dir={FIXTURE}" in report, report
    assert finding.run.model.num_hidden_layers <= 4, finding.run.model


@pytest.mark.real_tree
@real_tree(UPSTREAM)
def test_the_explorer_passes_upstreams_compiled_planning_on_its_predictions(cache, monkeypatch):
    """Upstream's tree judged by upstream's predictions, as its TC cases are: no unexplained departure in 300
    plan-level draws (was: 7 draws at s 1 with an int8 cache taken for the flag-off prediction, its worker's stop)."""
    from harness.explore.runner import runner_for
    from harness.explore.search import explore
    from harness.suites.matrix import load_matrix

    monkeypatch.setenv(build_cache.ENV_CACHE, str(cache))
    runner = runner_for(load_matrix("ci", ["implementation=xllm_native", f"implementation.source_dir={UPSTREAM}"]),
                        "xllm_native")
    assert runner.judged_as == "xllm_native"
    finding = explore(runner, examples=300, allocate=False)
    assert finding is None, finding.report()
