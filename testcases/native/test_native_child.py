"""A tree's compiled code runs in a child process: what it does to its process is a verdict, never the
controller's exit, hang or output.

One faulty copy of the fixture tree (one build): its ``estimate_kv_cache_capacity`` picks a fault
from the block size it is asked about (``FAULTS``), so every fault shares one library and one host.
"""

from __future__ import annotations

import errno
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from contract.errors import ImplementationFailure, PlanError, UserError
from contract.specs import CacheSpec
from harness import procfs
from implementations.xllm_native.build import cache as build_cache
from implementations.xllm_native.build import cachefs, library
from implementations.xllm_native.runtime import host, host_client, native, tensor_lib
from implementations.xllm_native.tree import files as tree_files
from testcases import ROOT
from testcases.native.test_native_adapter import BUDGET, ESTIMATION, FIXTURE, LAYER, MODEL
from testcases.unit import _models as M

pytestmark = pytest.mark.slow  # builds C++ and starts harness commands

FAULTS = {"exit": 901, "abort": 902, "segv": 903, "loop": 904, "printf": 905, "gbk": 906, "layers": 907,
          "xfsz": 908, "notes": 909, "setsid": 910, "check-in-catch": 911, "stale-exception": 912,
          "setsid-abort": 913, "huge-reply": 914, "deep-reply": 915, "check-elsewhere": 916}
"""The block size that makes the faulty tree's estimate do each fault."""
GBK_MESSAGE = "预算不足"
CHECK_FILE_ENV = "LWSPLIT_TEST_CHECK_FILE"
"""The file the check-elsewhere fault's CHECK names as its own (glog's file:line, as ``#line`` sets it)."""
SLEEPER = "sleep 654321"
"""What the setsid fault leaves running (a grandchild in a session of its own)."""
INJECTED = """
#include <sys/wait.h>
#include <unistd.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>
namespace xllm {
namespace {
void lwsplit_fault(int64_t block_size) {  // the test's faults, picked by the block size asked about
  switch (block_size) {
    case 901: std::exit(0);
    case 902: std::fprintf(stderr, "about to abort\\n"); std::abort();
    case 903: { LOG(WARNING) << "about to write through NULL"; volatile int* volatile nowhere = nullptr; *nowhere = 1; break; }
    case 904: { volatile bool spin = true; while (spin) { } break; }
    case 905: std::printf("tree says hello\\n"); break;
    case 906: { const int64_t cache_size_in_bytes = 0; CHECK_GT(cache_size_in_bytes, 0) << "GBK_MESSAGE"; break; }
    case 908: { static char chunk[1 << 20]; std::memset(chunk, 'x', sizeof(chunk));
                for (int i = 0; i < 20; ++i) std::fwrite(chunk, 1, sizeof(chunk), stderr); break; }
    case 909: { FILE* f = std::fopen("notes.txt", "w"); if (f) { std::fputs("the tree's notes\\n", f); std::fclose(f); } break; }
    case 913:
    case 910: { const pid_t first = fork();
                if (first == 0) { setsid(); if (fork() == 0) execl("/bin/sleep", "sleep", "654321", (char*)nullptr); _exit(0); }
                if (first > 0) waitpid(first, nullptr, 0);
                if (block_size == 913) { usleep(100000); std::abort(); }
                break; }
    case 911: try { throw std::runtime_error("being handled"); } catch (...) { CHECK(false) << "a CHECK inside a catch block"; }
              break;
    case 912: if (std::current_exception()) { std::fprintf(stderr, "an exception of an earlier call is still being handled\\n"); std::abort(); }
              break;
    case 914:
    case 915: {  // a frame of the host's protocol written by the tree itself, on the reply pipe (host.py's argv)
      std::ifstream in("/proc/self/cmdline");
      const std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      std::vector<std::string> argv;
      for (size_t start = 0, end; (end = all.find('\\0', start)) != std::string::npos; start = end + 1)
        argv.push_back(all.substr(start, end - start));
      size_t at = 0;
      while (at < argv.size() && argv[at].find("host.py") == std::string::npos) ++at;
      const int fd = std::atoi(argv.at(at + 3).c_str());
      const std::string body = block_size == 914 ? std::string() : std::string(100000, '[') + std::string(100000, ']');
      const uint32_t n = block_size == 914 ? 0xFFFFFF00u : static_cast<uint32_t>(body.size());
      const unsigned char head[5] = {'R', static_cast<unsigned char>(n >> 24), static_cast<unsigned char>(n >> 16),
                                     static_cast<unsigned char>(n >> 8), static_cast<unsigned char>(n)};
      if (write(fd, head, 5) != 5) std::abort();
      for (size_t done = 0; done < body.size();) { const ssize_t w = write(fd, body.data() + done, body.size() - done); if (w <= 0) std::abort(); done += w; }
      break; }
    case 916: google::LogMessageFatal(std::getenv("LWSPLIT_TEST_CHECK_FILE"), 1).stream() << "a CHECK in a file the test names"; break;
    default: break;
  }
}
}  // namespace
}  // namespace xllm
"""
LIMIT_S = 3.0


