"""The native cache and build against hostile or broken surroundings: entries another user planted,
links at the lock's name, truncated entries, dependencies the compiler read through escaped names,
symbolic links and shadowing headers, a compiler that hangs or is stopped by a signal, a full disk.

Most tests compile with a stand-in compiler (``FAKE_CXX``, a shell script: writes a depfile as GCC
does, escapes included, and a small file as the library) so they take milliseconds; for the
stale-dependency test it has the real ``g++`` preprocess, whose depfile and search path are the
point. Another user is uid 12345: files are given to it with ``os.chown`` (the tests run as root;
otherwise the process is made to look like another uid).
"""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

import pytest

from contract.errors import UserError
from implementations.xllm_native.build import cache as build_cache
from implementations.xllm_native.build import cachefs, commands, keys, library
from implementations.xllm_native.runtime import native
from implementations.xllm_native.tree import files as tree_files
from testcases import ROOT

FIXTURE = Path(__file__).resolve().parent / "fixture_tree"
OTHER = 12345
ROOT_USER = os.geteuid() == 0
TIMEOUT = "LWSPLIT_NATIVE_BUILD_TIMEOUT_S"

FAKE_CXX = r'''#!/bin/sh
mode=${FAKE_CXX:-ok}
case "$*" in
  *--version*) [ "$mode" = hang-version ] && exec sleep 600; echo fake-cxx 1.0; exit 0 ;;
  *" -E "*) [ "$mode" = gxx-deps ] && exec g++ "$@"; exit 0 ;;
esac
[ -n "$FAKE_CXX_LOG" ] && echo compile >> "$FAKE_CXX_LOG"
if [ "$mode" = hang ]; then  # a child of its own, as cc1plus is g++'s
  sleep 600 &
  echo "$$ $!" > "$FAKE_CXX_PIDS.tmp" && mv "$FAKE_CXX_PIDS.tmp" "$FAKE_CXX_PIDS"
  wait
  exit 1
fi
if [ "$mode" = enospc ]; then
  echo "/usr/bin/ld: final link failed: No space left on device"
  echo "collect2: error: ld returned 1 exit status"
  exit 1
fi
if [ "$mode" = gxx-deps ]; then  # g++ preprocesses: its -MD file is the real one; the library is a stand-in
  prev=; out=; skip=; first=1
  for a in "$@"; do
    [ -n "$first" ] && { set --; first=; }
    [ "$prev" = -o ] && out=$a
    prev=$a
    [ -n "$skip" ] && { skip=; continue; }
    [ "$a" = -o ] && { skip=1; continue; }
    set -- "$@" "$a"
  done
  g++ -E -o /dev/null "$@" || exit 1
  printf 'stand-in library' > "$out"
  exit 0
fi
prev=; out=; dep=; unity=
for a in "$@"; do
  case "$prev" in -o) out=$a ;; -MF) dep=$a ;; esac
  case "$a" in *.cpp) unity=${unity:-$a} ;; esac
  prev=$a
done
esc() { sed -e 's/\$/$$/g' -e 's/#/\\#/g' -e 's/ /\\ /g'; }
{
  printf '%s' "$out" | esc; printf ':'
  { echo "$unity"; grep '^#include "/' "$unity" | cut -d'"' -f2; } | while IFS= read -r p; do
    printf ' \\\n %s' "$(printf '%s' "$p" | esc)"
  done
  echo
} > "$dep"
printf 'stand-in library' > "$out"
'''


@pytest.fixture
def fake_cxx(tmp_path, monkeypatch):
    """The stand-in compiler as ``CXX``; returns the file counting its compiles."""
    cxx = tmp_path / "fake-cxx"
    cxx.write_text(FAKE_CXX)
    cxx.chmod(0o755)
    log = tmp_path / "compiles.log"
    monkeypatch.setenv("CXX", str(cxx))
    monkeypatch.setenv("FAKE_CXX_LOG", str(log))
    monkeypatch.delenv(TIMEOUT, raising=False)
    return log


def compiles(log: Path) -> int:
    return log.read_text().count("compile") if log.exists() else 0


