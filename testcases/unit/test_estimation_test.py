"""python -m harness.own_tests --estimation-test (``own_tests.run_estimation_test``): the tree's test binary runs with a time limit, and its output
is read whatever its encoding. The compile step is replaced by a shell script standing in for the binary."""

from __future__ import annotations

import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from contract.errors import UserError
from harness import own_tests as command
from implementations.xllm_native.runtime import own_tests

GBK_SUMMARY = (b"[==========] 1 test from 1 test suite ran. (0 ms total)\n"
               b"[  PASSED  ] 1 test.\n" + "估算通过\n".encode("gbk"))  # not UTF-8


@pytest.fixture
def tree(tmp_path, monkeypatch):
    """A source tree holding the test file, and a compile step that writes ``script`` as the binary."""
    (tmp_path / "t.cpp").write_text("// the tree's test\n")
    monkeypatch.setattr(own_tests, "tree_map", lambda source: SimpleNamespace(root=tmp_path))

    def with_binary(script: bytes) -> Path:
        def compile_test(_tree, _test, tmp: Path) -> Path:
            binary = tmp / "upstream_test"
            binary.write_bytes(b"#!/bin/sh\n" + script)
            binary.chmod(0o755)
            return binary

        monkeypatch.setattr(own_tests, "estimation_test_binary", compile_test)
        return tmp_path

    return with_binary


def test_output_that_is_not_utf8_is_read_with_replacement_characters(tree, capsys):
    source = tree(b"printf '" + b"".join(b"\\%03o" % byte for byte in GBK_SUMMARY) + b"'\n")
    assert command.main(["--source", str(source), "--estimation-test", "--test", "t.cpp"]) == 0
    assert "[  PASSED  ] 1 test." in capsys.readouterr().out


def test_a_binary_past_its_time_limit_is_stopped_and_said_in_one_line(tree, capsys):
    source = tree(b"sleep 30\n")
    started = time.monotonic()
    with pytest.raises(SystemExit) as exited:
        command.main(["--source", str(source), "--estimation-test", "--test", "t.cpp", "--timeout-s", "0.5"])
    assert time.monotonic() - started < 10
    assert exited.value.code == 1  # the tree's test did not finish: a failing result, not a usage error
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: t.cpp: ") and "Traceback" not in err, err
    assert "upstream_test" in err and "0.5 s" in err and "--timeout-s" in err, err


def test_a_time_limit_that_is_not_a_positive_number_is_one_usage_error(tree, capsys):
    source = tree(b"true\n")
    for given in ("0", "-1", "soon", "nan"):
        with pytest.raises(SystemExit) as exited:
            command.main(["--source", str(source), "--estimation-test", "--test", "t.cpp", "--timeout-s", given])
        assert exited.value.code == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "Traceback" not in err, err
        assert err.startswith("error: --timeout-s=") and "a number of seconds above 0" in err, err


def test_a_compile_error_quoting_a_gbk_comment_is_one_error_line(tmp_path, monkeypatch, capsys):
    """The compiler quotes the error's line, a GBK comment in it (not UTF-8): one `error:` line, the bytes
    replaced (was: UnicodeDecodeError). A script stands in for the compiler."""
    cxx = tmp_path / "cxx"
    quoted = "t.cpp:3:14: error: expected primary-expression // 预算不足\n".encode("gbk")
    cxx.write_bytes(b"#!/bin/sh\nprintf '" + b"".join(b"\\%03o" % byte for byte in quoted) + b"' >&2\nexit 1\n")
    cxx.chmod(0o755)

    def generate(_tree, gen: Path) -> Path:
        (gen / "unity.cpp").write_text("")
        return gen / "unity.cpp"

    monkeypatch.setattr(own_tests, "generate", generate)
    monkeypatch.setattr(own_tests.commands, "compile_command", lambda *args: [str(cxx), "-shared", "-o", "x"])
    (tmp_path / "build").mkdir()
    tree = SimpleNamespace(root=tmp_path, path=lambda role: tmp_path / "est.cpp")
    with pytest.raises(UserError) as raised:
        own_tests.estimation_test_binary(tree, tmp_path / "t.cpp", tmp_path / "build")
    said = str(raised.value)
    assert raised.value.field == "--test" and "\n" not in said, said
    assert "t.cpp:3:14: error: expected primary-expression //" in said, said
