"""The host's set-up checks: which torch setup.sh accepts (scripts/check_torch.py), and the
runner-device switch that puts every rank of a 1-card box on that card (scripts/check_cards.sh)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Optional

import pytest

from contract.errors import ConfigError
from harness.rankpool.backend import DEVICE_ENV, resolve_backend
from testcases import ROOT

pytestmark = pytest.mark.unit

CHECK_TORCH = ROOT / "scripts" / "check_torch.py"


def _check_torch(tmp_path: Path, version: Optional[str], *args: str) -> subprocess.CompletedProcess:
    """Run check_torch.py against a stand-in ``torch`` package reading ``version`` (None: torch fails to import)."""
    pkg = tmp_path / "torch"
    pkg.mkdir()
    body = f"__version__ = {version!r}\n" if version is not None else "raise ImportError('libcudart.so.12: cannot open')\n"
    (pkg / "__init__.py").write_text(body)
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    return subprocess.run([sys.executable, str(CHECK_TORCH), *args], capture_output=True, text=True,
                          timeout=60, env=env, cwd=tmp_path)


@pytest.mark.parametrize("version", ["2.1.0", "2.1.0+corex.3.2.3", "2.13.0+cpu", "2.2.0a0+git1234", "3.0"])
def test_torch_at_or_above_the_floor_is_used_and_named(tmp_path, version):
    done = _check_torch(tmp_path, version)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"using torch {version} from {tmp_path / 'torch'}"


@pytest.mark.parametrize("version", ["2.0.1", "1.13.1+cu117", "2.0.0+corex.3.1.0"])
def test_torch_below_the_floor_is_one_error_line(tmp_path, version):
    done = _check_torch(tmp_path, version)
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.strip() == (f"error: torch {version} at {tmp_path / 'torch'} is older than the supported "
                                   "floor 2.1.0; allowed: torch >= 2.1.0 (CoreX 3.2.3 ships 2.1.0)")


def test_floor_is_an_argument(tmp_path):
    assert _check_torch(tmp_path, "2.1.0", "--floor", "2.2").returncode == 1


def test_torch_that_does_not_import_is_one_error_line(tmp_path):
    done = _check_torch(tmp_path, None)
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: torch does not import") and "libcudart" in lines[0]


def test_setup_sh_runs_the_check_for_the_vendor_torch():
    text = (ROOT / "setup.sh").read_text()
    branch = text.split('if [ "${LWSPLIT_SYSTEM_TORCH:-0}" = 1 ]; then', 2)[2].split("elif", 1)[0]
    assert ".venv/bin/python scripts/check_torch.py --floor 2.1.0" in branch


# -- LWSPLIT_RUNNER_DEVICE -------------------------------------------------------------------
def test_runner_device_env_puts_every_rank_on_the_one_card(monkeypatch):
    monkeypatch.setenv(DEVICE_ENV, "cuda")
    choice = resolve_backend("gloo", 4, card_count=1, nccl_ok=True)
    assert (choice.backend, choice.device_type) == ("gloo", "cuda")
    assert [choice.device(r) for r in range(4)] == ["cuda:0"] * 4
    auto = resolve_backend("auto", 4, card_count=1, nccl_ok=True)  # 1 card < 4 ranks: not nccl
    assert (auto.backend, auto.device(3)) == ("gloo", "cuda:0")


def test_runner_device_env_does_not_override_an_explicit_device(monkeypatch):
    monkeypatch.setenv(DEVICE_ENV, "cuda")
    assert resolve_backend("gloo", 4, device_type="cpu", card_count=1, nccl_ok=True).device_type == "cpu"


def test_runner_device_env_unset_keeps_cpu(monkeypatch):
    monkeypatch.delenv(DEVICE_ENV, raising=False)
    assert resolve_backend("auto", 4, card_count=1, nccl_ok=True).device_type == "cpu"


def test_runner_device_env_with_a_bad_value_is_a_config_error(monkeypatch):
    monkeypatch.setenv(DEVICE_ENV, "gpu")
    with pytest.raises(ConfigError) as err:
        resolve_backend("gloo", 2, card_count=1, nccl_ok=True)
    assert err.value.field == DEVICE_ENV and "auto, cpu, cuda" in str(err.value)


# -- torch 2.1: storage liveness -------------------------------------------------------------
def test_leak_check_follows_the_storage_not_its_python_object():
    """weakref.ref(t.untyped_storage()) dies at once on torch 2.1; the leak check's references must not
    (harness.suites.bring_up counts a storage someone still holds as alive: a leak the TCs report)."""
    import gc
    from types import SimpleNamespace

    import torch

    from harness.suites.bring_up import alive_count, weak_refs

    held = [torch.ones(8)]
    refs = weak_refs(SimpleNamespace(all_tensors=lambda: list(held)))  # the storage's Python object is dropped here
    gc.collect()
    assert alive_count(refs) == 2, "the tensor and its storage: not both counted alive"
    kept = held[0].untyped_storage()
    held.clear()
    gc.collect()
    assert alive_count(refs) == 1, "the tensor is gone, its storage is still held: not counted once"
    del kept
    gc.collect()
    assert alive_count(refs) == 0, "nothing is held: still counted alive"