def copy_tree(dest: Path) -> Path:
    shutil.copytree(FIXTURE, dest)
    return dest


def give_away(path: Path, monkeypatch) -> None:
    """``path`` becomes another user's: chown as root, else this process takes another uid's view."""
    if ROOT_USER:
        os.lchown(path, OTHER, OTHER)
    else:
        real = os.getuid()
        monkeypatch.setattr(os, "getuid", lambda: real + 1)


def entries(cache: Path) -> list[Path]:
    return sorted(p for p in cache.iterdir() if not p.name.endswith(".lock"))


# ---- a cache only its owner can fill ----------------------------------------------------------------------


def test_the_cache_folders_are_created_private(tmp_path, fake_cxx):
    cache = tmp_path / "home" / "cache" / "lwsplit"
    built = library.build(tree_files.tree_map(str(copy_tree(tmp_path / "tree"))), root=cache)
    for folder in (tmp_path / "home", tmp_path / "home" / "cache", cache, built.library.parent):
        assert oct(folder.stat().st_mode & 0o777) == oct(0o700), folder
    assert not built.library.stat().st_mode & 0o022
    assert (built.library.parent / "manifest.json").stat().st_mode & 0o777 in (0o600, 0o644)


@pytest.mark.parametrize("case", ["another-users", "group-writable", "world-writable", "a-file",
                                  "under-a-folder-anyone-can-swap"])
def test_a_cache_folder_that_is_not_the_users_own_is_refused_in_one_line(tmp_path, fake_cxx, monkeypatch, case):
    tree = tree_files.tree_map(str(copy_tree(tmp_path / "tree")))
    cache = tmp_path / "cache"
    if case == "a-file":
        cache.write_text("not a folder\n")
    elif case == "under-a-folder-anyone-can-swap":
        (tmp_path / "shared").mkdir(mode=0o700)
        (tmp_path / "shared").chmod(0o777)  # no sticky bit: anyone may rename what is in it
        cache = tmp_path / "shared" / "mine"
    else:
        cache.mkdir(mode=0o700)
        if case == "group-writable":
            cache.chmod(0o770)
        elif case == "world-writable":
            cache.chmod(0o1777)  # a team or /tmp-like folder, even with the sticky bit
        else:
            give_away(cache, monkeypatch)
    monkeypatch.setenv(build_cache.ENV_CACHE, str(cache))
    with pytest.raises(UserError) as err:
        library.build(tree)
    assert err.value.field == build_cache.ENV_CACHE and err.value.value == str(cache)
    assert "XDG_CACHE_HOME" in str(err.value) and "\n" not in str(err.value)
    assert compiles(fake_cxx) == 0
    if case == "a-file":
        assert cache.read_text() == "not a folder\n"


@pytest.mark.skipif(not ROOT_USER, reason="a folder of another user needs root to make")
@pytest.mark.parametrize("where", ["last", "middle", "target"])
def test_a_cache_reached_through_a_folder_another_user_owns_is_refused(tmp_path, fake_cxx, where):
    """``$TMPDIR/team/cache -> ~/.cache/...`` in another user's 0755 ``team``: its owner could rename a new link
    over ``cache`` at any time. Every folder a name is looked up in counts, the link's own and those on the
    way to its target."""
    tree = tree_files.tree_map(str(copy_tree(tmp_path / "tree")))
    mine = tmp_path / "home" / "cache"
    mine.mkdir(parents=True, mode=0o700)
    team = tmp_path / "team"
    team.mkdir(mode=0o755)
    if where == "last":
        (team / "cache").symlink_to(mine)
        cache = team / "cache"
    elif where == "middle":
        (team / "link").symlink_to(tmp_path / "home")
        cache = team / "link" / "cache"
    else:  # a link of mine whose target is in the other user's folder
        (team / "real").mkdir(mode=0o700)
        (tmp_path / "home" / "via").symlink_to(team / "real")
        cache = tmp_path / "home" / "via"
    os.chown(team, OTHER, OTHER)
    with pytest.raises(UserError) as err:
        library.build(tree, root=cache)
    assert err.value.value == str(cache) and f"{team}, the folder holding" in str(err.value), str(err.value)
    assert f"owned by uid {OTHER}" in str(err.value) and "\n" not in str(err.value)
    assert compiles(fake_cxx) == 0


