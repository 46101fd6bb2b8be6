"""TC-03 (L1) ILU PCIe topology mapping.

Every full layer has an owner in every split group; split groups sit on the best
links the topology allows (FEATURE section 4's one key: the worst link inside any group,
then every group's worst link from worst to best, then upstream's consecutive groups if
among the best, else the lexicographically first grouping); no card holds two ranks of
one split group, and no card's planned memory exceeds its HBM.

The best achievable worst link is computed here by brute force over every partition
of each TP group, with this module's own ranking of the ``topo -m`` link codes, never
taken from the implementation. On the ranks, the plan's split groups become REAL
subgroups: each rank all-reduces a one-hot of its card inside its group (two ranks on
one card would count 2) and all-gathers its rank, card and owned layers over it, so
the membership the parent checks is what the process groups really hold. Only the
master plans; nothing is allocated (TC-01/02 measure allocation), which is what lets
the BI-V100 profile (16 GiB of KV per card) run on the CPU.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Optional

import torch
import torch.distributed as dist

from contract.errors import UserError
from contract.plan_types import TREE_CARDS_NOTE, TREE_GROUPS_NOTE
from harness import oracle
from harness.suites import Suite
from harness.suites.bring_up import instantiate
from harness.suites.case import Case
from harness.suites.checks import startup_problems
from harness.suites.expectations import (
    Predicted,
    Prediction,
    Problem,
    card_overflow,
    expected_rejection,
    upstream_group_sharing_a_card,
)
from harness.suites.facts import RankFacts, master_error, master_error_of, plan_of
from harness.suites.ownership import (
    expected_placement,
    expected_split_groups,
    link_rank,
    worst_link,
)
from harness.suites.standard import preferred
from harness.suites.views import plan_report_view

TC = "TC-03"

MODELS = ("deepseek_v32", "qwen3_5_moe")
LAYERWISE = ("s2", "s4")
BI_V100 = ("bi_v100", "bi_v100_pix4")
"""The adaptation's own hardware profile and its 4-card flat PIX topology (FEATURE section 9)."""
REGROUPED_4 = ("pcie_2switch_8_interleaved",)
"""8-card fixtures whose first 4 cards are not consecutively optimal: also run at world 4."""
EXPECT_CONSECUTIVE = ("cpu_sim_8", "bi_v100_pix4", "nvlink_8", "pcie_2switch_8")
EXPECT_REGROUPED = ("pcie_2switch_8_interleaved",)
"""What the fixtures' own descriptions imply: flat PIX / all-NVLink / switch per 4 cards keep
upstream's groups; even-odd interleaved switches must regroup whenever a TP group holds more
than one split group."""



# ---- cases ------------------------------------------------------------------------------


