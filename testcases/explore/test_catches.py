"""The explorer catches broken implementations, shrinks the failure and prints a command that
reproduces its plan; the ownership properties, the oracle corrections it led to and the spec's
open questions are pinned on minimal configurations."""

from __future__ import annotations

import shlex
from dataclasses import replace

import pytest

from contract.specs import CacheSpec, LayerwiseFlags, ModelSpec, ParallelSpec, RunSpec, Topology
from harness import oracle
from harness.explore import known, reproduce
from harness.explore.properties import ownership_problems
from harness.explore.runner import InProcessRunner, runner_for
from harness.explore.search import CI_EXAMPLES, explore
from harness.explore.strategies import base_hardware
from harness.suites.case import resolve
from harness.suites.matrix import load_matrix
from implementations.reference import ReferenceImplementation

MATRIX = "ci"
LOCAL = "testcases.explore.mutants"

LINEAR_HEADS = ("implementation=reference", f"implementation._target_={LOCAL}.LinearHeadsNotReplicated")

# (implementation overrides, level, examples, the checks one of which must name it). Not shrunk here
# (the first failing draw is enough to show the catch); ``linear_heads_finding`` shrinks.
CATCHES = [
    (("implementation=mutant_owner_off_by_one",), False, 40, ("ownership", "TC-02")),
    (("implementation=mutant_no_scratch_in_estimate",), False, 40, ("TC-02", "estimation")),
    (("implementation=mutant_linear_split",), True, 30, ("TC-01",)),
    (("implementation=mutant_nonowner_real_storage",), True, 30, ("TC-01",)),
    (("implementation=mutant_draft_keeps_split",), True, 40, ("TC-07",)),
    (("implementation=reference", f"implementation._target_={LOCAL}.IdleRanksUnnoted"), False, 300, ("ownership",)),
    # topology bugs only a TP group across two nodes, or dp replicas on differently wired cards, show
    (("implementation=mutant_cross_node_links_from_card_matrix",), False, 60,
     ("TC-02", "TC-03")),
    (("implementation=mutant_first_replica_grouping_reused",), False, 60,
     ("TC-02", "TC-03")),
    # the last corners, each at CI's plan-level budget: s checked against the world at dp 2 with a later rule,
    # a rule of both engines applied to the target alone, a group search in card order under a permuted
    # placement, a card check without the draft's KV
    (("implementation=reference", f"implementation._target_={LOCAL}.SplitCheckedAgainstWorld"), False,
     CI_EXAMPLES[False], ("TC-01",)),
    (("implementation=reference", f"implementation._target_={LOCAL}.IndexerRuleOnTargetOnly"), False,
     CI_EXAMPLES[False], ("TC-01",)),
    (("implementation=reference", f"implementation._target_={LOCAL}.GroupsSearchedInCardOrder"), False,
     CI_EXAMPLES[False], ("TC-02", "TC-03", "ownership")),
    (("implementation=reference", f"implementation._target_={LOCAL}.CardCheckWithoutDraft"), False,
     CI_EXAMPLES[False], ("estimation", "TC-03")),
]


def _runner(overrides) -> InProcessRunner:
    return InProcessRunner(overrides[0].split("=", 1)[1], resolve(tuple(overrides)).impl_cfg, tuple(overrides))


@pytest.mark.parametrize("overrides,allocate,examples,checks", CATCHES,
                         ids=[o[-1].rsplit(".", 1)[-1].split("=")[-1] for o, *_ in CATCHES])
def test_explorer_catches(overrides, allocate, examples, checks):
    finding = explore(_runner(overrides), examples=examples, allocate=allocate, shrink=False)
    assert finding is not None, f"{overrides} passed {examples} drawn configurations"
    assert any(f.startswith(checks) for f in finding.failures), finding.report()
    assert "python -m harness.plan --table" in finding.report() and overrides[-1] in finding.command()


@pytest.fixture(scope="module")
def linear_heads_finding():
    """The bug no default-matrix case sees, explored and shrunk."""
    finding = explore(_runner(LINEAR_HEADS), examples=500, allocate=False)
    assert finding is not None, "LinearHeadsNotReplicated passed 500 drawn configurations"
    return finding


