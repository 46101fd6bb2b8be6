"""Allure results as a report reads them: each failure filed by its origin, with a stable message.

pytest writes one ``*-result.json`` per test (allure-pytest). Before the CLI builds the
report, ``prepare`` copies the results into a staging folder and, per result that did
not pass:

- decides the category (``classify``): a failed check, or an exception whose innermost
  frame inside this repository is under ``implementations/`` (the code under test), is a
  product defect; any other exception (harness, test code, the rank runner) is a harness
  error; an expected failure the spec predicts and an unexpected (strict) pass of one
  have their own categories;
- shortens the status message to one line that is the same for like cases (numbers
  and lists become ``N`` and ``[...]``, ``TC-04: ...`` in front), and moves the case's
  own detail to the top of the trace, under a ``category: ...`` line that
  ``categories.json`` matches (Allure groups a category's tests by their message).

Then it adds ``categories.json``, ``executor.json`` and the previous report's
``history/`` (trend widgets). The results pytest wrote are left as they are.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple, Optional, Union

from harness.reporting.allure_meta import UPSTREAM_RULE_MARKER, categories_json

PRODUCT, HARNESS, XFAIL, XPASS = "product defect", "harness error", "expected failure", "unexpected pass"
XPASS_LABEL = "xpass_strict"
"""Label the pytest plugin puts on a strict expected failure that passed (its value: the reason)."""

_PY_FRAME = re.compile(r'File "([^"]+)", line (\d+)')
_PYTEST_FRAME = re.compile(r"^(\S+\.py):(\d+): ", re.M)
_MARKED = re.compile(r"^>>> (.*): the failure <<<$", re.M)
_NUMBER = re.compile(r"(?<![A-Za-z_])-?\d+(?:\.\d+)?(?:e[+-]?\d+)?")
_LIST = re.compile(r"\[[^\[\]]*\]")
_EXCEPTION_LINE = re.compile(r"^(?:[a-z_]\w*\.)*[A-Z]\w*(?::\s.*)?$")
"""``ValueError: boom``, ``implementations.faults.faulty.InjectedFault: ...``, ``KeyboardInterrupt``."""
_REPO_DIRS = ("implementations/", "harness/", "testcases/")


class Verdict(NamedTuple):
    category: Optional[str]
    message: str
    detail: str
    """What the trace starts with: the category line, then the case's own words."""


def template(text: str, limit: int = 200) -> str:
    """``rank 3 owns [1, 5], spec says [3]`` -> ``rank N owns [...], spec says [...]``."""
    line = _NUMBER.sub("N", _LIST.sub("[...]", " ".join(text.split())))
    return line if len(line) <= limit else line[: limit - 3] + "..."


def innermost_repo_frame(text: str) -> Optional[str]:
    """``implementations/reference/layout.py:42`` for the innermost frame inside the repository.

    Python tracebacks list the innermost frame last, faulthandler dumps ("most recent
    call first") first; pytest's long form names each frame ``path.py:line: ...``.
    """
    frames = [(m.group(1), m.group(2)) for m in _PY_FRAME.finditer(text)]
    if "most recent call first" in text:
        frames.reverse()
    frames += [(m.group(1), m.group(2)) for m in _PYTEST_FRAME.finditer(text)] if not frames else []
    for path, line in reversed(frames):
        rel = _repo_relative(path)
        if rel is not None:
            return f"{rel}:{line}"
    return None


def _repo_relative(path: str) -> Optional[str]:
    path = path.replace("\\", "/")
    if "site-packages/" in path or "/lib/python" in path:
        return None
    for root in _REPO_DIRS:
        at = path.find(root)
        if at == 0 or (at > 0 and path[at - 1] == "/"):
            return path[at:]
    return None