def cases(matrix) -> list[Case]:
    """8-card topologies on the cpu profile at world 8 (tp8), world 4 (tp4) where the first
    four cards regroup, and the BI-V100 profile (4 cards, flat PIX) at world 4."""
    models, layerwise = preferred(MODELS, matrix.models), matrix.preferred("layerwise", LAYERWISE)
    out = []
    for topo in matrix.topologies:
        if topo == BI_V100[1]:
            continue  # the BI-V100 profile below carries it
        worlds = ["tp8"] + (["tp4"] if topo in REGROUPED_4 else [])
        for par, model, lw, impl in itertools.product(worlds, models, layerwise, matrix.implementations):
            if par == "tp4" and (model != models[0] or matrix.layerwise_flags(lw).effective_split_size != 2):
                continue  # one model suffices for the 4-rank regroup; s4 at w4 is a single group
            out.append(Case(tc=TC, model=model, layerwise=lw, parallel=par, implementation=impl, hardware="cpu",
                            variant=topo, extra=(f"hardware.topology={topo}", *matrix.extra_for(lw))))
    for model, lw, impl in itertools.product(models, layerwise, matrix.implementations):
        out.append(Case(tc=TC, model=model, layerwise=lw, parallel="tp4", implementation=impl,
                        hardware=BI_V100[0], extra=matrix.extra_for(lw)))
    if MESH not in matrix.topologies and matrix.topologies:  # the one non-tree fixture: the exhaustive search
        for lw, impl in itertools.product(layerwise, matrix.implementations):
            out.append(Case(tc=TC, model=models[0], layerwise=lw, parallel="tp8", implementation=impl,
                            hardware="cpu", variant=MESH, extra=(f"hardware.topology={MESH}", *matrix.extra_for(lw))))
    if UNEVEN not in matrix.topologies and matrix.topologies:  # consecutive pairs tie on the worst link only
        for lw, impl in itertools.product(matrix.offered("layerwise", ["s2"]), matrix.implementations):
            out.append(Case(tc=TC, model=models[0], layerwise=lw, parallel="tp8", implementation=impl,
                            hardware="cpu", variant=UNEVEN, extra=(f"hardware.topology={UNEVEN}", *matrix.extra_for(lw))))
    if matrix.topologies:  # a TP group across two nodes; dp replicas on differently wired cards
        for lw, impl in itertools.product(layerwise, matrix.implementations):
            out.append(Case(tc=TC, model=models[0], layerwise=lw, parallel="tp8", implementation=impl,
                            hardware="cpu", variant=TWO_NODES,
                            extra=(f"hardware.topology={TWO_NODES}", "hardware.num_cards=4", *matrix.extra_for(lw))))
        lw = next(iter(matrix.preferred("layerwise", ("s2",))), None)
        if lw is not None and matrix.layerwise_flags(lw).effective_split_size == 2:  # s4 at tp 4: one group each
            for impl in matrix.implementations:  # two ranks per card: a node's ranks sit on cards of other switches
                out.append(Case(tc=TC, model=models[0], layerwise=lw, parallel="tp8", implementation=impl,
                                hardware="cpu", variant=f"{TWO_NODES}-shared",
                                extra=(f"hardware.topology={TWO_NODES}", "hardware.num_cards=4", TWO_NODES_SHARED,
                                       *SHARED_CARD, *matrix.extra_for(lw))))
            for impl in matrix.implementations:
                for variant, placed in ((REPLICAS, ()), (f"{REPLICAS}-swapped", (REPLICAS_SWAPPED,))):
                    out.append(Case(tc=TC, model=models[0], layerwise=lw, parallel="dp2_tp4", implementation=impl,
                                    hardware="cpu", variant=variant,
                                    extra=(f"hardware.topology={REPLICAS}", *placed, *matrix.extra_for(lw))))
    for impl in matrix.implementations:  # two ranks per card with memory to spare: regrouped onto distinct cards
        out.append(Case(tc=TC, model=models[0], layerwise="s2", parallel="tp4", implementation=impl,
                        hardware="cpu", variant="shared-card", extra=(OVERSUBSCRIBED, *SHARED_CARD, *matrix.extra)))
    for impl in matrix.implementations:  # two ranks per card: the master must refuse (HBM)
        out.append(Case(tc=TC, model=models[0], layerwise="s2", parallel="tp4", implementation=impl,
                        hardware="cpu", variant="oversubscribed",
                        extra=(OVERSUBSCRIBED, *RESERVE_PER_RANK, *matrix.extra)))
    return out + permuted_cases(matrix) + draft_card_cases(matrix)


def permuted_cases(matrix) -> list[Case]:
    """Ranks placed out of card order on the interleaved switches (``PERMUTED``), at tp 8, s = 2."""
    if REGROUPED_4[0] not in matrix.topologies or not matrix.offers("layerwise", "s2") or \
            MODELS[0] not in matrix.models:
        return []
    return [Case(tc=TC, model=MODELS[0], layerwise="s2", parallel="tp8", implementation=impl, hardware="cpu",
                 variant=f"{REGROUPED_4[0]}-permuted",
                 extra=(f"hardware.topology={REGROUPED_4[0]}", PERMUTED, *matrix.extra_for("s2")))
            for impl in matrix.implementations]


