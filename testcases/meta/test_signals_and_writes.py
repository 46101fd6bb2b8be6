"""Nothing lost, nothing half-written: signals to the app, killed workers, failed writes, runs started together.

Each test would fail without its fix:
- two ``python -m harness`` runs (or sweeps) started in the same second write to different
  folders (``${run_id:}`` in conf/config.yaml); given one folder, exactly one of them gets it
  (``harness.app.claim``), the other is refused before anything is written there;
- Ctrl-C stops a sweep between jobs and says which finished; SIGTERM does the same, and
  neither leaves a temp folder, a rank process or a half-written ``result.json``;
- an xdist worker killed with SIGKILL leaves no temp folder once the session ends;
- a result line that cannot be written fails that case, not the session; an Allure file
  that cannot be written is one error at the end;
- ``python -m harness.plan | head -1`` ends quietly; ``> /dev/full`` is one error line, also for a run
  whose progress lines Hydra's callback prints; ``harness.mutation --out`` is checked first.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Optional

import pytest

from harness.paths import REPO_ROOT
from testcases.conftest import FullStdout
from tools.bench.faults import TAG_ENV, left_behind, tagged

pytestmark = pytest.mark.meta

TC01 = str(REPO_ROOT / "testcases" / "tc" / "test_tc01_allocation.py")


def _env(tag: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "LWSPLIT_", "LW_"))}
    env[TAG_ENV] = tag
    return env


def _owned_temp_dirs(pid: int, root: Optional[str] = None) -> list[str]:
    root = root or tempfile.gettempdir()
    return [n for n in os.listdir(root) if n.startswith("lwsplit-") and f"-{pid}-" in n]


@pytest.fixture
def temp_root():
    """A temp root of the test's own for the processes it starts (TMPDIR): folders they leave are found
    there, not swept first by a pool that anything else on the machine starts. Short, since the
    forkserver's socket lives under it."""
    root = tempfile.mkdtemp(prefix="lw-")
    yield root
    shutil.rmtree(root, ignore_errors=True)


