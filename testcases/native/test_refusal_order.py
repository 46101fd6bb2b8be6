"""Configurations that break two startup rules at once are refused for the first in upstream's order
(FEATURE 3: the master's rules, the model type before attention tp % s, then the worker-side CHECKs),
by the oracle (spec and upstream) and by the implementations that follow it.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from contract.errors import UserError
from contract.specs import CacheSpec
from harness import oracle
from implementations.reference import ReferenceImplementation
from implementations.xllm_upstream import XllmUpstreamImplementation
from testcases.unit import _models as M

NO_QUANT = M.hardware(8, quantized=False)
INDEXED_QWEN = replace(M.QWEN3_5_MOE, index_n_heads=64, index_head_dim=128)

CASES = {
    # name: (run, field upstream names first, field the spec names first)
    "unsupported-model-and-tp-mod-s": (M.run_spec(M.LLAMA3_8B, split=3), "model.model_type", "model.model_type"),
    "unsupported-model-and-linear-indexer": (M.run_spec(INDEXED_QWEN, split=2), "model.model_type",
                                             "model.index_n_heads"),
    "cp-and-int8-kv": (replace(M.run_spec(M.DEEPSEEK_V32, split=2, world=8, cp=2, cache=CacheSpec(kv_cache_dtype="int8")),
                               hardware=NO_QUANT), "parallel.cp_size", "parallel.cp_size"),
    "host-cache-and-int8-indexer": (replace(M.run_spec(M.DEEPSEEK_V32, split=2, cache=CacheSpec(
        host_blocks_factor=2.0, indexer_cache_dtype="int8")), hardware=M.hardware(4, quantized=False)),
        "cache.host_blocks_factor", "cache.host_blocks_factor"),
    "unsupported-model-and-int8-kv": (replace(M.run_spec(M.LLAMA3_8B, split=2, cache=CacheSpec(kv_cache_dtype="int8")),
                                              hardware=M.hardware(4, quantized=False)),
                                      "model.model_type", "model.model_type"),
    "kv-split-and-xtensor": (M.run_spec(M.DEEPSEEK_V32, split=2, kv_split_size=2,
                                        cache=CacheSpec(enable_xtensor=True)),
                             "parallel.kv_split_size", "parallel.kv_split_size"),
}


def refused_field(impl, run) -> str:
    with pytest.raises(UserError) as err:
        impl.plan(run)
    return err.value.field


@pytest.mark.parametrize("name", sorted(CASES))
def test_two_broken_rules_name_the_first_in_upstreams_order(name):
    run, upstream, spec = CASES[name]
    assert oracle.expected_upstream_rejection(run).field == upstream
    assert refused_field(XllmUpstreamImplementation(), run) == upstream
    assert oracle.expected_rejection(run).field == spec
    assert refused_field(ReferenceImplementation(), run) == spec
