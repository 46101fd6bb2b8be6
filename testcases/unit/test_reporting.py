"""Allure plumbing: attachment builders, results metadata, and the offline report end to end."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass

import pytest

from harness.reporting import allure_meta, attachments, report

pytestmark = pytest.mark.unit

# 4 layers on 2 ranks: layers 1 and 3 are full attention, rank 0 owns 1, rank 1 owns 3.
LAYOUT = {"ranks": [0, 1], "layers": [0, 1, 2, 3], "full_layers": [1, 3], "owned": {0: [1], 1: [3]}}
EXPECTED_ROWS = [
    ["0", "linear", "linear"],
    ["1", "own", "scratch"],
    ["2", "linear", "linear"],
    ["3", "scratch", "own"],
]


# ---- layout table ----------------------------------------------------------------------


def test_layout_cells():
    header, rows = attachments.layout_cells(LAYOUT)
    assert header == ["layer", "rank 0", "rank 1"]
    assert rows == EXPECTED_ROWS


def test_layout_cells_after_json_round_trip():
    # rank keys become strings in JSON; the table must not change
    header, rows = attachments.layout_cells(json.loads(json.dumps(LAYOUT)))
    assert rows == EXPECTED_ROWS


def test_layout_uniform_every_rank_owns_every_full_layer():
    layout = {"ranks": [0, 1], "layers": [0, 1], "full_layers": [0, 1], "owned": {0: [0, 1], 1: [0, 1]}}
    _, rows = attachments.layout_cells(layout)
    assert rows == [["0", "own", "own"], ["1", "own", "own"]]


def test_layout_markdown():
    lines = attachments.layout_markdown(LAYOUT).splitlines()
    assert lines[0] == "| layer | rank 0 | rank 1 |"
    assert lines[1] == "|---|---|---|"
    assert lines[3] == "| 1 | own | scratch |"
    assert lines[5] == "| 3 | scratch | own |"
    assert len(lines) == 6


def test_layout_csv():
    assert attachments.layout_csv(LAYOUT) == (
        "layer,rank 0,rank 1\n0,linear,linear\n1,own,scratch\n2,linear,linear\n3,scratch,own\n"
    )


def test_layout_html():
    page = attachments.layout_html(LAYOUT)
    rows = re.findall(r"<tr>(.*?)</tr>", page)
    assert len(rows) == 5
    assert re.findall(r">(own|scratch|linear)</td>", rows[2]) == ["own", "scratch"]
    assert re.findall(r">(own|scratch|linear)</td>", rows[4]) == ["scratch", "own"]


# ---- chart, config, logs ---------------------------------------------------------------


def _chart(**series):
    import xml.etree.ElementTree as ET

    return ET.fromstring(attachments.memory_chart_svg(**series))


_SVG = "{http://www.w3.org/2000/svg}"


def test_memory_chart_draws_each_ranks_bytes_to_scale():
    """Bars per rank and series (a draft stacked on its target), a spec tick per rank, the uniform and
    budget lines, every legend entry; heights in proportion to the bytes."""
    svg = _chart(
        ranks=[0, 1, 2, 3], estimated_bytes=[5 << 30] * 4, measured_bytes=[5 << 30, 5 << 30, 4 << 30, 5 << 30],
        uniform_bytes=9 << 30, spec_bytes=[5 << 30] * 4, budget_bytes=10 << 30, draft_measured_bytes=[1 << 30] * 4,
        draft_estimated_bytes=[1 << 30] * 4, draft_spec_bytes=[1 << 30] * 4, title="m, s 2, world 4",
    )
    bars = svg.findall(f"{_SVG}rect[@class='bar']")
    assert len(bars) == 4 * 2 * 2  # ranks x (estimated, measured) x (target, draft)
    height = {(b.get("data-part"), b.get("data-series"), b.get("data-rank")): float(b.get("height")) for b in bars}
    full = height[("target", "measured", "0")]
    assert height[("target", "measured", "2")] == pytest.approx(full * 4 / 5, abs=0.15)
    assert height[("draft", "measured", "0")] == pytest.approx(full / 5, abs=0.15)
    assert len(svg.findall(f"{_SVG}line[@class='spec']")) == 4
    assert svg.find(f"{_SVG}line[@class='uniform']") is not None and svg.find(f"{_SVG}line[@class='budget']") is not None
    legend = [t.text for t in svg.findall(f"{_SVG}text[@class='legend']")]
    assert legend == ["target, estimated (implementation)", "draft, estimated (implementation)", "target, measured",
                      "draft, measured", "spec (oracle): target + draft",
                      "uniform at the same n_blocks (spec): 9,216.0 MiB", "KV budget per rank: 10,240.0 MiB"]
    assert "m, s 2, world 4" in [t.text for t in svg.findall(f"{_SVG}text")]


def test_memory_chart_rejects_wrong_length():
    with pytest.raises(ValueError, match="measured"):
        attachments.memory_chart_svg([0, 1], estimated_bytes=[1, 2], measured_bytes=[1])


def test_config_yaml():
    @dataclass
    class Layerwise:
        enable: bool = True
        split_size: int = 2

    text = attachments.config_yaml({"model": "deepseek_v32", "layerwise": {"split_size": 4}})
    assert "model: deepseek_v32" in text
    assert "  split_size: 4" in text
    assert attachments.config_yaml(Layerwise()) == "enable: true\nsplit_size: 2\n"
    assert attachments.config_yaml("already: yaml\n") == "already: yaml\n"


def test_rank_log_text():
    assert attachments.rank_log_text(3, "Traceback ...") == "===== rank 3 =====\nTraceback ...\n"


# ---- environment.properties and categories.json ----------------------------------------


def _env(**overrides):
    values = dict(
        torch_version="2.13.0", backend="gloo", device_names=["cpu", "cpu"], hardware_profile="bi_v100",
        topology="bi_v100_pix4", git_commit_id="abc123", python_version="3.11.9", host_cores=2,
    )
    values.update(overrides)
    return values


def test_environment_properties_file(tmp_path):
    env_path, _ = allure_meta.write_allure_meta(tmp_path, **_env())
    assert env_path == tmp_path / "environment.properties"
    assert env_path.read_text().splitlines() == [
        "torch=2.13.0",
        "backend=gloo",
        "devices=cpu, cpu",
        "hardware_profile=bi_v100",
        "topology=bi_v100_pix4",
        "git_commit=abc123",
        "python=3.11.9",
        "host_cores=2",
    ]


_CONTROLLER_PROBE = """
import sys