def faulty_tree(base: Path) -> Path:
    """A copy of the fixture whose estimate calls ``lwsplit_fault`` first; its source is GBK-encoded, as a
    port's may be (the CHECK message's bytes are not UTF-8)."""
    tree = base / "tree"
    import shutil

    shutil.copytree(FIXTURE, tree)
    path = tree / ESTIMATION
    text = path.read_text()
    head = '#include "util/utils.h"\n'
    entry = "KVCacheCapacity cap;\n"
    layers = "cap.n_layers(options.is_draft_engine ? model_args.num_nextn_predict_layers() : model_args.n_layers());\n"
    assert head in text and entry in text and layers in text
    text = text.replace(head, head + INJECTED.replace("GBK_MESSAGE", GBK_MESSAGE), 1)
    text = text.replace(entry, entry + "  lwsplit_fault(options.block_size);\n", 1)
    text = text.replace(layers, layers + "  if (options.block_size == 907) cap.n_layers(cap.n_layers() + 1);\n", 1)
    path.write_bytes(text.encode("gbk"))
    return tree


@pytest.fixture(scope="module")
def tree(once_per_run, cache):
    """The faulty tree, copied and built once per test run (``once_per_run``): the cache's key holds the tree's
    folder, so a copy per pytest-xdist worker would be compiled once per worker."""
    def copy_and_build(folder: Path) -> None:
        os.environ[build_cache.ENV_CACHE] = str(cache)
        try:
            library.build(tree_files.tree_map(str(faulty_tree(folder))))
        finally:
            os.environ.pop(build_cache.ENV_CACHE, None)

    return once_per_run("native-faulty-tree", copy_and_build) / "tree"


@pytest.fixture(scope="module")
def impl(tree, cache):
    os.environ[build_cache.ENV_CACHE] = str(cache)
    try:
        from implementations.xllm_native import XllmNativeImplementation

        yield XllmNativeImplementation(source_dir=str(tree), timeout_s=LIMIT_S)
    finally:
        os.environ.pop(build_cache.ENV_CACHE, None)


def run(fault: str = ""):
    """The fixture's run at block size 16, or at a fault's block size (a budget holding blocks of that size)."""
    if not fault:
        return M.run_spec(MODEL, split=2, world=4, budget_bytes=BUDGET, cache=CacheSpec(block_size=16))
    return M.run_spec(MODEL, split=2, world=4, budget_bytes=1000 * BUDGET, cache=CacheSpec(block_size=FAULTS[fault]))


def host_pids(parent: int) -> list[int]:
    """The host processes ``parent`` started (its children running host.py: each the keeper of one host)."""
    return [pid for pid in procfs.children(parent) if str(host_client.HOST) in (procfs.cmdline(pid) or "")]


def library_host(keeper: int) -> int:
    """The process that has the library open: the keeper's child running host.py."""
    (pid,) = host_pids(keeper)
    return pid


# ---- in process: the controller lives on and the next call works --------------------------------------------