def test_explorer_catches_what_the_default_matrix_cannot_see(linear_heads_finding):
    run = linear_heads_finding.run
    assert any(f.startswith(("TC-02", "estimation")) for f in linear_heads_finding.failures)
    # shrunk to the bug's shape: fewer GDN key heads than attention TP ranks (the plan's linear slot size shows
    # it even where no layer is linear)
    assert 0 < run.model.linear_num_key_heads < oracle.attn_tp_size(run)


def test_printed_command_reproduces_the_plan(linear_heads_finding, capsys):
    """The shrunk configuration's command, run as ``python -m harness.plan`` runs it, reads exactly what was
    explored from its file and plans it."""
    from harness.config import spec_file
    from harness.plan import main

    argv = shlex.split(linear_heads_finding.command())[3:]
    assert argv[:2] == ["--table", spec_file.OPTION] and spec_file.read(argv[2]) == linear_heads_finding.run, argv
    try:
        code = main(argv)
    except SystemExit as exc:  # a config the spec cannot plan: one error line, exit 2
        code = exc.code
    out = capsys.readouterr()
    assert code == 0 or "error:" in out.err  # a config the spec cannot plan is refused in one error line
    assert f"model {linear_heads_finding.run.model.name}" in out.out or "error:" in out.err


def test_default_matrix_cannot_see_linear_heads_not_replicated():
    """Every model and layout of the default matrix plans the same with and without the bug: only a model
    with fewer GDN key heads than TP ranks (which the explorer draws) shows it."""
    matrix = load_matrix(MATRIX)
    broken = _runner(("implementation=reference", f"implementation._target_={LOCAL}.LinearHeadsNotReplicated"))
    reference = ReferenceImplementation()
    seen = 0
    for model in matrix.models:
        for parallel in matrix.parallel:
            run = resolve((f"model={model}", f"parallel={parallel}", "layerwise=s2")).run
            if oracle.expected_rejection(run) is not None:
                continue
            want = replace(reference.plan(run), implementation="")
            assert replace(broken.impl_cfg and _build(broken).plan(run), implementation="") == want, (model, parallel)
            seen += 1
    assert seen >= 6


def _build(runner):
    from harness.suites.bring_up import instantiate

    return instantiate(runner.impl_cfg)


def test_the_reproduce_file_reads_back_the_drawn_configuration(tmp_path):
    from harness.config import spec_file
    from harness.explore.search import drawn_strings
    from harness.explore.strategies import decode

    for one in drawn_strings(5, 12):
        run = decode(one)
        assert spec_file.read(reproduce.spec_path(run, tmp_path)) == run


# ---- ownership properties (item of the explorer: SGLang's statements) ------------------------


def _mla(layers: int, s: int) -> RunSpec:
    model = ModelSpec(name="tiny", model_type="deepseek_v3", num_hidden_layers=layers, attention="mla",
                      kv_lora_rank=512, qk_rope_head_dim=64)
    return RunSpec(model=model, parallel=ParallelSpec(world_size=4), cache=CacheSpec(block_size=16,
                   kv_budget_bytes=1 << 22), layerwise=LayerwiseFlags(enable=True, split_size=s),
                   hardware=base_hardware("cpu"))


def test_idle_split_ranks_are_noted_as_the_oracle_says():
    run = _mla(layers=1, s=4)  # one full layer, four split ranks: ranks 1..3 own nothing
    plan = ReferenceImplementation().plan(run)
    assert ownership_problems(plan, run, "reference") == []
    assert any("split ranks [1, 2, 3] own no full-attention layer" in n for n in plan.notes)
    unnoted = replace(plan, notes=())
    assert [p.rule for p in ownership_problems(unnoted, run, "reference")] == ["notes"]
    busy = ReferenceImplementation().plan(_mla(layers=8, s=4))
    false_note = replace(busy, notes=("split ranks [3] own no full-attention layer",))
    assert [p.rule for p in ownership_problems(false_note, _mla(layers=8, s=4), "reference")] == ["notes"]


def test_ownership_properties_catch_double_owners_and_imbalance():
    run = _mla(layers=5, s=2)
    plan = ReferenceImplementation().plan(run)
    assert ownership_problems(plan, run, "reference") == []
    r0, r1 = plan.ranks[0], plan.ranks[1]
    twice = replace(plan, ranks=(replace(r0, owned_full_layers=(0, 1, 2, 3, 4)), r1, *plan.ranks[2:]))
    assert {p.rule for p in ownership_problems(twice, run, "reference")} == {"coverage", "balance"}
    swapped = replace(plan, ranks=(replace(r0, owned_full_layers=(0, 1, 2, 3)), replace(r1, owned_full_layers=(4,)),
                                   *plan.ranks[2:]))
    assert {p.rule for p in ownership_problems(swapped, run, "reference")} == {"balance"}


