"""The Allure report of a real, small run of the TC suites: TC-01..TC-07 appear with their statuses.

One pytest subprocess runs the smoke matrix narrowed to DeepSeek-V3.2 for the reference
(every TC passes) and for a mutant that skips the layout digest check (TC-04 must fail,
as a product defect), then the pinned Allure CLI builds the single-file report and the
test reads the report's own embedded data back.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from harness.reporting import report

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
    """A parameter's value (allure-pytest stores the repr of a string, quotes included)."""
    value = next((p["value"] for p in case.get("parameters", []) if p["name"] == name), None)
    return value.strip("'") if value else value


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

    page = report.generate(results, tmp_path / "report", cli=cli).read_text()
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
