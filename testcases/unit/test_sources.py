"""House rules of the sources that a linter does not check."""

from __future__ import annotations

import re

from testcases import ROOT

SOURCE_DIRS = ("harness", "contract", "implementations", "tools", "testcases", "scripts")
PEP604_OPTIONAL = re.compile(r"\|\s*None\b|\bNone\s*\|")


def optional_spelled_with_a_bar(text: str) -> list[int]:
    """Line numbers where an optional type is written ``X | None`` (the sources write ``Optional[X]``: OmegaConf
    2.3's structured configs need it, and one spelling reads better than two)."""
    return [n for n, line in enumerate(text.splitlines(), 1)
            if PEP604_OPTIONAL.search(line.split("#", 1)[0]) and not line.lstrip().startswith(("\"", "'"))]


def test_optional_types_have_one_spelling():
    found = [f"{path.relative_to(ROOT)}:{n}" for d in SOURCE_DIRS for path in sorted((ROOT / d).rglob("*.py"))
             if path.name != "test_sources.py" for n in optional_spelled_with_a_bar(path.read_text(encoding="utf-8"))]
    assert found == [], f"write Optional[X], not X | None: {', '.join(found[:10])}"


def test_the_spelling_check_sees_a_bar_optional():
    assert optional_spelled_with_a_bar("def f(x: int | None = None) -> None:\n    pass\n") == [1]
    assert optional_spelled_with_a_bar("def f(x: Optional[int] = None) -> None:\n    y = a or None\n") == []
