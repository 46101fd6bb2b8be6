"""Independent expected values for the TC suites, written from FEATURE.md (version 2).

This package is the tests' source of truth. It imports nothing from ``implementations/``
(not even a dtype table): it reads the harness's ``RunSpec`` by attribute only, the
topology fixtures and gflag spellings with its own small readers
(``harness/oracle/readers.py``), and follows upstream xLLM at 494f293b5
(``kv_cache_estimation.cpp``, ``kv_cache_shape.cpp``, ``kv_cache_utils.cpp``,
``speculative_engine.cpp``, ``layerwise_split_layout.h``) wherever FEATURE.md says the
rule is upstream's. It is kept deliberately plain (loops, one formula per function) so
a reviewer can check it against FEATURE.md line by line. All byte counts are per rank.

One module per FEATURE section, each the oracle of that section; every name is re-exported here
(``from harness import oracle; oracle.X``):
- ``inputs``: the oracle's constants and the inputs below, with their defaults (sections 2, 3, 5, 6);
- ``layers``: which layers are full attention, carry an indexer; a draft's layer count (section 4);
- ``slots``: bytes per slot, the linear state's slots and bytes (section 5);
- ``layout``: layer ownership, split groups, rank placement and links (section 4);
- ``capacity``: one engine's capacity (upstream ``KVCacheCapacity``), the target and draft engines
  of a run, block counts and bytes per rank (sections 5-6);
- ``report``: the report per rank, and placements the spec refuses outright (sections 4, 6);
- ``tensors``: the tensors a layer must expose (section 7);
- ``startup``: the startup rules (``Rejection``) and configs that cannot be planned (sections 3, 5-6);
- ``readers``: the oracle's own readers of outside formats (sections 2, 4).
- ``memo``: the answers about one configuration computed once while the checks ask again (``per_run``), and
  shared with the same configuration at another reserve per card (``with_reserved_bytes_per_card``).

Inputs newer than some RunSpecs are read with their documented defaults when absent:
``cache.max_seqs_per_batch`` (200), ``cache.max_linear_state_cache_slots`` (0),
``cache.enable_prefix_cache`` (True), ``cache.num_speculative_tokens`` (0),
``cache.indexer_cache_dtype`` (auto),
``cache.kv_budget_bytes`` (0: the hardware profile's budget), ``draft.body_tp1`` (False;
read from the run, ``run.draft_body_tp1``, or the draft model spec), model
``mamba_ssm_dtype`` (the model dtype) and ``num_nextn_predict_layers`` (0: every layer of a
draft spec), hardware ``quantized_kv_cache_dtypes`` and ``int8_indexer_cache`` (all
allowed on a ``cpu`` profile, none elsewhere).

Choices where FEATURE.md leaves one (say so if an implementation disagrees):
- KV heads per rank ``max(1, heads // attn_tp)``; GDN heads per rank ``heads // attn_tp``.
- Every full-attention layer of a model with ``index_n_heads > 0`` carries an indexer.
- Split groups on a non-flat topology: the partition of each TP group whose sorted
  vector of per-group worst links is lexicographically best (so the worst link first,
  then the next worst, ...); ties: the lexicographically smallest partition, which is
  upstream's consecutive grouping whenever that one is among the best. A rank's split
  rank is its index in its group, the group sorted by global rank.
- Peak, mean and savings are over the target's KV per rank (the draft's KV is reported
  separately); mean is the floor of the average.
"""

from __future__ import annotations

