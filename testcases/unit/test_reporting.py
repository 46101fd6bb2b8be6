"""Allure plumbing: attachment builders, results metadata, and the offline report end to end."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import textwrap
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


def test_memory_chart_is_png():
    png = attachments.memory_chart_png(
        [0, 1, 2, 3], estimated_bytes=[5 << 30] * 4, measured_bytes=[5 << 30] * 4, uniform_bytes=[9 << 30] * 4
    )
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    assert len(png) > 1000


def test_memory_chart_rejects_wrong_length():
    with pytest.raises(ValueError, match="measured"):
        attachments.memory_chart_png([0, 1], estimated_bytes=[1, 2], measured_bytes=[1])


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
    assert categories["Product defect"]["matchedStatuses"] == ["failed"]
    assert categories["Harness or infrastructure error"]["matchedStatuses"] == ["broken"]
    upstream = categories["Expected failure: upstream owner rule"]
    assert upstream["matchedStatuses"] == ["skipped"]
    # Allure 2 matches the whole message with DOTALL; an xfail message spans lines
    regex = re.compile(upstream["messageRegex"], re.DOTALL)
    assert regex.fullmatch("XFAIL upstream owner rule: split rank 1 owns all\n\nAssertionError")
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


def _fake_cli(tmp_path, body: str):
    cli = tmp_path / "fake-allure"
    cli.write_text("#!/bin/sh\n" + body)
    cli.chmod(0o755)
    return cli


def test_failed_generation_leaves_previous_report(tmp_path):
    out = tmp_path / "reports" / "allure-report"
    out.mkdir(parents=True)
    (out / "index.html").write_text("previous")
    # writes half a report into -o (argument 5), then fails
    cli = _fake_cli(tmp_path, 'mkdir -p "$5" && echo half > "$5/index.html"; echo "boom" >&2; exit 1\n')
    results = _results(tmp_path)
    with pytest.raises(report.ReportError, match="exit 1.*boom"):
        report.generate(results, out, cli=cli)
    assert sorted(p.name for p in results.iterdir()) == ["x-result.json"]
    assert (out / "index.html").read_text() == "previous"
    assert sorted(p.name for p in out.parent.iterdir()) == ["allure-report"]


def test_successful_generation_replaces_previous_report(tmp_path):
    out = tmp_path / "reports" / "allure-report"
    out.mkdir(parents=True)
    (out / "old.txt").write_text("old")
    cli = _fake_cli(tmp_path, 'mkdir -p "$5" && echo new > "$5/index.html"\n')
    assert report.generate(_results(tmp_path), out, cli=cli) == out / "index.html"
    assert sorted(p.name for p in out.iterdir()) == ["index.html"]
    assert sorted(p.name for p in out.parent.iterdir()) == ["allure-report"]


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
        attachments.attach_rank_logs({1: "Traceback: rank 1 broke"})
        assert 1 == 2

    @allure.id("TC-06")
    @pytest.mark.xfail(reason="upstream owner rule: split rank 1 owns every full layer", strict=True)
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


def test_report_end_to_end(tmp_path):
    cli = report.find_cli()
    if cli is None:
        pytest.skip("Allure CLI not installed; run: bash scripts/install_allure.sh")
    if shutil.which("java") is None:
        pytest.skip("Allure 2 CLI needs Java, which is not on PATH")

    (tmp_path / "test_tiny.py").write_text(TINY_SUITE)
    results = tmp_path / "allure-results"
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--alluredir={results}", "test_tiny.py"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )
    assert run.returncode == 1, run.stdout + run.stderr  # TC-02 fails on purpose
    allure_meta.write_allure_meta(results, **_env())

    index = report.generate(results, tmp_path / "report", cli=cli)
    page = index.read_text()
    assert "googletagmanager" not in page  # ALLURE_NO_ANALYTICS keeps the tracking script out
    cases = _test_cases(page)

    assert {tc: case["status"] for tc, case in cases.items()} == {
        "TC-01": "passed", "TC-02": "failed", "TC-06": "skipped",
    }
    assert cases["TC-01"]["name"] == "allocation"
    categories = {tc: [c["name"] for c in case["extra"].get("categories", [])] for tc, case in cases.items()}
    assert categories == {
        "TC-01": [], "TC-02": ["Product defect"], "TC-06": ["Expected failure: upstream owner rule"],
    }
    attached = {a["name"]: a["type"] for a in cases["TC-01"]["testStage"]["attachments"]}
    assert attached == {
        "layout (table)": "text/html", "layout.csv": "text/csv",
        "per-rank KV memory": "image/png", "composed config": "application/yaml",
    }
    assert [a["name"] for a in cases["TC-02"]["testStage"]["attachments"]] == ["rank 1 log"]

    environment = json.loads(report.embedded_files(page)["widgets/environment.json"])
    assert {"name": "torch", "values": ["2.13.0"]} in environment
    assert {"name": "git_commit", "values": ["abc123"]} in environment