def draft_card_cases(matrix) -> list[Case]:
    """Target and draft KV on shared cards (``DRAFT_BUDGET``): a reserve that fits both, and one that fits the
    target's KV alone."""
    if MODELS[0] not in matrix.models:
        return []
    return [Case(tc=TC, model=MODELS[0], draft=DRAFT, layerwise="s2", parallel="tp4", implementation=impl,
                 hardware="cpu", variant=variant, extra=(OVERSUBSCRIBED, DRAFT_BUDGET, reserve, *matrix.extra))
            for variant, reserve in (("draft-card-fits", DRAFT_FITS), ("draft-card-over", DRAFT_OVER))
            for impl in matrix.implementations]


OVERSUBSCRIBED = "placement=[0,0,1,1]"
SHARED_CARD = ("hardware.reserved_mib_per_card=128", "cache.kv_budget_bytes=104857600")
"""Two ranks per card that fit: 2 x (100 MiB KV + 128 MiB reserved) <= 512 MiB HBM."""
RESERVE_PER_RANK = ("hardware.reserved_mib_per_card=200", "cache.kv_budget_bytes=104857600")
"""Two ranks per card that do not fit because each keeps its own reserve: 2 x (about 100 MiB KV + 200 MiB
reserved) > 512 MiB HBM, where a reserve counted once per card would fit (2 x 100 + 200 <= 512)."""
TWO_NODES = "pcie_2switch_4"
"""One 4-card node (two switches); with ``hardware.num_cards=4`` tp 8 spans two such nodes, whose ranks
are joined by the network (NET), never by a cell of the card matrix: groups stay inside a node."""
TWO_NODES_SHARED = "placement=[0,0,2,2,1,1,3,3]"
"""Two ranks per card, node 0 on cards 0 and 2 (switches A and B), node 1 on cards 1 and 3: inside a node the
best pair is NODE, while the card matrix would pair card 0 with card 1 and card 2 with card 3 (PIX) across
the nodes: read as one box, every split group would span both nodes."""
REPLICAS = "pcie_4switch_8_mixed"
"""Two sockets numbered differently (alternating switches on one, consecutive on the other): dp 2 x tp 4
puts one replica on each, so each TP group is grouped on its own links."""
REPLICAS_SWAPPED = "placement=[4,5,6,7,0,1,2,3]"
"""The same sockets the other way round: the first replica's cards keep upstream's groups, the second's must
regroup (a grouping, or the decision to regroup, taken from the first replica is wrong either way)."""
PERMUTED = "placement=[4,1,2,7,0,3,6,5]"
"""tp 8 on the interleaved switches with ranks out of card order: switch A (even cards) holds ranks 0, 2, 4, 6
(cards 4, 2, 0, 6), switch B ranks 1, 3, 5, 7 (cards 1, 7, 3, 5). Every pairing inside a switch ties (PIX) and
consecutive pairs cross the switches, so key 3 decides: the first grouping by ranks, [0,2] [1,3] [4,6] [5,7];
a search that walks the cards in matrix order takes [2,4] [1,5] [0,6] [3,7] instead."""
DRAFT = "deepseek_v32_mtp"
DRAFT_BUDGET = "cache.kv_budget_bytes=104857600"
"""DeepSeek-V3.2 + its MTP draft at 100 MiB of KV per rank on ``OVERSUBSCRIBED`` (two ranks per card): 17 blocks;
card 0 plans 2 x (98,041,856 B target + 3,063,808 B draft) = 202,211,328 B of KV, 6,127,616 B of it the draft's
(``testcases/unit/test_oracle.py::test_a_card_check_counts_each_ranks_draft_kv``)."""
DRAFT_FITS = "hardware.reserved_mib_per_card=159"
"""202,211,328 + 2 x 159 MiB = 535,658,496 B <= 512 MiB (536,870,912 B): accepted (160 MiB would not be)."""
DRAFT_OVER = "hardware.reserved_mib_per_card=162"
"""202,211,328 + 2 x 162 MiB = 541,949,952 B > 536,870,912 B: refused, although the target's KV alone with the
reserves (535,822,336 B) would fit."""
MESH = "nvlink_mesh_8"
"""NVLink hybrid cube mesh: not a tree, so split groups come from the exhaustive search (FEATURE 4)."""
UNEVEN = "pcie_uneven_switches_8"
"""Switches of uneven fill: consecutive pairs tie with the best grouping on the worst link but not on the
groups' own worst links (FEATURE 4, key 2)."""


