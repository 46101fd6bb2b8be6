"""The compiler runs of a build: which compiler, with which flags and folders, for upstream's unity file, a
port's objects and link, and a tensor library against torch; the limit on one compile."""

from __future__ import annotations

import importlib.util
import math
import os
import shutil
import subprocess
from pathlib import Path
from typing import Optional

from contract.errors import UserError
from implementations.xllm_native.build import cachefs
from implementations.xllm_native.tree.files import TreeMap, cut_defines

CPP_DIR = Path(__file__).resolve().parent.parent / "cpp"
CXX_FLAGS = ("-std=c++20", "-O1", "-fPIC", "-shared", "-w", "-DNDEBUG")


def compiler() -> str:
    cxx = os.environ.get("CXX", "g++")
    found = shutil.which(cxx)
    if found is None:
        raise UserError("CXX", cxx, "a C++20 compiler on PATH (g++ 12 or newer)",
                        "xllm_native compiles the tree's planning code")
    return found


def torch_paths() -> tuple[list[str], str]:
    """The torch wheel's C++ include folders and library folder, found without importing torch."""
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        return [], ""
    base = Path(list(spec.submodule_search_locations)[0])
    return [str(base / "include"), str(base / "include/torch/csrc/api/include")], str(base / "lib")


def compile_command(tree: TreeMap, gen: Path, unity: Path, out: Path) -> list[str]:
    includes, lib = torch_paths()
    dirs = [str(gen)] + [str(tree.root / d.strip()) for d in tree.files["include_dirs"].split(",") if d.strip()]
    cmd = [compiler(), *CXX_FLAGS, *(f"-D{d}" for d in cut_defines(tree)), "-MD", "-MF", str(gen / "deps.d")]
    cmd += [f"-I{d}" for d in dirs] + [f"-isystem{d}" for d in includes]
    cmd += [str(unity), "-o", str(out), "-Wl,--no-undefined"]
    if lib:
        cmd += [f"-L{lib}", f"-Wl,-rpath,{lib}", "-Wl,--as-needed", "-lc10"]
    return cmd + ["-lglog", "-lgflags"]


PORT_FLAGS = ("-std=c++20", "-O1", "-fPIC", "-w", "-DNDEBUG")
"""Flags of each object of a port tree (``CXX_FLAGS`` less ``-shared``: the objects are linked after)."""


def port_sources(tree: TreeMap) -> list[Path]:
    """What a port tree compiles, in order: its sources, the base tree's, the glue file."""
    m = tree.manifest
    base = m.base_root()
    return [tree.root / s for s in m.sources] + [base / s for s in m.base_sources] + [m.glue_path]


def port_commands(tree: TreeMap, gen: Path, out: Path) -> list[list[str]]:
    """One compile command per source (``gen/obj/NN-stem.o`` with its ``.d``), then the link."""
    m = tree.manifest
    base = m.base_root()
    dirs = [tree.root / d for d in m.include_dirs] + [base / d for d in m.base_include_dirs] + [CPP_DIR]
    flags = [*PORT_FLAGS, *(f"-D{d}" for d in m.defines), *(f"-I{d}" for d in dirs)]
    objdir = gen / "obj"
    objdir.mkdir(parents=True, exist_ok=True)
    cmds, objs = [], []
    for i, src in enumerate(port_sources(tree)):
        obj = objdir / f"{i:02d}-{src.stem}.o"
        objs.append(str(obj))
        cmds.append([compiler(), *flags, "-MD", "-MF", str(obj.with_suffix(".d")), "-c", str(src), "-o", str(obj)])
    cmds.append([compiler(), "-shared", *objs, "-o", str(out), "-Wl,--no-undefined", "-lglog", "-lgflags"])
    return cmds


TENSOR_FLAGS = ("-O1", "-fPIC", "-w", "-DNDEBUG")


def torch_build() -> dict:
    """How to compile against the torch this process runs: its headers, its libraries, its C++ ABI; C++20
    (xLLM's code needs it, e.g. ``std::source_location``; torch 2.1's headers compile under it too)."""
    import torch  # here: about 2 s to import, needed only when a tensor library is keyed or built

    base = Path(torch.__file__).resolve().parent
    return {"version": torch.__version__, "include": [str(base / "include"), str(base / "include/torch/csrc/api/include")],
            "lib": str(base / "lib"), "abi": int(bool(torch._C._GLIBCXX_USE_CXX11_ABI)),
            "std": "-std=c++20"}


