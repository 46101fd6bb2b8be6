"""Faults on real rank processes, injected through config, end to end.

One ``pytest`` process (``-n 0``: no xdist workers, so every case shares one pool per world size) runs
TC-01 on deepseek_v32 s2 tp4 against the fault implementations
(``conf/implementation/fault_*.yaml``: the reference misbehaving on one rank)
interleaved with implementations that must pass (reference, upstream_owner_rule,
xllm_upstream; the owner rules agree on a model without linear layers), one of them
first, so that no fault's time to detect includes the forkserver's start and the first
pool's. Every process it starts carries
a unique ``LWSPLIT_RUN_TAG`` (rank processes inherit it, forked by it or by its forkserver).
From its Allure results and the process table afterwards: each fault is a failed or
broken test naming the rank and the reason within the timeout plus a margin, the
tests after it pass (the pool recovered), every other result is intact, and no
process is left. Time to detect each fault: ``python -m tools.bench.faults``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from harness.paths import CONF_DIR
from testcases import ROOT as REPO
from tools.bench.faults import TAG_ENV, left_behind

pytestmark = pytest.mark.meta

TC01 = str(REPO / "testcases" / "tc" / "test_tc01_allocation.py")
TIMEOUT_S = 8
MARGIN_S = 10.0
"""On top of the timeout: a stack dump (<= 2 s) and the pool start the case pays after the previous fault."""
IMPLEMENTATIONS = (
    "upstream_owner_rule", "fault_raise", "reference", "fault_raise_master", "fault_exit", "fault_crash", "xllm_upstream",
    "fault_hang", "fault_layout", "fault_overalloc",
)
HEALTHY = ("reference", "upstream_owner_rule", "xllm_upstream")
# Words each fault's failure message must hold: the rank and the reason.
EXPECTED = {
    "fault_raise": ("rank 1 raised", "InjectedFault: injected fault on rank 1 in init_worker"),
    "fault_raise_master": ("rank 0 raised", "InjectedFault: injected fault on rank 0 in plan"),
    "fault_exit": ("rank 2 exited (exit code 3)",),
    "fault_crash": ("rank 1 exited (killed by signal SIGSEGV", "Segmentation fault"),
    "fault_hang": (f"did not finish within {TIMEOUT_S} s", "rank 3 at faulty.py", "in _sleep_forever"),
    "fault_layout": ("rank 1 (split rank 1) owns full layers",),
    "fault_overalloc": ("rank 2: allocated",),
}


def _fault_run(out: Path) -> dict:
    """Run the fault matrix once; its Allure results by case id, its output, and what it left running."""
    alluredir, results = out / "allure", out / "results.jsonl"
    tag = f"faults-{uuid.uuid4().hex}"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "LWSPLIT_"))}
    env[TAG_ENV] = tag
    argv = [
        sys.executable, "-m", "pytest", TC01, "-p", "no:cacheprovider", "-n", "0", "-p", "no:randomly", "-q",
        "--lw-override", "model=deepseek_v32", "--lw-override", "layerwise=s2", "--lw-override", "parallel=tp4",
        "--lw-override", "implementation=" + ",".join(IMPLEMENTATIONS), "--lw-timeout", str(TIMEOUT_S),
        "--alluredir", str(alluredir), "--lw-results", str(results),
        # the plain case and the host-cache variant (rejected by the master), named whole
        "-k", " or ".join(f"{case}]" for case in _cases()),
    ]
    proc = subprocess.run(argv, capture_output=True, text=True, cwd=out, env=env, timeout=600)
    left = left_behind(tag)
    deadline = time.monotonic() + 5.0  # the forkserver and resource tracker leave right after their parent
    while left and time.monotonic() < deadline:
        time.sleep(0.1)
        left = left_behind(tag)
    allure = {}
    for path in alluredir.glob("*-result.json"):
        data = json.loads(path.read_text())
        case = data["name"].split("[", 1)[1].rstrip("]")
        allure[case] = data
    lines = [json.loads(line) for line in results.read_text().splitlines()] if results.exists() else []
    return {"proc": proc, "allure": allure, "alluredir": alluredir, "lines": lines, "left": left}


def _cases() -> list[str]:
    return [f"deepseek_v32-s2-w4-{impl}{variant}" for variant in ("", "-hostcache") for impl in IMPLEMENTATIONS]


def _triggers(case: str) -> bool:
    """Does the fault fire? The host-cache variant is rejected by the master before any worker starts,
    so only a fault in the master's plan fires there."""
    impl = case.split("-w4-", 1)[1].removesuffix("-hostcache")
    if impl in HEALTHY:
        return False
    return not case.endswith("-hostcache") or impl == "fault_raise_master"


def check_run_finished_cleanly(fault_run):
    proc = fault_run["proc"]
    output = proc.stdout + proc.stderr
    assert proc.returncode == 1, output[-3000:]  # tests failed; not an internal error, not a usage error
    assert "INTERNALERROR" not in output
    assert sorted(fault_run["allure"]) == sorted(_cases()), output[-3000:]
    assert sorted(line["case"] for line in fault_run["lines"]) == sorted(_cases())