# ---- rank side --------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Member:
    """One rank of a split group, as all-gathered over the real subgroup."""

    rank: int
    node: int
    card: int
    owned: tuple[int, ...]


@dataclass(frozen=True, kw_only=True)
class LiveGroup:
    members: tuple[Member, ...]
    card_counts: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class TopologyFacts(RankFacts):
    device: str = ""
    group: Optional[LiveGroup] = None
    unusable: Optional[str] = None


def body(ctx, run, impl_cfg) -> TopologyFacts:
    """Master plans; every rank joins its real split subgroup and reports who is in it, on which card."""

    published = None
    if ctx.rank == 0:
        try:
            published = (instantiate(impl_cfg).plan(run), None)
        except UserError as exc:
            published = (None, master_error_of(exc))
    plan, error = ctx.broadcast_object(published, src=0)
    base = {"rank": ctx.rank, "device": ctx.device, "error": error, "plan": plan if ctx.rank == 0 else None,
            "run": run if ctx.rank == 0 else None}
    if plan is None:
        return TopologyFacts(**base)
    # Decided from the broadcast plan alone, so every rank takes the same branch.
    unusable = unusable_groups(plan, ctx.world_size)
    if unusable:
        return TopologyFacts(**base, unusable=unusable)

    group = ctx.split_groups(plan.split_groups)
    mine = next(rp for rp in plan.ranks if rp.rank == ctx.rank)
    slots = card_slots(plan, run.hardware.num_cards)
    onehot = torch.zeros(len(slots) + 1, dtype=torch.int64, device=ctx.device)
    onehot[slots.get((mine.node, mine.card), len(slots))] = 1
    dist.all_reduce(onehot, group=group)
    size = dist.get_world_size(group)
    members = [None] * size
    dist.all_gather_object(members, Member(rank=ctx.rank, node=mine.node, card=mine.card,
                                           owned=tuple(mine.owned_full_layers)), group=group)
    counts = onehot.cpu().tolist()
    names = {i: key for key, i in slots.items()}
    live = LiveGroup(members=tuple(members),
                     card_counts={str(names.get(i, "invalid")): c for i, c in enumerate(counts) if c})
    return TopologyFacts(**base, group=live)


def unusable_groups(plan, world_size: int) -> Optional[str]:
    """Why the plan's split groups cannot become subgroups of this world (None: they can)."""
    covered = sorted(r for g in plan.split_groups for r in g)
    if covered != list(range(world_size)):
        return f"split groups {list(plan.split_groups)} are not a partition of ranks 0..{world_size - 1}"
    if sorted(rp.rank for rp in plan.ranks) != list(range(world_size)):
        return f"plan ranks {[rp.rank for rp in plan.ranks]} are not 0..{world_size - 1}"
    return None


def card_slots(plan, num_cards: int) -> dict:
    """(node, card) -> its index over the plan's nodes; the rank body and the explorer place ranks by it."""
    nodes = sorted({rp.node for rp in plan.ranks if isinstance(rp.node, int) and rp.node >= 0})
    return {(n, c): i for i, (n, c) in enumerate(itertools.product(nodes, range(num_cards)))}


# ---- the independent expectation: harness.suites.ownership (link ranking, brute force) ---


# ---- parent side ------------------------------------------------------------------------


