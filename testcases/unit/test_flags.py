"""Flags from gflag arguments, a ParallelConfig JSON and plain values (FEATURE section 2)."""

from __future__ import annotations

import json

import pytest

from contract.errors import ConfigError
from contract.specs import LayerwiseFlags
from implementations.reference.flags import (
    flags_from_gflags,
    flags_from_parallel_config_json,
    flags_from_values,
)

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    "args, enable, size",
    [
        ("--enable_layerwise_split=true --layerwise_split_size=2", True, 2),
        ("--enable_layerwise_split --layerwise_split_size=4", True, 4),
        ("--enable_layerwise_split=TRUE --layerwise_split_size=2", True, 2),
        ("--enable_layerwise_split=True", True, 1),
        ("--enable_layerwise_split=1 --layerwise_split_size 2", True, 2),
        ("--enable_layerwise_split=false --layerwise_split_size=2", False, 2),
        ("--enable_layerwise_split=FALSE", False, 1),
        ("--enable_layerwise_split=0", False, 1),
        # gflags reads t/f, y/n and yes/no too (FEATURE section 2)
        ("--enable_layerwise_split=YES --layerwise_split_size=2", True, 2),
        ("--enable_layerwise_split=n", False, 1),
        ("--noenable_layerwise_split --layerwise_split_size=2", False, 2),
        ("-enable_layerwise_split=true -layerwise_split_size=2", True, 2),
        ("--model deepseek-v3 --enable_layerwise_split=true --port 9000", True, 1),
        ("", False, 1),
        # a later occurrence wins, as in gflags
        ("--enable_layerwise_split --noenable_layerwise_split", False, 1),
        ("--layerwise_split_size=2 --layerwise_split_size=4", False, 4),
    ],
)
def test_gflag_spellings(args, enable, size):
    flags = flags_from_gflags(args)
    assert flags == LayerwiseFlags(enable=enable, split_size=size)
    assert flags == flags_from_gflags(args.split())  # argv list form agrees with the string form


def test_gflags_active_only_when_enabled_and_size_above_one():
    assert flags_from_gflags("--enable_layerwise_split=true --layerwise_split_size=2").active
    assert not flags_from_gflags("--enable_layerwise_split=true --layerwise_split_size=1").active
    assert not flags_from_gflags("--enable_layerwise_split=false --layerwise_split_size=4").active


def test_gflags_size_parsed_without_range_check():
    # Range rules belong to validation; parsing must keep the value so validation can name it.
    assert flags_from_gflags("--layerwise_split_size=0").split_size == 0
    assert flags_from_gflags("--layerwise_split_size=-1").split_size == -1


@pytest.mark.parametrize(
    "args, field, fragment",
    [
        ("--enable_layerwise_split=maybe", "--enable_layerwise_split", "yes/no"),
        ("--enable_layerwise_split=2", "--enable_layerwise_split", "yes/no"),
        ("--enable_layerwise_split=", "--enable_layerwise_split", "yes/no"),
        ("--layerwise_split_size=two", "--layerwise_split_size", "whole number"),
        ("--layerwise_split_size=2.5", "--layerwise_split_size", "whole number"),
        ("--layerwise_split_size", "--layerwise_split_size", "whole number"),
        ("--noenable_layerwise_split=true", "--noenable_layerwise_split", "no value"),
        ("--enable_layerwise_splt=true", "--enable_layerwise_splt=true", "--enable_layerwise_split"),
    ],
)
def test_gflag_bad_spellings(args, field, fragment):
    with pytest.raises(ConfigError) as err:
        flags_from_gflags(args)
    assert err.value.field == field
    assert fragment in str(err.value)


@pytest.mark.parametrize(
    "obj, enable, size",
    [
        ({"layerwise_split_size": 2}, False, 2),  # adaptation (FEATURE 2 v2.1): the size alone leaves it off
        ({"layerwise_split_size": 1}, False, 1),
        ({}, False, 1),  # upstream omits the key at its default
        ({"dp_size": 2, "tp_size": 4}, False, 1),
        ({"layerwise_split_size": 4, "enable_layerwise_split": False}, False, 4),
        ({"layerwise_split_size": 2, "enable_layerwise_split": "true"}, True, 2),
        ({"enable_layerwise_split": True}, True, 1),
    ],
)
def test_parallel_config_json(obj, enable, size):
    expected = LayerwiseFlags(enable=enable, split_size=size)
    assert flags_from_parallel_config_json(obj) == expected
    assert flags_from_parallel_config_json(json.dumps(obj)) == expected


