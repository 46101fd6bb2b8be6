"""scripts/check_cards.sh on a host without a card: its one-line refusal, its plan per card count,
and the topology reader it runs (from a file and through a stand-in ``ixsmi`` on PATH)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.paths import TOPOLOGY_DIR
from testcases import ROOT

pytestmark = pytest.mark.meta

SCRIPT = ROOT / "scripts" / "check_cards.sh"
TOOLS = ROOT / "scripts" / "card_tools.py"
BI_V100 = TOPOLOGY_DIR / "bi_v100_pix4.txt"

# `nvidia-smi topo -m` of a one-GPU host with two NICs (the format the parser must skip past)
ONE_GPU_WITH_NICS = """\
\t\x1b[4mGPU0\tNIC0\tNIC1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\x1b[0m
GPU0\t X \tSYS\tSYS\t0-15\t0\t\tN/A
NIC0\tSYS\t X \tPIX
NIC1\tSYS\tPIX\t X

Legend:

  X    = Self
  PIX  = Connection traversing at most a single PCIe bridge

NIC Legend:

  NIC0: mlx5_0
"""


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "LWSPLIT_"))}
    env.update(PYTHON=sys.executable, LWSPLIT_CARDS_OUT=str(extra.pop("out", "reports/cards")), **extra)
    return env


def _run(*args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(SCRIPT), *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, env=_env(**env))


def _tools(*args: str, env=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(TOOLS), *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, env=env or _env())


def test_without_a_card_one_line_and_non_zero_exit(tmp_path):
    import torch

    if torch.cuda.is_available() and torch.cuda.device_count() > 0:
        pytest.skip("this host has a card: the no-card branch does not apply")
    done = _run(out=str(tmp_path / "cards"))
    assert done.returncode == 1
    assert done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("no card: ") and "sees no CUDA device" in lines[0], done.stderr
    assert f"torch ({torch.__version__}) sees" in lines[0]
    assert not (tmp_path / "cards").exists()  # nothing written


def test_plan_for_one_card_puts_every_rank_on_it_and_nccl_at_world_1():
    done = _run("--plan", "1")
    assert done.returncode == 0, done.stderr
    steps = dict(line.split("\t", 1) for line in done.stdout.strip().splitlines())
    assert list(steps) == ["topology", "nccl", "alloc", "native"]
    assert "topology --cards 1" in steps["topology"]
    assert steps["nccl"].endswith("nccl --world 1")
    alloc = steps["alloc"]
    assert alloc.startswith("LWSPLIT_RUNNER_DEVICE=cuda ") and "--lw-backend gloo" in alloc and "-n 4" in alloc
    assert "test_tc02_estimation.py" in alloc and "test_tc05_shard_application.py" in alloc


def test_plan_for_four_cards_runs_the_default_matrix_on_nccl():
    done = _run("--plan", "4")
    assert done.returncode == 0, done.stderr
    steps = dict(line.split("\t", 1) for line in done.stdout.strip().splitlines())
    assert list(steps) == ["topology", "nccl", "matrix", "native"]
    assert "testcases/native/test_ports.py" in steps["native"] and "tensors" in steps["native"]
    assert steps["nccl"].endswith("nccl --world 4")
    assert steps["matrix"].endswith("-n 4 testcases/tc --lw-backend nccl")
    assert "LWSPLIT_RUNNER_DEVICE" not in steps["matrix"] and "--lw-matrix" not in steps["matrix"]


@pytest.mark.parametrize("args", [("--plan", "0"), ("--plan", "four"), ("--plan",), ("--bogus",)])
def test_bad_arguments_are_refused(args):
    done = _run(*args)
    assert done.returncode == 2 and done.stdout == ""
    assert len(done.stderr.strip().splitlines()) == 1


def test_topology_of_the_bi_v100_fixture_is_read_and_checked_against_the_card_count():
    done = _tools("topology", "--cards", "4", "--file", str(BI_V100))
    assert done.returncode == 0, done.stderr
    assert "4 card(s)" in done.stdout
    assert done.stdout.count("PIX") == 12  # flat PIX, 4 x 3 off-diagonal links
    fewer = _tools("topology", "--cards", "8", "--file", str(BI_V100))
    assert fewer.returncode == 1
    assert fewer.stderr.strip() == f"error: topology: {BI_V100} lists 4 card(s) but torch sees 8"


def test_topology_through_an_smi_tool_on_path_skips_nic_columns_and_saves_the_text(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "topo.txt").write_text(ONE_GPU_WITH_NICS)
    fake = bin_dir / "ixsmi"
    fake.write_text(f'#!/bin/sh\n[ "$1 $2" = "topo -m" ] || exit 3\ncat "{bin_dir / "topo.txt"}"\n')
    fake.chmod(0o755)
    env = _env(PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    saved = tmp_path / "out" / "topo.txt"
    done = _tools("topology", "--cards", "1", "--save", str(saved), env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("topology from ixsmi topo -m: 1 card(s)")
    assert "NIC0" not in done.stdout
    assert saved.read_text() == ONE_GPU_WITH_NICS


def test_topology_without_any_smi_tool_is_one_error_line(tmp_path):
    env = _env(PATH=str(Path(sys.executable).parent))  # python only: no ixsmi, no nvidia-smi
    done = _tools("topology", "--cards", "1", env=env)
    assert done.returncode == 1
    assert done.stderr.strip() == "error: topology: neither ixsmi nor nvidia-smi is on PATH"


def ranks_on_my_card(ctx) -> int:
    """Rank body: bring-up's count of ranks sharing this rank's device."""
    from harness.suites import bring_up

    return bring_up.ranks_on_my_card(ctx)


@pytest.mark.dist
def test_hbm_share_divides_by_the_ranks_on_one_device():
    """All ranks of a pool on one device (gloo on a 1-card box; here the CPU) count each other."""
    from harness.rankpool import RankPool

    with RankPool(3, backend="gloo", device_type="cpu", timeout_s=60) as pool:
        assert pool.run("testcases.meta.test_check_cards:ranks_on_my_card") == [3, 3, 3]
