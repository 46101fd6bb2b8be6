"""The rules of FEATURE sections 2-8, one bullet or formula term each, and the mutants that break them.

Each rule has an id (``F5.gqa-slot``: section, short name). ``MUTANTS`` maps it to the shipped mutants
(``implementations.mutants``) that break exactly that rule; ``testcases/meta/test_mutation.py`` shows
each is caught by the TCs its ``expected_catchers`` names, and ``harness.mutation.first_catch`` records
the default-matrix case that catches it first (the case where the rule changes a checked fact).
``GAPS`` names the rules with no mutant yet, with what is missing; ``HARNESS`` the rules the harness
itself carries out (reading flags and configs), which its unit tests cover, so no implementation can
break them. ``testcases/meta/test_coverage.py`` fails on a rule in none of the three, on a mutant in no
rule, and on a gap that gained a mutant without leaving ``GAPS``.
"""

from __future__ import annotations

from typing import Optional

from harness.mutation.first_catch import FIRST_CATCH

RULES: dict[str, str] = {
    # 2. flags
    "F2.active-iff": "active iff enable_layerwise_split and s > 1; disabled is the uniform allocation",
    "F2.gflag-spellings": "gflag spellings (t/f/y/n/yes/no) and ParallelConfig JSON layerwise_split_size",
    "F2.semantics": "adaptation vs upstream semantics: upstream activates on s > 1 alone",
    # 3. startup validation
    "F3.s-positive": "s >= 1, even when disabled",
    "F3.world-divides": "world_size % (dp * cp) == 0",
    "F3.tp-divides-s": "attention tp % s == 0 (and s <= attention tp), attention tp = world / (dp * cp), not the world",
    "F3.supported-model": "active: model_type one the feature supports",
    "F3.no-host-cache": "active: no host cache (host_blocks_factor > 1), refused naming its field",
    "F3.no-cp": "active: no context parallel",
    "F3.no-kv-split": "active: no KV split (effective kv_split_size > 1; 0 follows cp)",
    "F3.no-sleep-mode": "active: no sleep mode",
    "F3.no-xtensor": "active: no xtensor",
    "F3.linear-indexer": "always: no model with both linear-attention layers and a DSA indexer",
    "F3.quantized-support": "always: quantized KV / int8 indexer only where the hardware profile supports them",
    "F3.draft-indexer": "the int8 indexer refusal holds wherever an indexed cache is allocated: the draft's as well as "
                        "the target's",
    "F3.order": "a config breaking several rules is refused for the first in upstream's order",
    # 4. split groups and ownership
    "F4.consecutive-groups": "split groups are consecutive runs of s inside each attention TP group",
    "F4.split-rank-position": "a worker's split rank is its position in its own split group",
    "F4.only-full-split": "only full-attention layers are split; linear layers on every rank",
    "F4.layer-types": "layer_types full_attention / attention is full, every other value linear",
    "F4.interval": "without layer_types: full iff interval <= 1 or (l + 1) % interval == 0",
    "F4.round-robin": "the k-th full layer is owned by split rank k % s",
    "F4.topology-groups": "groups maximise the worst link (key 1); equal groupings keep upstream's consecutive "
                          "order if among the best, else the lexicographically first (key 3)",
    "F4.rank-order-ties": "among equal groupings the first by ranks (each group sorted, listed by its smallest "
                          "rank), whatever order the ranks' cards take",
    "F4.group-links": "groupings tied on the worst link compare every group's worst link, worst to best (key 2)",
    "F4.cards": "no card holds two ranks of a split group, and no card exceeds its HBM",
    "F4.node-links": "ranks on different nodes are joined by the network, never by a cell of the card matrix",
    "F4.replica-groups": "each attention TP group (dp replica) is cut on its own cards' links",
    "F4.card-reserve": "every rank on a card keeps its own reserve: ranks x (KV + reserved) within the HBM",
    "F4.card-draft": "a card's planned memory counts each rank's draft KV as well as its target KV",
    # 5. bytes per layer
    "F5.mla-slot": "MLA slot = d_kv * (kv_lora_rank + qk_rope_head_dim)",
    "F5.gqa-slot": "GQA slot = 2 * d_kv * head_dim * max(1, kv heads / attn_tp)",
    "F5.scale-slot": "quantized KV adds float32 scales (MLA 4 B, GQA 2 * 4 * local heads)",
    "F5.index-slot": "DSA indexer slot d * index_head_dim on indexer layers",
    "F5.int8-index": "int8 indexer slot = index_head_dim + 4",
    "F5.draft-index": "a draft's index slot follows the draft's own indexer, not the target's",
    "F5.n-spec": "a Qwen3.5 target's conv and recurrent state grow with num_speculative_tokens",
    "F5.ssm-dtype": "recurrent state in mamba_ssm_dtype (default the model dtype)",
    "F5.slots-padding": "linear-state slots without prefix cache: max_seqs_per_batch + 2 (0 is valid)",
    "F5.slots-fixed": "max_linear_state_cache_slots > 0: that + 2 slots",
    "F5.slots-prefix": "prefix cache on: slots from 0.9 / 1.9 of the budget, capped",
    "F5.slots-cap": "cap = max(2, min((C - 1) // (L * ls), (C + 2F) // (L * ls + F))); fixed slots above it refused",
    # 6. block count and report
    "F6.scratch-cost": "split cost per rank = owned + scratch + additional",
    "F6.min-blocks": "n_blocks = min over split ranks of available // cost",
    "F6.draft-additional": "the draft's D is the additional cost sharing the budget",
    "F6.draft-target-shape": "the draft's KV takes the target's cache shape; a larger draft slot is refused",
    "F6.draft-body-tp1": "a draft body at TP 1 costs its own shape",
    "F6.uniform-with-draft": "uniform n_blocks = (C - linear) // (F + D)",
    "F6.report-peak": "reported per-rank estimates and peak include the scratch",
    "F6.report-savings": "savings = uniform peak at the same n_blocks - peak",
    "F6.report-gain": "capacity gain = split n_blocks / uniform n_blocks",
    "F6.gain-undefined": "no uniform block fits: the capacity gain is null (never infinity or 0), with a note",
    "F6.raises-peak": "where the split cannot lower the peak, the plan says \"the split raises the peak\"",
    "F6.report-mean": "the mean across ranks is rounded down, never to the nearest byte",
    "F6.report-scale": "per-rank estimates include the quantized scales",
    # 7. allocation
    "F7.layout-axes": "the hardware profile's layout: heads-major or tokens-major",
    "F7.nonowner-view": "a non-owned full layer is a view of the scratch, with no bytes of its own",
    "F7.quantized-tensors": "scale tensors in upstream's shapes and dtype, views included",
    "F7.linear-tensors": "conv state [slots, conv_state_len, channels] on every backend but MUSA",
    "F7.conv-value-channels": "the conv state counts its value channels with linear_key_head_dim (upstream)",
    # 8. engines and workers
    "F8.digest": "every worker holds the master's layout (same digest)",
    "F8.draft-reset": "a draft engine's workers reset the split to 1 / rank 0",
    "F8.draft-message": "a draft engine's message never splits: split size 1, one group per rank, split rank 0",
    "F8.no-leak": "no engine, target or draft, leaves storage alive after teardown",
}

