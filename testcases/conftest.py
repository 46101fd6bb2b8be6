"""Fixtures shared by test modules of different folders."""

from __future__ import annotations

import fcntl
import importlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Callable

import pytest

from testcases import ROOT

BOGUS_GLOO_IFNAME = "lwsplit-no-such-if0"
"""An interface no host has: a single-host run that honoured it could not start gloo."""


@pytest.fixture(scope="session")
def once_per_run(tmp_path_factory) -> Callable[[str, Callable[[Path], None]], Path]:
    """``once_per_run(name, build)``: the folder ``build(folder)`` filled, built once per test run.

    pytest-xdist workers share it through the run's base temp and a lock: the first one to ask
    builds, the others wait and reuse it. A build that raised left no mark, so the next asker
    builds again (and fails with its own traceback)."""
    shared = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = shared.parent  # popen-gwN/ -> the run's folder, the same for every worker

    def once(name: str, build: Callable[[Path], None]) -> Path:
        root = shared / name
        with open(shared / f"{name}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not (root / ".built").is_file():
                shutil.rmtree(root, ignore_errors=True)  # what a failed attempt left
                root.mkdir(parents=True)
                build(root)
                (root / ".built").write_text("")
        return root

    return once


@pytest.fixture(scope="session")
def standalone_torchrun_rank_info(once_per_run) -> subprocess.CompletedProcess:
    """One ``torchrun --standalone --nproc-per-node 2 -m harness.rankpool.launcher ...:rank_info`` run
    per test run, started with ``GLOO_SOCKET_IFNAME`` set to an interface that does not exist.

    Read by the launcher's result test (``testcases/unit/test_rankpool.py``) and by the single-host
    loopback test (``testcases/meta/test_torchrun_two_nodes.py``), on whichever workers they land.
    """
    def run(folder: Path) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "LWSPLIT_"))}
        env.update(GLOO_SOCKET_IFNAME=BOGUS_GLOO_IFNAME, OMP_NUM_THREADS="1")
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
               "-m", "harness.rankpool.launcher", "testcases.rank_bodies:rank_info"]
        done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=180)
        (folder / "run.json").write_text(json.dumps(
            {"args": cmd, "returncode": done.returncode, "stdout": done.stdout, "stderr": done.stderr}))

    saved = json.loads((once_per_run("standalone-torchrun", run) / "run.json").read_text())
    return subprocess.CompletedProcess(**saved)


@pytest.fixture
def _loaded_before_pytester() -> None:
    for name in ("hypothesis", "zoneinfo", "torch", "torch.distributed"):  # what an in-process TC run loads
        try:
            importlib.import_module(name)
        except ImportError:  # not installed: then no run loads it either
            pass


@pytest.fixture
def pytester(_loaded_before_pytester: None, pytester: pytest.Pytester) -> pytest.Pytester:
    """pytest's ``pytester``, created after the compiled modules an in-process run loads are imported.

    ``pytester`` removes from ``sys.modules`` every module imported after it was created (at
    the end of each in-process run and of the test), but a compiled extension stays loaded:
    importing it again later in this worker fails (``SystemError: ... bad call flags``) or
    crashes the worker. A TC run loads torch and ``torch.distributed``, and Hypothesis's pytest
    plugin loads ``hypothesis._native`` when a run ends; a worker whose first import of them
    happened inside such a run broke the next test that imports them
    (``pytest testcases/meta/test_bad_input.py testcases/meta/test_security.py``).
    """
    return pytester


class FullStdout:
    """A standard output on a full disk (``> /dev/full``): every write fails with ENOSPC. A test sets it in
    its body (``monkeypatch.setattr(sys, "stdout", FullStdout())``): pytest puts ``capsys``'s stream back
    when the test's call begins, over anything a fixture set."""

    def write(self, text):
        import errno

        raise OSError(errno.ENOSPC, "No space left on device")

    def flush(self):
        pass

