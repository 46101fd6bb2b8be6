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
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.util
import json
import os
import platform
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from implementations.errors import UserError

ABI = "lwsplit-native-1"
"""Bumped when the binding's protocol changes: part of every cache key."""
CPP_DIR = Path(__file__).resolve().parent / "cpp"
PROJECT_SOURCES = ("binding.cpp", "protocol.h", "engine_shim.h", "parallel_config.h")
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
    """The tree of a ``compile: sources`` manifest, after checking that it holds what the manifest names."""
    from implementations.xllm_native import manifest as manifest_mod

    root = root.expanduser().resolve()
    if not root.is_dir():
        raise UserError(FIELD, str(root), "an existing folder holding the tree the manifest describes")
    manifest_mod.check_tree(m, root)
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


def extract(text: str, name: str) -> Optional[tuple[int, str]]:
    """The definition of ``name`` in ``text`` (a function with its body, or a constant up to its ``;``):
    (its first line number, its text), or None when ``text`` defines no such name."""
    masked = _masked(text)
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


def defines(text: str, name: str) -> bool:
    """``text`` declares or defines ``name`` (a function, class or constant)."""
    masked = _masked(text)
    short = name.split("::")[-1]
    return re.search(r"(?<![\w])(?:class|struct)\s+" + re.escape(short) + r"\b", masked) is not None or \
        re.search(r"(?<![\w:])" + re.escape(name) + r"\s*[(=]", masked) is not None


# ---- the generated build folder ------------------------------------------------------------------


def _read(path: Path) -> str:
    return path.read_text(encoding="utf-8", errors="replace")


def _cut(tree: TreeMap, role: str, names: tuple[str, ...], optional: tuple[str, ...] = ()) -> str:
    """The definitions of ``names`` (each required) and of ``optional`` (when present), in file order."""
    path = tree.path(role)
    text = _read(path)
    out = []
    for name in names + optional:
        required = name in names
        found = extract(text, name)
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
        + f'#include "{CPP_DIR / "binding.cpp"}"\n')
    return unity


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


def compile_command(tree: TreeMap, gen: Path, unity: Path, out: Path) -> list[str]:
    includes, lib = torch_paths()
    dirs = [str(gen)] + [str(tree.root / d.strip()) for d in tree.files["include_dirs"].split(",") if d.strip()]
    cmd = [compiler(), *CXX_FLAGS, "-MD", "-MF", str(gen / "deps.d")]
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


