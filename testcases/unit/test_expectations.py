"""The suites' declared contracts and the spec's predictions, without processes.

Each TC module declares a checked ``harness.suites.Suite``; rank facts are frozen, picklable data;
rejections name the field of the rule a case breaks; expected ownership comes from the
spec's split groups (regrouped topologies included); a predicted failure is strict.
"""

from __future__ import annotations

import dataclasses
import importlib
import pickle
import types

import pytest

from harness.suites import TC_MODULES, Suite, check_suite, load_suite, ownership
from harness.suites.case import Case
from harness.suites.expectations import (
    NATIVE_PLANNING_ONLY,
    Predicted,
    Prediction,
    Problem,
    expected_rejection,
    judge,
    prediction,
)
from harness.suites.facts import LayerFacts, LeakFacts, MasterError, RankFacts, TensorFacts, WorkerFacts
from harness.suites.matrix import load_matrix
from harness.suites.tc01 import REJECTIONS

pytestmark = pytest.mark.unit

WANT_FIELD = {
    "s0": "layerwise.split_size",
    "s-gt-tp": "layerwise.split_size",
    "s-not-dividing-tp": "layerwise.split_size",
    "world-not-dp-cp": "parallel.world_size",
    "unsupported-model": "model.model_type",
    "cp2": "parallel.cp_size",
    "kv-split": "parallel.kv_split_size",
    "hostcache": "cache.host_blocks_factor",
    "sleep-mode": "cache.enable_sleep_mode",
    "xtensor": "cache.enable_xtensor",
    "linear-and-indexer": "model.index_n_heads",
    "quantized-unsupported": "cache.kv_cache_dtype",
    "fp8-unsupported": "cache.kv_cache_dtype",
    "int8-indexer-unsupported": "cache.indexer_cache_dtype",
    "s-negative": "layerwise.split_size",
    "s0-flag-off": "layerwise.split_size",
    "cp2-dp2": "parallel.cp_size",
    "s-not-dividing-tp-dp2": "layerwise.split_size",
    "slots-over-cap": "cache.max_linear_state_cache_slots",
    "model-before-tp-mod-s": "model.model_type",  # two rules broken: upstream's order names the first
    "cp-before-quantized": "parallel.cp_size",
    # dp 2: s divides the world (8) but not attention tp (4, or 2 with cp 2); the later rule is not named
    "s-world-not-tp-hostcache": "layerwise.split_size",
    "s-world-not-tp-cp2": "layerwise.split_size",
}


def _case(model="qwen3_5_moe", layerwise="s2", parallel="tp4", *, hardware="cpu", extra=(), tc="TC-01"):
    return Case(tc=tc, model=model, layerwise=layerwise, parallel=parallel, implementation="reference",
                hardware=hardware, extra=tuple(extra))


# ---- Suite declarations ------------------------------------------------------------------


@pytest.mark.parametrize("tc", sorted(TC_MODULES))
def test_every_tc_module_declares_its_suite(tc):
    suite = load_suite(tc)
    assert isinstance(suite, Suite) and suite.TC == tc
    assert suite is importlib.import_module(TC_MODULES[tc]).SUITE


@pytest.mark.parametrize("tc", sorted(TC_MODULES))
def test_a_module_function_named_as_a_hook_is_the_hook_its_suite_declares(tc):
    module = importlib.import_module(TC_MODULES[tc])
    suite = load_suite(tc)
    for f in dataclasses.fields(Suite):
        own = module.__dict__.get(f.name)
        if callable(own) and getattr(own, "__module__", None) == module.__name__:
            assert getattr(suite, f.name) is own, f"{tc} defines {f.name} but its SUITE does not declare it"


def _fake_module(**names) -> types.ModuleType:
    fake = types.ModuleType("harness.suites.fake")
    fake.__dict__.update(names)
    return fake


def test_a_module_without_a_suite_is_refused_at_load():
    with pytest.raises(TypeError, match="harness.suites.fake is not a TC module: it declares no SUITE"):
        check_suite(_fake_module(TC="TC-01", cases=lambda m: [], check=lambda f, r: []))
    with pytest.raises(TypeError, match="found dict"):
        check_suite(_fake_module(SUITE={"TC": "TC-01"}))


