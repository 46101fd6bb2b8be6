"""Compile an xLLM tree's layerwise split planning code into a shared library, once per source.

What is compiled, unchanged, from the tree (``TreeMap`` names each role's file):

* ``estimation``  the whole file (``estimate_kv_cache_capacity``, ``build_layer_cache_owned``,
  ``resolve_indexer_cache_enabled_layers``); its header sits next to it (``.h``);
* ``layout``      the header with ``LayerwiseSplitLayout`` (owner rank, ``owns``) and the
  enablement checks;
* ``speculative`` ``SpeculativeEngine::calculate_kv_cache``, cut out of its file;
* ``master``      ``validate_layerwise_split_size_startup_config``, cut out of its file;
* ``utils``       the helpers the estimation calls (``ceil_div``, the model-type helpers,
  ``kv_split_size_effective``, ``enable_kvcache_split``), cut out of ``util/utils.h``
  (the whole header pulls protobuf and the model registry);
* ``support``     further files compiled whole (``block_utils.cpp``, ``pretty_print.cpp``).

Functions are cut out mechanically (``extract``) into the build folder, never into the
repository; ``#line`` keeps compiler errors and CHECK locations on the tree's own lines.
The project's shims (``cpp/parallel_config.h``, ``cpp/engine_shim.h``) stand in for what those
functions read from their classes; ``cpp/binding.cpp`` is the one C entry point.

The library is cached under ``~/.cache/lwsplit/native`` (``LWSPLIT_NATIVE_CACHE`` overrides):
``<key>-<deps>/`` where ``key`` hashes the role files, the project's C++ sources, the compiler and
its flags, and ``deps`` hashes every header of the tree the compiler read (its ``-MD`` list, checked
again on each load). A build runs in a temporary folder under a file lock and is renamed into place
after its manifest is written, so concurrent processes build once and a failed build leaves nothing.
Only the user's own cache counts (``cachefs``): the folder is 0700 and must be the user's, an entry is
used only when it is the user's and its library matches the sha256 its manifest records, and headers
that are links or that a new file could shadow are watched; the compiler runs bounded, in its own
process group.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import importlib.util
import json
import math
import os
import platform
import re
import shutil
import stat
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from contract.errors import UserError
from implementations.xllm_native import cachefs, conditionals

ABI = "lwsplit-native-1"
"""Bumped when the binding's protocol changes: part of every cache key."""
CPP_DIR = Path(__file__).resolve().parent / "cpp"
PROJECT_SOURCES = ("binding.cpp", "protocol.h", "request_args.h", "engine_shim.h", "parallel_config.h", "mapping_shim.h")
CXX_FLAGS = ("-std=c++20", "-O1", "-fPIC", "-shared", "-w", "-DNDEBUG")
ENV_SOURCE = "LWSPLIT_XLLM_SRC"
ENV_CACHE = "LWSPLIT_NATIVE_CACHE"
FIELD = "implementation.source_dir"

ROLES = ("estimation", "layout", "speculative", "master", "utils", "model_args")
UPSTREAM_FILES = {
    "estimation": "xllm/core/framework/kv_cache/kv_cache_estimation.cpp",
    "layout": "xllm/core/framework/kv_cache/layerwise_split_layout.h",
    "speculative": "xllm/core/distributed_runtime/speculative_engine.cpp",
    "master": "xllm/core/distributed_runtime/master.cpp",
    "utils": "xllm/core/util/utils.h",
    "model_args": "xllm/core/framework/model/model_args.h",
    "support": "xllm/core/framework/block/block_utils.cpp,xllm/core/util/pretty_print.cpp",
    "utils_headers": "xllm/core/common/constants.h",
    "include_dirs": "xllm,xllm/core",
    "groups": "xllm/core/framework/parallel_state/mapping_npu.cpp",
}
"""Upstream xLLM's file of each role (494f293b5); ``files`` overrides any of them for a port."""

ENTRY_POINTS = {
    "estimation": ("estimate_kv_cache_capacity", "build_layer_cache_owned", "resolve_indexer_cache_enabled_layers"),
    "layout": ("LayerwiseSplitLayout", "validate_layerwise_split_enablement"),
    "speculative": ("SpeculativeEngine::calculate_kv_cache",),
    "master": ("validate_layerwise_split_size_startup_config",),
    "model_args": ("ModelArgs", "is_full_attention_layer"),
}
"""Names each role's file must define; the first two of speculative/master are cut out."""
UTILS_REQUIRED = ("ceil_div", "kv_split_size_effective", "enable_kvcache_split")
UTILS_OPTIONAL = ("align_up", "mla_model_type_set", "is_mla_model_type", "has_mtp_model_type_marker",
                  "starts_with_model_type", "is_target_mtp_model_type", "kDeepseekV4DSparkModelType",
                  "is_deepseek_v4_dspark_model_type", "is_deepseek_v4_model_type",
                  "is_tp_invariant_kv_cache_model_type", "is_target_model_type")
