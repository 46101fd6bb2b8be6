"""``contract.frozen``: a frozen dataclass made without its ``__init__`` is the one its constructor makes, and what
the constructor would refuse it leaves to the constructor."""

from __future__ import annotations

from dataclasses import FrozenInstanceError, dataclass, field, replace

import pytest

from contract.frozen import made, replaced
from contract.plan_types import RankPlan


@dataclass(frozen=True)
class Point:
    x: int
    y: int = 2
    tags: tuple = field(default_factory=tuple)


def test_made_equals_the_constructors_and_stays_frozen():
    assert made(Point, {"x": 1, "y": 5, "tags": ("a",)}) == Point(1, 5, ("a",))
    assert repr(made(Point, {"x": 1, "tags": ()})) == repr(Point(1, tags=()))  # a plain default filled in
    with pytest.raises(FrozenInstanceError):
        made(Point, {"x": 1, "y": 2, "tags": ()}).x = 3
    values = dict(rank=1, node=0, card=1, dp_rank=0, cp_rank=0, tp_rank=1, split_group=0, split_rank=1,
                  owned_full_layers=(1, 3), estimated_bytes=10, draft_estimated_bytes=0)
    assert made(RankPlan, values) == RankPlan(**values) and hash(made(RankPlan, values)) == hash(RankPlan(**values))


def test_what_the_constructor_refuses_or_fills_by_a_factory_is_the_constructors():
    with pytest.raises(TypeError, match="unexpected keyword argument 'z'"):
        made(Point, {"x": 1, "z": 0})
    with pytest.raises(TypeError, match="missing 1 required positional argument: 'x'"):
        made(Point, {"y": 1})
    assert made(Point, {"x": 1}) == Point(1)  # (tags' factory called by the constructor itself)


def test_replaced_is_dataclasses_replace():
    p = Point(1, 5, ("a",))
    assert replaced(p, {"y": 7}) == replace(p, y=7) and p.y == 5
    with pytest.raises(TypeError, match="'z'"):
        replaced(p, {"z": 0})