MUTANTS: dict[str, tuple[str, ...]] = {
    "F2.active-iff": ("disabled_still_splits",),
    "F3.s-positive": ("split_size_below_one_accepted",),
    "F3.world-divides": ("world_remainder_dropped",),
    "F3.tp-divides-s": ("split_size_against_world",),
    "F3.order": ("tp_mod_s_before_model_type",),
    "F3.supported-model": ("no_validation_unsupported",),
    "F3.no-host-cache": ("host_cache_wrong_field",),
    "F3.no-cp": ("cp_split_accepted",),
    "F3.no-kv-split": ("kv_split_accepted",),
    "F3.no-sleep-mode": ("sleep_mode_accepted",),
    "F3.no-xtensor": ("xtensor_accepted",),
    "F3.linear-indexer": ("linear_with_indexer_accepted",),
    "F3.quantized-support": ("quantized_cache_accepted", "quantized_refused_by_worker"),
    "F3.draft-indexer": ("int8_indexer_target_only",),
    "F4.consecutive-groups": ("strided_groups",),
    "F4.split-rank-position": ("split_rank_mod_s",),
    "F4.only-full-split": ("linear_split",),
    "F4.interval": ("interval_off_by_one",),
    "F4.layer-types": ("attention_spelling_linear",),
    "F4.round-robin": ("owner_off_by_one",),
    "F4.topology-groups": ("tie_groups_reshuffled",),
    "F4.rank-order-ties": ("group_search_in_card_order",),
    "F4.group-links": ("tie_keeps_consecutive",),
    "F4.cards": ("card_check_skipped",),
    "F4.node-links": ("cross_node_links_from_card_matrix",),
    "F4.replica-groups": ("first_replica_grouping_reused",),
    "F4.card-reserve": ("reserve_once_per_card",),
    "F4.card-draft": ("card_check_without_draft",),
    "F5.mla-slot": ("mla_rope_dropped",),
    "F5.gqa-slot": ("gqa_heads_not_divided",),
    "F5.scale-slot": ("scale_bytes_missing",),
    "F5.index-slot": ("index_slot_dropped",),
    "F5.n-spec": ("speculative_state_ignored",),
    "F5.ssm-dtype": ("ssm_dtype_ignored",),
    "F5.slots-padding": ("linear_slots_unpadded",),
    "F5.slots-fixed": ("fixed_slots_unpadded",),
    "F5.slots-prefix": ("prefix_cache_ignored",),
    "F5.int8-index": ("int8_index_scale_missing",),
    "F5.draft-index": ("draft_index_from_target",),
    "F5.slots-cap": ("slot_cap_unchecked",),
    "F6.scratch-cost": ("no_scratch_in_estimate",),
    "F6.min-blocks": ("max_block_count",),
    "F6.draft-additional": ("draft_additional_ignored",),
    "F6.draft-body-tp1": ("draft_body_tp1_ignored",),
    "F6.uniform-with-draft": ("uniform_ignores_draft",),
    "F6.draft-target-shape": ("draft_own_shape",),
    "F6.report-peak": ("peak_scratch_omitted",),
    "F6.report-savings": ("savings_at_uniform_blocks",),
    "F6.report-gain": ("capacity_gain_inverted",),
    "F6.gain-undefined": ("capacity_gain_infinite",),
    "F6.raises-peak": ("raises_peak_unnoted",),
    "F6.report-mean": ("mean_rounded",),
    "F6.report-scale": ("scale_missing_in_estimate",),
    "F7.layout-axes": ("wrong_layout_axes",),
    "F7.nonowner-view": ("nonowner_real_storage",),
    "F7.quantized-tensors": ("quantized_view_reshaped",),
    "F7.linear-tensors": ("conv_state_transposed",),
    "F7.conv-value-channels": ("conv_value_channels_value_dim",),
    "F8.digest": ("digest_unchecked",),
    "F8.draft-reset": ("draft_keeps_split",),
    "F8.draft-message": ("draft_message_split_fields",),
    "F8.no-leak": ("draft_leaks_storage",),
}

HARNESS: dict[str, str] = {
    "F2.gflag-spellings": "the harness reads the flags (harness.config.build; testcases/unit/test_flags.py)",
    "F2.semantics": "the harness applies the semantics it names (harness.conformance; testcases/unit/test_conformance.py)",
}

GAPS: dict[str, str] = {}


def rule_of(mutant: str) -> Optional[str]:
    return next((rule for rule, names in MUTANTS.items() if mutant in names), None)


def table() -> str:
    """The rule table: each rule, its mutants and the cases that catch them first (recorded)."""
    lines = ["| rule | what | mutant | first catching case per TC |", "|---|---|---|---|"]
    for rule, text in RULES.items():
        names = MUTANTS.get(rule, ())
        if names:
            where = "; ".join(f"{tc} [{case}]" for n in names for tc, case in sorted(FIRST_CATCH.get(n, {}).items()))
            lines.append(f"| `{rule}` | {text} | {', '.join(f'`{n}`' for n in names)} | {where or 'not recorded'} |")
        else:
            why = HARNESS.get(rule) or GAPS.get(rule, "")
            lines.append(f"| `{rule}` | {text} | {'harness' if rule in HARNESS else '**gap**'} | {why} |")
    return "\n".join(lines) + "\n"