def test_a_suite_lacking_a_required_hook_is_refused():
    with pytest.raises(TypeError, match="'check'"):
        Suite(TC="TC-01", LEVEL="L1", TITLE="fake", cases=lambda m: [], body=lambda *a: None)
    with pytest.raises(TypeError, match="hook world_size is not callable"):
        Suite(TC="TC-01", LEVEL="L1", TITLE="fake", cases=lambda m: [], body=lambda *a: None,
              check=lambda f, r: [], world_size=4)
    with pytest.raises(TypeError, match="TC-09"):
        Suite(TC="TC-09", LEVEL="L1", TITLE="fake", cases=lambda m: [], body=lambda *a: None, check=lambda f, r: [])


def test_a_hook_left_out_takes_its_one_default():
    suite = Suite(TC="TC-01", LEVEL="L1", TITLE="fake", cases=lambda m: [], body=lambda *a: None,
                  check=lambda f, r: [])
    assert (suite.missing_baseline(None), suite.separate_draft(None), suite.removed_by_keys(None)) == (None, False, ())
    assert suite.report_view is load_suite("TC-01").report_view
    assert load_suite("TC-04").world_size is not suite.world_size  # TC-04 declares its own


# ---- facts cross the process boundary --------------------------------------------------------


def test_rank_facts_are_frozen_and_pickle():
    layer = LayerFacts(layer=0, kind="full", owned=True, own_bytes=8, scratch_view=False,
                       tensors={"k": TensorFacts(shape=(1, 2), dtype="int8", bytes=2)})
    worker = WorkerFacts(role="target", plan_rank=0, device="cpu", digest="d", n_blocks=1, split_size=2,
                         split_rank=0, split_group=(0, 1), kv_layout="heads_major", measured_bytes=8,
                         scratch_bytes=0, scratch_tensors={}, layers=(layer,), leak=LeakFacts(tracked=2, alive=0))
    facts = RankFacts(rank=0, error=MasterError(type="ConfigError", field="x", message="m"),
                      workers={"target": worker}, problems=(Problem("p", rule="peak", rank=1, amount=3),))
    back = pickle.loads(pickle.dumps(facts))
    assert back == facts and back.problems[0].amount == 3 and back.workers["target"].owned_full() == [0]
    with pytest.raises(AttributeError):
        facts.rank = 1  # type: ignore[misc]


# ---- rejections ---------------------------------------------------------------------------


@pytest.mark.parametrize("rule", REJECTIONS, ids=[r[0] for r in REJECTIONS])
def test_each_rejection_case_breaks_the_rule_it_names(rule):
    variant, model, lw, par, hw, extra = rule
    run = _case(model, lw, par, hardware=hw, extra=extra).resolved.run
    assert expected_rejection(run).field == WANT_FIELD[variant]


def test_every_startup_rule_has_a_case():
    assert {r[0] for r in REJECTIONS} == set(WANT_FIELD)


def test_an_indexed_draft_alone_breaks_the_int8_indexer_rule():
    from harness.suites.tc01 import DRAFT_REJECTIONS

    _, model, draft, lw, extra = next(r for r in DRAFT_REJECTIONS if r[0] == "draft-only-indexed-int8")
    run = Case(tc="TC-01", model=model, draft=draft, layerwise=lw, parallel="tp4", implementation="reference",
               extra=extra).resolved.run
    assert run.model.index_n_heads == 0 < run.draft.index_n_heads
    assert expected_rejection(run).field == "cache.indexer_cache_dtype"
    assert expected_rejection(dataclasses.replace(run, draft=None)) is None  # the target alone breaks nothing


