"""``contract.upstream_checks``: one row per upstream CHECK, read by its condition (a compiled tree) and by its
message (an engine log); the first row that matches decides, so no row may hide another."""

from __future__ import annotations

import pytest

from contract.upstream_checks import UPSTREAM_CHECKS, check_of_condition, check_of_message

pytestmark = pytest.mark.unit


def test_each_logged_message_is_read_as_its_own_row():
    """No earlier row's text is part of a later row's message (it would take that row's refusals)."""
    for row in UPSTREAM_CHECKS:
        if row.message:
            assert check_of_message(f"Check failed: x. {row.message} (y)") is row, row


def test_a_row_either_reading_can_reach_says_what_is_allowed():
    """A row a compiled tree's CHECK can match names what its field accepts (the refusal's ``allowed``)."""
    for row in UPSTREAM_CHECKS:
        assert row.condition or row.message or row.message_pattern, row
        if row.condition or row.message_pattern:
            assert row.allowed, row
        if row.message:
            assert row.where.count(":") == 1 and row.where.split(":")[1].isdigit(), row


def test_a_condition_and_a_message_of_one_check_name_one_field():
    """Upstream's ``CHECK_GE(layerwise_split_size, 1) << "layerwise_split_size must be >= 1"``, read either way."""
    by_condition = check_of_condition("CHECK_GE(layerwise_split_size, 1)")
    by_message = check_of_message("Check failed: layerwise_split_size >= 1 (0 vs. 1) layerwise_split_size must be >= 1")
    assert by_condition is by_message and by_condition.field == "layerwise.split_size"
    assert check_of_condition("CHECK(false)", "KV Cache quantization is only supported on MLU").field == \
        "cache.kv_cache_dtype"
    assert check_of_condition("CHECK(ok)", "something else") is None and check_of_message("something else") is None