from harness.oracle.capacity import (
    Capacity,
    estimate_capacity,
    expected_block_counts,
    expected_capacities,
    expected_capacity,
    expected_draft_bytes_per_block,
    expected_draft_capacity,
    expected_draft_cost_per_block,
    expected_draft_rank_bytes,
    expected_rank_bytes,
    speculative_block_count,
    split_block_count,
)
from harness.oracle.inputs import (
    DTYPE_BYTES,
    FULL_TYPES,
    GROUP_RULES,
    LINEAR_STATE_FULL_KV_MEMORY_RATIO,
    OWNER_RULES,
    PADDING_LINEAR_STATE_SLOTS,
    QUANTIZED_KV_DTYPES,
    QWEN3_5_TARGET_MODEL_TYPES,
    SCALE_BYTES,
    SPEC_GROUP_RULE,
    SPEC_OWNER_RULE,
    SPLIT_MODEL_TYPES,
    TORCH_DTYPE_NAMES,
    UPSTREAM_GROUP_RULE,
    UPSTREAM_OWNER_RULE,
    UPSTREAM_SPLIT_MODEL_TYPES,
    attention_tp,
    attn_tp_size,
    draft_body_tp1,
    dtype_bytes,
    enable_prefix_cache,
    hardware_int8_indexer_cache,
    hardware_quantized_kv_dtypes,
    indexer_cache_dtype,
    max_linear_state_cache_slots,
    max_seqs_per_batch,
    num_speculative_tokens,
    run_budget_bytes,
    split_size,
    torch_dtype_name,
    upstream_split_size,
)
from harness.oracle.layers import (
    draft_num_layers,
    expected_full_layers,
    expected_indexer,
    expected_linear_layers,
    has_linear_attention_layers,
    is_full_attention_layer,
)
from harness.oracle.layout import (
    best_partition,
    expected_owned_full_layers,
    expected_owner,
    expected_rank_coordinates,
    expected_rank_location,
    expected_rank_locations,
    expected_rank_owned_layers,
    expected_rank_rows,
    expected_ranks_per_card,
    expected_split_group_tuples,
    expected_split_groups,
    expected_split_groups_consecutive,
    expected_split_position,
    expected_upstream_owner,
    expected_upstream_worker_split_rank,
    global_rank,
    link_score,
    oracle_topology,
    owner_of_layers,
    rank_link,
)
from harness.oracle.memo import with_reserved_bytes_per_card
from harness.oracle.readers import (
    TOPOLOGY_DIR,
    expected_split_active,
    load_topology,
    parse_layerwise_gflags,
    parse_parallel_config_json,
)
from harness.oracle.report import (
    GAIN_UNDEFINED_NOTE,
    PLAN_FIELDS,
    RAISES_PEAK_NOTE,
    Report,
    expected_capacity_gain,
    expected_card_bytes,
    expected_notes,
    expected_plan_fields,
    expected_ranks_over_uniform_peak,
    expected_report,
    expected_split_raises_peak,
    spec_refuses_cards,
)
from harness.oracle.slots import (
    expected_block_cost_bytes,
    expected_full_bytes_per_block,
    expected_layer_bytes_per_block,
    expected_linear_state_bytes,
    expected_linear_state_bytes_per_slot,
    expected_linear_state_slots,
    expected_num_speculative_tokens,
    expected_scratch_bytes_per_block,
    full_layer_slot_bytes,
    index_slot_bytes,
    kv_dtype_bytes,
    kv_quantized,
    kv_slot_bytes,
    linear_conv_state_len,
    linear_local_heads,
    linear_state_slot_cap,
    linear_state_slots,
    n_local_kv_heads,
    scale_slot_bytes,
    ssm_dtype,
)
from harness.oracle.startup import (
    BUDGET_FIELDS,
    Rejection,
    expected_estimation_rejection,
    expected_rejection,
    expected_upstream_rejection,
    expected_upstream_worker_stop,
)
from harness.oracle.tensors import (
    TensorSpec,
    expected_allocation_departure_bytes,
    expected_draft_layer_tensors,
    expected_full_layer_tensors,
    expected_layer_tensors,
    expected_linear_allocated_bytes,
    expected_linear_layer_tensors,
    expected_scratch_tensors,
    full_layer_tensor_specs,
    linear_layer_tensor_specs,
)