def _compiler_id(cxx: str) -> bytes:
    try:
        return subprocess.run([cxx, "--version"], capture_output=True, check=False, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return b""


def source_key(tree: TreeMap) -> str:
    """Hash of what decides the build before the compiler runs: role files, the project's C++,
    the map, the compiler and its flags, the torch headers' location."""
    if tree.port:
        m = tree.manifest
        parts = [ABI.encode(), m.path.read_bytes(), str(tree.root).encode(), str(m.base_root()).encode()]
        parts += [p.read_bytes() for p in port_sources(tree)] + [(CPP_DIR / "protocol.h").read_bytes()]
        cxx = compiler()
        return _sha(*parts, cxx.encode(), _compiler_id(cxx), " ".join(PORT_FLAGS).encode())[:20]
    files = [tree.path(r) for r in ROLES] + list(tree.paths("support")) + list(tree.paths("utils_headers"))
    files += [tree.path("estimation").with_suffix(".h")]
    parts = [ABI.encode(), json.dumps(tree.files, sort_keys=True).encode(), str(tree.root).encode()]
    parts += [p.read_bytes() if p.is_file() else b"" for p in files]
    parts += [(CPP_DIR / s).read_bytes() for s in PROJECT_SOURCES]
    cxx = compiler()
    parts += [cxx.encode(), _compiler_id(cxx), " ".join(CXX_FLAGS).encode(), json.dumps(torch_paths()).encode()]
    return _sha(*parts)[:20]


def cache_root() -> Path:
    env = os.environ.get(ENV_CACHE)
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "lwsplit" / "native"


def _deps_digest(deps: dict) -> Optional[str]:
    """Hash of the recorded headers' current contents; None when one is gone."""
    parts = []
    for path in sorted(deps):
        try:
            parts.append(path.encode() + b"\0" + Path(path).read_bytes())
        except OSError:
            return None
    return _sha(*parts)[:12]


@dataclass(frozen=True, kw_only=True)
class Built:
    """A usable cache entry."""

    library: Path
    manifest: dict


def _valid_entry(entry: Path) -> Optional[Built]:
    try:
        manifest = json.loads((entry / "manifest.json").read_text())
    except (OSError, ValueError):
        return None
    library = entry / manifest.get("library", "")
    if not library.is_file() or _deps_digest(manifest.get("deps", {})) != manifest.get("deps_digest"):
        return None
    return Built(library=library, manifest=manifest)


def _find(root: Path, key: str) -> Optional[Built]:
    for entry in sorted(root.glob(f"{key}-*")):
        built = _valid_entry(entry)
        if built is not None:
            return built
    return None


def _parse_deps(text: str, tree_root: Path) -> dict:
    body = text.replace("\\\n", " ")
    paths = body.split(":", 1)[1].split() if ":" in body else []
    root = str(tree_root) + os.sep
    return {p: "" for p in sorted({str(Path(p).resolve()) for p in paths}) if p.startswith(root)}


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
    where = f"the tree {tree.root}"
    if str(m.glue_path) in first:
        role = _glue_role(m.glue_path, first)
        where = f"the glue {m.glue_path}" + (f" (role {role})" if role else "")
    else:
        for name, role in m.roles.items():
            if role.present and str(tree.root / role.file) in first:
                where = f"the {name} role ({tree.root / role.file})"
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


def build(tree: TreeMap, *, root: Optional[Path] = None) -> Built:
    """The cached library for ``tree``, building it once (under a lock) when no valid entry exists."""
    root = cache_root() if root is None else root
    key = source_key(tree)
    found = _find(root, key)
    if found is not None:
        return found
    root.mkdir(parents=True, exist_ok=True)
    with open(root / f"{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        found = _find(root, key)
        if found is not None:
            return found
        for stale in root.glob(f".tmp-{key}-*"):  # a build of this key killed midway: no one else holds the lock
            shutil.rmtree(stale, ignore_errors=True)
        return _build_locked(tree, root, key)


def _build_locked(tree: TreeMap, root: Path, key: str) -> Built:
    tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{key}-", dir=root))
    try:
        gen = tmp / "gen"
        gen.mkdir()
        unity = generate(tree, gen)
        library = tmp / "liblwsplit_native.so"
        commands = compile_commands(tree, gen, unity, library)
        started = time.monotonic()
        for cmd in commands:
            proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
            with open(tmp / "build.log", "a") as log:
                log.write(" ".join(cmd) + "\n" + proc.stdout + proc.stderr)
            if proc.returncode != 0:
                raise _compile_error(tree, proc.stdout + proc.stderr)
        if not library.is_file():
            raise _compile_error(tree, "(the compiler wrote no library)")
        if tree.port:  # one dependency list per object
            lists = [d.read_text().replace("\\\n", " ").split(":", 1)[-1] for d in sorted((gen / "obj").glob("*.d"))]
            (gen / "deps.d").write_text("objects: " + " ".join(lists) + "\n")
        deps = _parse_deps((gen / "deps.d").read_text(), tree.root)
        deps = {p: hashlib.sha256(Path(p).read_bytes()).hexdigest() for p in deps}
        manifest = {
            "abi": ABI, "source": str(tree.root), "files": tree.files, "key": key,
            "manifest": str(tree.manifest.path) if tree.manifest is not None else None,
            "compiler": _compiler_id(cmd[0]).decode(errors="replace").splitlines()[:1],
            "flags": list(PORT_FLAGS if tree.port else CXX_FLAGS), "command": cmd, "commands": len(commands), "seconds": round(time.monotonic() - started, 1),
            "built": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "machine": platform.machine(),
            "library": library.name, "deps": deps, "deps_digest": _deps_digest(deps),
        }
        (tmp / "manifest.json").write_text(json.dumps(manifest, indent=1))
        final = root / f"{key}-{manifest['deps_digest']}"
        os.rename(tmp, final)
        return Built(library=final / library.name, manifest=manifest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
