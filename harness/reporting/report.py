"""Turn Allure results into one offline HTML file, with the trend of earlier runs.

    python -m harness.reporting.report [--results DIR] [--out DIR] [--history DIR | --no-history]

Runs ``allure generate --single-file --clean --name ...`` (Allure 2; install it with
``bash scripts/install_allure.sh``; its JVM with ``QUICK_JVM_OPTS``) on a prepared copy of the results
(``harness.reporting.categories``: categories by origin, stable messages, executor,
history). The report is built in a temporary directory beside ``--out`` and renamed
into place only when the CLI succeeds, so ``--out`` is either the previous report or
the complete new one. ``--out`` must be new, empty, or a report written here before
(its ``.lwsplit-report`` stamp): any other folder or file is refused untouched. The new report's ``history/*.json`` (trend, duration, retries,
categories) is then kept in ``--history`` (default ``reports/allure-history``) for the
next run, so trends show from the second report on. A single-file report opens from
disk (file://); a multi-file one needs an HTTP server.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Optional

from contract.errors import UserError
from harness import signals
from harness.files import check_writable, write_atomic
from harness.paths import ALLURE_HISTORY_DIR, ALLURE_REPORT_DIR, ALLURE_RESULTS_DIR, FEATURE_DOC, LOCAL_ALLURE_CLI
from harness.reporting.categories import ResultShapeError, prepare
from harness.usage import Parser, command, say_error

LOCAL_CLI = LOCAL_ALLURE_CLI
DEFAULT_RESULTS = ALLURE_RESULTS_DIR
DEFAULT_OUT = ALLURE_REPORT_DIR
DEFAULT_HISTORY = ALLURE_HISTORY_DIR
REPORT_NAME = "Layerwise split KV cache sharding"
INSTALL_HINT = "bash scripts/install_allure.sh"
GENERATE_TIMEOUT_S = 300
QUICK_JVM_OPTS = "-XX:TieredStopAtLevel=1"
"""JVM options put ahead of the user's ``JAVA_OPTS`` (the user's ``JAVA_OPTS`` and ``ALLURE_OPTS`` come later
and win): a generation is a short run, and with the quick (C1) compiler alone it takes about half the CPU
time, for a few results and for 2,000 alike; the report is the same."""


class ReportError(Exception):
    """A user-facing problem: printed as one line, exit status 2."""


REPORT_STAMP = ".lwsplit-report"
"""A small file every report this module writes carries beside its ``index.html``: the mark that lets a
new report replace the folder whole."""


def check_out(out: Path) -> None:
    """Refuse an ``out`` a new report may not replace: anything but nothing, an empty folder, or an earlier
    report (its stamp, or an Allure single-file ``index.html`` with at most ``FEATURE.md`` beside it: one
    written before the stamp existed). The report replaces the folder whole, so any other file in it
    would be lost."""
    if not os.path.lexists(out):
        return
    if out.is_symlink() or not out.is_dir():
        raise ReportError(f"--out {out} is not a folder (a new report replaces the folder whole); "
                          "give a new or empty folder, or an earlier report's")
    try:
        names = sorted(p.name for p in out.iterdir())
    except OSError as exc:
        raise ReportError(f"--out {out} cannot be read: {exc.strerror or exc}") from exc
    if not names:
        return
    report_files = {"index.html", FEATURE_DOC.name, REPORT_STAMP}
    others = [n for n in names if n not in report_files]
    if "index.html" in names and not others and (REPORT_STAMP in names or _is_single_file_report(out / "index.html")):
        return
    shown = ", ".join(others[:3] or names[:3]) + (", ..." if len(others or names) > 3 else "")
    raise ReportError(f"--out {out} holds files that are not a report written here ({shown}); a new report "
                      "replaces the folder whole, so give a new or empty folder, or an earlier report's")


def check_history(history: Path, out: Path) -> None:
    """``--history`` must be a folder this process can write (checked before the report is built, since it
    is written after), and not the report's own folder (which the next report replaces whole)."""
    if history.absolute() == out.absolute():
        raise ReportError(f"--history {history} is the report's folder --out; give a folder of its own")
    if os.path.lexists(history) and not history.is_dir():
        raise ReportError(f"--history {history} is not a folder (the trend files are kept there)")
    try:
        check_writable(history, "--history")
    except UserError as exc:
        raise ReportError(str(exc)) from None


def _is_single_file_report(index: Path) -> bool:
    """An Allure single-file report: its data embedded as ``d('data/...','<base64>')`` calls."""
    try:
        with index.open("r", encoding="utf-8", errors="replace") as fh:
            return any("d('data/" in line for line in fh)
    except OSError:
        return False