def check_fault_fails_with_rank_and_reason(fault_run, impl):
    result = fault_run["allure"][f"deepseek_v32-s2-w4-{impl}"]
    message = result.get("statusDetails", {}).get("message", "")
    assert result["status"] in ("failed", "broken"), message[:2000]
    for words in EXPECTED[impl]:
        assert words in message, f"{words!r} not in the failure of {impl}:\n{message[:3000]}"
    duration_s = (result["stop"] - result["start"]) / 1000
    assert duration_s < TIMEOUT_S + MARGIN_S, f"{impl}: detected after {duration_s:.1f} s"


def check_every_other_case_passes(fault_run):
    """Healthy implementations, and fault implementations whose fault never fires, pass: results intact."""
    for case in _cases():
        result = fault_run["allure"][case]
        if _triggers(case):
            assert result["status"] in ("failed", "broken"), case
        else:
            assert result["status"] == "passed", f"{case}: {result.get('statusDetails')}"
    by_case = {line["case"]: line for line in fault_run["lines"]}
    for impl in HEALTHY:
        line = by_case[f"deepseek_v32-s2-w4-{impl}"]
        assert line["outcome"] == "passed" and line["n_blocks"] > 0 and len(line["ranks"]) == 4


def check_pool_recovers_after_each_fault(fault_run):
    """In execution order, every fault that kills ranks is followed by a case that passes on a fresh pool."""
    order = sorted(fault_run["allure"].values(), key=lambda r: r["start"])
    names = [r["name"].split("[", 1)[1].rstrip("]") for r in order]
    failed = [i for i, r in enumerate(order) if r["status"] != "passed"]
    assert len(failed) == sum(_triggers(c) for c in _cases())
    for i in failed:
        later = [r["status"] for r in order[i + 1:]]
        assert "passed" in later, f"nothing passed after {names[i]}"
    # The healthy cases ran after faults that killed ranks, on the rebuilt pool.
    assert names.index("deepseek_v32-s2-w4-reference") > names.index("deepseek_v32-s2-w4-fault_raise")
    assert names.index("deepseek_v32-s2-w4-xllm_upstream") > names.index("deepseek_v32-s2-w4-fault_crash")


def check_allure_results_are_intact(fault_run):
    """Every attachment a result names exists and is not empty (a fault must not eat other results' files)."""
    alluredir = fault_run["alluredir"]
    for case, result in fault_run["allure"].items():
        attachments = result.get("attachments", []) + [
            a for step in result.get("steps", []) for a in step.get("attachments", [])]
        for attachment in attachments:
            path = alluredir / attachment["source"]
            assert path.is_file() and path.stat().st_size > 0, f"{case}: {attachment}"
    healthy = fault_run["allure"]["deepseek_v32-s2-w4-reference"]
    assert healthy.get("attachments"), "a passing case keeps its attachments"


@pytest.mark.slow
def test_faults_end_to_end(tmp_path):
    """One pytest process, every fault case; all checks on its one run (so xdist never runs it twice)."""
    fault_run = _fault_run(tmp_path)
    check_run_finished_cleanly(fault_run)
    for impl in sorted(EXPECTED):
        check_fault_fails_with_rank_and_reason(fault_run, impl)
    check_every_other_case_passes(fault_run)
    check_pool_recovers_after_each_fault(fault_run)
    check_allure_results_are_intact(fault_run)
    assert fault_run["left"] == [], "processes left after the run:\n" + "\n".join(fault_run["left"])


def test_fault_options_plan_like_the_reference_outside_a_group():
    """Every fault option composes and, with no process group (the plan command, the pytest parent),
    never fires: its plan is the reference's."""
    from harness.config.build import build_implementation, build_run_spec
    from harness.config.compose import compose_config
    from implementations.faults import BEHAVIOURS, FaultyImplementation
    from implementations.reference import ReferenceImplementation

    options = sorted(p.stem for p in (CONF_DIR / "implementation").glob("fault_*.yaml"))
    assert options == sorted(EXPECTED)
    seen = set()
    for option in options:
        cfg = compose_config(["model=deepseek_v32", "layerwise=s2", "parallel=tp4", f"implementation={option}"])
        impl = build_implementation(cfg)
        assert isinstance(impl, FaultyImplementation)
        seen.add(impl.behaviour)
        run = build_run_spec(cfg)
        got, want = impl.plan(run), ReferenceImplementation().plan(run)
        assert (got.n_blocks, got.layer_owner, got.ranks) == (want.n_blocks, want.layer_owner, want.ranks)
    assert seen == set(BEHAVIOURS)


@pytest.mark.parametrize("kwargs, field", [
    ({"behaviour": "explode"}, "implementation.behaviour"),
    ({"behaviour": "raise", "point": "engine"}, "implementation.point"),
    ({"behaviour": "raise", "rank": -1}, "implementation.rank"),
    ({"behaviour": "raise", "rank": 2, "point": "plan"}, "implementation.rank"),
    ({"behaviour": "layout", "rank": 0, "point": "plan"}, "implementation.point"),
])
def test_fault_options_are_checked(kwargs, field):
    from contract.errors import ConfigError
    from implementations.faults import FaultyImplementation

    with pytest.raises(ConfigError) as info:
        FaultyImplementation(**kwargs)
    assert info.value.field == field
