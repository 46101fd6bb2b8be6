"""Broken implementations the explorer must catch, beside the shipped ones (``implementations/mutants``).

Selected with ``implementation._target_=testcases.explore.mutants.<Class>``. Each is the
reference with one rule changed, in a way no case of the default TC matrix can see.
"""

from __future__ import annotations

from dataclasses import replace

from implementations.reference import ReferenceImplementation, kv_bytes


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
