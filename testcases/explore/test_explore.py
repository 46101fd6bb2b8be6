"""The explorer (``harness.explore``) on every implementation of the session's matrix.

Each test draws configurations from a fixed seed (``--lw-explore N``: N per level instead of
CI's budget, ``search.CI_EXAMPLES``) and judges each with the TCs' checks and the ownership
properties against the oracle; a variant the spec predicts to fail must fail exactly as
predicted. A failure shrinks to a minimal configuration and prints a ``python -m harness.plan``
command for it.
"""

from __future__ import annotations

import pytest

from harness.explore.runner import runner_for
from harness.explore.search import CI_EXAMPLES, Count, explore
from harness.pytest_plugin import session_matrix


@pytest.mark.parametrize("allocate", [False, True], ids=["plan", "allocation"])
def test_drawn_configurations_pass(request, explored_implementation, allocate):
    config = request.config
    examples = config.getoption("lw_explore") or CI_EXAMPLES[allocate]
    count = Count()
    finding = explore(runner_for(session_matrix(config), explored_implementation), examples=examples,
                      allocate=allocate, count=count)
    if finding is not None:
        pytest.fail(finding.report(), pytrace=False)
    # the draw reaches every kind of verdict, not only refusals
    assert count.judged == examples
    assert {"TC-03", "ownership", "estimation"} <= set(count.judged_by), count.judged_by
    if allocate:
        assert {"TC-01", "TC-02", "TC-07"} <= set(count.judged_by), count.judged_by


def test_ci_budget_reaches_every_shape():
    """CI's plan-level draws (the same seed and count as above) reach every verdict, placement, cache corner and
    refusal order of ``reach.REACHES``; refusals are a deliberate minority."""
    from collections import Counter

    from harness.explore.reach import REACHES, reached
    from harness.explore.search import DEFAULT_SEED
    from tools.bench.explore import drawn

    runs = drawn(CI_EXAMPLES[False], DEFAULT_SEED)
    counts = Counter(what for run in runs for what in reached(run))
    assert set(REACHES) <= set(counts), f"not reached: {sorted(set(REACHES) - set(counts))}; {dict(counts)}"
    refused = sum(n for what, n in counts.items() if what.startswith("refused"))
    assert refused < len(runs) / 2, dict(counts)


def test_zero_bytes_decode_to_the_simplest_valid_configuration():
    """Shrinking moves every drawn byte towards 0: all zeros are the first option of every decision, a small
    valid configuration the spec accepts and splits."""
    from harness import oracle
    from harness.explore.strategies import DRAWN_BYTES, decode

    run = decode(bytes(DRAWN_BYTES))
    assert oracle.expected_rejection(run) is None and oracle.expected_estimation_rejection(run) is None
    assert not oracle.spec_refuses_cards(run) and oracle.split_size(run) > 1
    assert run.model.num_hidden_layers == 1 and run.draft is None and run.placement is None


def test_exploring_judges_the_drawn_strings_in_order_and_stops_at_the_first_failure():
    """``explore`` judges ``search.drawn_strings``'s strings (seeded, kept per seed and count) one
    configuration after the other, the configurations ``tools.bench.explore.drawn`` gives, and stops at the
    first that fails."""
    from harness.explore.runner import Verdict
    from harness.explore.search import explore
    from tools.bench.explore import drawn

    class Recording:
        implementation, overrides = "recording", ("implementation=reference",)

        def __init__(self, fail_at: int):
            self.seen, self.fail_at = [], fail_at

        def verdict(self, run, *, allocate):
            self.seen.append(run)
            failures = ("planted",) if len(self.seen) == self.fail_at else ()
            return Verdict(failures=failures, judged_by=("stub",), refused=False)

    want = drawn(16, 11)
    passing = Recording(fail_at=0)
    assert explore(passing, examples=16, allocate=False, seed=11, shrink=False) is None
    assert passing.seen == want
    failing = Recording(fail_at=5)
    finding = explore(failing, examples=16, allocate=False, seed=11, shrink=False)
    assert finding is not None and finding.run is want[4] and failing.seen == want[:5], finding


def test_the_oracles_rank_rows_are_its_answers_per_rank():
    """``oracle.expected_rank_rows`` (what the plan-level check compares every rank with) says of each rank what
    the oracle's per-rank functions say, on CI's drawn configurations the spec groups (permuted placements, dp,
    regrouped topologies among them; drawn and decoded once for the whole session)."""
    from harness import oracle
    from harness.explore.search import DEFAULT_SEED, drawn_strings
    from harness.explore.strategies import decode

    checked = 0
    for run in [decode(one) for one in drawn_strings(DEFAULT_SEED, CI_EXAMPLES[False])[:64]]:
        if oracle.expected_rejection(run) is not None or oracle.expected_split_groups(run) is None:
            continue
        groups = oracle.expected_split_groups(run)
        for r, row in enumerate(oracle.expected_rank_rows(run)):
            index, position = oracle.expected_split_position(run, r)
            assert row == (tuple(oracle.expected_rank_location(run, r)), oracle.expected_rank_coordinates(run, r),
                           groups[index], position, tuple(oracle.expected_rank_owned_layers(run, r))), (run, r)
        checked += 1
    assert checked >= 30, checked