def pytest_unconfigure(config):
    if not hasattr(config, "workerinput"):
        with open("controller-imported.txt", "w") as fh:
            fh.write("torch" if "torch" in sys.modules else "no torch")
"""


@pytest.mark.slow
def test_under_xdist_a_worker_reports_the_environment_and_the_controller_writes_it(pytester, monkeypatch):
    """The controller runs no test, so it does not import torch (about 2 s) for environment.properties: the
    worker that ran the tests reports torch and its devices at the end of its session (as plain strings:
    torch's TorchVersion cannot cross xdist's channel), and the controller writes both metadata files."""
    import torch

    for name in [n for n in os.environ if n.startswith(("PYTEST_", "LWSPLIT_", "LW_"))]:
        monkeypatch.delenv(name)
    pytester.makeconftest(_CONTROLLER_PROBE)
    pytester.makepyfile(test_plain="def test_one():\n    pass\n")
    results = pytester.path / "allure-results"
    run = pytester.runpytest_subprocess("-p", "xdist", "-n", "1", "-q", "-p", "no:cacheprovider",
                                        f"--alluredir={results}")
    run.assert_outcomes(passed=1)
    assert "DumpError" not in run.stdout.str() + run.stderr.str()
    values = dict(line.split("=", 1) for line in (results / "environment.properties").read_text().splitlines())
    assert values["torch"] == str(torch.__version__) and values["backend"].startswith("auto"), values
    assert values["devices"] and values["topology"], values
    assert json.loads((results / "categories.json").read_text()) == list(allure_meta.CATEGORIES)
    assert (pytester.path / "controller-imported.txt").read_text() == "no torch"


def test_metadata_that_cannot_be_written_at_the_end_is_one_error_line_and_exit_1(pytester):
    """The folder was writable at start-up (checked then), but environment.properties cannot be written
    when the session ends: the run's outcomes stand, one ``error:`` line names the file, the exit is 1."""
    results = pytester.path / "allure-results"
    (results / "environment.properties").mkdir(parents=True)  # a folder where the file goes
    pytester.makepyfile(test_plain="def test_one():\n    pass\n")
    run = pytester.runpytest_inprocess("-q", "-p", "no:cacheprovider", f"--alluredir={results}")
    assert run.ret == 1
    run.assert_outcomes(passed=1)
    out = run.stdout.str()
    assert "error: 1 result file(s) could not be written; first: Allure metadata in" in out, out
    assert "INTERNALERROR" not in out and "Traceback" not in out


def test_a_failed_write_sets_the_exit_status_of_its_own_session_only(pytester):
    """``python -m harness`` runs one pytest session per job in one process: a job whose result file could not
    be written exits 1 with its ``error:`` line, the job after it (all written) exits 0, and the records of the
    session around them (this test's) are as they were."""
    from harness.reporting import write_guard

    around = write_guard.failures()
    results = pytester.path / "allure-results"
    (results / "environment.properties").mkdir(parents=True)  # a folder where the file goes
    pytester.makepyfile(test_plain="def test_one():\n    pass\n")
    first = pytester.runpytest_inprocess("-q", "-p", "no:cacheprovider", f"--alluredir={results}")
    second = pytester.runpytest_inprocess("-q", "-p", "no:cacheprovider")
    assert (first.ret, second.ret) == (1, 0), second.stdout.str()
    assert "could not be written" in first.stdout.str() and "could not be written" not in second.stdout.str()
    assert write_guard.failures() == around, "the enclosing session's records changed"

def test_environment_properties_escaping():
    text = allure_meta.environment_properties({"a:b": "C:\\corex\nnext", "devices": "Iluvatar BI-V100 µ"})
    assert text.splitlines() == ["a\\:b=C:\\\\corex\\nnext", "devices=Iluvatar BI-V100 \\u00b5"]


def test_environment_detects_python_and_cores():
    values = allure_meta.environment_values(**_env(python_version=None, host_cores=None))
    assert re.fullmatch(r"3\.\d+\.\d+.*", values["python"])
    assert int(values["host_cores"]) >= 1
    assert allure_meta.environment_values(**_env(device_names=[]))["devices"] == "none"


def test_git_commit(tmp_path):
    assert allure_meta.git_commit(tmp_path) == "unknown"  # not a repository
    assert re.fullmatch(r"[0-9a-f]{40}|unknown", allure_meta.git_commit())


def test_categories_file(tmp_path):
    path = allure_meta.write_categories(tmp_path)
    categories = {c["name"]: c for c in json.loads(path.read_text())}
    assert categories["Product defect"]["matchedStatuses"] == ["failed", "broken"]
    assert categories["Harness error"]["matchedStatuses"] == ["broken"]
    assert categories["Unexpected pass of a predicted failure"]["matchedStatuses"] == ["failed"]
    # the trace's first line (harness.reporting.categories) decides between them: they exclude each other
    traces = {"Product defect": "category: product defect: x\ny", "Harness error": "category: harness error: x",
              "Unexpected pass of a predicted failure": "category: unexpected pass: x"}
    for name, trace in traces.items():
        matched = [n for n, c in categories.items() if "traceRegex" in c
                   and re.compile(c["traceRegex"], re.DOTALL).fullmatch(trace)]
        assert matched == [name]
    upstream = categories["Expected failure predicted by the spec"]
    assert upstream["matchedStatuses"] == ["skipped"]
    # Allure 2 matches the whole message with DOTALL; an xfail message spans lines
    regex = re.compile(upstream["messageRegex"], re.DOTALL)
    assert regex.fullmatch("XFAIL upstream owner rule: split rank 1 owns all; found exactly the predicted problems: owner on rank 1\n\nAssertionError")
    assert not regex.fullmatch("XFAIL no cards")


