"""The spec files of printed commands are written where only their owner can write: another user's folder
at the predictable name, with links planted in it, is never written through; the file reads back as the
very spec that was written."""

from __future__ import annotations

import os
import stat
import tempfile
from dataclasses import replace

import pytest

from contract.specs import Topology
from harness.config import spec_file
from harness.explore import reproduce

OTHER_UID = 54321
"""A user id that is not ours: the planted folder's owner."""

LINKS = (("X", "PIX"), ("PIX", "X"))


def _topology(name: str = "explore_links_0123456789") -> Topology:
    return Topology(cards=("GPU0", "GPU1"), links=LINKS, name=name)


def _run():
    from harness.suites.case import resolve

    run = resolve(("model=qwen3_5_moe", "parallel=tp2", "draft=qwen3_5_mtp")).run
    return replace(run, hardware=replace(run.hardware, topology=_topology(), num_cards=2))


def _name() -> str:
    return reproduce.spec_name(_run())


@pytest.fixture
def tmpdir_of_others(tmp_path, monkeypatch):
    """A temp folder where another user made the explorer's folders (the shared one of earlier versions
    and this user's per-user name) and planted links at every name the explorer could write: the
    temporary name and the final name, each pointing at a file of ours."""
    if os.getuid() != 0:
        pytest.skip("making a folder owned by another user needs root")
    base = tmp_path / "tmp"
    base.mkdir()
    precious = tmp_path / "precious"
    precious.write_text("mine\n")
    name = _name()
    for folder in (base / reproduce.TOPOLOGY_FOLDER, base / f"{reproduce.TOPOLOGY_FOLDER}-{os.getuid()}"):
        folder.mkdir(mode=0o777)
        os.chmod(folder, 0o1777)
        for planted in (f"{name}.tmp", name, f".{name}.tmp"):
            os.symlink(precious, folder / planted)
        os.chown(folder, OTHER_UID, OTHER_UID)
    monkeypatch.setattr(tempfile, "tempdir", str(base))
    return base, precious


def test_a_planted_folder_is_not_written_through(tmpdir_of_others):
    base, precious = tmpdir_of_others
    path = reproduce.spec_path(_run())
    assert precious.read_text() == "mine\n"
    folder = path.parent
    info = os.lstat(folder)
    assert stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid() and info.st_mode & 0o077 == 0, oct(info.st_mode)
    assert folder.parent == base and folder.name not in (reproduce.TOPOLOGY_FOLDER,
                                                         f"{reproduce.TOPOLOGY_FOLDER}-{os.getuid()}")
    assert not path.is_symlink() and spec_file.read(path) == _run()
    assert reproduce.spec_path(_run()) == path  # the same spec, the same file


def test_own_folder_is_private_and_reused(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    path = reproduce.spec_path(_run())
    assert path.parent == tmp_path / f"{reproduce.TOPOLOGY_FOLDER}-{os.getuid()}"
    assert stat.S_IMODE(os.lstat(path.parent).st_mode) == 0o700 and stat.S_IMODE(os.lstat(path).st_mode) == 0o600
    again = reproduce.spec_path(_run())
    assert again == path and sorted(os.listdir(path.parent)) == [path.name]  # no temporary file left


def test_a_link_at_the_final_name_is_replaced_not_followed(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    folder = reproduce.private_folder()
    precious = tmp_path / "precious"
    precious.write_text("mine\n")
    os.symlink(precious, folder / _name())
    path = reproduce.spec_path(_run())
    assert precious.read_text() == "mine\n" and not path.is_symlink()
