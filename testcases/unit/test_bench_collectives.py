"""python -m tools.bench.collectives: both sides measured on one pool, the ratio is harness / torch."""

from __future__ import annotations

import json

import pytest

from tools.bench import collectives

pytestmark = [pytest.mark.unit, pytest.mark.dist]


def test_both_sides_of_each_collective_are_timed_on_every_rank(tmp_path, capsys):
    out = tmp_path / "collectives.json"
    assert collectives.main(["--worlds", "2", "--repeats", "5", "--json", str(out)]) == 0
    rows = json.loads(out.read_text())["rows"]
    assert [(r["world_size"], r["op"], r["calls"]) for r in rows] == [(2, "broadcast", 5), (2, "all_gather", 5)]
    for r in rows:
        for side in collectives.SIDES:
            assert r[f"{side}_cpu_per_call_s"] > 0 and r[f"{side}_wall_per_call_s"] > 0, r
        assert r["cpu_ratio"] == pytest.approx(r["harness_cpu_per_call_s"] / r["torch_cpu_per_call_s"])
        assert r["wall_ratio"] == pytest.approx(r["harness_wall_per_call_s"] / r["torch_wall_per_call_s"])
    printed = capsys.readouterr().out
    assert "    2 | broadcast  |" in printed and "    2 | all_gather |" in printed, printed


class Recorder:
    """A RankContext stand-in (rank 1 of 4) that records which object collective was called."""

    rank, world_size, control_group = 1, 4, "control"

    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def broadcast_object(self, obj, src=0):
        self.calls.append(("RankContext.broadcast_object", obj, src))

    def all_gather_object(self, obj):
        self.calls.append(("RankContext.all_gather_object", obj))


def test_each_side_makes_the_call_it_names(monkeypatch):
    """torch's side calls torch's object collectives on the control group, the harness's side
    RankContext's: a bench that timed one side twice would print a ratio of 1 by construction."""
    import torch.distributed as dist

    ctx = Recorder()
    monkeypatch.setattr(dist, "broadcast_object_list", lambda box, src, group: ctx.calls.append(
        ("broadcast_object_list", box, src, group)))
    monkeypatch.setattr(dist, "all_gather_object", lambda out, obj, group: ctx.calls.append(
        ("all_gather_object", len(out), obj, group)))
    for side in collectives.SIDES:
        for op in collectives.OPS:
            collectives.call(ctx, side, op)("obj")
    assert ctx.calls == [
        ("broadcast_object_list", [None], 0, "control"),  # rank 1 receives
        ("all_gather_object", 4, "obj", "control"),
        ("RankContext.broadcast_object", "obj", 0),
        ("RankContext.all_gather_object", "obj"),
    ]