"""Helpers cut out of the utils file when it has them (a port may lack the DeepSeek-V4 ones)."""
GROUPS_CUT = ("MappingNPU::validate", "MappingNPU::get_tp_group", "MappingNPU::get_layerwise_split_group",
              "MappingNPU::get_current_group_id")
"""What the ``groups`` role cuts out of its file (upstream: ``mapping_npu.cpp``) when the manifest plays it: the
split groups, the TP groups they cut, the group lookup and the CHECKs run before them (``cpp/mapping_shim.h``
holds the members they read)."""


@dataclass(frozen=True, kw_only=True)
class TreeMap:
    """Where each role lives in one tree: paths relative to ``root``."""

    root: Path
    files: dict = field(default_factory=dict)
    manifest: Optional[object] = None
    """A ``manifest.Manifest`` with ``compile: sources`` (its sources and glue compiled one object each);
    None for upstream's cut-out build over ``files``."""

    @property
    def port(self) -> bool:
        return self.manifest is not None and self.manifest.compile == "sources"

    def path(self, role: str) -> Path:
        return self.root / self.files[role]

    def paths(self, role: str) -> tuple[Path, ...]:
        return tuple(self.root / p.strip() for p in self.files[role].split(",") if p.strip())


def tree_map(source_dir: Optional[str], files: Optional[dict] = None) -> TreeMap:
    """The tree to compile: ``source_dir``, else ``$LWSPLIT_XLLM_SRC``; upstream's map with ``files`` over it."""
    given = source_dir or os.environ.get(ENV_SOURCE) or None
    if not given:
        raise UserError(FIELD, None, f"an xLLM source tree: implementation.source_dir=<path> or ${ENV_SOURCE}")
    root = Path(str(given)).expanduser()
    if not root.is_dir():
        raise UserError(FIELD, str(given), "an existing folder holding an xLLM source tree")
    unknown = sorted(set(files or {}) - set(UPSTREAM_FILES))
    if unknown:
        raise UserError(f"implementation.files.{unknown[0]}", (files or {})[unknown[0]],
                        f"a role of {', '.join(UPSTREAM_FILES)}")
    merged = dict(UPSTREAM_FILES)
    merged.update({k: str(v) for k, v in (files or {}).items()})
    tree = TreeMap(root=root.resolve(), files=merged)
    for role in ROLES:
        if not tree.path(role).is_file():
            raise UserError(f"implementation.files.{role}", merged[role],
                            f"a file of {tree.root} (the {role} role; is this an xLLM tree?)")
    for role in ("support", "utils_headers"):
        for p in tree.paths(role):
            if not p.is_file():
                raise UserError(f"implementation.files.{role}", merged[role], f"files of {tree.root}",
                                f"{p} is missing")
    return tree


def port_tree(m, root: Path) -> TreeMap:
    """The tree of a ``compile: sources`` manifest (``manifest.check_tree`` says whether it holds what the
    manifest names)."""
    root = root.expanduser().resolve()
    if not root.is_dir():
        raise UserError(FIELD, str(root), "an existing folder holding the tree the manifest describes")
    return TreeMap(root=root, files={}, manifest=m)


# ---- cutting functions out of a file ---------------------------------------------------------

_MASK = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)
_AFTER_PARAMS = re.compile(r"\s*(?:const\s*)?(?:noexcept\s*)?(?:override\s*)?(?:->\s*[\w:<>,\s*&]+?)?\s*\{")


def _masked(text: str) -> str:
    """``text`` with comments and literals blanked (same length, newlines kept), for brace matching."""
    return _MASK.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)


def _match(masked: str, i: int, open_: str, close: str) -> int:
    depth = 0
    for j in range(i, len(masked)):
        if masked[j] == open_:
            depth += 1
        elif masked[j] == close:
            depth -= 1
            if depth == 0:
                return j
    return -1


def _declaration_start(masked: str, pos: int) -> int:
    start = masked.rfind("\n", 0, pos) + 1
    while start > 0:
        prev_start = masked.rfind("\n", 0, start - 1) + 1
        prev = masked[prev_start:start - 1].strip()
        if not prev or prev.endswith((";", "}", "{", ":")) or prev.startswith("#"):
            break
        start = prev_start
    return start


def extract(text: str, name: str, macros: tuple[str, ...] = ()) -> Optional[tuple[int, str]]:
    """The definition of ``name`` in ``text`` (a function with its body, or a constant up to its ``;``) that
    the preprocessor keeps under the defines ``macros`` (``conditionals.live``: a version in a dropped
    ``#if`` group is never the one cut): (its first line number, its text), or None when ``text`` defines no
    such name there. ``conditionals.Unevaluable`` for a condition the cut cannot decide."""
    masked = conditionals.live(_masked(text), macros)
    for m in re.finditer(r"(?<![\w:])" + re.escape(name) + r"\s*([(=])", masked):
        if m.group(1) == "(":
            close = _match(masked, m.end(1) - 1, "(", ")")
            if close < 0:
                continue
            body = _AFTER_PARAMS.match(masked, close + 1)
            if body is None:
                continue
            end = _match(masked, body.end() - 1, "{", "}")
        else:
            end = masked.find(";", m.end())
        if end < 0:
            continue
        start = _declaration_start(masked, m.start())
        return text.count("\n", 0, start) + 1, text[start:end + 1]
    return None


