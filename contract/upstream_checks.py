"""Upstream's CHECKs on the split's path and the harness field each one guards: one table, read two ways.

* A compiled tree's CHECK that fired comes back with its file and line; the native adapter reads the condition
  there and takes the first row whose ``condition`` matches it, else (``LOG(FATAL)``, ``CHECK(false)``: a
  condition that names nothing) the first whose ``message_pattern`` matches glog's message
  (``implementations/xllm_native/runtime/checks.py``).
* An engine log holds glog's message only; the log check takes the first row whose ``message`` (upstream's string
  literals as the stream prints them, with their place ``where`` at 494f293b5) is in it
  (``harness/conformance/check.py``).

A row with both is one CHECK read either way. Three of upstream's CHECKs have a row for each reading that names
another field (``kv_cache_estimation.cpp:182`` and ``:184``, ``worker_impl.cpp:485``): the adapter names what the
harness's run sets (the model, the budget a card leaves), the log check the engine's option.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional


@dataclass(frozen=True, kw_only=True)
class UpstreamCheck:
    """One CHECK and the field it guards."""

    field: str
    """The harness field the CHECK guards (``layerwise.split_size``)."""
    allowed: str = ""
    """What the field accepts, as a refusal says it; empty for a row only an engine log reads."""
    condition: str = ""
    """A pattern over the CHECK's condition as written in the source (``CHECK_GE(layerwise_split_size, 1)``)."""
    message: str = ""
    """Text of glog's message, as upstream's string literals print it."""
    where: str = ""
    """The message's place in upstream 494f293b5 (``file:line``)."""
    message_pattern: str = ""
    """A pattern over glog's message, for a CHECK whose condition names nothing; tried after every ``condition``."""


