"""What the drawn configurations reach: the verdicts, placements, cache corners and refusal orders the
explorer is meant to draw, each decided from the configuration by the oracle alone.

``reached(run)`` names what one configuration reaches (``REACHES``); ``testcases/explore`` checks that CI's
budget reaches every one, and ``python -m tools.bench.explore`` counts them.
"""

from __future__ import annotations

from dataclasses import replace

from contract.units import MIB
from harness import oracle

REACHES = (
    "accepted, split",
    "accepted, not split",
    "refused at startup",
    "refused: cards",
    "refused: cannot be planned",
    "tp group across nodes",
    "dp replicas grouped differently",
    "0 sequences without prefix cache",
    "quantized cache refused before a later rule",
    "a rule before the quantized cache refused",
    "draft",
    "two ranks on one card",
    "s divides the world, not tp, before a later rule",
    "draft indexed unlike its target",
    "card order unlike rank order",
    "reserve within a MiB of a card's fit",
)


def _verdict(run, rejection) -> str:
    if rejection is not None:
        return "refused at startup"
    if oracle.spec_refuses_cards(run):
        return "refused: cards"
    if oracle.expected_estimation_rejection(run) is not None:
        return "refused: cannot be planned"
    return "accepted, split" if oracle.split_size(run) > 1 else "accepted, not split"


def _patterns(run) -> set:
    """Each TP group's split groups as positions inside it (one per distinct pattern)."""
    groups = oracle.expected_split_groups(run) or []
    p = run.parallel
    out = set()
    for tp_group in oracle.expected_split_groups_consecutive(p.world_size, p.dp_size, p.cp_size,
                                                             oracle.attn_tp_size(run)):
        inside = sorted(tuple(tp_group.index(r) for r in g) for g in groups if set(g) <= set(tp_group))
        out.add(tuple(inside))
    return out


def _shares_a_card(run) -> bool:
    cards = run.hardware.num_cards
    on: dict = {}
    for rank, card in enumerate(run.placement):
        on.setdefault((rank // cards, card), []).append(rank)
    return any(len(ranks) > 1 for ranks in on.values())


def reached(run) -> tuple[str, ...]:
    rejection = oracle.expected_rejection(run)
    verdict = _verdict(run, rejection)
    out = [verdict]
    if run.draft is not None:
        out.append("draft")
    if run.placement is not None and _shares_a_card(run):
        out.append("two ranks on one card")
    if run.draft is not None and oracle.expected_indexer(run.draft) != oracle.expected_indexer(run.model):
        out.append("draft indexed unlike its target")
    if run.placement is not None and _cards_out_of_rank_order(run):
        out.append("card order unlike rank order")
    if rejection is not None and _split_fits_world_not_tp(run, rejection):
        out.append("s divides the world, not tp, before a later rule")
    if verdict.startswith("accepted") and _reserve_near_fit(run):
        out.append("reserve within a MiB of a card's fit")
    if rejection is None:
        p, cards = run.parallel, run.hardware.num_cards
        tp = oracle.attn_tp_size(run)
        if any(len({r // cards for r in range(first, first + tp)}) > 1 for first in range(0, p.world_size, tp)):
            out.append("tp group across nodes")
        if p.dp_size > 1 and oracle.split_size(run) > 1 and verdict != "refused: cards" and len(_patterns(run)) > 1:
            out.append("dp replicas grouped differently")
        cache = run.cache
        if (verdict.startswith("accepted") and oracle.expected_linear_layers(run.model)
                and cache.max_seqs_per_batch == 0 and not cache.enable_prefix_cache
                and cache.max_linear_state_cache_slots == 0):
            out.append("0 sequences without prefix cache")
    elif rejection.field == "cache.kv_cache_dtype":
        if oracle.expected_rejection(replace(run, cache=replace(run.cache, kv_cache_dtype="auto"))) is not None:
            out.append("quantized cache refused before a later rule")
    elif oracle.expected_rejection(_without_startup_breaks(run, rejection.field)) is not None:
        fixed = oracle.expected_rejection(_without_startup_breaks(run, rejection.field))
        if fixed.field == "cache.kv_cache_dtype":
            out.append("a rule before the quantized cache refused")
    return tuple(out)


def _without_startup_breaks(run, field: str):
    """``run`` with the rule of ``field`` no longer broken (what the next rule in the order would say)."""
    group, _, key = field.partition(".")
    fixes = {"layerwise.split_size": lambda r: replace(r, layerwise=replace(r.layerwise, enable=False)),
             "parallel.world_size": lambda r: replace(r, parallel=replace(r.parallel, world_size=r.parallel.dp_size * r.parallel.cp_size * max(1, r.parallel.world_size // (r.parallel.dp_size * r.parallel.cp_size)))),
             "parallel.cp_size": lambda r: replace(r, parallel=replace(r.parallel, cp_size=1, world_size=r.parallel.world_size // r.parallel.cp_size)),
             "parallel.kv_split_size": lambda r: replace(r, parallel=replace(r.parallel, kv_split_size=1)),
             "cache.host_blocks_factor": lambda r: replace(r, cache=replace(r.cache, host_blocks_factor=0.0))}
    return fixes.get(field, lambda r: r)(run)


def _cards_out_of_rank_order(run) -> bool:
    """Some attention TP group whose cards do not rise with its ranks on a node."""
    tp, cards = oracle.attn_tp_size(run), run.hardware.num_cards
    world = min(run.parallel.world_size, len(run.placement))
    for first in range(0, world, max(1, tp)):  # (a refused world need not be whole TP groups)
        on_node: dict = {}
        for rank in range(first, min(first + tp, world)):
            on_node.setdefault(rank // cards, []).append(run.placement[rank])
        if any(row != sorted(row) for row in on_node.values()):
            return True
    return False


def _split_fits_world_not_tp(run, rejection) -> bool:
    """Refused for an s that divides the world but not the attention TP size, with a later master rule broken
    too (what a port that checks s against the world would name instead)."""
    s, p = run.layerwise.split_size, run.parallel
    if rejection.field != "layerwise.split_size" or s < 2 or p.world_size % s or oracle.attn_tp_size(run) % s == 0:
        return False
    later = replace(run, layerwise=replace(run.layerwise, split_size=2 if oracle.attn_tp_size(run) % 2 == 0 else 1))
    found = oracle.expected_rejection(later)
    return found is not None and found.field in ("cache.host_blocks_factor", "parallel.cp_size",
                                                 "parallel.kv_split_size")


def _reserve_near_fit(run) -> bool:
    """Some card's plan (target + draft + a reserve per rank) within one MiB of its HBM, either side."""
    hw = run.hardware
    ranks_on: dict = {}
    for rank in range(run.parallel.world_size):
        card = oracle.expected_rank_location(run, rank)
        ranks_on[card] = ranks_on.get(card, 0) + 1
    return any(abs(planned + ranks_on[card] * hw.reserved_bytes_per_card - hw.hbm_bytes_per_card) <= ranks_on[card] * MIB
               for card, planned in oracle.expected_card_bytes(run).items())
