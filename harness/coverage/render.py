"""The coverage tables as Markdown, and the recorded first catches as JSON (atomic writes)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from harness.app.atomic import write_atomic

BEGIN, END = "<!-- coverage:{} begin (generated: {}) -->", "<!-- coverage:{} end -->"
SOURCES = {"fields": "python -m harness.coverage fields --record",
           "rules": "python -m harness.coverage tables, from harness/coverage/rules.py and the recorded first catches"}


def field_table(found: dict) -> str:
    from harness.coverage.fields import DP
    from implementations.mutants.fields import LABELS, field_ids

    def where(key: str) -> str:
        e = found.get(key)
        return f"{e['tc']} [{e['case']}]" if e else "**no case catches it**"

    lines = ["| field | first catching case (TC [case]) | at dp > 1 | what the check reported |",
             "|---|---|---|---|"]
    for f in field_ids():
        detail = (found.get(f) or {}).get("detail", "").replace("|", "\\|")[:140]
        dp = where(f + DP) if f + DP in found else "·"
        lines.append(f"| `{f}` | {where(f)} | {dp} | {detail} |")
    lines += [f"| `{f}` | not a fact ({why}) | | |" for f, why in LABELS.items()]
    return "\n".join(lines) + "\n"


def write_record(path: Path, found: dict) -> None:
    slim = {f: ({"tc": e["tc"], "case": e["case"], "detail": e.get("detail", "")[:160]} if e else None)
            for f, e in sorted(found.items())}
    write_atomic(path, json.dumps(slim, indent=1, sort_keys=True) + "\n")


def write_section(page: Path, name: str, body: str) -> None:
    """Replace the generated section ``name`` of ``page`` (appended when the page lacks it)."""
    begin, end = BEGIN.format(name, SOURCES[name]), END.format(name)
    text = page.read_text() if page.is_file() else ""
    block = f"{begin}\n{body}{end}\n"
    pattern = re.compile(re.escape(f"<!-- coverage:{name} begin") + r".*?" + re.escape(end) + r"\n?", re.S)
    text = pattern.sub(lambda _: block, text) if pattern.search(text) else text + ("\n" if text else "") + block
    write_atomic(page, text)
