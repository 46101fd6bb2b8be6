"""The harness's own tests (TC suites, unit, meta, upstream's cases)."""

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
"""The checkout these tests sit in: its ``scripts/``, ``setup.sh`` and ``testcases/`` (configs and
fixtures are ``harness.paths.CONF_DIR`` / ``TOPOLOGY_DIR``)."""