@pytest.mark.skipif(not ROOT_USER, reason="giving a folder to another group needs root")
@pytest.mark.parametrize("group, refused", [(OTHER, True), (0, False)])
def test_a_group_writable_folder_on_the_way_is_refused_unless_the_group_is_the_users_alone(tmp_path, fake_cxx, group,
                                                                                            refused):
    """``umask 002`` makes ``~/.cache`` group-writable to the user's private group: fine; a group others are in
    (here one the system does not know, so it cannot be shown to be the user's alone) could swap the cache."""
    on_the_way = tmp_path / "home"
    (on_the_way / "cache").mkdir(parents=True, mode=0o700)
    os.chown(on_the_way, 0, group)
    on_the_way.chmod(0o775)
    tree = tree_files.tree_map(str(copy_tree(tmp_path / "tree")))
    if refused:
        with pytest.raises(UserError) as err:
            library.build(tree, root=on_the_way / "cache")
        assert f"{on_the_way}, the folder holding" in str(err.value) and "mode 0775" in str(err.value)
    else:
        assert library.build(tree, root=on_the_way / "cache").library.is_file()


def test_a_link_to_the_cache_in_a_folder_only_the_user_writes_is_fine(tmp_path, fake_cxx):
    mine = tmp_path / "home" / "cache"
    mine.mkdir(parents=True, mode=0o700)
    (tmp_path / "link").symlink_to(mine)
    built = library.build(tree_files.tree_map(str(copy_tree(tmp_path / "tree"))), root=tmp_path / "link")
    assert built.library.is_file()


@pytest.mark.parametrize("how", ["replaced", "a-link", "renamed-over"])
def test_the_library_is_checked_again_when_a_host_opens_it(tmp_path, fake_cxx, how):
    """Between the build's check and a host's start (after any failed call) the entry's library may change: the
    host is handed a descriptor checked then (owner, mode, sha256 against the manifest), never a path."""

    tree = tree_files.tree_map(str(copy_tree(tmp_path / "tree")))
    built = library.build(tree, root=tmp_path / "cache")
    fd = cachefs.open_library(built.library, built.manifest["library_sha256"])
    os.close(fd)
    planted = tmp_path / "planted.so"
    planted.write_bytes(b"\x7fELF someone else's code")
    if how == "replaced":
        built.library.write_bytes(planted.read_bytes())
    elif how == "a-link":
        built.library.unlink()
        built.library.symlink_to(planted)
    else:
        os.rename(planted, built.library)
    with pytest.raises((cachefs.NotPrivate, OSError)):
        os.close(cachefs.open_library(built.library, built.manifest["library_sha256"]))
    with pytest.raises(UserError) as err:
        native.Native(tree, built).call("validate", {})
    assert err.value.field == build_cache.ENV_CACHE and str(built.library) in str(err.value), str(err.value)


