"""``python -m tools.bench.explore``: bad input is one error line (its --docs block is tools.docs_blocks's)."""

from __future__ import annotations

import pytest

from tools.bench import explore as bench


def test_bad_example_count_is_one_error_line(capsys):
    with pytest.raises(SystemExit) as exc:
        bench.main(["--plan-examples", "0"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --plan-examples: 0") and err.count("\n") == 1


def test_against_an_unknown_commit_is_one_error_line(capsys):
    with pytest.raises(SystemExit) as exc:
        bench.main(["--against", "no-such-commit-anywhere"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --against") and err.count("\n") == 1, err


def test_a_repeat_below_one_is_one_error_line(capsys):
    with pytest.raises(SystemExit) as exc:
        bench.main(["--against", "HEAD", "--repeat", "0"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --repeat: 0; allowed: a whole number >= 1") and err.count("\n") == 1, err


def test_each_level_keeps_its_best_run_and_the_ratios_are_per_level():
    """Load only ever slows a run: per level the run with the highest rate is kept, whichever run it was."""
    run_a = [("plan", "1000", "0.80", "1250", "243", "1700", ">= 500: met"),
             ("with allocation", "200", "0.60", "333", "41", "300", ">= 20: met")]
    run_b = [("plan", "1000", "0.50", "2000", "243", "2600", ">= 500: met"),
             ("with allocation", "200", "0.80", "250", "41", "240", ">= 20: met")]
    assert bench.best_rows([run_a, run_b]) == [run_b[0], run_a[1]]
    before = [("plan", "1000", "2.00", "500", "245", "1000", ">= 500: met"),
              ("with allocation", "200", "1.33", "150", "56", "160", ">= 20: met")]
    note = bench.against_note(before, bench.best_rows([run_a, run_b]), "d602be1b4fa9xx", 2)
    assert note.startswith("now / before (d602be1b4fa9) in configurations per CPU s: plan 4.00x, "
                           "with allocation 2.22x (each side's best of 2 runs"), note
