"""Where each mutant is caught first: per mutant and predicted TC, the case that catches it.

For every TC a mutant's ``expected_catchers`` names, the ``killmatrix.case_key`` of the first
case, in the TC's case order on ``conf/matrix/ci.yaml``, that catches the mutant.
``testcases/meta/test_mutation.py`` tries that case first and stops when it catches, so a
predicted TC costs one case instead of every passing case before it; the catch it shows is the
one the ordered scan finds (the same case, the same check). A case that no longer catches (a
changed suite or mutant) costs time, not a verdict: the TC's other cases then run in order.
``from_rows`` rebuilds the table from a kill matrix (``python -m harness.mutation --first``).
"""

from __future__ import annotations

from typing import Iterable

from harness.mutation.killmatrix import key_of

FIRST_CATCH: dict[str, dict[str, str]] = {
    "owner_off_by_one": {"TC-01": "deepseek_v32-s2-w4"},
    "linear_split": {"TC-01": "qwen3_5_moe-s2-w4", "TC-02": "qwen3_5_moe-s2-w4", "TC-05": "qwen3_5_moe-s2-w4"},
    "no_scratch_in_estimate": {"TC-02": "deepseek_v32-s2-w4", "TC-07": "deepseek_v32-s2-w4-deepseek_v32_mtp"},
    "max_block_count": {"TC-01": "deepseek_v32-s2-w4", "TC-02": "deepseek_v32-s2-w4", "TC-07": "deepseek_v32-s2-w4-deepseek_v32_mtp"},
    "draft_keeps_split": {"TC-07": "deepseek_v32-s2-w4-deepseek_v32_mtp"},
    "strided_groups": {"TC-03": "deepseek_v32-s2-w4-bi_v100"},
    "nonowner_real_storage": {"TC-01": "deepseek_v32-s2-w4", "TC-02": "deepseek_v32-s2-w4", "TC-07": "deepseek_v32-s2-w4-deepseek_v32_mtp"},
    "wrong_layout_axes": {"TC-05": "deepseek_v32-s2-w4", "TC-06": "deepseek_v32-off-w4"},
    "digest_unchecked": {"TC-04": "deepseek_v32-off-w4"},
    "disabled_still_splits": {"TC-06": "deepseek_v32-off-w4-off-s2"},
    "index_slot_dropped": {"TC-02": "deepseek_v32-off-w4", "TC-06": "deepseek_v32-off-w4"},
    "no_validation_unsupported": {"TC-01": "llama3_8b-s2-w4", "TC-02": "llama3_8b-s2-w4"},
    "draft_additional_ignored": {"TC-07": "deepseek_v32-s2-w4-deepseek_v32_mtp"},
    "linear_slots_unpadded": {"TC-02": "qwen3_5_moe-off-w4", "TC-06": "qwen3_5_moe-off-w4", "TC-07": "qwen3_5_moe-off-w4-qwen3_5_mtp"},
    "scale_bytes_missing": {"TC-02": "deepseek_v32-s2-w4-int8"},
    "card_check_skipped": {"TC-03": "deepseek_v32-s2-w4-oversubscribed"},
    "cp_split_accepted": {"TC-01": "deepseek_v32-s2-w4-cp2"},
    "kv_split_accepted": {"TC-01": "deepseek_v32-s2-w4-kv-split"},
    "host_cache_wrong_field": {"TC-01": "deepseek_v32-s2-w4-hostcache"},
    "split_rank_mod_s": {"TC-01": "qwen3_5_moe-s2-w4-pcie_2switch_8_interleaved", "TC-04": "deepseek_v32-s2-w4-pcie_2switch_8_interleaved", "TC-05": "deepseek_v3-s2-w4-pcie_2switch_8_interleaved", "TC-07": "deepseek_v3-s2-w4-pcie_2switch_8_interleaved"},
    "peak_scratch_omitted": {"TC-02": "deepseek_v32-s2-w4"},
    "scale_missing_in_estimate": {"TC-02": "deepseek_v32-s2-w4-int8"},
    "savings_at_uniform_blocks": {"TC-02": "deepseek_v32-s2-w4"},
    "quantized_view_reshaped": {"TC-01": "deepseek_v32-s2-w4-int8", "TC-05": "deepseek_v32-s2-w4-int8"},
    "draft_leaks_storage": {"TC-04": "deepseek_v32-s2-w4-spec_w8", "TC-07": "deepseek_v32-off-w4-deepseek_v32_mtp"},
    "conv_state_transposed": {"TC-01": "qwen3_5_moe-s2-w4"},
    "tie_groups_reshuffled": {"TC-03": "deepseek_v32-s2-w8-pcie_2switch_8_interleaved"},
    "cross_node_links_from_card_matrix": {"TC-03": "deepseek_v32-s2-w8-pcie_2switch_4"},
    "first_replica_grouping_reused": {"TC-03": "deepseek_v32-s2-w8dp2-pcie_4switch_8_mixed"},
    "reserve_once_per_card": {"TC-03": "deepseek_v32-s2-w4-oversubscribed"},
    "mean_rounded": {"TC-02": "deepseek_v32-s3-w3-uneven-mean"},
    "conv_value_channels_value_dim": {"TC-01": "qwen3_next-s2-w4-value-dim", "TC-02": "qwen3_next-s2-w4-value-dim"},
    "draft_message_split_fields": {"TC-04": "deepseek_v3-s2-w4-spec_w8", "TC-07": "deepseek_v3-s2-w4-deepseek_mtp"},
    "split_size_below_one_accepted": {"TC-01": "deepseek_v32-s0-w4-s0"},
    "world_remainder_dropped": {"TC-01": "deepseek_v32-s2-w4dp3-world-not-dp-cp"},
    "tp_mod_s_before_model_type": {"TC-01": "llama3_8b-s3-w4-model-before-tp-mod-s"},
    "sleep_mode_accepted": {"TC-01": "deepseek_v32-s2-w4-sleep-mode"},
    "xtensor_accepted": {"TC-01": "qwen3_5_moe-s2-w4-xtensor"},
    "quantized_cache_accepted": {"TC-01": "deepseek_v32-s2-w4-bi_v100-quantized-unsupported"},
    "linear_with_indexer_accepted": {"TC-01": "qwen3_5_moe-s2-w4-linear-and-indexer"},
    "interval_off_by_one": {"TC-01": "qwen3_next-off-w4", "TC-02": "qwen3_next-off-w4"},
    "gqa_heads_not_divided": {"TC-02": "qwen3_5_moe-off-w4"},
    "mla_rope_dropped": {"TC-02": "deepseek_v3-off-w4"},
    "speculative_state_ignored": {"TC-01": "qwen3_5_moe-s2-w4-nspec", "TC-02": "qwen3_5_moe-s2-w4-nspec"},
    "ssm_dtype_ignored": {"TC-01": "qwen3_5_moe-s2-w4-nspec", "TC-02": "qwen3_5_moe-s2-w4-nspec"},
    "fixed_slots_unpadded": {"TC-01": "qwen3_5_moe-s4-w4-slots8", "TC-02": "qwen3_5_moe-s4-w4-slots8"},
    "prefix_cache_ignored": {"TC-01": "qwen3_5_moe-off-w4", "TC-02": "qwen3_5_moe-off-w4"},
    "capacity_gain_inverted": {"TC-02": "deepseek_v3-s2-w4"},
    "draft_body_tp1_ignored": {"TC-07": "qwen3_5_moe-s2-w4-body_tp1"},
    "uniform_ignores_draft": {"TC-02": "qwen3_5_moe-s2-w4-qwen3_5_mtp"},
    "attention_spelling_linear": {"TC-01": "qwen3_5_moe-s2-w4-attention-spelling", "TC-02": "qwen3_5_moe-s2-w4-attention-spelling"},
    "int8_index_scale_missing": {"TC-02": "deepseek_v32-s2-w4-int8"},
    "slot_cap_unchecked": {"TC-01": "qwen3_5_moe-s2-w4-slots-over-cap"},
    "draft_own_shape": {"TC-01": "qwen3_5_moe-s2-w4-draft-slot-larger", "TC-07": "deepseek_v32-s2-w4-small_slot"},
    "tie_keeps_consecutive": {"TC-03": "deepseek_v32-s2-w8-pcie_uneven_switches_8"},
    "capacity_gain_infinite": {"TC-02": "deepseek_v32-s4-w4-no-uniform-block"},
    "raises_peak_unnoted": {"TC-02": "deepseek_v3-s2-w4-one-full-layer"},
    "quantized_refused_by_worker": {"TC-01": "deepseek_v32-s2-w4-int8", "TC-02": "deepseek_v32-s2-w4-int8", "TC-05": "deepseek_v32-s2-w4-int8"},
    "split_size_against_world": {"TC-01": "deepseek_v32-s8-w8dp2-s-world-not-tp-hostcache"},
    "int8_indexer_target_only": {"TC-01": "deepseek_v3-s2-w4-draft-only-indexed-int8"},
    "group_search_in_card_order": {"TC-03": "deepseek_v32-s2-w8-pcie_2switch_8_interleaved-permuted"},
    "card_check_without_draft": {"TC-03": "deepseek_v32-s2-w4-draft-card-over"},
    "draft_index_from_target": {"TC-07": "deepseek_v3-s2-w4-indexed_draft"},
}
"""Mutant short name -> {TC: case key}."""


def from_rows(rows: Iterable) -> dict[str, dict[str, str]]:
    """The table of ``killmatrix.Row``s: each mutant's first catching case in each predicted TC that catches it."""
    table: dict[str, dict[str, str]] = {}
    for r in rows:
        for tc in r.expected_catchers:
            o = r.cells[tc].first_catch if tc in r.cells else None
            if o is not None:
                name = r.implementation.removeprefix("mutant_")
                table.setdefault(name, {})[tc] = key_of(o.case_id, r.implementation)
    return table
