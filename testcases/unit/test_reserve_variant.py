"""``oracle.with_reserved_bytes_per_card``: a configuration at another reserve per card keeps the answers the
reserve leaves alone (at the same per-rank budget), and is judged anew where the reserve decides."""

from __future__ import annotations

import random
from dataclasses import replace

from contract.units import MIB
from harness import oracle
from harness.explore.strategies import DRAWN_BYTES, decode


def _planned_with_its_own_budget():
    """A drawn configuration the spec accepts and plans, with ``cache.kv_budget_bytes`` set and a draft."""
    rng = random.Random(1)
    while True:
        run = decode(bytes(rng.randrange(256) for _ in range(DRAWN_BYTES)))
        if (run.cache.kv_budget_bytes > 0 and run.draft is not None and oracle.expected_rejection(run) is None
                and oracle.expected_split_groups(run) is not None and oracle.spec_refuses_cards(run) is None):
            return run


def test_the_report_is_shared_and_the_card_check_is_not():
    run = _planned_with_its_own_budget()
    full = oracle.with_reserved_bytes_per_card(run, run.hardware.hbm_bytes_per_card)
    assert full.hardware.reserved_bytes_per_card == run.hardware.hbm_bytes_per_card
    assert oracle.expected_report(full) is oracle.expected_report(run)  # same budget: the same answer object
    assert oracle.spec_refuses_cards(full) is not None  # the reserve fills every card: refused at the new reserve


def test_another_budget_is_answered_anew():
    planned = _planned_with_its_own_budget()
    run = replace(planned, cache=replace(planned.cache, kv_budget_bytes=0))  # the profile's budget: HBM - reserve
    variant = oracle.with_reserved_bytes_per_card(run, run.hardware.reserved_bytes_per_card + MIB)
    fresh = replace(run, hardware=replace(run.hardware, reserved_bytes_per_card=run.hardware.reserved_bytes_per_card + MIB))
    assert oracle.expected_report(variant).budget_bytes == oracle.expected_report(run).budget_bytes - MIB
    assert oracle.expected_report(variant) == oracle.expected_report(fresh)
    assert oracle.expected_capacities(variant) == oracle.expected_capacities(fresh) != oracle.expected_capacities(run)
