"""The mutants are real mutations: registered, selectable by config, and each observably
different from the reference on one concrete configuration (the mutation self-test).

Whether the TC suites *catch* them is the meta-suite's job; this only guards that no
mutant is an equivalent program (which would make "not caught" meaningless).
"""

from __future__ import annotations

import importlib
from dataclasses import replace
from typing import Callable

import pytest
import yaml

from contract.errors import ConfigError, PlanError
from contract.interface import KVShardingImplementation
from contract.specs import CacheSpec
from harness.config.schema import TC_IDS
from harness.paths import CONF_DIR
from implementations.mutants import COMPONENTS, MUTANTS
from implementations.reference import ReferenceImplementation
from implementations.reference.allocation import cache_bytes, layer_own_bytes
from testcases.unit._local_engine import start_local
from testcases.unit._models import (
    DEEPSEEK_MTP,
    DEEPSEEK_V3,
    DEEPSEEK_V32,
    LLAMA3_8B,
    QWEN3_5_MOE,
    QWEN3_5_MTP,
    QWEN3_NEXT,
    MiB,
    hardware,
    run_spec,
)

pytestmark = pytest.mark.unit

CONF_IMPL = CONF_DIR / "implementation"
REF = ReferenceImplementation()
SMALL = 64 * MiB
"""Per-rank KV budget for the allocating checks: a few blocks, so they stay fast."""

# ---- registry ------------------------------------------------------------------------


def test_at_least_ten_mutants_covering_every_component():
    assert len(MUTANTS) >= 10
    assert {cls.component for cls in MUTANTS.values()} == set(COMPONENTS)


@pytest.mark.parametrize("key", sorted(MUTANTS))
def test_registry_entry_is_a_labelled_reference_subclass(key):
    cls = MUTANTS[key]
    assert issubclass(cls, ReferenceImplementation) and cls is not ReferenceImplementation
    assert cls.name == f"mutant_{key}"
    assert cls.rule and "\n" not in cls.rule and "FEATURE" in cls.rule
    assert cls.component in COMPONENTS
    assert cls.expected_catchers and set(cls.expected_catchers) <= set(TC_IDS), cls.expected_catchers
    assert isinstance(cls(), KVShardingImplementation)


def test_each_mutant_is_filed_by_the_component_it_breaks():
    """``implementations/mutants/<component>.py`` holds the mutants of that component, and only them."""
    misfiled = sorted(f"{cls.__name__} ({cls.component}) in {cls.__module__}" for cls in MUTANTS.values()
                      if cls.__module__ != f"implementations.mutants.{cls.component}")
    assert misfiled == []


def test_names_are_unique():
    names = [cls.name for cls in MUTANTS.values()]
    assert len(set(names)) == len(names)
    assert len({cls for cls in MUTANTS.values()}) == len(MUTANTS)
    assert not {"reference", "xllm_upstream"} & set(names)


@pytest.mark.parametrize("key", sorted(MUTANTS))
def test_each_has_a_config_whose_target_is_the_class(key):
    path = CONF_IMPL / f"mutant_{key}.yaml"
    cfg = yaml.safe_load(path.read_text())
    module, _, attr = cfg["_target_"].rpartition(".")
    assert getattr(importlib.import_module(module), attr) is MUTANTS[key]


def test_configs_are_generated_from_the_registry():
    """One registry (``MUTANTS``): each ``conf/implementation/mutant_*.yaml`` is exactly what it renders, and
    no file names a mutant it lacks (``python -m harness.coverage mutant-configs`` rewrites them)."""
    from harness.coverage import mutant_configs

    differ = [p.name for p, text in mutant_configs.expected().items() if not p.is_file() or p.read_text() != text]
    assert not differ, f"stale or missing (run python -m harness.coverage mutant-configs): {differ}"
    assert not mutant_configs.stale(), mutant_configs.stale()
    on_disk = {p.stem.removeprefix("mutant_") for p in CONF_IMPL.glob("mutant_*.yaml")}
    assert on_disk == set(MUTANTS)



def test_mutant_configs_touches_only_the_files_it_wrote(tmp_path, monkeypatch, capsys):
    """``python -m harness.coverage mutant-configs`` rewrites and removes only files that carry its header:
    a user's ``mutant_mine.yaml``, or a user's file at a registered mutant's name, is left with a note."""
    from harness.coverage import __main__ as coverage_cli
    from harness.coverage import mutant_configs

    monkeypatch.setattr(mutant_configs, "FOLDER", tmp_path)
    key = sorted(MUTANTS)[0]
    mine = tmp_path / "mutant_mine.yaml"
    mine.write_text("_target_: my.own.Mutant\n")
    taken = tmp_path / f"{MUTANTS[key].name}.yaml"
    taken.write_text("# mine\n_target_: my.own.Other\n")
    gone = tmp_path / "mutant_no_longer_registered.yaml"
    gone.write_text(mutant_configs.HEADER + "_target_: implementations.mutants.Gone\n")
    assert coverage_cli.main(["mutant-configs"]) == 0
    err = capsys.readouterr().err
    assert mine.read_text() == "_target_: my.own.Mutant\n" and f"note: left {mine}" in err
    assert taken.read_text() == "# mine\n_target_: my.own.Other\n" and f"note: left {taken}" in err
    assert not gone.exists() and f"removed {gone}" in err
    others = [p for p in mutant_configs.expected() if p != taken]
    assert all(p.read_text().startswith(mutant_configs.HEADER) for p in others)