# ---- report command: errors and atomic replacement (no Allure needed) ------------------


def _results(tmp_path):
    results = tmp_path / "results"
    results.mkdir()
    (results / "x-result.json").write_text("{}")
    return results


def test_report_missing_or_empty_results(tmp_path, capsys):
    assert report.main(["--results", str(tmp_path / "nope"), "--out", str(tmp_path / "out")]) == 2
    (tmp_path / "empty").mkdir()
    assert report.main(["--results", str(tmp_path / "empty"), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2
    assert "does not exist" in err[0] and "no *-result.json" in err[1]
    assert not (tmp_path / "out").exists()


def test_report_without_cli(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(report, "LOCAL_CLI", tmp_path / "absent")
    monkeypatch.setenv("PATH", str(tmp_path))
    assert report.main(["--results", str(_results(tmp_path)), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Allure CLI not found" in err and "install_allure.sh" in err


FEATURE = report.FEATURE_DOC.is_file()
OUT_ARG = 'while [ $# -gt 0 ]; do [ "$1" = -o ] && out="$2"; shift; done\n'
"""Shell lines that set ``$out`` to the fake CLI's ``-o`` argument."""


def _fake_cli(tmp_path, body: str):
    cli = tmp_path / "fake-allure"
    cli.write_text("#!/bin/sh\n" + body)
    cli.chmod(0o755)
    return cli


def test_failed_generation_leaves_previous_report(tmp_path):
    out = tmp_path / "reports" / "allure-report"
    out.mkdir(parents=True)
    (out / "index.html").write_text("previous")
    (out / report.REPORT_STAMP).write_text("")
    # writes half a report into -o, then fails
    cli = _fake_cli(tmp_path, OUT_ARG + 'mkdir -p "$out" && echo half > "$out/index.html"; echo "boom" >&2; exit 1\n')
    results = _results(tmp_path)
    with pytest.raises(report.ReportError, match="exit 1.*boom"):
        report.generate(results, out, cli=cli)
    assert sorted(p.name for p in results.iterdir()) == ["x-result.json"]
    assert (out / "index.html").read_text() == "previous"
    assert sorted(p.name for p in out.parent.iterdir()) == ["allure-report"]


def test_successful_generation_replaces_previous_report(tmp_path):
    out = tmp_path / "reports" / "allure-report"
    cli = _fake_cli(tmp_path, OUT_ARG + 'mkdir -p "$out" && echo "$0" > "$out/index.html"\n')
    results = _results(tmp_path)
    report.generate(results, out, cli=cli)
    cli.rename(tmp_path / "allure-2")
    assert report.generate(results, out, cli=tmp_path / "allure-2") == out / "index.html"
    assert (out / "index.html").read_text().strip() == str(tmp_path / "allure-2")
    assert sorted(p.name for p in out.iterdir()) == sorted(
        ["index.html", report.REPORT_STAMP] + (["FEATURE.md"] if FEATURE else []))
    assert sorted(p.name for p in out.parent.iterdir()) == ["allure-report"]


def test_a_report_written_before_the_stamp_is_replaced(tmp_path):
    out = tmp_path / "allure-report"
    out.mkdir()
    (out / "index.html").write_text("<script>d('data/suites.json','e30=')</script>")
    cli = _fake_cli(tmp_path, OUT_ARG + 'mkdir -p "$out" && echo new > "$out/index.html"\n')
    report.generate(_results(tmp_path), out, cli=cli)
    assert (out / "index.html").read_text() == "new\n"


def _tree(root):
    return {str(p.relative_to(root)): (p.read_bytes() if p.is_file() else None) for p in sorted(root.rglob("*"))}


@pytest.mark.parametrize("case", ["user-folder", "lone-foreign-index", "results-folder", "parent-of-results",
                                  "regular-file", "symlink", "report-with-a-user-file"])
def test_report_out_that_is_not_an_earlier_report_is_refused_untouched(tmp_path, capsys, monkeypatch, case):
    """A report replaces its folder whole: anything there but an earlier report would be lost."""
    cli = _fake_cli(tmp_path, OUT_ARG + 'mkdir -p "$out" && echo new > "$out/index.html"\n')
    root = tmp_path / "work"
    results = root / "reports" / "allure-results"
    results.mkdir(parents=True)
    (results / "x-result.json").write_text("{}")
    out = root / "out"
    if case == "user-folder":
        out.mkdir()
        (out / "index.html").write_text("my site")
        (out / "notes.txt").write_text("mine")
    elif case == "lone-foreign-index":
        out.mkdir()
        (out / "index.html").write_text("my site")
    elif case == "results-folder":
        out = results
    elif case == "parent-of-results":
        out = root / "reports"
    elif case == "regular-file":
        out.write_text("a file")
    elif case == "symlink":
        (root / "elsewhere").mkdir()
        out.symlink_to(root / "elsewhere")
    else:
        report.generate(results, out, cli=cli)
        (out / "mine.txt").write_text("mine")
    before = _tree(root)
    monkeypatch.setattr(report, "find_cli", lambda: cli)
    code = report.main(["--results", str(results), "--out", str(out), "--no-history"])
    err = capsys.readouterr().err
    assert code == 2
    assert len(err.splitlines()) == 1 and str(out) in err, err
    assert _tree(root) == before


def test_generation_starts_the_jvm_quick_unless_the_user_says_otherwise(tmp_path, monkeypatch):
    cli = _fake_cli(tmp_path, OUT_ARG + 'mkdir -p "$out" && printf %s "$JAVA_OPTS" > "$out/index.html"\n')
    monkeypatch.delenv("JAVA_OPTS", raising=False)
    assert report.generate(_results(tmp_path), tmp_path / "a", cli=cli).read_text() == report.QUICK_JVM_OPTS
    monkeypatch.setenv("JAVA_OPTS", "-Xmx2g -XX:TieredStopAtLevel=4")  # later on the java command line: it wins
    assert report.generate(tmp_path / "results", tmp_path / "b", cli=cli).read_text() == (
        f"{report.QUICK_JVM_OPTS} -Xmx2g -XX:TieredStopAtLevel=4")


def test_unwritable_output(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    cli = _fake_cli(tmp_path, "exit 0\n")
    with pytest.raises(report.ReportError, match="cannot write the report"):
        report.generate(_results(tmp_path), blocker / "out", cli=cli)


# ---- end to end with the real Allure CLI ------------------------------------------------

TINY_SUITE = textwrap.dedent(
    """
    import allure
    import pytest

    from harness.reporting import attachments

    LAYOUT = {"ranks": [0, 1], "layers": [0, 1], "full_layers": [0, 1], "owned": {0: [0], 1: [1]}}

    @allure.id("TC-01")
    @allure.title("allocation")
    def test_passes():
        attachments.attach_layout(LAYOUT)
        attachments.attach_memory_chart([0, 1], estimated_bytes=[2, 2], measured_bytes=[2, 2])
        attachments.attach_config({"model": "deepseek_v32"})

    @allure.id("TC-02")
    def test_fails():
        attachments.attach_rank_failure({0: "stack of rank 0", 1: "Traceback: rank 1 broke"}, 1)
        assert 1 == 2

    @allure.id("TC-06")
    @pytest.mark.xfail(reason="upstream owner rule: split rank 1 owns every full layer; found exactly the predicted problems: owner on rank 1", strict=True)
    def test_upstream_rule():
        assert False
    """
)


def _test_cases(index_html: str) -> dict[str, dict]:
    files = report.embedded_files(index_html)
    cases = [json.loads(data) for path, data in files.items() if path.startswith("data/test-cases/")]
    by_id = {}
    for case in cases:
        for label in case["labels"]:
            if label["name"] == "as_id":
                by_id[label["value"]] = case
    return by_id


JOB_RESULT = {"uuid": "u1", "historyId": "h1", "testCaseId": "c1", "fullName": "m.t", "name": "t", "status": "failed",
              "start": 1, "stop": 2, "statusDetails": {"message": "AssertionError: rank 1 owns [3]"},
              "labels": [{"name": "as_id", "value": "TC-03"}]}
"""A hand-written failed result in a folder of its own, as a sweep's second job writes one."""


@pytest.fixture(scope="module")
def two_reports(once_per_run):
    """The tiny suite run by a real pytest, plus ``JOB_RESULT`` from a second folder, built by the real
    Allure CLI into one report twice in a row with one history folder (the first report is the second
    one's trend). Built once per test run (``once_per_run``: pytest-xdist workers share it).
    Returns the two pages, the results folders, a copy of them made before the reports, and the history
    folder."""
    cli = report.find_cli()
    if cli is None:
        pytest.skip("Allure CLI not installed; run: bash scripts/install_allure.sh")
    if shutil.which("java") is None:
        pytest.skip("Allure 2 CLI needs Java, which is not on PATH")
    root = once_per_run("two-reports", lambda folder: _build_two_reports(folder, cli))
    return {"pages": [(root / f"report-{n}.html").read_text() for n in (1, 2)],
            "folders": (root / "allure-results", root / "job-results"),
            "as_written": (root / "as-written" / "allure-results", root / "as-written" / "job-results"),
            "history": root / "allure-history"}


def _build_two_reports(root, cli) -> None:
    (root / "test_tiny.py").write_text(TINY_SUITE)
    results = root / "allure-results"
    # Without the harness's plugin (-p no:lwsplit): for a plain test file it adds only the environment and
    # categories files, written here below, and it imports torch for them; the meta test runs it for real.
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:lwsplit", f"--alluredir={results}",
         "test_tiny.py"],
        cwd=root, capture_output=True, text=True, timeout=120,
    )
    assert run.returncode == 1, run.stdout + run.stderr  # TC-02 fails on purpose
    allure_meta.write_allure_meta(results, **_env())
    job = root / "job-results"
    job.mkdir()
    (job / "u1-result.json").write_text(json.dumps(JOB_RESULT))
    for folder in (results, job):
        shutil.copytree(folder, root / "as-written" / folder.name)
    for n in (1, 2):
        index = report.generate([results, job], root / "report", cli=cli, history=root / "allure-history")
        shutil.copyfile(index, root / f"report-{n}.html")


def _files(folders) -> dict:
    """Every file under ``folders``, by folder name and relative path: its bytes."""
    return {f"{folder.name}/{path.relative_to(folder)}": path.read_bytes()
            for folder in folders for path in folder.rglob("*") if path.is_file()}


@pytest.mark.slow
def test_report_end_to_end(two_reports):
    page = two_reports["pages"][-1]
    assert not any("googletagmanager" in p for p in two_reports["pages"])  # ALLURE_NO_ANALYTICS keeps it out
    cases = _test_cases(page)
    assert sum(path.startswith("data/test-cases/") for path in report.embedded_files(page)) == len(cases) == 4

    assert {tc: case["status"] for tc, case in cases.items()} == {
        "TC-01": "passed", "TC-02": "failed", "TC-03": "failed", "TC-06": "skipped",
    }
    assert cases["TC-01"]["name"] == "allocation"
    categories = {tc: [c["name"] for c in case["extra"].get("categories", [])] for tc, case in cases.items()}
    assert categories == {
        "TC-01": [], "TC-02": ["Product defect"], "TC-03": ["Product defect"],
        "TC-06": ["Expected failure predicted by the spec"],
    }
    attached = {a["name"]: a["type"] for a in cases["TC-01"]["testStage"]["attachments"]}
    assert attached == {
        "layout (table)": "text/html", "layout.csv": "text/csv",
        "per-rank KV memory": "image/svg+xml", "composed config": "application/yaml",
    }
    assert [a["name"] for a in cases["TC-02"]["testStage"]["attachments"]] == [
        "rank 1 log: the failure", "other ranks (0)"]
    assert cases["TC-02"]["statusMessage"] == "TC-02: check failed: assert N == N"

    environment = json.loads(report.embedded_files(page)["widgets/environment.json"])
    assert {"name": "torch", "values": ["2.13.0"]} in environment
    assert {"name": "git_commit", "values": ["abc123"]} in environment


# ---- expected next to actual: layout marks and folds, views from facts -----------------


def _layout(n_layers: int, owned: dict, expected: dict) -> dict:
    return {"ranks": sorted(owned), "layers": list(range(n_layers)), "full_layers": list(range(n_layers)),
            "owned": owned, "expected_owned": expected, "split_ranks": {r: r for r in owned}}


def test_layout_marks_departures_from_the_spec():
    layout = dict(LAYOUT, expected_owned={0: [3], 1: [1]})  # the spec gives the other rank each layer
    _, rows = attachments.layout_cells(layout)
    assert rows[1] == ["1", "own ≠ spec: scratch", "scratch ≠ spec: own"]
    assert rows[0] == ["0", "linear", "linear"]
    assert attachments.departures(layout) == 4
    assert attachments.departures(dict(LAYOUT, expected_owned=LAYOUT["owned"])) == 0
    page = attachments.layout_html(layout)
    assert page.count("class='bad'") == 4 + 0  # totals agree (1 / 1): only the four cells
    assert "2 of 4 layers depart from the spec" in page


def test_layout_folds_long_runs_that_match_the_spec():
    owned = {0: list(range(0, 61, 2)), 1: list(range(1, 61, 2))}
    page = attachments.layout_html(_layout(61, owned, owned))
    top = page.split("<details>")[0]
    assert len(re.findall(r"<tr><th>\d+</th>", top)) == attachments.FOLD_EDGE  # first rows shown
    assert "layers 2&ndash;58: 57 layers as the spec says (rank 0 owns 29, rank 1 owns 28)" in page
    assert page.count("<details>") == 1 and "All 61 layers match the spec" in page
    # a departure in the middle stays visible, the runs around it fold
    bad = {0: owned[0] + [31], 1: owned[1]}
    page = attachments.layout_html(_layout(61, bad, owned))
    assert page.count("<details>") == 2 and "1 of 61 layers depart" in page
    assert re.search(r"<tr><th>31</th><td class='bad'[^>]*>own ≠ spec: scratch</td>", page)
    assert "<td class='bad'>32 / 31</td>" in page  # the totals row: implementation / spec


def _facts(owner_rule=None, draft="none"):
    """Rank facts of a qwen3_5_moe s2 tp4 run as the ranks report them (dicts), from the reference plan."""
    from harness.suites.case import Case
    from implementations.reference import ReferenceImplementation

    run = Case(tc="TC-01", model="qwen3_5_moe", layerwise="s2", parallel="tp4", implementation="reference",
               draft=draft).resolved.run
    plan = ReferenceImplementation().plan(run)
    facts = []
    for rp in plan.ranks:
        owned = set(owner_rule(plan.full_layers, rp.split_rank) if owner_rule else rp.owned_full_layers)
        layers = [{"layer": l, "kind": "full" if l in plan.full_layers else "linear", "owned": l in owned}
                  for l in range(plan.num_layers)]
        facts.append({"rank": rp.rank, "plan": plan if rp.rank == 0 else None, "run": run if rp.rank == 0 else None,
                      "error": None, "workers": {"target": {"plan_rank": rp.rank, "split_rank": rp.split_rank,
                                                            "measured_bytes": rp.estimated_bytes, "layers": layers}}})
    return facts, plan, run


def test_views_take_expected_owners_from_the_oracle_not_the_plan():
    from harness import oracle
    from harness.suites import views

    upstream = lambda full, split_rank: [l for l in full if l % 2 == split_rank]  # noqa: E731  layer_id % s
    facts, plan, run = _facts(upstream)
    layout = views.layout_view(facts)
    spec = oracle.expected_owner(oracle.expected_full_layers(run.model), 2)
    assert layout["expected_owned"][0] == [l for l, o in spec.items() if o == 0]
    assert layout["owned"][1] == list(plan.full_layers) and layout["owned"][0] == []  # full layer ids are all odd
    assert attachments.departures(layout) > 0
    assert "qwen3_5_moe, s 2, world 4" in layout["title"]
    memory = views.memory_view(facts)
    n, uniform_n = oracle.expected_block_counts(run, run.hardware.kv_budget_bytes)
    assert memory["budget_bytes"] == run.hardware.kv_budget_bytes
    assert memory["spec_bytes"][0] == oracle.expected_rank_bytes(run, n, layout["expected_owned"][0])
    assert memory["uniform_bytes"] > max(memory["spec_bytes"])  # the split saves memory
    assert memory["estimated_bytes"] == [rp.estimated_bytes for rp in plan.ranks]
    assert "draft_measured_bytes" not in memory
    assert len(_chart(**memory).findall(f"{_SVG}rect[@class='bar']")) == 2 * len(memory["ranks"])


def test_the_planning_tc_shows_the_plans_owners_next_to_the_spec():
    """TC-03 allocates nothing: its report view is the plan's owners and estimates next to the oracle's."""
    from harness import oracle
    from harness.suites import load_suite, views
    from harness.suites.case import Case
    from harness.suites.tc03 import TopologyFacts
    from implementations.reference import ReferenceImplementation
    from implementations.upstream_owner_rule import UpstreamOwnerRuleImplementation

    suite = load_suite("TC-03")
    assert suite.report_view is views.plan_report_view
    run = Case(tc="TC-03", model="qwen3_5_moe", layerwise="s2", parallel="tp4", implementation="reference").resolved.run
    for impl, departs in ((ReferenceImplementation(), False), (UpstreamOwnerRuleImplementation(), True)):
        plan = impl.plan(run)
        facts = [TopologyFacts(rank=r, plan=plan if r == 0 else None, run=run if r == 0 else None) for r in range(4)]
        view = suite.report_view(facts)
        layout, memory = view["layout"], view["memory"]
        assert layout["owned"] == {rp.rank: list(rp.owned_full_layers) for rp in plan.ranks}
        assert layout["expected_owned"] == {r: list(oracle.expected_rank_owned_layers(run, r)) for r in range(4)}
        assert (attachments.departures(layout) > 0) is departs
        assert memory["estimated_bytes"] == [rp.estimated_bytes for rp in plan.ranks]
        n_blocks, _ = oracle.expected_block_counts(run, oracle.run_budget_bytes(run))
        assert memory["spec_bytes"] == [oracle.expected_rank_bytes(run, n_blocks, layout["expected_owned"][r])
                                        for r in range(4)]
        attachments.memory_chart_svg(**memory)


def test_views_read_frozen_dataclass_facts_alike():
    from dataclasses import dataclass

    from harness.suites import views

    @dataclass(frozen=True)
    class Layer:
        layer: int
        kind: str
        owned: bool

    @dataclass(frozen=True)
    class Worker:
        plan_rank: int
        split_rank: int
        measured_bytes: int
        layers: tuple

    @dataclass(frozen=True)
    class RankFacts:
        rank: int
        plan: object
        run: object
        error: object
        workers: dict

    facts, _, _ = _facts()
    typed = [RankFacts(rank=f["rank"], plan=f["plan"], run=f["run"], error=None, workers={
        "target": Worker(**{**f["workers"]["target"], "layers": tuple(Layer(**l) for l in f["workers"]["target"]["layers"])})
    }) for f in facts]
    assert views.report_view(typed) == views.report_view(facts)
    assert attachments.departures(views.layout_view(facts)) == 0


def test_views_show_the_draft_of_a_speculative_case():
    from harness import oracle
    from harness.suites import views

    facts, plan, run = _facts(draft="qwen3_5_mtp")
    draft_full = oracle.expected_full_layers(run.draft)
    for f in facts:
        f["workers"]["draft"] = {"plan_rank": f["rank"], "split_rank": 0, "measured_bytes": 7 << 20,
                                 "layers": [{"layer": l, "kind": "full", "owned": True} for l in draft_full]}
    view = views.report_view(facts)
    assert view["draft_layout"]["owned"] == {r: list(draft_full) for r in range(4)}
    assert attachments.departures(view["draft_layout"]) == 0 and "draft qwen3_5_mtp" in view["draft_layout"]["title"]
    memory = view["memory"]
    assert memory["draft_measured_bytes"] == [7 << 20] * 4
    n, _ = views.spec_block_counts(run)
    per_layer = oracle.expected_layer_bytes_per_block(run.draft, run.cache, 4)
    assert memory["draft_spec_bytes"] == [n * sum(per_layer.values())] * 4
    assert len(_chart(**memory).findall(f"{_SVG}rect[@class='bar']")) == 4 * 2 * 2


# ---- categories by origin, stable messages -----------------------------------------------

from harness.rankpool.errors import Origin, RankFailure  # noqa: E402
from harness.reporting import categories as rs  # noqa: E402


def test_an_exception_from_the_implementation_is_a_product_defect_with_a_stable_message():
    message = "RankFailure: step on 4 ranks failed: rank 2 raised\n>>> rank 2 raised: the failure <<<\nValueError: bad block {n}"
    where = "implementations/reference/allocation.py:41"
    one = rs.classify("broken", message.format(n=7), "", tc="TC-01",
                      origin=Origin(where=where, cause="rank 2 raised: ValueError: bad block 7"))
    two = rs.classify("broken", message.format(n=9123), "", tc="TC-01",
                      origin=Origin(where=where, cause="rank 3 raised: ValueError: bad block 9123"))
    assert one.category == rs.PRODUCT
    assert one.message == two.message == (
        "TC-01: rank N raised: ValueError: bad block N (in implementations/reference/allocation.py)")
    assert one.detail.startswith("category: product defect: raised by the implementation under test at "
                                 "implementations/reference/allocation.py:41\n")
    assert "bad block 7" in one.detail  # the case's own words stay, in the trace


def test_an_exception_from_harness_code_is_a_harness_error():
    verdict = rs.classify("broken", "KeyError: 'target'", "", tc="TC-07",
                          origin=Origin(where="harness/suites/execute.py:36", cause="KeyError: 'target'"))
    assert verdict.category == rs.HARNESS and verdict.detail.startswith(
        "category: harness error: raised in harness code at harness/suites/execute.py:36")
    outside = rs.classify("broken", "OSError: x", "", tc="TC-07", origin=Origin(where=None, cause="OSError: x"))
    assert outside.category == rs.HARNESS and outside.message == "TC-07: OSError: x (in outside the repository)"
    unknown = rs.classify("broken", "KeyError: 'target'", "", tc="TC-07")  # a result no plugin labelled
    assert unknown.category == rs.HARNESS and unknown.message == "TC-07: KeyError: 'target' (origin not recorded)"


def _raise_in_implementation_code():
    from contract import bounded_inputs

    bounded_inputs.read_input_file("/nonexistent/lwsplit/config.json", "model_path")


def test_the_origin_is_read_from_the_exception_itself():
    with pytest.raises(Exception) as raised:
        _raise_in_implementation_code()
    origin = rs.failure_origin(raised.value)
    assert origin.in_implementation and origin.where.startswith("contract/bounded_inputs.py:")
    assert origin.cause.startswith(type(raised.value).__name__ + ": ")
    with pytest.raises(KeyError) as here:
        {}["target"]
    origin = rs.failure_origin(here.value)
    assert origin.where.startswith("testcases/unit/test_reporting.py:") and not origin.in_implementation
    # a rank failure: the failing rank's own origin (the pool sets it), also when it caused another error
    failure = RankFailure("x failed: rank 2 raised\n--- rank 2 raised ---\nValueError: bad block 7")
    failure.origin = Origin(where="implementations/reference/allocation.py:41", cause="ValueError: bad block 7")
    assert rs.failure_origin(failure) == Origin(where="implementations/reference/allocation.py:41",
                                                cause="rank 2 raised: ValueError: bad block 7")
    try:
        try:
            raise failure
        except RankFailure as exc:
            raise RuntimeError("the case failed") from exc
    except RuntimeError as wrapped:
        assert rs.failure_origin(wrapped).in_implementation


def test_rewrite_reads_the_origin_from_the_labels():
    result = {"status": "broken", "statusDetails": {"message": "ValueError: bad block 7", "trace": "tb"},
              "labels": [{"name": "as_id", "value": "TC-05"},
                         {"name": rs.ORIGIN_LABEL, "value": "implementations/reference/allocation.py:41"},
                         {"name": rs.CAUSE_LABEL, "value": "rank 1 raised: ValueError: bad block 7"}]}
    details = rs.rewrite(result)["statusDetails"]
    assert details["message"] == "TC-05: rank N raised: ValueError: bad block N (in implementations/reference/allocation.py)"
    assert details["trace"].startswith("category: product defect") and details["trace"].endswith("\n\ntb")
    outside = {"status": "broken", "statusDetails": {"message": "OSError: x"},  # allure drops an empty label's value
               "labels": [{"name": rs.ORIGIN_LABEL}, {"name": rs.CAUSE_LABEL, "value": "OSError: x"}]}
    assert rs.rewrite(outside)["statusDetails"]["message"] == "OSError: x (in outside the repository)"


def test_failed_checks_group_by_rule_not_by_case():
    msg = "AssertionError: rank {r} (split rank 1) owns full layers [{a}], spec says [7, 15]\nrank 3 ...\nassert not [...]"
    one = rs.classify("failed", msg.format(r=1, a="3, 11"), "", tc="TC-01")
    two = rs.classify("failed", msg.format(r=3, a="1, 3, 5, 7"), "", tc="TC-01")
    assert one.category == rs.PRODUCT and one.message == two.message
    assert one.message == "TC-01: check failed: rank N (split rank N) owns full layers [...], spec says [...]"


def test_expected_failures_and_unexpected_passes_of_the_upstream_rule():
    reason = ("upstream owner rule (layer_id % s) puts every full-attention layer on one split rank; "
              "found exactly the predicted problems: owner on rank 1")
    xfail = rs.classify("skipped", f"XFAIL {reason}\n\nAssertionError: rank 0 owns [3, 7]", "", tc="TC-07")
    assert xfail.category == rs.XFAIL and xfail.message == f"TC-07: XFAIL {reason}"
    assert "rank 0 owns [3, 7]" in xfail.detail
    xpass = rs.classify("failed", "", "", tc="TC-07", xpass_reason=reason)
    assert xpass.category == rs.XPASS and xpass.message.startswith("TC-07: XPASS(strict) upstream owner rule")
    assert xpass.detail.startswith("category: unexpected pass")
    result = {"status": "failed", "labels": [{"name": "as_id", "value": "TC-07"},
                                             {"name": rs.XPASS_LABEL, "value": reason}]}
    assert rs.rewrite(result)["statusDetails"]["trace"].startswith("category: unexpected pass")
    passed = {"status": "passed", "labels": []}
    assert rs.rewrite(dict(passed)) == passed


def test_rank_failure_message_keeps_the_failing_rank_and_moves_the_others():
    from harness.rankpool.errors import RankFailure, RankTimeout

    message = ("step on 4 ranks (gloo, pool generation 1) failed: rank 2 raised ValueError: boom; ranks 0, 1, 3 "
               "still running\n--- rank 2 raised ---\nTraceback ...\nValueError: boom\n"
               "--- rank 0 stack ---\nThread 0x1 (most recent call first):\n  File \"/x.py\", line 1 in wait\n"
               "--- rank 1 stack ---\nstack 1\n(the ranks were killed; the next run starts a fresh group)")
    err = RankFailure(message, rank_errors={0: "s0", 1: "s1", 2: "tb2", 3: "s3"})
    text = str(err)
    assert text.splitlines()[0].startswith("step on 4 ranks") and err.failed_rank == 2 and err.root == "rank 2 raised"
    assert ">>> rank 2 raised: the failure <<<\nTraceback ...\nValueError: boom" in text
    assert "stack 1" not in text and "most recent call first" not in text
    assert "stack 1" in err.other_ranks and "--- rank 0 stack ---" in err.other_ranks
    assert text.endswith("(the ranks were killed; the next run starts a fresh group)")
    assert err.full_message == message
    wait = 'Thread 0x1 (most recent call first):\n  File "/t/distributed_c10d.py", line 9 in barrier\n'
    stuck = 'Thread 0x2 (most recent call first):\n  File "/w/faulty.py", line 5 in _sleep_forever\n'
    hung = RankTimeout(f"x did not finish within 3 s; unfinished ranks: 0, 1, 2\n--- rank 0 stack ---\n{wait}"
                       f"--- rank 1 stack ---\n{stuck}--- rank 2 stack ---\n{wait}", rank_errors={0: "A", 1: "B", 2: "C"})
    assert hung.failed_rank == 1 and "distributed_c10d" not in str(hung)  # the hung rank, not a waiting peer
    assert ">>> rank 1 stack: the failure <<<\n" + stuck.rstrip() in str(hung)
    assert str(RankFailure("plain")) == "plain"
    texts = attachments.rank_failure_texts(err.rank_errors, err.failed_rank, err.other_ranks)
    assert [name for name, _ in texts] == ["rank 2 log: the failure", "other ranks (0, 1, 3)"]


# ---- executor and history -----------------------------------------------------------------


def test_executor_names_the_ci_and_its_build(tmp_path):
    github = report.executor_info({"GITHUB_ACTIONS": "true", "GITHUB_RUN_NUMBER": "17", "GITHUB_RUN_ID": "99",
                                   "GITHUB_REPOSITORY": "o/r"})
    assert (github["name"], github["buildOrder"], github["buildName"]) == ("GitHub Actions", 17, "GitHub Actions #17")
    assert github["buildUrl"] == "https://github.com/o/r/actions/runs/99"
    generic = report.executor_info({"CI_NAME": "nightly", "CI_BUILD_NUMBER": "5", "CI_BUILD_URL": "http://ci/5"})
    assert (generic["name"], generic["buildOrder"], generic["buildUrl"]) == ("nightly", 5, "http://ci/5")
    (tmp_path / "history-trend.json").write_text(json.dumps([{"buildOrder": 4}, {"buildOrder": 3}]))
    local = report.executor_info({}, tmp_path)
    assert (local["type"], local["buildOrder"]) == ("local", 5) and "buildUrl" not in local
    assert report.executor_info({}, tmp_path / "none")["buildOrder"] == 1


def test_self_tests_get_their_own_epic():
    from types import SimpleNamespace

    from harness.reporting import allure_labels

    marks = allure_labels.self_test_markers(SimpleNamespace(nodeid="testcases/unit/test_layout.py::test_x"))
    labels = {(m.kwargs["label_type"], m.args[0]) for m in marks}
    assert ("epic", allure_labels.SELF_TEST_EPIC) in labels and ("feature", "Unit tests") in labels
    assert allure_labels.self_test_markers(SimpleNamespace(nodeid="testcases/tc/test_tc01_allocation.py::t[x]")) == []
    assert [allure_labels.feature_name(f"TC-0{n}") for n in range(1, 8)] == sorted(
        allure_labels.feature_name(f"TC-0{n}") for n in range(1, 8))
    assert repr(allure_labels.Shown(4)) == "4"
    links = allure_labels.feature_links("TC-02", base="http://doc/FEATURE.md")
    assert [name for name, _ in links] == ["FEATURE section 5", "FEATURE section 6", "FEATURE section 10 (test plan)"]
    assert all(url.startswith("http://doc/FEATURE.md#") for _, url in links)


def test_two_reports_in_a_row_show_two_trend_points(two_reports):
    pages, history = two_reports["pages"], two_reports["history"]
    for n, page in enumerate(pages, 1):
        trend = json.loads(report.embedded_files(page)["widgets/history-trend.json"])
        assert len(trend) == n, trend
    assert sorted(p["buildOrder"] for p in trend) == [1, 2]
    assert json.loads((history / "history-trend.json").read_text()) == json.loads(
        report.embedded_files(page)["history/history-trend.json"])
    assert _files(two_reports["folders"]) == _files(two_reports["as_written"])  # pytest's results and the job's untouched
    assert not any((folder / "history").exists() for folder in two_reports["folders"])
    case = _test_cases(page)["TC-03"]
    assert [c["name"] for c in case["extra"]["categories"]] == ["Product defect"]
    assert case["statusMessage"] == "TC-03: check failed: rank N owns [...]"
    assert len(case["extra"]["history"]["items"]) == 1  # the first run, as this one's history
    assert "<title>Layerwise split KV cache sharding</title>" in page or report.REPORT_NAME in page


def test_history_keeps_the_newest_results_per_test():
    items = [{"uid": str(n), "status": "passed", "time": {"start": n}} for n in range(30)]
    capped = json.loads(report.cap_history(json.dumps({"h1": {"statistic": {}, "items": items}}).encode(), 5))
    assert [i["uid"] for i in capped["h1"]["items"]] == ["29", "28", "27", "26", "25"]


# ---- browser check: what it opens (the real browser runs in testcases/meta/test_allure_report.py) --------


def _page(files: dict) -> str:
    import base64

    return "".join(f"d('{path}','{base64.b64encode(json.dumps(data).encode()).decode()}')" for path, data in files.items())


def test_browser_check_opens_the_failing_tc_with_most_attachments(tmp_path, monkeypatch, capsys):
    from tools import report_browser

    def case(uid, status, n, tc="TC-01"):
        return {"uid": uid, "name": f"{tc}[{uid}]", "status": status, "labels": [{"name": "as_id", "value": tc}],
                "testStage": {"attachments": [{"name": f"a{i}"} for i in range(n)]}}

    files = {"widgets/summary.json": {"reportName": "R", "statistic": {"total": 3}},
             "data/categories.json": {"children": [{"name": "Product defect"}]},
             "data/test-cases/a.json": case("a", "passed", 3), "data/test-cases/b.json": case("b", "failed", 1),
             "data/test-cases/c.json": case("c", "broken", 2), "data/test-cases/u.json": {"uid": "u", "labels": []}}
    facts = report_browser.report_facts(_page(files))
    assert (facts["name"], facts["total"], facts["categories"]) == ("R", 3, ["Product defect"])
    assert facts["case"]["uid"] == "c"
    del files["data/test-cases/b.json"], files["data/test-cases/c.json"]
    assert report_browser.report_facts(_page(files))["case"]["uid"] == "a"  # all passed: a representative case
    monkeypatch.setattr(report_browser, "find_chromium", lambda: None)
    assert report_browser.main(["--report", str(tmp_path / "index.html")]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and err.startswith("error: Chromium not found") and "apt-get install -y chromium" in err


def test_a_report_stopped_by_sigterm_leaves_the_previous_one_and_no_staging(tmp_path, capsys, monkeypatch):
    """SIGTERM while Allure runs (sent here by the stand-in CLI to its parent): one line, exit 143, the
    earlier report untouched, the staging folder and the CLI's process gone."""
    out = tmp_path / "allure-report"
    done = _fake_cli(tmp_path, OUT_ARG + 'mkdir -p "$out" && echo previous > "$out/index.html"\n')
    report.generate(_results(tmp_path), out, cli=done)
    stopper = tmp_path / "stopper"
    stopper.write_text('#!/bin/sh\nsleep 30 &\necho $! > "$(dirname "$0")/cli.pid"\nkill -TERM $PPID\nwait\n')
    stopper.chmod(0o755)
    monkeypatch.setattr(report, "find_cli", lambda: stopper)
    code = report.main(["--results", str(tmp_path / "results"), "--out", str(out), "--no-history"])
    err = capsys.readouterr().err
    assert code == 128 + signal.SIGTERM, err
    assert err.startswith("error: interrupted by SIGTERM") and len(err.splitlines()) == 1, err
    assert (out / "index.html").read_text() == "previous\n"
    assert sorted(p.name for p in out.parent.iterdir()) == sorted(
        ["allure-report", "results", "fake-allure", "stopper", "cli.pid"])
    child = int((tmp_path / "cli.pid").read_text())  # the wrapper's own child, as Allure's JVM is
    deadline = time.monotonic() + 30  # a loaded machine may take a while to deliver and reap
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child), "the CLI's child process outlived the report"


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[-1].split()[0] != "Z"
    except OSError:
        return False