def test_the_oracles_plan_fields_are_its_answers_per_field():
    """``oracle.expected_plan_fields`` (every layout field of a plan, one table per configuration) says what the
    oracle's functions of each field say, on CI's drawn configurations the spec accepts."""
    from harness import oracle
    from harness.explore.search import DEFAULT_SEED, drawn_strings
    from harness.explore.strategies import decode

    checked = 0
    for run in [decode(one) for one in drawn_strings(DEFAULT_SEED, CI_EXAMPLES[False])[:64]]:
        if oracle.expected_rejection(run) is not None or oracle.expected_estimation_rejection(run) is not None:
            continue
        p, model, cache = run.parallel, run.model, run.cache
        tp, s, budget = oracle.attn_tp_size(run), oracle.split_size(run), oracle.run_budget_bytes(run)
        full = tuple(oracle.expected_full_layers(model))
        want = dict(
            model=model.name, world_size=p.world_size, dp_size=p.dp_size, cp_size=p.cp_size, attn_tp_size=tp,
            split_size=s, active=s > 1, block_size=cache.block_size, kv_layout=run.hardware.kv_layout,
            num_layers=model.num_hidden_layers, full_layers=full, budget_bytes=budget,
            slot_size=oracle.kv_slot_bytes(model, cache, tp), index_slot_size=oracle.index_slot_bytes(model, cache),
            scale_slot_size=oracle.scale_slot_bytes(model, cache, tp),
            num_indexer_layers=len(full) if oracle.expected_indexer(model) else 0,
            linear_slot_size=oracle.expected_linear_state_bytes_per_slot(model, cache, tp),
            num_linear_state_blocks=oracle.expected_linear_state_slots(model, cache, tp, budget),
            available_bytes=budget - oracle.expected_linear_state_bytes(model, cache, tp, budget),
            layer_owner=oracle.expected_owner(full, s) if s > 1 else {})
        assert dict(zip(oracle.PLAN_FIELDS, oracle.expected_plan_fields(run), strict=True)) == want, run
        checked += 1
    assert checked >= 40, checked


def test_the_draft_cost_reads_the_estimates_fields_that_read_no_budget():
    """D (``oracle.expected_draft_bytes_per_block``) is made from each engine's slot sizes and layer counts alone
    (``capacity._slot_capacity``): those equal the full estimate's, and D the one made from two full estimates, on
    CI's drawn configurations with a draft (own shapes and indexers, TP 1 bodies among them)."""
    from harness import oracle
    from harness.explore.search import DEFAULT_SEED, drawn_strings
    from harness.explore.strategies import decode
    from harness.oracle.capacity import _slot_capacity

    budget_free = ("block_size", "slot_size", "index_slot_size", "scale_slot_size", "n_layers",
                   "num_full_attention_layers", "num_linear_attention_layers", "num_indexer_layers")
    checked = 0
    for run in [decode(one) for one in drawn_strings(DEFAULT_SEED, CI_EXAMPLES[False])[:300]]:
        if run.draft is None or oracle.expected_rejection(run) is not None:
            continue
        tp = oracle.attn_tp_size(run)
        draft_tp = 1 if oracle.draft_body_tp1(run) else tp
        engines = []
        for model, at, is_draft in ((run.model, tp, False), (run.draft, draft_tp, True)):
            full = oracle.estimate_capacity(model, run.cache, attn_tp=at, budget_bytes=1, is_draft=is_draft)
            alone = _slot_capacity(model, run.cache, attn_tp=at, is_draft=is_draft)
            assert [getattr(alone, f) for f in budget_free] == [getattr(full, f) for f in budget_free], (run, model)
            engines.append(full)
        assert oracle.expected_draft_bytes_per_block(run) == oracle.expected_draft_cost_per_block(
            *engines, draft_body_tp1=oracle.draft_body_tp1(run)), run
        checked += 1
    assert checked >= 60, checked