def check(facts: list, run) -> list[str]:
    """Problems found (empty: pass). ``run`` is the composed RunSpec of the case."""
    if expected_rejection(run) is None:
        refusal = spec_refuses_placement(run)
        if refusal:
            err = master_error(facts)
            if err is None:
                return [_with_cards_note(Problem(f"master accepted a placement the spec refuses: {refusal}",
                                                 rule="cards"), plan_of(facts))]
            return [] if err.user_error else [f"master refused with {err}, not a UserError ({refusal})"]
    verdict = startup_problems(facts, run)
    if verdict is not None:
        return verdict
    plan = plan_of(facts)
    if facts[0].unusable:
        return [f"plan cannot form subgroups: {facts[0].unusable}"]
    problems = check_groups(plan, run)
    if plan.kv_layout != run.hardware.kv_layout:  # the profile's layout reaches the plan the workers allocate by
        problems.append(Problem(f"plan kv_layout {plan.kv_layout!r}, hardware profile {run.hardware.name}: "
                                f"{run.hardware.kv_layout!r}", rule="layout"))
    problems += _check_cards(plan, run)
    problems += _check_live(facts, plan, run)
    return problems


def spec_refuses_placement(run) -> Optional[str]:
    """Why the spec refuses the placement (FEATURE 4), or None: no grouping on distinct cards, or a card over its
    HBM by the oracle's lower bound (``spec_refuses_cards``) or by its exact bytes per card, every rank's target
    and draft KV plus its reserve (``expectations.card_overflow``, FEATURE 4 and 6)."""
    return oracle.spec_refuses_cards(run) or card_overflow(run)


def check_groups(plan, run) -> list[str]:
    world, dp, cp = run.parallel.world_size, run.parallel.dp_size, run.parallel.cp_size
    tp, s = oracle.attn_tp_size(run), oracle.split_size(run)
    topo = run.hardware.topology.name
    spec = expected_split_groups(run)
    groups = [tuple(g) for g in plan.split_groups]
    problems = []
    if any(len(g) != s for g in groups):
        problems.append(f"split groups {groups}: every group must hold s={s} ranks")
    positions: dict[int, list] = {}  # a TP group's size -> the positions of its consecutive groups of s
    for tp_group in oracle.expected_split_groups_consecutive(world, dp, cp, tp):
        members = set(tp_group)
        inside = [g for g in groups if members.issuperset(g)]
        if sorted(itertools.chain.from_iterable(inside)) != sorted(tp_group):  # (no generator per rank)
            problems.append(f"TP group {tp_group}: plan's split groups {groups} do not partition it")
            continue
        if len(tp_group) not in positions:  # every TP group has tp ranks: the oracle is asked once, not per group
            positions[len(tp_group)] = [tuple(g) for g in oracle.expected_split_groups_consecutive(len(tp_group), 1,
                                                                                                   1, s)]
        consecutive = [tuple(map(tp_group.__getitem__, g)) for g in positions[len(tp_group)]]  # (no generator per group)
        if spec is None:
            problems.append(f"TP group {tp_group}: no grouping puts each split group on distinct cards, "
                            f"the master should have refused it")
            continue
        best_groups = [g for g in spec if members.issuperset(g)]
        keeps = best_groups == consecutive  # key (3): upstream's order when it is among the best
        if inside != best_groups:  # (the spec's very groups: no key can differ, and none is worked out)
            problems += _grouping_problems(run, tp_group, inside, best_groups, consecutive, keeps)
        if run.placement is None and 1 < s < tp and topo in EXPECT_REGROUPED and keeps:
            problems.append(f"harness: on {topo} consecutive groups should not be optimal (even/odd switches)")
        if run.placement is None and 1 < s and topo in EXPECT_CONSECUTIVE and not keeps:
            problems.append(f"harness: on {topo} consecutive groups should be optimal")
    if problems:
        problems[0] = _with_tree_groups(problems[0], plan)
    return problems


