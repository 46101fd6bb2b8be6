"""An installed harness (a built wheel, not an editable checkout) finds its configs, topology
fixtures, baseline, shipped manifests and C++ shims without a checkout, from any directory.

Builds the wheel once per test run from a copy of the sources (the checkout stays untouched), installs it
into a folder with ``pip --target`` and runs the plan commands and a sweep of the TCs from an empty
directory with that folder first on ``PYTHONPATH`` (the dependencies come from this environment).
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

SOURCES = ("pyproject.toml", "setup.py", "README.md", "harness", "contract", "implementations", "conf", "testcases/tc")
PACKAGES = ("harness", "contract", "implementations")
NOT_SHIPPED = {"harness/rankpool/README.md"}
"""Files of the package folders a wheel leaves out on purpose (documentation no code reads)."""


@pytest.fixture(scope="module")
def installed(once_per_run) -> Path:
    """The wheel, built and installed once per test run (``once_per_run``: xdist workers share it)."""
    return once_per_run("install", _build_and_install) / "site"


def _build_and_install(root: Path) -> None:
    src = root / "src"
    src.mkdir(parents=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", "_conf", "_tc")
    for name in SOURCES:
        path = REPO_ROOT / name
        if path.is_dir():
            shutil.copytree(path, src / name, ignore=ignore)  # testcases/tc: setup.py copies its TC modules
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
    # the install folder sits in a project of its own (a venv inside a checkout): its ini is not the TCs'
    (root / "pytest.ini").write_text("[pytest]\naddopts = --no-such-option-of-this-project\n")


def _run(args, site: Path, cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "LWSPLIT_"))}
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # a user's shell writes bytecode: whatever it writes must be seen
    env["PYTHONPATH"] = str(site)
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=300)


@pytest.mark.slow
def test_installed_package_carries_conf_tcs_and_baseline(installed, tmp_path):
    proc = _run(["-c", "import harness.paths as p; print(p.__file__); print(p.CONF_DIR); print(p.BASELINE_PATH); "
                 "print(p.TC_DIR); print(p.REPORTS_DIR.resolve()); print(p.ALLURE_REPORT_DIR.resolve())"],
                installed, tmp_path)
    assert proc.returncode == 0, proc.stderr
    module, conf, baseline, tc, reports, allure_report = proc.stdout.split()
    assert module.startswith(str(installed)) and conf == str(installed / "harness" / "_conf")
    assert tc == str(installed / "harness" / "_tc") and len(list(Path(tc).glob("test_tc0*.py"))) == 7
    assert reports == str(tmp_path / "reports") and allure_report.startswith(reports)  # never the install folder
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


def _files_of(folder: Path) -> dict[str, tuple[int, int]]:
    """Every file and folder under ``folder``: relative path -> (size, mtime in ns)."""
    return {p.relative_to(folder).as_posix(): (p.stat().st_size, p.stat().st_mtime_ns) for p in folder.rglob("*")}


@pytest.mark.slow
def test_installed_harness_sweeps_the_tcs_from_an_empty_folder(installed, tmp_path):
    """``python -m harness -m ... suite=quick`` (the main job: the TCs under pytest, in-process) from the wheel:
    its TC modules are the copy the wheel carries (``harness/_tc``), the sweep's results land under the working
    folder's ``reports/``, and the install folder is left as pip made it (no rewritten modules cached there).
    An ini file above the install folder (``_build_and_install``) is not the TCs': theirs is ``_tc/pytest.ini``."""
    before = _files_of(installed)
    proc = _run(["-m", "harness", "-m", "model=qwen3_5_moe", "layerwise=s2", "suite=quick"], installed, tmp_path)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    assert "sweep done:" in proc.stdout, out[-3000:]
    (md,) = (tmp_path / "reports" / "sweeps").glob("*/*/results.md")
    result = json.loads((md.parent / "0" / "result.json").read_text())
    assert result["status"] == "passed", result.get("message")
    for tc in ("TC-01", "TC-02"):
        assert result["tcs"][tc]["counts"].get("passed", 0) > 0, (tc, result["tcs"][tc]["counts"])
    written = sorted(set(_files_of(installed).items()) - set(before.items()))
    assert not written, f"the run wrote into the install folder: {written[:10]}"


def test_the_wheel_ships_every_file_of_the_package_folders(installed):
    """Whatever the runtime reads beside its modules (``xllm_native/manifests/*.yaml``, ``cpp/shims/**``, the
    baselines) is in the wheel: every file of the package folders in the checkout is installed."""
    files = {p.relative_to(REPO_ROOT).as_posix() for name in PACKAGES for p in (REPO_ROOT / name).rglob("*")
             if p.is_file() and "__pycache__" not in p.parts and not p.name.endswith(".pyc")}
    missing = sorted(f for f in files - NOT_SHIPPED if not (installed / f).is_file())
    assert not missing, f"{len(missing)} file(s) of the package folders are not in the wheel: {missing[:10]}"


def test_the_wheel_ships_no_test_code(installed):
    """Test-only code stays out of the wheel: the rank bodies the pool's own tests run (``testcases/rank_bodies.py``,
    once ``harness/rankpool/selftest_bodies.py``) and every other test module; the only TC modules it carries
    are the copies ``python -m harness`` runs (``harness/_tc``)."""
    shipped = sorted(p.relative_to(installed).as_posix() for p in installed.rglob("*.py"))
    test_code = [f for f in shipped if f.startswith("testcases/") or "rank_bodies" in f or "selftest" in f
                 or (Path(f).name.startswith(("test_", "conftest")) and not f.startswith("harness/_tc/"))]
    assert [f for f in shipped if f.startswith("harness/_tc/test_tc")], "the wheel carries no TC module: " \
        "this check would look at nothing"
    assert not test_code, f"the wheel ships test-only code: {test_code[:10]}"


def test_installed_native_adapter_plans_a_tree_from_another_folder(installed, tmp_path):
    """``implementation=xllm_native`` from the wheel: the fixture tree (its own manifest) is built and planned
    from an empty folder (its library in the user's build cache, keyed by the tree's path among the rest: a few
    seconds the first time, then cached)."""
    tree = REPO_ROOT / "testcases" / "native" / "fixture_tree"
    cwd = tmp_path / "elsewhere"
    cwd.mkdir()
    proc = _run(["-m", "harness.plan", "implementation=xllm_native", f"implementation.source_dir={tree}",
                 "model=deepseek_v32", "layerwise=s1"], installed, cwd)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout)["implementation"] == "xllm_native"


@pytest.mark.real_tree
def test_installed_native_adapter_plans_upstreams_tree(installed, tmp_path):
    """Upstream 494f293b5's tree (``../shared``) is found by the manifest the wheel ships and planned with the
    split on (its own CI step: the first build of upstream's sources takes about 20 s)."""
    from testcases.real_trees import UPSTREAM, real_tree_reason

    reason = real_tree_reason(UPSTREAM)
    if reason:
        pytest.skip(reason)
    proc = _run(["-m", "harness.plan", "implementation=xllm_native", f"implementation.source_dir={UPSTREAM}",
                 "model=deepseek_v32", "layerwise=s2"], installed, tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    plan = json.loads(proc.stdout)
    assert plan["implementation"] == "xllm_native" and plan["split_size"] == 2 and plan["active"] is True
