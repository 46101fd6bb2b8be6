"""Sweep aggregation: rows, CSV, Markdown and PNG from hand-written job results (no Hydra run).

The sample numbers are FEATURE.md section 6's worked example (DeepSeek-V3.2 on 16 GiB
of KV per rank: one layer 180,224 B/block; 1562 blocks uniform, 2978 at s = 2, 5607
at s = 4; the s = 2 peak rank holds 31 owned layers + 1 scratch).
"""

from __future__ import annotations

import csv
import io
import itertools
import json
from pathlib import Path

import pytest

from harness.app import aggregate, callback, progress, status
from harness.app.figures import limit_layers
from harness.app.job import Outcomes, key_overrides, outcome_of, suite_summary, tc_of
from harness.files import write_atomic

pytestmark = pytest.mark.unit

LAYER = 180_224
MIB = 1024 * 1024
_SVG = "{http://www.w3.org/2000/svg}"


def _svg(text: str):
    import xml.etree.ElementTree as ET

    return ET.fromstring(text)
BI_V100 = {"hardware": "bi_v100", "hbm_mib_per_card": 32768, "reserved_mib_per_card": 16384,
           "block_size": 128, "kv_cache_dtype": "auto"}


def planned(num, s, n_blocks, owned_peak, impl="reference", model="deepseek_v32"):
    per_block = (owned_peak + (1 if s > 1 else 0)) * LAYER
    return {
        "job": {"num": num, "overrides": [f"model={model}", f"layerwise.split_size={s}"]},
        "mode": "plan", "status": "planned", "message": "", "duration_s": 0.1,
        "config": {"model": model, "implementation": impl, "parallel": "tp4", "layerwise": f"s{s}",
                   "split_size": s, "world_size": 4, **BI_V100},
        "plan": {"n_blocks": n_blocks, "uniform_n_blocks": 1562, "peak_bytes": n_blocks * per_block,
                 "uniform_peak_bytes": n_blocks * 61 * LAYER, "savings_bytes": n_blocks * (61 * LAYER - per_block),
                 "capacity_gain": n_blocks / 1562, "linear_state_bytes": 0, "full_layers": 61,
                 "same_capacity_peak_bytes": 1562 * per_block, "layer_bytes_per_block": LAYER,
                 "peak_layers": float(per_block // LAYER), "limit_layers": limit_layers(61, s)},
    }


def failed_suite_job(num=3):
    return {
        "job": {"num": num, "overrides": ["model=qwen3_5_moe", "implementation=mutant_owner_off_by_one"]},
        "mode": "suite", "status": "failed", "message": "", "duration_s": 4.1,
        "config": {"model": "qwen3_5_moe", "implementation": "mutant_owner_off_by_one", "parallel": "tp4",
                   "layerwise": "s2", "split_size": 2, "world_size": 4, "hardware": "cpu",
                   "hbm_mib_per_card": 512, "reserved_mib_per_card": 384, "block_size": 128,
                   "kv_cache_dtype": "auto"},
        "counts": {"passed": 5, "failed": 2},
        "plan": None, "plan_error": "",
    }


SAMPLES = [planned(2, 4, 5607, 15), planned(0, 1, 1562, 61), planned(1, 2, 2978, 31)]


def test_limit_is_full_layers_over_s_plus_one_scratch():
    assert limit_layers(61, 1) == 61          # uniform: every full layer
    assert limit_layers(61, 2) == 32          # FEATURE 6: 31 owned + scratch
    assert limit_layers(61, 4) == 17          # ceil(61 / 4) = 16 owned + scratch
    assert limit_layers(10, 2) == 6           # Qwen3.5: 10 full layers, 5 owned + scratch


def test_rows_sorted_by_split_size_with_the_plan_numbers():
    rows = aggregate.rows(SAMPLES)
    assert [r["split_size"] for r in rows] == [1, 2, 4]
    s2 = rows[1]
    # numbered from 1 (as the progress lines); the directory keeps Hydra's number
    assert (s2["job"], s2["job_dir"], s2["status"], s2["n_blocks"], s2["uniform_n_blocks"]) == (2, "1", "planned", 2978, 1562)
    assert s2["peak_bytes"] == 2978 * 32 * LAYER
    assert s2["kv_budget_bytes"] == 16384 * MIB
    assert (s2["peak_layers"], s2["limit_layers"]) == (32.0, 32)
    assert s2["passed"] is None  # plan mode has no test counts


def test_csv_has_every_column_and_the_numbers():
    text = aggregate.to_csv(aggregate.rows(SAMPLES + [failed_suite_job()]))
    table = list(csv.DictReader(io.StringIO(text)))
    assert list(table[0]) == list(aggregate.COLUMNS)
    by_job = {r["job"]: r for r in table}
    assert by_job["2"]["n_blocks"] == "2978" and by_job["3"]["n_blocks"] == "5607"
    assert float(by_job["2"]["capacity_gain"]) == pytest.approx(2978 / 1562)
    assert by_job["4"]["status"] == "failed" and by_job["4"]["job_dir"] == "3"
    assert (by_job["4"]["passed"], by_job["4"]["failed"]) == ("5", "2")
    assert by_job["4"]["n_blocks"] == ""


def _md_rows(text):
    lines = [l for l in text.splitlines() if l.startswith("|")]
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    return header, [dict(zip(header, (c.strip() for c in l.strip("|").split(" | ")))) for l in lines[2:]]


def test_markdown_table_cells_and_budget_line():
    text = aggregate.to_markdown(aggregate.rows(SAMPLES), SAMPLES, command="python -m harness -m x=1,2")
    assert "`python -m harness -m x=1,2`" in text
    assert "32,768 MiB per card, 16,384 MiB reserved" in text and "16,384 MiB of KV cache per rank" in text
    header, rows = _md_rows(text)
    assert "limit: full layers / s + 1 scratch (layers)" in header and "tests" not in header
    s2 = next(r for r in rows if r["s"] == "2")
    assert (s2["n_blocks"], s2["uniform n_blocks"], s2["capacity gain"]) == ("2978", "1562", "1.91x")
    assert (s2["peak (layers)"], s2["limit: full layers / s + 1 scratch (layers)"]) == ("32", "32")
    assert s2["peak KV MiB/rank"] == f"{2978 * 32 * LAYER / MIB:,.1f}"
    assert "3 jobs: 3 planned." in text
    assert text.startswith("# Sweep results: Iluvatar BI-V100, 16,384 MiB of KV per rank\n")
    assert [r["job"] for r in rows] == ["[1](0/)", "[2](1/)", "[3](2/)"]
    assert "Allure report" not in text
    linked = aggregate.to_markdown(aggregate.rows(SAMPLES), SAMPLES, allure_report="allure-report/index.html")
    assert "[allure-report/index.html](allure-report/index.html)" in linked


def test_a_failed_or_missing_job_is_a_row_with_its_status():
    missing = {"job": {"num": 4, "overrides": ["model=glm_moe_dsa"]}, "status": "missing",
               "message": "no result.json (the job died or was killed)"}
    results = SAMPLES + [failed_suite_job(), missing]
    rows = aggregate.rows(results)
    assert [r["job"] for r in aggregate.failed(rows)] == [4, 5]
    text = aggregate.to_markdown(rows, results)
    header, md = _md_rows(text)
    assert "tests" in header  # a suite job is in the sweep
    by_job = {r["job"]: r for r in md}
    assert by_job["[4](3/)"]["status"] == "**✗ failed**" and by_job["[4](3/)"]["tests"] == "2 failed, 5 passed"
    assert by_job["[5](4/)"]["status"] == "**✗ missing**" and "model=glm_moe_dsa" in by_job["[5](4/)"]["note"]
    assert by_job["[1](0/)"]["status"] == "planned"
    assert "1 failed" in text and "1 missing" in text
    assert "CPU simulation, 128 MiB of KV per rank" in text.splitlines()[0]


def test_chart_draws_each_series_on_both_panels_with_or_without_numbers():
    chart = _svg(aggregate.to_svg(aggregate.rows(SAMPLES)))
    lines = chart.findall(f"{_SVG}polyline[@class='series']")
    assert sorted(line.get("data-panel") for line in lines) == ["gain", "peak"]  # one model, one implementation
    assert len(lines[0].get("points").split()) == len(SAMPLES)  # a point per split size
    assert len(chart.findall(f"{_SVG}circle[@class='point']")) == 2 * len(SAMPLES)
    assert chart.find(f"{_SVG}line[@class='budget']") is not None and chart.find(f"{_SVG}text[@class='empty']") is None
    empty = _svg(aggregate.to_svg(aggregate.rows([failed_suite_job()])))
    assert not empty.findall(f"{_SVG}polyline[@class='series']")
    job = aggregate.rows([failed_suite_job()])[0]["job"]
    assert [m.get("data-job") for m in empty.findall(f"{_SVG}path[@class='failed']")] == [str(job)]
    assert "no numbers" in empty.find(f"{_SVG}text[@class='failed-note']").text


def test_chart_keeps_failed_jobs_and_names_hardware_and_budget():
    failing = dict(planned(3, 2, 2978, 31, impl="mutant_owner_off_by_one"), mode="suite", status="failed")
    rows = aggregate.rows(SAMPLES + [failing, failed_suite_job(5)])
    series = aggregate.chart_series(rows)
    line = series[("deepseek_v32", "mutant_owner_off_by_one", "bi_v100", "tp4")]
    assert [r["job"] for r in line] == [4], f"the failed job is its own line: {dict(series)}"
    assert aggregate.chart_title(rows, "KV") == (
        "KV: Iluvatar BI-V100, 16,384 MiB of KV per rank; CPU simulation, 128 MiB of KV per rank")
    s2 = next(r for r in rows if r["job"] == 2)
    assert aggregate.mib_at_uniform_blocks(s2, s2["limit_layers"]) == pytest.approx(32 * LAYER * 1562 / MIB), \
        "32 full layers at the uniform (s = 1) block count, 1562 blocks"
    chart = _svg(aggregate.to_svg(rows))
    assert sorted({m.get("data-job") for m in chart.findall(f"{_SVG}path[@class='failed']")}) == ["4", "6"]
    labels = {line.get("data-label") for line in chart.findall(f"{_SVG}polyline[@class='series']")}
    assert labels == {"deepseek_v32 (mutant_owner_off_by_one)", "deepseek_v32 (reference)"}  # the varying part named


def test_a_sweep_builds_one_combined_allure_report(tmp_path, monkeypatch):
    from harness.reporting import report

    jobs = []
    for num in (0, 1):
        folder = tmp_path / str(num) / "allure-results"
        folder.mkdir(parents=True)
        (folder / f"u{num}-result.json").write_text(json.dumps({"uuid": f"u{num}", "name": "t", "status": "passed"}))
        jobs.append({"job": {"num": num}, "allure_results": str(folder)})
    jobs.append({"job": {"num": 2}, "status": "missing"})
    cli = tmp_path / "fake-allure"  # records the folder it was given and writes an index
    cli.write_text('#!/bin/sh\nwhile [ $# -gt 1 ]; do [ "$1" = -o ] && out="$2"; shift; done\n'
                   'mkdir -p "$out" && ls "$1" > "$out/index.html"\n')
    cli.chmod(0o755)
    assert callback.combined_allure_report(tmp_path, jobs, cli=cli) == "allure-report/index.html"
    merged = (tmp_path / "allure-report" / "index.html").read_text().split()
    assert {"u0-result.json", "u1-result.json", "categories.json", "executor.json"} <= set(merged)
    assert callback.combined_allure_report(tmp_path, [{"job": {"num": 0}}]) == ""  # a plan sweep: none
    monkeypatch.setattr(report, "find_cli", lambda: None)
    assert callback.combined_allure_report(tmp_path, jobs) == ""  # no CLI: said, not raised


def test_pipes_in_a_message_do_not_break_the_table():
    bad = failed_suite_job()
    bad.update(status="error", message="a | b\nc")
    _, rows = _md_rows(aggregate.to_markdown(aggregate.rows([bad]), [bad]))
    assert rows[0]["note"] == "a \\| b c"


# ---- progress lines --------------------------------------------------------------------------


def test_progress_line_as_the_issue_shows_it():
    result = {"status": "passed", "counts": {"xfailed": 1, "passed": 7}, "duration_s": 4.1}
    line = progress.job_line(3, 9, ["model=qwen3_5_moe", "layerwise.split_size=2"], result)
    assert line == "[3/9] model=qwen3_5_moe layerwise.split_size=2: 7 passed, 1 xfailed (4.1 s)"


def test_progress_line_of_a_failure_and_a_plan():
    failed = {"status": "failed", "counts": {"passed": 5, "failed": 2}, "duration_s": 2.0, "log": "/r/3/pytest.log"}
    assert progress.job_line(1, 2, ["a=1"], failed) == "[1/2] a=1: FAILED 2 failed, 5 passed (2.0 s) -> /r/3/pytest.log"
    plan = planned(1, 2, 2978, 31)
    assert progress.outcome_text(plan).startswith("n_blocks 2978 (uniform 1562)")
    assert progress.outcome_text({"status": "error", "message": "x: y"}) == "ERROR: x: y"


# ---- job pieces -------------------------------------------------------------------------------


class _Report:
    def __init__(self, when, outcome, nodeid="testcases/tc/test_tc02_estimation.py::test_tc02[a]", xfail=False):
        self.when, self.outcome, self.nodeid = when, outcome, nodeid
        self.failed, self.skipped, self.passed = outcome == "failed", outcome == "skipped", outcome == "passed"
        if xfail:
            self.wasxfail = "reason"


def test_outcomes_counted_per_tc_like_pytests_summary():
    outcomes = Outcomes()
    for report in (
        _Report("setup", "passed"), _Report("call", "passed"), _Report("teardown", "passed"),
        _Report("call", "skipped", xfail=True),
        _Report("call", "failed", nodeid="testcases/tc/test_tc01_allocation.py::test_tc01[b]"),
        _Report("setup", "failed"), _Report("setup", "skipped"), _Report("teardown", "failed"),
    ):
        outcomes.pytest_runtest_logreport(report)
    assert outcomes.by_tc["TC-02"] == {"passed": 1, "xfailed": 1, "error": 2, "skipped": 1}
    assert outcomes.by_tc["TC-01"] == {"failed": 1}
    assert outcome_of(_Report("call", "passed", xfail=True)) == "xpassed"
    assert tc_of("testcases/tc/test_tc07_speculative.py::test_tc07[x]") == "TC-07"


@pytest.mark.parametrize("exit_code, expected", [(0, "passed"), (1, "failed"), (4, "error"), (5, "error")])
def test_suite_status_from_pytest_exit_code(exit_code, expected):
    out = suite_summary(["TC-01"], {"TC-01": {"passed": 2}}, [{"tc": "TC-01", "case": "c"}], exit_code)
    assert out["status"] == expected
    assert out["tcs"]["TC-01"] == {"counts": {"passed": 2}, "cases": [{"tc": "TC-01", "case": "c"}]}
    assert status.is_failure(expected) == (exit_code != 0)


def test_key_overrides_leave_out_group_choices_and_app_keys():
    choices = {"model": "deepseek_v32", "layerwise": "s2", "suite": "quick", "mode": "plan", "launcher": "local",
               "hydra/launcher": "basic"}
    overrides = ["model=deepseek_v32", "layerwise.split_size=2", "suite=quick", "suite.tcs=[TC-01]", "mode=plan",
                 "+hardware.facts.rack=3", "cache.block_size=64", "launcher=local"]
    assert key_overrides(overrides, choices) == ["layerwise.split_size=2", "+hardware.facts.rack=3",
                                                 "cache.block_size=64"]


# ---- the sweep's job list and result collection ------------------------------------------------


def test_job_list_is_the_sweepers_own():
    """The jobs are the app's sweeper's own list (Hydra's basic sweeper: last key fastest, a key given twice
    counts once, the last one); a glob of a config group is the options it selects."""
    from harness.app.validate import app_sweeper, sweep_jobs

    sweeper = app_sweeper(())
    overrides = ["mode=plan", "model=deepseek_v32,qwen3_5_moe", "layerwise.split_size=range(1,3)", "layerwise=s2,s4"]
    jobs = sweep_jobs(overrides, sweeper)
    assert jobs[:3] == [["mode=plan", "model=deepseek_v32", "layerwise.split_size=1", "layerwise=s2"],
                        ["mode=plan", "model=deepseek_v32", "layerwise.split_size=1", "layerwise=s4"],
                        ["mode=plan", "model=deepseek_v32", "layerwise.split_size=2", "layerwise=s2"]]
    assert len(jobs) == 2 * 2 * 2
    assert callback.varying_keys(jobs) == {"model", "layerwise.split_size", "layerwise"}
    assert sweep_jobs(["model=deepseek_v3,llama3_8b", "model=qwen3_5_moe"], sweeper) == [["model=qwen3_5_moe"]]
    assert sweep_jobs(["layerwise=glob(s*)"], sweeper) == [["layerwise=s1"], ["layerwise=s2"], ["layerwise=s4"]]


def test_a_sweeper_that_cannot_list_its_jobs_is_one_error_line(monkeypatch):
    """A sweeper Hydra does not have, or one without a job list (an optimizing sweeper), is refused by name:
    python -m harness checks every job before the first runs."""
    from contract.errors import ConfigError
    from harness.app import validate

    with pytest.raises(ConfigError, match=r"hydra.sweeper._target_='no.such.Sweeper': a sweeper Hydra has: "):
        validate.sweep_jobs(["model=deepseek_v3,qwen3_5_moe"], "no.such.Sweeper")
    monkeypatch.setattr(validate, "sweeper_class", lambda target: object)
    with pytest.raises(ConfigError, match=r"a sweeper that lists its jobs \(split_arguments"):
        validate.sweep_jobs(["model=deepseek_v3,qwen3_5_moe"], "optimizing.Sweeper")


def test_collect_reads_results_and_reports_missing_jobs(tmp_path):
    jobs = [list(j) for j in itertools.product(["model=a", "model=b"], ["layerwise=s2"])] + [["model=c"]]
    (tmp_path / "0").mkdir()
    (tmp_path / "0" / "result.json").write_text(json.dumps(planned(0, 2, 2978, 31)))
    (tmp_path / "1").mkdir()
    (tmp_path / "1" / "result.json").write_text("{not json")  # a torn file reads as missing
    returns = {2: {"status": "error", "message": "boom"}}
    results = callback.collect(tmp_path, jobs, returns)
    assert [r["status"] for r in results] == ["planned", "missing", "error"]
    assert results[1]["job"] == {"num": 1, "overrides": ["model=b", "layerwise=s2"]}
    paths = callback.write_summary(tmp_path, results)
    assert [p.name for p in paths] == ["results.csv", "results.md", "results.svg"]
    assert _svg(paths[2].read_text()).tag == f"{_SVG}svg"
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_a_signal_while_the_summary_is_written_waits_for_all_three_files(tmp_path, monkeypatch):
    """Ctrl-C between results.csv and results.md: the three files are written, then the sweep stops."""
    import os
    import signal

    written = []

    def write_then_interrupted(path, text):
        written.append(write_atomic(path, text))
        if len(written) == 1:
            os.kill(os.getpid(), signal.SIGINT)
        return path

    monkeypatch.setattr(callback, "write_atomic", write_then_interrupted)
    with pytest.raises(KeyboardInterrupt):
        callback.write_summary(tmp_path, [planned(0, 2, 2978, 31)])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results.csv", "results.md", "results.svg"]


def test_write_atomic_replaces_whole_files(tmp_path):
    target = tmp_path / "sub" / "f.txt"
    write_atomic(target, "old")
    write_atomic(target, b"new")
    assert target.read_text() == "new"
    assert [p.name for p in target.parent.iterdir()] == ["f.txt"]


def test_an_undefined_capacity_gain_reads_n_a_in_every_table_and_null_in_json():
    """FEATURE 6 (2.2): a budget that holds split blocks but no uniform one has no capacity gain: JSON null,
    "n/a" in the CSV, the Markdown table, the docs' figures table and the progress line; never inf or 0. A
    job without a plan keeps an empty cell."""
    job = planned(5, 4, 2, 15)
    job["plan"].update(uniform_n_blocks=0, capacity_gain=None)
    assert json.loads(json.dumps(job, allow_nan=False))["plan"]["capacity_gain"] is None
    rows = aggregate.rows([job, failed_suite_job()])
    by_job = {r["job"]: r for r in csv.DictReader(io.StringIO(aggregate.to_csv(rows)))}
    assert (by_job["6"]["capacity_gain"], by_job["4"]["capacity_gain"]) == ("n/a", "")
    markdown = aggregate.to_markdown(rows, [job, failed_suite_job()])
    planned_line = next(l for l in markdown.splitlines() if l.startswith("| [6]"))
    assert "| n/a |" in planned_line and "inf" not in planned_line
    _, cells, _ = aggregate.figures_table(rows)
    gain = aggregate.FIGURES_COLUMNS.index("capacity gain")
    assert [c[gain] for c in cells] == ["n/a", ""]
    assert "gain n/a" in progress.outcome_text(job)


def test_the_plan_table_writes_an_undefined_gain_as_n_a():
    from harness.plan import table
    from implementations.reference import ReferenceImplementation
    from testcases.unit._models import DEEPSEEK_V32, run_spec

    plan = ReferenceImplementation().plan(run_spec(DEEPSEEK_V32, split=4, budget_bytes=8 * MIB))
    text = table({**plan.to_json(), "hardware": "cpu"})
    assert "n_blocks 2 (uniform 0) | capacity gain n/a" in text
    assert "note: the uniform allocation fits no block" in text


def test_a_job_hands_pytest_its_cases_as_data_the_matrix_its_overrides_made():
    """The job's matrix (``suite_matrix``) is the one ``--lw-override`` of its choices, TCs and keys loaded
    (so the same cases, with the same ids); and pytest's command line names no case."""
    from types import SimpleNamespace

    from harness.app.job import MATRIX_GROUPS, pytest_args, suite_matrix
    from harness.suites.case import Case
    from harness.suites.matrix import load_matrix

    choices = {"model": "deepseek_v32", "layerwise": "s4", "parallel": "tp4", "implementation": "reference",
               "hardware": "cpu", "suite": "quick"}
    keys = ["layerwise.split_size=2", "cache.block_size=64", "parallel.dp_size=2"]
    cfg = SimpleNamespace(suite=SimpleNamespace(matrix="ci", tcs=["TC-01", "TC-02"]))
    given = suite_matrix(cfg, choices, keys)
    loaded = load_matrix("ci", [f"{g}={choices[g]}" for g in MATRIX_GROUPS] + ["tc=TC-01,TC-02", *keys])
    assert given == loaded, f"{given} != {loaded}"
    assert given.group_keys == {"layerwise": ["layerwise.split_size=2"], "parallel": ["parallel.dp_size=2"]}
    own = Case(tc="", model="deepseek_v32", layerwise="s4", parallel="tp4", implementation="reference",
               hardware="cpu", extra=tuple(keys))
    assert given.first_case().id == own.id == "deepseek_v32-s2-w4dp2-reference"  # the job's own case
    args = pytest_args([], Path("allure"))
    assert not {"--lw-override", "--lw-matrix", "--lw-results"} & set(args), args
