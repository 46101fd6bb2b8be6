"""The object cache (``build/objects.py``): one tiny translation unit compiled through ``compile_once`` as a port's
build compiles each source; the compiler runs are counted by the test's own ``run``, the entries by listing
the cache folder. A second build of the same command in another build folder reuses the object; a define, a
header's content, a header that now shadows one, a damaged or foreign entry each make it compile again."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from implementations.xllm_native.build import cachefs, objects
from implementations.xllm_native.build.commands import compiler

SOURCE = '#include "value.h"\nint lwsplit_value() { return VALUE + BASE; }\n'


@pytest.fixture
def unit(tmp_path):
    """A source, its header (in ``inc2``, searched after ``inc1``) and a private cache folder."""
    (tmp_path / "src").mkdir()
    (tmp_path / "inc1").mkdir()
    (tmp_path / "inc2").mkdir()
    (tmp_path / "src/unit.cpp").write_text(SOURCE.replace('"value.h"', "<value.h>"))
    (tmp_path / "inc2/value.h").write_text("#define BASE 40\n")
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    return tmp_path


class Build:
    """One build folder's compile of ``unit.cpp``: its command and the compiler runs counted."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.runs = 0
        self.n = 0

    def compile(self, *defines: str) -> bytes:
        self.n += 1
        gen = self.root / f"gen{self.n}"
        gen.mkdir()
        cmd = [compiler(), "-std=c++20", "-O1", "-fPIC", "-w", *(f"-D{d}" for d in defines),
               f"-I{self.root / 'inc1'}", f"-I{self.root / 'inc2'}", "-MD", "-MF", str(gen / "x.d"),
               "-c", str(self.root / "src/unit.cpp"), "-o", str(gen / f"{self.n:02d}-unit.o")]
        objects.compile_once(self.root / "cache", cmd, gen, b"g++ test", b"", self._run)
        assert (gen / "x.d").read_text().split(":", 1)[1].split(), "no -MD rule beside the object"
        return (gen / f"{self.n:02d}-unit.o").read_bytes()

    def _run(self, cmd: list) -> None:
        self.runs += 1
        subprocess.run(cmd, check=True, cwd=cmd[cmd.index("-MF") + 1].rsplit("/", 1)[0])

    def entries(self) -> list:
        return sorted(p.name for p in (self.root / "cache").iterdir() if not p.name.endswith(".lock"))


def test_the_same_command_in_another_build_folder_reuses_the_object_and_a_define_compiles_anew(unit):
    b = Build(unit)
    one = b.compile("VALUE=1")
    assert (b.runs, len(b.entries())) == (1, 1)
    assert b.compile("VALUE=1") == one and b.runs == 1, "the same command and sources compiled again"
    two = b.compile("VALUE=2")
    assert b.runs == 2 and len(b.entries()) == 2, "a command differing only in a define reused the object"
    assert two != one
    assert b.compile("VALUE=2") == two and b.runs == 2


def test_a_header_edit_or_a_header_that_now_shadows_it_compiles_again_and_undoing_reuses(unit):
    b = Build(unit)
    first = b.compile("VALUE=1")
    header = unit / "inc2/value.h"
    header.write_text("#define BASE 50\n")
    assert b.compile("VALUE=1") != first and b.runs == 2, "an edited header left the object current"
    header.write_text("#define BASE 40\n")
    assert b.compile("VALUE=1") == first and b.runs == 2, "the object of the original header was not reused"
    (unit / "inc1/value.h").write_text("#define BASE 60\n")  # found before inc2's now
    assert b.compile("VALUE=1") != first and b.runs == 3, "a header shadowing the one read left the object current"
    (unit / "inc1/value.h").unlink()
    assert b.compile("VALUE=1") == first and b.runs == 3


def _entry(b: Build) -> Path:
    [name] = [n for n in b.entries() if n.startswith("obj-")]
    return b.root / "cache" / name


