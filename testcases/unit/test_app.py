"""``python -m harness``: composition (suite, launcher), one-line errors, plan runs, sweeps, suite runs.

Expected numbers are FEATURE.md section 6's worked example (DeepSeek-V3.2 on BI-V100,
16 GiB of KV per rank, tp4, s = 2: one layer 180,224 B/block; 1562 blocks uniform,
2978 split; split rank 0 owns 31 of the 61 layers, split rank 1 owns 30, each plus
one scratch layer). Subprocess tests are few: each starts Python (and Hydra).
"""

from __future__ import annotations

import csv
import json
import re
import subprocess
import sys

import pytest

from contract.errors import ConfigError
from harness import files
from harness.app import validate
from harness.config.compose import compose_config
from harness.paths import CONF_DIR

pytestmark = pytest.mark.unit

LAYER = 180_224
WORKED = ["hardware=bi_v100", "model=deepseek_v32", "parallel=tp4"]


def _harness(args, cwd, timeout=300):
    return subprocess.run([sys.executable, "-m", "harness", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=timeout)


def _harness_in_process(args, capsys, monkeypatch, cwd):
    """``python -m harness``'s main in this process: (exit code, stdout, stderr)."""
    from harness.app.main import main

    monkeypatch.chdir(cwd)
    try:
        code = main(list(args))
    except SystemExit as exc:
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


def _hydra_compose(overrides):
    from hydra import compose, initialize_config_dir

    from harness.config.store import register

    register()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base=None):
        return compose(config_name="config", overrides=overrides, return_hydra_config=True)


# ---- composition ---------------------------------------------------------------------------------


def test_slurm_launcher_composes_to_submitit():
    cfg = _hydra_compose(["launcher=slurm"])
    launcher = cfg.hydra.launcher
    assert launcher._target_ == "hydra_plugins.hydra_submitit_launcher.submitit_launcher.SlurmLauncher"
    assert (launcher.gpus_per_node, launcher.tasks_per_node, launcher.nodes) == (4, 1, 1)
    assert launcher.timeout_min > 0
    assert cfg.hydra.runtime.choices["hydra/launcher"] == "submitit_slurm"


def test_default_launcher_is_hydras_basic_one_and_results_go_under_reports():
    cfg = _hydra_compose([])
    assert cfg.hydra.launcher._target_ == "hydra._internal.core_plugins.basic_launcher.BasicLauncher"
    assert cfg.hydra.runtime.choices["launcher"] == "local"
    assert cfg.hydra.callbacks.sweep._target_ == "harness.app.callback.SweepCallback"
    raw = (CONF_DIR / "config.yaml").read_text()
    assert "dir: ${report.results_dir}/runs/" in raw and "dir: ${report.results_dir}/sweeps/" in raw


def test_suite_group_and_mode():
    cfg = compose_config([])
    assert cfg.suite.mode == "suite" and "mode" not in cfg  # a group: `modle` still suggests `model`
    assert list(cfg.suite.tcs) == [f"TC-0{n}" for n in range(1, 8)]
    assert list(compose_config(["suite=quick"]).suite.tcs) == ["TC-01", "TC-02"]
    assert list(compose_config(["suite=l2"]).suite.tcs) == ["TC-06", "TC-07"]
    assert compose_config(["mode=plan", "launcher=slurm"]).suite.mode == "plan"
    assert compose_config(["mode=plan", "suite=quick"]).suite.mode == "plan"


# ---- bad input: validated before Hydra, in-process ---------------------------------------------------


@pytest.mark.parametrize("argv, expected", [
    (["model=foo"], "model='foo': unknown option; allowed: deepseek_v3,"),
    (["layerwise.spilt_size=2"], "layerwise.spilt_size: no such key (did you mean split_size?)"),
    (["layerwise.split_size=two"], "layerwise.split_size='two': must be an int"),
    (["nothing.here=1"], "nothing: no such key"),
    (["-m", "model="], "model='': no value (an empty sweep); give one or more of deepseek_v3,"),
    (["-m", "layerwise.split_size="], "layerwise.split_size='': no value (an empty sweep)"),
    (["-m", "model=choice()"], "model='': no value (an empty sweep)"),
    (["-m", "model=deepseek_v32,nope"], "model='nope': unknown option"),
    (["-m", "layerwise.split_size=1,x"], "layerwise.split_size='x': must be an int"),
    (["model=deepseek_v32,qwen3_5_moe"], "one value here; sweeps (a,b / range()) need `python -m harness -m"),
    (["suite=nope"], "suite='nope': unknown option; allowed: all, l1, l2, quick"),
    (["launcher=nope"], "launcher='nope': unknown option; allowed: local, slurm"),
    (["mode=fast"], "mode='fast': unknown option; allowed: plan, suite"),
    (["suite.mode=fast"], "suite.mode='fast': allowed: suite, plan"),
    (["suite.tcs=[TC-09]"], "suite.tcs='TC-09': allowed: TC-01,"),
    (["mode=plan", "hydra.run.dir=/proc/lwsplit/x"], "hydra.run.dir='/proc/lwsplit/x': a writable directory"),
    (["-m", "mode=plan", "hydra.sweep.dir=/proc/lwsplit"], "hydra.sweep.dir='/proc/lwsplit': a writable directory"),
    (["mode=plan", "report.results_dir=/proc/lwsplit"], "report.results_dir='/proc/lwsplit': a writable directory"),
])
def test_mistakes_are_one_line_before_hydra_starts(argv, expected):
    with pytest.raises(ConfigError) as info:
        validate.check_invocation(validate.parse_argv(argv))
    assert expected in str(info.value)
    assert "\n" not in str(info.value)


