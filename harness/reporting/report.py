"""Turn Allure results into one offline HTML file.

    python -m harness.reporting.report [--results DIR] [--out DIR]

Runs ``allure generate --single-file --clean`` (Allure 2; install it with
``bash scripts/install_allure.sh``). The report is built in a temporary directory
beside ``--out`` and renamed into place only when the CLI succeeds, so ``--out`` is
either the previous report or the complete new one. A single-file report opens
from disk (file://); a multi-file one needs an HTTP server.
"""

from __future__ import annotations

import argparse
import base64
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from harness.paths import REPO_ROOT

LOCAL_CLI = REPO_ROOT / ".tools" / "allure" / "node_modules" / ".bin" / "allure"
DEFAULT_RESULTS = REPO_ROOT / "reports" / "allure-results"
DEFAULT_OUT = REPO_ROOT / "reports" / "allure-report"
INSTALL_HINT = "bash scripts/install_allure.sh"
GENERATE_TIMEOUT_S = 300


class ReportError(Exception):
    """A user-facing problem: printed as one line, exit status 2."""


def find_cli() -> Path | None:
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


def generate(results: Path, out: Path, cli: Path | None = None) -> Path:
    """Build ``out/index.html`` from ``results``; returns its path."""
    check_results(results)
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
        env = dict(os.environ, ALLURE_NO_ANALYTICS="true")
        try:
            done = subprocess.run(
                [str(cli), "generate", "--single-file", "--clean", "-o", str(staging), str(results)],
                env=env, capture_output=True, text=True, timeout=GENERATE_TIMEOUT_S,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise ReportError(f"allure generate did not run: {exc}") from exc
        if done.returncode != 0 or not (staging / "index.html").is_file():
            detail = (done.stderr or done.stdout).strip().splitlines()
            last = detail[-1] if detail else "no output"
            raise ReportError(f"allure generate failed (exit {done.returncode}): {last}")
        _replace_dir(staging, out)
    finally:
        shutil.rmtree(staging_parent, ignore_errors=True)
    return out / "index.html"


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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.reporting.report", description=__doc__.split("\n")[0])
    parser.add_argument("--results", type=Path, default=DEFAULT_RESULTS, help="Allure results (pytest --alluredir)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="report directory (index.html inside)")
    args = parser.parse_args(argv)
    try:
        index = generate(args.results, args.out)
    except ReportError as exc:
        print(f"report: {exc}", file=sys.stderr)
        return 2
    print(f"report: {index}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
