"""Whether the split is active is the tree's own start-up code's answer (FEATURE 2), never upstream's rule
applied to a port: the fixture port's engine (``fx_engine_layout``) passes no layout on while its flag is off,
as the BI-V100 port's ``maybe_compute_layerwise_layout`` does, so with the flag off its plan is the uniform one
and its estimation is fed s 1. Planted: a build whose engine ignores the flag (``FXPORT_PLANT_FLAG_IGNORED``)
splits with the flag off, and its departure list says so in the engine's role, once."""

from __future__ import annotations

import copy
import os
from dataclasses import replace
from pathlib import Path

import pytest

from contract.specs import LayerwiseFlags
from harness import departures
from harness.departures.judge import JudgedCase, case_tcs, judge
from implementations.xllm_native.build import cache as build_cache
from testcases.native.test_ports import FIXTURE, run, write_manifest

FIXTURE_TREE = Path(__file__).resolve().parent / "fixture_tree"

pytestmark = pytest.mark.slow  # builds C++: scheduled first


def impl_of(manifest: Path):
    from implementations.xllm_native import XllmNativeImplementation

    return XllmNativeImplementation(source_dir=str(FIXTURE), manifest=str(manifest))


@pytest.fixture(scope="module")
def trees(cache, tmp_path_factory):
    """The plain fixture port and the one whose engine ignores its flag."""
    os.environ[build_cache.ENV_CACHE] = str(cache)
    try:
        planted = write_manifest(tmp_path_factory.mktemp("flag"), "defines: [FXPORT_BUILD=1]",
                                 "defines: [FXPORT_BUILD=1, FXPORT_PLANT_FLAG_IGNORED]")
        yield impl_of(FIXTURE / "manifest.yaml"), impl_of(planted)
    finally:
        os.environ.pop(build_cache.ENV_CACHE, None)


def test_with_the_flag_off_the_ports_plan_is_uniform_and_its_estimation_is_fed_s_1(trees):
    plain, _ = trees
    off, on = run(2, enable=False), run(2)
    plan = plain.plan(off)
    at = {s: plain.native_estimate(off, s)["n_blocks"] for s in (1, 2)}
    assert at[1] != at[2], at  # the fixture's split block count differs: the check below can tell them apart
    assert (plan.active, plan.split_size, plan.n_blocks, plan.layer_owner) == (False, 1, at[1], ()), plan
    assert {len(g) for g in plan.split_groups} == {1}, plan.split_groups
    assert "split off at s 2: fx_engine_layout with the flag off passes no layout on (uniform allocation)" \
        in plan.notes, plan.notes
    split = plain.plan(on)
    assert (split.active, split.split_size, split.n_blocks) == (True, 2, at[2]), split
    active, why = plain.activation(LayerwiseFlags(enable=False, split_size=2))
    assert not active and "fx_engine_layout with the flag off passes no layout on" in why, why


def test_a_port_whose_engine_ignores_its_flag_splits_with_the_flag_off_and_its_list_says_so(trees):
    plain, planted = trees
    plan = planted.plan(run(2, enable=False))
    assert (plan.active, plan.split_size) == (True, 2), plan
    cases = [JudgedCase(id="off-s2", run=run(2, enable=False), tcs=case_tcs(False)),
             JudgedCase(id="off-s4", run=run(4, enable=False), tcs=case_tcs(False)),
             JudgedCase(id="on-s2", run=run(2), tcs=case_tcs(True))]
    found = [d for d in judge(planted, cases).departures if "FEATURE 2" in d.rule]
    assert [(d.role, d.tree, d.spec, tuple(c.split(" (")[0] for c in d.cases), d.function) for d in found] == \
        [("engine", "active with the flag off", "inactive", ("off-s2", "off-s4"), "fx_engine_layout")], \
        departures.markdown([judge(planted, cases)])
    assert not [d for d in judge(plain, cases).departures if "FEATURE 2" in d.rule]


def test_where_upstreams_engine_plays_the_role_s_above_1_alone_activates(trees):
    """Upstream's engine has no enable flag: the upstream-shaped fixture tree, and the fixture port with its
    ``engine`` left to that tree as its base, split at s > 1 with the flag off (no tree code asked a flag)."""
    from implementations.xllm_native import XllmNativeImplementation
    from implementations.xllm_native.manifest import Role

    plain, _ = trees
    upstream_shaped = XllmNativeImplementation(source_dir=str(FIXTURE_TREE))
    port = copy.copy(plain)
    port.manifest = replace(plain.manifest, roles={**plain.manifest.roles, "engine": Role(name="engine", base="x")})
    port.base = upstream_shaped
    off = LayerwiseFlags(enable=False, split_size=2)
    for impl in (upstream_shaped, port):
        assert impl.activation(off) == (True, "s > 1 alone (fixture_tree's engine has no enable flag)")
        assert not impl.is_active(LayerwiseFlags(enable=True, split_size=1))
    assert not plain.is_active(off)  # the port's own engine reads its flag