__all__ = [
    "BUDGET_FIELDS",
    "Capacity",
    "DTYPE_BYTES",
    "FULL_TYPES",
    "GAIN_UNDEFINED_NOTE",
    "GROUP_RULES",
    "LINEAR_STATE_FULL_KV_MEMORY_RATIO",
    "OWNER_RULES",
    "PADDING_LINEAR_STATE_SLOTS",
    "QUANTIZED_KV_DTYPES",
    "QWEN3_5_TARGET_MODEL_TYPES",
    "PLAN_FIELDS",
    "RAISES_PEAK_NOTE",
    "Rejection",
    "Report",
    "SCALE_BYTES",
    "SPEC_GROUP_RULE",
    "SPEC_OWNER_RULE",
    "SPLIT_MODEL_TYPES",
    "TOPOLOGY_DIR",
    "TORCH_DTYPE_NAMES",
    "TensorSpec",
    "UPSTREAM_GROUP_RULE",
    "UPSTREAM_OWNER_RULE",
    "UPSTREAM_SPLIT_MODEL_TYPES",
    "attention_tp",
    "attn_tp_size",
    "best_partition",
    "draft_body_tp1",
    "draft_num_layers",
    "dtype_bytes",
    "enable_prefix_cache",
    "estimate_capacity",
    "expected_block_cost_bytes",
    "expected_block_counts",
    "expected_capacities",
    "expected_capacity",
    "expected_capacity_gain",
    "expected_card_bytes",
    "expected_draft_bytes_per_block",
    "expected_draft_capacity",
    "expected_draft_cost_per_block",
    "expected_allocation_departure_bytes",
    "expected_draft_layer_tensors",
    "expected_draft_rank_bytes",
    "expected_estimation_rejection",
    "expected_full_bytes_per_block",
    "expected_full_layer_tensors",
    "expected_full_layers",
    "expected_indexer",
    "expected_layer_bytes_per_block",
    "expected_layer_tensors",
    "expected_linear_allocated_bytes",
    "expected_linear_layer_tensors",
    "expected_linear_layers",
    "expected_linear_state_bytes",
    "expected_linear_state_bytes_per_slot",
    "expected_linear_state_slots",
    "expected_notes",
    "expected_plan_fields",
    "expected_num_speculative_tokens",
    "expected_owned_full_layers",
    "expected_owner",
    "expected_rank_bytes",
    "expected_rank_coordinates",
    "expected_rank_location",
    "expected_rank_locations",
    "expected_ranks_per_card",
    "expected_rank_owned_layers",
    "expected_rank_rows",
    "expected_ranks_over_uniform_peak",
    "expected_rejection",
    "expected_report",
    "expected_scratch_bytes_per_block",
    "expected_scratch_tensors",
    "expected_split_active",
    "expected_split_group_tuples",
    "expected_split_groups",
    "expected_split_groups_consecutive",
    "expected_split_position",
    "expected_split_raises_peak",
    "expected_upstream_owner",
    "expected_upstream_rejection",
    "expected_upstream_worker_stop",
    "expected_upstream_worker_split_rank",
    "full_layer_slot_bytes",
    "full_layer_tensor_specs",
    "hardware_int8_indexer_cache",
    "hardware_quantized_kv_dtypes",
    "has_linear_attention_layers",
    "index_slot_bytes",
    "indexer_cache_dtype",
    "is_full_attention_layer",
    "kv_dtype_bytes",
    "kv_quantized",
    "kv_slot_bytes",
    "linear_conv_state_len",
    "linear_layer_tensor_specs",
    "linear_local_heads",
    "linear_state_slot_cap",
    "linear_state_slots",
    "global_rank",
    "link_score",
    "load_topology",
    "max_linear_state_cache_slots",
    "max_seqs_per_batch",
    "n_local_kv_heads",
    "num_speculative_tokens",
    "oracle_topology",
    "owner_of_layers",
    "parse_layerwise_gflags",
    "parse_parallel_config_json",
    "rank_link",
    "run_budget_bytes",
    "scale_slot_bytes",
    "spec_refuses_cards",
    "speculative_block_count",
    "split_block_count",
    "split_size",
    "ssm_dtype",
    "torch_dtype_name",
    "upstream_split_size",
    "with_reserved_bytes_per_card",
]
