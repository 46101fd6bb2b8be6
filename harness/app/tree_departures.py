"""A C++ tree's departures from the spec, role by role, in a sweep job's result, its results.md and Allure.

A suite job whose implementation is a C++ tree judges each role the tree plays on the job's own configuration
(``harness.departures``), and once per tree and manifest in a process on TC-01's refusal cases; results.md
lists them per tree before the TC table, one line per distinct departure, and with ``suite.departures_against``
(a ``departures.json`` that ``harness.native_verdicts --out`` wrote, or a job's ``result.json``) says which are
new, gone and remaining. The job's Allure results get a test of their own holding the list.
"""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

from harness import departures, oracle

_REFUSALS: dict = {}
"""(tree, manifest) -> the refusal cases' list, judged once per process."""


def departures_of(impl, run) -> Optional[dict]:
    """The tree's list on ``run`` (and on TC-01's refusal cases) as JSON; None when ``impl`` is no C++ tree."""
    facts = getattr(impl, "facts", None)  # the C++ wing's adapter says what its tree is (``facts()``)
    if not callable(facts):
        return None
    # the refusal cases import the suites and torch (1 s, python -X importtime): only a C++ tree's job gets here
    from harness.departures import cases, judge

    s = oracle.split_size(run)
    case = judge.JudgedCase(id=f"{run.model.name}-{'s' + str(s) if s > 1 else 'off'}", run=run,
                            tcs=judge.case_tcs(s > 1, run.draft is not None))
    tree = facts()
    key = (str(tree.root), str(tree.manifest_path))
    if key not in _REFUSALS:
        _REFUSALS[key] = judge.judge(impl, cases.refusal_cases())
    found = departures.merge([judge.judge(impl, [case]), _REFUSALS[key]])[0]
    return departures.to_json([found])["trees"][0] | {"tree": tree.root.name}


def lines(results: Sequence[Mapping[str, Any]]) -> list[str]:
    """results.md's section: each tree's list (merged over the sweep's jobs), and the diff against the previous
    list a job was given (``departures_against``)."""
    found = [t for r in results if r.get("departures") for t in departures.from_json({"trees": [r["departures"]]})]
    if not found:
        return []
    merged = departures.merge(found)
    out = ["", "## Departures per tree (each role judged on its own)", "", departures.markdown(merged)]
    against = next((r.get("departures_against") for r in results if r.get("departures_against")), "")
    if against:
        try:
            before = departures.load(Path(against))
        except ValueError as exc:
            return out + [f"- no comparison: {exc}", ""]
        old = [d for t in before for d in t.departures]
        names = ", ".join(t.tree for t in before)
        out += [departures.diff_markdown(f"{names} ({against})", t.tree, departures.diff(old, t.departures))
                for t in merged]
    return out


def write_allure(found: dict, alluredir: Path) -> Optional[Path]:
    """One Allure result holding the tree's list in ``alluredir`` (when the folder exists); its path."""
    if not alluredir.is_dir():
        return None
    (tree,) = departures.from_json({"trees": [found]})
    text = departures.markdown([tree])
    now = int(time.time() * 1000)
    result = {
        "uuid": str(uuid.uuid4()), "name": f"departures of {tree.tree} (manifest {tree.manifest})",
        "fullName": f"{tree.tree}::departures", "historyId": f"departures:{tree.tree}:{tree.manifest}",
        "status": "failed" if tree.departures else "passed", "stage": "finished",
        "statusDetails": {"message": f"{len(tree.departures)} departures from the spec"}, "description": text,
        "start": now, "stop": now,
        "labels": [{"name": "parentSuite", "value": "departures per role"}, {"name": "suite", "value": tree.tree},
                   {"name": "tag", "value": "departures"}],
    }
    path = alluredir / f"{result['uuid']}-result.json"
    path.write_text(json.dumps(result), encoding="utf-8")
    return path
