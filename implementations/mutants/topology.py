"""Topology mutants: split groups and card checks (FEATURE section 4, ILU mapping)."""

from __future__ import annotations

from implementations.mutants.base import Mutant
from implementations.reference import layout


class StridedGroups(Mutant):
    """Split groups are strided (ranks r, r + tp/s, ...) instead of consecutive runs of s, ignoring the topology (FEATURE 4, get_layerwise_split_group)."""

    name = "mutant_strided_groups"
    component = "topology"
    expected_catchers = ("TC-03",)

    def split_groups(self, run, placement=None):
        s = run.layerwise.split_size if self.is_active(run.layerwise) else 1
        tp = self.attn_tp_size(run.parallel)
        n_groups = tp // s
        return tuple(
            tuple(tp_group[i::n_groups])
            for tp_group in layout.tp_groups(run.parallel, tp)
            for i in range(n_groups)
        )


class CardCheckSkipped(Mutant):
    """Cards are not checked: a card over its HBM (or holding two ranks of a split group) is accepted (FEATURE 4, card refusal)."""

    name = "mutant_card_check_skipped"
    component = "topology"
    expected_catchers = ("TC-03",)

    def check_cards(self, split_groups, placement, per_rank_bytes, run):
        return None