@pytest.mark.parametrize("args, obj, active", [
    ("--layerwise_split_size=2", {"layerwise_split_size": 2}, True),
    ("--layerwise_split_size=1", {"layerwise_split_size": 1}, False),
    ("", {}, False),
])
def test_upstream_semantics_split_on_the_size_alone_by_either_route(args, obj, active):
    """FEATURE 2 v2.1: under upstream semantics s > 1 alone turns the split on, gflags or JSON alike,
    and agrees with the oracle's rule."""
    from harness import oracle

    by_gflags = flags_from_gflags(args, semantics="upstream")
    by_json = flags_from_parallel_config_json(obj, semantics="upstream")
    assert by_gflags == by_json and by_gflags.active is active
    assert oracle.expected_split_active("upstream", oracle.parse_parallel_config_json(json.dumps(obj), "upstream")) is active
    assert flags_from_parallel_config_json(obj).active is oracle.expected_split_active(
        "adaptation", oracle.parse_parallel_config_json(json.dumps(obj))) is False


@pytest.mark.parametrize("args", ["--enable_layerwise_split --layerwise_split_size=2", "--noenable_layerwise_split"])
def test_upstream_semantics_have_no_enable_flag(args):
    with pytest.raises(ConfigError, match="no enable flag"):
        flags_from_gflags(args, semantics="upstream")
    with pytest.raises(ConfigError, match="no enable key"):
        flags_from_parallel_config_json({"enable_layerwise_split": True}, semantics="upstream")


def test_parallel_config_layout_keys_are_read():
    from contract.server_flags import parallel_config_settings

    assert parallel_config_settings({"world_size": 8, "dp_size": 2, "tp_size": 4})["parallel"] == {
        "world_size": 8, "dp_size": 2, "cp_size": 1}
    assert parallel_config_settings({"tp_size": 2, "layerwise_split_size": 4}) == {
        "split_size": 4, "parallel": {"world_size": 2, "dp_size": 1, "cp_size": 1}}
    with pytest.raises(ConfigError, match="dp_size 2 \\* cp_size 1 \\* tp_size 4 = 8"):
        parallel_config_settings({"world_size": 4, "dp_size": 2, "tp_size": 4})


def test_a_flagfile_is_read_in_place(tmp_path):
    flagfile = tmp_path / "xllm.flags"
    flagfile.write_text("# server flags\n--enable_layerwise_split=true\n--layerwise_split_size=4\n")
    assert flags_from_gflags(f"--flagfile={flagfile}") == LayerwiseFlags(enable=True, split_size=4)
    assert flags_from_gflags(f"--flagfile={flagfile} --layerwise_split_size=2").split_size == 2  # later wins
    looping = tmp_path / "loop.flags"
    looping.write_text(f"--flagfile={looping}\n")
    with pytest.raises(ConfigError, match="nested at most"):
        flags_from_gflags(f"--flagfile={looping}")


@pytest.mark.parametrize(
    "obj, field",
    [
        ("{not json", "parallel_config"),
        ("[2]", "parallel_config"),
        ({"layerwise_split_size": "two"}, "layerwise_split_size"),
        ({"layerwise_split_size": 2.0}, "layerwise_split_size"),
        ({"layerwise_split_size": True}, "layerwise_split_size"),
        ({"layerwise_split_size": 2, "enable_layerwise_split": "maybe"}, "enable_layerwise_split"),
    ],
)
def test_parallel_config_json_bad(obj, field):
    with pytest.raises(ConfigError) as err:
        flags_from_parallel_config_json(obj)
    assert err.value.field == field


@pytest.mark.parametrize(
    "enable, size, expected",
    [
        (True, 2, LayerwiseFlags(enable=True, split_size=2)),
        ("true", "4", LayerwiseFlags(enable=True, split_size=4)),
        ("False", 2, LayerwiseFlags(enable=False, split_size=2)),
        (0, 1, LayerwiseFlags(enable=False, split_size=1)),
    ],
)
def test_plain_values(enable, size, expected):
    assert flags_from_values(enable, size) == expected


@pytest.mark.parametrize(
    "enable, size, field",
    [("on", 2, "layerwise.enable"), (2, 2, "layerwise.enable"), (True, "2x", "layerwise.split_size"),
     (True, True, "layerwise.split_size"), (True, None, "layerwise.split_size"),
     (True, 2.0, "layerwise.split_size"), (True, 10 ** 30, "layerwise.split_size")],
)
def test_plain_values_bad(enable, size, field):
    with pytest.raises(ConfigError) as err:
        flags_from_values(enable, size)
    assert err.value.field == field
    assert field in str(err.value)
