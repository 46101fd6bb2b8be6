"""Upstream xLLM's own KV-cache allocation (494f293b5: ``allocate_kv_caches`` and the cache classes under
``framework/kv_cache``, ``-DUSE_ILU``), compiled by the shipped manifest's ``allocation`` block and run in
this process, judged by the harness's checks. Real-tree tests (``LWSPLIT_REAL_TREES=1 pytest -n 0 -m
real_tree``): the tensor library's cold build takes about 15 s on two cores."""

from __future__ import annotations

import os
from dataclasses import replace

import pytest

from contract.specs import CacheSpec
from harness import oracle
from implementations.xllm_native.build import cache as build_cache
from testcases.real_trees import UPSTREAM, real_tree
from testcases.unit import _models as M

pytestmark = [pytest.mark.real_tree, real_tree(UPSTREAM)]

QWEN_TYPES = tuple("full_attention" if (layer + 1) % 4 == 0 else "linear_attention" for layer in range(40))


@pytest.fixture(scope="module")
def impl(cache):
    from implementations.xllm_native import XllmNativeImplementation

    os.environ[build_cache.ENV_CACHE] = str(cache)
    try:
        yield XllmNativeImplementation(source_dir=str(UPSTREAM))
    finally:
        os.environ.pop(build_cache.ENV_CACHE, None)


def worker(impl, run, rank=0):
    plan = impl.plan(run)
    return plan, impl.init_worker(plan, run, rank=rank, role="target", device="cpu", expected_digest=plan.digest)


def geometry(tensors: dict) -> dict:
    return {name: (tuple(t.shape), str(t.dtype).replace("torch.", "")) for name, t in tensors.items()}


def test_the_split_workers_hold_upstreams_tensors_and_views_of_one_scratch(impl):
    run = M.run_spec(M.DEEPSEEK_V32, split=2, budget_bytes=1 << 28)
    plan, w = worker(impl, run, rank=1)
    want = {n: (t.shape, t.dtype) for n, t in oracle.expected_full_layer_tensors(run, plan.n_blocks).items()}
    assert geometry(w.layer(1).tensors) == want and w.layer(1).owned and not w.layer(0).owned
    views = {w.layer(layer).tensors["latent"].untyped_storage().data_ptr() for layer in range(0, 61, 2)}
    assert views == {w.scratch["latent"].untyped_storage().data_ptr()}  # create_shared_view: one storage


@pytest.mark.parametrize("interval, linear_tensors", [(4, {"conv", "recurrent"}), (None, {"k", "v"})])
def test_upstream_picks_a_layers_cache_by_the_interval_not_by_layer_types(impl, interval, linear_tensors):
    """upstream's own divergence: ownership, the estimate and KVCacheShape read ``layer_types`` first, but
    ``create_kv_cache_impl`` (kv_cache.cpp) decides a linear layer by ``full_attention_interval`` alone, so a
    config with layer types and no interval gets K/V on its linear layers (xLLM's loaders default the
    interval to 4, so a Qwen3.5 config.json does not reach it)."""
    model = replace(M.QWEN3_5_MOE, layer_types=QWEN_TYPES, full_attention_interval=interval)
    _, w = worker(impl, M.run_spec(model, split=1, budget_bytes=1 << 28))
    assert set(w.layer(0).tensors) == linear_tensors and set(w.layer(3).tensors) == {"k", "v"}


@pytest.mark.parametrize("quantized, field, where", [
    (dict(kv_cache_dtype="int8"), "cache.kv_cache_dtype", "CHECK at worker_impl.cpp:517 `LOG(FATAL)`"),
    (dict(indexer_cache_dtype="int8"), "cache.indexer_cache_dtype", "CHECK at kv_cache_utils.cpp:248 `CHECK(false)`")])
def test_upstreams_ilu_worker_stops_on_the_int8_caches_naming_the_field(impl, quantized, field, where):
    """FEATURE 3: upstream's int8 KV cache exists only on MLU and its int8 indexer cache on NPU and MLU; its build
    stops (the worker's LOG(FATAL), the indexed allocation's CHECK(false), compiled into the worker's start-up
    checks and asked with the master's validation) though the CPU profile allows both. The harness names the
    field, as ``oracle.expected_upstream_worker_stop`` predicts."""
    from contract.errors import UserError
    run = M.run_spec(M.DEEPSEEK_V32, split=2, budget_bytes=1 << 28, cache=CacheSpec(**quantized))
    assert oracle.expected_rejection(run) is None
    assert oracle.expected_upstream_worker_stop(run, "ilu").field == field
    with pytest.raises(UserError) as err:
        worker(impl, run)
    assert err.value.field == field and where in str(err.value), str(err.value)


def test_upstream_allocates_an_fp8_kv_cache_in_the_models_dtype_it_estimates_at_one_byte(impl):
    """upstream's own divergence (recorded, docs/native.md): its estimate counts an fp8 KV dtype at 1 byte
    (kv_cache_dtype_size) but its worker allocates every cache in the model's dtype and no scale, so the
    allocation exceeds its own plan; the TC-01/TC-02 cases on fp8 find it."""
    run = M.run_spec(M.DEEPSEEK_V32, split=2, budget_bytes=1 << 28, cache=CacheSpec(kv_cache_dtype="fp8_e4m3"))
    plan, w = worker(impl, run, rank=1)
    want = oracle.expected_full_layer_tensors(run, plan.n_blocks)
    assert want["latent"].dtype == "float8_e4m3fn" and "latent_scale" in want
    got = geometry(w.layer(1).tensors)
    assert got["latent"][1] == "bfloat16" and "latent_scale" not in got


def test_a_tokens_major_profile_gets_upstreams_default_layout_build_beside_the_ilu_one(impl):
    """The manifest builds upstream's allocation per KV layout (``layout_defines``): heads-major with USE_ILU,
    tokens-major with no backend define; both open in one process, and a CHECK in either still comes back."""
    from contract.errors import UserError

    heads = M.run_spec(M.DEEPSEEK_V32, split=2, budget_bytes=1 << 28)
    tokens = replace(heads, hardware=replace(heads.hardware, kv_layout="tokens_major"))
    for run in (heads, tokens, heads):
        plan, w = worker(impl, run, rank=1)
        want = {n: (t.shape, t.dtype) for n, t in oracle.expected_full_layer_tensors(run, plan.n_blocks).items()}
        assert geometry(w.layer(1).tensors) == want, run.hardware.kv_layout
    with pytest.raises(UserError) as err:
        worker(impl, replace(tokens, cache=CacheSpec(kv_cache_dtype="int8")))
    assert err.value.field == "cache.kv_cache_dtype"
