"""The harness's own tests (TC suites, unit, meta, upstream's cases)."""

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
"""The checkout these tests sit in: its ``scripts/``, ``setup.sh`` and ``testcases/`` (configs and
fixtures are ``harness.paths.CONF_DIR`` / ``TOPOLOGY_DIR``)."""


def shared_dir():
    """The project's ``shared/`` folder beside this checkout (``../shared``; one more level up from a
    worktree in a folder of its own), or None where there is none (an installed or copied tree)."""
    return next((p for p in (ROOT.parent / "shared", ROOT.parent.parent / "shared") if p.is_dir()), None)
