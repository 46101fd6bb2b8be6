"""One machine-readable result per case (what sweeps aggregate)."""

from __future__ import annotations

from harness.suites import NOT_JUDGED
from harness.suites.expectations import predicted_as, prediction


def case_result(suite, case, report, facts) -> dict:
    resolved = case.resolved
    out = {
        "tc": suite.TC,
        "case": case.id,
        "title": case.title,
        "model": case.model,
        "implementation": case.implementation,
        "hardware": case.hardware,
        "split_size": resolved.split_size if resolved.enable else 1,
        "world_size": resolved.world_size,
        "outcome": _outcome(report),
        "duration_s": round(report.duration, 4),
    }
    predicted = prediction(suite.TC, predicted_as(case), resolved.run)
    if predicted is not None:
        out["predicted"] = predicted.reason  # judged against the spec's predicted problems
    if report.failed and report.longrepr is not None:
        out["message"] = str(report.longrepr)[-2000:]
        out["reason"] = first_reason(report)
    if facts:
        out.update(suite.summarize(facts))
        unjudged = suite.not_judged(facts)
        if unjudged:
            out[NOT_JUDGED] = list(unjudged)  # checks this case's implementation gave nothing to judge, and why
    return out


def first_reason(report) -> str:
    """The first line of what a failed case broke (its assertion's or exception's own words, with their
    figures): what a porting team reads first."""
    crash = getattr(report.longrepr, "reprcrash", None)
    text = getattr(crash, "message", None) or str(report.longrepr)
    for line in text.splitlines():
        line = line.strip()
        if line:
            return line.removeprefix("AssertionError: ")[:500]
    return ""


def _outcome(report) -> str:
    if hasattr(report, "wasxfail"):
        return "xfailed" if report.skipped else "xpassed"
    return report.outcome
