"""Hydra callback: a progress line per job, and a finished sweep's results.csv/.md/.svg.

Registered in ``conf/config.yaml`` (``hydra.callbacks.sweep``). With a remote
launcher (Slurm) the job hooks run in the job's process and only
``on_multirun_start``/``on_multirun_end`` here, so the summary is built from the
``result.json`` files in the sweep directory, against the job list expanded from the
sweep's overrides: a job that left no result is a ``missing`` row, never dropped.
"""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path
from typing import Any, Optional

from hydra.core.utils import JobStatus
from hydra.experimental.callback import Callback
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf

from contract.errors import UserError
from harness.app import aggregate, progress
from harness.app import status as st
from harness.app.claim import claim, is_ours
from harness.app.job import RESULT_FILE
from harness.app.progress import say
from harness.app.validate import sweep_jobs
from harness.files import write_atomic
from harness.reporting import report
from harness.signals import signals_deferred
from harness.usage import fail

OUTPUTS = ("results.csv", "results.md", "results.svg")


class SweepCallback(Callback):
    """Progress lines and the sweep summary (see the module docstring)."""

    def __init__(self) -> None:
        self.jobs: list[list[str]] = []
        self.varying: set[str] = set()
        self.returns: dict[int, dict] = {}

    # ---- per job ----------------------------------------------------------------------------

    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        _claim(config, "hydra.run.dir", Path(str(config.hydra.run.dir)))

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        _claim(config, "hydra.sweep.dir", Path(str(config.hydra.sweep.dir)))
        self.jobs = expected_jobs(config)
        self.varying = varying_keys(self.jobs)
        self.returns = {}
        say(f"sweep: {_jobs(len(self.jobs))} -> {config.hydra.sweep.dir}")

    def on_job_start(self, config: DictConfig, **kwargs: Any) -> None:
        job_dir = Path(config.hydra.runtime.output_dir)
        if not is_ours(job_dir):  # a sweep's job folder (or a run folder resolved anew): no two jobs share one
            _claim(config, "hydra.sweep.subdir" if _multirun(config) else "hydra.run.dir", job_dir, fresh=False)
        stale = job_dir / RESULT_FILE
        stale.unlink(missing_ok=True)  # never read an old result
        if OmegaConf.select(config, "suite.mode") == "suite" and _multirun(config):
            index, total = self._position(config)
            say(progress.start_line(index, total, self._shown(config)))

    def on_job_end(self, config: DictConfig, job_return: Any, **kwargs: Any) -> None:
        index, total = self._position(config)
        result = result_of_return(job_return, index - 1)
        self.returns[index - 1] = result
        st.record(index - 1, result.get("status", st.ERROR))
        say(progress.job_line(index, total, self._shown(config), result))
        if not _multirun(config):
            say(f"result: {Path(config.hydra.runtime.output_dir) / RESULT_FILE}")

    def _shown(self, config: DictConfig) -> list[str]:
        """The overrides that tell this sweep's jobs apart (all of them outside a sweep)."""
        overrides = list(config.hydra.overrides.task)
        if not _multirun(config) or not self.varying:
            return overrides
        return [o for o in overrides if _key(o) in self.varying]

    def _position(self, config: DictConfig) -> tuple[int, int]:
        if not _multirun(config):
            return 1, 1
        num = int(OmegaConf.select(config, "hydra.job.num", default=0))
        return num + 1, max(len(self.jobs), num + 1)

    # ---- the sweep ----------------------------------------------------------------------------

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        sweep_dir = Path(str(config.hydra.sweep.dir))
        jobs = self.jobs or expected_jobs(config)
        results = collect(sweep_dir, jobs, self.returns)
        for result in results:
            st.record(result["job"]["num"], result.get("status", st.ERROR))
        allure_link = combined_allure_report(sweep_dir, results)
        try:
            paths = write_summary(sweep_dir, results, command=sweep_command(config), allure_report=allure_link)
        except OSError as exc:
            st.record("sweep summary", st.ERROR)
            print(f"error: cannot write the sweep summary into {sweep_dir}: {exc.strerror or exc}", file=sys.stderr)
            return
        rows = aggregate.rows(results)
        bad = aggregate.failed(rows)
        tally = ", ".join(f"{sum(r['status'] == s for r in rows)} {s}" for s in dict.fromkeys(r["status"] for r in rows))
        say(f"sweep done: {_jobs(len(rows))} ({tally}) -> {paths[1]}")
        for r in bad:
            counts = {k: r[k] for k in progress.COUNT_ORDER if r.get(k)}
            say(f"  {r['status'].upper()} job {r['job']} ({r['overrides']}): {r['message'] or progress.counts_text(counts)}")


def _claim(config: DictConfig, key: str, folder: Path, *, fresh: bool = True) -> None:
    """``claim.claim`` the folder, or end the command with one ``error:`` line (exit 2) before Hydra
    writes there (a ``SystemExit``: Hydra turns a callback's exceptions into warnings)."""
    given = [o.split("=", 1)[1] for o in OmegaConf.select(config, "hydra.overrides.hydra", default=[]) or []
             if o.lstrip("+~").split("=", 1)[0] == key]
    try:
        claim(folder, key, given[-1] if given else str(folder), fresh=fresh)
    except UserError as exc:
        fail(exc)