def find_cli() -> Optional[Path]:
    """The repository's pinned CLI (.tools/allure), else ``allure`` on PATH."""
    if LOCAL_CLI.is_file() and os.access(LOCAL_CLI, os.X_OK):
        return LOCAL_CLI
    on_path = shutil.which("allure")
    return Path(on_path) if on_path else None


def check_results(results: Path) -> int:
    """Number of ``*-result.json`` files; ReportError when there are none."""
    if not results.is_dir():
        raise ReportError(f"results directory {results} does not exist (run pytest with --alluredir {results})")
    count = len(list(results.glob("*-result.json")))
    if count == 0:
        raise ReportError(f"results directory {results} has no *-result.json files (run pytest with --alluredir)")
    return count


def executor_info(env: Mapping[str, str], history: Optional[Path] = None) -> dict:
    """Allure's ``executor.json``: the CI's name, build number and link when the environment has them.

    Known CIs: GitHub Actions, GitLab CI, Jenkins, Buildkite; any other may set
    ``CI_NAME``, ``CI_BUILD_NUMBER`` and ``CI_BUILD_URL``. Without a build number the
    build order continues the previous report's history (so trend points stay in order).
    """
    if env.get("GITHUB_ACTIONS") == "true":
        name, kind, number = "GitHub Actions", "github", env.get("GITHUB_RUN_NUMBER")
        url = (f"{env.get('GITHUB_SERVER_URL', 'https://github.com')}/{env['GITHUB_REPOSITORY']}/actions/runs/"
               f"{env['GITHUB_RUN_ID']}" if env.get("GITHUB_REPOSITORY") and env.get("GITHUB_RUN_ID") else None)
    elif env.get("GITLAB_CI"):
        name, kind, number, url = "GitLab CI", "gitlab", env.get("CI_PIPELINE_IID"), env.get("CI_JOB_URL")
    elif env.get("JENKINS_URL"):
        name, kind, number, url = "Jenkins", "jenkins", env.get("BUILD_NUMBER"), env.get("BUILD_URL")
    elif env.get("BUILDKITE"):
        name, kind, number, url = "Buildkite", "buildkite", env.get("BUILDKITE_BUILD_NUMBER"), env.get("BUILDKITE_BUILD_URL")
    elif env.get("CI_NAME"):
        name, kind, number, url = env["CI_NAME"], "ci", env.get("CI_BUILD_NUMBER"), env.get("CI_BUILD_URL")
    else:
        name, kind, number, url = "local run", "local", None, None
    order = int(number) if number and number.isdigit() else _last_build_order(history) + 1
    info = {"name": name, "type": kind, "buildOrder": order, "buildName": f"{name} #{number or order}",
            "reportName": REPORT_NAME}
    if url:
        info["buildUrl"] = url
    return info


def _last_build_order(history: Optional[Path]) -> int:
    """The highest ``buildOrder`` in ``history/history-trend.json`` (0 without one)."""
    try:
        points = json.loads((history / "history-trend.json").read_text(encoding="utf-8")) if history else []
    except (OSError, ValueError):
        return 0
    orders = [p.get("buildOrder") for p in points if isinstance(p, dict) and isinstance(p.get("buildOrder"), int)]
    return max(orders, default=len(points))


def generate(results: Path | Sequence[Path], out: Path, cli: Optional[Path] = None, *, history: Optional[Path] = None,
             name: str = REPORT_NAME, executor: Optional[Mapping[str, Any]] = None) -> Path:
    """Build ``out/index.html`` from ``results`` (one folder, or several merged: a sweep's jobs);
    returns its path.

    With ``history``, the previous run's trend files are read from it and the new
    report's are written back to it (only after the report is in place).
    """
    folders = [results] if isinstance(results, (str, Path)) else list(results)
    if not folders:
        raise ReportError("no results directory given")
    check_out(out)
    if history is not None:
        check_history(history, out)
    for folder in folders:
        check_results(Path(folder))
    cli = cli or find_cli()
    if cli is None:
        raise ReportError(f"Allure CLI not found ({LOCAL_CLI} or 'allure' on PATH); install it with: {INSTALL_HINT}")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        staging_parent = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-", dir=out.parent))
    except OSError as exc:
        raise ReportError(f"cannot write the report under {out.parent}: {exc.strerror or exc}") from exc

    try:
        staging = staging_parent / "report"
        try:
            prepared = prepare(folders, staging_parent / "results", history=history,
                               executor=executor if executor is not None else executor_info(os.environ, history))
        except OSError as exc:
            raise ReportError(f"cannot prepare the results from {results}: {exc.strerror or exc}") from exc
        except ResultShapeError as exc:
            raise ReportError(str(exc)) from None
        env = dict(os.environ, ALLURE_NO_ANALYTICS="true",
                   JAVA_OPTS=f"{QUICK_JVM_OPTS} {os.environ.get('JAVA_OPTS', '')}".strip())
        try:
            done = _run_cli(
                [str(cli), "generate", "--single-file", "--clean", "--name", name, "-o", str(staging), str(prepared)],
                env)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise ReportError(f"allure generate did not run: {exc}") from exc
        if done.returncode != 0 or not (staging / "index.html").is_file():
            detail = (done.stderr or done.stdout).strip().splitlines()
            last = detail[-1] if detail else "no output"
            raise ReportError(f"allure generate failed (exit {done.returncode}): {last}")
        if FEATURE_DOC.is_file():  # the TCs link their FEATURE sections relative to the report
            shutil.copyfile(FEATURE_DOC, staging / FEATURE_DOC.name)
        (staging / REPORT_STAMP).write_text(f"{REPORT_NAME}: written by harness.reporting.report\n", encoding="utf-8")
        check_out(out)  # again: something may have been written there while Allure ran
        _replace_dir(staging, out)
    finally:
        shutil.rmtree(staging_parent, ignore_errors=True)
    index = out / "index.html"
    if history is not None:
        save_history(index.read_text(encoding="utf-8"), history)
    return index