@pytest.mark.parametrize(("reserve", "over"), [("DRAFT_FITS", None), ("DRAFT_OVER", 541_949_952)])
def test_the_drafts_kv_decides_a_shared_card(reserve, over):
    """TC-03's draft-card cases, worked by hand in ``test_oracle.test_a_card_check_counts_each_ranks_draft_kv``:
    card 0 plans 202,211,328 B of KV (6,127,616 B of it the draft's); with 2 x 159 MiB reserved it fits
    512 MiB (536,870,912 B), with 2 x 162 MiB it does not, though without the draft it would (535,822,336 B)."""
    from harness.suites import tc03
    from harness.suites.expectations import card_overflow

    run = Case(tc="TC-03", model="deepseek_v32", draft=tc03.DRAFT, layerwise="s2", parallel="tp4",
               implementation="reference",
               extra=(tc03.OVERSUBSCRIBED, tc03.DRAFT_BUDGET, getattr(tc03, reserve))).resolved.run
    refusal = card_overflow(run)
    assert (refusal is None) == (over is None) and tc03.passes_any_refusal(run) == (over is not None)
    if over is not None:
        assert f"node 0 card 0: 202211328 B of KV planned + 2 x {162 * 2**20} B reserved" in refusal
        assert 202_211_328 + 2 * 162 * 2**20 == over > 536_870_912 >= 202_211_328 - 6_127_616 + 2 * 162 * 2**20


def test_a_valid_config_expects_no_rejection():
    assert expected_rejection(_case().resolved.run) is None


# ---- ownership from the spec's groups -------------------------------------------------------


@pytest.mark.parametrize(("parallel", "groups"), [
    ("tp4", ((0, 2), (1, 3))),
    ("dp2_tp4", ((0, 2), (1, 3), (4, 6), (5, 7))),
])
def test_regrouped_topology_positions_differ_from_rank_mod_s(parallel, groups):
    run = _case(parallel=parallel, extra=("hardware.topology=pcie_2switch_8_interleaved",)).resolved.run
    assert ownership.expected_split_groups(run) == groups
    positions = {r: ownership.expected_position(groups, r)[1] for g in groups for r in g}
    assert any(positions[r] != r % 2 for r in positions)
    full = [3, 7, 11, 15, 19, 23, 27, 31, 35, 39]  # qwen3_5_moe's full-attention layers
    assert ownership.expected_owned_full(run, groups, 2) == full[1::2]  # rank 2 is position 1


def test_consecutive_groups_kept_on_a_flat_topology():
    run = _case().resolved.run
    assert ownership.expected_split_groups(run) == ((0, 1), (2, 3))


# ---- predicted failures are strict ---------------------------------------------------------


def _hybrid_s2():
    return _case(layerwise="s2", tc="TC-02").resolved.run


def test_upstream_owner_rule_predicts_which_rank_exceeds_the_uniform_peak_and_by_how_much():
    pred = prediction("TC-02", "upstream_owner_rule", _hybrid_s2())
    assert [(p.rule, p.rank) for p in pred.required] == [("peak", 1), ("peak", 3)]
    assert len({p.amount for p in pred.required}) == 1 and pred.required[0].amount > 0
    assert prediction("TC-02", "upstream_owner_rule", _hybrid_s2()) == pred
    assert prediction("TC-02", "reference", _hybrid_s2()) is None
    all_full = _case("deepseek_v32", tc="TC-02").resolved.run  # both rules agree: nothing predicted
    assert prediction("TC-02", "upstream_owner_rule", all_full) is None


def _found(pred: Prediction, *extra):
    return [Problem("x", rule=p.rule, rank=p.rank, amount=p.amount) for p in pred.required] + list(extra)


def test_judge_passes_only_the_predicted_problems():
    run = _hybrid_s2()
    pred = prediction("TC-02", "upstream_owner_rule", run)
    assert judge("TC-02", "upstream_owner_rule", run, _found(pred)) == []
    assert judge("TC-02", "upstream_owner_rule", run, _found(pred, Problem("n", rule="n_blocks"))) == []  # consequence


@pytest.mark.parametrize("found", [
    [],  # the predicted failure did not happen: strict
    ["a crash-like problem of no rule"],
    [Problem("peak", rule="peak", rank=1, amount=1)],  # right rank, wrong amount
], ids=["nothing", "unpredicted", "wrong-amount"])
def test_judge_fails_anything_else(found):
    run = _hybrid_s2()
    assert judge("TC-02", "upstream_owner_rule", run, found)


def test_judge_fails_an_unpredicted_problem_next_to_the_predicted_ones():
    run = _hybrid_s2()
    pred = prediction("TC-02", "upstream_owner_rule", run)
    failures = judge("TC-02", "upstream_owner_rule", run, _found(pred, "rank 0: leaked"))
    assert failures == ["unpredicted: rank 0: leaked"]


