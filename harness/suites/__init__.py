"""The seed test plan (TC-01..TC-07) as rank bodies plus parent-side checks.

``testcases/tc/test_tcNN_*.py`` are thin pytest wrappers around these modules, and
``python -m harness`` runs those same pytest files, so there is one copy of the test
logic. Data flows one way: Case (config) -> RunSpec + plan -> rank bodies on a live
process group -> per-rank facts -> checks in the parent -> Allure/results.
"""
