"""pytest plugin ``lwsplit`` (pytest11 entry point): options, case parameterization, rank pools.

A TC test module names its suite module (``SUITE = harness.suites.tcNN``) and takes the
``lw_case`` and ``lw_run`` fixtures; this plugin expands the matrix into cases, marks
them (L1/L2, tcNN), runs bodies on the per-worker rank pools, and records results for reports.
Failures the spec predicts for a known variant are judged by the tests (``harness.suites.expectations``).

One module per role, each registered by pytest as a plugin of its own (``pytest_plugins`` below, read
when this module is registered, so every hook is registered once, right after this one):

| module | role |
| --- | --- |
| ``rewrite`` | keep the libraries out of assert rewriting (the first hook pytest calls) |
| ``options`` | the ``--lw-*`` options, checked once; the session's case matrix (or ``GivenCases``: given as data) |
| ``parametrize`` | the matrix's cases as ``lw_case`` parameters, their markers, the session header |
| ``schedule`` | the order and the chunks xdist hands tests out in |
| ``gc_freeze`` | collection with the garbage collector paused, then frozen |
| ``pools`` | ``lw_run`` on the per-worker rank pools; their shutdown |
| ``results`` | a case's result: Allure labels and attachments, its line (``--lw-results``, ``GivenCases``), failed writes |
| ``allure_env`` | the run's Allure environment and categories, written once |

``keys`` holds the stash keys the roles share.
"""

from __future__ import annotations

from harness.pytest_plugin.options import session_matrix

pytest_plugins = tuple(f"{__name__}.{role}" for role in (
    "rewrite", "options", "parametrize", "schedule", "gc_freeze", "pools", "results", "allure_env"))

__all__ = ["session_matrix"]