@pytest.mark.parametrize("fault, said", [
    ("exit", "the compiled estimate ended the process: it exited with status 0 (exit() in the tree's code)"),
    ("abort", "the compiled estimate crashed: killed by SIGABRT (abort); its last output: about to abort"),
    ("segv", re.compile(r"the compiled estimate crashed: killed by SIGSEGV \(segmentation fault\); its last output: "
                        r"W kv_cache_estimation\.cpp:\d+\] about to write through NULL")),  # glog's line, kept
    ("loop", f"the compiled estimate did not return within {LIMIT_S:g} s (runner.timeout_s); its process was killed"),
    ("printf", "the compiled estimate wrote to standard output (planning code must not print): 'tree says hello'"),
    ("layers", "the compiled estimate answered 7 full_attention flags for a model of 6 layers "
               "(model.num_hidden_layers): the tree's layer count is not the model's"),
])
def test_a_tree_that_exits_crashes_hangs_or_prints_is_a_failure_naming_it(impl, tree, fault, said):
    started = time.monotonic()
    with pytest.raises(ImplementationFailure) as err:
        impl.plan(run(fault))
    assert time.monotonic() - started < LIMIT_S + 10
    assert not isinstance(err.value, UserError)  # no check may take it for a refusal
    if isinstance(said, re.Pattern):
        assert re.fullmatch(f"xllm_native tree {re.escape(str(tree))}: {said.pattern}", str(err.value)), str(err.value)
    else:
        assert str(err.value) == f"xllm_native tree {tree}: {said}", str(err.value)
    assert "\n" not in str(err.value)
    assert impl.plan(run()).n_blocks == BUDGET // (4 * LAYER)  # the host started again; the controller is fine


def test_a_gbk_check_message_is_still_the_refusal_naming_its_field(impl):
    with pytest.raises(PlanError) as err:
        impl.plan(run("gbk"))
    assert err.value.field == "cache.kv_budget_bytes"
    assert "CHECK at kv_cache_estimation.cpp:" in err.value.detail and "cache_size_in_bytes, 0" in err.value.detail


def test_a_tree_that_writes_past_the_output_limit_is_ended_by_sigxfsz(impl, tree):
    """Python ignores SIGXFSZ; the host puts its default back, so a tree that writes more than 16 MiB ends there."""
    with pytest.raises(ImplementationFailure) as err:
        impl.plan(run("xfsz"))
    assert str(err.value).startswith(f"xllm_native tree {tree}: the compiled estimate crashed: killed by SIGXFSZ "
                                      f"(wrote more than {host.MAX_OUTPUT_BYTES >> 20} MiB of output)"), str(err.value)[:300]


def test_the_host_works_in_a_private_folder_of_its_own(impl, tmp_path, monkeypatch):
    """A tree that writes ``notes.txt`` by a relative name writes it in the host's folder (0700, removed with the
    host), never in the caller's working folder."""
    impl.native.close()
    monkeypatch.chdir(tmp_path)
    (tmp_path / "notes.txt").write_text("the user's notes\n")
    impl.plan(run("notes"))
    assert (tmp_path / "notes.txt").read_text() == "the user's notes\n"
    pid = impl.native.host_pid
    folder = Path(os.readlink(f"/proc/{pid}/cwd"))
    assert folder != tmp_path and folder.stat().st_mode & 0o777 == 0o700
    assert (folder / "notes.txt").read_text() == "the tree's notes\n"
    impl.native.close()
    assert not folder.exists()


def test_the_library_is_opened_by_a_descriptor_not_by_a_path_on_the_command_line(impl):
    impl.plan(run())
    keeper = impl.native.host_pid
    pid = library_host(keeper)
    assert str(impl.native.built.library) not in procfs.cmdline(pid) + procfs.cmdline(keeper)
    with open(f"/proc/{pid}/maps") as maps:
        assert str(impl.native.built.library) in maps.read()  # the very file that was checked


def _sleepers(mark: str) -> list[int]:
    return [pid for pid in procfs.pids() if procfs.cmdline(pid) == SLEEPER and procfs.alive(pid)
            and f"LWSPLIT_TEST_MARK={mark}".encode() in (procfs.environ(pid) or [])]


