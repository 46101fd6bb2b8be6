"""A sweep through launcher=slurm (hydra-submitit-launcher) against a real Slurm.

Runs where ``sbatch`` is on PATH and a controller answers (``bash scripts/start_slurm.sh``
starts a single-node one; .ci/run does, and sets LWSPLIT_REQUIRE_SLURM=1 so that a
controller that does not answer fails this test instead of skipping it). Two jobs, one
Slurm job each: ``mode=plan`` and ``mode=suite suite=quick`` (TC-01 and TC-02 on a rank
pool of 4 inside the Slurm job) for deepseek_v32 at s = 2. Checked: each job ran under
Slurm (submitit's job environment names the Slurm job id), its result.json says what it
did, the plan's block counts equal the oracle's, the TC job's cases all passed, and the
sweep's aggregate has one row per job.
"""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from harness import oracle
from testcases import ROOT

pytestmark = pytest.mark.meta

SWEEP_TIMEOUT_S = 600
MODEL, LAYERWISE = "deepseek_v32", "s2"


def _slurm_or_skip() -> None:
    if shutil.which("sbatch") is None:
        pytest.skip("sbatch not on PATH: no Slurm on this host (bash scripts/start_slurm.sh installs and starts one)")
    try:
        up = subprocess.run(["sinfo", "-h", "-o", "%a %T"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        up = subprocess.CompletedProcess([], 1, "", str(exc))
    if up.returncode != 0 or "up" not in up.stdout:
        reason = f"no Slurm controller answers (sinfo: {(up.stderr or up.stdout).strip()[:200]})"
        if os.environ.get("LWSPLIT_REQUIRE_SLURM") == "1":
            pytest.fail(reason)
        pytest.skip(reason + "; start one with bash scripts/start_slurm.sh")


@pytest.mark.slow
def test_sweep_on_slurm_runs_each_job_as_a_slurm_job(tmp_path):
    _slurm_or_skip()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "LWSPLIT_"))}
    env["OMP_NUM_THREADS"] = "1"
    cmd = [
        sys.executable, "-m", "harness", "-m", "launcher=slurm",
        # a CPU test node: no GPUs, one core and 2 GB per job, the cluster's default partition
        "hydra.launcher.gpus_per_node=null", "hydra.launcher.cpus_per_task=1", "hydra.launcher.mem_gb=2",
        "hydra.launcher.timeout_min=10", f"report.results_dir={tmp_path}",
        "mode=plan,suite", "suite=quick", f"model={MODEL}", f"layerwise={LAYERWISE}",
    ]
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=SWEEP_TIMEOUT_S)
    assert done.returncode == 0, f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    (sweep,) = [p for p in (tmp_path / "sweeps").glob("*/*") if p.is_dir()]

    logs = sorted((sweep / ".submitit").glob("*_*/*_log.out"))
    assert len(logs) == 2, list((sweep / ".submitit").rglob("*"))
    for log in logs:
        text = log.read_text()
        started = re.search(r"Starting with JobEnvironment\(job_id=(\d+)_(\d+),", text)
        assert started, text[-2000:]  # submitit's Slurm job environment: a real Slurm array job
        assert log.name.startswith(f"{started.group(1)}_{started.group(2)}_")
        assert "Job completed successfully" in text, text[-2000:]

    plan_job = json.loads((sweep / "0" / "result.json").read_text())
    suite_job = json.loads((sweep / "1" / "result.json").read_text())
    assert (plan_job["mode"], plan_job["status"]) == ("plan", "planned")
    assert (suite_job["mode"], suite_job["status"], suite_job["exit_code"]) == ("suite", "passed", 0)
    assert suite_job["counts"].get("passed", 0) > 0
    assert set(suite_job["counts"]) == {"passed"}, suite_job["counts"]

    from harness.suites.case import resolve

    run = resolve((f"model={MODEL}", f"layerwise={LAYERWISE}", "parallel=tp4", "hardware=cpu")).run
    want = oracle.expected_block_counts(run, oracle.run_budget_bytes(run))
    for job in (plan_job, suite_job):
        assert (job["plan"]["n_blocks"], job["plan"]["uniform_n_blocks"]) == want

    with open(sweep / "results.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert [(r["job"], r["status"], r["mode"]) for r in rows] == [("1", "planned", "plan"), ("2", "passed", "suite")]  # jobs count from 1
