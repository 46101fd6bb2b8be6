"""The generic distributed runner (harness.rankpool): results, subgroups, faults, clean-up, torchrun mode.

Tests marked ``dist`` start real rank processes (gloo on CPU); they share two module
pools so that only the fault tests pay for a rebuild. Expected values are computed here
from the rank numbers, never taken from the runner.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time

import pytest

from contract.errors import ConfigError
from harness import procfs
from harness.rankpool import PoolUnavailable, RankFailure, RankPool, RankSkip, RankTimeout, get_pool, preload, registry
from harness.rankpool.backend import resolve_backend
from testcases import rank_bodies as bodies

preload(bodies.__name__)  # the pools' forkserver loads the test bodies once, as it loads the TCs'

dist = pytest.mark.dist
unit = pytest.mark.unit


@pytest.fixture(scope="module")
def pool4():
    with RankPool(4, backend="gloo", timeout_s=60) as pool:
        yield pool


@pytest.fixture(scope="module")
def pool2():
    with RankPool(2, backend="gloo", timeout_s=60) as pool:
        yield pool


def child_pids() -> set[int]:
    """Live descendants of this process (ranks are forked by it or by its forkserver child), from /proc."""
    parent_of = {}
    for pid in procfs.pids():
        found = procfs.stat(pid)
        if found is not None and not found.zombie:
            parent_of[pid] = found.ppid
    me, found = os.getpid(), set()
    for pid in parent_of:
        p = parent_of.get(pid)
        while p is not None and p > 1:
            if p == me:
                found.add(pid)
                break
            p = parent_of.get(p)
    return found


# -- the /proc reader ------------------------------------------------------------------------
@unit
def test_procfs_reads_this_process_and_a_zombie_child():
    me = procfs.stat()
    assert (me.pid, me.ppid, me.state) == (os.getpid(), os.getppid(), "R")
    assert procfs.stat(os.getpid()) is not None and procfs.stat(os.getpid()).starttime == me.starttime
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 30  # its command line is there once the exec has run, however loaded
        while "sys.stdin.read()" not in (procfs.cmdline(child.pid) or "") and time.monotonic() < deadline:
            time.sleep(0.01)
        assert "sys.stdin.read()" in procfs.cmdline(child.pid)
        assert child.pid in procfs.children() and procfs.alive(child.pid)
        assert procfs.stat(child.pid).ppid == os.getpid()
        child.kill()  # deterministic, however slowly the child started (EOF on its stdin once timed out under load)
        deadline = time.monotonic() + 30
        while procfs.stat(child.pid).state != "Z" and time.monotonic() < deadline:  # exited, not reaped yet
            time.sleep(0.01)
        assert procfs.stat(child.pid).zombie and not procfs.alive(child.pid)
    finally:
        child.kill()
        child.stdin.close()
        child.wait(timeout=30)
    assert procfs.stat(child.pid) is None and procfs.cmdline(child.pid) is None and not procfs.alive(child.pid)
    assert procfs.busy_cpu_s() > 0


# -- happy path ----------------------------------------------------------------------------
@dist
def test_run_returns_each_ranks_result_in_rank_order(pool4):
    infos = pool4.run(bodies.rank_info)
    assert [i["rank"] for i in infos] == [0, 1, 2, 3]
    assert [i["pid"] for i in infos] == pool4.pids
    assert {i["world_size"] for i in infos} == {4}
    assert {(i["backend"], i["device"]) for i in infos} == {("gloo", "cpu")}
    assert {i["world_sum"] for i in infos} == {float(sum(r + 1 for r in range(4)))}
    assert {i["tmp_dir"] for i in infos} == {pool4.tmp_dir}


@dist
def test_object_collectives_and_tmp_dir(pool4):
    assert pool4.run(bodies.gather_objects, 100) == [[100, 101, 102, 103]] * 4
    assert pool4.run(bodies.broadcast_from, 2) == ["from rank 2"] * 4
    assert pool4.run(bodies.write_then_read) == ["written by rank 0"] * 4
    payload = {"nested": [1, 2.5, "x"], "t": (3, None)}
    assert pool4.run("testcases.rank_bodies:echo", payload) == [payload] * 4


@dist
@pytest.mark.parametrize("sizes", [[10, 4000, 0, 7], [10, 4097, 0, 9000], [70000, 1, 2, 3]],
                         ids=["all-inline", "two-over", "first-over"])
def test_object_collectives_carry_objects_of_any_size(pool4, sizes):
    """Objects within one frame (wire.INLINE_BYTES = 4096 pickled bytes) and over it, mixed in one
    call (an all-gather and a broadcast from rank 3): every rank gets every byte."""
    expected = [bytes([r]) * n for r, n in enumerate(sizes)]
    assert pool4.run(bodies.gather_sized, sizes) == [[expected, expected[3]]] * 4


@dist
@pytest.mark.parametrize("collective", ["broadcast", "all_gather"])
def test_an_object_that_does_not_pickle_fails_every_rank_and_keeps_the_group(pool4, collective):
    pool4.run(bodies.echo, None)  # started (this may be the module's first test on this worker)
    pids, generation = pool4.pids, pool4.generation
    with pytest.raises(RankFailure) as failure:
        pool4.run(bodies.unpicklable_on_rank, 2, collective)
    errors = failure.value.rank_errors
    assert sorted(errors) == [0, 1, 2, 3], errors
    for text in errors.values():  # the same error on every rank, naming the rank and what did not pickle
        assert "UnpicklableObject: rank 2's object could not be pickled" in text and "lambda" in text, text
    assert not failure.value.pool_rebuilt  # every rank ran the same collectives: no rank was left waiting
    assert (pool4.pids, pool4.generation) == (pids, generation)
    assert pool4.run(bodies.gather_objects, 0) == [[0, 1, 2, 3]] * 4


@dist
@pytest.mark.parametrize(
    "partition",
    [((0, 1), (2, 3)), ((0, 2), (1, 3)), ((0,), (1, 2, 3))],
    ids=["consecutive", "strided", "uneven"],
)
def test_split_groups_all_reduce_sums_only_their_members(pool4, partition):
    out = pool4.run(bodies.split_all_reduce, partition)
    for part in partition:
        for rank in part:
            assert out[rank]["group_ranks"] == list(part)
            assert out[rank]["sum"] == float(sum(r + 1 for r in part))


# -- faults --------------------------------------------------------------------------------
@dist
def test_raising_rank_fails_with_its_traceback_and_the_pool_recovers(pool4):
    before = pool4.pids
    with pytest.raises(RankFailure) as failure:
        pool4.run(bodies.raise_on_rank, 2, "boom")
    err = failure.value
    assert type(err) is RankFailure  # detected as a failure, not by waiting out the 60 s timeout
    text = str(err)
    assert "rank 2 raised" in text
    assert "ValueError: boom on rank 2" in text
    assert "in raise_on_rank" in text  # rank 2's own traceback frame
    assert "ranks 0, 1, 3 still running" in text  # they were stuck in the second all_reduce
    assert set(err.rank_errors) == {0, 1, 2, 3} and err.pool_rebuilt
    # where it comes from, from rank 2's exception object (the report's category reads this)
    assert err.root == "rank 2 raised" and err.origin.cause == "ValueError: boom on rank 2"
    assert err.origin.where.startswith("testcases/rank_bodies.py:") and not err.origin.in_implementation
    infos = pool4.run(bodies.rank_info)
    assert [i["world_sum"] for i in infos] == [10.0] * 4
    assert set(pool4.pids).isdisjoint(before)


@dist
def test_a_rank_failing_after_the_same_collectives_keeps_the_live_group(pool4):
    pool4.run(bodies.echo, None)
    pids = pool4.pids
    with pytest.raises(RankFailure) as failure:
        pool4.run(bodies.fail_check_on_rank, 3)
    assert "AssertionError: rank 3 disagrees with sum 10.0" in failure.value.rank_errors[3]
    assert not failure.value.pool_rebuilt and pool4.pids == pids
    assert pool4.run(bodies.split_all_reduce, ((0, 3), (1, 2)))[3]["sum"] == 5.0


@dist
def test_a_rank_out_of_step_with_the_others_forces_a_rebuild(pool2):
    pool2.run(bodies.echo, None)
    pids = pool2.pids
    with pytest.raises(RankFailure) as failure:
        pool2.run(bodies.raise_out_of_step_on_rank, 1)
    assert failure.value.pool_rebuilt  # rank 0 ran a broadcast rank 1 never joined
    assert pool2.run(bodies.rank_info)[1]["world_sum"] == 3.0
    assert set(pool2.pids).isdisjoint(pids)


@dist
def test_exiting_rank_is_reported_with_its_exit_code(pool2):
    with pytest.raises(RankFailure) as failure:
        pool2.run(bodies.exit_on_rank, 1, 7)
    assert type(failure.value) is RankFailure  # the sentinel, not the 60 s timeout, caught it
    assert "rank 1 exited" in str(failure.value)
    assert "exit code 7" in failure.value.rank_errors[1]
    assert pool2.run(bodies.echo, "again") == ["again", "again"]


@dist
def test_crashing_rank_reports_the_signal_and_its_stack(pool2):
    with pytest.raises(RankFailure) as failure:
        pool2.run(bodies.crash_on_rank, 0)
    assert "SIGSEGV" in failure.value.rank_errors[0]
    assert "crash_on_rank" in failure.value.rank_errors[0]  # faulthandler's dump of the dying rank


@dist
def test_a_crashed_rank_shows_what_its_compiled_code_logged_during_the_call(pool2):
    pool2.run(bodies.log_natively, ["I earlier call: not this one's"])
    with pytest.raises(RankFailure) as failure:
        pool2.run(bodies.log_natively_then_crash, 0, [f"E tree.cpp:{n}] line {n}" for n in range(12)])
    text = failure.value.rank_errors[0]
    assert "its compiled code's last log lines:\nE tree.cpp:4] line 4" in text  # the last 8 lines
    assert "E tree.cpp:11] line 11" in text and "line 3\n" not in text and "earlier call" not in text


@pytest.mark.slow
@dist
def test_hang_times_out_with_the_hung_ranks_stack_then_the_pool_recovers(pool2):
    with pytest.raises(RankTimeout) as timeout:
        pool2.run(bodies.hang_on_rank, 1, timeout_s=3)
    text = str(timeout.value)
    assert "did not finish within 3 s" in text
    assert "sleep_forever" in timeout.value.rank_errors[1]
    assert "barrier" in timeout.value.rank_errors[0]  # rank 0 waits for it
    origin = timeout.value.origin  # the failing rank's own frame, read from its stack dump by the pool
    file, line = origin.where.rsplit(":", 1)
    assert file.startswith("harness/rankpool/") and "3 s" in origin.cause
    assert f'{file.rsplit("/", 1)[-1]}", line {line} in' in timeout.value.rank_errors[timeout.value.failed_rank]
    assert pool2.run(bodies.echo, 1) == [1, 1]


@dist
def test_skips_and_agreed_checks_keep_the_live_group(pool4):
    pool4.run(bodies.echo, None)
    pids, generation = pool4.pids, pool4.generation
    with pytest.raises(RankSkip, match="needs 8 cards"):
        pool4.run(bodies.skip_on_all, "needs 8 cards")
    with pytest.raises(RankSkip, match="via pytest.skip"):
        pool4.run(bodies.pytest_skip_on_all, "via pytest.skip")
    with pytest.raises(RankFailure) as failure:
        pool4.run(bodies.check_on_all, 1)
    assert "rank 1: value differs on rank 1" in str(failure.value)
    assert not failure.value.pool_rebuilt
    assert (pool4.pids, pool4.generation) == (pids, generation)
    assert pool4.run(bodies.echo, 2) == [2] * 4


# -- lifecycle -----------------------------------------------------------------------------
@dist
def test_close_leaves_no_rank_process_and_no_temp_dir():
    pool = RankPool(2, backend="gloo")
    pool.run(bodies.echo, 0)
    pids, tmp_dir = set(pool.pids), pool.tmp_dir
    assert pids <= child_pids()
    pool.close()
    assert not pids & child_pids()
    assert not pids & {p.pid for p in multiprocessing.active_children()}
    assert not any(os.path.exists(f"/proc/{pid}") for pid in pids)  # exited and reaped
    assert not os.path.exists(tmp_dir)


def test_a_ranks_output_is_cut_to_its_tail_saying_how_much(pool2, capfd):
    """A rank writing megabytes (through print and straight to its descriptors) costs the report at most
    OUTPUT_TAIL_BYTES per rank per call: the last bytes, and a line saying how many were cut before them."""
    from harness.rankpool.pool import OUTPUT_TAIL_BYTES

    capfd.readouterr()
    pool2.run(bodies.write_output, 4 * OUTPUT_TAIL_BYTES)
    out, err = capfd.readouterr()
    assert "x" * 100 not in out and "y" * 100 not in out
    assert len(err) < 2 * (OUTPUT_TAIL_BYTES + 200), len(err)
    for rank in (0, 1):
        assert re.search(rf"\[rank {rank} wrote \d+ bytes to its standard output and error; the first \d+ were cut, "
                         rf"the last {OUTPUT_TAIL_BYTES} follow\]", err), err[:300]
        assert f"the end of rank {rank}\n" in err  # the tail is kept
    pool2.run(bodies.echo, 1)  # a quiet call reports nothing
    assert capfd.readouterr() == ("", "")


def test_a_ranks_temporary_files_go_with_the_pools_folder(pool2):
    """What a rank or its processes leave in the temporary folder (a native host's working folder, when the pool
    killed the host before it could remove it) is removed with the pool's private folder."""
    for rank, (python_sees, children_see) in enumerate(pool2.run(bodies.temp_dirs)):
        assert python_sees == children_see == os.path.join(pool2.tmp_dir, f"tmp-rank{rank}")


