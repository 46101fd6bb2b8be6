"""The Allure report of a real, small run of the TC suites: TC-01..TC-07 appear with their statuses.

One pytest subprocess runs a few cases of the smoke matrix on DeepSeek-V3.2 (``CASES``:
every TC, once for the reference, where every TC passes, and once for a mutant that
skips the layout digest check, where TC-04 must fail as a product defect; TC-04 twice,
so its failures are a group of like cases), then the pinned Allure CLI builds the
single-file report (with a trend history; two reports in a row are
``testcases/unit/test_reporting.py``'s) and the test reads the report's own embedded
data back; with Chromium installed, a real browser opens it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Optional

import pytest

from harness.reporting import allure_labels, report
from testcases import ROOT as REPO
from tools import report_browser

pytestmark = pytest.mark.meta

TCS = [f"TC-0{n}" for n in range(1, 8)]
MUTANT = "mutant_digest_unchecked"
IMPLEMENTATIONS = ("reference", MUTANT)
CASES = {  # TC: its test (module::function) and case ids on deepseek_v32, IMPL for the implementation
    "TC-01": ("test_tc01_allocation.py::test_tc01", ["s2-w4-IMPL"]),
    "TC-02": ("test_tc02_estimation.py::test_tc02", ["s2-w4-IMPL"]),
    "TC-03": ("test_tc03_topology.py::test_tc03", ["s2-w4-IMPL-pcie_2switch_8_interleaved"]),
    "TC-04": ("test_tc04_propagation.py::test_tc04", ["off-w4-IMPL", "s2-w4-IMPL"]),
    "TC-05": ("test_tc05_shard_application.py::test_tc05", ["s2-w4-IMPL"]),
    "TC-06": ("test_tc06_fallback.py::test_tc06", ["off-w4-IMPL"]),
    "TC-07": ("test_tc07_speculative.py::test_tc07", ["s2-w4-IMPL-deepseek_v32_mtp"]),
}


def _node_ids() -> list[str]:
    return [f"testcases/tc/{test}[deepseek_v32-{case.replace('IMPL', impl)}]"
            for test, ids in CASES.values() for case in ids for impl in IMPLEMENTATIONS]


def _cases_by_tc(index_html: str) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for path, data in report.embedded_files(index_html).items():
        if path.startswith("data/test-cases/"):
            case = json.loads(data)
            for label in case["labels"]:
                if label["name"] == "as_id":
                    out.setdefault(label["value"], []).append(case)
    return out


def _param(case: dict, name: str) -> Optional[str]:
    return next((p["value"] for p in case.get("parameters", []) if p["name"] == name), None)


def _label(case: dict, name: str) -> Optional[str]:
    return next((l["value"] for l in case["labels"] if l["name"] == name), None)


@pytest.mark.slow
def test_report_shows_every_tc_with_its_status(tmp_path):
    cli = report.find_cli()
    if cli is None:
        pytest.skip("Allure CLI not installed (bash scripts/install_allure.sh; needs Node and Java)")
    results = tmp_path / "allure-results"
    argv = [sys.executable, "-m", "pytest", *_node_ids(), "--lw-matrix", "smoke",
            "--lw-override", "model=deepseek_v32", "--lw-override", f"implementation={','.join(IMPLEMENTATIONS)}",
            f"--alluredir={results}", "-q", "-p", "no:cacheprovider"]
    run = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert run.returncode == 1, (run.stdout + run.stderr)[-3000:]  # the mutant's TC-04 cases fail
    assert (results / "environment.properties").is_file() and (results / "categories.json").is_file()

    history = tmp_path / "allure-history"
    index = report.generate(results, tmp_path / "report", cli=cli, history=history)
    page = index.read_text()
    files = report.embedded_files(page)
    # the trend's first point (two reports in a row, two points: testcases/unit/test_reporting.py)
    assert len(json.loads(files["widgets/history-trend.json"])) == 1 and (history / "history-trend.json").is_file()
    assert json.loads(files["widgets/summary.json"])["reportName"] == report.REPORT_NAME
    cases = _cases_by_tc(page)
    assert sorted(cases) == TCS == sorted(CASES)
    assert {tc: len(cs) for tc, cs in cases.items()} == {  # every case, each once (no retries)
        tc: len(ids) * len(IMPLEMENTATIONS) for tc, (_, ids) in CASES.items()}
    for tc in TCS:
        by_impl = {}
        for case in cases[tc]:
            by_impl.setdefault(_param(case, "implementation"), set()).add(case["status"])
        assert by_impl.get("reference") == {"passed"}, (tc, by_impl)
        expected = {"failed"} if tc == "TC-04" else {"passed"}
        assert by_impl.get(MUTANT) == expected, (tc, by_impl)
    failed = [c for c in cases["TC-04"] if c["status"] == "failed"]
    assert len(failed) == len(CASES["TC-04"][1]) >= 2  # two like failures, so one message means grouped
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
    assert len({name.split("[")[0] for name in heavy}) == len(heavy), heavy  # at most one per TC

    chromium = report_browser.find_chromium()
    if chromium is None:
        pytest.skip("Chromium not installed (apt-get install -y chromium): the browser check did not run")
    lines, problems = report_browser.check_report(index, tmp_path / "shots", chromium)
    assert not problems, problems
    assert len(lines) == 3 and "TC-04" in lines[2] and (tmp_path / "shots" / "categories.png").is_file()
