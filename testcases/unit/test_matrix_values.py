"""The TCs choose their cases by what a layerwise or parallel option means, not by its name.

A job (``python -m harness layerwise.enable=true layerwise.split_size=2``) hands its key
overrides to the suites as they are: a ``layerwise.*`` / ``parallel.*`` key changes that
matrix axis's options (``harness.suites.matrix``), and every TC classifies the result by
value. So the job runs exactly the cases of the shipped option it equals, with no
typed -> option name -> typed round trip, and an option a TC names itself keeps its own value.
"""

from __future__ import annotations

import pytest

from contract.errors import ConfigError
from harness.suites import TC_MODULES, load_suite, removed_by_keys
from harness.suites.case import option_spec
from harness.suites.matrix import load_matrix


def _cases(overrides: list[str]) -> dict:
    matrix = load_matrix("ci", overrides)
    return {(tc, c.id): c for tc in TC_MODULES for c in load_suite(tc).cases(matrix)}


def _values(case) -> tuple:
    return tuple(option_spec(g, getattr(case, g), case.key_overrides(g)) for g in ("layerwise", "parallel"))


@pytest.mark.parametrize("keys, option", [
    (["layerwise=off", "layerwise.enable=true", "layerwise.split_size=2"], ["layerwise=s2"]),
    (["layerwise=s4", "layerwise.split_size=2", "model=deepseek_v32"], ["layerwise=s2", "model=deepseek_v32"]),
    (["parallel=tp4", "parallel.world_size=8", "parallel.dp_size=2"], ["parallel=dp2_tp4"]),
    (["layerwise=s2", "parallel.world_size=8", "parallel.dp_size=2"], ["layerwise=s2", "parallel=dp2_tp4"]),
], ids=["layerwise-s2", "s4-made-s2", "parallel-dp2", "both"])
def test_key_overrides_run_the_cases_of_the_option_they_equal(keys, option):
    by_keys, by_option = _cases(keys), _cases(option)
    assert by_keys.keys() == by_option.keys(), (
        f"only with keys: {sorted(by_keys.keys() - by_option.keys())[:5]}; "
        f"only with the option: {sorted(by_option.keys() - by_keys.keys())[:5]}")
    differ = [k for k in by_keys if _values(by_keys[k]) != _values(by_option[k])]
    assert not differ, f"same case, different layerwise/parallel values: {differ[:5]}"
    assert {tc for tc, _ in by_keys} >= {"TC-01", "TC-05"}


def test_a_key_changes_the_axis_options_not_a_tcs_own_variants():
    """``layerwise.split_size=2`` on the CI matrix: off stays off (flag off, s = 2), s2 and s4 become
    one split of 2; TC-01's s0 variant keeps s = 0 and TC-06's s1 row stays s1."""
    matrix = load_matrix("ci", ["layerwise.split_size=2"])
    assert matrix.layerwise == ["off", "s2"]
    assert [matrix.layerwise_flags(lw).effective_split_size for lw in matrix.layerwise] == [1, 2]
    cases = _cases(["layerwise.split_size=2"])
    assert any(tc == "TC-01" and "-s0-" in cid for tc, cid in cases), "TC-01's own s0 variant must keep s = 0"
    tc06 = [c for (tc, _), c in cases.items() if tc == "TC-06"]
    assert tc06 and not [c.id for c in tc06 if _values(c)[0].active], "TC-06 runs only cases that do not split"
    assert {c.shape()["split_size"] for c in tc06 if c.shape()["enable"]} == {1}, "the s1 row stays s1"
    tc05 = [c for (tc, _), c in cases.items() if tc == "TC-05"]
    assert tc05 and all(c.shape()["split_size"] == 2 for c in tc05)


def test_only_the_options_the_keys_make_equal_run_once():
    ids = [(tc, c.id) for tc in TC_MODULES for c in load_suite(tc).cases(load_matrix("ci", ["layerwise.split_size=4"]))]
    assert len(ids) == len(set(ids)), "two cases with one id"


@pytest.mark.parametrize("key, field, allowed", [
    ("layerwise.spilt_size=2", "layerwise.spilt_size", "split_size"),
    ("layerwise.split_size=two", "layerwise.split_size", "int"),
    ("parallel.dp_size=yes", "parallel.dp_size", "int"),
])
def test_a_group_key_the_schema_cannot_hold_names_the_key(key, field, allowed):
    with pytest.raises(ConfigError) as info:
        load_matrix("ci", [key])
    assert field in str(info.value) and allowed in str(info.value)


# ---- keys that only choose or locate the implementation never remove a case --------------------

NATIVE_TREE = "testcases/native/fixture_tree"


def _ids(tc: str, overrides: list[str]) -> list[str]:
    return [c.id for c in load_suite(tc).cases(load_matrix("ci", overrides))]


@pytest.mark.parametrize("keys", [
    ["implementation=xllm_native", f"implementation.source_dir={NATIVE_TREE}"],
    ["implementation=reference", "implementation._target_=testcases.explore.mutants.IdleRanksUnnoted"],
    ["implementation=reference", "runner.backend=gloo", "runner.timeout_s=30"],
], ids=["source-dir", "target", "runner"])
def test_keys_that_choose_or_locate_the_implementation_remove_no_case(keys):
    """A port named by its keys runs every case the same implementation named by its option runs:
    the refusal cases too (TC-01's draft refusals were built only without any key)."""
    by_option = [k for k in keys if "." not in k.split("=", 1)[0]]
    for tc in TC_MODULES:
        assert _ids(tc, keys) == _ids(tc, by_option), f"{tc}: {keys} changed the cases"
    drafts = [i for i in _ids("TC-01", keys) if i.endswith(("-draft-linear-and-indexer", "-draft-slot-larger"))]
    assert len(drafts) == 2, drafts
    assert removed_by_keys(load_matrix("ci", keys)) == []


def test_a_key_that_changes_a_case_names_the_cases_it_removed_once_in_the_header():
    """``cache.host_blocks_factor=2.0`` breaks FEATURE 3's host-cache rule on every case: each refusal
    case would then be refused for that rule first, so they are left out, and the header says which."""
    from harness.pytest_plugin.parametrize import removed_case_lines

    keys = ["implementation=reference", "cache.host_blocks_factor=2.0"]
    matrix = load_matrix("ci", keys)
    removed = removed_by_keys(matrix)
    kept = set(_ids("TC-01", keys))
    assert removed and not kept & {cid for _, cid in removed}
    assert {tc for tc, _ in removed} == {"TC-01"}
    assert any(cid.endswith("-reference-s0") for _, cid in removed)
    assert any(cid.endswith("-reference-draft-slot-larger") for _, cid in removed)
    lines = removed_case_lines(matrix)
    assert len(lines) == 1 and "cache.host_blocks_factor=2.0" in lines[0]
    assert all(cid in lines[0] for _, cid in removed)
    assert removed_case_lines(load_matrix("ci", ["implementation=reference"])) == []
