"""The project's ``pytester`` (testcases/conftest.py) keeps compiled modules loaded across in-process runs."""

from __future__ import annotations

import sys


def test_an_in_process_run_leaves_torch_and_hypothesis_in_place(pytester):
    kept = {name: sys.modules.get(name) for name in ("torch", "torch.distributed", "hypothesis")}
    pytester.makepyfile("import torch.distributed, hypothesis\n\ndef test_nothing():\n    pass\n")
    result = pytester.runpytest_inprocess("-q", "-p", "no:cacheprovider", "-p", "no:randomly")
    result.assert_outcomes(passed=1)
    # pytester removes what a run imported; these must have been imported before it, and stay
    assert {name: sys.modules.get(name) for name in kept} == kept and all(kept.values()), kept