_CONSTANT_BEFORE = re.compile(r"\b(?:constexpr|const)\b[^;{}()=]*$")


def defines(text: str, name: str) -> bool:
    """``text`` defines ``name``: a class or struct with its body or base list, a function with its parameter
    list and body (``extract``'s rule: a call, ``v.push_back(x);``, or a declaration is not one), or a
    ``const``/``constexpr`` constant with its initializer."""
    masked = _masked(text)
    short = name.split("::")[-1]
    if re.search(r"(?<![\w])(?:class|struct)\s+(?:\w+\s+)*?" + re.escape(short) + r"\s*(?:final\s*)?[{:]",
                 masked) is not None:
        return True
    for m in re.finditer(r"(?<![\w:.>])" + re.escape(name) + r"\s*([(=])", masked):
        if m.group(1) == "=":
            line_start = masked.rfind("\n", 0, m.start()) + 1
            if _CONSTANT_BEFORE.search(masked, line_start, m.start()) and masked[m.end():m.end() + 1] != "=":
                return True
            continue
        close = _match(masked, m.end(1) - 1, "(", ")")
        if close >= 0 and _AFTER_PARAMS.match(masked, close + 1) is not None:
            return True
    return False


# ---- the generated build folder ------------------------------------------------------------------


def _read(path: Path) -> str:
    return path.read_text(encoding="utf-8", errors="replace")


def _cut(tree: TreeMap, role: str, names: tuple[str, ...], optional: tuple[str, ...] = ()) -> str:
    """The definitions of ``names`` (each required) and of ``optional`` (when present), in file order."""
    path = tree.path(role)
    text = _read(path)
    macros = _cut_defines(tree)
    out = []
    for name in names + optional:
        required = name in names
        try:
            found = extract(text, name, macros)
        except conditionals.Unevaluable as exc:
            raise UserError(f"implementation.files.{role}", tree.files[role], "#if conditions of defined(X), !, "
                            "&&, ||, comparisons and integers over the manifest's defines",
                            f"{path}:{exc.line}: {exc.directive}") from None
        if found is None:
            if required:
                raise UserError(f"implementation.files.{role}", tree.files[role],
                                f"a file defining {name}", f"{name} not found in {path}")
            continue
        out.append(found)
    return "".join(f'#line {line} "{path}"\n{snippet}\n' for line, snippet in sorted(set(out)))


def check_entry_points(tree: TreeMap) -> None:
    """UserError naming the first role file that lacks one of its entry points."""
    for role, names in ENTRY_POINTS.items():
        text = _read(tree.path(role))
        if role == "estimation":  # a port may move a helper into a file it compiles whole
            text += "".join(_read(p) for p in tree.paths("support"))
        for name in names:
            if not defines(text, name):
                raise UserError(f"implementation.files.{role}", tree.files[role], f"a file defining {name}",
                                f"{name} not found in {tree.path(role)}")


def generate(tree: TreeMap, gen: Path) -> Optional[Path]:
    """Write the build folder's sources; returns the unity translation unit (None for a port tree,
    whose sources and glue compile as they are)."""
    if tree.port:
        return None
    check_entry_points(tree)
    for rel in ("core/framework/config", "framework/config", "core/util", "util"):
        (gen / rel).mkdir(parents=True, exist_ok=True)
    shim = _read(CPP_DIR / "parallel_config.h")
    for rel in ("core/framework/config", "framework/config"):
        (gen / rel / "parallel_config.h").write_text(shim)
    shutil.copy(CPP_DIR / "engine_shim.h", gen / "engine_shim.h")
    utils_headers = "".join(f'#include "{p}"\n' for p in tree.paths("utils_headers"))
    utils = (
        f"// Generated by lwsplit-harness: helpers cut out of {tree.path('utils')}.\n#pragma once\n"
        "#include <glog/logging.h>\n\n#include <algorithm>\n#include <cstdint>\n#include <numeric>\n"
        "#include <optional>\n#include <string>\n#include <string_view>\n#include <type_traits>\n"
        "#include <unordered_set>\n#include <vector>\n\n"
        f'#include "core/framework/config/parallel_config.h"\n{utils_headers}\n'
        "namespace xllm {\nnamespace util {\n"
        "// The master resolves an empty model_type from the model path; the binding always passes one.\n"
        "template <typename P, typename B>\n"
        "inline std::string get_model_type(const P&, const B&) { return std::string(); }\n"
        + _cut(tree, "utils", UTILS_REQUIRED, UTILS_OPTIONAL)
        + "}  // namespace util\n}  // namespace xllm\n"
    )
    for rel in ("core/util", "util"):
        (gen / rel / "utils.h").write_text(utils)
    estimation = tree.path("estimation")
    header = estimation.with_suffix(".h")
    (gen / "lwsplit_roles.h").write_text(
        "// Generated by lwsplit-harness: the tree's headers of the estimation, layout and ModelArgs roles.\n"
        f'#pragma once\n#include "{header}"\n#include "{tree.path("layout")}"\n#include "{tree.path("model_args")}"\n')
    (gen / "lwsplit_master.inc").write_text(
        '#include "engine_shim.h"\nnamespace xllm {\n'
        + _cut(tree, "master", ENTRY_POINTS["master"]) + "}  // namespace xllm\n")
    (gen / "lwsplit_speculative.inc").write_text(
        '#include "engine_shim.h"\nnamespace xllm {\n'
        + _cut(tree, "speculative", ENTRY_POINTS["speculative"]) + "}  // namespace xllm\n")
    unity = gen / "lwsplit_unity.cpp"
    unity.write_text(
        "// Generated by lwsplit-harness: one translation unit (the torch headers are parsed once).\n"
        + "".join(f'#include "{p}"\n' for p in (estimation, *tree.paths("support")))
        + '#include "lwsplit_master.inc"\n#include "lwsplit_speculative.inc"\n'
        + groups_include(tree, gen)
        + f'#include "{CPP_DIR / "binding.cpp"}"\n')
    return unity