def _orphans(mark: str) -> list[int]:
    return [pid for pid in procfs.pids() if procfs.cmdline(pid) == f"sleep {bodies.ORPHAN_SLEEP}" and procfs.alive(pid)
            and f"LWSPLIT_TEST_MARK={mark}".encode() in (procfs.environ(pid) or [])]


@unit
def test_a_setsid_grandchild_of_a_rank_ends_with_the_pool():
    mark = f"{os.getpid()}-{time.monotonic_ns()}"
    pool = RankPool(1, backend="gloo")
    try:
        pool.run(bodies.start_orphan, mark)
        deadline = time.monotonic() + 10
        while not _orphans(mark) and time.monotonic() < deadline:
            time.sleep(0.02)
        (orphan,) = _orphans(mark)
        assert orphan in procfs.descendants(pool.pids[0])  # the rank is a subreaper
        pool.close()
        deadline = time.monotonic() + 10
        while _orphans(mark) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not _orphans(mark)
    finally:
        pool.close()
        for _ in range(10):
            for pid in _orphans(mark):
                os.kill(pid, signal.SIGKILL)
            time.sleep(0.05)


def running(pid: int) -> bool:
    """True while pid exists and is not a zombie."""
    return procfs.alive(pid)


# The ranks are busy in a body (not reading their pipe) when the parent is SIGKILLed:
# only PR_SET_PDEATHSIG or the parent watchdog can end them. The parent waits until
# every rank has said it is in the body (a file in tmp_dir), then kills itself. It is a
# single-threaded owner on CPU with a SIGTERM handler of its own (as the app has): it forks
# its ranks itself, and they must not keep its handler.
ORPHAN_SCRIPT = """
import json, os, signal, threading, time
signal.signal(signal.SIGTERM, lambda *_: None)
from harness.rankpool import RankPool
from testcases import rank_bodies as selftest_bodies
pool = RankPool(2, backend="gloo", device_type="cpu")
pool.start()
print(json.dumps({"method": pool.start_method, "ranks": pool.run(selftest_bodies.rank_info)}), flush=True)
print(pool.tmp_dir, *pool.pids, flush=True)
threading.Thread(target=pool.run, args=(selftest_bodies.hang_on_rank_after_saying_so, 0), daemon=True).start()
marks = [os.path.join(pool.tmp_dir, f"in-body-{r}") for r in range(2)]
deadline = time.monotonic() + 60
while not all(map(os.path.exists, marks)):
    assert time.monotonic() < deadline, "the ranks never entered the body"
    time.sleep(0.01)
os.kill(os.getpid(), signal.SIGKILL)
"""


