"""Two launcher agents on loopback: torchrun --nnodes 2, 2 ranks each (world 4), through the smoke TC matrix.

What this shows beyond the single-node torchrun test: a c10d rendezvous across two agents
(each its own process tree, as on two hosts), global ranks 2..3 on the second agent with
local ranks 0..1, the TC bodies' subgroups spanning both agents, and every TC check on
facts gathered over that world. Bounded: each agent has a wall-clock limit and is killed
with its whole process group after it; afterwards no process carrying the run's tag is left.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from typing import Optional

import pytest

from testcases import ROOT
from tools.bench.faults import TAG_ENV, tagged

pytestmark = [pytest.mark.meta, pytest.mark.dist]

AGENT_TIMEOUT_S = 420
BODY = "harness.suites.torchrun_matrix:run_matrix"


def free_loopback_port() -> int:
    """A port the kernel just handed out on 127.0.0.1 (never a fixed one: xdist workers run this at once)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def agent_command(node_rank: int, port: int, body_args: str) -> list[str]:
    return [
        sys.executable, "-m", "torch.distributed.run",
        "--nnodes=2", "--nproc-per-node=2", "--rdzv-backend=c10d",
        f"--rdzv-endpoint=127.0.0.1:{port}", f"--node-rank={node_rank}",
        # node 0 hosts the rendezvous store, node 1 only connects (no race for the port between
        # them); an agent whose peer never shows up gives up after 120 s
        f"--rdzv-conf=is_host={int(node_rank == 0)},join_timeout=120",
        "--max-restarts=0",
        "-m", "harness.rankpool.launcher", "--multi-node", "--timeout-s", "300", BODY, body_args,
    ]


def run_two_agents(body_args: str, tag: str) -> list[subprocess.CompletedProcess]:
    """Both agents on a fresh port; once more on another port if the first was taken meanwhile."""
    done = _two_agents(body_args, tag, free_loopback_port())
    if done[0].returncode != 0 and "address already in use" in done[0].stderr.lower():
        done = _two_agents(body_args, tag, free_loopback_port())
    return done