def test_a_setsid_grandchild_of_the_tree_ends_with_its_host(impl, monkeypatch):
    """The tree forks, its child calls setsid() and forks a sleeper, then exits: the sleeper (another session,
    its parent gone) stays the host's descendant and ends when the host does."""
    mark = f"{os.getpid()}-{time.monotonic_ns()}"
    impl.native.close()
    monkeypatch.setenv("LWSPLIT_TEST_MARK", mark)  # the new host and the sleeper inherit it
    try:
        impl.plan(run("setsid"))
        deadline = time.monotonic() + 10
        while not _sleepers(mark) and time.monotonic() < deadline:
            time.sleep(0.02)
        sleepers = _sleepers(mark)  # one per estimate call of the plan
        pid = impl.native.host_pid
        assert sleepers and set(sleepers) <= set(host.descendants(pid))  # the host is a subreaper
        impl.native.close()
        deadline = time.monotonic() + 10
        while _sleepers(mark) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not _sleepers(mark)
    finally:
        for _ in range(10):  # one still between fork and exec shows up a moment later
            for pid in _sleepers(mark):
                os.kill(pid, signal.SIGKILL)
            time.sleep(0.05)


def test_a_check_leaves_nothing_of_its_call_behind(impl, tree):
    """A CHECK inside a catch block, then a call that asks whether an exception is being handled: the CHECK's
    thread is parked, not jumped out of (a jump skips the end of the catch, so the next call on that thread still
    "handles" the old exception and this tree aborts)."""
    for _ in range(3):
        with pytest.raises(UserError) as err:
            impl.plan(run("check-in-catch"))
        assert "a CHECK inside a catch block" in str(err.value), str(err.value)
        impl.plan(run("stale-exception"))


def test_a_check_parks_its_thread_and_the_host_is_replaced_after_many(impl, monkeypatch):
    impl.native.close()
    monkeypatch.setattr(native, "MAX_PARKED_THREADS", 3)
    impl.plan(run())
    first = impl.native.host_pid
    threads = procfs.thread_count(library_host(first))
    with pytest.raises(UserError):
        impl.plan(run("check-in-catch"))
    assert procfs.thread_count(library_host(first)) == threads + 1  # the CHECK's thread, parked
    for _ in range(2):
        with pytest.raises(UserError):
            impl.plan(run("check-in-catch"))
    assert impl.native.host_pid is None and not procfs.alive(first)
    impl.plan(run())
    assert impl.native.host_pid not in (None, first)


def test_a_request_longer_than_one_read_of_the_hosts_pipe_is_answered_whole(impl):
    """The host's compiled loop (``lwsplit_serve``) reads a request in pieces of 4 KiB: one of three pieces, its
    long key first, is answered as the same request without that key, and the next request after it too."""
    values = {**impl.model_args(run().model), "layerwise_split_size": 2}
    want = impl.native.call("layout", values)
    assert want.get("owned"), want
    assert impl.native.call("layout", {"unread": "x" * (3 * 4096), **values}) == want
    assert impl.native.call("layout", values) == want


def test_every_check_of_a_long_run_of_them_carries_its_message(impl, monkeypatch):
    """glog writes each CHECK's text after the one before in one buffer of 30,000 bytes (the message that would
    start it afresh never ends: its thread is parked), so a host that answered many CHECKs answers the next one's
    message cut short (here from the 279th, with no limit on parked threads): the host is replaced while its CHECKs'
    texts leave room for one more (``native.GLOG_FATAL_TEXT_BYTES``), and the 300th CHECK in a row still says why."""
    impl.native.close()
    monkeypatch.setattr(native, "MAX_PARKED_THREADS", 10_000)
    hosts = set()
    for i in range(300):
        with pytest.raises(UserError) as err:
            impl.plan(run("check-in-catch"))
        assert "a CHECK inside a catch block" in str(err.value), (i, str(err.value))
        hosts.add(impl.native.host_pid)
    assert len(hosts - {None}) >= 2, hosts


