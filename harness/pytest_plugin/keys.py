"""The stash keys the plugin's roles share (``config.stash``, ``item.stash``)."""

from __future__ import annotations

import pytest

MATRIX = pytest.StashKey["object"]()
"""config: the session's case matrix (``options``)."""
GIVEN = pytest.StashKey["object"]()
"""config: the session's ``options.GivenCases`` (None: its cases come from the command line)."""
FACTS = pytest.StashKey["dict"]()
"""item: the facts the ranks returned for the case (``pools.lw_run``), taken by ``results``."""
REPRESENTATIVE = pytest.StashKey["set"]()
"""config: the (tc, case id) pairs whose Allure results carry charts (``results``)."""
ALLURE_ENV = pytest.StashKey["dict"]()
"""config (xdist controller): the environment the first worker reported (``allure_env``)."""
