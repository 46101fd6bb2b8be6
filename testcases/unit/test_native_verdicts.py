"""harness.native_verdicts: a pytest JUnit report read as verdict rows; bad input."""

from __future__ import annotations

from harness import native_verdicts

JUNIT = """<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest">
<testcase classname="testcases.tc.test_tc01_allocation" name="test_tc01[qwen3_5_moe-s2-w4-xllm_native]">
<failure message="AssertionError: rank 0 (split rank 0) owns full layers [], spec says [3, 11]&#10;rank 1 ...">x</failure>
</testcase>
<testcase classname="testcases.tc.test_tc02_estimation" name="test_tc02[qwen3_5_moe-off-w4-xllm_native]"/>
<testcase classname="testcases.tc.test_tc04_propagation" name="test_tc04[qwen3_5_moe-s4-w4-xllm_native]">
<skipped type="pytest.xfail" message="upstream refuses a config the spec accepts"/></testcase>
<testcase classname="testcases.tc.test_tc07_speculative" name="test_tc07[qwen3_5_moe-s2-w4-xllm_native-qwen3_5_mtp]">
<error message="fixture failed">y</error></testcase>
</testsuite></testsuites>"""


def test_a_junit_report_reads_as_one_row_per_case_with_the_first_reason():
    rows = native_verdicts.verdicts(JUNIT, "tree", "m", "qwen3_5_moe")
    assert rows == [
        ("tree", "m", "qwen3_5_moe", "s2", "TC-01", "fail", "rank 0 (split rank 0) owns full layers [], spec says [3, 11]"),
        ("tree", "m", "qwen3_5_moe", "off", "TC-02", "pass", ""),
        ("tree", "m", "qwen3_5_moe", "s4", "TC-04", "xfail", "upstream refuses a config the spec accepts"),
        ("tree", "m", "qwen3_5_moe", "s2", "TC-07", "fail", "fixture failed"),
    ]


def test_a_tree_that_is_not_a_folder_is_one_error_line(tmp_path, capsys):
    assert native_verdicts.main(["--tree", str(tmp_path / "nope")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: --tree=") and "an existing folder" in err[0]


GTEST = """[==========] Running 3 tests from 1 test suite.
[ RUN      ] LayerwiseSplitKV.TC01_AllocationCorrectness
[       OK ] LayerwiseSplitKV.TC01_AllocationCorrectness (0 ms)
[ RUN      ] LayerwiseSplitKV.TC02_MemoryEstimation
x.cpp:12: Failure
[  FAILED  ] LayerwiseSplitKV.TC02_MemoryEstimation (0 ms)
[==========] 3 tests from 1 test suite ran. (1 ms total)
[  PASSED  ] 2 tests.
[  FAILED  ] 1 test, listed below:
[  FAILED  ] LayerwiseSplitKV.TC02_MemoryEstimation
"""


def test_a_trees_own_gtest_output_reads_as_counts_and_failed_names():
    from implementations.xllm_native.own_tests import parse

    result = parse(GTEST, "tests/t.cpp")
    assert (result.total, result.passed, result.failed) == (3, 2, ("LayerwiseSplitKV.TC02_MemoryEstimation",))
    assert result.summary() == ("its own tests (tests/t.cpp): 2 of 3 pass; failed: "
                                "LayerwiseSplitKV.TC02_MemoryEstimation")
