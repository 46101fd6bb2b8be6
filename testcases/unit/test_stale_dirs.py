"""Temp folders of dead owners are swept (harness.rankpool.rendezvous.remove_stale_dirs)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from harness.rankpool import rendezvous

pytestmark = pytest.mark.unit


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_dead_owner_folders_go_live_and_foreign_ones_stay(tmp_path):
    dead = _dead_pid()
    stale = [tmp_path / f"lwsplit-{kind}-{dead}-abc" for kind in rendezvous.OWNED_DIR_KINDS]
    live = tmp_path / f"lwsplit-pool-{os.getpid()}-abc"
    other = [tmp_path / "lwsplit-pool-notapid-x", tmp_path / f"unrelated-{dead}-x", tmp_path / f"lwsplit-cache-{dead}-x"]
    for d in stale + [live] + other:
        d.mkdir()
        (d / "filestore").write_text("x")
    removed = rendezvous.remove_stale_dirs(str(tmp_path))
    assert sorted(removed) == sorted(str(d) for d in stale)
    assert all(not d.exists() for d in stale)
    assert live.exists() and all(d.exists() for d in other)


def test_owned_dir_names_carry_the_owner_and_are_private():
    path = rendezvous.make_owned_dir("job")
    try:
        assert os.path.basename(path).startswith(f"lwsplit-job-{os.getpid()}-")
        assert oct(os.stat(path).st_mode & 0o777) == oct(0o700)
    finally:
        os.rmdir(path)
    with pytest.raises(ValueError):
        rendezvous.make_owned_dir("other")