def _run_cli(argv: list[str], env: Mapping[str, str]) -> subprocess.CompletedProcess:
    """The Allure CLI in a session of its own: a timeout or an interrupt (Ctrl-C, SIGTERM) ends its whole
    process tree (its shell wrapper and the JVM it starts), not only the wrapper."""
    proc = subprocess.Popen(argv, env=dict(env), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=GENERATE_TIMEOUT_S)
    except BaseException:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
        proc.communicate()
        raise
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


HISTORY_ITEMS = 5
"""Earlier results kept per test in ``history.json`` (Allure keeps 20): each one is copied into every
test's page of the next single-file report, so 20 would add megabytes; the trend files are untouched."""


def cap_history(history_json: bytes, items: int = HISTORY_ITEMS) -> bytes:
    """``history.json`` with each test's ``items`` cut to the newest ``items``."""
    data = json.loads(history_json)
    for entry in data.values():
        if isinstance(entry, dict) and isinstance(entry.get("items"), list):
            entry["items"] = sorted(entry["items"], key=lambda i: -((i.get("time") or {}).get("start") or 0))[:items]
    return json.dumps(data).encode()


def save_history(index_html: str, history: Path) -> list[Path]:
    """Write the report's embedded ``history/*.json`` into ``history`` (each file atomically)."""
    history.mkdir(parents=True, exist_ok=True)
    written = []
    for path, data in embedded_files(index_html).items():
        if path.startswith("history/") and path.endswith(".json"):
            if path == "history/history.json":
                data = cap_history(data)
            written.append(write_atomic(history / path.split("/", 1)[1], data))
    return written


def _replace_dir(new: Path, target: Path) -> None:
    """Rename ``new`` onto ``target`` (same filesystem), keeping the old one until it is in place."""
    if not target.exists():
        new.rename(target)
        return
    retired = new.parent / "previous"
    target.rename(retired)
    try:
        new.rename(target)
    except OSError:
        retired.rename(target)
        raise


_EMBEDDED = re.compile(r"d\('([^']+)','([A-Za-z0-9+/=]*)'\)")


def embedded_files(index_html: str) -> dict[str, bytes]:
    """The data files a single-file report embeds (``data/test-cases/<uid>.json`` ...)."""
    return {path: base64.b64decode(data) for path, data in _EMBEDDED.findall(index_html)}


@command
def main(argv: Optional[list[str]] = None) -> int:
    parser = Parser(prog="python -m harness.reporting.report", description=__doc__.split("\n")[0])
    parser.add_argument("--results", type=Path, default=DEFAULT_RESULTS, help="Allure results (pytest --alluredir)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="report directory (index.html inside)")
    parser.add_argument("--history", type=Path, default=DEFAULT_HISTORY,
                        help="trend history carried from report to report (default reports/allure-history)")
    parser.add_argument("--no-history", action="store_true", help="neither read nor write the trend history")
    parser.add_argument("--name", default=REPORT_NAME, help="the report's title")
    args = parser.parse_args(argv)

    try:
        with signals.stop_on_signals():  # SIGTERM / SIGHUP as Ctrl-C: the staging folder goes, --out stays as it was
            index = generate(args.results, args.out, history=None if args.no_history else args.history,
                             name=args.name)
    except ReportError as exc:
        say_error(exc)
        return 2
    except signals.StopRequested as exc:
        say_error(f"interrupted by {exc.signal_name}: no report written; {args.out} is as it was")
        return signals.exit_code(exc.signal_name)
    print(f"report: {index} ({index.stat().st_size / 2**20:.1f} MiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
