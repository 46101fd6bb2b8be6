"""Allure labels and attachments for one TC case (called by the pytest plugin)."""

from __future__ import annotations

import os
import re
from functools import cache
from typing import Optional

import allure

from harness.paths import FEATURE_DOC
from harness.rankpool.errors import RankFailure
from harness.reporting import attachments
from harness.reporting.categories import CAUSE_LABEL, ORIGIN_LABEL, XPASS_LABEL, failure_origin

COMPONENTS = {
    "TC-01": "Layerwise allocation",
    "TC-02": "Memory estimation",
    "TC-03": "ILU topology mapping",
    "TC-04": "Engine integration",
    "TC-05": "Worker init",
    "TC-06": "Config flag",
    "TC-07": "Speculative engine",
}
SEVERITY = {"L1": "critical", "L2": "normal"}
EPIC = "Layerwise split KV cache sharding"
SELF_TEST_EPIC = "Harness self-tests"
"""Unit and meta tests (the harness testing itself) stay apart from the TCs."""
TC_PARENT_SUITE = "TC suites"
REFERENCE = "reference"
"""The implementation whose cases represent a TC in the report."""
UPSTREAM_PR = "https://github.com/xLLM-AI/xllm/pull/2260"
FEATURE_SECTIONS = {
    "TC-01": (4, 7), "TC-02": (5, 6), "TC-03": (4, 9), "TC-04": (8,), "TC-05": (8,), "TC-06": (2,), "TC-07": (6,),
}
"""The FEATURE.md sections each TC checks (section 10 is the test plan of all of them)."""
FEATURE_URL_ENV = "LW_FEATURE_URL"
"""Where the report links FEATURE.md (a published copy); default ``FEATURE.md`` beside the report
(``harness.reporting.report`` copies it there). Allure shows http(s) and relative links only."""


class Shown:
    """A parameter value allure-pytest shows as it is (it quotes ``str`` values: ``'4'``)."""

    def __init__(self, value) -> None:
        self.text = str(value)

    def __repr__(self) -> str:
        return self.text


def feature_name(tc: str) -> str:
    """``TC-01 Layerwise allocation``: the TC number first, so Behaviors lists TCs in order."""
    return f"{tc} {COMPONENTS[tc]}"


def _slug(heading: str) -> str:
    """GitHub's anchor of a Markdown heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


@cache
def feature_anchors() -> dict[int, str]:
    """Section number -> anchor, read from FEATURE.md's headings (empty when the file is not here)."""
    try:
        text = FEATURE_DOC.read_text(encoding="utf-8")
    except OSError:
        return {}
    out = {}
    for match in re.finditer(r"^## (\d+)\. (.+)$", text, re.M):
        out[int(match.group(1))] = _slug(f"{match.group(1)}. {match.group(2)}")
    return out


def feature_links(tc: str, base: Optional[str] = None) -> list[tuple[str, str]]:
    """(name, url) of the FEATURE sections a TC checks, then the test plan's row."""
    base = base or os.environ.get(FEATURE_URL_ENV) or FEATURE_DOC.name
    anchors = feature_anchors()
    out = []
    for section in (*FEATURE_SECTIONS[tc], 10):
        anchor = anchors.get(section, f"section-{section}")
        out.append((f"FEATURE section {section}" + (" (test plan)" if section == 10 else ""), f"{base}#{anchor}"))
    return out


def apply(case, suite, resolved) -> None:
    """Labels, links and parameters, at fixture setup. Title and description go in ``apply_title``:
    allure-pytest rewrites both when setup ends."""
    allure.dynamic.parameter("lw_case", case.id, mode=allure.parameter_mode.HIDDEN)
    allure.dynamic.id(suite.TC)
    allure.dynamic.epic(EPIC)
    allure.dynamic.feature(feature_name(suite.TC))
    allure.dynamic.story(f"{suite.TC} {suite.TITLE}")
    allure.dynamic.parent_suite(TC_PARENT_SUITE)
    allure.dynamic.suite(feature_name(suite.TC))
    allure.dynamic.severity(SEVERITY[suite.LEVEL])
    allure.dynamic.tag(suite.LEVEL)
    for name, url in feature_links(suite.TC):
        allure.dynamic.link(url, name=name)
    allure.dynamic.link(UPSTREAM_PR, name="upstream PR #2260")
    run = resolved.run
    for name, value in (
        ("model", case.model),
        ("split size", resolved.split_size if resolved.enable else f"off ({resolved.split_size})"),
        ("world size", resolved.world_size),
        ("dp size", resolved.dp_size),
        ("variant", case.variant or "none"),
        ("backend", resolved.backend),
        ("implementation", case.implementation),
        ("hardware", case.hardware),
        ("topology", run.hardware.topology.name),
        ("draft", case.draft),
    ):
        allure.dynamic.parameter(name, Shown(value))


