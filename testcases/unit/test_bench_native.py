"""``python -m tools.bench.native``: its ratios to the goals and its argument checks (nothing is built)."""

from __future__ import annotations

import pytest

from tools.bench import native

pytestmark = pytest.mark.unit


def test_a_figure_is_its_ratio_to_the_goal():
    cold = native.Figure("cold", 12.0, native.COLD_GOAL_S)
    assert cold.ratio == pytest.approx(0.2) and cold.met
    assert cold.result() == "12.00 s (goal <= 60 s: 0.20 of it, met)"
    slow = native.Figure("warm", 1.5, native.WARM_GOAL_S)
    assert not slow.met and slow.result() == "1.50 s (goal <= 1 s: 1.50 of it, MISSED)"
    at_goal = native.Figure("warm", 1.0, native.WARM_GOAL_S)
    assert at_goal.met  # the goal is inclusive: <= 1 s
    matrix = native.Figure("matrix", native.matrix_ratio(90.0, 60.0), native.MATRIX_GOAL, unit="x")
    assert matrix.value == pytest.approx(1.5) and matrix.met
    assert matrix.result() == "1.50x (goal <= 1.5x: 1.00 of it, met)"
    assert native.Figure("matrix", native.matrix_ratio(100.0, 50.0), native.MATRIX_GOAL, unit="x").result() == (
        "2.00x (goal <= 1.5x: 1.33 of it, MISSED)")


@pytest.mark.parametrize("native_s, reference_s", [(0.0, 1.0), (1.0, 0.0), (-1.0, 2.0)])
def test_a_matrix_ratio_needs_positive_times(native_s, reference_s):
    with pytest.raises(ValueError, match="wall times must be positive"):
        native.matrix_ratio(native_s, reference_s)


def test_models_are_names_of_conf_model():
    assert native.check_models("qwen3_5_moe, deepseek_v32") == ("qwen3_5_moe", "deepseek_v32")
    for bad in ("nope", "", "qwen3_5_moe,nope"):
        with pytest.raises(ValueError, match="allowed: .*deepseek_v32"):
            native.check_models(bad)


@pytest.mark.parametrize("args, says", [
    (["--jobs", "0"], "error: --jobs=0: a whole number >= 1"),
    (["--models", "nope"], "error: --models='nope': comma-separated model names, allowed: "),
    (["--timeout", "0"], "error: --timeout=0.0: a number of seconds > 0"),
])
def test_bad_arguments_are_one_error_line_and_exit_2(tmp_path, capsys, args, says):
    with pytest.raises(SystemExit) as exit_:
        native.main(["--tree", str(tmp_path), "--no-matrix", *args])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(says) and len(err.strip().splitlines()) == 1


def test_a_tree_that_is_not_a_folder_is_named(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        native.main(["--tree", str(tmp_path / "missing"), "--no-matrix"])
    assert exit_.value.code == 2
    assert capsys.readouterr().err.startswith(f"error: --tree='{tmp_path / 'missing'}': an existing folder")
