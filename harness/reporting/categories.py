"""Allure results as a report reads them: each failure filed by its origin, with a stable message.

pytest writes one ``*-result.json`` per test (allure-pytest). Before the CLI builds the
report, ``prepare`` copies the results into a staging folder and, per result that did
not pass:

- decides the category (``classify``): a failed check, or an exception whose innermost
  frame inside this repository is under ``implementations/`` (the code under test) or ``contract/``, is a
  product defect; any other exception (harness, test code, the rank runner) is a harness
  error; an expected failure the spec predicts and an unexpected (strict) pass of one
  have their own categories. Where an exception comes from is decided where it fails,
  from the exception itself (``failure_origin``: a rank's own exception or dump for a
  ``RankFailure``, else the traceback's frames), and carried in the result's labels
  (``ORIGIN_LABEL``, ``CAUSE_LABEL``; the pytest plugin sets them), never read back
  from the traceback's text;
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

from harness.rankpool.errors import Origin, RankFailure, origin_of
from harness.reporting.allure_meta import UPSTREAM_RULE_MARKER, categories_json

PRODUCT, HARNESS, XFAIL, XPASS = "product defect", "harness error", "expected failure", "unexpected pass"
XPASS_LABEL = "xpass_strict"
"""Label the pytest plugin puts on a strict expected failure that passed (its value: the reason)."""
ORIGIN_LABEL = "lw_origin"
"""Label of a failed test: the innermost frame of this repository's code it failed in ("" for none)."""
CAUSE_LABEL = "lw_cause"
"""Label of a failed test: its cause in one line (``rank 2 raised: ValueError: bad block 7``)."""

_NUMBER = re.compile(r"(?<![A-Za-z_])-?\d+(?:\.\d+)?(?:e[+-]?\d+)?")
_LIST = re.compile(r"\[[^\[\]]*\]")


class Verdict(NamedTuple):
    category: Optional[str]
    message: str
    detail: str
    """What the trace starts with: the category line, then the case's own words."""


def template(text: str, limit: int = 200) -> str:
    """``rank 3 owns [1, 5], spec says [3]`` -> ``rank N owns [...], spec says [...]``."""
    line = _NUMBER.sub("N", _LIST.sub("[...]", " ".join(text.split())))
    return line if len(line) <= limit else line[: limit - 3] + "..."


def failure_origin(exc: BaseException) -> Origin:
    """Where a test's exception comes from: for a rank failure (also one that caused ``exc``), the
    failing rank's own origin (``RankFailure.origin``, set by the pool); else ``exc``'s traceback."""
    seen, link = set(), exc
    while link is not None and id(link) not in seen:
        seen.add(id(link))
        if isinstance(link, RankFailure) and link.origin is not None:
            root = f"{link.root}: " if link.root else ""
            return Origin(where=link.origin.where, cause=f"{root}{link.origin.cause}")
        link = link.__cause__ or link.__context__
    return origin_of(exc)


def classify(status: str, message: str, trace: str, *, tc: str, xpass_reason: Optional[str] = None,
             origin: Optional[Origin] = None) -> Verdict:
    """The category of one non-passing result, its stable message and its detail (see the module doc);
    ``origin`` is where a broken result's exception came from (``failure_origin``)."""
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
        if origin is None:  # a result the harness's plugin did not see fail
            first = message.splitlines()[0] if message else ""
            return Verdict(HARNESS, f"{prefix}{template(first)} (origin not recorded)",
                           f"category: {HARNESS}: no origin was recorded where it failed\n{message}")
        where, cause, product = origin.where, origin.cause, origin.in_implementation
        category = PRODUCT if product else HARNESS
        file = where.rsplit(":", 1)[0] if where else "outside the repository"
        why = (f"raised by the implementation under test at {where}" if product else
               f"raised in harness code at {where}" if where else "raised outside the repository (no frame of ours)")
        return Verdict(category, f"{prefix}{template(cause)} (in {file})", f"category: {category}: {why}\n{message}")
    return Verdict(None, message, "")


def _label(result: Mapping[str, Any], name: str) -> Optional[str]:
    return next((l.get("value") for l in result.get("labels", []) if l.get("name") == name), None)


def rewrite(result: dict) -> dict:
    """One result with its message and trace as ``classify`` says (passed results unchanged)."""
    details = result.get("statusDetails") or {}
    xpass = _label(result, XPASS_LABEL)
    if result.get("status") in (None, "passed") and xpass is None:
        return result
    cause = _label(result, CAUSE_LABEL)
    origin = Origin(where=_label(result, ORIGIN_LABEL) or None, cause=cause) if cause is not None else None
    verdict = classify(result.get("status", ""), details.get("message", ""), details.get("trace", ""),
                       tc=_label(result, "as_id") or "", xpass_reason=xpass, origin=origin)
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
