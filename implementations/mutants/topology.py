"""Topology mutants: split groups and card checks (FEATURE section 4, ILU mapping)."""

from __future__ import annotations

import itertools

from implementations.mutants.base import Mutant
from implementations.reference import layout
from implementations.reference import topology as topology_rules


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


class TieGroupsReshuffled(Mutant):
    """Among equally good regroupings, a different one than the spec's: last members swapped between two groups of a TP group (FEATURE 4, ties keep upstream's order)."""

    name = "mutant_tie_groups_reshuffled"
    component = "topology"
    expected_catchers = ("TC-03",)

    def split_groups(self, run, placement=None):
        if placement is None:
            placement = self.place_ranks(run)
        groups = [tuple(g) for g in super().split_groups(run, placement)]
        topo = run.hardware.topology
        worst = lambda g: topology_rules.link_score(topology_rules.worst_link(g, placement, topo))
        on_distinct_cards = lambda g: len({placement[r] for r in g}) == len(g)
        for tp_group in layout.tp_groups(run.parallel, self.attn_tp_size(run.parallel)):
            inside = [i for i, g in enumerate(groups) if set(g) <= set(tp_group)]
            consecutive = [tuple(tp_group[k:k + len(groups[inside[0]])]) for k in range(0, len(tp_group), len(groups[inside[0]]))]
            if len(groups[inside[0]]) < 2 or [groups[i] for i in inside] == consecutive:
                continue  # one-rank or consecutive groups: left as the reference made them
            for i, j in itertools.combinations(inside, 2):
                a, b = groups[i], groups[j]
                swapped_a, swapped_b = tuple(sorted(a[:-1] + b[-1:])), tuple(sorted(b[:-1] + a[-1:]))
                if (on_distinct_cards(swapped_a) and on_distinct_cards(swapped_b)
                        and min(worst(swapped_a), worst(swapped_b)) >= min(worst(a), worst(b))):
                    groups[i], groups[j] = swapped_a, swapped_b
                    break
        return tuple(groups)


class TieKeepsConsecutive(Mutant):
    """Consecutive groups are kept whenever their worst link ties the best grouping's, although another grouping gives the groups better links of their own (FEATURE 4, key 2)."""

    name = "mutant_tie_keeps_consecutive"
    component = "topology"
    expected_catchers = ("TC-03",)

    def split_groups(self, run, placement=None):
        if placement is None:
            placement = self.place_ranks(run)
        groups = super().split_groups(run, placement)
        topo = run.hardware.topology
        worst = lambda g: topology_rules.link_score(topology_rules.worst_link(g, placement, topo))
        out = []
        for tp_group in layout.tp_groups(run.parallel, self.attn_tp_size(run.parallel)):
            inside = [g for g in groups if set(g) <= set(tp_group)]
            s = len(inside[0])
            consecutive = [tuple(tp_group[k:k + s]) for k in range(0, len(tp_group), s)]
            on_distinct_cards = all(len({placement[r] for r in g}) == len(g) for g in consecutive)
            if s > 1 and on_distinct_cards and min(map(worst, consecutive)) == min(map(worst, inside)):
                inside = consecutive
            out.extend(inside)
        return tuple(out)