def self_test_markers(item) -> list:
    """Allure label marks for a unit or meta test (none for anything else): epic, feature per folder."""
    parts = item.nodeid.split("::", 1)[0].split("/")
    if len(parts) < 3 or parts[0] != "testcases" or parts[1] not in ("unit", "meta"):
        return []
    module = parts[-1].rsplit(".", 1)[0]
    kind = "Unit tests" if parts[1] == "unit" else "Meta tests"
    return [allure.epic(SELF_TEST_EPIC), allure.feature(kind), allure.story(module),
            allure.parent_suite(SELF_TEST_EPIC), allure.suite(kind)]


def apply_title(case, suite) -> None:
    """Called in the call phase, after allure-pytest has named the test from its node id."""
    allure.dynamic.title(case.title)
    allure.dynamic.description(summary_of(suite.description))


def summary_of(doc: str) -> str:
    """The docstring's first paragraph: what a passing case shows (the whole one on failure)."""
    return doc.strip().split("\n\n", 1)[0]


def mark_xpass(reason: str) -> None:
    """Label a strict expected failure that passed (allure-pytest gives it no message)."""
    allure.dynamic.label(XPASS_LABEL, reason)


NOT_JUDGED = "not judged"
"""The tag and attachment name of a case whose implementation gave some of its TC's checks nothing to judge."""


def mark_not_judged(notes) -> None:
    """A case with checks not judged (``Suite.not_judged``): tagged, and each note, saying why, attached as text
    (the description is the TC's, the same for every case)."""
    allure.dynamic.tag(NOT_JUDGED)
    allure.attach("\n".join(notes), name=NOT_JUDGED, attachment_type=allure.attachment_type.TEXT)


def mark_origin(exc: BaseException) -> None:
    """Label a failed test with where its exception came from (``results.failure_origin``), decided
    here, from the exception, so the report never reads it back from the traceback's text."""
    origin = failure_origin(exc)
    allure.dynamic.label(ORIGIN_LABEL, origin.where or "")
    allure.dynamic.label(CAUSE_LABEL, origin.cause)


def representatives(cases) -> set[tuple[str, str]]:
    """(TC, case id) of one case per TC (its first reference case in collection order, else its first)
    whose passing result carries
    the heavy attachments too, so a reviewer sees a layout and a chart per TC without bloating the
    report. Every process of an xdist run collects the same order, so all pick the same cases."""
    cases = list(cases)
    out: dict[str, str] = {}
    for case in cases:  # a reference case first: it shows what the spec's layout looks like
        if case.implementation == REFERENCE:
            out.setdefault(case.tc, case.id)
    for case in cases:
        out.setdefault(case.tc, case.id)
    return set(out.items())


def attach_results(item, case, facts, report, excinfo=None, *, representative: bool = False) -> None:
    """On failure (an expected one too) and for a representative case: the composed config, the
    layout tables and the memory chart; on a rank failure the failing rank's log and one attachment
    with the other ranks'. A passing case carries none (the single-file report stays small)."""
    expected = bool(getattr(report, "wasxfail", ""))  # a known finding: its layout says it, once per case
    failed = not expected and (report.failed or (excinfo is not None and not report.skipped))
    suite = item.module.SUITE
    if failed or representative:
        allure.dynamic.description(suite.description)
        attachments.attach_config(case.resolved.config_yaml)
    if not (failed or representative or expected):
        return
    view = suite.report_view(facts) if facts and hasattr(suite, "report_view") else None
    if view:
        if view.get("layout"):
            attachments.attach_layout(view["layout"], csv=failed)
        if view.get("draft_layout"):
            attachments.attach_layout(view["draft_layout"], name="draft layout", csv=failed)
        if view.get("memory") and not expected:
            attachments.attach_memory_chart(**view["memory"])

    error = excinfo.value if excinfo is not None else None
    if failed and isinstance(error, RankFailure) and error.rank_errors:
        attachments.attach_rank_failure(error.rank_errors, error.failed_rank, error.other_ranks)
