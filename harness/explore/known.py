"""Open questions of the spec the explorer has found: configurations it reports, not fails.

Each entry is a function ``run -> Optional[str]`` decided from the configuration by the oracle alone
(never from the code under test), and ``testcases/explore`` pins one minimal configuration of each, so
an entry that stops reproducing (the question settled, the oracle or the reference changed) fails there
and must be removed here.

None is open. FEATURE 2.2 settled the three the explorer had found, and the oracle, the reference and
the TCs follow it (``testcases/explore/test_catches.py`` pins each configuration as settled):

- grouping ties: one key (FEATURE 4): the worst link of any group, then the groups' own worst links from
  worst to best, then upstream's consecutive groups if among the best, else the lexicographically first;
- the capacity gain where the budget holds a split block but no uniform one: null (FEATURE 6);
- "split peak <= uniform peak" where the spec's own owners and scratch exceed the uniform peak (one full
  layer): the plan says "the split raises the peak" and TC-02 checks the figures instead (FEATURE 6).
"""

from __future__ import annotations

from typing import Callable, Optional

KNOWN: tuple[Callable[..., Optional[str]], ...] = ()
"""Every open question; ``open_question(run)`` asks each."""


def open_question(run) -> Optional[str]:
    for known in KNOWN:
        reason = known(run)
        if reason is not None:
            return reason
    return None