def test_mutant_configs_run_twice_at_once_removes_a_stale_file_once(tmp_path, monkeypatch):
    """Two runs of mutant-configs see the same stale file; the second finds it gone: not a traceback."""
    from harness.coverage import mutant_configs

    monkeypatch.setattr(mutant_configs, "FOLDER", tmp_path)
    gone = tmp_path / "mutant_no_longer_registered.yaml"
    gone.write_text(mutant_configs.HEADER)
    monkeypatch.setattr(mutant_configs, "stale", lambda: [gone, tmp_path / "mutant_removed_by_the_other_run.yaml"])
    changes = mutant_configs.write()
    assert [c.path for c in changes if c.what == "removed"] == [gone]


@pytest.mark.parametrize("key", sorted(MUTANTS))
def test_plans_a_shipped_like_config_without_crashing(key):
    """Qwen3.5 at s = 2 (balanced owners, linear layers): every mutant still plans it."""
    plan = MUTANTS[key]().plan(run_spec(QWEN3_5_MOE, split=2))
    assert plan.n_blocks >= 1 and plan.implementation == f"mutant_{key}"


# ---- each mutant differs from the reference ---------------------------------------------


def _owner_off_by_one(m):
    run = run_spec(DEEPSEEK_V3, split=2)
    assert REF.plan(run).owner_of(0) == 0  # spec: 0th full layer -> split rank 0
    assert m.plan(run).owner_of(0) == 1


def _linear_split(m):
    run = run_spec(QWEN3_5_MOE, split=2, budget_bytes=SMALL)
    for impl, expect_all in ((REF, True), (m, False)):
        local = start_local(impl, run)
        try:
            linear = [l for c in local.caches() for l in c.layers if l.kind == "linear"]
            assert all(l.owned and l.tensors for l in linear) is expect_all
        finally:
            local.teardown()


def _no_scratch_in_estimate(m):
    run = run_spec(DEEPSEEK_V3, split=2)
    ref, mut = REF.plan(run), m.plan(run)
    assert ref.scratch_bytes_per_block > 0 and mut.scratch_bytes_per_block == 0
    assert mut.n_blocks > ref.n_blocks


def _max_block_count(m):
    assert REF.block_count(100, [10, 20]) == 5
    assert m.block_count(100, [10, 20]) == 10
    # DeepSeek-V3 s=2: 31 + scratch vs 30 + scratch; the max overruns the card, which the
    # reference's own card check refuses.
    run = run_spec(DEEPSEEK_V3, split=2)
    REF.plan(run)
    with pytest.raises(PlanError, match="hbm"):
        m.plan(run)


def _draft_keeps_split(m):
    run = run_spec(DEEPSEEK_V3, split=2, budget_bytes=SMALL, draft=DEEPSEEK_MTP)
    for impl, split_size, all_owned in ((REF, 1, True), (m, 2, False)):
        local = start_local(impl, run)
        try:
            drafts = local.caches("draft")
            assert {c.split_size for c in drafts} == {split_size}
            assert all(c.owns_layer_cache(0) for c in drafts) is all_owned
        finally:
            local.teardown()


def _strided_groups(m):
    run = run_spec(DEEPSEEK_V3, split=2)
    assert REF.plan(run).split_groups == ((0, 1), (2, 3))
    assert m.plan(run).split_groups == ((0, 2), (1, 3))


def _tie_groups_reshuffled(m):
    flat = run_spec(DEEPSEEK_V3, split=2)
    assert m.plan(flat).split_groups == REF.plan(flat).split_groups == ((0, 1), (2, 3))  # consecutive: kept
    from harness.suites.case import Case

    case = Case(tc="TC-03", model="deepseek_v32", layerwise="s2", parallel="tp4", implementation="reference",
                extra=("hardware.topology=pcie_2switch_8_interleaved", "parallel.world_size=8"))
    run = case.resolved.run  # tp8 on two interleaved switches: several equally good regroupings
    assert REF.plan(run).split_groups == ((0, 2), (1, 3), (4, 6), (5, 7))
    assert m.plan(run).split_groups == ((0, 6), (1, 3), (2, 4), (5, 7))


