"""Role-by-role departures (``harness.departures``): each role a tree plays judged on its own, so that a
departure an end-to-end run hides behind an earlier one still reads, once.

The fixture port built by ``fixture_port/manifest_planted.yaml`` has a master that CHECKs at s 4, a slot counted
twice, workers that own no linear layer, an engine handing the estimation every KV head on each TP rank
(``FXPORT_PLANT_HEADS_UNDIVIDED``: the estimation, fed the spec's heads, does not repeat it), worker start-up checks that let linear attention with an indexer through
(``FXPORT_PLANT_NO_WORKER_CHECK``), an allocation that takes the split with sleep mode (``FXPORT_PLANT_SLEEP_ACCEPTED``),
a validator nothing in its start-up path calls (``validation: {none: ...}``) and
a groups function taking strided ranks where the spec keeps consecutive ones. End to end, its s 4 plan stops on the master's CHECK; role by role, each
planted defect is one line of its list, and none of them is on the plain fixture's list. The real trees
(``real_tree``: both BI-V100 snapshots under ``../shared``) are judged the same way in their own CI step.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from contract.errors import UserError
from contract.specs import CacheSpec
from harness import departures, native_verdicts
from harness.departures import cases
from harness.departures.judge import JudgedCase, case_tcs, judge
from implementations.xllm_native.build import cache as build_cache
from testcases.real_trees import PORTS, UPSTREAM, real_tree
from testcases.unit import _models as M

pytestmark = pytest.mark.slow  # builds C++: scheduled first

FIXTURE = Path(__file__).resolve().parent / "fixture_port"
QWEN = replace(M.QWEN3_5_MOE, layer_types=tuple("full_attention" if (layer + 1) % 4 == 0 else "linear_attention"
                                                 for layer in range(40)))


def run(split: int, **kw):
    return M.run_spec(QWEN, split=split, world=4, budget_bytes=1 << 30, cache=CacheSpec(block_size=16), **kw)


CASES = (JudgedCase(id="qwen-s2", run=run(2), tcs=case_tcs(True)),
         JudgedCase(id="qwen-s4", run=run(4), tcs=case_tcs(True)),
         JudgedCase(id="s-not-dividing-tp", run=run(3), tcs=("TC-01",), refusal=True),
         JudgedCase(id="cp2", run=run(2, cp=2), tcs=("TC-01",), refusal=True),
         JudgedCase(id="linear-and-indexer", run=M.run_spec(replace(QWEN, index_n_heads=8, index_head_dim=128), split=2,
                                                            world=4, budget_bytes=1 << 30, cache=CacheSpec(block_size=16)),
                    tcs=("TC-01",), refusal=True),
         JudgedCase(id="sleep-mode", run=M.run_spec(QWEN, split=2, world=4, budget_bytes=1 << 30,
                                                    cache=CacheSpec(block_size=16, enable_sleep_mode=True)),
                    tcs=("TC-01",), refusal=True))


def impl_of(cache, manifest: str):
    os.environ[build_cache.ENV_CACHE] = str(cache)
    from implementations.xllm_native import XllmNativeImplementation

    return XllmNativeImplementation(source_dir=str(FIXTURE), manifest=str(FIXTURE / manifest))


@pytest.fixture(scope="module")
def lists(cache):
    """The departure lists of the planted and the plain fixture port on ``CASES``, and the planted tree."""
    try:
        planted = impl_of(cache, "manifest_planted.yaml")
        plain = impl_of(cache, "manifest.yaml")
        yield judge(planted, CASES), judge(plain, CASES), planted
    finally:
        os.environ.pop(build_cache.ENV_CACHE, None)


PLANTED = {
    "master CHECK at s 4": lambda d: d.role == "layout" and "CHECK_LE(split_size, 2)" in d.tree,
    "slot counted twice": lambda d: d.role == "estimation" and d.rule.startswith("KV slot bytes")
    and (d.tree, d.spec) == ("2048", "1024"),
    "linear layers not owned": lambda d: d.role == "worker" and "linear-attention" in d.rule
    and d.tree == "a rank owns no linear-attention layer",
    "validator nothing calls": lambda d: d.role == "validation" and d.tree.startswith("accepts every configuration")
    and "nothing in the start-up path calls check_split_config" in d.tree,
    "worker checks letting linear + indexer through": lambda d: d.role == "worker_checks" and d.tree == "accepts"
    and d.spec == "refuses naming model.index_n_heads" and d.cases == ("linear-and-indexer",)
    and d.function == "fx_worker_checks",
    "KV heads not divided by the TP size": lambda d: d.role == "engine_options"
    and d.rule.startswith("target: KV heads per TP rank") and (d.tree, d.spec) == ("2", "1")
    and d.function == "fx_engine_options",
    "allocation taking the split with sleep mode": lambda d: d.role == "allocation_checks" and d.tree == "accepts"
    and d.spec == "refuses naming cache.enable_sleep_mode" and d.cases == ("sleep-mode",)
    and d.function == "fx_allocation_checks",
    "strided split groups": lambda d: d.role == "groups" and d.tree == "other groups" and d.function == "fx_split_groups"
    and any("tree [[0, 2], [1, 3]], spec [[0, 1], [2, 3]]" in c for c in d.cases),
}


@pytest.mark.parametrize("defect", list(PLANTED))
def test_each_planted_defect_is_one_line_of_the_planted_list_and_none_of_the_plain(lists, defect):
    planted, plain, _ = lists
    found = [d for d in planted.departures if PLANTED[defect](d)]
    assert len(found) == 1, departures.markdown([planted])
    assert not [d for d in plain.departures if PLANTED[defect](d)], departures.markdown([plain])


def test_the_master_check_hides_the_rest_end_to_end_but_not_role_by_role(lists):
    planted, _, impl = lists
    with pytest.raises(UserError, match=r"CHECK_LE\(split_size, 2\)"):
        impl.plan(run(4))
    (check,) = [d for d in planted.departures if PLANTED["master CHECK at s 4"](d)]
    assert check.cases == ("qwen-s4",) and "TC-01" in check.tcs, check
    for name in ("slot counted twice", "linear layers not owned"):
        (d,) = [d for d in planted.departures if PLANTED[name](d)]
        assert "qwen-s4" in d.cases, d
    (refusals,) = [d for d in planted.departures if PLANTED["validator nothing calls"](d)]
    assert refusals.cases == ("s-not-dividing-tp (spec refuses naming layerwise.split_size)",
                              "cp2 (spec refuses naming parallel.cp_size)") and refusals.tcs == ("TC-01",), refusals


def test_the_plain_fixtures_own_defects_read_once_with_their_function(lists):
    _, plain, _ = lists
    (never_split,) = [d for d in plain.departures if d.role == "layout"]
    assert never_split.tree == "every full layer on every TP rank" and never_split.cases == ("qwen-s2", "qwen-s4")
    assert never_split.function == "fx_master_layout" and never_split.file.endswith("layerwise_split_master.cpp")
    (tp_rule,) = [d for d in plain.departures if d.role == "validation" and "layerwise.split_size" in d.rule]
    assert tp_rule.tree == "accepts" and tp_rule.cases == ("s-not-dividing-tp",), tp_rule
    (absent,) = [d for d in plain.departures if d.role == "speculative"] or [None]
    assert absent is None  # no case here has a draft: an absent role is listed only where a case needs it


def test_the_command_writes_the_list_and_diffs_two_snapshots(lists, tmp_path, cache, capsys, monkeypatch):
    planted, plain, _ = lists
    old = tmp_path / "old"
    old.mkdir()
    (old / departures.DEPARTURES_FILE).write_text(json.dumps(departures.to_json([planted])))
    monkeypatch.setenv(build_cache.ENV_CACHE, str(cache))
    out = tmp_path / "out"
    code = native_verdicts.main(["--tree", str(FIXTURE), "--manifest", str(FIXTURE / "manifest.yaml"), "--roles-only",
                                 "--models", "qwen3_5_moe", "--layerwise", "s2,s4", "--out", str(out),
                                 "--against", str(old)])
    assert code == 0
    printed = capsys.readouterr().out
    assert printed.index("### Departures of fixture_port") < printed.index("### Since ")
    written = departures.load(out)
    assert [t.manifest for t in written] == ["fixture_port"] and written[0].roles["validation"] == "played"
    gone = printed[printed.index("### Since"):]
    assert "- gone: **worker**: every rank owns every linear-attention layer" in gone, gone
    assert "- gone: **validation**: start-up refuses what FEATURE 3 refuses" in gone, gone
    assert (out / "departures.md").read_text().startswith("### Departures of fixture_port")
    assert sorted(p.name for p in out.iterdir()) == ["departures.json", "departures.md", "verdicts.json"]


def test_a_bad_against_or_out_is_one_error_line_and_exit_2(tmp_path, capsys):
    (tmp_path / "bad.json").write_text("[1]")
    for bad in (["--against", str(tmp_path / "nope")], ["--against", str(tmp_path / "bad.json")],
                ["--out", str(FIXTURE / "glue.cpp")]):
        with pytest.raises(SystemExit) as stop:
            native_verdicts.main(["--tree", str(FIXTURE), "--roles-only", *bad])
        assert stop.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert [line.split("=")[0] for line in lines] == ["error: --against", "error: --against", "error: --out"], lines


def test_grouping_and_diff_on_plain_records():
    """One root cause over several cases reads once; a diff keys on role, rule and figures, not on cases."""
    f = dict(role="estimation", rule="r", tree="0", spec="256")
    found = departures.group([departures.Finding(case="a", tcs=("TC-02",), **f),
                              departures.Finding(case="b", tcs=("TC-01",), **f),
                              departures.Finding(case="a", tcs=(), **{**f, "tree": "1"})])
    assert [(d.tree, d.cases, d.tcs) for d in found] == [("0", ("a", "b"), ("TC-01", "TC-02")), ("1", ("a",), ())]
    moved = replace(found[0], cases=("c",))
    d = departures.diff(found, [moved])
    assert (d.new, d.gone, d.remaining) == ((), (found[1],), (moved,))


def test_a_sweep_job_records_the_list_and_results_md_shows_it_with_the_diff(lists, tmp_path):
    """A suite job on a C++ tree records its list (its own case and TC-01's refusal cases), Allure gets it as a
    test of its own, and results.md lists it per tree before the TC table, with what changed since the list
    ``suite.departures_against`` names."""
    from harness.app import aggregate, tree_departures

    planted, _, impl = lists
    found = tree_departures.departures_of(impl, run(4))
    assert found["tree"] == "fixture_port" and found["manifest"] == "fixture_port_planted"
    (tree,) = departures.from_json({"trees": [found]})
    assert any(PLANTED["master CHECK at s 4"](d) for d in tree.departures)
    assert any(PLANTED["validator nothing calls"](d) for d in tree.departures)
    (tmp_path / "allure").mkdir()
    written = json.loads(tree_departures.write_allure(found, tmp_path / "allure").read_text())
    assert written["status"] == "failed" and "CHECK_LE(split_size, 2)" in written["description"]
    old = tmp_path / "old.json"
    old.write_text(json.dumps(departures.to_json([replace(planted, departures=planted.departures[:1])])))
    results = [{"tcs": {"TC-01": {"status": "failed"}}, "departures": found, "departures_against": str(old),
                "config": {"model": "qwen3_5_moe", "implementation": "xllm_native", "split_size": 4}}]
    text = "\n".join(aggregate.verdict_lines(results))
    assert text.index("## Departures per tree") < text.index("### Since") < text.index("## Verdicts per job and TC")
    since = text[text.index("### Since"):text.index("## Verdicts")]
    assert "- remaining: **validation**" in since and "- new: **layout**" in since, since


@pytest.mark.parametrize("allocation, flag_off, split", [
    (dict(file="core/framework/kv_cache/kv_cache_layerwise.cpp", function="fx_allocated_layers", split_only=True),
     "runs only with the split active", None),
    (dict(none="nothing in the start-up path calls fx_allocated_layers"),
     "the engine's start-up path calls no KV-cache allocation", "the engine's start-up path calls no KV-cache"),
])
def test_an_allocation_the_engine_calls_only_with_the_split_or_never_is_not_credited(lists, allocation, flag_off,
                                                                                      split):
    """``split_only``: with the flag off or s 1 the engine runs its ordinary allocation, which the port does not
    have: the worker refuses naming that, and the list has one line for the flag-off cases. ``none``: no worker
    allocates at all. (The plain fixture's library, its manifest's allocation replaced: ``manifest.load`` of
    such a manifest is held by ``test_ports``.)"""
    from implementations.xllm_native import XllmNativeImplementation
    from implementations.xllm_native.manifest import Role

    impl = XllmNativeImplementation(source_dir=str(FIXTURE), manifest=str(FIXTURE / "manifest.yaml"))
    impl.manifest = replace(impl.manifest, allocation=Role(name="allocation", **allocation), tensors=None)
    for r, expected in ((run(2, enable=False), flag_off), (run(2), split)):
        plan = impl.plan(r)
        if expected is None:
            impl.init_worker(plan, r, rank=0, role="target", device="cpu", expected_digest=plan.digest)
            continue
        with pytest.raises(UserError, match=expected):
            impl.init_worker(plan, r, rank=0, role="target", device="cpu", expected_digest=plan.digest)
    found = judge(impl, [JudgedCase(id="off", run=run(2, enable=False), tcs=case_tcs(False)), *CASES[:2]])
    (line,) = [d for d in found.departures if d.role == "allocation" and d.tree != "creates no tensor"]
    assert line.cases == (("off",) if split is None else ("off", "qwen-s2", "qwen-s4")), departures.markdown([found])
    nothing = [d.cases for d in found.departures if d.tree == "creates no tensor"]  # fx_allocated_layers counts only
    assert nothing == ([("qwen-s2 (rank 0 owns 5 full layers)", "qwen-s4 (rank 0 owns 3 full layers)")]
                       if split is None else []), departures.markdown([found])


@pytest.mark.parametrize("role, wrong", [
    ("ownership", lambda masks: masks[::-1]),
    ("engine_layout", lambda layout: tuple((layer, (0, 1, 2, 3), heads) for layer, _, heads in layout)),
    ("worker", lambda mask: [False] * len(mask)),
])
def test_a_wrong_answer_of_a_role_the_fixture_gets_right_is_found(lists, monkeypatch, role, wrong):
    """Mutants of answers the plain fixture gets right (its ownership, its engine layout, its workers' linear
    layers): the same judge finds each as a departure the plain list does not have."""
    from implementations.xllm_native import roles as native_roles

    _, plain, _ = lists
    judged = {"ownership": "ownership", "engine_layout": "engine", "worker": "worker"}[role]
    cases = [*CASES[:2], JudgedCase(id="qwen-off", run=run(2, enable=False), tcs=case_tcs(False))]
    real = getattr(native_roles, role)
    monkeypatch.setattr(native_roles, role, lambda *a, **kw: wrong(real(*a, **kw)))
    from implementations.xllm_native import XllmNativeImplementation  # the plain fixture, already built

    plain_impl = XllmNativeImplementation(source_dir=str(FIXTURE), manifest=str(FIXTURE / "manifest.yaml"))
    mutated = judge(plain_impl, cases)
    before = {d.key for d in plain.departures if d.role == judged}
    new = [d for d in mutated.departures if d.role == judged and d.key not in before]
    assert new, departures.markdown([mutated])


def test_the_speculative_block_count_is_judged_where_the_tree_has_one(lists, monkeypatch):
    """The fixture has no speculative engine; with the role said played and answering the spec's common block
    count there is no departure, and one block more is one."""
    from harness import oracle
    from implementations.xllm_native import roles as native_roles

    _, _, impl = lists
    draft_case = JudgedCase(id="qwen-s2-mtp", run=run(2, draft=M.QWEN3_5_MTP), tcs=("TC-07",), only="speculative")
    spec = oracle.expected_capacities(draft_case.run)[0].n_blocks
    real_state = native_roles.state
    monkeypatch.setattr(native_roles, "state", lambda i, r: ("played", "", "calc", "spec.cpp") if r == "speculative"
                        else real_state(i, r))
    for extra, found in ((0, False), (1, True)):
        monkeypatch.setattr(native_roles, "speculative", lambda *a, extra=extra, **kw: {"n_blocks": spec + extra})
        lines = [d for d in judge(impl, [draft_case]).departures if d.role == "speculative"]
        assert bool(lines) is found and (not found or lines[0].cases == (f"qwen-s2-mtp (tree {spec + 1}, spec {spec} "
                                                                          "at s 2)",)), lines


# ---- the real trees, in their own CI step ----------------------------------------------------------------


def _real(name: str):
    return native_verdicts.tree_departures(PORTS[name], ("qwen3_5_moe", "deepseek_v32", "glm_moe_dsa"),
                                           ("off", "s2", "s4"))


@pytest.mark.real_tree
@real_tree(*PORTS.values())
def test_the_two_snapshots_get_different_lists_and_v3_shows_what_its_master_check_hides(cache, monkeypatch):
    """What the snapshots do, read from their code: v3's worker (upstream's ``build_layer_cache_owned`` over
    ``ModelArgs``) picks the owner by layer id, v2's by full-layer index (the spec's); both keep every linear
    layer owned. v3's master CHECKs on DeepSeek-V3.2 and GLM-5 at s 2 and s 4, which end to end hides its
    estimate's dropped DSA index slot and block counts; nothing calls either snapshot's validators."""
    monkeypatch.setenv(build_cache.ENV_CACHE, str(cache))
    v2, v3 = _real("p6_v2_1ac802"), _real("p6_v3_latest")
    assert {d.key for d in v2.departures} != {d.key for d in v3.departures}
    text = departures.markdown([v2, v3])
    (owner,) = [d for d in v3.departures if d.role == "worker" and "full layer" in d.rule]
    assert [c.split(" ")[0] for c in owner.cases] == ["qwen3_5_moe-s2", "qwen3_5_moe-s4"], text
    assert not [d for d in v2.departures if d.role == "worker"], text
    for tree in (v2, v3):  # heads spread over TP ranks, one owner per split group nowhere
        (master,) = [d for d in tree.departures if d.role == "layout" and d.tree == "full layers on other TP ranks"]
        assert master.cases[0] == ("qwen3_5_moe-s2 (TP rank 1 holds [3, 11, 19, 27, 35], spec [7, 15, 23, 31, 39] "
                                   "(2 of 4 ranks wrong))"), text
    assert not [d for t in (v2, v3) for d in t.departures if "linear-attention" in d.rule], text
    dsa = [f"{m}-{s}" for m in ("deepseek_v32", "glm_moe_dsa") for s in ("s2", "s4")]
    for tree in (v2, v3):
        (check,) = [d for d in tree.departures if d.role == "layout" and "CHECK_GT(full_attn_count, 0)" in d.tree]
        assert list(check.cases) == dsa, text
    (index,) = [d for d in v3.departures if d.role == "estimation" and d.rule.startswith("DSA index slot")]
    assert set(dsa) <= set(index.cases) and (index.tree, index.spec) == ("0", "256"), text
    (blocks,) = [d for d in v3.departures if d.role == "estimation" and d.rule.startswith("block count")]
    assert all(any(c.startswith(x + " (tree ") for c in blocks.cases) for x in dsa), text
    (absent,) = [d for d in v2.departures if d.role == "estimation"]
    assert absent.tree.startswith("absent: ") and len(absent.cases) == 9, text
    for tree in (v2, v3):
        (uncalled,) = [d for d in tree.departures if d.role == "validation"]
        assert uncalled.tree.startswith("accepts every configuration") and uncalled.tcs == ("TC-01",), text
        # the linear + indexer refusal is the worker's start-up checks', left to upstream's compiled cut (the base)
        assert "s0" in uncalled.cases[0] and not [c for c in uncalled.cases if c.startswith("linear-and-indexer")], text
        assert tree.roles["worker_checks"] == "base" and not [d for d in tree.departures if d.role == "worker_checks"]
    # v2 allocates (nothing) only with the split active, and with the split off the engine around it (its base,
    # upstream 494f293b5: ``allocation.unsplit: base``) allocates, which is not the port's departure; v3's
    # start-up path never calls its allocation
    (empty,) = [d for d in v2.departures if d.role == "allocation"]
    assert empty.tree == "creates no tensor" and not [c for c in empty.cases if "-off" in c], text
    for tree in (v2, v3):  # no start-up path forms split groups: the workers' masks make consecutive ones
        (groups,) = [d for d in tree.departures if d.role == "groups" and d.tree.startswith("consecutive")]
        assert groups.tree == ("consecutive runs of s ranks in each attention TP group (the tree forms none: read "
                               "off its workers' masks)") and groups.tcs == ("TC-03",), text
        assert [c.split(" ")[0] for c in groups.cases] == [f"{v}-s2" for v, _, _ in cases.TOPOLOGY_CASES], text
    # v3's workers give Qwen3.5's split ranks 0 and 3 the same mask at s 4 (no full layer each): groups the
    # masks cannot tell apart
    (untold,) = [d for d in v3.departures if d.role == "groups" and d.tree.startswith("other groups")]
    assert untold.cases == ("qwen3_5_moe-s4 (cpu_sim_8: tree [[0, 3], [1], [2]], spec [[0, 1, 2, 3]])",), text
    assert not [d for d in v2.departures if d.role == "groups" and d.tree.startswith("other groups")], text
    (never,) = [d for d in v3.departures if d.role == "allocation"]
    assert never.tree.startswith("the engine calls nothing for it: nothing in the start-up path calls "
                                 "allocate_kv_caches_layerwise"), text


@pytest.mark.real_tree
@real_tree(UPSTREAM)
def test_upstream_lists_only_its_known_departures(cache, monkeypatch):
    """Upstream 494f293b5's list holds only what docs/upstream.md gives as its departures from the spec: it
    supports no Qwen3.5 split (its model types), and its owner rule ``layer_id % s`` is wrong on hybrid models
    (owners, workers, and the block counts of target and draft that follow); nothing on DeepSeek-V3.2 or GLM-5 but
    an fp8 KV cache on the BI-V100 profile, which its compiled start-up accepts (its worker quantizes int8 alone)."""
    monkeypatch.setenv(build_cache.ENV_CACHE, str(cache))
    found = native_verdicts.tree_departures(UPSTREAM, ("qwen3_5_moe", "deepseek_v32", "glm_moe_dsa"),
                                            ("off", "s2", "s4"))
    text = departures.markdown([found])
    qwen_split = ("qwen3_5_moe-s2", "qwen3_5_moe-s4")
    for d in found.departures:
        if d.role == "validation" and d.tree == "accepts":
            assert d.cases == ("fp8-unsupported",) and "cache.kv_cache_dtype" in d.rule, text
        elif d.role == "validation":
            assert d.tree.startswith("refuses naming model.model_type") and "is_layerwise_split_supported_model" in d.tree, text
        elif d.role == "groups":  # MappingNPU's consecutive groups where TC-03's topologies regroup, nothing else
            assert d.tree == "consecutive runs of s ranks in each attention TP group", text
            assert d.function == "MappingNPU::get_layerwise_split_group", text
            assert [c.split(" ")[0] for c in d.cases] == [f"{v}-s2" for v, _, _ in cases.TOPOLOGY_CASES], text
        else:
            assert d.role in ("estimation", "ownership", "worker", "speculative"), text
            assert all(c.startswith(qwen_split) for c in d.cases), text
    assert {d.role for d in found.departures} == {"validation", "estimation", "ownership", "worker", "groups",
                                                  "speculative"}, text


@pytest.mark.real_tree
@real_tree(UPSTREAM)
def test_upstreams_groups_are_its_compiled_mappings_and_a_strided_copy_is_one_departure(tmp_path, cache, monkeypatch):
    """Upstream's split groups come from its compiled ``MappingNPU::get_layerwise_split_group`` (cut out of
    mapping_npu.cpp with its TP groups and ``validate``'s CHECKs): consecutive runs of s ranks, its CHECK on
    attention tp % s fired in the compiled code; a copy whose method takes strided ranks forms other groups, and the
    groups role reads them as one departure (was: the harness's Python model of upstream's groups)."""
    monkeypatch.setenv(build_cache.ENV_CACHE, str(cache))
    from implementations.xllm_native import XllmNativeImplementation

    tree = tmp_path / "upstream"
    shutil.copytree(UPSTREAM, tree, ignore=shutil.ignore_patterns(".git"))
    source = tree / "xllm/core/framework/parallel_state/mapping_npu.cpp"
    text = source.read_text()
    cut = "      rank_per_group.emplace_back(tp_group.begin() + begin,\n                                  tp_group.begin() + end);"
    assert text.count(cut) == 1
    source.write_text(text.replace(cut, (
        "      std::vector<int32_t> strided;\n"
        "      for (size_t j = 0; j < static_cast<size_t>(split_size); ++j)\n"
        "        strided.push_back(tp_group[begin / split_size + j * (tp_group.size() / split_size)]);\n"
        "      rank_per_group.push_back(strided);")))
    good, bad = (XllmNativeImplementation(source_dir=str(t)) for t in (UPSTREAM, tree))
    ds = replace(run(2), model=replace(run(2).model, model_type="deepseek_v32"))
    assert good.split_groups(ds) == ((0, 1), (2, 3)) and bad.split_groups(ds) == ((0, 2), (1, 3))
    with pytest.raises(UserError) as err:
        good.native.call("groups", {"world_size": 4, "dp_size": 1, "cp_size": 1, "kv_split_size": 0,
                                    "layerwise_split_size": 3})
    assert "mapping_npu.cpp" in err.value.detail and "divisible by layerwise_split_size" in err.value.detail
    case = JudgedCase(id="ds-s2", run=ds, tcs=case_tcs(True))
    assert not [d for d in judge(good, [case]).departures if d.role == "groups"]
    (strided,) = [d for d in judge(bad, [case]).departures if d.role == "groups"]
    assert strided.tree == "other groups" and strided.function == "MappingNPU::get_layerwise_split_group"