def plays_groups(tree: TreeMap) -> bool:
    """An upstream-cut manifest that plays the ``groups`` role (its file is ``files.groups``); a tree map with no
    manifest (``tree_map`` alone): the map's groups file exists."""
    m = tree.manifest
    if m is None:
        return "groups" in tree.files and tree.path("groups").is_file()
    return "groups" in m.roles and m.roles["groups"].present


def groups_include(tree: TreeMap, gen: Path) -> str:
    """The unity's lines for the ``groups`` role: ``GROUPS_CUT`` cut out of its file behind the project's
    ``mapping_shim.h`` (the glue answers op ``groups`` under ``LWSPLIT_GROUPS``); nothing when the manifest does
    not play it."""
    if not plays_groups(tree):
        return ""
    (gen / "lwsplit_groups.inc").write_text(
        f'#include "{CPP_DIR / "mapping_shim.h"}"\n#include <glog/logging.h>\nnamespace xllm {{\n'
        + _cut(tree, "groups", GROUPS_CUT) + "}  // namespace xllm\n#define LWSPLIT_GROUPS 1\n")
    return '#include "lwsplit_groups.inc"\n'


# ---- compiler and cache --------------------------------------------------------------------------


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


def _cut_defines(tree: TreeMap) -> tuple[str, ...]:
    """The defines of an upstream-cut build: its manifest's (the cut is what the preprocessor keeps under them)."""
    return tree.manifest.defines if tree.manifest is not None else ()


def compile_command(tree: TreeMap, gen: Path, unity: Path, out: Path) -> list[str]:
    includes, lib = torch_paths()
    dirs = [str(gen)] + [str(tree.root / d.strip()) for d in tree.files["include_dirs"].split(",") if d.strip()]
    cmd = [compiler(), *CXX_FLAGS, *(f"-D{d}" for d in _cut_defines(tree)), "-MD", "-MF", str(gen / "deps.d")]
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


TENSOR_ABI = "lwsplit-tensors-2"
"""Bumped when ``cpp/alloc_protocol.h``'s protocol changes: part of every tensor library's key."""
TENSOR_FLAGS = ("-O1", "-fPIC", "-w", "-DNDEBUG")


def torch_build() -> dict:
    """How to compile against the torch this process runs: its headers, its libraries, its C++ ABI; C++20
    (xLLM's code needs it, e.g. ``std::source_location``; torch 2.1's headers compile under it too)."""
    import torch

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


def tensor_key(tree: TreeMap, kv_layout: Optional[str] = None) -> str:
    """Hash of what decides a tensor library: the manifest, every source and the glue, the project's protocol
    headers and shims, the compiler, the flags, the layout's defines and the torch it is built against."""
    m = tree.manifest
    t = m.tensors
    parts = [TENSOR_ABI.encode(), m.path.read_bytes(), os.fsencode(str(tree.root)), os.fsencode(str(m.base_root()))]
    project = sorted(p for p in CPP_DIR.iterdir() if p.suffix in (".h", ".cpp"))  # a unity glue includes its siblings
    for path in [*tensor_sources(tree), *project]:
        parts.append(_hashed("implementation.manifest", str(m.path), path, tree.root))
    if t.shims:
        for path in sorted(m.beside(t.shims).rglob("*")):
            if path.is_file():
                parts.append(os.fsencode(str(path)) + _hashed("implementation.manifest", str(m.path), path, tree.root))
    cxx = compiler()
    return _sha(*parts, cxx.encode(), _compiler_id(cxx), " ".join(TENSOR_FLAGS).encode(),
                " ".join(t.defines_for(kv_layout)).encode(), json.dumps(torch_build(), sort_keys=True).encode())[:20]