def _tie_keeps_consecutive(m):
    from harness.suites.case import Case

    case = Case(tc="TC-03", model="deepseek_v32", layerwise="s2", parallel="tp8", implementation="reference",
                extra=("hardware.topology=pcie_uneven_switches_8",))
    run = case.resolved.run  # consecutive pairs tie on the worst link (PXB) only
    assert REF.plan(run).split_groups == ((0, 3), (1, 2), (4, 7), (5, 6))
    assert m.plan(run).split_groups == ((0, 1), (2, 3), (4, 5), (6, 7))
    interleaved = Case(tc="TC-03", model="deepseek_v32", layerwise="s2", parallel="tp8", implementation="reference",
                       extra=("hardware.topology=pcie_2switch_8_interleaved",)).resolved.run
    assert m.plan(interleaved).split_groups == REF.plan(interleaved).split_groups  # key (1) decides: not its rule


def _capacity_gain_infinite(m):
    no_uniform = run_spec(DEEPSEEK_V32, split=4, budget_bytes=8 << 20)  # 2 split blocks, no uniform one
    assert REF.plan(no_uniform).capacity_gain is None and m.plan(no_uniform).capacity_gain == float("inf")
    fits = run_spec(DEEPSEEK_V32, split=2)
    assert m.plan(fits).capacity_gain == REF.plan(fits).capacity_gain == 2978 / 1562

def _case_run(variant_extra, parallel="tp8", layerwise="s2"):
    """The RunSpec of a default-matrix case of deepseek_v32 with these key overrides."""
    from harness.suites.case import Case

    return Case(tc="TC-03", model="deepseek_v32", layerwise=layerwise, parallel=parallel, implementation="reference",
                extra=variant_extra).resolved.run


def _cross_node_links_from_card_matrix(m):
    run = _case_run(("hardware.topology=pcie_2switch_4", "hardware.num_cards=4"))  # tp 8 over two 4-card nodes
    assert REF.plan(run).split_groups == ((0, 1), (2, 3), (4, 5), (6, 7))
    assert m.plan(run).split_groups == ((0, 4), (1, 5), (2, 6), (3, 7))  # card 0 of node 1 read as card 0's "X"


def _first_replica_grouping_reused(m):
    run = _case_run(("hardware.topology=pcie_4switch_8_mixed",), parallel="dp2_tp4")
    assert REF.plan(run).split_groups == ((0, 2), (1, 3), (4, 5), (6, 7))
    assert m.plan(run).split_groups == ((0, 2), (1, 3), (4, 6), (5, 7))


def _reserve_once_per_card(m):
    run = _case_run(("placement=[0,0,1,1]", "hardware.reserved_mib_per_card=200", "cache.kv_budget_bytes=104857600"),
                    parallel="tp4")
    with pytest.raises(PlanError, match="reserved"):
        REF.plan(run)
    assert m.plan(run).ranks[1].card == 0


def _split_size_against_world(m):
    # world 8 = dp 2 x tp 4, s 8: divides the world, not the TP group; with the host cache on
    run = run_spec(DEEPSEEK_V32, world=8, dp=2, split=8, cache=CacheSpec(host_blocks_factor=2.0))
    with pytest.raises(ConfigError) as ref:
        REF.plan(run)
    with pytest.raises(ConfigError) as mut:
        m.plan(run)
    assert (ref.value.field, mut.value.field) == ("layerwise.split_size", "cache.host_blocks_factor")


def _int8_indexer_target_only(m):
    # an unindexed target (DeepSeek-V3) with an indexed draft (its body at TP 1), no int8 indexer on the cards
    draft = replace(DEEPSEEK_V32, name="deepseek_v32_mtp", num_hidden_layers=1, body_tp1=True)
    base = run_spec(DEEPSEEK_V3, split=2, draft=draft, cache=CacheSpec(indexer_cache_dtype="int8"))
    run = replace(base, hardware=replace(base.hardware, int8_indexer_cache=False))
    with pytest.raises(ConfigError, match="cache.indexer_cache_dtype"):
        REF.plan(run)
    assert m.plan(run).draft.body_tp1


def _group_search_in_card_order(m):
    run = _case_run(("hardware.topology=pcie_2switch_8_interleaved", "placement=[4,1,2,7,0,3,6,5]"))
    assert REF.plan(run).split_groups == ((0, 2), (1, 3), (4, 6), (5, 7))  # the first by ranks
    assert m.plan(run).split_groups == ((0, 6), (1, 5), (2, 4), (3, 7))  # the first by cards
    identity = _case_run(("hardware.topology=pcie_2switch_8_interleaved",))
    assert m.plan(identity).split_groups == REF.plan(identity).split_groups  # cards in rank order: alike