@pytest.mark.slow
@dist
def test_ranks_die_when_the_parent_is_killed():
    # Popen, not run(): if ranks survived they would hold the stdout pipe open forever.
    proc = subprocess.Popen([sys.executable, "-c", ORPHAN_SCRIPT], stdout=subprocess.PIPE, text=True)
    with proc:
        started = json.loads(proc.stdout.readline())
        tmp_dir, *pids = proc.stdout.readline().split()
        assert proc.wait(timeout=120) == -9
    assert started["method"] == "fork", "a single-threaded owner on CPU forks its ranks itself"
    assert [r["parent_pid"] for r in started["ranks"]] == [proc.pid] * 2
    assert all(r["sigterm_default"] for r in started["ranks"]), "a rank kept its owner's SIGTERM handler"
    shutil.rmtree(tmp_dir, ignore_errors=True)  # a SIGKILLed parent cannot clean up after itself
    assert len(pids) == 2
    deadline = time.monotonic() + 30  # a bound for a slow CI box, not a speed claim
    while any(running(int(p)) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [p for p in pids if running(int(p))]


AGENT_SCRIPT = """
import os, subprocess, sys
tmp, err = sys.argv[1:]
env = dict(os.environ, RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", LOCAL_WORLD_SIZE="1", MASTER_ADDR="127.0.0.1",
           MASTER_PORT="0", TMPDIR=tmp)  # port 0: the one rank hosts the store itself, on a port of its choice
with open(err, "w") as stderr:
    rank = subprocess.Popen([sys.executable, "-m", "harness.rankpool.launcher", "--timeout-s", "600",
                             "testcases.rank_bodies:hang_on_rank_after_saying_so", "[0]"],
                            env=env, stdout=subprocess.DEVNULL, stderr=stderr)
print(rank.pid, flush=True)
rank.wait()
"""


@pytest.mark.slow
@dist
def test_a_launcher_rank_leaves_when_its_agent_is_killed(tmp_path):
    """A launcher agent (torchrun's, here a stand-in with the same environment) killed outright cannot
    stop its ranks: a rank hanging in its body notices, says so, removes its tmp_dir and exits."""
    tmp, err = tmp_path / "tmp", tmp_path / "rank.err"
    tmp.mkdir()
    agent = subprocess.Popen([sys.executable, "-c", AGENT_SCRIPT, str(tmp), str(err)], stdout=subprocess.PIPE, text=True)
    with agent:
        rank = int(agent.stdout.readline())
        try:
            deadline = time.monotonic() + 120  # bounds for a slow CI box, not speed claims
            while not list(tmp.glob("lwsplit-torchrun-*/in-body-0")):
                assert running(rank) and time.monotonic() < deadline, f"the rank never entered its body: {err.read_text()}"
                time.sleep(0.05)
            agent.kill()
            assert agent.wait(timeout=30) == -9
            deadline = time.monotonic() + 30
            while running(rank) and time.monotonic() < deadline:
                time.sleep(0.05)
            assert not running(rank), "the rank outlived its launcher agent"
        finally:
            if running(rank):
                os.kill(rank, 9)
    assert f"rank 0: the launcher agent (pid {agent.pid}) is gone; leaving" in err.read_text()
    assert not list(tmp.glob("lwsplit-torchrun-*")), "the rank left its tmp_dir behind"


@unit
def test_only_a_single_threaded_owner_on_cpu_forks_its_ranks(monkeypatch):
    """Elsewhere a forkserver starts them: an owner with other Python threads, ranks on cards (CUDA
    does not survive a fork), a start from another thread, Python 3.12+."""
    from harness.rankpool import pool as pool_module

    forks = "fork" if sys.version_info < (3, 12) else "forkserver"
    main = threading.main_thread()
    other = threading.Thread(name="someone-else")

    def live(*threads):  # the process's threads, as both of threading's ways of asking see them
        monkeypatch.setattr(threading, "enumerate", lambda: [main, *threads])
        monkeypatch.setattr(threading, "active_count", lambda: 1 + len(threads))

    live()
    assert pool_module.start_method("cpu") == forks, "a single-threaded owner on CPU did not fork"
    assert pool_module.start_method("cuda") == "forkserver", "ranks on cards were forked"
    live(other)
    assert pool_module.start_method("cpu") == "forkserver", "an owner with another thread forked"
    live()
    found = []
    starter = threading.Thread(target=lambda: found.append(pool_module.start_method("cpu")))
    starter.start()
    starter.join()
    assert found == ["forkserver"], "a start from another thread forked"


@unit
def test_the_harness_spawner_thread_counts_for_a_fork_only_while_it_starts_a_pool():
    """The harness's own spawner thread does not count while it waits for work, only while it starts a pool."""
    from harness.rankpool import spawn

    main = threading.main_thread()
    spawner, other = threading.Thread(name="lwsplit-spawner"), threading.Thread(name="someone-else")
    assert spawn.fork_unsafe_threads([main], main, None, False) == []
    assert spawn.fork_unsafe_threads([main, spawner], main, spawner, False) == [], \
        "the idle spawner thread made the owner use a forkserver"
    assert spawn.fork_unsafe_threads([main, spawner], main, spawner, True) == [spawner]
    assert spawn.fork_unsafe_threads([main, spawner, other], main, spawner, False) == [other]


@dist
def test_a_pool_started_from_a_short_lived_thread_outlives_that_thread():
    # PR_SET_PDEATHSIG follows the forking *thread*: ranks must not be forked by this one.
    pool = RankPool(1, backend="gloo")
    try:
        starter = threading.Thread(target=pool.start)
        starter.start()
        starter.join()
        assert pool.run(bodies.echo, "alive") == ["alive"]
    finally:
        pool.close()
    from harness.rankpool import spawn

    # the spawner thread that forked it lives on, idle: later pools of this process may fork again
    spawner = spawn.spawner_thread()
    assert spawner is not None and spawner.is_alive(), f"the spawner thread is gone: {spawner}"
    assert spawner not in spawn.other_threads(), "the idle spawner counts as another thread of the owner"


@dist
def test_two_pools_run_concurrently_without_colliding(pool2):
    other = RankPool(2, backend="gloo")
    try:
        other.start()
        results: dict[str, list] = {}

        def drive(name: str, pool: RankPool) -> None:
            sums = [pool.run(bodies.collective_round) for _ in range(20)]
            results[name] = [sums, pool.run(bodies.rank_info)]

        threads = [threading.Thread(target=drive, args=(n, p)) for n, p in (("a", pool2), ("b", other))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        for name in ("a", "b"):
            sums, infos = results[name]
            assert sums == [[2.0, 2.0]] * 20  # all_reduce of ones over 2 ranks
            assert [i["rank"] for i in infos] == [0, 1]
        a_infos, b_infos = results["a"][1], results["b"][1]
        assert {i["pid"] for i in a_infos}.isdisjoint(i["pid"] for i in b_infos)
        assert a_infos[0]["tmp_dir"] != b_infos[0]["tmp_dir"]
    finally:
        other.close()


# -- external launcher ---------------------------------------------------------------------
def torchrun(*args: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
           "-m", "harness.rankpool.launcher", *args]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.run(cmd, capture_output=True, text=True, timeout=180, env=env)


@pytest.mark.slow
@dist
def test_torchrun_launcher_prints_every_ranks_result(standalone_torchrun_rank_info):
    done = standalone_torchrun_rank_info  # torchrun --standalone, 2 ranks, rank_info (testcases/conftest.py)
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    assert len(lines) == 1  # rank 0 alone prints
    report = json.loads(lines[0])
    assert report["world_size"] == 2 and report["backend"] == "gloo"
    assert [r["rank"] for r in report["results"]] == [0, 1]
    assert [r["world_sum"] for r in report["results"]] == [3.0, 3.0]
    assert report["results"][0]["pid"] != report["results"][1]["pid"]


@pytest.mark.slow
@dist
def test_torchrun_launcher_exits_non_zero_when_a_rank_fails():
    done = torchrun("testcases.rank_bodies:raise_on_rank", "[1]")
    assert done.returncode != 0
    assert "rank 1 failed" in done.stderr
    assert "ValueError: injected failure on rank 1" in done.stderr


# -- bad input (no processes) --------------------------------------------------------------
@unit
@pytest.mark.parametrize("world_size", [0, -1, 9, 2.0, True])
def test_world_size_outside_the_limit_is_a_config_error(world_size):
    with pytest.raises(ConfigError) as err:
        RankPool(world_size)
    assert err.value.field == "parallel.world_size"
    assert "1..8" in str(err.value)


@unit
def test_max_world_size_is_configurable():
    with pytest.raises(ConfigError, match="1..2"):
        RankPool(3, max_world_size=2)
    assert RankPool(12, backend="gloo", max_world_size=16).world_size == 12  # not started


@unit
def test_unknown_backend_is_a_config_error():
    with pytest.raises(ConfigError) as err:
        RankPool(2, backend="mpi")
    assert err.value.field == "runner.backend" and "auto, gloo, nccl" in str(err.value)


@unit
def test_nccl_without_a_card_per_rank_is_unavailable_not_an_error():
    import torch

    if torch.cuda.is_available() and torch.cuda.device_count() >= 2:
        pytest.skip("this machine has cards for 2 NCCL ranks")
    with pytest.raises(PoolUnavailable, match="one card per rank"):
        RankPool(2, backend="nccl")


@unit
@pytest.mark.parametrize(
    ("requested", "device_type", "cards", "want"),
    [
        ("auto", "auto", 4, ("nccl", "cuda:3")),
        ("auto", "auto", 2, ("gloo", "cpu")),  # too few cards for one per rank
        ("auto", "cpu", 4, ("gloo", "cpu")),
        ("gloo", "cuda", 1, ("gloo", "cuda:0")),  # 4 ranks share one card
        ("gloo", "cuda", 2, ("gloo", "cuda:1")),
    ],
)
def test_backend_choice_and_device_of_rank_3(requested, device_type, cards, want):
    choice = resolve_backend(requested, 4, device_type=device_type, card_count=cards, nccl_ok=True)
    assert (choice.backend, choice.device(3)) == want


@unit
def test_gloo_on_cpu_does_not_ask_torch_for_cards(monkeypatch):
    from harness.rankpool import backend

    def no_torch() -> int:
        raise AssertionError("gloo on cpu asked for the card count")

    monkeypatch.setattr(backend, "cuda_device_count", no_torch)
    monkeypatch.setattr(backend, "nccl_available", no_torch)
    choice = resolve_backend("gloo", 4, device_type="cpu")
    assert (choice.backend, choice.device(3)) == ("gloo", "cpu")


@unit
def test_explicit_nccl_or_cuda_without_cards_is_unavailable():
    with pytest.raises(PoolUnavailable, match="4 ranks on this node, 3 CUDA"):
        resolve_backend("nccl", 4, card_count=3, nccl_ok=True)
    with pytest.raises(PoolUnavailable, match="no NCCL"):
        resolve_backend("nccl", 4, card_count=4, nccl_ok=False)
    with pytest.raises(PoolUnavailable, match="no CUDA device"):
        resolve_backend("gloo", 2, device_type="cuda", card_count=0, nccl_ok=False)


@unit
def test_bodies_must_be_module_level_functions():
    pool = RankPool(2, backend="gloo")
    with pytest.raises(TypeError, match="module-level"):
        pool.run(lambda ctx: None)
    with pytest.raises(ValueError, match="package.module:function"):
        pool.run("testcases.rank_bodies.echo")
    with pytest.raises(AttributeError):
        pool.run("testcases.rank_bodies:no_such_body")
    assert not pool.started  # nothing was spawned for a bad call


@pytest.fixture
def fresh_registry():
    """The process's pool registry, empty: the worker's earlier tests (TC cases) leave pools in it,
    idle or stopped, which these tests would otherwise count. Emptied again afterwards."""
    registry.close_all()
    yield registry
    registry.close_all()


@unit
def test_registry_keeps_one_pool_per_key_until_close_all():
    pool = get_pool(3, "gloo")
    assert get_pool(3, "gloo") is pool and not pool.started  # ranks start on the first run
    assert get_pool(3, "auto", device_type="cpu") is pool  # auto on CPU resolves to this same pool
    assert get_pool(2, "gloo") is not pool
    registry.close_all()
    assert get_pool(3, "gloo") is not pool
    registry.close_all()


@unit
def test_unpicklable_arguments_fail_before_any_rank_is_started():
    pool = RankPool(2, backend="gloo")
    with pytest.raises(Exception, match="pickle"):
        pool.run(bodies.echo, threading.Lock())
    assert not pool.started


@dist
def test_a_cpu_pool_idle_past_its_limit_is_closed_and_starts_again_when_used(monkeypatch, fresh_registry):
    monkeypatch.setitem(registry.IDLE_CLOSE_S, "cpu", 0.3)
    try:
        pool = get_pool(2, "gloo")
        assert pool.run(bodies.echo, 1) == [1, 1]
        pids, generation = pool.pids, pool.generation
        assert registry.close_idle() == [] and pool.pids == pids  # just used
        time.sleep(0.5)
        assert registry.close_idle() == [pool]
        assert not pool.started and not any(running(p) for p in pids)
        assert get_pool(2, "gloo") is pool and pool.run(bodies.echo, 2) == [2, 2]  # started again
        assert pool.generation == generation + 1
        monkeypatch.setitem(registry.IDLE_CLOSE_S, "cpu", None)  # None: kept however long it idles
        time.sleep(0.5)
        assert registry.close_idle() == [] and pool.started
    finally:
        registry.close_all()


@dist
def test_fetching_a_pool_closes_the_other_idle_pools_not_that_one(monkeypatch, fresh_registry):
    monkeypatch.setitem(registry.IDLE_CLOSE_S, "cpu", 0.3)
    try:
        wanted, other = get_pool(1, "gloo"), get_pool(2, "gloo")
        assert wanted.run(bodies.echo, 1) == [1] and other.run(bodies.echo, 1) == [1, 1]
        pids, generation = wanted.pids, wanted.generation
        time.sleep(0.5)
        assert get_pool(1, "gloo") is wanted
        assert not other.started, "an idle pool was kept"
        assert wanted.started and wanted.pids == pids and wanted.generation == generation, \
            "the pool just asked for was closed (its next run would start it again)"
    finally:
        registry.close_all()


@unit
def test_every_test_setup_closes_the_idle_pools(monkeypatch):
    """The plugin asks at each test's setup, so a worker busy with other tests does not keep idle ranks."""
    from harness.pytest_plugin import pools

    asked = []
    monkeypatch.setattr(registry, "close_idle", lambda: asked.append(True) or [])
    pools.pytest_runtest_setup(None)
    assert asked == [True]


P1, P2, P3, P4 = ((0, 1), (2, 3)), ((0, 2), (1, 3)), ((0, 3), (1, 2)), ((0,), (1, 2, 3))


def _split_sums(partition) -> list[float]:
    """Rank r's all-reduce of r + 1 over its part (what rank_bodies.split_all_reduce computes)."""
    part_of = {r: part for part in partition for r in part}
    return [float(sum(q + 1 for q in part_of[r])) for r in range(4)]


@dist
def test_a_rank_keeps_its_most_recently_used_subgroups_and_no_more_threads(pool4):
    """At most context.KEPT_GROUPS subgroups live between calls, the least recently used go first
    (with their gloo threads), and a group made again works. The same on every rank."""
    from harness.rankpool.context import KEPT_GROUPS

    assert KEPT_GROUPS == 4  # two partitions of four ranks into pairs
    for partition in (P1, P2):
        assert [r["sum"] for r in pool4.run(bodies.split_all_reduce, partition)] == _split_sums(partition)
    kept = pool4.run(bodies.groups_and_threads)
    assert kept[0]["groups"] == [list(g) for g in P1 + P2] and all(k["groups"] == kept[0]["groups"] for k in kept)
    for partition in (P1, P3):  # P1 used again: P2 is now the least recently used, and goes
        assert [r["sum"] for r in pool4.run(bodies.split_all_reduce, partition)] == _split_sums(partition)
    after = pool4.run(bodies.groups_and_threads)
    assert all(a["groups"] == [list(g) for g in P1 + P3] for a in after), after
    for partition in (P4, P2, P3):
        assert [r["sum"] for r in pool4.run(bodies.split_all_reduce, partition)] == _split_sums(partition)
    last = pool4.run(bodies.groups_and_threads)
    # each rank is in one group of each kept partition, as after the first two: no thread more
    assert [x["threads"] for x in last] == [k["threads"] for k in kept] == [a["threads"] for a in after]


@dist
def test_registry_closes_least_recently_used_pools_beyond_the_rank_cap(fresh_registry):
    registry.configure(max_live_ranks=2)
    try:
        small = get_pool(1, "gloo")
        assert small.run(bodies.echo, "x") == ["x"]
        pids = small.pids
        bigger = get_pool(2, "gloo")  # 1 live + 2 wanted > 2: the 1-rank pool goes
        assert not small.started and not any(running(p) for p in pids)
        assert registry.live_pools() == [bigger]
    finally:
        registry.configure(max_live_ranks=None)
        registry.close_all()