def _two_agents(body_args: str, tag: str, port: int) -> list[subprocess.CompletedProcess]:
    """Start both agents, wait (bounded), and kill each agent's process group if it overruns."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "LWSPLIT_"))}
    env.update({"OMP_NUM_THREADS": "1", "GLOO_SOCKET_IFNAME": "lo", TAG_ENV: tag})
    procs = [
        subprocess.Popen(agent_command(n, port, body_args), cwd=ROOT, env=env, text=True,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
        for n in (0, 1)
    ]
    deadline = time.monotonic() + AGENT_TIMEOUT_S
    done = []
    try:
        for proc in procs:
            try:
                out, err = proc.communicate(timeout=max(1.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                for p in procs:
                    _kill_group(p)
                out, err = proc.communicate()
                err += f"\n[test] agent killed after {AGENT_TIMEOUT_S} s"
            done.append(subprocess.CompletedProcess(proc.args, proc.returncode, out, err))
    finally:
        for p in procs:
            if p.poll() is None:
                _kill_group(p)
                p.wait()
    return done


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _left_behind(tag: str) -> list[int]:
    """Tagged processes still alive a moment after both agents returned (ranks exit with their agent)."""
    for _ in range(50):
        pids = tagged(tag)
        if not pids:
            return []
        time.sleep(0.1)
    return pids


REGROUPED = "pcie_2switch_8_interleaved"
VARIANTS = ["", REGROUPED, "s0"]
"""Each TC's plain cases, its cases on the regrouped topology (split groups {0, 2} and {1, 3}: each
spans both agents) and one refusal (split size 0); the other variants would only repeat the same
collectives on other numbers."""


@pytest.mark.slow
def test_smoke_matrix_on_two_torchrun_agents_world_4():
    tag = f"two-nodes-{uuid.uuid4().hex}"
    # one model of the smoke matrix, three variants: every TC still runs
    node0, node1 = run_two_agents(json.dumps(["smoke", ["model=deepseek_v32"], VARIANTS]), tag)
    assert node0.returncode == 0, f"node 0 exit {node0.returncode}\n{node0.stderr[-6000:]}\n{node1.stderr[-3000:]}"
    assert node1.returncode == 0, f"node 1 exit {node1.returncode}\n{node1.stderr[-6000:]}"
    lines = [line for line in node0.stdout.splitlines() if line.startswith("{")]
    assert len(lines) == 1, node0.stdout  # global rank 0 (on node 0) alone prints
    assert not [line for line in node1.stdout.splitlines() if line.startswith("{")]
    report = json.loads(lines[0])
    assert report["world_size"] == 4 and report["backend"] == "gloo" and report["skipped"] == {}
    per_rank = report["results"]
    assert len(per_rank) == 4
    assert all(r == per_rank[0] for r in per_rank), "ranks walked different case lists"
    cases = per_rank[0]["cases"]
    ran = [c for c in cases if c["verdict"] != "skipped"]
    bad = [c for c in ran if c["verdict"] != "pass"]
    assert not bad, "\n".join(f"{c['tc']}[{c['id']}] {c['verdict']}: {c['detail']}" for c in bad)
    assert {c["tc"] for c in ran} == {f"TC-0{i}" for i in range(1, 8)}, cases
    assert {c["tc"] for c in ran if c["id"].endswith(REGROUPED)} == {"TC-01", "TC-03", "TC-04", "TC-05", "TC-07"}
    assert any(c["id"].endswith("-s0") for c in ran)  # the refusal, agreed over both agents
    for c in cases:
        if c["verdict"] == "skipped":
            assert c["detail"], c  # every skip says why
    skips = [c["detail"] for c in cases if c["verdict"] == "skipped"]
    assert any("needs 8 processes" in d for d in skips) and any("not among" in d for d in skips), skips
    assert not _left_behind(tag), "processes left after both agents returned"


@pytest.mark.slow
def test_two_agents_without_multi_node_stop_at_once():
    """A world over two agents without --multi-node is refused (exit 2), not pinned to a loopback others cannot reach."""
    tag = f"two-nodes-{uuid.uuid4().hex}"
    port = free_loopback_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "LWSPLIT_"))}
    env.update({"OMP_NUM_THREADS": "1", TAG_ENV: tag})
    procs = []
    for n in (0, 1):
        cmd = [c for c in agent_command(n, port, "[]") if c != "--multi-node"]
        cmd[cmd.index(BODY)] = "testcases.rank_bodies:rank_info"
        procs.append(subprocess.Popen(cmd, cwd=ROOT, env=env, text=True, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, start_new_session=True))
    try:
        results = [p.communicate(timeout=120) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                _kill_group(p)
                p.wait()
    assert all(p.returncode != 0 for p in procs)
    assert "pass --multi-node" in results[0][1] + results[1][1]
    assert not _left_behind(tag)


# -- gloo stays on loopback for single-host runs -------------------------------------------
BOGUS_IFNAME = "lwsplit-no-such-if0"


@pytest.mark.slow
def test_pool_ranks_use_loopback_whatever_gloo_socket_ifname_was_inherited():
    code = (
        "import json\n"
        "from harness.rankpool import RankPool\n"
        "with RankPool(2, backend='gloo', device_type='cpu', timeout_s=60) as pool:\n"
        "    infos = pool.run('testcases.rank_bodies:rank_info')\n"
        "    ifnames = pool.run('testcases.meta.test_torchrun_two_nodes:gloo_ifname')\n"
        "print(json.dumps([i['world_sum'] for i in infos]))\n"
        "print(json.dumps(ifnames))\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "LWSPLIT_"))}
    env.update(GLOO_SOCKET_IFNAME=BOGUS_IFNAME, OMP_NUM_THREADS="1")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=180)
    assert done.returncode == 0, done.stderr[-4000:]
    sums, ifnames = (json.loads(line) for line in done.stdout.strip().splitlines()[-2:])
    assert sums == [3.0, 3.0] and ifnames == ["lo", "lo"]


def gloo_ifname(ctx) -> Optional[str]:
    """Rank body: the interface gloo was told to use in this rank."""
    return os.environ.get("GLOO_SOCKET_IFNAME")


def test_single_node_torchrun_uses_loopback_whatever_gloo_socket_ifname_was_inherited(standalone_torchrun_rank_info):
    done = standalone_torchrun_rank_info  # torchrun --standalone, GLOO_SOCKET_IFNAME inherited (testcases/conftest.py)
    assert done.args[-1] == "testcases.rank_bodies:rank_info"
    assert done.returncode == 0, done.stderr[-4000:]
    report = json.loads([line for line in done.stdout.splitlines() if line.startswith("{")][0])
    assert [r["gloo_socket_ifname"] for r in report["results"]] == ["lo", "lo"]


@pytest.mark.parametrize(
    ("env", "agents"),
    [
        ({"GROUP_WORLD_SIZE": "2", "WORLD_SIZE": "8", "LOCAL_WORLD_SIZE": "4"}, 2),
        ({"GROUP_WORLD_SIZE": "1", "WORLD_SIZE": "4", "LOCAL_WORLD_SIZE": "4"}, 1),
        ({"WORLD_SIZE": "4", "LOCAL_WORLD_SIZE": "2"}, 2),  # launched without GROUP_WORLD_SIZE
        ({"WORLD_SIZE": "4"}, 1),
    ],
)
def test_agent_count_from_torchrun_environment(env, agents):
    from harness.rankpool.launcher import agent_count

    assert agent_count(env) == agents


def test_multi_node_mode_honours_the_interface_and_single_node_pins_loopback(monkeypatch):
    from harness.rankpool.launcher import choose_gloo_interface

    monkeypatch.setenv("GLOO_SOCKET_IFNAME", "eth7")
    assert choose_gloo_interface(2, multi_node=True) == "eth7"
    assert choose_gloo_interface(1, multi_node=True) == "eth7"
    with pytest.raises(ValueError, match="pass --multi-node"):
        choose_gloo_interface(2, multi_node=False)
    assert choose_gloo_interface(1, multi_node=False) == "lo"
    assert os.environ["GLOO_SOCKET_IFNAME"] == "lo"