def test_without_a_prediction_problems_are_the_failures():
    assert judge("TC-02", "reference", _hybrid_s2(), ["p"]) == ["p"]
    assert Predicted(rule="owner", rank=0).matches(Problem("t", rule="owner", rank=0))


# ---- upstream xLLM in every rule (FEATURE 2-4) -----------------------------------------------


def _up(tc, model="deepseek_v32", layerwise="s2", parallel="tp4", *, hardware="cpu", extra=()):
    run = _case(model, layerwise, parallel, hardware=hardware, extra=extra, tc=tc).resolved.run
    return run, prediction(tc, "xllm_upstream", run)


@pytest.mark.parametrize("tc", ["TC-01", "TC-02", "TC-04", "TC-05", "TC-06", "TC-07"])
@pytest.mark.parametrize("model", ["deepseek_v3", "qwen3_5_moe", "qwen3_next"])
def test_upstream_refuses_the_adaptations_model_types_when_split(tc, model):
    run, pred = _up(tc, model)
    assert [(p.rule, p.field, p.rank) for p in pred.required] == [("refused", "model.model_type", None)]
    assert pred.consequences == ()
    found = [Problem("master rejected a valid config", rule="refused", field="model.model_type")]
    assert judge(tc, "xllm_upstream", run, found) == []
    other_field = [Problem("master rejected a valid config", rule="refused", field="parallel.cp_size")]
    assert judge(tc, "xllm_upstream", run, other_field)  # refused for another reason: fails
    assert judge(tc, "xllm_upstream", run, ["a crash of no rule"])
    assert judge(tc, "xllm_upstream", run, [])  # accepted after all: strict


@pytest.mark.parametrize("model", ["deepseek_v32", "glm_moe_dsa", "llama3_8b"])
@pytest.mark.parametrize("layerwise", ["off", "s1", "s2", "s4"])
def test_upstream_predicts_nothing_where_it_agrees_with_the_spec(model, layerwise):
    for tc in ("TC-01", "TC-02", "TC-04", "TC-05", "TC-06", "TC-07"):
        assert _up(tc, model, layerwise)[1] is None
    assert _up("TC-01", "qwen3_5_moe", "off")[1] is None


def test_upstream_refuses_naming_the_model_where_the_spec_names_a_later_rule():
    run, pred = _up("TC-01", "qwen3_5_moe", extra=("cache.enable_xtensor=true",))
    assert expected_rejection(run).field == "cache.enable_xtensor"
    assert [(p.rule, p.field) for p in pred.required] == [("rejection", "model.model_type")]
    named_model = Problem("master refused naming 'model.model_type'", rule="rejection", field="model.model_type")
    assert judge("TC-01", "xllm_upstream", run, [named_model]) == []
    assert judge("TC-01", "xllm_upstream", run, [Problem("accepted", rule="rejection")])
    for variant, model, lw, par, hw, extra in REJECTIONS:  # every other startup rule: same field, nothing predicted
        if model not in ("deepseek_v3", "qwen3_5_moe", "qwen3_next"):  # upstream names those models' type first
            assert _up("TC-01", model, lw, par, hardware=hw, extra=extra)[1] is None, variant


def test_upstream_refuses_the_model_type_before_the_workers_linear_and_indexer_check():
    """Upstream's master refuses the model type before its workers check linear + indexer (FEATURE 3)."""
    run, pred = _up("TC-01", "qwen3_5_moe", "s2", extra=("model.index_n_heads=64", "model.index_head_dim=128"))
    assert expected_rejection(run).field == "model.index_n_heads"
    assert [(p.rule, p.field) for p in pred.required] == [("rejection", "model.model_type")]


def test_upstream_splits_with_the_flag_off():
    off_s2 = ("layerwise.enable=false", "layerwise.split_size=2")
    run, pred = _up("TC-06", "deepseek_v32", "off", extra=off_s2)
    assert [(p.rule, p.rank) for p in pred.required] == [("baseline-plan", None)] + [("baseline", r) for r in range(4)]
    found = [Problem("plan", rule="baseline-plan")] + [Problem("r", rule="baseline", rank=r) for r in range(4)]
    assert judge("TC-06", "xllm_upstream", run, found) == []
    assert judge("TC-06", "xllm_upstream", run, found[:-1])  # one rank kept the baseline: not what upstream does
    assert _up("TC-06", "qwen3_5_moe", "off", extra=off_s2)[1].required[0].rule == "refused"
    assert _up("TC-01", "deepseek_v32", "off", extra=off_s2)[1] is None  # only TC-06 compares with the baseline