def _grouping_problems(run, tp_group, inside: list, best_groups: list, consecutive: list, keeps: bool) -> list:
    """How the plan's split groups of one TP group (``inside``), other than the spec's (``best_groups``), fall
    short by FEATURE 4's key: (1) the worst link, (2) the groups' own worst links, (3) the tie-break."""
    topo = run.hardware.topology.name
    got_key, best_key = grouping_key(run, inside), grouping_key(run, best_groups)
    problems = []
    if _worst_of(got_key) != _worst_of(best_key):
        problems.append(Problem(f"TP group {tp_group} on {topo}: worst link inside the plan's groups {inside} "
                                f"is {[worst_link(run, g) for g in inside]}; the spec's groups {best_groups} "
                                f"reach {[worst_link(run, g) for g in best_groups]}", rule="groups",
                                rank=tp_group[0]))
    elif got_key != best_key:
        problems.append(Problem(f"TP group {tp_group} on {topo}: the plan's groups {inside} tie with the spec's "
                                f"{best_groups} on the worst link, but their own worst links from worst to best "
                                f"{_links_worst_first(run, inside)} fall short of the spec's "
                                f"{_links_worst_first(run, best_groups)} (FEATURE 4, key 2)"
                                + (": consecutive groups are not optimal but were kept" if inside == consecutive
                                   else ""), rule="groups", rank=tp_group[0]))
    elif sorted(inside) != sorted(best_groups):
        why = ("consecutive groups are among the best, so the plan must keep them" if keeps
               else "among equally good groupings the spec takes the first lexicographically")
        problems.append(Problem(f"TP group {tp_group} on {topo}: the plan's groups {inside} are as good as the "
                                f"spec's {best_groups} but not them ({why}; FEATURE 4, key 3)", rule="groups",
                                rank=tp_group[0]))
    return problems


def _with_tree_groups(problem: str, plan) -> str:
    """The first grouping problem of a plan whose groups a compiled tree's workers made, with what they come from
    and that the tree has no topology-aware grouping (the plan's ``TREE_GROUPS_NOTE``), so the verdict names it."""
    note = next((n for n in plan.notes if n.startswith(TREE_GROUPS_NOTE)), None)
    if note is None:
        return problem
    if not isinstance(problem, Problem):
        return f"{problem}; {note}"
    return Problem(f"{problem}; {note}", rule=problem.rule, rank=problem.rank, amount=problem.amount,
                   field=problem.field)


def _with_cards_note(problem: Problem, plan) -> Problem:
    """A card problem of a plan whose tree has no card check (the plan's ``TREE_CARDS_NOTE``), naming that."""
    if plan is None or TREE_CARDS_NOTE not in plan.notes:
        return problem
    return Problem(f"{problem}; {TREE_CARDS_NOTE}", rule=problem.rule, rank=problem.rank, amount=problem.amount,
                   field=problem.field)


def grouping_key(run, groups) -> tuple:
    """FEATURE 4 keys (1) and (2): each group's worst link (``link_rank``), sorted from worst to best."""
    return tuple(sorted(link_rank(worst_link(run, g)) for g in groups))


def _worst_of(key: tuple) -> int:
    """FEATURE 4 key (1), the worst link of any group, read off a ``grouping_key``: its
    first element (no group: a single rank's "X")."""
    return key[0] if key else link_rank("X")


def _links_worst_first(run, groups) -> list:
    return sorted((worst_link(run, g) for g in groups), key=link_rank)


