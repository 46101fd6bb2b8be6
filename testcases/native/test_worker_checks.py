"""Upstream's worker-side start-up CHECKs are the tree's compiled code, never the Python model: the build cuts
``WorkerImpl::allocate_kv_cache_storage``'s statements before its first on the KV-cache quantization
(``build.generate.worker_checks_cut``) and compiles them with a shim of the worker's state (``cpp/worker_shim.h``); a CHECK
that fires is the refusal naming its field (``draft.`` for the draft worker's). On the upstream-shaped fixture
tree (its ``xllm/core/runtime/worker_impl.cpp``); planted: a build without the fixture's CHECK
(``FIXTURE_PLANT_NO_WORKER_CHECK``) accepts what the model would have refused, and a tree without the function
fails naming ``implementation.files.worker_checks``."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from contract.errors import ConfigError, PlanError
from testcases.native.test_allocation_checks import PLANTED_DEFINES
from testcases.unit import _models as M

pytestmark = pytest.mark.slow  # builds C++: scheduled first

FIXTURE = Path(__file__).resolve().parent / "fixture_tree"
LINEAR_AND_INDEXER = replace(M.QWEN3_5_MOE, index_n_heads=8, index_head_dim=128)
DRAFT_WITH_INDEXER = replace(M.QWEN3_5_MTP, index_n_heads=4, index_head_dim=64)
DRAFT_LINEAR_AND_INDEXER = replace(DRAFT_WITH_INDEXER, num_hidden_layers=2, num_nextn_predict_layers=1,
                                   layer_types=("full_attention", "linear_attention"))
"""A draft whose one draft layer is full attention (the harness's drafts) and whose model has a linear layer and an
indexer: the worker's linear + indexer rule is all that refuses it."""



def test_the_workers_linear_and_indexer_check_is_the_trees_compiled_check(implementation):
    impl = implementation()
    with pytest.raises(ConfigError) as err:
        impl.validate(M.run_spec(LINEAR_AND_INDEXER, world=4))
    assert err.value.field == "model.index_n_heads" and err.value.value == 8, err.value
    assert "CHECK at worker_impl.cpp:20 `CHECK(!(enable_linear_attention && enable_lighting_indexer))`" \
        in str(err.value), err.value
    with pytest.raises(ConfigError) as err:
        impl.validate(M.run_spec(M.QWEN3_5_MOE, world=4, draft=DRAFT_WITH_INDEXER))
    assert (err.value.field, err.value.value) == ("draft.index_n_heads", 4), err.value
    with pytest.raises(ConfigError) as err:
        impl.validate(M.run_spec(M.QWEN3_5_MOE, world=4, draft=DRAFT_LINEAR_AND_INDEXER))
    assert (err.value.field, err.value.value) == ("draft.index_n_heads", 4) and "CHECK at" in str(err.value), err.value
    impl.validate(M.run_spec(M.DEEPSEEK_V32, world=4))  # an indexer without linear layers: accepted


def test_a_tree_whose_worker_lets_both_through_is_not_credited_with_the_check(implementation, tmp_path):
    planted = tmp_path / "lwsplit-manifest.yaml"
    planted.write_text((FIXTURE / "lwsplit-manifest.yaml").read_text().replace(
        "compile: upstream-cut\n", f"compile: upstream-cut\ndefines: [{PLANTED_DEFINES}]\n"))
    impl = implementation(planted)
    impl.validate(M.run_spec(LINEAR_AND_INDEXER, world=4))  # the Python model would refuse
    impl.validate(M.run_spec(M.QWEN3_5_MOE, world=4, draft=DRAFT_LINEAR_AND_INDEXER))  # so would its draft rule


def test_a_tree_without_the_workers_start_up_fails_naming_the_file(implementation, tmp_path):
    elsewhere = tmp_path / "worker_impl.cpp"
    elsewhere.write_text("// no WorkerImpl here\n")
    impl = implementation(FIXTURE / "lwsplit-manifest.yaml", files={"worker_checks": str(elsewhere)})
    with pytest.raises(PlanError) as err:
        impl.validate(M.run_spec(M.DEEPSEEK_V32, world=4))
    assert err.value.field == "implementation.files.worker_checks", err.value
    assert "defines no WorkerImpl::allocate_kv_cache_storage" in str(err.value), err.value


def test_the_worker_role_of_upstreams_tree_is_its_compiled_start_up(implementation, tmp_path):
    """The departure list's worker role on an upstream-shaped tree is the mask its compiled start-up builds
    (was: the plan's masks at ``rank % s``, a model of upstream's worker): a build whose worker takes split rank
    ``rank / s % s`` is one worker departure, the plain build none."""
    from harness.departures.judge import JudgedCase, case_tcs, judge

    planted = tmp_path / "lwsplit-manifest.yaml"
    planted.write_text((FIXTURE / "lwsplit-manifest.yaml").read_text().replace(
        "compile: upstream-cut\n", "compile: upstream-cut\ndefines: [FIXTURE_PLANT_WORKER_RANK]\n"))
    cases = [JudgedCase(id="s2", run=M.run_spec(M.DEEPSEEK_V32, split=2, world=4), tcs=case_tcs(True))]
    found = {name: [d for d in judge(impl, cases).departures if d.role == "worker"]
             for name, impl in (("plain", implementation()), ("planted", implementation(planted)))}
    assert found["plain"] == [], found
    assert [(d.tree, d.function) for d in found["planted"]] == \
        [("workers own other full layers", "build_layer_cache_owned")], found


def test_a_worker_of_upstreams_tree_holds_the_mask_its_compiled_start_up_builds(implementation, tmp_path):
    """End to end (``plan`` then ``init_worker``), a worker of an upstream-shaped tree owns what its compiled start-up
    builds for its global rank (was: the plan's owners at a Python ``rank % s``): a build whose worker takes split
    rank ``rank / s % s`` hands rank 1 split rank 0's layers."""
    from harness import oracle

    planted = tmp_path / "lwsplit-manifest.yaml"
    planted.write_text((FIXTURE / "lwsplit-manifest.yaml").read_text().replace(
        "compile: upstream-cut\n", "compile: upstream-cut\ndefines: [FIXTURE_PLANT_WORKER_RANK]\n"))
    run = M.run_spec(replace(M.LLAMA3_8B, model_type="fixture_split"), split=2, world=4)
    want = set(oracle.expected_owned_full_layers(run, 1))  # rank 1: split rank 1 in consecutive groups of 2
    owned = {}
    for name, impl in (("plain", implementation()), ("planted", implementation(planted))):
        plan = impl.plan(run)
        w = impl.init_worker(plan, run, rank=1, role="target", device="cpu", expected_digest=plan.digest)
        owned[name] = {layer for layer in plan.full_layers if w.layer(layer).owned}
    assert owned["plain"] == want and owned["planted"] != want, (owned, sorted(want))