def test_without_a_home_folder_the_cache_is_never_relative(tmp_path, monkeypatch):
    monkeypatch.delenv(build_cache.ENV_CACHE, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/cache")  # the XDG spec: a relative value is ignored
    monkeypatch.setenv("HOME", str(tmp_path))
    assert build_cache.cache_root() == tmp_path / ".cache" / "lwsplit" / "native"
    monkeypatch.setenv("HOME", "")
    monkeypatch.setattr(os.path, "expanduser", lambda path: path)  # no passwd entry either
    with pytest.raises(UserError) as err:
        build_cache.cache_root()
    assert err.value.field == build_cache.ENV_CACHE and "XDG_CACHE_HOME" in str(err.value)


def test_the_error_names_xdg_cache_home_when_that_chose_the_folder(tmp_path, fake_cxx, monkeypatch):
    xdg = tmp_path / "xdg"
    xdg.mkdir(mode=0o777)
    xdg.chmod(0o777)
    monkeypatch.delenv(build_cache.ENV_CACHE, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(xdg))
    with pytest.raises(UserError) as err:
        library.build(tree_files.tree_map(str(copy_tree(tmp_path / "tree"))))
    assert err.value.field == "XDG_CACHE_HOME" and err.value.value == str(xdg / "lwsplit" / "native")


def _plant(entry: Path, how: str, monkeypatch, tmp_path: Path) -> None:
    manifest_path = entry / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    library = entry / manifest["library"]
    if how == "entry-of-another-user":
        give_away(entry, monkeypatch)
    elif how == "library-of-another-user":
        give_away(library, monkeypatch)
    elif how == "library-group-writable":
        library.chmod(0o775)
    elif how == "manifest-others-writable":
        manifest_path.chmod(0o666)
    elif how == "library-replaced":
        library.write_bytes(b"\x7fELF someone else's code")
    elif how == "library-truncated":
        library.write_bytes(library.read_bytes()[:5])
    elif how == "library-a-link":
        real = tmp_path / "elsewhere.so"
        shutil.copy(library, real)
        library.unlink()
        library.symlink_to(real)
    elif how in ("library-absolute", "library-dotdot"):
        evil = tmp_path / "evil.so"
        shutil.copy(library, evil)
        manifest["library"] = str(evil) if how == "library-absolute" else "../../evil.so"
        manifest_path.write_text(json.dumps(manifest))
    elif how == "manifest-truncated":
        manifest_path.write_text(manifest_path.read_text()[:40])
    elif how == "manifest-not-an-object":
        manifest_path.write_text("[1, 2]")
    elif how == "manifest-of-another-key":
        manifest["key"] = "0" * 20
        manifest_path.write_text(json.dumps(manifest))
    elif how == "no-sha-recorded":
        del manifest["library_sha256"]
        manifest_path.write_text(json.dumps(manifest))
    else:
        raise AssertionError(how)


PLANTS = ["entry-of-another-user", "library-of-another-user", "library-group-writable", "manifest-others-writable",
          "library-replaced", "library-truncated", "library-a-link", "library-absolute", "library-dotdot",
          "manifest-truncated", "manifest-not-an-object", "manifest-of-another-key", "no-sha-recorded"]


@pytest.mark.parametrize("how", PLANTS)
def test_an_entry_not_built_by_the_user_or_damaged_is_never_loaded(tmp_path, fake_cxx, monkeypatch, how):
    tree = tree_files.tree_map(str(copy_tree(tmp_path / "tree")))
    cache = tmp_path / "cache"
    first = library.build(tree, root=cache)
    key = keys.source_key(tree)
    assert build_cache.find(cache, key) == first
    _plant(first.library.parent, how, monkeypatch, tmp_path)
    assert build_cache.find(cache, key) is None
    if ROOT_USER or how not in ("entry-of-another-user", "library-of-another-user"):
        again = library.build(tree, root=cache)  # built afresh beside it: no traceback, nothing of it deleted
        assert compiles(fake_cxx) == 2
        assert again.library.parent != first.library.parent and first.library.parent.exists()
        assert build_cache.find(cache, key) == again


def test_a_link_at_the_locks_name_is_refused_and_its_target_kept(tmp_path, fake_cxx):
    tree = tree_files.tree_map(str(copy_tree(tmp_path / "tree")))
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    precious = tmp_path / "precious"
    precious.write_text("a user's file\n")
    (cache / f"{keys.source_key(tree)}.lock").symlink_to(precious)
    with pytest.raises(UserError) as err:
        library.build(tree, root=cache)
    assert precious.read_text() == "a user's file\n"
    assert err.value.field == build_cache.ENV_CACHE and "symbolic link" in str(err.value)
    assert compiles(fake_cxx) == 0


def test_a_lock_of_another_user_is_refused(tmp_path, fake_cxx, monkeypatch):
    tree = tree_files.tree_map(str(copy_tree(tmp_path / "tree")))
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    lock = cache / f"{keys.source_key(tree)}.lock"
    lock.write_text("")
    if not ROOT_USER:
        pytest.skip("giving a file away needs root; the folder itself is checked first otherwise")
    os.chown(lock, OTHER, OTHER)
    with pytest.raises(UserError) as err:
        library.build(tree, root=cache)
    assert err.value.field == build_cache.ENV_CACHE and f"uid {OTHER}" in str(err.value)
    assert compiles(fake_cxx) == 0


def test_the_lock_is_not_truncated(tmp_path, fake_cxx):
    tree = tree_files.tree_map(str(copy_tree(tmp_path / "tree")))
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    lock = cache / f"{keys.source_key(tree)}.lock"
    lock.write_text("kept\n")
    lock.chmod(0o600)
    library.build(tree, root=cache)
    assert lock.read_text() == "kept\n"


def _as_other_user(tree: str, caches: list) -> list:
    """What ``build`` gives uid ``OTHER`` for each cache folder: a forked child that drops root (the
    interpreter is already loaded, wherever it lives) and writes one line per folder back."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        code = 1
        try:
            os.close(read)
            os.setgroups([])
            os.setgid(OTHER)
            os.setuid(OTHER)
            lines = []
            for cache in caches:
                try:
                    built = library.build(tree_files.tree_map(tree), root=Path(cache))
                    lines.append(f"built {built.library.parent.parent == Path(cache)}")
                except UserError as exc:
                    lines.append(f"error: {exc}")
            os.write(write, ("\n".join(lines) + "\n").encode())
            code = 0
        except BaseException:
            os.write(write, traceback.format_exc().encode())
        finally:
            os._exit(code)
    os.close(write)
    chunks, deadline = [], time.monotonic() + 120
    with os.fdopen(read, "rb") as f:
        while time.monotonic() < deadline:
            if select.select([f], [], [], 1.0)[0]:
                chunk = os.read(f.fileno(), 65536)
                if not chunk:
                    break
                chunks.append(chunk)
        else:  # a child stuck on a lock another thread held at the fork: end it, fail
            os.kill(pid, signal.SIGKILL)
    out = b"".join(chunks).decode()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, out
    return out.splitlines()


@pytest.mark.skipif(not ROOT_USER, reason="running a second user needs root")
@pytest.mark.slow  # a forked child
def test_a_second_user_is_refused_root_s_cache_and_told_when_its_own_is_read_only(fake_cxx, monkeypatch):
    """A real second uid: root's cache is not its own; its own read-only cache is one line, not a traceback;
    a private folder in a sticky team folder works."""
    base = Path(tempfile.mkdtemp(prefix="lwsplit-users-"))
    try:
        base.chmod(0o755)
        cxx = base / "fake-cxx"  # where the other user can run it
        cxx.write_text(FAKE_CXX)
        cxx.chmod(0o755)
        monkeypatch.setenv("CXX", str(cxx))
        monkeypatch.delenv("FAKE_CXX_LOG")
        tree = copy_tree(base / "tree")
        # the project's C++ where the other user can read it: a checkout may sit in a folder only root reads
        cpp = base / "cpp"
        shutil.copytree(commands.CPP_DIR, cpp)
        for path in [cpp, *cpp.rglob("*")]:
            path.chmod(0o755 if path.is_dir() else 0o644)
        monkeypatch.setattr(commands, "CPP_DIR", cpp)
        roots = base / "roots-cache"
        roots.mkdir(mode=0o700)
        roots.chmod(0o755)
        readonly = base / "read-only"
        readonly.mkdir(mode=0o500)
        os.chown(readonly, OTHER, OTHER)
        team = base / "team"
        team.mkdir()
        team.chmod(0o1777)
        lines = _as_other_user(str(tree), [str(roots), str(readonly), str(team / "u12345")])
        assert len(lines) == 3, lines
        assert lines[0].startswith(f"error: {build_cache.ENV_CACHE}='{roots}': a cache folder only you (uid {OTHER})")
        assert "owned by uid 0" in lines[0]
        assert lines[1].startswith(f"error: {build_cache.ENV_CACHE}='{readonly}'") and "Permission denied" in lines[1]
        assert lines[2] == "built True"
        assert list(roots.iterdir()) == [] and list(readonly.iterdir()) == []
        assert (team / "u12345").stat().st_uid == OTHER and (team / "u12345").stat().st_mode & 0o777 == 0o700
    finally:
        shutil.rmtree(base, ignore_errors=True)


# ---- dependencies that cannot go stale --------------------------------------------------------------------


def test_a_depfile_is_read_as_make_reads_it():
    text = ("/c/out\\ dir/l.so: /t/a\\ b/x.cpp /t/c$$d/y.h \\\n  /t/e\\#f/z.h /t/back\\\\slash.h\\\n"
            " /t/tab\\\tname.h /t/two\\\\\\ w.h\n/t/phony.h:\n")
    assert cachefs.parse_depfile(text) == ["/t/a b/x.cpp", "/t/c$d/y.h", "/t/e#f/z.h", "/t/back\\\\slash.h",
                                           "/t/tab\tname.h", "/t/two\\ w.h"]


def test_the_depfile_gcc_writes_for_odd_names_parses_to_those_names(tmp_path):
    """g++'s own -MD output for a folder with a space, '$' and '#', and a header reached by a link."""
    cxx = shutil.which(os.environ.get("CXX", "g++")) or shutil.which("g++")
    if cxx is None:
        pytest.skip("no C++ compiler")
    odd = tmp_path / "a b$c#d"
    odd.mkdir()
    (odd / "h x.h").write_text("int x;\n")
    (tmp_path / "link.h").symlink_to(odd / "h x.h")
    (tmp_path / "s.cpp").write_text('#include "a b$c#d/h x.h"\n#include "link.h"\n')
    subprocess.run([cxx, "-E", "-o", os.devnull, "-MD", "-MF", "deps.d", "s.cpp"], cwd=tmp_path, check=True,
                   timeout=60)
    deps = cachefs.parse_depfile((tmp_path / "deps.d").read_text())
    assert "a b$c#d/h x.h" in deps and "link.h" in deps and "s.cpp" in deps


def test_nothing_the_compiler_read_can_change_unseen(tmp_path, fake_cxx, monkeypatch):
    """One build (g++ preprocessing: its own -MD file and search path; the library a stand-in) of a tree in a folder whose name has a space and '$'; then each way a header could
    change without the entry noticing, undone after: a header named through the escaped depfile, the
    target of a header that is a symbolic link out of the tree, a new header that shadows an included
    one (found earlier on the search path). Each makes the entry stale; undoing it makes it current."""
    tree = copy_tree(tmp_path / "a tree $x" / "tree")
    kv = tree / "xllm/core/framework/kv_cache"
    estimation_h = kv / "kv_cache_estimation.h"
    estimation_h.write_text(estimation_h.read_text().replace(
        '#include "framework/kv_cache/kv_cache_capacity.h"',
        '#include "framework/kv_cache/kv_cache_capacity.h"\n#include "framework/kv_cache/extra.h"'))
    (kv / "extra.h").write_text("#pragma once\n// a header no role names\n")
    outside = tmp_path / "elsewhere" / "capacity.h"
    outside.parent.mkdir()
    shutil.move(kv / "kv_cache_capacity.h", outside)
    (kv / "kv_cache_capacity.h").symlink_to(outside)
    monkeypatch.setenv("FAKE_CXX", "gxx-deps")
    cache = tmp_path / "cache"
    tree_map = tree_files.tree_map(str(tree))
    built = library.build(tree_map, root=cache)
    key = keys.source_key(tree_map)
    assert build_cache.find(cache, key) == built
    shadow = tree / "xllm/framework/kv_cache/extra.h"  # "framework/..." is looked up in -I xllm before xllm/core

    def escaped_name_edit(undo: bool) -> None:
        (kv / "extra.h").write_text("#pragma once\n// a header no role names\n" + ("" if undo else "int y;\n"))

    def link_target_edit(undo: bool) -> None:
        text = outside.read_text()
        outside.write_text(text[:-len("// edited\n")] if undo else text + "// edited\n")

    def shadowing_header(undo: bool) -> None:
        if undo:
            shutil.rmtree(tree / "xllm/framework")
        else:
            shadow.parent.mkdir(parents=True)
            shadow.write_text("#pragma once\n#define SHADOWED 1\n")

    missed = []
    for change in (escaped_name_edit, link_target_edit, shadowing_header):
        change(False)
        if build_cache.find(cache, key) is not None:
            missed.append(change.__name__)
        change(True)
        assert build_cache.find(cache, key) == built, change.__name__
    assert missed == []
    assert any(" " in p and "$" in p for p in built.manifest["deps"])
    assert str(outside) in built.manifest["deps"]


def test_the_include_search_path_is_in_the_key(tmp_path):
    tree = copy_tree(tmp_path / "tree")
    assert keys.source_key(tree_files.tree_map(str(tree))) != keys.source_key(
        tree_files.tree_map(str(tree), {"include_dirs": "xllm/core,xllm"}))


# ---- bounded builds -----------------------------------------------------------------------------------------


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1].startswith("Z")
    except FileNotFoundError:
        return True