def _card_check_without_draft(m):
    # two ranks per card, DeepSeek-V3.2 + its MTP draft: the draft's 6,127,616 B on card 0 decide it
    run = replace(_case_run(("placement=[0,0,1,1]", "hardware.reserved_mib_per_card=162",
                             "cache.kv_budget_bytes=104857600"), parallel="tp4"),
                  draft=replace(DEEPSEEK_V32, name="deepseek_v32_mtp", num_hidden_layers=1))
    with pytest.raises(PlanError, match="reserved"):
        REF.plan(run)
    assert m.plan(run).ranks[1].card == 0


def _draft_index_from_target(m):
    # DeepSeek-V3 (no indexer) with DeepSeek-V3.2's indexed MTP draft at TP 1, int8 indexer: 128 * (1152 + 132)
    draft = replace(DEEPSEEK_V32, name="deepseek_v32_mtp", num_hidden_layers=1, body_tp1=True)
    run = run_spec(DEEPSEEK_V3, split=2, draft=draft, cache=CacheSpec(indexer_cache_dtype="int8"))
    assert REF.plan(run).draft.layer_bytes_per_block == (164_352,)
    assert m.plan(run).draft.layer_bytes_per_block == (147_456,)  # 128 * 1152: the index slot dropped


def _nonowner_real_storage(m):
    run = run_spec(DEEPSEEK_V3, split=2, budget_bytes=SMALL)
    plan = REF.plan(run)
    not_owned = next(l for l in plan.full_layers if plan.owner_of(l) != 0)
    ref = REF.init_worker(plan, run, rank=0, role="target", device="cpu", expected_digest=plan.digest)
    mut = m.init_worker(plan, run, rank=0, role="target", device="cpu", expected_digest=plan.digest)
    assert not ref.owns_layer_cache(not_owned) and not mut.owns_layer_cache(not_owned)
    assert layer_own_bytes(ref, not_owned) == 0 < layer_own_bytes(mut, not_owned)
    assert cache_bytes(mut) > cache_bytes(ref) == plan.ranks[0].estimated_bytes


def _wrong_layout_axes(m):
    run = run_spec(DEEPSEEK_V3, split=2, budget_bytes=SMALL)
    plan = REF.plan(run)
    assert plan.kv_layout == "heads_major"
    shapes = [impl.init_worker(plan, run, rank=0, role="target", device="cpu",
                               expected_digest=plan.digest).layer(0).tensors["latent"].shape
              for impl in (REF, m)]
    assert shapes[0] == (plan.n_blocks, 1, plan.block_size, 512)
    assert shapes[1] == (plan.n_blocks, plan.block_size, 1, 512)


def _digest_unchecked(m):
    run = run_spec(DEEPSEEK_V3, split=2, budget_bytes=SMALL)
    plan = REF.plan(run)
    tampered = replace(plan, n_blocks=plan.n_blocks - 1)
    with pytest.raises(PlanError, match="digest"):
        REF.init_worker(tampered, run, rank=0, role="target", device="cpu", expected_digest=plan.digest)
    cache = m.init_worker(tampered, run, rank=0, role="target", device="cpu", expected_digest=plan.digest)
    assert cache.n_blocks == plan.n_blocks - 1


def _disabled_still_splits(m):
    run = run_spec(DEEPSEEK_V3, split=2, enable=False)
    ref, mut = REF.plan(run), m.plan(run)
    assert not ref.active and ref.n_blocks == ref.uniform_n_blocks
    assert mut.active and mut.n_blocks > ref.n_blocks


def _index_slot_dropped(m):
    run = run_spec(DEEPSEEK_V32, split=2)
    # FEATURE 6 worked example: 180,224 B/block with the index slot, 147,456 without.
    assert REF.plan(run).layer_bytes_per_block[0] == 180_224
    assert m.plan(run).layer_bytes_per_block[0] == 147_456


def _no_validation_unsupported(m):
    run = run_spec(LLAMA3_8B, split=2)
    with pytest.raises(ConfigError, match=r"^model\.model_type=.*layerwise split"):
        REF.plan(run)
    assert m.plan(run).active


def _draft_additional_ignored(m):
    run = run_spec(DEEPSEEK_V3, split=2, draft=DEEPSEEK_MTP)
    ref, mut = REF.plan(run), m.plan(run)
    assert ref.additional_bytes_per_block == 147_456 and mut.additional_bytes_per_block == 0
    assert mut.n_blocks > ref.n_blocks
    peak = max(r.estimated_bytes + r.draft_estimated_bytes for r in mut.ranks)
    assert peak > run.hardware.kv_budget_bytes  # target + draft no longer fit


def _linear_slots_unpadded(m):
    run = run_spec(QWEN3_5_MOE, split=2, cache=CacheSpec(max_seqs_per_batch=4, enable_prefix_cache=False))
    ref, mut = REF.plan(run).linear_state_bytes, m.plan(run).linear_state_bytes
    # max_seqs_per_batch 4 without prefix cache: 4 slots instead of 4 + 2
    assert mut * 6 == ref * 4 and ref > 0