@pytest.mark.parametrize(("parallel", "ranks"), [("tp4", [1, 2]), ("dp2_tp4", [1, 2, 5, 6])])
@pytest.mark.parametrize("tc", ["TC-01", "TC-04", "TC-05", "TC-07"])
def test_upstream_rank_mod_s_owns_the_wrong_layers_on_a_regrouped_topology(tc, parallel, ranks):
    run, pred = _up(tc, parallel=parallel, extra=("hardware.topology=pcie_2switch_8_interleaved",))
    assert [(p.rule, p.rank) for p in pred.required] == [("owner", r) for r in ranks]
    assert judge(tc, "xllm_upstream", run, [Problem("o", rule="owner", rank=r) for r in ranks]) == []
    assert judge(tc, "xllm_upstream", run, [Problem("o", rule="owner", rank=r) for r in (0, 3)])  # wrong ranks


@pytest.mark.parametrize(("layerwise", "parallel", "tp_groups"), [
    ("s2", "tp4", [0]), ("s2", "tp8", [0]), ("s4", "tp8", [0]),
])
def test_upstream_keeps_consecutive_groups_where_the_spec_regroups(layerwise, parallel, tp_groups):
    run, pred = _up("TC-03", layerwise=layerwise, parallel=parallel,
                    extra=("hardware.topology=pcie_2switch_8_interleaved",))
    assert [(p.rule, p.rank) for p in pred.required] == [("groups", r) for r in tp_groups]
    assert _up("TC-03", layerwise=layerwise, parallel=parallel, extra=("hardware.topology=pcie_2switch_8",))[1] is None


@pytest.mark.parametrize(("model", "layerwise", "extra", "spec", "upstream"), [
    ("deepseek_v3", "s2", (), None, "model.model_type"),
    ("qwen3_next", "s4", (), None, "model.model_type"),
    ("qwen3_5_moe", "off", ("layerwise.split_size=2",), None, "model.model_type"),  # no enable flag upstream
    ("deepseek_v32", "off", ("layerwise.split_size=2",), None, None),
    ("deepseek_v32", "off", ("layerwise.split_size=2", "parallel.cp_size=2"), None, "parallel.cp_size"),
    ("qwen3_5_moe", "s2", ("cache.enable_xtensor=true",), "cache.enable_xtensor", "model.model_type"),
    ("llama3_8b", "s2", (), "model.model_type", "model.model_type"),
    ("glm_moe_dsa", "s2", (), None, None),
    ("deepseek_v32", "s2", ("layerwise.split_size=0",), "layerwise.split_size", "layerwise.split_size"),
])
def test_upstream_startup_rules_in_the_oracle(model, layerwise, extra, spec, upstream):
    from harness import oracle

    run = _case(model, layerwise, extra=extra).resolved.run
    assert getattr(expected_rejection(run), "field", None) == spec
    assert getattr(oracle.expected_upstream_rejection(run), "field", None) == upstream


def test_a_budget_holding_no_block_is_refused_naming_one_of_its_knobs():
    from harness.suites.expectations import rejection_problems

    run = _case("deepseek_v32", "s2", "tp4", extra=("cache.kv_budget_bytes=1024",)).resolved.run

    def refused(field):
        return rejection_problems(MasterError(type="PlanError", field=field, message="no block"), run)

    assert refused("cache.kv_budget_bytes") == [] and refused("hardware.reserved_bytes_per_card") == []
    assert [p.rule for p in refused("cache.max_linear_state_cache_slots")] == ["rejection"]
    assert [p.rule for p in rejection_problems(None, run)] == ["rejection"]