@pytest.mark.parametrize("damage", ["bytes", "mode", "link", "manifest"])
def test_a_damaged_or_foreign_object_is_compiled_again_and_never_copied(unit, damage):
    b = Build(unit)
    good = b.compile("VALUE=1")
    obj = _entry(b) / objects.OBJECT_NAME
    if damage == "bytes":
        obj.write_bytes(good[:64] + bytes([good[64] ^ 0xFF]) + good[65:])
    elif damage == "mode":
        os.chmod(obj, 0o666)
    elif damage == "link":
        (unit / "evil.o").write_bytes(good)
        obj.unlink()
        obj.symlink_to(unit / "evil.o")
    else:
        (_entry(b) / "manifest.json").write_text("[1, 2]")
    assert b.compile("VALUE=1") == good and b.runs == 2, f"a {damage} object entry was used"


def test_an_object_swapped_after_the_check_is_not_copied(unit, monkeypatch):
    b = Build(unit)
    good = b.compile("VALUE=1")
    obj = _entry(b) / objects.OBJECT_NAME
    found = objects.find

    def find_then_swap(root, key):
        entry = found(root, key)
        obj.write_bytes(b"\x7fELF not the object")
        return entry

    monkeypatch.setattr(objects, "find", find_then_swap)
    assert b.compile("VALUE=1") == good and b.runs == 2


def test_a_failed_compile_publishes_nothing(unit):
    (unit / "src/unit.cpp").write_text("int broken( {\n")
    b = Build(unit)
    with pytest.raises(subprocess.CalledProcessError):
        b.compile("VALUE=1")
    assert b.entries() == [], "a failed compile left an entry or a temporary folder"


def test_the_key_leaves_out_only_the_build_folders_output_names():
    cmd = ["g++", "-DA=1", "-Iinc", "-MD", "-MF", "/b1/x.d", "-c", os.devnull, "-o", "/b1/00-x.o"]
    key = objects.object_key(cmd, b"g++ 12")
    assert objects.object_key([a.replace("/b1/", "/b2/") for a in cmd], b"g++ 12") == key
    for changed in (["g++", "-DA=2", *cmd[2:]], ["g++", "-DA=1", "-Iother", *cmd[3:]], [*cmd, "-O2"], ["clang++", *cmd[1:]]):
        assert objects.object_key(changed, b"g++ 12") != key, changed
    assert objects.object_key(cmd, b"g++ 13") != key
    assert objects.object_key(cmd, b"g++ 12", b"torch 2.1") != key
    assert not objects.is_compile(["g++", "-shared", "a.o", "-o", "l.so"])


def test_the_object_entry_and_its_folder_are_the_users_own(unit):
    b = Build(unit)
    b.compile("VALUE=1")
    entry = _entry(b)
    for path in (entry / objects.OBJECT_NAME, entry / "manifest.json"):
        assert cachefs.why_not_private(os.lstat(path)) is None, path


def test_a_header_gone_between_the_compile_and_its_hashing_is_one_error_naming_it(tmp_path):
    """A tree edited while it builds: a header the compiler listed is gone when its sha256 is taken. One error
    naming the tree's field and the header (was: a raw FileNotFoundError from the hashing)."""
    from contract.errors import UserError
    from implementations.xllm_native.build.deps import parse_deps

    (tmp_path / "kept.h").write_text("// kept\n")
    depfile = f"out.o: {tmp_path / 'main.cpp'} {tmp_path / 'kept.h'} {tmp_path / 'gone.h'}\n"
    (tmp_path / "main.cpp").write_text("int main() {}\n")
    with pytest.raises(UserError) as err:
        parse_deps(depfile, [str(tmp_path)], tmp_path)
    assert "gone.h" in str(err.value) and "build again" in str(err.value)
    (tmp_path / "gone.h").write_text("// back\n")
    assert sorted(Path(p).name for p in parse_deps(depfile, [str(tmp_path)], tmp_path)) == \
        ["gone.h", "kept.h", "main.cpp"]