def _tensor_compile_error(tree: TreeMap, log: str) -> UserError:
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
    if "undefined reference" in log and "google::" in log and not torch_build()["abi"]:
        first = next((line.strip() for line in log.splitlines() if "undefined reference" in line and "google::" in line),
                     first)
        return UserError("torch", torch_build()["version"], "a torch built with the C++11 ABI, as glog is "
                         "(torch._C._GLIBCXX_USE_CXX11_ABI true: PyPI's builds from 2.7; a vendor build: ask "
                         "its vendor)", f"the tensor library links torch's pre-C++11 ABI against glog's: {first}")
    return UserError(FIELD, str(tree.root), "a tree whose allocation compiles against torch "
                     "(the manifest's allocation.sources, glue and shims)", f"{where} does not compile: {first}")


def compile_commands(tree: TreeMap, gen: Path, unity: Optional[Path], out: Path) -> list[list[str]]:
    """The compiler runs that build ``out``: one for upstream's unity file, one per object and a link for a port."""
    if tree.port:
        return port_commands(tree, gen, out)
    return [compile_command(tree, gen, unity, out)]


def _sha(*parts: bytes) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(hashlib.sha256(part).digest())
    return h.hexdigest()


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


def _compiler_timeout(cxx: str, seconds: float, what: str) -> UserError:
    return UserError("CXX", cxx, f"a compiler that finishes within {seconds:g} s ({ENV_BUILD_TIMEOUT})",
                     f"{what} still ran after {seconds:g} s; its process group was killed")


def _compiler_id(cxx: str) -> bytes:
    limit = min(VERSION_TIMEOUT_S, build_timeout())
    try:
        return cachefs.run_bounded([cxx, "--version"], timeout=limit)[1].encode()
    except cachefs.Timeout:
        raise _compiler_timeout(cxx, limit, f"`{cxx} --version`") from None
    except (OSError, subprocess.SubprocessError):
        return b""


def _too_large(name: str, value: str, exc: cachefs.TooLarge) -> UserError:
    return UserError(name, value, f"source files of at most {cachefs.MAX_SOURCE_BYTES >> 20} MiB",
                     f"{exc.path} holds more; planning code is never that large")


def source_key(tree: TreeMap) -> str:
    """Hash of what decides the build before the compiler runs: role files, the project's C++,
    the map (its include folders in their order among it), the compiler and its flags, the torch
    headers' location; for a port, its manifest and every source it compiles. Files are hashed in chunks;
    one above ``cachefs.MAX_SOURCE_BYTES`` is refused."""
    if tree.port:
        m = tree.manifest
        parts = [ABI.encode(), m.path.read_bytes(), os.fsencode(str(tree.root)), os.fsencode(str(m.base_root()))]
        for path in [*port_sources(tree), CPP_DIR / "protocol.h", CPP_DIR / "request_args.h"]:
            parts.append(_hashed("implementation.manifest", str(m.path), path, tree.root))
        cxx = compiler()
        return _sha(*parts, cxx.encode(), _compiler_id(cxx), " ".join(PORT_FLAGS).encode())[:20]
    files = [(f"implementation.files.{r}", tree.files[r], tree.path(r)) for r in ROLES]
    files += [("implementation.files.support", tree.files["support"], p) for p in tree.paths("support")]
    files += [("implementation.files.utils_headers", tree.files["utils_headers"], p)
              for p in tree.paths("utils_headers")]
    header = tree.path("estimation").with_suffix(".h")
    files += [("implementation.files.estimation", str(header), header)]
    if plays_groups(tree):
        files += [("implementation.files.groups", tree.files["groups"], tree.path("groups"))]
    parts = [ABI.encode(), json.dumps(tree.files, sort_keys=True).encode(), os.fsencode(str(tree.root))]
    parts += [_hashed(name, value, path, tree.root) if path.is_file() else b"" for name, value, path in files]
    parts += [(CPP_DIR / s).read_bytes() for s in PROJECT_SOURCES]
    cxx = compiler()
    parts += [cxx.encode(), _compiler_id(cxx), " ".join(CXX_FLAGS).encode(), json.dumps(torch_paths()).encode()]
    if _cut_defines(tree):  # none (upstream's manifest): the key as before
        parts.append(" ".join(_cut_defines(tree)).encode())
    return _sha(*parts)[:20]


def _hashed(name: str, value: str, path: Path, root: Path) -> bytes:
    """``path``'s sha256 for a key (in chunks); one above ``cachefs.MAX_SOURCE_BYTES`` or unreadable is refused,
    naming ``name``."""
    try:
        return cachefs.file_sha(path).encode()
    except cachefs.TooLarge as exc:
        raise _too_large(name, value, exc) from None
    except OSError as exc:
        raise UserError(name, value, f"a readable file of {root}", f"{path}: {exc.strerror}") from None


def cache_root() -> Path:
    """The configured cache folder (not yet checked: ``private_cache`` does that): ``$LWSPLIT_NATIVE_CACHE``,
    else ``$XDG_CACHE_HOME/lwsplit/native`` (an absolute one: the XDG spec ignores a relative one), else
    ``~/.cache/lwsplit/native``."""
    env = os.environ.get(ENV_CACHE)
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    if os.path.isabs(xdg):
        return Path(xdg) / "lwsplit" / "native"
    home = os.path.expanduser("~")
    if not os.path.isabs(home):  # no $HOME and no passwd entry: never a cache relative to the working folder
        raise UserError(ENV_CACHE, None, f"a cache folder: set {ENV_CACHE} or XDG_CACHE_HOME",
                        "this user has no home folder")
    return Path(home) / ".cache" / "lwsplit" / "native"


