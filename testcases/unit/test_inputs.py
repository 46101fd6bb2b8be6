"""Bounded reading of outside input (contract.bounded_inputs): each bomb is one UserError naming the field."""

from __future__ import annotations

import os
import signal
import threading

import pytest

from contract import bounded_inputs
from contract.errors import UserError

pytestmark = pytest.mark.unit


def _refused(fn, *args, field: str, text: str = "") -> UserError:
    with pytest.raises(UserError) as info:
        fn(*args)
    assert info.value.field == field
    assert text in str(info.value), str(info.value)
    return info.value


def test_regular_small_file_is_read(tmp_path):
    path = tmp_path / "c.json"
    path.write_text('{"a": 1}')
    assert bounded_inputs.read_input_file(path, "model_path") == '{"a": 1}'


@pytest.mark.parametrize("special", ["/dev/zero", "/dev/null", "/dev/urandom"])
def test_devices_and_proc_files_are_refused_without_reading(special):
    if not os.path.exists(special):
        pytest.skip(f"{special} absent here")
    _refused(bounded_inputs.read_input_file, special, "--parallel-config", field="--parallel-config", text="regular file")


def test_a_file_that_reports_size_zero_is_still_bounded():
    """/proc files say 0 bytes in stat; the read itself stops at the bound."""
    _refused(lambda: bounded_inputs.read_input_file("/proc/self/status", "f", max_bytes=100), field="f", text="more than 100")


def test_fifo_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    done = threading.Event()
    errors = []

    def read():
        try:
            bounded_inputs.read_input_file(fifo, "--parallel-config")
        except UserError as exc:
            errors.append(exc)
        done.set()

    threading.Thread(target=read, daemon=True).start()
    assert done.wait(5), "reading a FIFO blocked"
    assert errors and "FIFO" in str(errors[0])


def test_directory_and_missing_and_oversized(tmp_path):
    _refused(bounded_inputs.read_input_file, tmp_path, "f", field="f", text="directory")
    _refused(bounded_inputs.read_input_file, tmp_path / "nope", "f", field="f", text="No such file")
    big = tmp_path / "big"
    big.write_bytes(b" " * 101)
    _refused(lambda: bounded_inputs.read_input_file(big, "f", max_bytes=100), field="f", text="101 bytes")


def test_binary_garbage_is_not_utf8(tmp_path):
    path = tmp_path / "bin"
    path.write_bytes(b"\xff\xfe\x00garbage")
    _refused(bounded_inputs.read_input_file, path, "model_path", field="model_path", text="UTF-8")


def test_deep_json_is_refused_before_parsing():
    deep = "[" * 200_000 + "]" * 200_000
    _refused(bounded_inputs.loads_json, deep, "model_path", field="model_path", text="nested at most")


def test_nesting_scan_ignores_brackets_in_strings():
    assert bounded_inputs.nesting_depth('{"a": "[[[[[[", "b": [1, {"c": "\\"]"}]}') == 3


def test_huge_json_integer_and_nan_are_refused():
    _refused(bounded_inputs.loads_json, '{"num_hidden_layers": ' + "9" * 5000 + "}", "model_path",
             field="model_path", text="digits")
    _refused(bounded_inputs.loads_json, '{"x": NaN}', "model_path", field="model_path", text="finite")
    _refused(bounded_inputs.loads_json, '{"x": 1,}', "model_path", field="model_path", text="valid JSON")
    assert bounded_inputs.loads_json('{"a": [1, 2.5, "x"]}', "f") == {"a": [1, 2.5, "x"]}


def test_deep_yaml_is_refused():
    _refused(bounded_inputs.loads_yaml, "a: " + "[" * 5000 + "]" * 5000, "hardware.topology",
             field="hardware.topology", text="nested at most")


def test_yaml_stays_data_only():
    with pytest.raises(UserError):
        bounded_inputs.loads_yaml("!!python/object/apply:os.system ['true']", "f")


@pytest.mark.parametrize("text", ["２", "0_2", "2.0", " 2x", "", "1e3", "٣"])
def test_integers_are_ascii_digits_only(text):
    _refused(bounded_inputs.parse_int, "--layerwise_split_size", text, field="--layerwise_split_size")


@pytest.mark.parametrize("text,value", [("2", 2), ("+4", 4), ("-1", -1), (" 8 ", 8), (3, 3)])
def test_plain_integers_are_read(text, value):
    assert bounded_inputs.parse_int("f", text) == value


def test_bool_is_not_an_integer():
    _refused(bounded_inputs.parse_int, "f", True, field="f")


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_non_finite_numbers_are_refused(value):
    _refused(bounded_inputs.finite, "cache.host_blocks_factor", value, field="cache.host_blocks_factor")


def test_upper_bound_names_its_reason():
    err = _refused(bounded_inputs.at_most, "model.num_hidden_layers", 10**12, bounded_inputs.MAX_LAYERS, "layers per model",
                   field="model.num_hidden_layers")
    assert str(bounded_inputs.MAX_LAYERS) in str(err)


def test_signal_free(monkeypatch):
    """The readers install no signal handlers (they run inside rank processes too)."""
    before = signal.getsignal(signal.SIGINT)
    bounded_inputs.loads_json("{}", "f")
    assert signal.getsignal(signal.SIGINT) is before


# ---- YAML aliases: every bound holds after they are expanded ----------------------------------


def _alias_bomb(levels: int, width: int = 10) -> str:
    """``levels`` anchors, each a list of ``width`` aliases of the one before: width ** levels strings."""
    lines = ["a0: &a0 [" + ", ".join(["x"] * width) + "]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * width) + "]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


def test_yaml_aliases_count_as_what_they_expand_to():
    small = bounded_inputs.loads_yaml(_alias_bomb(3), "f")  # 1,110 nodes: fine, and the data is built as before
    assert small["a2"][9][9] == ["x"] * 10
    text = _alias_bomb(9)  # about 500 bytes standing for a billion strings
    assert len(text) < 600
    with pytest.raises(UserError, match=f"at most {bounded_inputs.MAX_YAML_NODES} nodes"):
        bounded_inputs.loads_yaml(text, "f")


def test_yaml_aliases_cannot_nest_past_the_bound_or_into_themselves():
    chain = "a0: &a0 [x]\n" + "".join(f"a{i}: &a{i} [*a{i - 1}]\n" for i in range(1, bounded_inputs.MAX_NESTING + 2))
    assert bounded_inputs.nesting_depth(chain) == 1  # the text alone looks flat
    with pytest.raises(UserError, match=f"nested at most {bounded_inputs.MAX_NESTING} deep"):
        bounded_inputs.loads_yaml(chain, "f")
    with pytest.raises(UserError, match="without a cycle"):
        bounded_inputs.loads_yaml("a: &a [1, *a]\n", "f")


def test_an_error_never_prints_a_users_value_whole():
    huge = "x" * 100_000
    message = str(UserError(huge, huge, huge, huge))
    assert len(message) < 2000 and message.startswith("xxx") and "..." in message
    nested = [["GPU0"] * 10**3] * 10**3  # a million strings, shared: printing it whole would take megabytes
    assert len(str(UserError("hardware.topology", nested, "a list of names"))) < 400
    assert str(UserError("model", 10**5000, "a small number")).startswith("model=")  # past str()'s digit limit
