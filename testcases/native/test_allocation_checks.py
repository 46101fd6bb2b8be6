"""Upstream's refusals of the split with sleep mode and with xtensor are the tree's compiled code, never the Python
model: the build cuts ``allocate_kv_caches``'s branches for sleep mode and xtensor, up to its ordinary allocation
(``build.generate.allocation_checks_cut``), and compiles them with a shim of the create options the worker built
(``cpp/allocation_shim.h``); a CHECK that fires is the refusal naming its field, where the worker allocates (after
the master's layout). On the
upstream-shaped fixture tree (its ``xllm/core/framework/kv_cache/kv_cache.cpp``); planted: a build without the
fixture's sleep-mode CHECK (``FIXTURE_PLANT_SLEEP_ACCEPTED``) starts the split with sleep mode, a tree without the
function fails the cases that need it naming ``implementation.files.allocation_checks``. The ports' side (the role
left to the base, absent without one, the planted port's departure) is in ``test_port_base.py`` and
``test_departures.py``."""

from __future__ import annotations

from pathlib import Path

import pytest

from contract.errors import ConfigError, PlanError
from contract.specs import CacheSpec, ModelSpec
from testcases.unit import _models as M

pytestmark = pytest.mark.slow  # builds C++: scheduled first

FIXTURE = Path(__file__).resolve().parent / "fixture_tree"
# the fixture tree's split model (an MLA model of 6 full layers)
MODEL = ModelSpec(name="fixture", model_type="fixture_split", num_hidden_layers=6, attention="mla",
                  kv_lora_rank=24, qk_rope_head_dim=8)
PLANTED_DEFINES = "FIXTURE_PLANT_NO_WORKER_CHECK, FIXTURE_PLANT_SLEEP_ACCEPTED"
"""The fixture tree's planted build shared with ``test_worker_checks.py`` and ``test_port_base.py`` (one build: the
worker's planted CHECK decides none of these cases)."""
SLEEP = CacheSpec(block_size=16, enable_sleep_mode=True)
XTENSOR = CacheSpec(block_size=16, enable_xtensor=True)


def run(cache: CacheSpec, split: int = 2):
    """The fixture model at ``split`` on 4 ranks with room for 100 blocks of a layer."""
    return M.run_spec(MODEL, split=split, world=4, budget_bytes=100 * 16 * 64 + 5, cache=cache)



def planted_manifest(tmp_path: Path, define: str) -> Path:
    planted = tmp_path / "lwsplit-manifest.yaml"
    planted.write_text((FIXTURE / "lwsplit-manifest.yaml").read_text().replace(
        "compile: upstream-cut\n", f"compile: upstream-cut\ndefines: [{define}]\n"))
    return planted


def test_the_split_with_sleep_mode_or_xtensor_is_refused_by_the_trees_compiled_allocation(implementation):
    """Role by role and end to end: the plan refuses where the worker allocates, after the master's validation and
    layout (``validate`` alone lets it through)."""
    impl = implementation()
    for cache, field, line in ((SLEEP, "cache.enable_sleep_mode", 19), (XTENSOR, "cache.enable_xtensor", 26)):
        for ask in (impl.allocation_checks, impl.plan):
            with pytest.raises(ConfigError) as err:
                ask(run(cache))
            assert err.value.field == field, err.value
            assert f"CHECK at kv_cache.cpp:{line} `CHECK(layer_cache_owned.empty())`" in str(err.value), err.value
        impl.validate(run(cache))
        impl.plan(run(cache, split=1))  # no split: no mask handed on, started
    assert impl.plays("allocation_checks") == "tree"


def test_a_tree_whose_allocation_takes_the_split_with_sleep_mode_is_not_credited_with_the_refusal(
        implementation, tmp_path):
    impl = implementation(planted_manifest(tmp_path, PLANTED_DEFINES))
    impl.plan(run(SLEEP))  # the Python model would refuse
    with pytest.raises(ConfigError) as err:
        impl.plan(run(XTENSOR))
    assert err.value.field == "cache.enable_xtensor", err.value


def test_a_tree_without_the_allocation_has_no_cut_and_fails_the_cases_that_need_it_naming_the_file(
        implementation, tmp_path, monkeypatch):
    """Without ``allocate_kv_caches`` (or its branches) the build has no cut and says why (read here from the cut
    itself: no second build); the op then answers ``absent`` and the cases that need it fail naming the file key."""
    from implementations.xllm_native.build.generate import allocation_checks_cut
    from implementations.xllm_native.tree.files import tree_map

    elsewhere = tmp_path / "kv_cache.cpp"
    for text, why in (("// no allocate_kv_caches here\n", "defines no allocate_kv_caches"),
                      ("void allocate_kv_caches(int n) {\n  if (n) return;\n}\n", "has no statement matching")):
        elsewhere.write_text(text)
        line, cut, absent = allocation_checks_cut(tree_map(str(FIXTURE), {"allocation_checks": str(elsewhere)}))
        assert (line, cut) == (0, "") and why in absent, absent
    impl = implementation()
    call = impl.native.call
    monkeypatch.setattr(impl.native, "call", lambda op, values, **kw: {"absent": "the tree has no kv_cache.cpp"}
                        if op == "allocation_checks" else call(op, values, **kw))
    with pytest.raises(PlanError) as err:
        impl.plan(run(SLEEP))
    assert err.value.field == "implementation.files.allocation_checks", err.value
    assert "the tree has no kv_cache.cpp" in str(err.value), err.value
    impl.plan(run(CacheSpec(block_size=16)))  # a case that does not need it starts