def _scale_bytes_missing(m):
    run = run_spec(DEEPSEEK_V3, split=2, cache=CacheSpec(kv_cache_dtype="int8"))
    # int8 MLA: 128 * (576 + 4 scale) = 74,240 B/block; without the scale 73,728.
    assert REF.plan(run).layer_bytes_per_block[0] == 74_240
    assert m.plan(run).layer_bytes_per_block[0] == 73_728


def _card_check_skipped(m):
    # Ranks 0 and 2 share card 0, each with the whole per-card KV budget: twice its HBM.
    run = replace(run_spec(DEEPSEEK_V3, split=2), placement=(0, 1, 0, 1))
    with pytest.raises(PlanError, match="hbm"):
        REF.plan(run)
    assert m.plan(run).ranks[2].card == 0


def _cp_split_accepted(m):
    run = run_spec(DEEPSEEK_V3, world=8, cp=2, split=2)
    with pytest.raises(ConfigError, match="parallel.cp_size"):
        REF.plan(run)
    assert m.plan(run).active
    # one rule only: the effective KV split (0 follows cp) and every other startup rule still refuse
    follow_cp = run_spec(DEEPSEEK_V3, world=8, cp=2, split=2, kv_split_size=0)
    with pytest.raises(ConfigError, match="parallel.kv_split_size"):
        m.plan(follow_cp)
    hybrid_draft = replace(DEEPSEEK_MTP, index_n_heads=64, index_head_dim=128, layer_types=("linear_attention",))
    both = run_spec(DEEPSEEK_V3, world=8, cp=2, split=2, draft=hybrid_draft)
    with pytest.raises(ConfigError, match="parallel.cp_size"):  # the master's cp rule first (FEATURE 3 order)
        REF.plan(both)
    with pytest.raises(ConfigError, match="draft.index_n_heads"):  # the worker-side rule after it still refuses
        m.plan(both)


def _kv_split_accepted(m):
    run = run_spec(DEEPSEEK_V3, split=2, kv_split_size=2)
    with pytest.raises(ConfigError, match="parallel.kv_split_size"):
        REF.plan(run)
    assert m.plan(run).active


def _host_cache_wrong_field(m):
    run = run_spec(DEEPSEEK_V3, split=2, cache=CacheSpec(host_blocks_factor=2.0))
    with pytest.raises(ConfigError) as ref:
        REF.plan(run)
    with pytest.raises(PlanError) as mut:
        m.plan(run)
    assert ref.value.field == "cache.host_blocks_factor" != mut.value.field


def _split_rank_mod_s(m):
    from harness.paths import TOPOLOGY_DIR
    from implementations.reference.topology import load_topology

    base = run_spec(QWEN3_5_MOE, split=2, budget_bytes=SMALL, num_cards=8)
    run = replace(base, hardware=replace(base.hardware, topology=load_topology("pcie_2switch_8_interleaved", TOPOLOGY_DIR)))
    plan = REF.plan(run)
    assert plan.split_groups == ((0, 2), (1, 3))  # even/odd switches: position of rank 2 is 1, not 2 % 2
    assert REF.ownership_mask(plan, 2) != m.ownership_mask(plan, 2)
    cache = m.init_worker(plan, run, rank=2, role="target", device="cpu", expected_digest=plan.digest)
    assert cache.split_rank == 0 != plan.ranks[2].split_rank


def _peak_scratch_omitted(m):
    run = run_spec(DEEPSEEK_V3, split=2)
    ref, mut = REF.plan(run), m.plan(run)
    assert mut.n_blocks == ref.n_blocks
    assert ref.peak_bytes - mut.peak_bytes <= ref.n_blocks * ref.scratch_bytes_per_block
    assert max(r.estimated_bytes for r in ref.ranks) - max(r.estimated_bytes for r in mut.ranks) > 0
    assert sorted(r.estimated_bytes for r in mut.ranks) != sorted(r.estimated_bytes for r in ref.ranks)


def _scale_missing_in_estimate(m):
    run = run_spec(DEEPSEEK_V3, split=2, cache=CacheSpec(kv_cache_dtype="int8"))
    ref, mut = REF.plan(run), m.plan(run)
    assert mut.n_blocks == ref.n_blocks and mut.layer_bytes_per_block == ref.layer_bytes_per_block
    # int8 MLA: 4 of 580 bytes per slot are the scale
    assert ref.ranks[0].estimated_bytes - mut.ranks[0].estimated_bytes == ref.n_blocks * 128 * 4 * 32  # 31 owned + scratch


def _savings_at_uniform_blocks(m):
    run = run_spec(DEEPSEEK_V3, split=2)
    ref, mut = REF.plan(run), m.plan(run)
    assert ref.uniform_n_blocks < ref.n_blocks
    assert mut.uniform_peak_bytes < ref.uniform_peak_bytes and mut.savings_bytes < ref.savings_bytes


