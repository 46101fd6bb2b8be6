"""Mutation self-test: the kill matrix of the TC suites against the mutants.

``python -m harness.mutation`` prints it and writes ``kill_matrix.md`` / ``kill_matrix.json``;
``testcases/meta/test_mutation.py`` asserts on it under pytest.
"""

from harness.mutation.killmatrix import CaseOutcome, Cell, Row, cases_for, evaluate, full_matrix, row

__all__ = ["CaseOutcome", "Cell", "Row", "cases_for", "evaluate", "full_matrix", "row"]