def _cache_setting() -> str:
    if os.environ.get(ENV_CACHE):
        return ENV_CACHE
    return "XDG_CACHE_HOME" if os.path.isabs(os.environ.get("XDG_CACHE_HOME", "")) else ENV_CACHE


def _cache_error(root: Path, detail: str, need: str = "") -> UserError:
    need = need or f"a cache folder only you (uid {os.getuid()}) can write"
    return UserError(_cache_setting(), str(root), f"{need}; set {ENV_CACHE} or XDG_CACHE_HOME to one", detail)


def private_cache(root: Path) -> Path:
    """``root`` created 0700 where missing; one ``UserError`` naming it when it is not the user's own
    (another uid's, writable by group or others, a file, under a folder others can swap) or cannot
    be made."""
    try:
        return cachefs.private_folder(root)
    except cachefs.NotPrivate as exc:
        raise _cache_error(root, str(exc)) from None
    except OSError as exc:
        raise _cache_error(root, f"{exc.filename or root}: {exc.strerror}") from None


def _deps_digest(deps: dict) -> Optional[str]:
    """Hash of the recorded headers' names and current contents; None when one is gone or unreadable."""
    parts = []
    for path in sorted(deps):
        try:
            parts.append(os.fsencode(path) + b"\0" + cachefs.file_sha(Path(path)).encode())
        except (OSError, cachefs.TooLarge):
            return None
    return _sha(*parts)[:12]


@dataclass(frozen=True, kw_only=True)
class Built:
    """A usable cache entry."""

    library: Path
    manifest: dict


def _valid_entry(entry: Path, key: Optional[str] = None) -> Optional[Built]:
    """The entry when it can be trusted and is current, else None: a folder, its manifest and its library
    owned by the user and not writable by group or others, the library a plain name inside the entry
    whose sha256 is the manifest's, the manifest's key ``key``, every recorded header unchanged and no
    header now shadowing one the compiler read. A truncated or foreign entry is never an error: it is
    skipped and the library built again."""
    try:
        st = os.lstat(entry)
        if not stat.S_ISDIR(st.st_mode) or cachefs.why_not_private(st):
            return None
        manifest = json.loads(cachefs.read_private(entry / "manifest.json"))
        if not isinstance(manifest, dict) or (key is not None and manifest.get("key") != key):
            return None
        name, deps = manifest.get("library"), manifest.get("deps")
        if not cachefs.plain_name(name) or not isinstance(deps, dict):
            return None
        library = entry / name
        if cachefs.private_sha(library) != manifest.get("library_sha256"):
            return None
        if _deps_digest(deps) != manifest.get("deps_digest") or cachefs.shadowed(manifest.get("shadow_watch")):
            return None
    except (OSError, ValueError, TypeError, cachefs.NotPrivate, cachefs.TooLarge):
        return None
    return Built(library=library, manifest=manifest)


def _find(root: Path, key: str) -> Optional[Built]:
    try:
        found = sorted(root.glob(f"{key}-*"))
    except OSError:
        return None
    for entry in found:
        built = _valid_entry(entry, key)
        if built is not None:
            return built
    return None


def _watched_roots(tree: TreeMap) -> list[str]:
    """The folders whose files the compiler read are recorded: the tree's, and a port manifest's ``base``."""
    base = tree.manifest.base_root() if tree.manifest is not None and tree.manifest.base else None
    return [str(tree.root)] + ([str(base)] if base is not None else [])


def _parse_deps(text: str, roots: list, cwd: Path) -> dict:
    """{header: sha256} of what the compiler read (its ``-MD`` rules, ``cachefs.parse_depfile``: every rule's
    prerequisites) inside ``roots`` (the tree, a manifest's base): each by the name the compiler used, and,
    for a symbolic link, its target too (wherever it is)."""
    root = roots[0]
    deps = {}
    for raw in cachefs.parse_depfile(text):
        path = os.path.normpath(os.path.join(str(cwd), raw))
        real = os.path.realpath(path)
        if not any(cachefs._inside(path, r) or cachefs._inside(real, r) for r in roots):
            continue
        for p in {path, real}:
            try:
                deps[p] = cachefs.file_sha(Path(p))
            except cachefs.TooLarge as exc:
                raise _too_large(FIELD, root, exc) from None
    return dict(sorted(deps.items()))


