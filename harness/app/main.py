"""``python -m harness``: check the command line, then hand it to Hydra (``run`` is the job).

Exit status: 0 when every job passed (or planned; a rejected plan is a result),
1 when a job failed, errored or left no result, 2 for a mistake on the command line
(one ``error:`` line, nothing run).
"""

from __future__ import annotations

import logging
import os
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Optional, Sequence

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.errors import CompactHydraException
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf

from contract.errors import ConfigError
from harness import signals
from harness.app import status as st
from harness.app.validate import check_invocation, parse_argv
from harness.config.store import register
from harness.paths import CONF_DIR, CONFIG_NAME
from harness.rankpool.rendezvous import remove_stale_dirs
from harness.usage import command, fail

register()  # base_config must be in the ConfigStore before Hydra composes


@hydra.main(config_path=str(CONF_DIR), config_name=CONFIG_NAME, version_base=None)
def run(cfg: DictConfig) -> dict:
    """One Hydra job: one configuration (``harness.app.job``), composed from the job's overrides."""
    # harness.app.job imports pytest and the suites (JOBCOST, python -X importtime): --help needs neither
    from harness.app.job import run_job

    hc = HydraConfig.get()
    multirun = hc.mode == RunMode.MULTIRUN
    num = OmegaConf.select(hc, "job.num", default=0) if multirun else 0
    try:
        with _working_dir(Path(hc.runtime.cwd)):  # hydra.job.chdir=true: relative paths still mean the user's folder
            result = run_job(
                list(hc.overrides.task), dict(hc.runtime.choices), Path(hc.runtime.output_dir), int(num or 0),
                quiet=multirun,
            )
    except Exception as exc:  # Hydra keeps it as the job's return; the sweep's summary reads it from here
        st.record_raised(int(num or 0), exc)
        raise
    st.record(int(num or 0), result["status"])
    return result


@command
def main(argv: Optional[Sequence[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    with signals.stop_on_signals():  # from the pre-flight on: SIGTERM there is one line too, not a silent end
        try:
            check_invocation(parse_argv(argv))
        except KeyboardInterrupt as exc:
            name = getattr(exc, "signal_name", None) or signals.stop_requested() or "SIGINT"
            print(f"interrupted by {name} while checking the command line: no job ran, nothing was written",
                  file=sys.stderr)
            return signals.exit_code(name)
    st.reset()
    saved = sys.argv
    sys.argv = [saved[0] if saved else "harness", *argv]
    try:
        with signals.stop_on_signals(), _hydra_errors_raised(), root_logging_kept():
            run()
    except CompactHydraException as exc:  # Hydra's own option errors (--config-name nope): one line
        fail(hydra_option_error(argv, exc))
    except KeyboardInterrupt as exc:  # Ctrl-C, SIGTERM or SIGHUP: stop between jobs, say what finished
        name = getattr(exc, "signal_name", None) or signals.stop_requested() or "SIGINT"
        print(interrupted_summary(name), file=sys.stderr)
        return signals.exit_code(name)
    finally:
        sys.argv = saved
        remove_stale_dirs()  # temp folders of earlier runs that were killed outright (SIGKILL)
    failed = st.failed_jobs()
    if failed:
        print(f"failed: {len(failed)} job{'' if len(failed) == 1 else 's'} (listed above)", file=sys.stderr)
        return 1
    return 0


@contextmanager
def _working_dir(folder: Path) -> Iterator[None]:
    """Run in ``folder`` (the command's own working directory), back where Hydra put the job afterwards: a
    relative ``model_path``, topology or results path means what it meant on the command line."""
    here = os.getcwd()
    if Path(here) == folder:
        yield
        return
    os.chdir(folder)
    try:
        yield
    finally:
        os.chdir(here)


@contextmanager
def root_logging_kept() -> Iterator[None]:
    """The root logger as it was before, after Hydra ran in this process: Hydra's job logging adds handlers on
    the standard output and the job's log file of that moment and sets the level; they are closed and
    removed, and the caller's handlers and level are back (a caller running the app in-process, a test)."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        yield
    finally:
        for handler in list(root.handlers):
            if handler not in handlers:
                root.removeHandler(handler)
                handler.close()
        for handler in handlers:
            if handler not in root.handlers:
                root.addHandler(handler)
        root.setLevel(level)


@contextmanager
def _hydra_errors_raised() -> Iterator[None]:
    """Let Hydra raise its errors instead of printing them as a block and exiting 1 (``HYDRA_FULL_ERROR``)."""
    saved = os.environ.get("HYDRA_FULL_ERROR")
    os.environ["HYDRA_FULL_ERROR"] = "1"
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("HYDRA_FULL_ERROR", None)
        else:
            os.environ["HYDRA_FULL_ERROR"] = saved


HYDRA_SOURCE_OPTIONS = ("--config-name", "--config-path", "--config-dir", "--experimental-rerun")


def hydra_option_error(argv: Sequence[str], exc: Exception) -> ConfigError:
    """Hydra's message, first line, as an error naming the option that chose the config (if one did)."""
    given = [(a.split("=", 1)[0], a.split("=", 1)[1] if "=" in a else (argv[i + 1] if i + 1 < len(argv) else ""))
             for i, a in enumerate(argv) if a.split("=", 1)[0] in HYDRA_SOURCE_OPTIONS or a in ("-cn", "-cp", "-cd")]
    first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    option, value = given[0] if given else ("hydra", " ".join(argv))
    return ConfigError(option, value, f"a config Hydra can find (this app's configs are in {CONF_DIR})", first)


def interrupted_summary(signal_name: str) -> str:
    """One line: how many jobs reached each status before the signal, and which ones; the rest did not run."""
    return (f"interrupted by {signal_name}: stopped between jobs; finished jobs: {finished_text(st.finished_jobs())}; "
            "the job under way and any later ones did not run (no result written for them)")


def finished_text(finished: dict) -> str:
    """``2 planned (jobs 0, 2), 1 rejected (job 1)``: per status, in the order first reached, the number of
    jobs that reached it and their numbers; ``none`` when no job finished."""
    by_status: dict = {}
    for job, status in finished.items():
        by_status.setdefault(status, []).append(str(job))
    return ", ".join(f"{len(jobs)} {status} ({'job' if len(jobs) == 1 else 'jobs'} {', '.join(jobs)})"
                     for status, jobs in by_status.items()) or "none"