def tensor_sources(tree: TreeMap) -> list[Path]:
    """What a tensor library compiles, in order: the tree's allocation sources, the base tree's, the glue."""
    m = tree.manifest
    t = m.tensors
    return [tree.root / s for s in t.sources] + [m.base_root() / s for s in t.base_sources] + [m.beside(t.glue)]


def tensor_commands(tree: TreeMap, gen: Path, out: Path, kv_layout: Optional[str] = None) -> list[list[str]]:
    """One compile per source against torch (``gen/obj/NN-stem.o``), then the link with libtorch; the defines
    of ``kv_layout``'s build (``TensorBuild.defines_for``)."""
    m, tb = tree.manifest, torch_build()
    t = m.tensors
    dirs = ([m.beside(t.shims)] if t.shims else []) + [tree.root / d for d in t.include_dirs]
    dirs += [m.base_root() / d for d in m.base_include_dirs] if m.base else []
    dirs += [CPP_DIR]
    flags = [tb["std"], *TENSOR_FLAGS, f"-D_GLIBCXX_USE_CXX11_ABI={tb['abi']}", *(f"-D{d}" for d in t.defines_for(kv_layout))]
    flags += [f"-I{d}" for d in dirs] + [f"-isystem{d}" for d in tb["include"]]
    objdir = gen / "obj"
    objdir.mkdir(parents=True, exist_ok=True)
    cmds, objs = [], []
    compiled = [m.beside(t.glue)] if t.unity else tensor_sources(tree)
    for i, src in enumerate(compiled):
        obj = objdir / f"{i:02d}-{src.stem}.o"
        objs.append(str(obj))
        cmds.append([compiler(), *flags, "-MD", "-MF", str(obj.with_suffix(".d")), "-c", str(src), "-o", str(obj)])
    if not tb["abi"]:  # torch on the pre-C++11 ABI, glog on the C++11 one: the bridge for glog's one ABI-tagged symbol
        for src, abi in ((CPP_DIR / "glog_old_abi.cpp", 0), (CPP_DIR / "glog_cxx11_bridge.cpp", 1)):
            obj = objdir / f"{len(objs):02d}-{src.stem}.o"
            objs.append(str(obj))
            cmds.append([compiler(), tb["std"], *TENSOR_FLAGS, f"-D_GLIBCXX_USE_CXX11_ABI={abi}", "-MD", "-MF",
                         str(obj.with_suffix(".d")), "-c", str(src), "-o", str(obj)])
    cmds.append([compiler(), "-shared", *objs, "-o", str(out), "-Wl,--no-undefined", f"-L{tb['lib']}",
                 f"-Wl,-rpath,{tb['lib']}", "-ltorch_cpu", "-lc10", "-lglog", "-lgflags"])
    return cmds


def compile_commands(tree: TreeMap, gen: Path, unity: Optional[Path], out: Path) -> list[list[str]]:
    """The compiler runs that build ``out``: one for upstream's unity file, one per object and a link for a port."""
    if tree.port:
        return port_commands(tree, gen, out)
    return [compile_command(tree, gen, unity, out)]


ENV_BUILD_TIMEOUT = "LWSPLIT_NATIVE_BUILD_TIMEOUT_S"
BUILD_TIMEOUT_S = 900.0
"""The default limit on one compile (a cold build of upstream's code takes about 25 s on a free core)."""
VERSION_TIMEOUT_S = 30.0


def build_timeout() -> float:
    """The compile's time limit: ``$LWSPLIT_NATIVE_BUILD_TIMEOUT_S`` seconds, else ``BUILD_TIMEOUT_S``."""
    text = os.environ.get(ENV_BUILD_TIMEOUT, "").strip()
    if not text:
        return BUILD_TIMEOUT_S
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 < value <= 86400:
        raise UserError(ENV_BUILD_TIMEOUT, text, "seconds in (0, 86400]", "the limit on one compile")
    return value


def compiler_timeout(cxx: str, seconds: float, what: str) -> UserError:
    return UserError("CXX", cxx, f"a compiler that finishes within {seconds:g} s ({ENV_BUILD_TIMEOUT})",
                     f"{what} still ran after {seconds:g} s; its process group was killed")


def compiler_id(cxx: str) -> bytes:
    limit = min(VERSION_TIMEOUT_S, build_timeout())
    try:
        return cachefs.run_bounded([cxx, "--version"], timeout=limit)[1].encode()
    except cachefs.Timeout:
        raise compiler_timeout(cxx, limit, f"`{cxx} --version`") from None
    except (OSError, subprocess.SubprocessError):
        return b""