def _search_path(cmd: list, cwd: Path) -> list:
    """The compiler's include search order: the command's ``-I`` then ``-isystem`` folders (kept even when
    missing, so one created later is watched), then its built-in folders (``-E -v``)."""
    quoted, system, flags = [], [], []
    args = iter(cmd[1:])
    for a in args:
        for opt, into in (("-I", quoted), ("-isystem", system)):
            if a.startswith(opt):
                folder = a[len(opt):] or next(args, "")  # -Idir or -I dir
                into.append(os.path.normpath(os.path.join(str(cwd), folder)))
                flags.append(opt + folder)
                break
        else:
            if a.startswith("-std="):
                flags.append(a)
    given = quoted + system
    probe = [cmd[0], *flags, "-xc++", "-E", "-v", os.devnull, "-o", os.devnull]
    try:
        out = cachefs.run_bounded(probe, timeout=min(VERSION_TIMEOUT_S, build_timeout()), cwd=str(cwd))[1]
    except (cachefs.Timeout, OSError):
        out = ""
    return given + [d for d in cachefs.search_dirs(out) if d not in given]


def _shadow_watch(depfile: str, cmd: list, gen: Path, roots: list) -> dict:
    """``cachefs.shadow_watch`` over every header the compiler read, kept for the folders of ``roots`` (the
    tree, a manifest's base): a header added there is what can go unseen (system folders change with the
    compiler, which is in the key; the build folder is the harness's own and goes with the entry)."""
    deps = [os.path.normpath(os.path.join(str(gen), d)) for d in cachefs.parse_depfile(depfile)]
    includers = {os.path.dirname(d) for d in deps if any(cachefs._inside(d, r) for r in roots)}
    watch = cachefs.shadow_watch(deps, _search_path(cmd, gen), includers)
    return {d: names for d, names in watch.items() if any(cachefs._inside(d, r) for r in roots)}


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
    hint = ""
    if "glog/logging.h" in first or "gflags" in first or "-lglog" in log or "-lgflags" in log:
        hint = "; install glog and gflags (Debian: libgoogle-glog-dev libgflags-dev)"
    return UserError(FIELD, str(tree.root), f"a tree whose sources and glue compile{hint}",
                     f"{where} does not compile: {first}")


def _glue_role(glue: Path, error_line: str) -> str:
    """The role of the glue function holding the error's line (its ``// Role: <name>`` comment above)."""
    m = re.search(re.escape(str(glue)) + r":(\d+):", error_line)
    if not m:
        return ""
    role = ""
    for line in _read(glue).splitlines()[:int(m.group(1))]:
        found = re.match(r"\s*// Role: (\w+)", line)
        if found:
            role = found.group(1)
    return role


def _compile_error(tree: TreeMap, log: str) -> UserError:
    if tree.port:
        return _port_compile_error(tree, log)
    first = first_error(log)
    roles = [r for r in ROLES if str(tree.path(r)) in first]
    where = f"the {roles[0]} role ({tree.path(roles[0])})" if roles else f"the tree {tree.root}"
    hint = ""
    if "glog/logging.h" in first or "gflags" in first or "-lglog" in log or "-lgflags" in log:
        hint = "; install glog and gflags (Debian: libgoogle-glog-dev libgflags-dev)"
    return UserError(FIELD, str(tree.root), f"a tree whose planning code compiles{hint}",
                     f"{where} does not compile: {first}")