# ---- oracle corrections (upstream's formulas) ---------------------------------------------------


def test_oracle_replicates_linear_heads_below_one_per_rank():
    """upstream llm_engine.cpp: n_local_linear_k_heads_ = std::max<int64_t>(1, linear_n_k_heads / world_size)."""
    model = ModelSpec(name="h", model_type="qwen3_next", num_hidden_layers=4, attention="gqa", num_key_value_heads=2,
                      head_dim=128, full_attention_interval=2, linear_num_key_heads=4, linear_num_value_heads=32,
                      linear_key_head_dim=128, linear_value_head_dim=128, linear_conv_kernel_dim=4)
    assert oracle.linear_local_heads(model, 8) == (1, 4)
    conv = 2 * (2 * 128 * 1 + 128 * 4) * 3
    recurrent = 2 * 4 * 128 * 128
    assert oracle.expected_linear_state_bytes_per_slot(model, CacheSpec(), 8) == conv + recurrent


def test_oracle_counts_one_layer_for_a_model_without_full_attention():
    """upstream kv_cache_estimation.cpp standard_full_cache_block_size_in_bytes: max(full layers, 1)."""
    model = ModelSpec(name="h", model_type="qwen3_next", num_hidden_layers=2, attention="gqa", num_key_value_heads=2,
                      head_dim=128, layer_types=("linear_attention",) * 2, linear_num_key_heads=16,
                      linear_num_value_heads=32, linear_key_head_dim=128, linear_value_head_dim=128,
                      linear_conv_kernel_dim=4)
    cache = CacheSpec(block_size=16, kv_budget_bytes=1 << 24)
    assert oracle.expected_full_bytes_per_block(model, cache, 4) == 0
    assert oracle.expected_block_cost_bytes(model, cache, 4) == 16 * 2 * 2 * 128 * 1
    run = RunSpec(model=model, parallel=ParallelSpec(world_size=4), cache=cache, hardware=base_hardware("cpu"))
    plan = ReferenceImplementation().plan(run)
    assert plan.n_blocks == oracle.expected_block_counts(run, cache.kv_budget_bytes)[1]


# ---- the spec's questions FEATURE 2.2 settled: each pinned configuration now passes ------------------


def _tree_topology() -> Topology:
    links = (("X", "PXB", "PXB", "PIX"), ("PXB", "X", "PXB", "PXB"), ("PXB", "PXB", "X", "PXB"),
             ("PIX", "PXB", "PXB", "X"))
    return Topology(cards=("GPU0", "GPU1", "GPU2", "GPU3"), links=links, name="explore_links_pinned")


def _verdict(run, allocate: bool = False):
    return runner_for(load_matrix(MATRIX, ["implementation=reference"]), "reference").verdict(run, allocate=allocate)


def test_no_question_is_open():
    assert known.KNOWN == () and known.open_question(_mla(layers=1, s=2)) is None


def test_settled_grouping_tie_is_judged_by_the_grouping_key():
    """Cards 0 and 3 share a switch, 1 and 2 hang off others: consecutive groups tie on the worst link (PXB)
    only; FEATURE 4's key (2) takes {0,3},{1,2}, and a plan keeping consecutive groups fails."""
    run = replace(_mla(layers=2, s=2), hardware=replace(base_hardware("cpu"), num_cards=4, topology=_tree_topology()))
    assert oracle.expected_split_groups(run) == [[0, 3], [1, 2]]
    verdict = _verdict(run)
    assert verdict.failures == () and not verdict.open_question
    kept = _runner(("implementation=mutant_tie_keeps_consecutive",)).verdict(run, allocate=False)
    assert any("consecutive groups are not optimal but were kept" in f for f in kept.failures), kept