def test_the_library_never_jumps_out_of_glog(impl):
    """No setjmp/longjmp in the library: a CHECK is answered without leaving glog's failure path by a jump."""
    symbols = subprocess.run(["nm", "-D", "--undefined-only", str(impl.native.built.library)], capture_output=True,
                             text=True, check=True).stdout
    assert not re.search(r"\b_*(sig)?(set|long)jmp", symbols), [s for s in symbols.splitlines() if "jmp" in s]


def test_a_setsid_grandchild_of_a_tree_that_crashes_its_host_ends_too(impl, tree, monkeypatch):
    """The host's keeper (the process its caller started) is a subreaper too: the orphans of a host the tree
    crashed come to it, and it kills them before it ends as the host did."""
    mark = f"{os.getpid()}-{time.monotonic_ns()}"
    impl.native.close()
    monkeypatch.setenv("LWSPLIT_TEST_MARK", mark)
    try:
        with pytest.raises(ImplementationFailure) as err:
            impl.plan(run("setsid-abort"))
        assert str(err.value).startswith(f"xllm_native tree {tree}: the compiled estimate crashed: killed by SIGABRT")
        deadline = time.monotonic() + 10
        while _sleepers(mark) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not _sleepers(mark)
    finally:
        for _ in range(10):
            for pid in _sleepers(mark):
                os.kill(pid, signal.SIGKILL)
            time.sleep(0.05)


def _feed_fifo(fifo: Path, text: bytes, stop: threading.Event) -> None:
    """Write ``text`` to ``fifo`` once a reader opens it (a reader that blocked on it would otherwise wait for ever)."""
    while not stop.wait(0.05):
        try:
            fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        except OSError as exc:
            if exc.errno == errno.ENXIO:  # no reader yet
                continue
            return
        try:
            os.write(fd, text)
        finally:
            os.close(fd)
        return


@pytest.mark.parametrize("where, why", [
    ("outside", "{named} is outside the tree and the build folder"),
    ("link", "{named} is outside the tree and the build folder"),  # a link in the tree to a file outside it
    ("dev-zero", "{named} is outside the tree and the build folder"),
    ("fifo", "{named} is not a regular file"),
], ids=["outside", "link", "dev-zero", "fifo"])
def test_a_check_naming_a_file_it_may_not_read_quotes_nothing_from_it(impl, tree, tmp_path, monkeypatch, where, why):
    """The CHECK's file is the tree's to report (glog's ``__FILE__``, set by ``#line``): the controller reads only a
    regular file inside the tree or the build folder, without blocking, so a FIFO, ``/dev/zero`` or a user's file
    can neither hang it nor be quoted."""
    secret = tmp_path / "secret.cpp"
    secret.write_text("CHECK(the_users_secret);\n")
    named = {"outside": secret, "link": tree / "lwsplit-test-link.cpp", "dev-zero": Path("/dev/zero"),
             "fifo": tree / "lwsplit-test-fifo.cpp"}[where]
    if where == "link":
        named.symlink_to(secret)
    stop = threading.Event()
    feeder = threading.Thread(target=_feed_fifo, args=(named, b"CHECK(read_from_a_fifo);\n", stop))
    if where == "fifo":
        os.mkfifo(named)
        feeder.start()
    impl.native.close()
    monkeypatch.setenv(CHECK_FILE_ENV, str(named))  # the new host inherits it
    try:
        started = time.monotonic()
        with pytest.raises(UserError) as err:
            impl.plan(run("check-elsewhere"))
        assert time.monotonic() - started < LIMIT_S
    finally:
        stop.set()
        if feeder.is_alive():
            feeder.join()
        if named.parent == tree:
            named.unlink()
        impl.native.close()
    assert err.value.field == "implementation"
    assert err.value.detail.startswith(f"CHECK at {named.name}:1 (its condition not quoted: "
                                       f"{why.format(named=named)}): "), err.value.detail
    assert "the_users_secret" not in str(err.value) and "read_from_a_fifo" not in str(err.value)


