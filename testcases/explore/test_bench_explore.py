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