def _multirun(config: DictConfig) -> bool:
    return OmegaConf.select(config, "hydra.mode") == RunMode.MULTIRUN


def _jobs(n: int) -> str:
    return f"{n} job" if n == 1 else f"{n} jobs"


def expected_jobs(config: DictConfig) -> list[list[str]]:
    """The sweep's job overrides in job-number order: the sweeper's own list (``validate.sweep_jobs``) of
    ``hydra.sweeper.params`` and the task's overrides, as it runs them."""
    params = OmegaConf.select(config, "hydra.sweeper.params") or {}
    overrides = [f"{k}={v}" for k, v in params.items()] + list(config.hydra.overrides.task)
    return sweep_jobs(overrides, str(config.hydra.sweeper._target_))


def _key(override: str) -> str:
    return override.split("=", 1)[0].lstrip("+~")


def varying_keys(jobs: list[list[str]]) -> set[str]:
    """Keys whose value is not the same in every job."""
    values: dict[str, set[str]] = {}
    for job in jobs:
        for override in job:
            values.setdefault(_key(override), set()).add(override)
    return {key for key, seen in values.items() if len(seen) > 1}


def result_of_return(job_return: Any, job: int) -> dict:
    """Job ``job``'s result dict from Hydra's ``JobReturn``; an exception the job raised (``status.raised``:
    ``JobReturn.return_value`` would raise it again) becomes an ``error`` result."""
    completed = getattr(job_return, "status", None) == JobStatus.COMPLETED
    value = job_return.return_value if completed else st.raised(job)
    if completed and isinstance(value, dict):
        return value
    message = f"{type(value).__name__}: {value}" if isinstance(value, BaseException) else "the job returned no result"
    return {"status": st.ERROR, "message": message}


def collect(sweep_dir: Path, jobs: list[list[str]], returns: Optional[dict] = None) -> list[dict]:
    """One result per expected job: its result.json, else what the job returned here, else ``missing``."""
    found: dict[int, dict] = {}
    for path in sorted(sweep_dir.rglob(RESULT_FILE)):
        try:
            result = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        num = (result.get("job") or {}).get("num")
        if isinstance(num, int):
            found[num] = result
    out = []
    for num, overrides in enumerate(jobs):
        result = found.get(num) or dict((returns or {}).get(num) or {})
        if not result:
            result = {"status": st.MISSING, "message": f"no {RESULT_FILE} (the job died or was killed)"}
        result.setdefault("job", {})
        result["job"] = {"num": num, "overrides": overrides, **result["job"]}
        out.append(result)
    return out


def sweep_command(config: DictConfig) -> str:
    """The sweep's command line, as the table's caption (hydra.* overrides left out)."""
    return " ".join(["python -m harness -m", *config.hydra.overrides.task])


ALLURE_REPORT_DIR = "allure-report"


def allure_results_of(sweep_dir: Path, results: list[dict]) -> list[Path]:
    """The jobs' Allure results folders that hold results (suite mode), in job order."""
    out = []
    for result in results:
        folder = result.get("allure_results")
        if folder and any(Path(folder).glob("*-result.json")):
            out.append(Path(folder))
    return out


def combined_allure_report(sweep_dir: Path, results: list[dict], cli: Optional[Path] = None) -> str:
    """One Allure report of every job's tests in ``<sweep>/allure-report``; its link relative to the
    sweep directory, or "" (a plan sweep, no Allure CLI, or a failed build: said on one line)."""
    folders = allure_results_of(sweep_dir, results)
    if not folders:
        return ""
    try:
        index = report.generate(folders, sweep_dir / ALLURE_REPORT_DIR, cli=cli,
                                name=f"{report.REPORT_NAME}: sweep {sweep_dir.name}")
    except report.ReportError as exc:
        say(f"sweep: no combined Allure report ({exc})")
        return ""
    say(f"sweep: Allure report of {len(folders)} job{'' if len(folders) == 1 else 's'} -> {index}")
    return str(index.relative_to(sweep_dir))


def write_summary(sweep_dir: Path, results: list[dict], command: str = "",
                  allure_report: str = "") -> tuple[Path, Path, Path]:
    """results.csv, results.md and results.svg in ``sweep_dir``, each written atomically; a signal while they
    are written waits for all three (``signals_deferred``), so a sweep never has one without the others."""
    rows = aggregate.rows(results)
    texts = (aggregate.to_csv(rows), aggregate.to_markdown(rows, results, command=command,
                                                           allure_report=allure_report), aggregate.to_svg(rows))
    with signals_deferred((signal.SIGINT, signal.SIGTERM, signal.SIGHUP)):
        csv_path, md_path, chart_path = (write_atomic(sweep_dir / name, text) for name, text in zip(OUTPUTS, texts))
    return csv_path, md_path, chart_path