def build(tree: TreeMap, *, root: Optional[Path] = None, tensors: bool = False, kv_layout: Optional[str] = None) -> Built:
    """The cached library for ``tree``, building it once (under a lock) when no valid entry exists;
    ``tensors``: its allocation's torch library (the manifest's ``allocation.torch``) instead, the build for
    a hardware profile's ``kv_layout`` where the manifest has ``allocation.layout_defines`` (None: its first).

    SIGTERM and SIGHUP (when nobody else handles them) and Ctrl-C during it kill the compiler's process
    group and remove the temporary folder before the process ends."""
    root = cache_root() if root is None else root
    try:
        os.fsencode(str(tree.root)).decode("utf-8")
    except UnicodeDecodeError:
        raise UserError(FIELD, str(tree.root), "a path that is valid UTF-8",
                        "the generated sources name the tree's files by their paths") from None
    with cachefs.terminate_as_exception():
        root = private_cache(root)
        if tensors and (tree.manifest is None or tree.manifest.tensors is None):
            raise UserError(FIELD, str(tree.root), "a manifest whose allocation is compiled against torch "
                            "(allocation.torch: true)")
        if tensors and kv_layout is not None and tree.manifest.tensors.layout_defines \
                and kv_layout not in tree.manifest.tensors.layouts():
            raise UserError("hardware.kv_layout", kv_layout,
                            f"one of {', '.join(tree.manifest.tensors.layouts())} (the layouts manifest "
                            f"{tree.manifest.name} builds its allocation for: allocation.layout_defines)")
        key = tensor_key(tree, kv_layout) if tensors else source_key(tree)
        found = _find(root, key)
        if found is not None:
            return found
        lock_path = root / f"{key}.lock"
        try:
            fd = cachefs.lock_file(lock_path)
        except cachefs.NotPrivate as exc:
            raise _cache_error(root, f"the build lock {exc}") from None
        except OSError as exc:
            raise _cache_error(root, f"the build lock {lock_path}: {exc.strerror}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            found = _find(root, key)
            if found is not None:
                return found
            for stale in root.glob(f".tmp-{key}-*"):  # a build of this key killed midway: no one else holds the lock
                try:
                    if not cachefs.why_not_private(os.lstat(stale)) and stale.is_dir() and not stale.is_symlink():
                        shutil.rmtree(stale, ignore_errors=True)
                except OSError:
                    pass
            return _build_locked(tree, root, key, tensors, kv_layout)
        finally:
            os.close(fd)


_FULL = ("No space left on device", "Disk quota exceeded")


def _build_locked(tree: TreeMap, root: Path, key: str, tensors: bool = False, kv_layout: Optional[str] = None) -> Built:
    try:
        tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{key}-", dir=root))
    except OSError as exc:
        raise _cache_error(root, f"cannot make a build folder: {exc.strerror}") from None
    try:
        gen = tmp / "gen"
        gen.mkdir()
        if tensors:
            library = tmp / "liblwsplit_tensors.so"
            commands = tensor_commands(tree, gen, library, kv_layout)
        else:
            unity = generate(tree, gen)
            library = tmp / "liblwsplit_native.so"
            commands = compile_commands(tree, gen, unity, library)
        started = time.monotonic()
        limit = build_timeout()
        for cmd in commands:
            try:
                rc, log = cachefs.run_bounded(cmd, timeout=limit, cwd=str(gen))
            except cachefs.Timeout:
                raise _compiler_timeout(cmd[0], limit, f"compiling {tree.root}") from None
            except OSError as exc:
                raise UserError("CXX", cmd[0], "a C++20 compiler this user can run", exc.strerror) from None
            with open(tmp / "build.log", "a", errors="replace") as build_log:
                build_log.write(" ".join(cmd) + "\n" + log)
            if rc != 0:
                full = [line.strip() for line in log.splitlines() if any(s in line for s in _FULL)]
                if full:  # the linker's "ld returned 1" is the disk's doing, not the tree's
                    raise _cache_error(root, f"the compiler ran out of room: {full[0]}",
                                       "a cache folder with room for a build") from None
                raise _tensor_compile_error(tree, log) if tensors else _compile_error(tree, log)
        if not library.is_file():
            raise _compile_error(tree, "(the compiler wrote no library)")
        if tree.port or tensors:  # one dependency file per object, each a rule of its own, as make reads them
            rules = [d.read_text(errors="surrogateescape") for d in sorted((gen / "obj").glob("*.d"))]
            (gen / "deps.d").write_text("\n".join(rules) + "\n", errors="surrogateescape")
        depfile = (gen / "deps.d").read_text(errors="surrogateescape")
        deps = _parse_deps(depfile, _watched_roots(tree), gen)
        if not any(cachefs._inside(p, str(tree.root)) for p in deps):
            raise UserError(FIELD, str(tree.root), "a compiler that writes its dependency list (-MD)",
                            f"{gen / 'deps.d'} names no file of the tree")
        cachefs.make_private(library)
        manifest = {
            "abi": ABI, "source": str(tree.root), "files": tree.files, "key": key,
            "manifest": str(tree.manifest.path) if tree.manifest is not None else None,
            "compiler": _compiler_id(cmd[0]).decode(errors="replace").splitlines()[:1],
            "flags": list(TENSOR_FLAGS if tensors else PORT_FLAGS if tree.port else CXX_FLAGS), "command": cmd, "commands": len(commands),
            "seconds": round(time.monotonic() - started, 1),
            "built": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "machine": platform.machine(),
            "library": library.name, "library_sha256": cachefs.private_sha(library),
            "deps": deps, "deps_digest": _deps_digest(deps),
            "shadow_watch": _shadow_watch(depfile, commands[0], gen, _watched_roots(tree)),
        }
        (tmp / "manifest.json").write_text(json.dumps(manifest, indent=1))
        cachefs.make_private(tmp / "manifest.json")
        final = _place(tmp, root, f"{key}-{manifest['deps_digest']}")
        return Built(library=final / library.name, manifest=manifest)
    except OSError as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        if cachefs._inside(os.path.abspath(str(exc.filename or "")), str(root)) or exc.errno in (
                errno.ENOSPC, errno.EDQUOT, errno.EROFS):
            raise _cache_error(root, f"{exc.filename or root}: {exc.strerror}",
                               "a cache folder you own, writable, with room for a build") from None
        raise
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _place(tmp: Path, root: Path, name: str) -> Path:
    """Rename the finished build folder to ``name``, or ``name-<n>`` when an entry that did not pass the
    checks (truncated, another user's) holds the name: nothing the build did not write is removed."""
    for n in range(100):
        final = root / (name if n == 0 else f"{name}-{n}")
        try:
            os.rename(tmp, final)
            return final
        except OSError as exc:
            if exc.errno not in (errno.EEXIST, errno.ENOTEMPTY, errno.ENOTDIR, errno.EISDIR):
                raise
    raise _cache_error(root, f"100 entries named {name}* that are not usable", "a cache folder with fewer broken entries")
