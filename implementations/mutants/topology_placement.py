"""Topology mutants of rank placement: links across nodes, and the grouping of each dp replica (FEATURE 4)."""

from __future__ import annotations

from implementations.mutants.base import Mutant
from implementations.reference import layout
from implementations.reference import topology as topology_rules
from implementations.specs import Topology


class CrossNodeLinksFromCardMatrix(Mutant):
    """Links between ranks on different nodes are read from the card matrix, as if every node were one box (the spec: another node is the network, the worst link), so a TP group spanning two nodes is regrouped across them (FEATURE 4)."""

    name = "mutant_cross_node_links_from_card_matrix"
    component = "topology"
    expected_catchers = ("TC-03",)

    def split_groups(self, run, placement=None):
        if placement is None:
            placement = self.place_ranks(run)
        s = run.layerwise.split_size if self.is_active(run.layerwise) else 1
        topo, cards = run.hardware.topology, run.hardware.num_cards
        nodes = 1 + max(node for node, _ in placement)
        # every (node, card) a card of one box, linked as its card is: the same card on two nodes reads "X"
        boxed = Topology(cards=tuple(f"N{n}GPU{c}" for n in range(nodes) for c in range(cards)),
                         links=tuple(tuple(topo.links[a % cards][b % cards] for b in range(nodes * cards))
                                     for a in range(nodes * cards)), name=topo.name)
        flat = tuple((0, node * cards + card) for node, card in placement)
        return tuple(g for tp_group in layout.tp_groups(run.parallel, self.attn_tp_size(run.parallel))
                     for g in topology_rules.form_split_groups(tp_group, s, flat, boxed))


class FirstReplicaGroupingReused(Mutant):
    """The first TP group's split groups, as positions inside it, are reused for every dp replica, although the replicas' cards may be wired differently (FEATURE 4: each TP group is grouped on its own links)."""

    name = "mutant_first_replica_grouping_reused"
    component = "topology"
    expected_catchers = ("TC-03",)

    def split_groups(self, run, placement=None):
        if placement is None:
            placement = self.place_ranks(run)
        s = run.layerwise.split_size if self.is_active(run.layerwise) else 1
        tp_groups = layout.tp_groups(run.parallel, self.attn_tp_size(run.parallel))
        first = tp_groups[0]
        pattern = [[first.index(r) for r in g]
                   for g in topology_rules.form_split_groups(first, s, placement, run.hardware.topology)]
        return tuple(tuple(tp_group[i] for i in g) for tp_group in tp_groups for g in pattern)