def test_reach_reads_a_refused_world_that_is_not_whole_tp_groups():
    """A world the spec refuses as not divisible (17 ranks at dp 2), placed two ranks to a card: ``reach`` names
    the refusal and the shared card without reading past the placement (it raised IndexError)."""
    from dataclasses import replace

    from harness.explore.reach import reached
    from harness.explore.search import DEFAULT_SEED, drawn_strings
    from harness.explore.strategies import decode

    run = next(r for r in map(decode, drawn_strings(DEFAULT_SEED, 64)) if r.placement is None and r.parallel.dp_size == 1)
    world = 2 * run.parallel.world_size + 1
    run = replace(run, parallel=replace(run.parallel, world_size=world, dp_size=2),
                  placement=tuple((r % run.hardware.num_cards) // 2 for r in range(world)))
    assert {"refused at startup", "two ranks on one card"} <= set(reached(run)), reached(run)


def test_exploring_freezes_the_heap_only_while_it_runs(monkeypatch):
    """``search.heap_frozen`` leaves the objects alive on entry out of the collector's full collections while an
    exploration runs and gives them back on exit, a failure's included; a caller's own freeze is left alone (a
    pytest process froze what its collection built: ``harness.pytest_plugin.gc_freeze``). The collector is a
    recording stand-in, so this process's own freeze is not touched."""
    from harness.explore import search
    from harness.explore.runner import Verdict

    class Collector:
        def __init__(self, frozen: int):
            self.frozen, self.calls = frozen, []

        def get_freeze_count(self):
            return self.frozen

        def freeze(self):
            self.calls.append("freeze")
            self.frozen += 1

        def unfreeze(self):
            self.calls.append("unfreeze")
            self.frozen = 0

    class Failing:
        implementation, overrides = "failing", ("implementation=reference",)

        def verdict(self, run, *, allocate):
            seen.append(collector.frozen)
            return Verdict(failures=("planted",), judged_by=("stub",), refused=False)

    seen: list = []
    collector = Collector(frozen=0)
    monkeypatch.setattr(search, "gc", collector)
    assert search.explore(Failing(), examples=3, allocate=False, seed=11, shrink=False) is not None
    assert seen == [1] and collector.calls == ["freeze", "unfreeze"] and collector.frozen == 0, (seen, collector.calls)
    collector = Collector(frozen=5)
    monkeypatch.setattr(search, "gc", collector)
    with search.heap_frozen():
        assert collector.frozen == 5
    assert collector.calls == [] and collector.frozen == 5


def test_allocating_pauses_the_collector_only_while_the_ranks_are_allocated(monkeypatch):
    """``InProcessRunner._allocate`` pauses the cyclic garbage collector while a configuration's ranks are allocated,
    walked and torn down, and gives it back as it found it: enabled again after, a raise included; a caller's own
    pause left alone. The collector is a recording stand-in, so this process's own is not touched."""
    from harness.explore import runner as runner_module
    from harness.explore.runner import InProcessRunner

    class Collector:
        def __init__(self, enabled: bool):
            self.enabled, self.calls = enabled, []

        def isenabled(self):
            return self.enabled

        def disable(self):
            self.calls.append("disable")
            self.enabled = False

        def enable(self):
            self.calls.append("enable")
            self.enabled = True

    def ranks(self, impl, plan, run, engines, digests):
        seen.append(collector.enabled)
        if plan == "raise":
            raise RuntimeError("planted")
        return [], []

    monkeypatch.setattr(InProcessRunner, "_allocate_ranks", ranks)
    for enabled, plan in ((True, "plan"), (True, "raise"), (False, "plan")):
        seen: list = []
        collector = Collector(enabled)
        monkeypatch.setattr(runner_module, "gc", collector)
        try:
            InProcessRunner._allocate(object.__new__(InProcessRunner), None, plan, None, (), {})
        except RuntimeError:
            assert plan == "raise"
        assert seen == [False] and collector.enabled is enabled, (enabled, plan, seen, collector.calls)
        assert collector.calls == (["disable", "enable"] if enabled else ["disable"]), collector.calls


def test_the_drawn_strings_are_the_seeds_own():
    """A seed's strings are fixed bytes (the same in every process, platform and Python version: CI's draws do not
    move unless this derivation does), distinct, ``DRAWN_BYTES`` long, and the first of a longer draw are a shorter
    draw's whole."""
    from harness.explore.search import DEFAULT_SEED, drawn_string, drawn_strings
    from harness.explore.strategies import DRAWN_BYTES

    assert drawn_string(DEFAULT_SEED, 0).hex()[:32] == "9b77fc6e059bea9adfa2b066dbe74efd"
    assert drawn_string(DEFAULT_SEED, 999).hex()[:32] == "5e008ffc56632c037553b112a5f9b0c6"
    strings = drawn_strings(DEFAULT_SEED, 40)
    assert strings == drawn_strings(DEFAULT_SEED, 1000)[:40] and len(set(strings)) == 40
    assert {len(one) for one in strings} == {DRAWN_BYTES} and drawn_strings(DEFAULT_SEED + 1, 40) != strings