def _exception_line(text: str) -> str:
    """The last line that names an exception (``ValueError: boom``), else the last non-empty line."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    for line in reversed(lines):
        if _EXCEPTION_LINE.match(line):
            return line
    return lines[-1] if lines else ""


def _short_type(line: str) -> str:
    """``harness.rankpool.errors.RankFailure: x`` -> ``RankFailure: x``."""
    head, sep, rest = line.partition(": ")
    return head.rsplit(".", 1)[-1] + sep + rest


def classify(status: str, message: str, trace: str, *, tc: str, xpass_reason: Optional[str] = None) -> Verdict:
    """The category of one non-passing result, its stable message and its detail (see the module doc)."""
    message, trace = message or "", trace or ""
    prefix = f"{tc}: " if tc else ""
    if xpass_reason is not None:
        return Verdict(XPASS, f"{prefix}XPASS(strict) {template(xpass_reason)}",
                       f"category: {XPASS}: the implementation passed a case the spec expects it to fail "
                       f"({xpass_reason})")
    if status == "skipped" and message.startswith("XFAIL"):
        reason, _, rest = message.partition("\n\n")
        category = XFAIL if UPSTREAM_RULE_MARKER in reason else None
        # the reason is the expectation's own fixed text: kept whole (only the assertion is per case)
        return Verdict(category, f"{prefix}{' '.join(reason.split())}", f"category: {category or 'expected failure'}\n{rest}")
    if status == "failed":
        body = message.split(": ", 1)[1] if message.startswith("AssertionError") and ": " in message else message
        problems = [line for line in body.splitlines() if line.strip() and not line.startswith("assert ")]
        first = problems[0] if problems else body
        return Verdict(PRODUCT, f"{prefix}check failed: {template(first)}",
                       f"category: {PRODUCT}: a check of the implementation failed\n{message}")
    if status == "broken":
        marked = _MARKED.search(message)
        if marked:  # a rank's failure (RankFailure / RankTimeout): its own section decides
            section = message[marked.end():]
            where = innermost_repo_frame(section)
            cause = f"{marked.group(1)}: {_short_type(_exception_line(section))}"
        else:
            where = innermost_repo_frame(message + "\n" + trace)
            cause = _short_type(message.splitlines()[0] if message else "")
        product = where is not None and where.startswith("implementations/")
        category = PRODUCT if product else HARNESS
        origin = where.rsplit(":", 1)[0] if where else "outside the repository"
        why = (f"raised by the implementation under test at {where}" if product else
               f"raised in harness code at {where}" if where else "raised outside the repository (no frame of ours)")
        return Verdict(category, f"{prefix}{template(cause)} (in {origin})", f"category: {category}: {why}\n{message}")
    return Verdict(None, message, "")


def _label(result: Mapping[str, Any], name: str) -> Optional[str]:
    return next((l.get("value") for l in result.get("labels", []) if l.get("name") == name), None)


def rewrite(result: dict) -> dict:
    """One result with its message and trace as ``classify`` says (passed results unchanged)."""
    details = result.get("statusDetails") or {}
    xpass = _label(result, XPASS_LABEL)
    if result.get("status") in (None, "passed") and xpass is None:
        return result
    verdict = classify(result.get("status", ""), details.get("message", ""), details.get("trace", ""),
                       tc=_label(result, "as_id") or "", xpass_reason=xpass)
    if verdict.category is None and not verdict.detail:
        return result
    trace = details.get("trace") or ""
    result["statusDetails"] = {**details, "message": verdict.message,
                               "trace": verdict.detail + ("\n\n" + trace if trace else "")}
    return result


def _link_or_copy(src: str, dst: str) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


class ResultShapeError(ValueError):
    """A results file that is JSON, but not an Allure result object."""


def shape_problem(result: Any) -> Optional[str]:
    """What keeps ``result`` (parsed JSON) from being an Allure result ``rewrite`` can read, or None."""
    if not isinstance(result, dict):
        return f"a JSON object, got {type(result).__name__}"
    labels = result.get("labels", [])
    if not isinstance(labels, list) or not all(isinstance(label, dict) for label in labels):
        return f"labels: a list of {{name, value}} objects, got {type(labels).__name__}"
    details = result.get("statusDetails")
    if details is not None and not isinstance(details, dict):
        return f"statusDetails: an object, got {type(details).__name__}"
    for key in ("message", "trace"):
        if details and details.get(key) is not None and not isinstance(details[key], str):
            return f"statusDetails.{key}: a string, got {type(details[key]).__name__}"
    if result.get("status") is not None and not isinstance(result["status"], str):
        return f"status: a string, got {type(result['status']).__name__}"
    return None


def prepare(results: Union[Path, Sequence[Path]], staging: Path, *, history: Optional[Path] = None,
            executor: Optional[Mapping[str, Any]] = None) -> Path:
    """Copy ``results`` (one folder or several, merged) to ``staging`` (attachments linked), rewrite
    the results, add the extras."""
    for folder in [results] if isinstance(results, (str, Path)) else results:
        shutil.copytree(folder, staging, copy_function=_link_or_copy, ignore=shutil.ignore_patterns("history"),
                        dirs_exist_ok=True)
    for path in staging.glob("*-result.json"):
        try:
            result = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue  # a half-written file (a killed worker): Allure skips it as well
        problem = shape_problem(result)
        if problem:
            raise ResultShapeError(f"{path.name} is not an Allure result ({problem})")
        path.unlink()  # a link to pytest's file: write a new one, never through the link
        path.write_text(json.dumps(rewrite(result)), encoding="utf-8")
    (staging / "categories.json").unlink(missing_ok=True)
    (staging / "categories.json").write_text(categories_json(), encoding="utf-8")
    if history is not None and history.is_dir():
        shutil.copytree(history, staging / "history")
    if executor:
        (staging / "executor.json").write_text(json.dumps(dict(executor), indent=2), encoding="utf-8")
    return staging
