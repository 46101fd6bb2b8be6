"""``python -m harness``: check the command line, then hand it to Hydra (``run`` is the job).

Exit status: 0 when every job passed (or planned; a rejected plan is a result),
1 when a job failed, errored or left no result, 2 for a mistake on the command line
(one ``error:`` line, nothing run).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional, Sequence

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf

from harness.app import signals
from harness.app import status as st
from harness.cli import command
from harness.config.store import register
from harness.paths import CONF_DIR, CONFIG_NAME
from harness.rankpool.rendezvous import remove_stale_dirs

register()  # base_config must be in the ConfigStore before Hydra composes


@hydra.main(config_path=str(CONF_DIR), config_name=CONFIG_NAME, version_base=None)
def run(cfg: DictConfig) -> dict:
    """One Hydra job: one configuration (``harness.app.job``), on the config Hydra composed for it."""
    from harness.app.job import run_job

    hc = HydraConfig.get()
    multirun = hc.mode == RunMode.MULTIRUN
    num = OmegaConf.select(hc, "job.num", default=0) if multirun else 0
    result = run_job(
        cfg, list(hc.overrides.task), dict(hc.runtime.choices), Path(hc.runtime.output_dir), int(num or 0),
        quiet=multirun,
    )
    st.record(int(num or 0), result["status"])
    return result


@command
def main(argv: Optional[Sequence[str]] = None) -> int:
    from harness.app.validate import check_invocation, parse_argv

    argv = list(sys.argv[1:] if argv is None else argv)
    check_invocation(parse_argv(argv))
    st.reset()
    saved = sys.argv
    sys.argv = [saved[0] if saved else "harness", *argv]
    try:
        with signals.stop_on_signals():
            run()
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


def interrupted_summary(signal_name: str) -> str:
    """One line: which jobs finished (number and status) before the signal; the rest did not run."""
    finished = st.finished_jobs()
    done = ", ".join(f"{job} {status}" for job, status in finished.items()) or "none"
    return (f"interrupted by {signal_name}: stopped between jobs; finished jobs: {done}; "
            "the job under way and any later ones did not run (no result written for them)")