def _quantized_view_reshaped(m):
    import torch

    run = run_spec(DEEPSEEK_V3, split=2, budget_bytes=SMALL, cache=CacheSpec(kv_cache_dtype="int8"))
    plan = REF.plan(run)
    not_owned = next(l for l in plan.full_layers if plan.owner_of(l) != 0)
    ref = REF.init_worker(plan, run, rank=0, role="target", device="cpu", expected_digest=plan.digest)
    mut = m.init_worker(plan, run, rank=0, role="target", device="cpu", expected_digest=plan.digest)
    assert ref.layer(not_owned).tensors["latent_scale"].dtype == torch.float32
    assert mut.layer(not_owned).tensors["latent_scale"].dtype == torch.uint8
    assert layer_own_bytes(mut, not_owned) == 0 and cache_bytes(mut) == cache_bytes(ref)


def _quantized_refused_by_worker(m):
    run = run_spec(DEEPSEEK_V32, split=2, budget_bytes=SMALL, cache=CacheSpec(kv_cache_dtype="int8"))
    plan = m.plan(run)
    assert plan.n_blocks == REF.plan(run).n_blocks  # the master plans it as the reference does
    REF.init_worker(plan, run, rank=0, role="target", device="cpu", expected_digest=plan.digest)
    with pytest.raises(ConfigError) as err:
        m.init_worker(plan, run, rank=0, role="target", device="cpu", expected_digest=plan.digest)
    assert err.value.field == "cache.kv_cache_dtype"


def _draft_leaks_storage(m):
    import gc

    from torch.multiprocessing.reductions import StorageWeakRef

    run = run_spec(DEEPSEEK_V3, split=2, budget_bytes=SMALL, draft=DEEPSEEK_MTP)
    plan = REF.plan(run)
    message = REF.engine_message(plan, run, "draft")
    for impl, leaked in ((REF, False), (m, True)):
        cache = impl.init_worker(message, run, rank=0, role="draft", device="cpu", expected_digest=message.digest)
        ref = StorageWeakRef(next(iter(cache.layers[0].tensors.values())).untyped_storage())
        del cache
        gc.collect()
        assert ref.expired() is not leaked


def _conv_state_transposed(m):
    run = run_spec(QWEN3_5_MOE, split=2, budget_bytes=SMALL)
    plan = REF.plan(run)
    linear = next(l for l in range(run.model.num_hidden_layers) if l not in plan.full_layers)
    ref = REF.init_worker(plan, run, rank=0, role="target", device="cpu", expected_digest=plan.digest)
    mut = m.init_worker(plan, run, rank=0, role="target", device="cpu", expected_digest=plan.digest)
    a, b = ref.layer(linear).tensors["conv"].shape, mut.layer(linear).tensors["conv"].shape
    assert (b[0], b[1], b[2]) == (a[0], a[2], a[1]) and a[1] != a[2]  # transposed, same bytes
    off = run_spec(QWEN3_5_MOE, split=2, enable=False, budget_bytes=SMALL)
    plan_off = REF.plan(off)
    kept = m.init_worker(plan_off, off, rank=0, role="target", device="cpu", expected_digest=plan_off.digest)
    assert kept.layer(linear).tensors["conv"].shape == REF.init_worker(
        plan_off, off, rank=0, role="target", device="cpu", expected_digest=plan_off.digest).layer(linear).tensors["conv"].shape


def _mean_rounded(m):
    # TC-02's uneven-mean case: 3 ranks of 122,912,768 + 2 x 117,325,824 B, mean 119,188,138.67
    run = _case_run(("parallel.world_size=3", "layerwise.split_size=3", "cache.kv_budget_bytes=123000000"),
                    parallel="tp4")
    assert REF.plan(run).mean_bytes == 119_188_138
    assert m.plan(run).mean_bytes == 119_188_139


def _conv_value_channels_value_dim(m):
    model = replace(QWEN3_5_MOE, linear_value_head_dim=256)  # key dim 128: conv channels 2*128*4 + 128*8 = 2048
    run = run_spec(model, split=2, budget_bytes=SMALL)
    plan = REF.plan(run)
    linear = next(l for l in range(model.num_hidden_layers) if l not in plan.full_layers)
    ref = REF.init_worker(plan, run, rank=0, role="target", device="cpu", expected_digest=plan.digest)
    mut = m.init_worker(plan, run, rank=0, role="target", device="cpu", expected_digest=plan.digest)
    assert ref.layer(linear).tensors["conv"].shape[2] == 2048
    assert mut.layer(linear).tensors["conv"].shape[2] == 2 * 128 * 4 + 256 * 8  # the estimate's channels
    same = run_spec(QWEN3_5_MOE, split=2, budget_bytes=SMALL)  # equal head dims: no difference
    plan = REF.plan(same)
    assert m.init_worker(plan, same, rank=0, role="target", device="cpu", expected_digest=plan.digest).layer(
        linear).tensors["conv"].shape == REF.init_worker(plan, same, rank=0, role="target", device="cpu",
                                                         expected_digest=plan.digest).layer(linear).tensors["conv"].shape