def test_results_dir_check_removes_the_folder_it_probed_and_keeps_the_parents_the_run_writes_under(tmp_path):
    target = tmp_path / "a" / "b" / "c"
    files.check_writable(target, "hydra.run.dir")
    assert not target.exists() and (tmp_path / "a" / "b").is_dir()
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(ConfigError, match="is not a directory"):
        files.check_writable(blocker / "x", "hydra.run.dir")


def test_a_refused_results_dir_leaves_nothing_behind(tmp_path, monkeypatch):
    def unwritable(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(files.tempfile, "TemporaryFile", unwritable)
    with pytest.raises(ConfigError, match="cannot write .*Permission denied"):
        files.check_writable(tmp_path / "a" / "b" / "c", "hydra.run.dir")
    assert list(tmp_path.iterdir()) == []


def test_a_parent_removed_meanwhile_by_a_run_started_together_is_made_again(tmp_path, monkeypatch):
    """Two sweeps started in the same second share ``reports/sweeps/<date>``: the other one's check
    removing a parent while this one creates the chain under it is not this run's error."""
    from pathlib import Path

    shared, mine = tmp_path / "sweeps", tmp_path / "sweeps" / "2026-12-01" / "run-1"
    real_mkdir, removed = Path.mkdir, []

    def mkdir(self, *args, **kwargs):
        if self == mine.parent and not removed:  # the other run's check removes the parent it made, now
            removed.append(True)
            shared.rmdir()
        return real_mkdir(self, *args, **kwargs)

    monkeypatch.setattr(Path, "mkdir", mkdir)
    files.check_writable(mine, "hydra.sweep.dir")
    assert removed and not mine.exists() and mine.parent.is_dir()


BAD_INPUT = [
    ["model=foo"],                                      # unknown config group option
    ["layerwise.spilt_size=2"],                         # misspelled key
    ["parallel.world_size=1.5"],                        # wrong type
    ["cache.nonexistent=1"],                            # override on a key that does not exist
    ["-m", "layerwise.split_size="],                    # empty sweep
    ["-m", "mode=plan", "hydra.sweep.dir=/proc/lwsplit/sweep"],  # results dir that cannot be written
]
BAD_INPUT_PROCESS = [BAD_INPUT[0], BAD_INPUT[-1]]
"""Also run as a real ``python -m harness`` process: one single run and one sweep."""


def _assert_one_error_line(code, out, err, tmp_path):
    assert code == 2, err[-2000:]
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert "Traceback" not in out + err
    assert not list(tmp_path.iterdir())  # nothing written


@pytest.mark.parametrize("argv", BAD_INPUT)
def test_bad_input_exits_2_with_one_error_line(tmp_path, capsys, monkeypatch, argv):
    """``python -m harness``'s main (every mistake; the exit status is what it returns)."""
    _assert_one_error_line(*_harness_in_process(argv, capsys, monkeypatch, tmp_path), tmp_path)


@pytest.mark.parametrize("argv", BAD_INPUT_PROCESS)
def test_bad_input_exits_non_zero_with_one_error_line(tmp_path, argv):
    proc = _harness(argv, tmp_path, timeout=120)
    _assert_one_error_line(proc.returncode, proc.stdout, proc.stderr, tmp_path)


# ---- plan mode and a plan sweep --------------------------------------------------------------------


def test_plan_run_writes_the_worked_example(tmp_path, capsys, monkeypatch):
    run_dir = tmp_path / "run"
    code, out, err = _harness_in_process(["mode=plan", *WORKED, "layerwise=s2", f"hydra.run.dir={run_dir}"],
                                         capsys, monkeypatch, tmp_path)
    assert code == 0, err[-2000:]
    result = json.loads((run_dir / "result.json").read_text())
    assert (result["mode"], result["status"]) == ("plan", "planned")
    plan = result["plan"]
    assert (plan["n_blocks"], plan["uniform_n_blocks"]) == (2978, 1562)
    assert plan["capacity_gain"] == pytest.approx(2978 / 1562)
    assert plan["budget_bytes"] == 16 * 1024**3
    # split groups (0, 1), (2, 3): split rank 0 owns 31 layers, split rank 1 owns 30; each + scratch
    assert [r["estimated_bytes"] for r in plan["ranks"]] == [2978 * n * LAYER for n in (32, 31, 32, 31)]
    assert plan["peak_bytes"] == 2978 * 32 * LAYER
    assert plan["uniform_peak_bytes"] == 2978 * 61 * LAYER
    assert (plan["peak_layers"], plan["limit_layers"]) == (32, 32)
    assert result["config"]["hbm_mib_per_card"] - result["config"]["reserved_mib_per_card"] == 16384
    assert (run_dir / ".hydra" / "config.yaml").is_file()
    assert "2978" in out


def test_the_app_leaves_the_root_logger_as_it_found_it(tmp_path, capsys, monkeypatch):
    """Hydra's job logging adds root handlers on the streams of that moment (closed by a caller's capture
    since) and sets the level: after an in-process run they are gone and the caller's are back."""
    import logging

    mine = logging.NullHandler()
    logging.root.addHandler(mine)
    try:
        before = (list(logging.root.handlers), logging.root.level)
        code, _, err = _harness_in_process(["mode=plan", "suite=quick", f"hydra.run.dir={tmp_path / 'run'}"],
                                           capsys, monkeypatch, tmp_path)
        assert code == 0, err[-2000:]
        assert (list(logging.root.handlers), logging.root.level) == before, "a handler or level Hydra set outlived the run"
    finally:
        logging.root.removeHandler(mine)


@pytest.mark.slow
def test_plan_sweep_writes_csv_markdown_and_svg(tmp_path, capsys, monkeypatch):
    sweep_dir = tmp_path / "sweep"
    code, out, err = _harness_in_process(["-m", "mode=plan", *WORKED, "layerwise=s2,s4", f"hydra.sweep.dir={sweep_dir}"],
                                         capsys, monkeypatch, tmp_path)
    assert code == 0, err[-2000:]
    assert "[1/2] layerwise=s2: n_blocks 2978" in out
    assert "[2/2] layerwise=s4: n_blocks 5607" in out
    rows = list(csv.DictReader((sweep_dir / "results.csv").open()))
    assert [(r["layerwise"], r["n_blocks"], r["status"]) for r in rows] == [("s2", "2978", "planned"),
                                                                          ("s4", "5607", "planned")]
    assert [r["limit_layers"] for r in rows] == ["32", "17"]
    md = (sweep_dir / "results.md").read_text()
    assert "| 2978 | 1562 | 1.91x |" in md and "| 5607 | 1562 | 3.59x |" in md
    assert "16,384 MiB reserved" in md
    chart = (sweep_dir / "results.svg").read_text()
    assert chart.startswith("<svg") and chart.count('class="series"') == 2  # one line per panel
    assert (sweep_dir / "0" / "result.json").is_file() and (sweep_dir / "1" / "result.json").is_file()


# ---- suite mode (rank processes: slower) ------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.dist
def test_single_configuration_suite_run(tmp_path):
    run_dir = tmp_path / "run"
    proc = _harness(["model=deepseek_v32", "layerwise=s2", "suite.tcs=[TC-02]", f"hydra.run.dir={run_dir}"],
                    tmp_path)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    result = json.loads((run_dir / "result.json").read_text())
    assert (result["mode"], result["status"]) == ("suite", "passed")
    assert result["counts"].get("passed", 0) >= 1 and not result["counts"].get("failed")
    assert list(result["tcs"]) == ["TC-02"]
    cases = result["tcs"]["TC-02"]["cases"]  # the job's own case among TC-02's variants of it
    case = next(c for c in cases if c["case"] == result["measured"]["case"])
    assert (case["model"], case["split_size"], case["outcome"]) == ("deepseek_v32", 2, "passed")
    measured = result["measured"]["ranks"]
    assert len(measured) == 4 and all(r["measured_bytes"] == r["estimated_bytes"] for r in measured)
    assert list((run_dir / "allure-results").glob("*-result.json"))
    assert re.search(r"\[1/1\] model=deepseek_v32 layerwise=s2 suite.tcs=\[TC-02\]: \d+ passed", proc.stdout)


@pytest.mark.slow
@pytest.mark.dist
def test_failed_job_is_reported_and_the_sweep_exits_non_zero(tmp_path):
    sweep_dir = tmp_path / "sweep"
    proc = _harness(["-m", "model=deepseek_v32", "layerwise=s2", "suite.tcs=[TC-02]",
                     "implementation=reference,mutant_max_block_count", f"hydra.sweep.dir={sweep_dir}"], tmp_path)
    assert proc.returncode == 1, (proc.stdout + proc.stderr)[-3000:]
    assert re.search(r"\[1/2\] implementation=reference: \d+ passed", proc.stdout)
    assert re.search(r"\[2/2\] implementation=mutant_max_block_count: FAILED \d+ failed", proc.stdout)
    rows = {r["implementation"]: r for r in csv.DictReader((sweep_dir / "results.csv").open())}
    assert rows["reference"]["status"] == "passed" and rows["mutant_max_block_count"]["status"] == "failed"
    summary = (sweep_dir / "results.md").read_text()
    assert "| **✗ failed** |" in summary
    if (sweep_dir / "allure-report" / "index.html").is_file():  # one combined report (when the Allure CLI is here)
        assert "(allure-report/index.html)" in summary
    assert (sweep_dir / "1" / "pytest.log").read_text().count("failed") >= 1


# ---- the command line and a job's return, read with public APIs ------------------------------------


def test_the_command_line_is_read_with_hydras_options():
    """``validate.parse_argv`` reads the options ``@hydra.main`` takes (its own parser is not public): each of
    them parses as Hydra's does, and a command that only shows something is not checked."""
    inv = validate.parse_argv(["-m", "model=a,b", "hydra.job.name=x"])
    assert (inv.multirun, inv.overrides, inv.hydra_overrides, inv.check) == (True, ["model=a,b"], ["hydra.job.name=x"], True)
    for shows in (["--cfg", "job"], ["--info"], ["-i", "defaults"], ["--hydra-help"], ["-cn", "other"], ["-h"]):
        assert not validate.parse_argv(shows).check, shows
    args = validate.command_line_parser().parse_args(["--cfg", "all", "--resolve", "-p", "model", "-sc", "install=bash"])
    assert (args.cfg, args.resolve, args.package, args.shell_completion, args.overrides) == (
        "all", True, "model", True, ["install=bash"])


@pytest.mark.parametrize("argv, expected", [
    (["--cfg", "nope"], "error: argument --cfg/-c: invalid choice: 'nope'"),
    (["--no-such-option"], "error: unrecognized arguments: --no-such-option"),
])
def test_a_bad_option_is_one_usage_line(argv, expected, capsys):
    with pytest.raises(SystemExit) as info:
        validate.parse_argv(argv)
    err = capsys.readouterr().err.strip()
    assert info.value.code == 2 and err.startswith(expected) and err.endswith("(see python -m harness --help)"), err
    assert "\n" not in err, err


def test_a_job_that_raised_is_an_error_row_without_a_second_report(capsys):
    """A job's exception, which Hydra's public ``JobReturn.return_value`` would raise again (writing a line of its
    own), is read from the harness's record of it; a completed job's return is its result."""
    from hydra.core.utils import JobReturn, JobStatus

    from harness.app import status as st
    from harness.app.callback import result_of_return

    st.reset()
    failed = JobReturn(status=JobStatus.FAILED)
    failed.return_value = ValueError("boom")
    st.record_raised(3, ValueError("boom"))
    assert result_of_return(failed, 3) == {"status": "error", "message": "ValueError: boom"}
    assert result_of_return(failed, 4) == {"status": "error", "message": "the job returned no result"}
    done = JobReturn(status=JobStatus.COMPLETED)
    done.return_value = {"status": "passed"}
    assert result_of_return(done, 0) == {"status": "passed"}
    st.reset()
    assert st.raised(3) is None
    assert capsys.readouterr().err == ""


# ---- an interrupted sweep's summary --------------------------------------------------------------


@pytest.mark.parametrize("finished, expected", [
    ({}, "finished jobs: none;"),
    ({0: "planned"}, "finished jobs: 1 planned (job 0);"),
    ({0: "planned", 1: "rejected", 2: "planned"}, "finished jobs: 2 planned (jobs 0, 2), 1 rejected (job 1);"),
    ({0: "passed", 1: "failed"}, "finished jobs: 1 passed (job 0), 1 failed (job 1);"),
], ids=["none", "one-planned", "planned-and-rejected", "passed-and-failed"])
def test_an_interrupted_sweep_counts_the_jobs_that_reached_each_status(monkeypatch, finished, expected):
    """Each status with the number of jobs that reached it and their numbers: "0 planned" read as no job
    planned when it meant job 0 planned."""
    from harness.app import main as app_main
    from harness.app import status as st

    monkeypatch.setattr(st, "finished_jobs", lambda: dict(finished))
    line = app_main.interrupted_summary("SIGTERM")
    assert line.startswith("interrupted by SIGTERM: stopped between jobs; ") and "\n" not in line, line
    assert expected in line, line