def _wait_gone(pids, seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if all(_gone(p) for p in pids):
            return True
        time.sleep(0.05)
    return False


def test_a_compiler_that_hangs_is_stopped_at_the_limit_with_its_children(tmp_path, fake_cxx, monkeypatch):
    pids = tmp_path / "pids"
    monkeypatch.setenv("FAKE_CXX", "hang")
    monkeypatch.setenv("FAKE_CXX_PIDS", str(pids))
    monkeypatch.setenv(TIMEOUT, "0.8")
    cache = tmp_path / "cache"
    started = time.monotonic()
    with pytest.raises(UserError) as err:
        library.build(tree_files.tree_map(str(copy_tree(tmp_path / "tree"))), root=cache)
    assert time.monotonic() - started < 30
    assert err.value.field == "CXX" and err.value.value == os.environ["CXX"]
    assert TIMEOUT in str(err.value) and "0.8 s" in str(err.value)
    assert _wait_gone(int(p) for p in pids.read_text().split())
    assert entries(cache) == []  # no .tmp-* folder left


def test_a_compiler_that_hangs_on_version_is_one_error(tmp_path, fake_cxx, monkeypatch):
    monkeypatch.setenv("FAKE_CXX", "hang-version")
    monkeypatch.setenv(TIMEOUT, "1")
    with pytest.raises(UserError) as err:
        library.build(tree_files.tree_map(str(copy_tree(tmp_path / "tree"))), root=tmp_path / "cache")
    assert err.value.field == "CXX" and "--version" in str(err.value)


@pytest.mark.parametrize("value", ["soon", "0", "-5", "nan", "1e9"])
def test_a_bad_build_timeout_names_the_setting(monkeypatch, value):
    monkeypatch.setenv(TIMEOUT, value)
    with pytest.raises(UserError) as err:
        commands.build_timeout()
    assert err.value.field == TIMEOUT and "(0, 86400]" in str(err.value)


_BUILDER = """
import signal
import sys
from pathlib import Path
from implementations.xllm_native.build import library
from implementations.xllm_native.tree import files as tree_files
signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a terminal, whatever the test runner ignores
signal.signal(signal.SIGTERM, signal.SIG_DFL)
library.build(tree_files.tree_map(sys.argv[1]), root=Path(sys.argv[2]))
"""


@pytest.mark.slow  # a child interpreter
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_during_the_build_ends_the_compiler_and_leaves_no_temporary_folder(tmp_path, fake_cxx, sig):
    pids = tmp_path / "pids"
    cache = tmp_path / "cache"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "FAKE_CXX": "hang", "FAKE_CXX_PIDS": str(pids)}
    proc = subprocess.Popen([sys.executable, "-c", _BUILDER, str(copy_tree(tmp_path / "tree")), str(cache)],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not pids.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert pids.exists(), proc.communicate(timeout=5)
        assert [p.name for p in entries(cache)][0].startswith(".tmp-")
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    compiler = [int(p) for p in pids.read_text().split()]
    still = [p for p in compiler if not _wait_gone([p], 15)]
    for p in still:
        os.kill(p, signal.SIGKILL)
    assert still == [], (proc.returncode, out, err)
    if sig == signal.SIGTERM:
        assert proc.returncode == -signal.SIGTERM, err  # ended by the signal it got, after the cleanup
    else:
        assert "KeyboardInterrupt" in err
    assert entries(cache) == [], (proc.returncode, err)


# ---- big files, full disks, odd paths -----------------------------------------------------------------------


def test_a_huge_role_file_is_refused_by_name_without_reading_it_whole(tmp_path, fake_cxx):
    tree = copy_tree(tmp_path / "tree")
    big = tree / "xllm/core/framework/block/block_utils.cpp"
    with open(big, "ab") as f:
        f.truncate(cachefs.MAX_SOURCE_BYTES + 1)
    with pytest.raises(UserError) as err:
        library.build(tree_files.tree_map(str(tree)), root=tmp_path / "cache")
    assert err.value.field == "implementation.files.support" and str(big) in str(err.value)
    assert "16 MiB" in str(err.value) and compiles(fake_cxx) == 0


def test_a_full_disk_is_blamed_on_the_cache_not_the_tree(tmp_path, fake_cxx, monkeypatch):
    monkeypatch.setenv("FAKE_CXX", "enospc")
    cache = tmp_path / "cache"
    with pytest.raises(UserError) as err:
        library.build(tree_files.tree_map(str(copy_tree(tmp_path / "tree"))), root=cache)
    assert err.value.field == build_cache.ENV_CACHE and err.value.value == str(cache)
    assert "room" in str(err.value) and "No space left on device" in str(err.value)
    assert "does not compile" not in str(err.value)
    assert entries(cache) == []


def test_a_full_disk_while_writing_the_entry_is_blamed_on_the_cache(tmp_path, fake_cxx, monkeypatch):
    real = Path.write_text

    def full(self, *args, **kwargs):
        if self.name == "manifest.json":
            raise OSError(28, "No space left on device", str(self))
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Path, "write_text", full)
    cache = tmp_path / "cache"
    with pytest.raises(UserError) as err:
        library.build(tree_files.tree_map(str(copy_tree(tmp_path / "tree"))), root=cache)
    assert err.value.field == build_cache.ENV_CACHE and "No space left on device" in str(err.value)
    assert entries(cache) == []