def _draft_message_split_fields(m):
    run = run_spec(DEEPSEEK_V3, split=2, budget_bytes=SMALL, draft=DEEPSEEK_MTP)
    ref, mut = REF.draft_message(REF.plan(run), run), m.draft_message(m.plan(run), run)
    assert (ref.split_size, ref.split_groups, ref.ranks[1].split_rank) == (1, ((0,), (1,), (2,), (3,)), 0)
    assert (mut.split_size, mut.split_groups, mut.ranks[1].split_rank) == (2, ((0, 1), (2, 3)), 1)
    assert not mut.active  # so its workers still reset to 1 / rank 0
    local = start_local(m, run)
    try:
        assert {(c.split_size, c.split_rank) for c in local.caches("draft")} == {(1, 0)}
    finally:
        local.teardown()


def _refused_by_reference_only(m, run, field):
    with pytest.raises(ConfigError, match=field):
        REF.plan(run)
    assert m.plan(run).n_blocks >= 1


def _refused_naming_another_field(m, run, field):
    with pytest.raises(PlanError) as ref:
        REF.plan(run)
    with pytest.raises(PlanError) as mut:
        m.plan(run)
    assert ref.value.field == field != mut.value.field


def _plans_differ(m, run, attr):
    assert getattr(m.plan(run), attr) != getattr(REF.plan(run), attr)


NO_QUANT = replace(run_spec(DEEPSEEK_V32, split=2), hardware=hardware(4, quantized=False))
QWEN_DRAFT = run_spec(QWEN3_5_MOE, split=2, draft=QWEN3_5_MTP)
SPELLED = run_spec(replace(QWEN3_5_MOE, layer_types=tuple(
    "attention" if (l + 1) % 4 == 0 else "linear_attention" for l in range(40))), split=2)
OVER_CAP = run_spec(QWEN3_5_MOE, split=2, cache=CacheSpec(max_linear_state_cache_slots=100000))
TP1_DRAFT = run_spec(QWEN3_5_MOE, split=2, draft=replace(QWEN3_5_MTP, body_tp1=True))


def _names_another_field(m, run, field, mutant_field):
    with pytest.raises(ConfigError) as ref:
        REF.plan(run)
    with pytest.raises(ConfigError) as mut:
        m.plan(run)
    assert (ref.value.field, mut.value.field) == (field, mutant_field)