def test_settled_capacity_gain_is_null_without_a_uniform_block():
    run = _mla(layers=8, s=4)
    per_layer = oracle.expected_scratch_bytes_per_block(run.model, run.cache, 4)
    run = replace(run, cache=replace(run.cache, kv_budget_bytes=4 * per_layer))  # 2 + scratch fit; 8 do not
    assert oracle.expected_block_counts(run, 4 * per_layer) == (1, 0)
    verdict = _verdict(run)
    assert verdict.failures == () and not verdict.open_question
    infinite = _runner(("implementation=mutant_capacity_gain_infinite",)).verdict(run, allocate=False)
    assert any("capacity gain" in f and "plan inf, spec None" in f for f in infinite.failures), infinite


def test_settled_split_that_raises_the_peak_is_noted_not_failed():
    run = _mla(layers=1, s=2)
    assert oracle.expected_split_raises_peak(run)
    verdict = _verdict(run, allocate=True)
    assert verdict.failures == () and not verdict.open_question
    unnoted = _runner(("implementation=mutant_raises_peak_unnoted",)).verdict(run, allocate=False)
    assert any("the split raises the peak" in f for f in unnoted.failures), unnoted


# ---- the explorer's own refusal rules, each with a broken implementation it catches --------------


def _with_budget(run, budget: int) -> RunSpec:
    return replace(run, cache=replace(run.cache, kv_budget_bytes=budget))


def test_unplannable_budget_must_be_refused():
    run = _with_budget(_mla(layers=8, s=2), 1)
    assert oracle.expected_estimation_rejection(run) is not None
    assert _verdict(run).failures == ()
    broken = _runner(("implementation=reference", f"implementation._target_={LOCAL}.BlockCountAtLeastOne"))
    failures = broken.verdict(run, allocate=False).failures
    assert len(failures) == 1 and failures[0].startswith("estimation: master accepted a config the spec cannot plan")


def test_card_overflow_must_be_refused():
    """7 full layers at s = 2: split rank 0 holds 4 + scratch, rank 1 3 + scratch. A budget 10% above what a
    card holds beside its reserve overfills rank 0's cards but not rank 1's, so TC-03's lower bound (the
    least-loaded rank) lets it through and the exact rule must refuse it."""
    from harness.suites.expectations import card_overflow

    hw = base_hardware("cpu")
    run = _with_budget(_mla(layers=7, s=2), int((hw.hbm_bytes_per_card - hw.reserved_bytes_per_card) * 1.1))
    assert card_overflow(run) and oracle.expected_estimation_rejection(run) is None
    from harness.oracle import spec_refuses_cards

    assert not spec_refuses_cards(run)
    assert _verdict(run).failures == ()
    failures = _runner(("implementation=mutant_card_check_skipped",)).verdict(run, allocate=False).failures
    assert any(f.startswith("estimation: master accepted") and "HBM" in f for f in failures), failures


def test_flag_ignored_variant_must_split():
    """``xllm_upstream`` with the flag off and s = 2 is predicted to split; an implementation that honours the
    flag under that name (the reference) is caught."""
    run = replace(_mla(layers=8, s=2), layerwise=LayerwiseFlags(enable=False, split_size=2))
    run = replace(run, model=replace(run.model, model_type="deepseek_v32", index_n_heads=64, index_head_dim=128))
    honest = runner_for(load_matrix(MATRIX, ["implementation=xllm_upstream"]), "xllm_upstream")
    assert honest.verdict(run, allocate=False).failures == ()
    disguised = InProcessRunner("xllm_upstream", resolve(("implementation=reference",)).impl_cfg)
    failures = disguised.verdict(run, allocate=False).failures
    assert len(failures) == 1 and failures[0].startswith("flag:"), failures


def test_plan_level_compares_every_plan_field():
    """Every field of the master's plan (``KVPlan``, each ``RankPlan``, the ``DraftPlan``) corrupted alone
    (``FieldMutant``) fails a plan-level verdict on the first drawn configurations that show it: the plan
    level compares every field, the layout's included, not only the allocation level."""
    from implementations.mutants.fields import field_ids
    from tools.bench.explore import drawn

    runs = drawn(6, 1)
    reference = dict(resolve(("implementation=reference",)).impl_cfg)
    missed = []
    for field in (f for f in field_ids() if f.startswith(("KVPlan.", "RankPlan.", "DraftPlan."))):
        impl_cfg = {**reference, "_target_": "implementations.mutants.fields.FieldMutant", "field": field}
        runner = InProcessRunner("reference", impl_cfg)
        if not any(runner.verdict(run, allocate=False).failures for run in runs):
            missed.append(field)
    assert not missed, f"plan fields no plan-level verdict compares: {missed}"
