"""An installed harness (a built wheel, not an editable checkout) finds its configs, topology
fixtures and baseline without a checkout, from any directory.

Builds the wheel once per test run from a copy of the sources (the checkout stays untouched), installs it
into a folder with ``pip --target`` and runs the two plan commands from an empty directory
with that folder first on ``PYTHONPATH`` (the dependencies come from this environment).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.paths import REPO_ROOT

pytestmark = pytest.mark.meta

SOURCES = ("pyproject.toml", "setup.py", "README.md", "harness", "contract", "implementations", "conf")


@pytest.fixture(scope="module")
def installed(once_per_run) -> Path:
    """The wheel, built and installed once per test run (``once_per_run``: xdist workers share it)."""
    return once_per_run("install", _build_and_install) / "site"


def _build_and_install(root: Path) -> None:
    src = root / "src"
    src.mkdir(parents=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", "_conf")
    for name in SOURCES:
        path = REPO_ROOT / name
        if path.is_dir():
            shutil.copytree(path, src / name, ignore=ignore)
        else:
            shutil.copy2(path, src / name)
    wheels = root / "wheels"
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run([*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", str(wheels), str(src)],
                   check=True, capture_output=True, text=True, timeout=300)
    target = root / "site"
    (wheel,) = wheels.glob("*.whl")
    subprocess.run([*pip, "install", "--no-deps", "--target", str(target), str(wheel)],
                   check=True, capture_output=True, text=True, timeout=300)


def _run(args, site: Path, cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "LWSPLIT_"))}
    env["PYTHONPATH"] = str(site)
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=300)


@pytest.mark.slow
def test_installed_package_carries_conf_and_baseline(installed, tmp_path):
    proc = _run(["-c", "import harness.paths as p; print(p.__file__); print(p.CONF_DIR); print(p.BASELINE_PATH)"],
                installed, tmp_path)
    assert proc.returncode == 0, proc.stderr
    module, conf, baseline = proc.stdout.split()
    assert module.startswith(str(installed)) and conf == str(installed / "harness" / "_conf")
    assert (Path(conf) / "config.yaml").is_file() and (Path(conf) / "topology" / "bi_v100_pix4.txt").is_file()
    assert Path(baseline).is_file() and (Path(baseline).parent / "README.md").is_file()


def test_installed_plan_commands_run_from_any_directory(installed, tmp_path):
    proc = _run(["-m", "harness.plan", "model=qwen3_5_moe", "layerwise=s2"], installed, tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout)["split_size"] == 2
    run_dir = tmp_path / "run"
    proc = _run(["-m", "harness", "mode=plan", f"hydra.run.dir={run_dir}"], installed, tmp_path)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-2000:]
    assert json.loads((run_dir / "result.json").read_text())["status"] == "planned"
