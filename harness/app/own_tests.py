"""A C++ tree's own tests beside the TCs' verdicts in a job's result, its results.md row and Allure.

When a job's implementation is a C++ tree whose manifest names its own GoogleTest file (the
manifest's ``tests``; ``implementations.xllm_native.runtime.own_tests`` builds and runs it in a child
process), the job records what it reported, once per tree and manifest in a process (the jobs of
a sweep share the result), and adds it to the job's Allure results as a test of its own. A tree
whose tests cannot be built or run is recorded as such; the job's TCs are judged all the same.
"""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Optional

from contract.errors import ImplementationFailure, UserError
from implementations.xllm_native.runtime.own_tests import run

RUN: dict = {}
"""(tree, manifest) -> what its own tests reported in this process (a test starts it empty)."""


def own_tests_of(impl) -> Optional[dict]:
    """``{"file", "total", "passed", "failed", "exit_problem", "summary"}`` of ``impl``'s tree's own tests (``summary`` says
    why when they could not be run); None when ``impl`` is no C++ tree or its manifest names no test file."""
    asked = getattr(impl, "facts", None)  # the C++ wing's adapter says what its tree is (``facts()``)
    facts = asked() if callable(asked) else None
    if facts is None or facts.own_tests is None:
        return None
    key = (str(facts.root), str(facts.manifest_path))
    if key not in RUN:
        RUN[key] = run_own_tests(*key, file=facts.own_tests)
    return RUN[key]


def run_own_tests(root: str, manifest: str, *, file: str) -> dict:
    """Build and run the tree's own tests (``own_tests.run``); a tree whose tests cannot be built or run
    is a result saying why, not an error of the job."""
    try:
        found = run(root, manifest)
    except (UserError, ImplementationFailure) as exc:
        return {"file": file, "total": None, "passed": None, "failed": [],
                "summary": f"its own tests ({file}) could not be run: {exc}"}
    if found is None:
        return {"file": file, "total": None, "passed": None, "failed": [], "summary": "its manifest names no test file"}
    return {"file": found.file, "total": found.total, "passed": found.passed, "failed": list(found.failed),
            "exit_problem": found.exit_problem, "summary": found.summary()}


def verdict(own: dict) -> str:
    """``pass`` when every test ran and passed and the binary ended well, ``fail`` when one failed or it
    ended badly (a signal, an abort at exit: ``exit_problem``), ``not run`` otherwise."""
    if own.get("total") is None:
        return "not run"
    ok = not own.get("failed") and own.get("passed") == own.get("total") and not own.get("exit_problem")
    return "pass" if ok else "fail"


def write_allure(own: dict, alluredir: Path, *, tree: str) -> Optional[Path]:
    """One Allure result for the tree's own tests in ``alluredir`` (when the folder exists); its path."""
    if not alluredir.is_dir():
        return None
    status = {"pass": "passed", "fail": "failed"}.get(verdict(own), "broken")
    now = int(time.time() * 1000)
    result = {
        "uuid": str(uuid.uuid4()), "name": f"its own tests ({own['file']})", "fullName": f"{tree}::own_tests",
        "historyId": f"own_tests:{tree}:{own['file']}", "status": status, "stage": "finished",
        "statusDetails": {"message": own["summary"]}, "description": own["summary"], "start": now, "stop": now,
        "labels": [{"name": "parentSuite", "value": "the tree's own tests"}, {"name": "suite", "value": tree},
                   {"name": "tag", "value": "own_tests"}],
    }
    path = alluredir / f"{result['uuid']}-result.json"
    path.write_text(json.dumps(result), encoding="utf-8")
    return path
