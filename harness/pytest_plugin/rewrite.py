"""Keep the libraries out of pytest's assert rewriting: ~3.5 s of CPU in every pytest process.

pytest rewrites the asserts of every module in every installed distribution that ships a
pytest plugin: Hydra's, Hypothesis's and this harness's, ~240 modules that no test asserts
in (the harness has one assert, with its own message). With bytecode writing off nothing
is cached, so each pytest process (every xdist worker) paid ~3.5 s of CPU for it.
"""

from __future__ import annotations

from harness.private_apis import unmark_for_assert_rewriting

NOT_REWRITTEN = ("hydra", "hypothesis", "_hypothesis_globals", "harness", "contract", "implementations")


def pytest_addoption(parser, pluginmanager) -> None:
    """Unmark ``NOT_REWRITTEN`` for assert rewriting (test modules and conftests still are): pytest's
    private ``rewrite_hook._must_rewrite`` (``harness.private_apis.unmark_for_assert_rewriting``)."""
    unmark_for_assert_rewriting(pluginmanager, NOT_REWRITTEN)