def _check_cards(plan, run) -> list[str]:
    """Ranks placed as the spec says; no card twice in a split group; each card's memory fits its HBM."""
    where = expected_placement(run)
    hw = run.hardware
    problems = []
    for rp in plan.ranks:
        if (rp.node, rp.card) != where[rp.rank]:
            problems.append(f"rank {rp.rank} planned on node {rp.node} card {rp.card}, placement says "
                            f"node {where[rp.rank][0]} card {where[rp.rank][1]}")
    for g in plan.split_groups:
        cards = [where[r] for r in g]
        if len(set(cards)) != len(cards):
            problems.append(Problem(f"split group {list(g)} puts two ranks on one card: {cards}", rule="cards"))
    draft_per_rank = oracle.expected_draft_rank_bytes(run, plan.n_blocks)  # n_blocks * D (FEATURE 6), 0 without a draft
    on_card: dict[tuple[int, int], list] = {}
    for rp in plan.ranks:
        on_card.setdefault(where[rp.rank], []).append(rp)
    spec_of: dict[int, int] = {}  # id of an owned-layers object the plan holds -> its oracle bytes (ranks share one)
    for card, rps in sorted(on_card.items()):
        # one rank on the card (most): its sums without a generator each (0 + x, as ``sum`` adds)
        alone = rps[0] if len(rps) == 1 else None
        planned = (0 + (alone.estimated_bytes + alone.draft_estimated_bytes) if alone is not None
                   else sum(rp.estimated_bytes + rp.draft_estimated_bytes for rp in rps))
        for rp in rps:
            if id(rp.owned_full_layers) not in spec_of:
                spec_of[id(rp.owned_full_layers)] = oracle.expected_rank_bytes(run, plan.n_blocks,
                                                                                rp.owned_full_layers)
        spec = (0 + (spec_of[id(alone.owned_full_layers)] + draft_per_rank) if alone is not None
                else sum(spec_of[id(rp.owned_full_layers)] + draft_per_rank for rp in rps))
        reserved = hw.reserved_bytes_per_card * len(rps)
        if max(planned, spec) + reserved > hw.hbm_bytes_per_card:
            problems.append(Problem(f"node {card[0]} card {card[1]} (ranks {[rp.rank for rp in rps]}): KV planned "
                                    f"{planned} B (spec {spec} B) + reserved {reserved} B > HBM "
                                    f"{hw.hbm_bytes_per_card} B", rule="cards"))
    first = next((i for i, p in enumerate(problems) if getattr(p, "rule", "") == "cards"), None)
    if first is not None:
        problems[first] = _with_cards_note(problems[first], plan)
    return problems


def _check_live(facts, plan, run) -> list[str]:
    """What the real subgroups held: members = the plan's group, one rank per card, every layer owned once."""
    where = expected_placement(run)
    full = list(oracle.expected_full_layers(run.model))
    by_rank = {r: tuple(g) for g in plan.split_groups for r in g}
    problems = []
    found: dict = {}  # (a reported group object, the plan's group) -> what is wrong with it, judged once
    for f in facts:
        r, live = f.rank, f.group
        key = (id(live), by_rank[r])
        if key not in found:
            found[key] = _live_group_problems(live, by_rank[r], where, full)
        if found[key]:  # (most groups have none: no list made per rank)
            problems += [Problem(f"rank {r}: {p}", rule=getattr(p, "rule", "")) for p in found[key]]
        device = f.device
        if device.startswith("cuda:") and len({x.device for x in facts}) == len(facts):
            if int(device.split(":")[1]) != where[r][1]:  # one rank per card: the plan's card is the real one
                problems.append(f"rank {r} runs on {device} but is planned on card {where[r][1]}")
    return problems


def _live_group_problems(live, planned: tuple, where, full: list) -> list[str]:
    """What is wrong with one reported split group (``LiveGroup``) whose rank the plan puts in ``planned``: the
    same for every member that reports it (in-process, the members of a group share one object)."""
    problems = []
    ranks, owners, misplaced = [], [], False
    for m in live.members:  # (one pass over the members: no generator each for ranks, cards and owned layers)
        ranks.append(m.rank)
        owners += m.owned
        misplaced = misplaced or where[m.rank] != (m.node, m.card)
    members = sorted(ranks)
    if members != sorted(planned):
        problems.append(f"its real split subgroup holds {members}, plan says {sorted(planned)}")
    if misplaced:
        cards = [(m.node, m.card) for m in live.members]
        problems.append(f"subgroup members report cards {cards}, placement says "
                        f"{[where[m.rank] for m in live.members]}")
    over = {card: n for card, n in live.card_counts.items() if n != 1}
    if over or sum(live.card_counts.values()) != len(members):
        problems.append(Problem(f"all-reduced card counts in its subgroup {live.card_counts} (each card must appear "
                                "once)", rule="cards"))
    owners.sort()
    if owners != full:
        missing = sorted(set(full) - set(owners))
        twice = sorted({l for l in owners if owners.count(l) > 1})
        problems.append(f"split group {members} owns full layers missing {missing}, "
                        f"more than once {twice}, not full {sorted(set(owners) - set(full))}")
    return problems