def test_a_tree_path_that_is_not_utf8_is_one_error(tmp_path, fake_cxx):
    tree = copy_tree(tmp_path / os.fsdecode(b"caf\xe9") / "tree")
    with pytest.raises(UserError) as err:
        library.build(tree_files.tree_map(str(tree)), root=tmp_path / "cache")
    assert err.value.field == tree_files.FIELD and "UTF-8" in str(err.value)


def test_a_cache_path_that_is_not_utf8_works(tmp_path, fake_cxx):
    cache = tmp_path / os.fsdecode(b"cach\xe9")
    built = library.build(tree_files.tree_map(str(copy_tree(tmp_path / "tree"))), root=cache)
    assert built.library.is_file() and build_cache.find(cache, built.manifest["key"]) == built


@pytest.mark.slow  # the command itself
def test_a_cache_that_is_a_file_is_one_error_line_from_harness_plan(tmp_path):
    cache = tmp_path / "cache"
    cache.write_text("")
    env = {**os.environ, "PYTHONPATH": str(ROOT), build_cache.ENV_CACHE: str(cache)}
    proc = subprocess.run([sys.executable, "-m", "harness.plan", "implementation=xllm_native",
                           f"implementation.source_dir={FIXTURE}", "model=deepseek_v32", "layerwise=off"],
                          capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith(f"error: {build_cache.ENV_CACHE}='{cache}'") and proc.stderr.count("\n") == 1
    assert "not a folder" in proc.stderr and "XDG_CACHE_HOME" in proc.stderr


def test_a_compiler_that_cannot_be_started_is_one_error(tmp_path, monkeypatch):
    cxx = tmp_path / "cxx"
    cxx.write_text("#!/nonexistent/lwsplit-interpreter\n")  # on PATH and executable, yet exec fails
    cxx.chmod(0o755)
    monkeypatch.setenv("CXX", str(cxx))
    with pytest.raises(UserError) as err:
        library.build(tree_files.tree_map(str(copy_tree(tmp_path / "tree"))), root=tmp_path / "cache")
    assert err.value.field == "CXX" and "a C++20 compiler this user can run" in str(err.value)
    assert entries(tmp_path / "cache") == []