DIFFERS: dict[str, Callable] = {
    "world_remainder_dropped": lambda m: _names_another_field(
        m, run_spec(DEEPSEEK_V32, split=2, dp=3), "parallel.world_size", "layerwise.split_size"),
    "tp_mod_s_before_model_type": lambda m: _names_another_field(
        m, run_spec(LLAMA3_8B, split=3), "model.model_type", "layerwise.split_size"),
    "split_size_below_one_accepted": lambda m: _refused_by_reference_only(
        m, run_spec(DEEPSEEK_V32, split=0), "layerwise.split_size"),
    "sleep_mode_accepted": lambda m: _refused_by_reference_only(
        m, run_spec(DEEPSEEK_V32, split=2, cache=CacheSpec(enable_sleep_mode=True)), "cache.enable_sleep_mode"),
    "xtensor_accepted": lambda m: _refused_by_reference_only(
        m, run_spec(DEEPSEEK_V32, split=2, cache=CacheSpec(enable_xtensor=True)), "cache.enable_xtensor"),
    "quantized_cache_accepted": lambda m: _refused_by_reference_only(
        m, replace(NO_QUANT, cache=CacheSpec(kv_cache_dtype="fp8_e4m3")), "cache.kv_cache_dtype"),
    "linear_with_indexer_accepted": lambda m: (
        pytest.raises(ConfigError, REF.plan, run_spec(replace(QWEN3_5_MOE, index_n_heads=64, index_head_dim=128))),
        m.validate(run_spec(replace(QWEN3_5_MOE, index_n_heads=64, index_head_dim=128)))),
    "interval_off_by_one": lambda m: _plans_differ(m, run_spec(QWEN3_NEXT, split=2), "full_layers"),
    "gqa_heads_not_divided": lambda m: _plans_differ(m, run_spec(LLAMA3_8B), "layer_bytes_per_block"),
    "mla_rope_dropped": lambda m: _plans_differ(m, run_spec(DEEPSEEK_V3, split=2), "layer_bytes_per_block"),
    "speculative_state_ignored": lambda m: _plans_differ(
        m, run_spec(QWEN3_5_MOE, split=2, cache=CacheSpec(num_speculative_tokens=2)), "linear_slot_size"),
    "ssm_dtype_ignored": lambda m: _plans_differ(
        m, run_spec(replace(QWEN3_5_MOE, mamba_ssm_dtype="float32"), split=2), "linear_slot_size"),
    "fixed_slots_unpadded": lambda m: _plans_differ(
        m, run_spec(QWEN3_5_MOE, split=2, cache=CacheSpec(max_linear_state_cache_slots=8)), "num_linear_state_blocks"),
    "prefix_cache_ignored": lambda m: _plans_differ(m, run_spec(QWEN3_5_MOE, split=2), "num_linear_state_blocks"),
    "capacity_gain_inverted": lambda m: _plans_differ(m, run_spec(DEEPSEEK_V32, split=2), "capacity_gain"),
    "capacity_gain_infinite": _capacity_gain_infinite,
    "raises_peak_unnoted": lambda m: _plans_differ(m, run_spec(replace(DEEPSEEK_V3, num_hidden_layers=1), split=2),
                                                   "notes"),
    "draft_body_tp1_ignored": lambda m: (  # its own (TP 1) slot exceeds the target's: refused as too large
        REF.plan(TP1_DRAFT), pytest.raises(ConfigError, m.plan, TP1_DRAFT)),
    "uniform_ignores_draft": lambda m: _plans_differ(m, QWEN_DRAFT, "uniform_n_blocks"),
    "attention_spelling_linear": lambda m: (  # no full layer left to split: refused
        REF.plan(SPELLED), pytest.raises(PlanError, m.plan, SPELLED)),
    "int8_index_scale_missing": lambda m: _plans_differ(
        m, run_spec(DEEPSEEK_V32, split=2, cache=CacheSpec(indexer_cache_dtype="int8")), "layer_bytes_per_block"),
    "slot_cap_unchecked": lambda m: _refused_naming_another_field(m, OVER_CAP, "cache.max_linear_state_cache_slots"),
    "draft_own_shape": lambda m: _plans_differ(
        m, run_spec(DEEPSEEK_V32, split=2, draft=replace(DEEPSEEK_V32, name="mtp", num_hidden_layers=1,
                                                           kv_lora_rank=256)), "additional_bytes_per_block"),
    "owner_off_by_one": _owner_off_by_one,
    "linear_split": _linear_split,
    "no_scratch_in_estimate": _no_scratch_in_estimate,
    "max_block_count": _max_block_count,
    "draft_keeps_split": _draft_keeps_split,
    "strided_groups": _strided_groups,
    "tie_groups_reshuffled": _tie_groups_reshuffled,
    "tie_keeps_consecutive": _tie_keeps_consecutive,
    "nonowner_real_storage": _nonowner_real_storage,
    "wrong_layout_axes": _wrong_layout_axes,
    "digest_unchecked": _digest_unchecked,
    "disabled_still_splits": _disabled_still_splits,
    "index_slot_dropped": _index_slot_dropped,
    "no_validation_unsupported": _no_validation_unsupported,
    "draft_additional_ignored": _draft_additional_ignored,
    "linear_slots_unpadded": _linear_slots_unpadded,
    "scale_bytes_missing": _scale_bytes_missing,
    "card_check_skipped": _card_check_skipped,
    "cp_split_accepted": _cp_split_accepted,
    "kv_split_accepted": _kv_split_accepted,
    "host_cache_wrong_field": _host_cache_wrong_field,
    "split_rank_mod_s": _split_rank_mod_s,
    "peak_scratch_omitted": _peak_scratch_omitted,
    "scale_missing_in_estimate": _scale_missing_in_estimate,
    "savings_at_uniform_blocks": _savings_at_uniform_blocks,
    "quantized_view_reshaped": _quantized_view_reshaped,
    "draft_leaks_storage": _draft_leaks_storage,
    "conv_state_transposed": _conv_state_transposed,
    "cross_node_links_from_card_matrix": _cross_node_links_from_card_matrix,
    "first_replica_grouping_reused": _first_replica_grouping_reused,
    "reserve_once_per_card": _reserve_once_per_card,
    "mean_rounded": _mean_rounded,
    "conv_value_channels_value_dim": _conv_value_channels_value_dim,
    "draft_message_split_fields": _draft_message_split_fields,
    "quantized_refused_by_worker": _quantized_refused_by_worker,
    "split_size_against_world": _split_size_against_world,
    "int8_indexer_target_only": _int8_indexer_target_only,
    "group_search_in_card_order": _group_search_in_card_order,
    "card_check_without_draft": _card_check_without_draft,
    "draft_index_from_target": _draft_index_from_target,
}


def test_every_mutant_has_a_difference_check():
    assert set(DIFFERS) == set(MUTANTS)


@pytest.mark.parametrize("key", sorted(MUTANTS))
def test_mutant_differs_from_reference(key):
    DIFFERS[key](MUTANTS[key]())