@pytest.mark.parametrize("tc", ["TC-01", "TC-03"])
def test_a_case_report_is_described_by_its_tc_modules_docstring(tc, monkeypatch):
    import allure

    from harness.reporting import allure_labels

    shown = {}
    monkeypatch.setattr(allure.dynamic, "title", lambda text: shown.setdefault("title", text))
    monkeypatch.setattr(allure.dynamic, "description", lambda text: shown.setdefault("description", text))
    case = load_suite(tc).cases(load_matrix("smoke"))[0]
    allure_labels.apply_title(case, load_suite(tc))
    doc = importlib.import_module(TC_MODULES[tc]).__doc__
    assert shown["description"] == doc.strip().split("\n\n", 1)[0] and shown["description"].startswith(f"{tc} (L")


@pytest.mark.parametrize("extra, field", [(("cache.kv_cache_dtype=int8",), "cache.kv_cache_dtype"),
                                          (("cache.indexer_cache_dtype=int8",), "cache.indexer_cache_dtype"),
                                          (("cache.kv_cache_dtype=int8", "cache.indexer_cache_dtype=int8"),
                                           "cache.kv_cache_dtype")])
def test_upstreams_compiled_worker_stops_on_an_int8_cache_the_cpu_profile_allows(extra, field):
    """FEATURE 3: upstream's build has no int8 KV cache (MLU only) and no int8 indexer (NPU, MLU); the CPU profile
    allows both, so xllm_native on upstream's tree is predicted to refuse at start-up (its worker's compiled
    start-up, asked with the master's validation: every TC), where the Python model of upstream allocates."""
    for tc in ("TC-01", "TC-02", "TC-03", "TC-04", "TC-05", "TC-07"):
        run = _case("deepseek_v32", "s2", "tp4", extra=extra, tc=tc).resolved.run
        assert expected_rejection(run) is None and prediction(tc, "xllm_upstream", run) is None
        for name in ("xllm_native", NATIVE_PLANNING_ONLY):
            pred = prediction(tc, name, run)
            assert [(p.rule, p.field) for p in pred.required] == [("refused", field)], (tc, name)
            found = [Problem(f"master rejected a valid config: {field}", rule="refused", field=field)]
            assert judge(tc, name, run, found) == []
            assert judge(tc, name, run, [])  # it started after all: strict
            assert judge(tc, name, run, [Problem("master rejected", rule="refused", field="cache.block_size")])


def test_upstreams_compiled_worker_is_predicted_nothing_on_what_it_allocates():
    for extra in ((), ("cache.kv_cache_dtype=fp8_e4m3",)):  # fp8 is not its quantization: it allocates (docs/native.md)
        run = _case("deepseek_v32", "s2", "tp4", extra=extra, tc="TC-01").resolved.run
        assert prediction("TC-01", "xllm_native", run) is None
    run = _case("deepseek_v32", "s2", "tp4", hardware="bi_v100", extra=("cache.kv_cache_dtype=int8",), tc="TC-01").resolved.run
    assert expected_rejection(run).field == "cache.kv_cache_dtype"  # the profile refuses it, the build too: alike
    assert prediction("TC-01", "xllm_native", run) is None


def test_an_fp8_cache_the_profile_refuses_is_accepted_by_upstreams_compiled_start_up():
    """FEATURE 3 refuses an fp8 KV cache on the BI-V100 profile; upstream's compiled start-up has no rule on it (its
    worker quantizes int8 alone): the master accepts, predicted as such, and nothing else is."""
    run = _case("deepseek_v32", "s2", "tp4", hardware="bi_v100", extra=("cache.kv_cache_dtype=fp8_e4m3",),
                tc="TC-01").resolved.run
    assert expected_rejection(run).field == "cache.kv_cache_dtype"
    for name in ("xllm_native", NATIVE_PLANNING_ONLY):
        accepted = [Problem("master accepted a config the spec refuses: fp8", rule="rejection")]
        assert judge("TC-01", name, run, accepted) == []
        assert judge("TC-01", name, run, [])  # refused after all: strict
    both = _case("deepseek_v32", "s2", "tp4", hardware="bi_v100", tc="TC-01",
                 extra=("cache.kv_cache_dtype=fp8_e4m3", "cache.indexer_cache_dtype=int8")).resolved.run
    (p,) = prediction("TC-01", "xllm_native", both).required  # the build stops on the int8 indexer instead
    assert (p.rule, p.field) == ("rejection", "cache.indexer_cache_dtype"), p