def test_a_reply_longer_than_the_cap_is_a_failure_naming_its_size(impl, tree):
    """The tree writes a frame of the host's protocol announcing 4 GiB: the controller reads none of it."""
    started = time.monotonic()
    with pytest.raises(ImplementationFailure) as err:
        impl.plan(run("huge-reply"))
    assert time.monotonic() - started < LIMIT_S  # not the time limit
    assert str(err.value) == (f"xllm_native tree {tree}: the compiled estimate answered a reply of {0xFFFFFF00} bytes, "
                              f"more than the {host_client.MAX_REPLY_BYTES >> 20} MiB a reply may hold; its process was killed")
    assert impl.plan(run()).n_blocks == BUDGET // (4 * LAYER)


def test_a_reply_nested_past_the_json_reader_is_a_failure_not_a_recursion_error(impl, tree):
    """A reply of 100,000 nested lists: one failure naming it, and a new host for the next call (the tree's own
    frame left the old host's pipe out of step)."""
    with pytest.raises(ImplementationFailure) as err:
        impl.plan(run("deep-reply"))
    assert str(err.value) == (f"xllm_native tree {tree}: the compiled estimate answered JSON nested deeper than the "
                              f"reader goes (Python's recursion limit, {sys.getrecursionlimit()})")
    assert impl.native.host_pid is None
    assert impl.plan(run()).n_blocks == BUDGET // (4 * LAYER)


def test_the_hosts_folder_is_refused_in_a_temporary_folder_others_can_write(impl, tmp_path, monkeypatch):
    """``TMPDIR`` a folder anyone may write without the sticky bit: another user could rename the host's folder and
    put their own in its place. One error naming TMPDIR; with the sticky bit the host's folder is made there."""
    team = tmp_path / "team"
    team.mkdir()
    team.chmod(0o777)
    impl.native.close()
    monkeypatch.setenv("TMPDIR", str(team))
    monkeypatch.setattr(tempfile, "tempdir", None)  # read TMPDIR again
    with pytest.raises(UserError) as err:
        impl.plan(run())
    assert err.value.field == "TMPDIR" and err.value.value == str(team)
    assert err.value.detail == (f"{team} is writable by group or others without the sticky bit (mode 0777), so anyone "
                                "could replace what is in it")
    assert not any(p.name.startswith("lwsplit-host-") for p in team.iterdir())
    team.chmod(0o1777)
    impl.plan(run())
    folder = Path(os.readlink(f"/proc/{impl.native.host_pid}/cwd"))
    assert folder.parent == team and folder.stat().st_mode & 0o777 == 0o700
    impl.native.close()


class _Answers:
    """A stand-in for the tree's library: each op's reply as given."""

    who = "xllm_native tree /stand-in"

    def __init__(self, **replies) -> None:
        self.replies = replies

    def call(self, op, values, *, timeout_s=None):
        return self.replies[op]


@pytest.mark.parametrize("owned, said", [
    ([[1] * 6], "1 owned masks for layerwise.split_size 2"),
    ([[1] * 6, [0] * 5], "split rank 1's owned mask with 5 flags for a model of 6 layers"),
    ({"0": [1]}, "owned {'0': [1]} for layerwise.split_size 2"),
])
def test_layout_masks_that_do_not_fit_the_model_are_refused_by_name(owned, said):
    from implementations.xllm_native import XllmNativeImplementation

    impl = XllmNativeImplementation.__new__(XllmNativeImplementation)
    impl.native, impl.timeout_s = _Answers(layout={"owned": owned}), None
    with pytest.raises(ImplementationFailure) as err:
        impl.owned_masks(run(), 2)
    assert str(err.value).startswith(f"xllm_native tree /stand-in: the compiled layout answered {said}"), str(err.value)


def test_an_implementation_failure_crosses_processes_whole():
    import pickle

    failure = ImplementationFailure("xllm_native tree /t", "the compiled estimate crashed", "last | lines")
    again = pickle.loads(pickle.dumps(failure))
    assert (type(again), str(again), again.tail) == (ImplementationFailure, str(failure), "last | lines")


def test_the_library_is_never_opened_in_the_controller(impl):
    impl.plan(run())
    with open("/proc/self/maps") as maps:
        assert str(impl.native.built.library) not in maps.read()
    assert host_pids(os.getpid())  # it is open in the host


