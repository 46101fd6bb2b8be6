"""One way to name the tree ``implementation=xllm_native`` compiles, for every command.

``implementation.source_dir=PATH`` (or ``$LWSPLIT_XLLM_SRC``) works in ``python -m harness`` jobs and
sweeps as in ``harness.plan``: the job hands it to the TC suites as a key override, and no case of
another implementation (TC-01's reference check of its one-rule cases, the report's environment)
composes it. Under pytest, an implementation that needs a tree and has none (or one that is not
there) is one usage line at start-up (exit 4), before any case or the explorer runs.
Nothing here compiles a tree: cases compose, and the check only looks at the files.
"""

from __future__ import annotations

import pytest

from harness.paths import TC_DIR
from harness.suites import TC_MODULES, load_suite
from harness.suites.matrix import load_matrix
from implementations.xllm_native.tree.files import ENV_SOURCE
from testcases import ROOT

FIXTURE = ROOT / "testcases" / "native" / "fixture_tree"
TC01 = str(TC_DIR / "test_tc01_allocation.py")

TREE_KEY = f"implementation.source_dir={FIXTURE}"
JOB = ["implementation=xllm_native", TREE_KEY, "model=deepseek_v32", "layerwise=off", "parallel=tp4"]
"""What ``python -m harness implementation=xllm_native implementation.source_dir=... model=deepseek_v32
layerwise=off`` hands the suites (``harness.app.job.suite_matrix``)."""


def test_every_tc_takes_the_tree_key_of_a_job():
    matrix = load_matrix("ci", JOB)
    cases = [c for tc in TC_MODULES for c in load_suite(tc).cases(matrix)]
    assert cases
    assert all(c.implementation == "xllm_native" and TREE_KEY in c.extra for c in cases)


def test_the_report_environment_composes_the_matrix_implementation():
    from harness.pytest_plugin.allure_env import allure_environment

    env = allure_environment(load_matrix("ci", JOB))
    assert env["hardware_profile"] == "cpu"


@pytest.mark.parametrize("given, said", [
    ((), "an xLLM source tree"),
    (("--lw-override", "implementation.source_dir={tmp}/no-such-tree"), "no-such-tree"),
], ids=["none-given", "not-there"])
def test_a_missing_tree_is_one_usage_line(given, said, pytester, monkeypatch, tmp_path):
    monkeypatch.delenv(ENV_SOURCE, raising=False)
    args = [a.replace("{tmp}", str(tmp_path)) for a in given]
    result = pytester.runpytest_inprocess(
        TC01, "--lw-override", "implementation=xllm_native", "--lw-override", "model=deepseek_v32",
        "--lw-override", "layerwise=off", *args, "-q", "-p", "no:cacheprovider", "-p", "no:randomly")
    output = "\n".join(result.outlines + result.errlines)
    assert result.ret == 4, output[-3000:]
    lines = [line for line in output.splitlines() if "error:" in line]
    assert len(lines) == 1 and "implementation.source_dir" in lines[0] and said in lines[0], output[-3000:]
    assert "passed" not in output and "failed" not in output and "Traceback" not in output
