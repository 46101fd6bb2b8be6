"""Where a case is expected to fail, decided by the spec (the oracle), never by the code under test.

FEATURE section 4: upstream's literal owner rule (``layer_id % s``) differs from the
round-robin over full-attention layers on hybrid models; suites that check the owner
rule or the peak memory must then fail for ``upstream_owner_rule`` (the reference with
only upstream's owner rule). Marking those cases
strict-xfail shows the finding in the report, and a fix would turn them XPASS (a failure).
"""

from __future__ import annotations

from harness import oracle

UPSTREAM_IMPLEMENTATIONS = ("upstream_owner_rule",)


def upstream_rule_breaks(run) -> bool:
    """True when the upstream owner rule assigns some full layer differently from the spec."""
    s = oracle.split_size(run)
    if s == 1:
        return False
    full = oracle.expected_full_layers(run.model)
    return oracle.expected_upstream_owner(full, s) != oracle.expected_owner(full, s)


def known_failure(suite, case, resolved) -> str | None:
    if case.implementation not in UPSTREAM_IMPLEMENTATIONS or not getattr(suite, "CHECKS_OWNER_RULE", False):
        return None
    from harness.suites.common import expected_rejection

    if expected_rejection(resolved.run) or not upstream_rule_breaks(resolved.run):
        return None
    return (
        "upstream owner rule (layer_id % s) puts every full-attention layer of this hybrid model on "
        "one split rank (FEATURE section 4); expected to fail until upstream assigns round-robin"
    )
