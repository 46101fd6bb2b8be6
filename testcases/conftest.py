"""Fixtures shared by test modules of different folders."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BOGUS_GLOO_IFNAME = "lwsplit-no-such-if0"
"""An interface no host has: a single-host run that honoured it could not start gloo."""


@pytest.fixture(scope="session")
def standalone_torchrun_rank_info() -> subprocess.CompletedProcess:
    """One ``torchrun --standalone --nproc-per-node 2 -m harness.rankpool.launcher ...:rank_info`` run,
    started with ``GLOO_SOCKET_IFNAME`` set to an interface that does not exist.

    Read by the launcher's result test (``testcases/unit/test_rankpool.py``) and by the single-host
    loopback test (``testcases/meta/test_torchrun_two_nodes.py``); both carry
    ``xdist_group("standalone-torchrun")``, so one worker starts torchrun once for both.
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "LWSPLIT_"))}
    env.update(GLOO_SOCKET_IFNAME=BOGUS_GLOO_IFNAME, OMP_NUM_THREADS="1")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
           "-m", "harness.rankpool.launcher", "harness.rankpool.selftest_bodies:rank_info"]
    return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=180)
