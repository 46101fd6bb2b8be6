"""The Allure report of a real, small run of the TC suites: TC-01..TC-07 appear with their statuses.

One pytest subprocess runs the smoke matrix narrowed to DeepSeek-V3.2 for the reference
(every TC passes) and for a mutant that skips the layout digest check (TC-04 must fail,
as a product defect), then the pinned Allure CLI builds the single-file report twice
(the second one with the first one's trend) and the test reads the report's own
embedded data back; with Chromium installed, a real browser opens it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from harness.reporting import allure_labels, browser, report

pytestmark = pytest.mark.meta
REPO = Path(__file__).resolve().parents[2]
TCS = [f"TC-0{n}" for n in range(1, 8)]
MUTANT = "mutant_digest_unchecked"


def _cases_by_tc(index_html: str) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for path, data in report.embedded_files(index_html).items():
        if path.startswith("data/test-cases/"):
            case = json.loads(data)
            for label in case["labels"]:
                if label["name"] == "as_id":
                    out.setdefault(label["value"], []).append(case)
    return out


def _param(case: dict, name: str) -> str | None:
    return next((p["value"] for p in case.get("parameters", []) if p["name"] == name), None)


def _label(case: dict, name: str) -> str | None:
    return next((l["value"] for l in case["labels"] if l["name"] == name), None)


def test_report_shows_every_tc_with_its_status(tmp_path):
    cli = report.find_cli()
    if cli is None:
        pytest.skip("Allure CLI not installed (bash scripts/install_allure.sh; needs Node and Java)")
    results = tmp_path / "allure-results"
    argv = [sys.executable, "-m", "pytest", "testcases/tc", "--lw-matrix", "smoke",
            "--lw-override", "model=deepseek_v32", "--lw-override", f"implementation=reference,{MUTANT}",
            "-k", "not cp2 and not spec_w8 and not w8", f"--alluredir={results}", "-q", "-p", "no:cacheprovider"]
    run = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert run.returncode == 1, (run.stdout + run.stderr)[-3000:]  # the mutant's TC-04 cases fail
    assert (results / "environment.properties").is_file() and (results / "categories.json").is_file()

    history = tmp_path / "allure-history"
    report.generate(results, tmp_path / "report", cli=cli, history=history)
    index = report.generate(results, tmp_path / "report", cli=cli, history=history)
    page = index.read_text()
    files = report.embedded_files(page)
    assert len(json.loads(files["widgets/history-trend.json"])) == 2  # the first report is the trend's first point
    assert json.loads(files["widgets/summary.json"])["reportName"] == report.REPORT_NAME
    cases = _cases_by_tc(page)
    assert sorted(cases) == TCS
    for tc in TCS:
        by_impl = {}
        for case in cases[tc]:
            by_impl.setdefault(_param(case, "implementation"), set()).add(case["status"])
        assert by_impl.get("reference") == {"passed"}, (tc, by_impl)
        expected = {"failed"} if tc == "TC-04" else {"passed"}
        assert by_impl.get(MUTANT) == expected, (tc, by_impl)
    failed = [c for c in cases["TC-04"] if c["status"] == "failed"]
    categories = [[k["name"] for k in c["extra"].get("categories", [])] for c in failed]
    assert categories and all(names == ["Product defect"] for names in categories), categories
    titles = [c["name"] for c in cases["TC-04"]]
    assert all(t.startswith("TC-04[deepseek_v32-") for t in titles), titles
    assert len({c["statusMessage"] for c in failed}) == 1  # like cases, one message: one group in the category
    for tc in TCS:
        case = cases[tc][0]
        assert _label(case, "feature") == allure_labels.feature_name(tc)
        assert _param(case, "model") == "deepseek_v32" and _param(case, "world size").isdigit()  # unquoted
        assert _param(case, "variant") is not None
        links = {l["name"]: l["url"] for l in case.get("links", [])}
        assert links["upstream PR #2260"] == allure_labels.UPSTREAM_PR
        assert any(name.startswith("FEATURE section") for name in links)
    features = [c["name"] for c in json.loads(files["data/behaviors.json"])["children"][0]["children"]]
    assert features == sorted(features) and features[0].startswith("TC-01")
    # attachments only where they help: failures and one representative case per TC
    heavy = [c["name"] for cs in cases.values() for c in cs if c["status"] == "passed"
             and any(a["name"] == "layout (table)" for a in (c.get("testStage") or {}).get("attachments", []))]
    assert 0 < len(heavy) <= len(TCS), heavy

    chromium = browser.find_chromium()
    if chromium is None:
        pytest.skip("Chromium not installed (apt-get install -y chromium): the browser check did not run")
    lines, problems = browser.check_report(index, tmp_path / "shots", chromium)
    assert not problems, problems
    assert len(lines) == 3 and "TC-04" in lines[2] and (tmp_path / "shots" / "categories.png").is_file()