def _wait_for(predicate, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    pytest.fail(f"timed out after {timeout_s} s waiting for {what}")


def _wait_gone(tag: str, timeout_s: float = 20) -> list[str]:
    """The processes carrying ``tag`` still alive after ``timeout_s``, each as pid, parent, state and command."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and tagged(tag):
        time.sleep(0.2)
    return left_behind(tag)



# ---- folders of runs started together ------------------------------------------------------------


@pytest.mark.slow
def test_runs_and_sweeps_started_together_get_their_own_folders(tmp_path):
    tag = f"together-{uuid.uuid4().hex[:8]}"
    argvs = [
        ["mode=plan", "model=deepseek_v32", "layerwise=s2"],
        ["mode=plan", "model=glm_moe_dsa", "layerwise=s4"],
        ["-m", "mode=plan", "model=deepseek_v3", "layerwise=off,s2"],
        ["-m", "mode=plan", "model=qwen3_next", "layerwise=off,s4"],
    ]
    procs = [subprocess.Popen([sys.executable, "-m", "harness", *argv], cwd=tmp_path, env=_env(tag),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for argv in argvs]
    outs = [p.communicate(timeout=180)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0, 0], outs
    runs = sorted((tmp_path / "reports" / "runs").glob("*/*"))
    sweeps = sorted((tmp_path / "reports" / "sweeps").glob("*/*"))
    assert len(runs) == 2 and len(sweeps) == 2, (runs, sweeps)
    models = sorted(json.loads((r / "result.json").read_text())["config"]["model"] for r in runs)
    assert models == ["deepseek_v32", "glm_moe_dsa"]
    for sweep, model in zip(sorted(sweeps, key=lambda d: (d / "results.md").read_text().find("qwen3_next")),
                            ("deepseek_v3", "qwen3_next")):
        table = (sweep / "results.md").read_text()
        other = "qwen3_next" if model == "deepseek_v3" else "deepseek_v3"
        assert model in table and other not in table, table


def test_runs_given_one_folder_at_once_one_claims_it(tmp_path):
    """Eight processes claim one results folder at the same moment (released together through a pipe):
    exactly one gets it, the others are refused; the folder then holds that one claim only. Every
    claimer lives until all have tried: a claim whose process is gone may rightly be taken over."""
    from contract.errors import ConfigError
    from harness.app.claim import CLAIM_FILE, claim

    folder = tmp_path / "shared" / "run"
    start_r, start_w = os.pipe()
    tried_r, tried_w = os.pipe()
    leave_r, leave_w = os.pipe()
    children = []
    for _ in range(8):
        pid = os.fork()
        if pid == 0:  # child: wait for the start, claim, say so, stay until every child has tried
            code = 1
            try:
                os.close(start_w)
                os.close(leave_w)
                os.read(start_r, 1)
                try:
                    claim(folder, "hydra.run.dir", str(folder))
                    code = 0
                except ConfigError:
                    code = 3
                os.write(tried_w, b"x")
                os.read(leave_r, 1)  # end of file once the parent closes its end
            finally:
                os._exit(code)
        children.append(pid)
    for end in (start_r, tried_w, leave_r):
        os.close(end)
    os.write(start_w, b"x" * len(children))
    os.close(start_w)
    tried = b""
    while len(tried) < len(children):
        chunk = os.read(tried_r, len(children))
        if not chunk:
            break
        tried += chunk
    os.close(leave_w)
    os.close(tried_r)
    codes = sorted(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for pid in children)
    assert codes == [0] + [3] * 7, codes
    assert [p.name for p in folder.iterdir()] == [CLAIM_FILE]


def test_a_folder_taken_after_the_preflight_is_refused_before_hydra_writes_there(tmp_path, capsys):
    """The pre-flight saw a free folder; another run claimed it before this run's start: the run's start
    (the callback Hydra calls before it makes or writes the folder) ends the command with one line, exit 2."""
    from omegaconf import OmegaConf

    from harness.app.callback import SweepCallback

    folder = tmp_path / "run"
    folder.mkdir()
    (folder / ".lwsplit-run").write_text("{}")
    config = OmegaConf.create({"hydra": {"run": {"dir": str(folder)}, "sweep": {"dir": str(folder)},
                                         "overrides": {"hydra": [f"hydra.run.dir={folder}"], "task": []}}})
    for start in (SweepCallback().on_run_start, SweepCallback().on_multirun_start):
        with pytest.raises(SystemExit) as exit_info:
            start(config)
        assert exit_info.value.code == 2
        err = capsys.readouterr().err
        assert err.startswith("error: hydra.") and len(err.splitlines()) == 1 and "another run" in err, err
    assert [p.name for p in folder.iterdir()] == [".lwsplit-run"]


def _no_such_pid() -> int:
    """A pid no process has: the kernel hands out pids below ``pid_max``."""
    with open("/proc/sys/kernel/pid_max") as fh:
        return int(fh.read())


def _claim_of(pid: int, **fields) -> str:
    import socket
    import time

    return json.dumps({"pid": pid, "host": socket.gethostname(), "started": time.time(), **fields})


def test_a_claim_whose_run_is_gone_is_taken_over_with_a_note(tmp_path, capsys):
    """A run killed outright (SIGKILL) leaves its claim: its pid is gone, or now names another process (the
    start time differs). The next run takes the folder over with a note; a running claimant's folder, one
    whose claim says too little, and what a gone run left besides its claim are still refused."""
    from contract.errors import ConfigError
    from harness import procfs
    from harness.app.claim import CLAIM_FILE, check_free, claim, is_ours

    me = procfs.stat()
    for name, text in (("gone", _claim_of(_no_such_pid())),
                       ("pid-reused", _claim_of(os.getppid(), pid_start=procfs.stat(os.getppid()).starttime + 1))):
        folder = tmp_path / name
        folder.mkdir()
        (folder / CLAIM_FILE).write_text(text)
        check_free(folder, "hydra.run.dir", str(folder))  # the pre-flight lets it through
        claim(folder, "hydra.run.dir", str(folder))
        assert is_ours(folder) and [p.name for p in folder.iterdir()] == [CLAIM_FILE]
        err = capsys.readouterr().err
        assert err.startswith(f"note: {folder}: the run that claimed it") and "takes the folder over" in err, err
    for name, text, files in (("running", _claim_of(os.getpid(), pid_start=me.starttime), ()),
                              ("unreadable", "{}", ()),
                              ("gone-with-results", _claim_of(_no_such_pid()), ("result.json",))):
        folder = tmp_path / name
        folder.mkdir()
        (folder / CLAIM_FILE).write_text(text)
        for file in files:
            (folder / file).write_text("{}")
        for check in (check_free, claim):
            with pytest.raises(ConfigError):
                check(folder, "hydra.run.dir", str(folder))
        assert (folder / CLAIM_FILE).read_text() == text or name == "gone-with-results"
        assert sorted(p.name for p in folder.iterdir()) == sorted([CLAIM_FILE, *files])


# ---- signals to the app ----------------------------------------------------------------------------


def _sweep(tmp_path: Path, tag: str, temp_root: str) -> subprocess.Popen:
    """Three jobs; the second one's case hangs (``fault_hang``: rank 3 never finishes), so a signal sent
    while it runs lands inside a job whatever the machine's load (a passing job takes about 0.5 s)."""
    argv = [sys.executable, "-m", "harness", "-m", "suite.tcs=[TC-02]", "model=deepseek_v32", "layerwise=s2",
            "parallel=tp4", "implementation=reference,fault_hang,reference", f"hydra.sweep.dir={tmp_path / 'sweep'}"]
    return subprocess.Popen(argv, cwd=tmp_path, env={**_env(tag), "TMPDIR": temp_root}, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)


def test_runs_taking_over_one_stale_claim_at_once_one_gets_it(tmp_path):
    """Eight processes find the claim of a run that is gone and take it over at the same moment: exactly one
    gets the folder (each stays alive until all have tried, so the winner's claim is not stale for the rest)."""
    from contract.errors import ConfigError
    from harness.app.claim import CLAIM_FILE, claim

    folder = tmp_path / "run"
    folder.mkdir()
    (folder / CLAIM_FILE).write_text(_claim_of(_no_such_pid()))
    start_r, start_w = os.pipe()
    done_r, done_w = os.pipe()
    hold_r, hold_w = os.pipe()
    children = []
    for _ in range(8):
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                os.close(start_w)
                os.read(start_r, 1)
                sys.stderr = open(os.devnull, "w")  # the winner's note
                claim(folder, "hydra.run.dir", str(folder))
                code = 0
            except ConfigError:
                code = 3
            finally:
                os.write(done_w, b"d")
                os.read(hold_r, 1)
                os._exit(code)
        children.append(pid)
    os.write(start_w, b"x" * len(children))
    tried = 0
    while tried < len(children):
        tried += len(os.read(done_r, len(children)))
    os.write(hold_w, b"x" * len(children))
    codes = sorted(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for pid in children)
    for fd in (start_r, start_w, done_r, done_w, hold_r, hold_w):
        os.close(fd)
    assert codes == [0] + [3] * 7, codes
    assert [p.name for p in folder.iterdir()] == [CLAIM_FILE]


def test_sigterm_while_the_command_line_is_checked_is_one_line(tmp_path, capsys, monkeypatch):
    """SIGTERM during ``python -m harness``'s pre-flight: the app's handler is already in place, so the
    command says it was interrupted and that nothing ran (exit 143), rather than ending silently."""
    from harness import signals as app_signals
    from harness.app import main as app_main

    seen = []

    def interrupted(inv):
        seen.append(signal.getsignal(signal.SIGTERM))
        raise app_signals.StopRequested("SIGTERM")

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(app_main, "check_invocation", interrupted)
    assert app_main.main(["mode=plan"]) == 143
    assert seen == [app_signals.request_stop], f"the handler installed while the command line was checked: {seen}"
    err = capsys.readouterr().err
    assert err == "interrupted by SIGTERM while checking the command line: no job ran, nothing was written\n"
    assert list(tmp_path.iterdir()) == []


def test_a_signal_while_the_results_folder_is_checked_leaves_no_folder(tmp_path, monkeypatch):
    """A signal while the pre-flight makes the results folder's parents: what it made goes again."""
    import tempfile as tempfile_module

    from harness import files

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(tempfile_module, "TemporaryFile", interrupted)
    with pytest.raises(KeyboardInterrupt):
        files.check_writable(tmp_path / "a" / "b" / "run", "hydra.run.dir")
    assert list(tmp_path.iterdir()) == []


def test_a_signal_ignored_by_the_starting_process_stays_ignored():
    """``nohup python -m harness -m ...``: SIGHUP (the terminal closing) is ignored when the app starts, and
    the app's handlers leave it so; the signals it was not told to ignore stop it between jobs."""
    from harness import signals as app_signals

    saved = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        with app_signals.stop_on_signals():
            assert signal.getsignal(signal.SIGHUP) == signal.SIG_IGN
            assert signal.getsignal(signal.SIGTERM) == app_signals.request_stop, "SIGTERM not handled as a stop request"
        assert signal.getsignal(signal.SIGHUP) == signal.SIG_IGN
    finally:
        signal.signal(signal.SIGHUP, saved)


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_a_signal_stops_the_sweep_between_jobs_and_leaves_nothing_behind(tmp_path, sig, temp_root):
    tag = f"signal-{uuid.uuid4().hex[:8]}"
    proc = _sweep(tmp_path, tag, temp_root)
    try:
        _wait_for(lambda: (tmp_path / "sweep" / "0" / "result.json").is_file() or proc.poll() is not None,
                  240, "the first job's result")
        _wait_for(lambda: (tmp_path / "sweep" / "1").is_dir() or proc.poll() is not None, 60, "the second job")
        time.sleep(0.5)  # the second job's case is under way on the pool, its rank 3 hanging
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 128 + sig, (out + err)[-3000:]
    assert f"interrupted by {signal.Signals(sig).name}" in err and "finished jobs: 1 passed (job 0);" in err, err[-2000:]
    assert "Traceback" not in err
    results = sorted(p.parent.name for p in (tmp_path / "sweep").glob("*/result.json"))
    assert "0" in results and "2" not in results, results  # stopped: the third job never ran
    for path in (tmp_path / "sweep").rglob("*"):
        assert not path.name.endswith(".tmp"), f"half-written file left: {path}"
    assert _wait_gone(tag) == [], "rank or helper processes outlived the app"
    assert _owned_temp_dirs(proc.pid, temp_root) == []


# ---- a killed xdist worker ---------------------------------------------------------------------------


@pytest.mark.slow
def test_a_worker_killed_outright_leaves_no_temp_folder(tmp_path, temp_root):
    """One case whose ranks never finish (fault_hang, its timeout far beyond this test's wait), so the
    only worker is killed with its rank pool up, whatever the machine's load. In the run's own temp
    root only its controller's sweep at session end can remove the killed worker's folder."""
    tag = f"killworker-{uuid.uuid4().hex[:8]}"
    env = {**_env(tag), "TMPDIR": temp_root}
    argv = [sys.executable, "-m", "pytest", TC01, "-n", "1", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
            "--max-worker-restart", "0", "--lw-override", "model=deepseek_v32", "--lw-override", "layerwise=s2",
            "--lw-override", "parallel=tp4", "--lw-override", "implementation=fault_hang", "--lw-timeout", "3600",
            "-k", "s2-w4-fault_hang]"]
    proc = subprocess.Popen(argv, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)
    victim = {}

    def a_worker_has_a_pool() -> bool:
        for name in os.listdir(temp_root):
            parts = name.split("-")
            if name.startswith("lwsplit-pool-") and len(parts) > 3 and parts[2].isdigit():
                pid = int(parts[2])
                if pid in tagged(tag):
                    victim["pid"] = pid
                    return True
        return proc.poll() is not None

    try:
        _wait_for(a_worker_has_a_pool, 180, "a worker's rank pool")
        assert "pid" in victim, "the run ended before a pool started"
        os.kill(victim["pid"], signal.SIGKILL)
        out, _ = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert "INTERNALERROR" not in out, out[-3000:]
    assert _wait_gone(tag) == [], "processes outlived the session"
    assert _owned_temp_dirs(victim["pid"], temp_root) == [], "the killed worker's pool folder was not swept"


# ---- failed writes ------------------------------------------------------------------------------------


def test_a_result_line_that_cannot_be_written_fails_its_case_not_the_session(pytester, request):
    """pytest's main in-process (``--lw-keep-pools``: on this worker's rank pools, as the bad-input
    table's spec-rejection test runs), with every result line going to a full disk."""
    if not os.path.exists("/dev/full"):
        pytest.skip("/dev/full absent here")
    result = pytester.runpytest_inprocess(
        TC01, "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
        "--lw-override", "model=deepseek_v32", "--lw-override", "layerwise=s2", "--lw-override", "parallel=tp4",
        "--lw-override", "implementation=reference", "-k", "reference-int8] or w4-reference]",
        "--lw-results", "/dev/full", "--lw-keep-pools",
        "--lw-max-live-ranks", str(request.config.getoption("lw_max_live_ranks")))
    out = "\n".join(result.outlines + result.errlines)
    assert result.ret == 1, out[-3000:]
    assert "INTERNALERROR" not in out and "Traceback" not in out
    assert "could not append this case's result to --lw-results /dev/full" in out
    result.assert_outcomes(failed=2)  # both cases ran to the end; only their result lines were lost


def test_an_allure_file_that_cannot_be_written_is_recorded_not_raised(tmp_path):
    """allure-pytest's own writer at a folder it cannot write, behind the guard, called as allure-commons
    calls it (a plugin manager of the ``allure`` project with its writer hooks; a private one, so no write
    reaches this session's own results)."""
    import pluggy
    from allure_commons.logger import AllureFileLogger

    from harness.reporting import write_guard

    class WriterHooks:
        spec = pluggy.HookspecMarker("allure")

        @spec
        def report_attached_data(self, body, file_name): ...

        @spec
        def report_result(self, result): ...

    manager = pluggy.PluginManager("allure")
    manager.add_hookspecs(WriterHooks)
    write_guard.session_started()  # a session of its own: its records are this test's alone
    try:
        write_guard.guard_allure_writes(manager)
        write_guard.guard_allure_writes(manager)  # once per manager
        (tmp_path / "results").mkdir()
        logger = AllureFileLogger(tmp_path / "results")
        manager.register(logger)
        (tmp_path / "results").rmdir()
        (tmp_path / "results").write_text("x")  # every write now fails (NotADirectoryError)
        manager.hook.report_attached_data(body="x", file_name="a.txt")
        assert write_guard.failures() == [f"Allure attachment in {tmp_path / 'results'}: Not a directory"]
        assert write_guard.summary().startswith("error: 1 result file(s) could not be written")
        manager.unregister(name=write_guard.GUARD_NAME)
        with pytest.raises(NotADirectoryError):  # without the guard the writer's error reaches the caller
            manager.hook.report_attached_data(body="x", file_name="a.txt")
    finally:
        write_guard.session_ended()


def test_every_atomic_write_on_a_full_disk_leaves_no_temp_file(tmp_path):
    """A write that runs out of room (a file-size limit: EFBIG, as ENOSPC would) fails, and leaves neither
    the target nor a temporary file, for each writer: results, the kill matrix, the report's trend files."""
    import base64
    import resource

    from harness.files import write_json_atomic
    from harness.mutation import render
    from harness.reporting import report

    index = "d('history/history-trend.json','" + base64.b64encode(b"[" + b"0," * 5000 + b"0]").decode() + "')"
    writers = {"result": lambda d: write_json_atomic(d / "result.json", {"x": "y" * 10_000}),
               "kill-matrix": lambda d: render.write_json(d / "kill_matrix.json", {"x": "y" * 10_000}),
               "trend": lambda d: report.save_history(index, d)}
    for name, write in writers.items():
        folder = tmp_path / name
        folder.mkdir()
        pid = os.fork()
        if pid == 0:  # child: a 1 KiB file-size limit, then the write
            code = 1
            try:
                signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
                resource.setrlimit(resource.RLIMIT_FSIZE, (1024, 1024))
                write(folder)
                code = 0
            except OSError:
                code = 3
            finally:
                os._exit(code)
        assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 3, f"{name}: the write did not fail"
        assert sorted(p.name for p in folder.iterdir()) == [], f"{name} left {sorted(os.listdir(folder))}"


def test_the_atomic_writer_makes_files_anyone_may_read(tmp_path):
    """0666 less the umask (0644 here), as every other file the harness writes; the kill matrix's own writer
    made them 0600."""
    from harness.files import write_atomic
    from harness.mutation import render

    old = os.umask(0o022)
    try:
        render.write_json(tmp_path / "kill_matrix.json", {"rows": []})
        write_atomic(tmp_path / "result.json", "{}")
    finally:
        os.umask(old)
    assert {p.name: oct(p.stat().st_mode & 0o777) for p in tmp_path.iterdir()} == {
        "kill_matrix.json": "0o644", "result.json": "0o644"}


# ---- small commands ------------------------------------------------------------------------------------


def test_plan_into_a_closed_pipe_ends_quietly(tmp_path):
    proc = subprocess.Popen([sys.executable, "-m", "harness.plan", "--table", "model=glm_moe_dsa", "layerwise=s2"],
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.read(1)
    proc.stdout.close()  # `| head -c 1`
    err = proc.stderr.read().decode()
    proc.wait(timeout=60)
    assert "Traceback" not in err and "BrokenPipe" not in err, err
    assert proc.returncode in (0, 1)


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="/dev/full absent here")
def test_a_command_printing_to_a_full_disk_says_so_in_one_line(tmp_path):
    """``python -m harness.plan > /dev/full``: one ``error:`` line on stderr, exit 1, no traceback."""
    with open("/dev/full", "w") as full:
        proc = subprocess.run([sys.executable, "-m", "harness.plan", "--table"], cwd=tmp_path, stdout=full,
                              stderr=subprocess.PIPE, text=True, timeout=60)
    assert proc.returncode == 1
    assert proc.stderr == "error: cannot write to standard output: No space left on device\n", proc.stderr


def test_a_run_printing_to_a_full_disk_keeps_its_result_and_says_so(tmp_path, capsys, monkeypatch):
    """``python -m harness > /dev/full`` (in-process): the progress lines Hydra's callback prints are lost,
    the run still writes its result, and the command ends with one ``error:`` line and exit 1."""
    from harness.app.main import main

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "stdout", FullStdout())
    with pytest.raises(SystemExit) as exit_info:
        main(["mode=plan", "layerwise=s2", f"hydra.run.dir={tmp_path / 'run'}"])
    err = capsys.readouterr().err
    assert exit_info.value.code == 1
    assert err == "error: cannot write to standard output: No space left on device\n", err
    assert json.loads((tmp_path / "run" / "result.json").read_text())["status"] == "planned"


def test_mutation_out_is_checked_before_the_run(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "harness.mutation", "--out", "/proc/lwsplit-no-such-dir/x"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)  # the matrix takes minutes
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.startswith("error: --out=") and "Traceback" not in proc.stderr
    # refused at once: not one mutant ran (each prints a progress line) and no table was printed
    assert proc.stdout == "" and len(proc.stderr.strip().splitlines()) == 1, proc.stdout + proc.stderr
