"""A failed compile said as one ``UserError``: the compiler's first error, and where it is (a role's file, the
glue and its role, a port's base tree, a duplicate symbol at link, torch's ABI)."""

from __future__ import annotations

import os
import re
from pathlib import Path

from contract.errors import UserError
from implementations.xllm_native.build import commands
from implementations.xllm_native.build.commands import port_sources
from implementations.xllm_native.tree.files import FIELD, ROLES, TreeMap


def first_error(log: str) -> str:
    """The compiler's first ``error:`` line (file:line: error: text), else its first line."""
    for line in log.splitlines():
        if " error: " in line or line.startswith("error:") or "fatal error:" in line:
            return line.strip()
    for line in log.splitlines():
        if "undefined reference" in line:
            return line.strip()
    return (log.strip().splitlines() or ["(no compiler output)"])[0]


_DUPLICATE = re.compile(r"([^\s:]+\.o):[^\n]*?multiple definition of [`'‘]([^'’]+)['’]; ([^\s:]+\.o):")


def _object_source(tree: TreeMap, obj: str) -> str:
    """The source a port object was compiled from (``NN-stem.o`` is the NN-th of ``port_sources``)."""
    m = re.match(r"(\d+)-", Path(obj).name)
    sources = port_sources(tree)
    if m and int(m.group(1)) < len(sources):
        return str(sources[int(m.group(1))])
    return obj


def _port_compile_error(tree: TreeMap, log: str) -> UserError:
    m = tree.manifest
    dup = _DUPLICATE.search(log)
    if dup:
        second, symbol, first = dup.groups()
        return UserError(f"implementation.manifest={m.path}: sources", list(m.sources),
                         "sources that define each symbol once (compile only one of the files)",
                         f"duplicate symbol {symbol} at link: defined in {_object_source(tree, first)} "
                         f"and in {_object_source(tree, second)}")
    first = first_error(log)
    where = f"the port {tree.root}"
    base = m.base_root()
    if str(m.glue_path) in first:
        role = _glue_role(m.glue_path, first)
        where = f"the glue {m.glue_path}" + (f" (role {role})" if role else "")
    elif base is not None and str(base) + os.sep in first and str(tree.root) + os.sep not in first:
        where = f"the base tree {base} (base_sources, base_include_dirs: compiled with the port's flags, no shims)"
    else:
        for name, role in m.roles.items():
            if role.present and str(tree.root / role.file) in first:
                where = f"the port's {name} role ({tree.root / role.file})"
                break
    hint = _logging_libraries_hint(first, log)
    return UserError(FIELD, str(tree.root), f"a tree whose sources and glue compile{hint}",
                     f"{where} does not compile: {first}")


def _logging_libraries_hint(first: str, log: str) -> str:
    """The install hint when a compile or link failed on glog or gflags, the two libraries every build needs."""
    if "glog/logging.h" in first or "gflags" in first or "-lglog" in log or "-lgflags" in log:
        return "; install glog and gflags (Debian: libgoogle-glog-dev libgflags-dev)"
    return ""


def _glue_role(glue: Path, error_line: str) -> str:
    """The role of the glue function holding the error's line (its ``// Role: <name>`` comment above)."""
    m = re.search(re.escape(str(glue)) + r":(\d+):", error_line)
    if not m:
        return ""
    role = ""
    for line in glue.read_text(encoding="utf-8", errors="replace").splitlines()[:int(m.group(1))]:
        found = re.match(r"\s*// Role: (\w+)", line)
        if found:
            role = found.group(1)
    return role


def compile_error(tree: TreeMap, log: str) -> UserError:
    if tree.port:
        return _port_compile_error(tree, log)
    first = first_error(log)
    roles = [r for r in ROLES if str(tree.path(r)) in first]
    where = f"the {roles[0]} role ({tree.path(roles[0])})" if roles else f"the tree {tree.root}"
    hint = _logging_libraries_hint(first, log)
    return UserError(FIELD, str(tree.root), f"a tree whose planning code compiles{hint}",
                     f"{where} does not compile: {first}")


def tensor_compile_error(tree: TreeMap, log: str) -> UserError:
    m = tree.manifest
    first = first_error(log)
    glue = m.beside(m.tensors.glue)
    where = f"the tree {tree.root}"
    if str(glue) in first:
        where = f"the allocation glue {glue}"
    elif m.allocation is not None and str(tree.root / m.allocation.file) in first:
        where = f"the allocation ({tree.root / m.allocation.file})"
    dup = _DUPLICATE.search(log)
    if dup:
        where, first = "the tensor library's link", f"duplicate symbol {dup.group(2)}"
    if "undefined reference" in log and "google::" in log and not commands.torch_build()["abi"]:
        first = next((line.strip() for line in log.splitlines() if "undefined reference" in line and "google::" in line),
                     first)
        return UserError("torch", commands.torch_build()["version"], "a torch built with the C++11 ABI, as glog is "
                         "(torch._C._GLIBCXX_USE_CXX11_ABI true: PyPI's builds from 2.7; a vendor build: ask "
                         "its vendor)", f"the tensor library links torch's pre-C++11 ABI against glog's: {first}")
    return UserError(FIELD, str(tree.root), "a tree whose allocation compiles against torch "
                     "(the manifest's allocation.sources, glue and shims)", f"{where} does not compile: {first}")
