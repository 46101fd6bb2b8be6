"""``python -m harness.bench.explore``: bad input is one error line; the docs block is replaced in place."""

from __future__ import annotations

import pytest

from harness.bench import explore as bench


def test_bad_example_count_is_one_error_line(capsys):
    with pytest.raises(SystemExit) as exc:
        bench.main(["--plan-examples", "0"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --plan-examples: 0") and err.count("\n") == 1


def test_write_docs_replaces_only_the_marked_block(tmp_path, capsys):
    page = tmp_path / "explore.md"
    page.write_text(f"# title\n\n{bench.MARK_BEGIN}\nold\n{bench.MARK_END}\n\nafter\n")
    bench.write_docs(str(page), ["plan | 1 | 2"], "somewhere")
    text = page.read_text()
    assert "old" not in text and "plan | 1 | 2" in text and text.startswith("# title") and text.endswith("after\n")
    page.write_text("no markers\n")
    with pytest.raises(SystemExit):
        bench.write_docs(str(page), ["x"], "somewhere")
    assert "has no" in capsys.readouterr().err and page.read_text() == "no markers\n"