# ---- reports ----------------------------------------------------------------------------


def summarize(facts: list) -> dict:
    plan = plan_of(facts)
    if plan is None:
        return {"error": str(master_error(facts))}
    return {
        "split_groups": [list(g) for g in plan.split_groups],
        "cards": {rp.rank: [rp.node, rp.card] for rp in plan.ranks},
        "devices": {f.rank: f.device for f in facts},
        "n_blocks": plan.n_blocks,
        "peak_bytes": plan.peak_bytes,
    }


# ---- what the spec predicts upstream's variants make this check find -----------------------------


def passes_any_refusal(run) -> bool:
    """A placement the spec refuses passes any UserError (``check``): nothing to predict."""
    return bool(spec_refuses_placement(run))


def predict_upstream_layout(run) -> Optional[Prediction]:
    """Upstream keeps consecutive split groups where the spec regroups: a ``groups`` problem located at the
    first rank of each TP group whose consecutive groups are not the spec's."""
    spec_groups = oracle.expected_split_groups(run, rule=oracle.SPEC_GROUP_RULE)
    upstream_groups = oracle.expected_split_groups(run, rule=oracle.UPSTREAM_GROUP_RULE)
    required = []
    if spec_groups is not None:
        spec_sets = {frozenset(g) for g in spec_groups}
        p = run.parallel
        for tp_group in oracle.expected_split_groups_consecutive(p.world_size, p.dp_size, p.cp_size,
                                                                 oracle.attn_tp_size(run)):
            inside = [g for g in upstream_groups if set(g) <= set(tp_group)]
            if any(frozenset(g) not in spec_sets for g in inside):
                required.append(Predicted(rule="groups", rank=tp_group[0],
                                          why=f"consecutive groups {inside} in TP group {tp_group}"))
    if not required:
        return None
    return Prediction(required=tuple(required),
                      reason=f"upstream keeps consecutive split groups on {run.hardware.topology.name}; the spec "
                             f"regroups by its grouping key (FEATURE 4: worst link, then each group's own)")


def predict_no_card_check(run) -> Optional[Prediction]:
    """A tree with no card check (``TREE_CARDS_NOTE``) on a placement the spec refuses (it plans it: one ``cards``
    problem) or where upstream's consecutive groups put two ranks of a group on one card (the plan's and the live
    subgroups' card problems): the first names that the tree has no such check (FEATURE 4's card checks are the
    BI-V100 adaptation's)."""
    refusal = spec_refuses_placement(run)
    shared = None if refusal else upstream_group_sharing_a_card(run)
    if not refusal and shared is None:
        return None
    found = f"the spec refuses the placement: {refusal}" if refusal else f"upstream's groups put {shared}"
    return Prediction(required=(Predicted(rule="cards", says=TREE_CARDS_NOTE, why=found),),
                      consequences=("cards",),
                      reason=f"upstream's tree has no card check (FEATURE 4's card checks are the BI-V100 "
                             f"adaptation's); {found}")


SUITE = Suite(
    TC=TC,
    LEVEL="L1",
    TITLE="ILU PCIe topology mapping",
    cases=cases,
    body=body,
    check=check,
    report_view=plan_report_view,
    summarize=summarize,
    predict_upstream_layout=predict_upstream_layout,
    predict_no_card_check=predict_no_card_check,
    passes_any_refusal=passes_any_refusal,
)
