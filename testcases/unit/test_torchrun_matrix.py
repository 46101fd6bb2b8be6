"""Under an external launcher the group composes once: rank 0 composes, the other ranks adopt."""

from __future__ import annotations

import pytest

from harness.suites import case as case_module
from harness.suites.case import Case
from harness.suites.torchrun_matrix import compose_on_rank_0

CASE = Case(tc="TC-01", model="deepseek_v32", layerwise="s2", parallel="tp4", implementation="reference")


class _Ctx:
    """A rank of a group whose broadcast hands every rank what rank 0 sent."""

    def __init__(self, rank: int, sent: dict) -> None:
        self.rank, self.sent = rank, sent

    def broadcast_object(self, obj, src: int = 0):
        if self.rank == src:
            self.sent["payload"] = obj
        return self.sent["payload"]


def test_other_ranks_adopt_rank_0s_cases_without_composing(monkeypatch):
    key = tuple(CASE.overrides())
    monkeypatch.setattr(case_module, "RESOLVED", {})
    sent: dict = {}
    compose_on_rank_0(_Ctx(0, sent), [CASE, CASE])
    assert list(sent["payload"]["resolved"]) == [key], "rank 0 did not send each distinct case once"
    composed = sent["payload"]["resolved"][key]
    assert CASE.resolved is composed, "rank 0 sent another composition than its own"

    monkeypatch.setattr(case_module, "RESOLVED", {})  # rank 1: a process that composed nothing
    monkeypatch.setattr(case_module, "compose_config", lambda overrides: pytest.fail("rank 1 composed"))
    compose_on_rank_0(_Ctx(1, sent), [CASE])
    assert CASE.resolved is composed, "rank 1 holds another composition than the one rank 0 sent"
    assert CASE.resolved.run.layerwise.split_size == 2, f"{CASE.overrides()} composed to another split size"


def test_a_case_rank_0_cannot_compose_stops_every_rank_with_its_message(monkeypatch):
    bad = Case(tc="TC-01", model="deepseek_v32", layerwise="s2", parallel="tp4", implementation="reference",
               extra=("cache.block_size=many",))
    monkeypatch.setattr(case_module, "RESOLVED", {})
    sent: dict = {}
    for rank in (0, 1):
        with pytest.raises(RuntimeError, match="rank 0 could not compose.*cache.block_size"):
            compose_on_rank_0(_Ctx(rank, sent), [bad])
