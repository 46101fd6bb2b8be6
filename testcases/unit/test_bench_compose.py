"""``python -m tools.bench.compose``: composition cost before and after a change, side by side."""

from __future__ import annotations

from pathlib import Path

import pytest

from tools.bench import compose as bench

pytestmark = pytest.mark.unit


def _sides(monkeypatch, tmp_path, digests):
    """``compare`` with the clone and the child processes replaced: each side's runs return ``digests[side]``."""
    monkeypatch.setattr(bench, "export_commit", lambda commit, into: tmp_path)
    calls = []

    def fake_run(tree, script, cases):
        calls.append((tree, script))
        if script is bench.HYDRA_CHILD:
            return {"wall_s": 0.5}
        side = "before" if tree == tmp_path else "now"
        return {"wall_s": 2.0 if side == "before" else 1.0, "cpu_s": 1.0, "digest": digests[side]}

    monkeypatch.setattr(bench, "run_side", fake_run)
    return calls


def test_the_sides_alternate_and_the_ratio_is_now_over_before(monkeypatch, tmp_path):
    calls = _sides(monkeypatch, tmp_path, {"before": "d", "now": "d"})
    result = bench.compare("c" * 40, [["model=a"]] * 20, repeat=2)
    assert [t for t, s in calls if s is bench.CHILD] == [tmp_path, bench.REPO_ROOT] * 2
    assert (result["wall_s"]["ratio"], result["cpu_s"]["ratio"]) == (0.5, 1.0)
    assert result["hydra_per_case_s"] == 0.5 / bench.HYDRA_CASES
    text = bench.render(result)
    assert "now/before = 0.50" in text and "20 cases" in text, text


def test_sides_that_compose_different_results_fail_the_bench(monkeypatch, tmp_path):
    _sides(monkeypatch, tmp_path, {"before": "old", "now": "new"})
    with pytest.raises(RuntimeError, match="different results"):
        bench.compare("c" * 40, [["model=a"]], repeat=1)


def test_a_side_that_imports_harness_from_elsewhere_fails(tmp_path):
    """The copy of the old commit must run its own code, not this checkout's."""
    with pytest.raises(RuntimeError, match="imported harness from"):
        bench.run_side(Path(tmp_path), 'import json; print(json.dumps({"module": "/elsewhere/harness/__init__.py"}))', [])
