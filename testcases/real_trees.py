"""Where the real C++ trees are (upstream xLLM and the ports, ``../shared``) and the mark that runs a test on them
only in their own CI step (``LWSPLIT_REAL_TREES=1 pytest -n 0 -m real_tree``)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from testcases import ROOT

SHARED = Path(os.environ.get("LWSPLIT_SHARED") or ROOT.parent / "shared")
"""Where upstream and the ports are: ``../shared`` next to the checkout (``LWSPLIT_SHARED`` overrides)."""
UPSTREAM = SHARED / "upstream_494f293b5"
PORTS = {name: SHARED / "ports" / name for name in ("p6_v2_1ac802", "p6_v3_latest")}


def real_tree_reason(*trees: Path) -> str:
    """Why a test on ``trees`` does not run here (not the real-tree step, or a tree missing); empty when it runs."""
    if not os.environ.get("LWSPLIT_REAL_TREES"):
        return "real-tree builds run in their own CI step: LWSPLIT_REAL_TREES=1 pytest -n 0 -m real_tree"
    missing = [str(t) for t in trees if not t.is_dir()]
    return f"no real tree at {', '.join(missing)} (../shared holds upstream and the ports)" if missing else ""


def real_tree(*trees: Path):
    """A test's mark: skipped, saying why, unless ``real_tree_reason(*trees)`` is empty."""
    reason = real_tree_reason(*trees)
    return pytest.mark.skipif(bool(reason), reason=reason or "-")