UPSTREAM_CHECKS: tuple[UpstreamCheck, ...] = (
    UpstreamCheck(field="layerwise.split_size", allowed="a whole number >= 1", condition=r"layerwise_split_size\s*,\s*1\b",
                  message="layerwise_split_size must be >= 1", where="layerwise_split_layout.h:31"),
    UpstreamCheck(field="layerwise.split_size", allowed="a whole number >= 1", condition=r"group_size_\s*,\s*0|local_rank_\s*>="),
    UpstreamCheck(field="parallel.dp_size", allowed="a whole number >= 1", condition=r"dp_size\(\)\s*,\s*1\b",
                  message="dp_size must be >= 1", where="master.cpp:99"),
    UpstreamCheck(field="parallel.world_size", allowed="a multiple of dp_size * cp_size",
                  condition=r"global_world_size\s*%\s*dp_cp_size", message="must be divisible by dp_size * cp_size",
                  where="master.cpp:102"),
    UpstreamCheck(field="parallel.world_size", allowed="a whole number >= 1", condition=r"global_world_size\s*,\s*0\b",
                  message="world_size must be > 0", where="master.cpp:100"),
    UpstreamCheck(field="model.model_type", allowed="a model type the tree splits", condition=r"is_layerwise_split_supported_model",
                  message="layerwise_split_size > 1 is only supported for", where="layerwise_split_layout.h:41"),
    UpstreamCheck(field="layerwise.split_size", allowed="a divisor of the attention TP size",
                  condition=r"attn_tp_size\s*%\s*layerwise_split_size", message="must be divisible by layerwise_split_size",
                  where="layerwise_split_layout.h:45"),
    UpstreamCheck(field="cache.host_blocks_factor", allowed="<= 1 (host cache off) with the split", condition=r"host_blocks_factor",
                  message="does not support hierarchy host cache", where="master.cpp:114"),
    UpstreamCheck(field="parallel.kv_split_size", allowed="1 (no KV split) with the split", condition=r"kv_split_size_effective",
                  message="does not support KV split", where="master.cpp:118"),
    UpstreamCheck(field="parallel.cp_size", allowed="1 (no context parallel) with the split", condition=r"cp_size\(\)\s*,\s*1\b",
                  message="does not support context parallelism", where="master.cpp:116"),
    # one condition for both (``CHECK(layer_cache_owned.empty())``): a compiled one is told apart by glog's message
    UpstreamCheck(field="cache.enable_sleep_mode", allowed="false with the split active",
                  message="Sleep mode does not support layerwise split", where="kv_cache.cpp:382",
                  message_pattern=r"\bSleep mode does not support layerwise split\b"),
    UpstreamCheck(field="cache.enable_xtensor", allowed="false with the split active",
                  message="XTensor does not support layerwise split", where="kv_cache.cpp:389",
                  message_pattern=r"\bXTensor does not support layerwise split\b"),
    UpstreamCheck(field="cache.kv_cache_dtype",
                  allowed="auto: the tree's build has no int8 KV cache (upstream: MLU only, FEATURE 3)",
                  message="KV Cache quantization is only supported on MLU", where="worker_impl.cpp:517",
                  message_pattern=r"(?i)\bKV Cache quantization\b.*\bonly supported\b|\bint8 KV cache\b.*\bnot supported\b"),
    UpstreamCheck(field="cache.kv_cache_dtype", message="KV cache quantization is only supported on MLU",
                  where="kv_cache_utils.cpp:289"),
    UpstreamCheck(field="cache.indexer_cache_dtype",
                  allowed="auto: the tree's build has no int8 indexer cache (upstream: NPU and MLU only, FEATURE 3)",
                  message="Indexer cache INT8 is unsupported on this backend", where="kv_cache_utils.cpp:248",
                  message_pattern=r"(?i)\bIndexer cache INT8\b.*\bunsupported\b"),
    UpstreamCheck(field="index_n_heads", message="does not support linear attention and lighting indexer",
                  where="worker_impl.cpp:485"),
    UpstreamCheck(field="model.index_n_heads",
                  allowed="0 on a model with linear-attention layers (no DSA indexer with linear attention)",
                  condition=r"enable_linear_attention\s*&&\s*enable_lighting_indexer"),
    UpstreamCheck(field="index_n_heads", message="does not support index_cache_shape with conv_cache_shape",
                  where="kv_cache_shape.cpp:76"),
    UpstreamCheck(field="layerwise.split_size", message="No layerwise split rank owns a model layer",
                  where="kv_cache_estimation.cpp:182"),
    UpstreamCheck(field="cache.kv_budget_bytes", message="No memory for one layerwise split block",
                  where="kv_cache_estimation.cpp:184"),
    UpstreamCheck(field="cache.max_linear_state_cache_slots", allowed="at most the linear-state slots the budget holds",
                  condition=r"requested_blocks\s*,\s*max_blocks", message="max_linear_state_cache_slots requires",
                  where="kv_cache_estimation.cpp:268"),
    UpstreamCheck(field="cache.kv_budget_bytes", message="failed to reserve linear state cache",
                  where="kv_cache_estimation.cpp:524"),
    UpstreamCheck(field="cache.kv_budget_bytes", message="no memory left for full-attention kv cache",
                  where="kv_cache_estimation.cpp:535"),
    UpstreamCheck(field="cache.kv_budget_bytes", message="no n_blocks for kv cache", where="kv_cache_estimation.cpp:549"),
    UpstreamCheck(field="cache.kv_budget_bytes", message="no memory for kv cache", where="llm_engine.cpp:574"),
    UpstreamCheck(field="cache.kv_budget_bytes", message="no memory left for speculative full-attention kv cache",
                  where="kv_cache_estimation.cpp:674"),
    UpstreamCheck(field="cache.kv_budget_bytes", message="no memory for target kv cache", where="kv_cache_estimation.cpp:648"),
    UpstreamCheck(field="cache.kv_budget_bytes", message="no memory for draft kv cache", where="kv_cache_estimation.cpp:650"),
    UpstreamCheck(field="draft", allowed="a draft slot <= the target's, or draft.body_tp1=true",
                  condition=r"draft_full_attention_slot_size\s*,\s*target_full_attention_slot_size",
                  message="draft full-attention kv cache slot size must not exceed", where="kv_cache_estimation.cpp:687"),
    UpstreamCheck(field="cache.block_size", allowed="the target's block size",
                  condition=r"block_size\(\)\s*,\s*draft_kv_cache_cap\.block_size"),
    UpstreamCheck(field="model", allowed="a model with a full-attention layer to split",
                  condition=r"common_block_count\s*,\s*std::numeric_limits"),
    UpstreamCheck(field="cache.max_seqs_per_batch",
                  allowed="fewer sequences: the linear state must leave room for full-attention KV",
                  condition=r"linear_cache_size_in_bytes|available_full_cache_size_in_bytes"),
    UpstreamCheck(field="hardware.reserved_bytes_per_card", allowed="a budget holding one block",
                  condition=r"common_block_count\s*,\s*0|n_blocks\(\)\s*,\s*0|n_blocks\s*,\s*0"),
    UpstreamCheck(field="cache.kv_budget_bytes", allowed="a KV budget > 0", condition=r"cache_size_in_bytes(?:\(\))?\s*,\s*0\)"),
)
"""Every CHECK with the field it guards; each reader takes the first row that matches."""


def check_of_condition(condition: str, message: str = "") -> Optional[UpstreamCheck]:
    """The row of a compiled CHECK: the first whose ``condition`` matches its condition, else the first whose
    ``message_pattern`` matches glog's message; None when none does."""
    for row in UPSTREAM_CHECKS:
        if row.condition and re.search(row.condition, condition):
            return row
    for row in UPSTREAM_CHECKS:
        if row.message_pattern and re.search(row.message_pattern, message):
            return row
    return None


def check_of_message(message: str) -> Optional[UpstreamCheck]:
    """The row of a refusal in an engine log: the first whose ``message`` is in glog's message; None else."""
    for row in UPSTREAM_CHECKS:
        if row.message and row.message in message:
            return row
    return None