def test_a_forked_process_starts_its_own_host(impl):
    """A rank forked from a process with a live host must not talk on the parent's pipes."""
    impl.plan(run())
    parent_host = host_pids(os.getpid())
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports by its exit status
        code = 1
        try:
            code = 0 if impl.plan(run()).n_blocks == BUDGET // (4 * LAYER) and host_pids(os.getpid()) else 3
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert host_pids(os.getpid()) == parent_host
    assert impl.plan(run()).n_blocks == BUDGET // (4 * LAYER)


def test_a_library_that_cannot_be_opened_is_one_failure(tmp_path):
    bad = tmp_path / "liblwsplit_native.so"
    bad.write_bytes(b"not an ELF file")
    tree_map = tree_files.tree_map(str(FIXTURE))
    lib = native.Native(tree_map, build_cache.Built(library=bad, manifest={"library_sha256": cachefs.private_sha(bad)}))
    with pytest.raises(ImplementationFailure) as err:
        lib.call("validate", {})
    assert f"the library {bad} could not be opened" in str(err.value)


def test_the_host_ends_when_its_parent_is_killed(tree, cache):
    """A controller killed outright (SIGKILL: no handler runs) leaves no host, even one whose tree loops."""
    script = ("import os, sys\nfrom implementations.xllm_native import XllmNativeImplementation\n"
              "from testcases.native.test_native_child import run\n"
              "impl = XllmNativeImplementation(source_dir=sys.argv[1], timeout_s=600)\nimpl.plan(run('loop'))\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT), build_cache.ENV_CACHE: str(cache)}
    proc = subprocess.Popen([sys.executable, "-c", script, str(tree)], env=env, cwd=ROOT)
    try:
        hosts = wait_for_host(proc)
        folders = {os.readlink(f"/proc/{pid}/cwd") for pid in hosts}
        proc.kill()
        proc.wait(timeout=30)
        assert hosts_end(hosts)
        assert folders and not any(map(os.path.exists, folders))  # the host's working folder went with it
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def hosts_end(hosts: list[int]) -> bool:
    """Whether every host in ``hosts`` is gone within its watchdog's bound."""
    deadline = time.monotonic() + 10 * host.WATCH_INTERVAL_S + 5
    while any(procfs.alive(p) for p in hosts) and time.monotonic() < deadline:
        time.sleep(0.1)
    return not any(procfs.alive(p) for p in hosts)


def wait_for_host(proc: subprocess.Popen, seconds: float = 60) -> list[int]:
    """The host ``proc`` started, once it is in the tree's loop (the request sent)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.returncode
        hosts = host_pids(proc.pid)
        if hosts:
            time.sleep(0.5)  # the host opens the library and takes the request
            return hosts + [pid for keeper in hosts for pid in host.descendants(keeper)]
        time.sleep(0.05)
    raise AssertionError("no host started")


# ---- through the commands: one error line --------------------------------------------------------------------


def plan_command(tree: Path, cache: Path, *extra: str, **kw) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT), build_cache.ENV_CACHE: str(cache)}
    return subprocess.Popen([sys.executable, "-m", "harness.plan", "implementation=xllm_native",
                             f"implementation.source_dir={tree}", "model=llama3_8b", "layerwise=off", *extra],
                            env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


@pytest.mark.parametrize("fault, extra, said", [
    ("printf", (), "the compiled estimate wrote to standard output (planning code must not print): 'tree says hello'"),
    ("loop", ("runner.timeout_s=1",), "the compiled estimate did not return within 1 s (runner.timeout_s)"),
])
def test_harness_plan_says_what_the_tree_did_in_one_line(tree, cache, fault, extra, said):
    proc = plan_command(tree, cache, f"cache.block_size={FAULTS[fault]}", *extra)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 1, err
    assert out == ""  # no JSON, and never the tree's printf
    assert err.startswith(f"error: xllm_native tree {tree}: {said}") and err.count("\n") == 1, err


@pytest.mark.parametrize("sig, rc, said", [(signal.SIGINT, 130, "error: interrupted (SIGINT)"),
                                           (signal.SIGTERM, -signal.SIGTERM, "")])
def test_a_signal_during_a_call_ends_the_controller_and_its_host(tree, cache, sig, rc, said):
    """The tree loops inside the call: the controller, waiting on a pipe, still takes Ctrl-C or SIGTERM at
    once, and its host goes with it."""
    proc = plan_command(tree, cache, f"cache.block_size={FAULTS['loop']}")
    try:
        hosts = wait_for_host(proc)
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=30)
        assert proc.returncode == rc, err
        assert err.startswith(said) and "Traceback" not in err, err
        assert hosts_end(hosts)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def test_a_plan_sweep_with_a_crashing_job_finishes_the_others(tree, cache, tmp_path):
    """mode=plan: the job whose tree aborts is an error naming the crash; the other job plans and the sweep
    writes its results."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), build_cache.ENV_CACHE: str(cache), tree_files.ENV_SOURCE: str(tree)}
    proc = subprocess.run([sys.executable, "-m", "harness", "-m", "mode=plan", "implementation=xllm_native",
                           "model=llama3_8b", "layerwise=off", f"cache.block_size=16,{FAULTS['abort']}",
                           f"hydra.sweep.dir={tmp_path / 'sweep'}"],
                          env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "[2/2] cache.block_size=902: ERROR: xllm_native tree" in proc.stdout + proc.stderr, proc.stdout + proc.stderr
    results = tmp_path / "sweep" / "results.md"
    assert results.is_file(), (proc.stdout, proc.stderr, list(tmp_path.rglob("*")))
    text = results.read_text()
    assert "killed by SIGABRT (abort)" in text, text


def test_a_tc_case_whose_tree_aborts_fails_with_its_last_output_and_the_session_goes_on(tree, cache):
    """In a pytest session of the TCs: the case whose tree aborts inside the estimate role fails, within its
    time limit, with the crash and the tree's last output; the session runs the tests after it and ends
    with its failures counted (exit 1), not an internal error."""
    case = "testcases/tc/test_tc02_estimation.py::test_tc02[llama3_8b-off-w4-xllm_native]"
    env = {**os.environ, "PYTHONPATH": str(ROOT), build_cache.ENV_CACHE: str(cache), tree_files.ENV_SOURCE: str(tree)}
    env.pop("LW_ALLUREDIR", None)
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:randomly", "-p", "no:cacheprovider", "-n", "0",
                           "-q", "-rf", case, "testcases/unit/test_bench_native.py",
                           "--lw-override", "implementation=xllm_native", "--lw-override",
                           f"cache.block_size={FAULTS['abort']}", "--lw-timeout", "30"],
                          env=env, cwd=ROOT, capture_output=True, text=True, timeout=240)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    assert time.monotonic() - started < 200
    assert "1 failed, 9 passed" in out, out
    assert (f"ImplementationFailure: xllm_native tree {tree}: the compiled estimate crashed: killed by SIGABRT "
            "(abort); its last output: about to abort") in out, out


class _NestedReplyLibrary:
    """A tensor library stand-in whose allocate answers JSON nested past Python's parser, keeping no tensor."""

    def __init__(self) -> None:
        self.cleared = 0

    def lwsplit_call(self, _request: bytes) -> bytes:
        return b"[" * 100_000 + b"]" * 100_000

    def lwsplit_clear_tensors(self) -> None:
        self.cleared += 1


def test_a_rank_reads_a_deeply_nested_allocate_reply_as_the_trees_failure():
    """The rank's tensor library reads its reply as the host's replies are read: nesting past the parser is an
    ``ImplementationFailure`` of the tree (not a ``RecursionError`` traceback), and the library's tensors are
    dropped."""

    planted = _NestedReplyLibrary()
    lib = tensor_lib.TensorLibrary.over(planted, "fixture")
    with pytest.raises(ImplementationFailure, match="nested deeper than the reader goes"):
        lib.allocate("op=allocate")
    assert planted.cleared == 1, "the library's tensors were not dropped after a bad reply"
