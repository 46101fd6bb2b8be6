"""Broken implementations the explorer must catch, beside the shipped ones (``implementations/mutants``).

Selected with ``implementation._target_=testcases.explore.mutants.<Class>``. Each is the
reference with one rule changed, in a way no case of the default TC matrix can see.
"""

from __future__ import annotations

from dataclasses import replace

from implementations.reference import ReferenceImplementation, kv_bytes, layout, topology


class LinearHeadsNotReplicated(ReferenceImplementation):
    """Linear-attention state estimated with heads // tp local heads, not max(1, heads // tp): a model with
    fewer GDN key heads than attention TP ranks reserves no key channels (FEATURE 5; upstream replicates
    them). Every shipped hybrid has 16 key heads and 32 value heads, so at tp <= 8 no TC case sees it."""

    name = "explore_linear_heads_not_replicated"

    def linear_slot_bytes(self, model, cache, attn_tp_size):
        if model.linear_num_value_heads <= 0:  # as the reference: the one rule changed is the heads below
            return 0
        spec = kv_bytes.linear_spec(model, cache, attn_tp_size,
                                    speculative_tokens=self.speculative_state_tokens(model, cache))
        return replace(spec, n_local_k_heads=model.linear_num_key_heads // attn_tp_size,
                       n_local_v_heads=model.linear_num_value_heads // attn_tp_size).seq_bytes


class IdleRanksUnnoted(ReferenceImplementation):
    """The plan does not say which split ranks own no full-attention layer (fewer full layers than s)."""

    name = "explore_idle_ranks_unnoted"

    def plan(self, run):
        plan = super().plan(run)
        return replace(plan, notes=tuple(n for n in plan.notes if "own no full-attention layer" not in n))


class BlockCountAtLeastOne(ReferenceImplementation):
    """The block count never drops below one, so a budget that holds no block is accepted (FEATURE 6: error)."""

    name = "explore_block_count_at_least_one"

    def block_count(self, available_bytes, costs_per_block):
        return max(1, super().block_count(available_bytes, costs_per_block))


# ---- the last corners: bugs that only a dp layout, an unlike draft, a permuted placement or a card the
# draft fills show (the explorer must reach each at CI's budget)


class SplitCheckedAgainstWorld(ReferenceImplementation):
    """s checked against the world size, not the attention TP size (FEATURE 3): at dp 2 an s that divides the
    world but not TP passes the master's rule, so a later rule (host cache, cp, KV split) is named first. (Alone,
    such an s is refused later by the split groups, naming the same field.)"""

    name = "explore_split_checked_against_world"

    def validate(self, run):
        tp, s = self.attn_tp_size(run.parallel), run.layerwise.split_size
        if self.is_active(run.layerwise) and s <= run.parallel.world_size and run.parallel.world_size % s == 0 \
                and tp % s != 0 and tp > 1:
            run = replace(run, layerwise=replace(run.layerwise, split_size=tp))  # its TP rule passes; the rest run
        super().validate(run)


class IndexerRuleOnTargetOnly(ReferenceImplementation):
    """The int8 indexer cache refused only where the target carries an indexer, not the draft (FEATURE 3 applies
    it to both engines): an indexed draft beside an unindexed target gets through."""

    name = "explore_indexer_rule_on_target_only"

    def validate(self, run):
        if run.draft is not None and run.model.index_n_heads == 0:
            run = replace(run, draft=replace(run.draft, index_n_heads=0, index_head_dim=0))
        super().validate(run)


class GroupsSearchedInCardOrder(ReferenceImplementation):
    """The split-group search walks a TP group's members in card (matrix) order and reads its result as if they
    were in rank order (FEATURE 4 searches ranks): identical while cards rise with rank, wrong groups for a
    permuted placement."""

    name = "explore_groups_searched_in_card_order"

    def split_groups(self, run, placement=None):
        if placement is None:
            placement = self.place_ranks(run)
        s = run.layerwise.split_size if self.is_active(run.layerwise) else 1
        groups = []
        for tp_group in layout.tp_groups(run.parallel, self.attn_tp_size(run.parallel)):
            by_card = sorted(tp_group, key=lambda r: (placement[r], r))
            found = topology.form_split_groups(tuple(range(len(by_card))), s, [placement[r] for r in by_card],
                                               run.hardware.topology)
            ranks = sorted(tp_group)
            groups.extend(tuple(ranks[i] for i in group) for group in found)
        return tuple(groups)


class CardCheckWithoutDraft(ReferenceImplementation):
    """A card's HBM check counts the target's KV and the reserves but not the draft's KV (FEATURE 4: every rank's
    planned memory, target and draft)."""

    name = "explore_card_check_without_draft"

    def _rank_plans(self, *args, **kwargs):
        ranks = super()._rank_plans(*args, **kwargs)
        self._draft_bytes = {r.rank: r.draft_estimated_bytes for r in ranks}
        return ranks

    def check_cards(self, split_groups, placement, per_rank_bytes, run):
        draft = getattr(self, "_draft_bytes", {})
        super().check_cards(split_groups, placement, {r: b - draft.get(r, 0) for r, b in per_rank_bytes.items()}, run)
