"""Two tensor libraries opened one after the other in one process are each themselves: the loader knows a library
by the name it was opened by (``/proc/self/fd/<n>``), so a descriptor closed after the first ``dlopen`` let the
second library's ``dlopen`` hand back the first (a tokens-major build of upstream's allocation judged as the
heads-major one)."""

from __future__ import annotations

import ctypes
import subprocess

import pytest

from contract.errors import ImplementationFailure
from implementations.xllm_native.build import cachefs
from implementations.xllm_native.build.commands import compiler
from implementations.xllm_native.runtime import tensor_lib


def _library(folder, name: str, value: int):
    src = folder / f"{name}.cpp"
    src.write_text(f'extern "C" int lwsplit_which() {{ return {value}; }}\n')
    out = folder / f"lib{name}.so"
    subprocess.run([compiler(), "-shared", "-fPIC", "-o", str(out), str(src)], check=True, timeout=120)
    out.chmod(0o700)
    return out, cachefs.file_sha(out)


def test_libraries_opened_one_after_another_are_each_their_own(tmp_path):
    tmp_path.chmod(0o700)
    first, second = _library(tmp_path, "first", 1), _library(tmp_path, "second", 2)
    answers = []
    for path, sha in (first, second):
        lib = tensor_lib.load_held(cachefs.open_library(path, sha), path, "test")
        lib.lwsplit_which.restype = ctypes.c_int
        answers.append(lib.lwsplit_which())
    assert answers == [1, 2]


def test_a_library_the_loader_hands_back_again_is_refused(tmp_path):
    tmp_path.chmod(0o700)
    path, sha = _library(tmp_path, "again", 3)
    tensor_lib.load_held(cachefs.open_library(path, sha), path, "test")
    with pytest.raises(ImplementationFailure, match="already loaded in this process"):
        tensor_lib.load_held(cachefs.open_library(path, sha), path, "test")