def test_a_worker_refusal_is_a_problem_naming_rank_and_field_and_stops_the_checks():
    from harness.suites.checks import startup_problems

    run = _case("deepseek_v32", "s2", "tp4", tc="TC-01").resolved.run
    refusal = MasterError(type="ConfigError", field="cache.kv_cache_dtype", message="int8: auto", user_error=True,
                          classes=("ConfigError", "UserError"))
    facts = [RankFacts(rank=0, plan=object()), RankFacts(rank=1, refusals={"target": refusal})]
    found = startup_problems(facts, run)
    assert [(p.rule, p.rank, p.field) for p in found] == [("worker_refused", 1, "cache.kv_cache_dtype")]
    assert "rank 1 target worker refused a config the spec accepts" in found[0]
    assert startup_problems([RankFacts(rank=0, plan=object())], run) is None


@pytest.mark.parametrize("variant, extra", [
    ("oversubscribed", ("OVERSUBSCRIBED", "RESERVE_PER_RANK")),
    ("shared-card", ("OVERSUBSCRIBED", "SHARED_CARD")),
])
def test_upstreams_compiled_tree_is_expected_to_fail_tc03s_card_cases_naming_that_it_has_no_card_check(variant, extra):
    """Upstream's compiled tree has no card check (its groups are MappingNPU's, nothing refuses a card): where the
    spec refuses the placement, or upstream's consecutive groups put two ranks of a group on one card, TC-03's card
    problem is predicted, and strictly: it must name that the tree has no such check (a card problem without that
    note, or any other failure, is not the expected one). Was: upstream's tree predicted to refuse the placement
    (the Python model's card check)."""
    from contract.plan_types import TREE_CARDS_NOTE
    from harness.suites import tc03

    flat = []
    for name in extra:
        value = getattr(tc03, name)
        flat += [value] if isinstance(value, str) else list(value)
    run = Case(tc="TC-03", model="deepseek_v32", layerwise="s2", parallel="tp4", implementation="reference",
               hardware="cpu", variant=variant, extra=tuple(flat)).resolved.run
    pred = prediction("TC-03", "xllm_native", run)
    assert pred is not None and pred.required[0].rule == "cards" and pred.required[0].says == TREE_CARDS_NOTE
    text = "split group [0, 1] puts two ranks on one card: [(0, 0), (0, 0)]"
    noted = [Problem(f"{text}; {TREE_CARDS_NOTE}", rule="cards")]
    noted += [Problem("TP group [0, 1, 2, 3] on cpu_sim_8: worst link ...", rule="groups", rank=0)] \
        if variant == "shared-card" else []
    assert judge("TC-03", "xllm_native", run, noted) == []
    bare = [Problem(text, rule="cards")] + noted[1:]
    assert any("predicted problem not found: cards saying 'no card check" in f
               for f in judge("TC-03", "xllm_native", run, bare))
    assert judge("TC-03", "xllm_native", run, [Problem("master refused: UserError", rule="refused")])


def test_upstreams_compiled_worker_names_its_cache_before_the_allocations_xtensor_branch():
    """Upstream's worker stops on an int8 KV cache in its quantization block, before ``allocate_kv_caches``'s
    xtensor branch: where the CPU profile allows the cache and the spec's first rule is xtensor, the compiled tree
    names the cache (``rejection``); the linear + indexer CHECK, earlier in the worker, still comes first."""
    run = _case("deepseek_v32", "s2", "tp4", tc="TC-01",
                extra=("cache.kv_cache_dtype=int8", "cache.enable_xtensor=true")).resolved.run
    assert expected_rejection(run).field == "cache.enable_xtensor"
    (p,) = prediction("TC-01", "xllm_native", run).required
    assert (p.rule, p.field) == ("rejection", "cache.kv_cache_dtype"), p
    both = _case("qwen3_5_moe", "s2", "tp4", tc="TC-01",
                 extra=("cache.kv_cache_dtype=int8", "model.index_n_heads=64", "model.index_head_dim=128")).resolved.run
    assert expected_rejection(both).field == "model.index_n_heads"
    assert all(p.field != "cache.kv_cache_dtype" for p in (prediction("TC-01", "xllm_native", both)
                                                            or Prediction(required=())).required)
