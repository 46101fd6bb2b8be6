"""TC-04's tampered layout on a compiled tree: no code of upstream's tree or a port's checks what its workers
receive (they take their split from their own s and rank), so the tree is credited with no such check: its plan
says where its workers take their split from (``TREE_MESSAGE_NOTE``), TC-04 judges no tampered layout for it and
its result shows the check as not judged (result line, JUnit property, results.md); the reference is still judged.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace

import pytest

from contract.errors import PlanError
from contract.plan_types import TREE_MESSAGE_NOTE
from contract.specs import CacheSpec, ModelSpec
from harness import native_verdicts
from harness.app import aggregate
from harness.suites import tc04
from implementations.xllm_native import manifest
from implementations.xllm_native.build import cache as build_cache
from implementations.xllm_native.build import library
from implementations.xllm_native.tree import files as tree_files
from implementations.xllm_native.tree import resolve as resolve_mod
from testcases import ROOT
from testcases.native.test_port_base import FIXTURE_TREE
from testcases.native.test_ports import FIXTURE, FIXTURE_MANIFEST, QWEN, run
from testcases.real_trees import PORTS, UPSTREAM, real_tree
from testcases.unit import _models as M

pytestmark = pytest.mark.slow  # builds C++: scheduled first

SPLIT_MODEL = ModelSpec(name="fixture", model_type="fixture_split", num_hidden_layers=6, attention="mla",
                        kv_lora_rank=24, qk_rope_head_dim=8)
"""A model the upstream-shaped fixture tree splits."""


def native(cache, **kw):
    os.environ[build_cache.ENV_CACHE] = str(cache)
    try:
        from implementations.xllm_native import XllmNativeImplementation

        return XllmNativeImplementation(**kw)
    finally:
        os.environ.pop(build_cache.ENV_CACHE, None)


def message_note(plan) -> str:
    return next(n for n in plan.notes if n.startswith(TREE_MESSAGE_NOTE))


def test_a_trees_plan_says_where_its_workers_take_their_split_and_its_worker_takes_a_tampered_layout(cache):
    """Was: every compiled tree's ``init_worker`` refused a tampered layout with the harness's own Python digest
    check, a check no code of the tree makes."""
    from implementations.reference import ReferenceImplementation

    port = native(cache, source_dir=str(FIXTURE), manifest=str(FIXTURE_MANIFEST))
    note = message_note(port.plan(run(2)))
    assert "fx_worker_mask (core/runtime/worker_layerwise_init.cpp), handed the layer types, s, the worker's rank" in note
    assert "worker_checks, judged by TC-01 and TC-07" in note, note

    upstream_shaped = native(cache, source_dir=str(FIXTURE_TREE))
    r = M.run_spec(SPLIT_MODEL, split=2, world=4, budget_bytes=1 << 20, cache=CacheSpec(block_size=16))
    plan = upstream_shaped.plan(r)
    note = message_note(plan)
    assert "build_layer_cache_owned" in note and "LayerwiseSplitLayout(s, rank % s)" in note, note
    assert "WorkerImpl::allocate_kv_cache_storage" in note, note
    tampered = replace(plan, n_blocks=plan.n_blocks + 1)
    cache_ = upstream_shaped.init_worker(tampered, r, rank=1, role="target", device="cpu", expected_digest=plan.digest)
    assert cache_.n_blocks == plan.n_blocks + 1  # nothing of the tree compared it with the master's
    reference = ReferenceImplementation()
    ref_plan = reference.plan(replace(r, model=M.DEEPSEEK_V32))
    with pytest.raises(PlanError, match="plan digest"):  # the reference still checks its message
        reference.init_worker(replace(ref_plan, n_blocks=ref_plan.n_blocks + 1), replace(r, model=M.DEEPSEEK_V32),
                              rank=1, role="target", device="cpu", expected_digest=ref_plan.digest)
    assert tc04.tamper_not_judged(ref_plan, reference) is None
    assert tc04.tamper_not_judged(plan, upstream_shaped) == note


def test_a_tree_without_a_worker_role_says_so_in_its_note(cache):
    port = native(cache, source_dir=str(FIXTURE), manifest=str(FIXTURE_MANIFEST))
    port.manifest = replace(port.manifest, roles={**port.manifest.roles,
                                                  "worker": manifest.Role(name="worker", absent="no worker here")})
    note = port.tree_message_note()
    assert note.startswith(TREE_MESSAGE_NOTE) and "plays no worker role (manifest role `worker` is absent: " \
        "no worker here)" in note, note


def test_tc04_on_a_compiled_tree_shows_the_tampered_layout_not_judged_and_passes_its_other_checks(cache, tmp_path):
    """The fixture port's flag-off case: every other TC-04 check passes; the tampered layout is not judged, and
    the result line, the JUnit report (``harness.native_verdicts``' row) and results.md's cell say why."""
    tree_map = resolve_mod.resolve(str(FIXTURE), None, str(FIXTURE_MANIFEST))[0]
    library.build(tree_map, root=cache)
    library.build(tree_map, root=cache, tensors=True)
    env = {**os.environ, tree_files.ENV_SOURCE: str(FIXTURE), build_cache.ENV_CACHE: str(cache), "PYTHONPATH": str(ROOT)}
    env.pop("LW_ALLUREDIR", None)
    junit, lines = tmp_path / "junit.xml", tmp_path / "results.jsonl"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:randomly", "-n", "0", "-q", "testcases/tc/test_tc04_propagation.py",
         "--lw-override", "implementation=xllm_native", "--lw-override", "model=qwen3_5_moe",
         "--lw-override", f"implementation.manifest={FIXTURE_MANIFEST}", "-k", "qwen3_5_moe-off-w4-xllm_native",
         f"--junitxml={junit}", f"--lw-results={lines}"],
        capture_output=True, text=True, cwd=ROOT, env=env, timeout=600)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    (line,) = [json.loads(text) for text in lines.read_text().splitlines()]
    assert line["outcome"] == "passed" and len(line["not_judged"]) == 1, line
    note = line["not_judged"][0]
    assert note.startswith(TREE_MESSAGE_NOTE) and "fx_worker_mask" in note, note
    (row,) = native_verdicts.verdicts(junit.read_text(), "fixture_port", "fixture_port", "qwen3_5_moe")
    assert row[3:] == ("off", "TC-04", "pass", note), row
    assert aggregate.tc_verdict({"counts": {"passed": 1}, "cases": [line]}) == ("pass", f"1 passed; {note}")


@pytest.mark.real_tree
@real_tree(PORTS["p6_v3_latest"], UPSTREAM)
def test_upstreams_and_the_ports_plans_name_the_function_their_workers_take_their_split_from(cache, monkeypatch):
    """In each tree's own terms: upstream's worker builds its mask in ``WorkerImpl::allocate_kv_cache_storage``,
    the BI-V100 port's in ``worker_compute_layer_cache_owned``, each from its own s and rank."""
    monkeypatch.setenv("LWSPLIT_XLLM_BASE_SRC", str(UPSTREAM))
    upstream = native(cache, source_dir=str(UPSTREAM))
    note = message_note(upstream.plan(M.run_spec(M.DEEPSEEK_V32, split=2, world=4)))
    assert "build_layer_cache_owned (xllm/core/framework/kv_cache/kv_cache_estimation.cpp) over " \
           "LayerwiseSplitLayout(s, rank % s), as WorkerImpl::allocate_kv_cache_storage calls it" in note, note
    port = native(cache, source_dir=str(PORTS["p6_v3_latest"]))
    note = message_note(port.plan(M.run_spec(QWEN, split=2, world=4, budget_bytes=1 << 30)))
    assert "worker_compute_layer_cache_owned (core/runtime/worker_layerwise_init.cpp), handed the layer types" in note
