"""Every start-up rule of FEATURE 3 a compiled upstream-cut tree is judged on is the tree's compiled code, never a
Python rule run after it accepted: s against the attention TP is the master's ``validate_layerwise_split_enablement``
CHECK, an int8 KV cache the worker's ``LOG(FATAL)`` of a build that is not MLU's (``WorkerImpl::allocate_kv_cache_storage``
cut through its quantization block), an int8 indexer cache the ``CHECK`` of the indexed cache's allocation
(``create_indexed_kv_cache_tensors``, file ``indexer_checks``). On the upstream-shaped fixture tree; planted builds
that drop the divisor check (``FIXTURE_PLANT_SPLIT_DIVISOR_DROPPED``), the int8 KV refusal
(``FIXTURE_PLANT_INT8_KV_ACCEPTED``) or the int8 indexer's (``FIXTURE_PLANT_INT8_INDEXER_ACCEPTED``) accept, and the
departure list says so; a tree without the indexed cache's allocation fails the int8 indexer case naming
``implementation.files.indexer_checks``."""

from __future__ import annotations

from dataclasses import replace

import pytest

from contract.errors import ConfigError, PlanError
from contract.specs import CacheSpec
from testcases.native.test_allocation_checks import FIXTURE, MODEL, planted_manifest
from testcases.unit import _models as M

pytestmark = pytest.mark.slow  # builds C++: scheduled first

PLANTED = "FIXTURE_PLANT_SPLIT_DIVISOR_DROPPED, FIXTURE_PLANT_INT8_KV_ACCEPTED, FIXTURE_PLANT_INT8_INDEXER_ACCEPTED"
"""One planted build for the three defects (none decides another's cases)."""
INDEXED = replace(MODEL, index_n_heads=4, index_head_dim=64)
"""The fixture's split model with a DSA indexer (full-attention layers only: the linear + indexer CHECK lets it be)."""



def run(split: int = 2, model=MODEL, **cache):
    return M.run_spec(model, split=split, world=4, budget_bytes=100 * 16 * 64 + 5, cache=CacheSpec(block_size=16, **cache))


def test_s_not_dividing_the_attention_tp_is_the_trees_compiled_check(implementation):
    with pytest.raises(ConfigError) as err:
        implementation().validate(run(3))
    assert (err.value.field, err.value.value) == ("layerwise.split_size", 3), err.value
    assert "CHECK at layerwise_split_layout.h:23 `CHECK_EQ(attn_tp_size % layerwise_split_size, 0)`" in str(err.value), \
        err.value


def test_the_quantized_caches_are_refused_by_the_trees_compiled_worker_and_allocation(implementation):
    impl = implementation()
    for cache, field, where in ((dict(kv_cache_dtype="int8"), "cache.kv_cache_dtype", "worker_impl.cpp:"),
                                (dict(indexer_cache_dtype="int8"), "cache.indexer_cache_dtype", "kv_cache_utils.cpp:")):
        with pytest.raises(ConfigError) as err:  # the hardware profile (cpu) allows both: the build decides
            impl.validate(run(model=INDEXED, **cache))
        assert err.value.field == field and f"CHECK at {where}" in str(err.value), err.value
    impl.validate(run(model=INDEXED, kv_cache_dtype="fp8_e4m3"))  # upstream's worker quantizes int8 alone
    impl.validate(run(indexer_cache_dtype="int8"))  # no indexer: no indexed cache to allocate


def test_a_build_that_dropped_a_compiled_check_is_not_credited_with_a_python_refusal(implementation, tmp_path):
    from harness.departures.judge import JudgedCase, judge

    impl = implementation(planted_manifest(tmp_path, PLANTED))
    impl.validate(run(3))  # a Python rule after the compiled validation used to refuse it
    impl.validate(run(model=INDEXED, kv_cache_dtype="int8"))
    impl.validate(run(model=INDEXED, indexer_cache_dtype="int8"))
    cases = [JudgedCase(id="s-not-dividing-tp", run=run(3), tcs=("TC-01",), refusal=True)]

    def accepted(tree) -> set:  # the cases of the tree's validation departures that read "accepts"
        return {c for d in judge(tree, cases).departures if d.role == "validation" and d.tree == "accepts"
                for c in d.cases}

    assert accepted(impl) == {"s-not-dividing-tp"}
    assert accepted(implementation()) == set()  # the plain build refuses it (naming s; the spec: the fixture's model)


def test_a_tree_without_the_indexed_caches_allocation_fails_the_int8_indexer_naming_the_file(implementation, tmp_path):
    elsewhere = tmp_path / "kv_cache_utils.cpp"
    elsewhere.write_text("// no indexed cache allocation here\n")
    impl = implementation(FIXTURE / "lwsplit-manifest.yaml", files={"indexer_checks": str(elsewhere)})
    with pytest.raises(PlanError) as err:
        impl.validate(run(model=INDEXED, indexer_cache_dtype="int8"))
    assert err.value.field == "implementation.files.indexer_checks", err.value
    assert "defines no create_indexed_kv_cache_tensors" in str(err.value), err.value
    impl.validate(run(model=INDEXED))  # an auto indexer cache never reaches the branch


def test_the_indexed_allocations_file_is_part_of_the_build_key(tmp_path):
    """Its text is cut into the build (no compiler dependency list names it): a change rebuilds."""
    from implementations.xllm_native.build import keys
    from implementations.xllm_native.tree import files as tree_files

    utils = tmp_path / "kv_cache_utils.cpp"
    utils.write_text((FIXTURE / "xllm/core/framework/kv_cache/kv_cache_utils.cpp").read_text())
    key = keys.source_key(tree_files.tree_map(str(FIXTURE), {"indexer_checks": str(utils)}))
    utils.write_text(utils.read_text() + "// changed\n")
    assert keys.source_key(tree_files.tree_map(str(FIXTURE), {"indexer_checks": str(utils)})) != key
