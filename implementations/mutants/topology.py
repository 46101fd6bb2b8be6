"""Topology mutants: split groups and card checks (FEATURE section 4, ILU mapping)."""

from __future__ import annotations

import itertools
from dataclasses import replace

from contract.errors import PlanError
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


class CrossNodeLinksFromCardMatrix(Mutant):
    """Links between ranks on different nodes are read from the card matrix as if one box (rank 4 on node 1 card 0 and rank 0 on node 0 card 0 read the diagonal), so a TP group spanning nodes is regrouped across them (FEATURE 4: another node is joined by the network, never by a cell of the card matrix)."""

    name = "mutant_cross_node_links_from_card_matrix"
    component = "topology"
    expected_catchers = ("TC-03",)

    def split_groups(self, run, placement=None):
        if placement is None:
            placement = self.place_ranks(run)
        topo = run.hardware.topology
        slots = sorted(set(placement))  # every (node, card) becomes a card of one box
        box = replace(topo, cards=tuple(f"GPU{i}" for i in range(len(slots))),
                      links=tuple(tuple(topo.links[a[1]][b[1]] for b in slots) for a in slots))
        flat = tuple((0, slots.index(where)) for where in placement)
        s = run.layerwise.split_size if self.is_active(run.layerwise) else 1
        return tuple(group for tp_group in layout.tp_groups(run.parallel, self.attn_tp_size(run.parallel))
                     for group in topology_rules.form_split_groups(tp_group, s, flat, box))


class FirstReplicaGroupingReused(Mutant):
    """The first TP group's grouping (positions inside it) is reused for every dp replica, although another replica's cards are wired differently (FEATURE 4: each TP group is cut on its own links)."""

    name = "mutant_first_replica_grouping_reused"
    component = "topology"
    expected_catchers = ("TC-03",)

    def split_groups(self, run, placement=None):
        groups = super().split_groups(run, placement)
        tp_groups = layout.tp_groups(run.parallel, self.attn_tp_size(run.parallel))
        first = tp_groups[0]
        pattern = [tuple(first.index(r) for r in g) for g in groups if set(g) <= set(first)]
        return tuple(tuple(tp_group[i] for i in p) for tp_group in tp_groups for p in pattern)


class ReserveOncePerCard(Mutant):
    """A card holding several ranks counts the reserve once, not once per rank, so two ranks that each need their reserve are accepted on one card (FEATURE 4: no card's planned memory may exceed its HBM; every rank on it keeps its own reserve)."""

    name = "mutant_reserve_once_per_card"
    component = "topology"
    expected_catchers = ("TC-03",)

    def check_cards(self, split_groups, placement, per_rank_bytes, run):
        hw = run.hardware
        topology_rules.check_cards(split_groups, placement, {}, hw.hbm_bytes_per_card, hw.reserved_bytes_per_card)
        on_card: dict = {}
        for rank, planned in per_rank_bytes.items():
            on_card[tuple(placement[rank])] = on_card.get(tuple(placement[rank]), 0) + planned
        for (node, card), planned in sorted(on_card.items()):
            if planned + hw.reserved_bytes_per_card > hw.hbm_bytes_per_card:
                raise PlanError("hardware.reserved_bytes_per_card", hw.reserved_bytes_per_card,
                                f"each card's planned memory must fit hardware.hbm_bytes_per_card={hw.hbm_bytes_per_card}",
                                f"node {node} card {card}: KV {planned} B + reserved {hw.reserved_bytes_per_card} B")


class GroupSearchInCardOrder(Mutant):
    """The split-group search walks each TP group's ranks in card order (the matrix's), not rank order, so among equally good groupings it takes the first by cards, not by ranks (FEATURE 4, key 3: groups listed by their smallest rank)."""

    name = "mutant_group_search_in_card_order"
    component = "topology"
    expected_catchers = ("TC-03",)

    def split_groups(self, run, placement=None):
        if placement is None:
            placement = self.place_ranks(run)
        s = run.layerwise.split_size if self.is_active(run.layerwise) else 1
        out = []
        for tp_group in layout.tp_groups(run.parallel, self.attn_tp_size(run.parallel)):
            ranks = sorted(tp_group)
            by_card = sorted(tp_group, key=lambda r: (placement[r], r))  # the mutation: the i-th card, not rank
            renamed = list(placement)
            for rank, on_card in zip(ranks, by_card):
                renamed[rank] = placement[on_card]
            back = dict(zip(ranks, by_card))
            found = topology_rules.form_split_groups(tuple(tp_group), s, renamed, run.hardware.topology)
            out.extend(sorted(tuple(sorted(back[r] for r in g)) for g in found))
        return tuple(out)


class CardCheckWithoutDraft(Mutant):
    """A card's planned memory leaves out the draft engine's KV: target KV and reserves alone are held against the HBM (FEATURE 4 and 6: every engine's KV on the card counts)."""

    name = "mutant_card_check_without_draft"
    component = "topology"
    expected_catchers = ("TC-03",)

    def card_bytes(self, rank_plan):
        return rank_plan.estimated_bytes  # the mutation: the draft's KV left out
