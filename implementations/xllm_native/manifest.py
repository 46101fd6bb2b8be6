"""Port manifests: which of a C++ tree's functions plays each role of the harness, and how to build it.

A manifest is a YAML file (``implementation.manifest=PATH``; docs/native.md has a worked example):

```yaml
name: my_port                       # shown in reports and logs
detect: {present: [core/runtime/worker_layerwise_init.cpp], absent: []}
include_dirs: [., core]             # relative to the tree's root
defines: [USE_ILU]
sources: [core/runtime/worker_layerwise_init.cpp, ...]   # each compiled on its own, then linked
glue: glue_my_port.cpp              # relative to the manifest: the C++ answering the harness's ops
roles:
  validation: {file: core/.../layerwise_split_layout.h, function: validate_layerwise_split_enablement}
  speculative: {absent: "the port has no SpeculativeEngine::calculate_kv_cache"}
  ...
```

Every role of ``ROLES`` is either played (``file`` + ``function``: the function must be defined in
that file) or marked ``absent`` with a reason. A role that is absent is never modelled: the
implementation raises ``AbsentRoleError`` where a test case needs it (``absent_error``). ``groups`` (the
function forming the split groups) may be left out of any manifest: it then reads as ``none`` (the groups are
read off the workers' masks, ``GROUPS_UNNAMED``); ``{base: <why>}`` gives it to the base manifest.
``worker_checks`` (the worker's start-up CHECKs, cut out of ``WorkerImpl::allocate_kv_cache_storage``) may be
left out too: it is then the base manifest's compiled cut where a base manifest is named, the tree's own cut in
an upstream-cut manifest, and absent in a port without a base (``WORKER_CHECKS_UNNAMED``). ``engine_options`` (the
option values the engine hands the estimation) likewise (``ENGINE_OPTIONS_UNNAMED``); ``allocation_checks`` (the
CHECKs of ``allocate_kv_caches`` refusing the split with sleep mode and xtensor) likewise
(``ALLOCATION_CHECKS_UNNAMED``).

``compile: upstream-cut`` (upstream's own manifest) keeps the build that cuts functions out of
upstream's big files (``build.generate``); its ``files`` map names each cut role's file.
``compile: sources`` (the default) compiles ``sources`` and the glue file, one object each.

``base`` names the engine the port is added to: another manifest (a shipped manifest's name such as
``upstream_494f293b5``, or a path to a ``.yaml``), whose tree is ``base_source_dir`` (relative to the
manifest), else ``implementation.base_source_dir``, else ``$LWSPLIT_XLLM_BASE_SRC``. Every role the port's
manifest leaves out (or marks ``{base: <why>}``) is then played by the base's compiled code, built as the
base's manifest builds it, in a library of its own (``native.load_base``); ``allocation.unsplit: base``
gives the worker the base's allocation while the split is off (flag off or s 1). A ``base`` that is a
folder keeps its older meaning: a base tree whose ``base_include_dirs`` and ``base_sources`` the port's
build adds.

A mistake gives one ``UserError`` naming the manifest, the key (``roles.ownership.function``)
and what is allowed. ``detect`` chooses the shipped manifest for a tree given alone (``for_tree``).
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from contract.bounded_inputs import loads_yaml, read_input_file
from contract.errors import PlanError, UserError
from implementations.xllm_native.tree.cut import defines
from implementations.xllm_native.tree.files import ALLOCATION_CHECKS_FUNCTION, WORKER_CHECKS_FUNCTION

log = logging.getLogger("lwsplit.native")

SHIPPED_DIR = Path(__file__).resolve().parent / "manifests"
FIELD = "implementation.manifest"

ROLES = {
    "validation": "startup validation",
    "ownership": "ownership mask",
    "layout": "master layout",
    "estimation": "block count and figures",
    "speculative": "draft capacity",
    "engine": "engine propagation",
    "worker": "worker init and allocation",
    "groups": "split groups",
    "worker_checks": "worker start-up checks",
    "engine_options": "engine option values",
    "allocation_checks": "allocation refusals of the split (sleep mode, xtensor)",
}
"""The harness's roles and what each stands for in an error (``the tree implements no <what>``)."""

WORKER_CHECKS_UNNAMED = ("the manifest names no worker start-up checks (the linear + indexer CHECK "
                         "WorkerImpl::allocate_kv_cache_storage runs) and no base manifest whose engine runs them")
"""``worker_checks`` (the CHECKs the engine's worker runs as it starts its KV cache) may be left out of any
manifest: with a base manifest it is the base's compiled cut (``{base: ...}``); in an upstream-cut manifest the
tree's own cut of ``files.worker_checks``; in a port without a base it reads as absent (``WORKER_CHECKS_UNNAMED``)."""

ENGINE_OPTIONS_FUNCTION = "LLMEngine::estimate_kv_cache_capacity"
ENGINE_OPTIONS_UNNAMED = ("the manifest names no engine computing the estimation's options (the local KV and linear "
                          "heads per TP rank, the attention TP size, the draft's TP-1 body and layer count: "
                          "LLMEngine's) and no base manifest whose engine computes them")
"""``engine_options`` (the option values the engine hands the estimation: upstream's ``LLMEngine`` constructor,
``init_model`` and ``estimate_kv_cache_capacity`` statements, ``WorkerImpl::get_num_layers`` for the draft) may be
left out of any manifest: with a base manifest it is the base's compiled cut (``{base: ...}``, a port has no engine
of its own for these); in an upstream-cut manifest the tree's own cut of ``files.engine_options``; in a port without
a base it reads as absent (``ENGINE_OPTIONS_UNNAMED``): every case needing an estimate fails naming the role."""
ALLOCATION_CHECKS_UNNAMED = ("the manifest names no allocation refusing the split with sleep mode or xtensor (the "
                             "CHECKs allocate_kv_caches runs) and no base manifest whose engine runs them")
"""``allocation_checks`` (the CHECKs of the worker's allocation that refuse the split with sleep mode and with
xtensor) may be left out of any manifest, as ``worker_checks`` may: the base's compiled cut with a base manifest, the
tree's own cut of ``files.allocation_checks`` in an upstream-cut manifest, absent in a port without a base."""

GROUPS_UNNAMED = ("the manifest names no function forming split groups: each worker's split rank is the one its "
                  "worker role takes, and the groups are read off the workers' masks")
"""``groups`` is the one role a manifest may leave out (with a base or without): it then reads as
``{none: GROUPS_UNNAMED}`` (the engine forms no split groups; what the workers do is what runs). ``{base: ...}``
leaves it to the base manifest's groups function."""

COMPILE_KINDS = ("sources", "upstream-cut")
TOP_KEYS = {
    "name": str, "description": str, "detect": dict, "compile": str, "include_dirs": list, "defines": list,
    "sources": list, "glue": str, "files": dict, "roles": dict, "base": str, "base_include_dirs": list,
    "base_sources": list, "tests": str, "allocation": dict, "base_source_dir": str,
}
REQUIRED = ("name", "roles")
ROLE_FORMS = "{file: ..., function: ...}, {absent: <why>} or {none: <why>} (or, with a base manifest, {base: <why>})"
"""A role's forms: played by a function, absent from the tree, never called by the engine, or the base's."""
_DEFINE = re.compile(r"^[A-Za-z_]\w*(=[^\s]*)?$")


class AbsentRoleError(PlanError):
    """A test case needs a role the tree's manifest marks absent: a failed case, never a model of it."""

    def __init__(self, manifest: str, role: str, reason: str = "", *, uncalled: bool = False) -> None:
        what = ROLES.get(role, "KV-cache allocation")
        if uncalled:
            detail = f"the engine's start-up path calls no {what}: manifest role `{role}` is none"
        else:
            detail = f"the tree implements no {what}: manifest role `{role}` is absent"
        if reason:
            detail += f"; {reason}"
        super().__init__("implementation", manifest, f"a tree implementing manifest role `{role}`", detail)
        self.role = role


@dataclass(frozen=True, kw_only=True)
class Role:
    """One role: the tree's file and function playing it, why it is absent, or why the engine calls nothing
    for it (``none``: for validation, the tree accepts every configuration)."""

    name: str
    file: str = ""
    function: str = ""
    absent: str = ""
    base: str = ""
    """Why the base manifest's code plays this role (``{base: <why>}``, or the role left out of a manifest
    with a base manifest); empty: the port plays it, or it is absent or never called."""
    none: str = ""
    """Why the engine's start-up path calls no function for this role (the tree may still define one)."""
    split_only: bool = False
    """``allocation`` only: the engine calls the function only with the split active (s > 1); with the flag
    off or s 1 it runs its ordinary allocation, which the port leaves to the engine around it."""

    @property
    def present(self) -> bool:
        """The port's own function plays the role."""
        return not self.absent and not self.none and not self.base

    @property
    def state(self) -> str:
        """``played``, ``absent``, ``none`` (never called) or ``base`` (the base manifest's code plays it)."""
        return "absent" if self.absent else "none" if self.none else "base" if self.base else "played"


@dataclass(frozen=True, kw_only=True)
class TensorBuild:
    """What the tensor library compiles: the tree's files (``sources``; ``base_sources`` from the base tree),
    the glue answering ``op=allocate`` through ``cpp/alloc_protocol.h``, the project's shim folder (first
    on the include path: what the files include but the allocation never reaches), include folders and
    defines (the manifest's own when not given)."""

    sources: tuple[str, ...]
    glue: str
    base_sources: tuple[str, ...] = ()
    shims: str = ""
    include_dirs: tuple[str, ...] = ()
    defines: tuple[str, ...] = ()
    unity: bool = False
    """The glue ``#include``s the sources itself: one translation unit (torch's headers parsed once), the
    sources still checked and hashed; else each source is its own object."""
    layout_defines: tuple[tuple[str, tuple[str, ...]], ...] = ()
    """Per KV layout a hardware profile may have (``heads_major``, ``tokens_major``), the defines added for
    that layout's build (upstream: ``USE_ILU`` gives the heads-major layout); empty: one build for every
    layout (the tree's code picks its layout)."""

    def layouts(self) -> tuple[str, ...]:
        return tuple(layout for layout, _ in self.layout_defines)

    def defines_for(self, kv_layout: Optional[str] = None) -> tuple[str, ...]:
        """The defines of the build for ``kv_layout`` (None: the first layout listed, the default build)."""
        if not self.layout_defines:
            return self.defines
        chosen = dict(self.layout_defines).get(kv_layout) if kv_layout is not None else self.layout_defines[0][1]
        return self.defines + (chosen or ())


@dataclass(frozen=True, kw_only=True)
class Manifest:
    """A validated manifest. Paths are as written; ``resolve`` makes them absolute against a tree."""

    name: str
    path: Path
    description: str = ""
    detect_present: tuple[str, ...] = ()
    detect_absent: tuple[str, ...] = ()
    compile: str = "sources"
    include_dirs: tuple[str, ...] = ()
    defines: tuple[str, ...] = ()
    sources: tuple[str, ...] = ()
    glue: str = ""
    files: dict = field(default_factory=dict)
    roles: dict = field(default_factory=dict)
    base: str = ""
    base_include_dirs: tuple[str, ...] = ()
    base_sources: tuple[str, ...] = ()
    tests: str = ""
    base_manifest: Optional[Manifest] = None
    """``base`` naming a manifest: that manifest, whose compiled code plays every role marked ``base``."""
    base_source_dir: str = ""
    """The base manifest's tree as the manifest names it (``base_source_dir``; relative to the manifest)."""
    unsplit_allocation: str = "port"
    """``allocation.unsplit``: who allocates while the split is off (flag off or s 1): ``port`` (the
    manifest's ``allocation``) or ``base`` (the base manifest's allocation, as the engine runs it)."""
    allocation: Optional[Role] = None
    """The tree's own allocation (glue op ``allocate``): the worker holds the tensors it returns. None:
    the harness allocates the tree's mask (the worker role still decides the mask)."""
    tensors: Optional[TensorBuild] = None
    """``allocation.torch: true``: the allocation is compiled against torch into its own library, loaded in
    the rank process, and hands the rank its tensors (``tensor_lib``); None: the allocation (if any) runs
    in the planning library's host and returns no tensor."""

    def role(self, name: str) -> Role:
        return self.roles[name]

    def present(self, name: str) -> bool:
        return self.roles[name].present

    def from_base(self, name: str) -> bool:
        """The base manifest's compiled code plays role ``name``."""
        return bool(self.roles[name].base)

    def absent_error(self, name: str) -> AbsentRoleError:
        role = self.roles[name]
        return AbsentRoleError(self.name, name, role.absent or role.none, uncalled=bool(role.none))

    def require(self, name: str) -> None:
        """Raise ``AbsentRoleError`` when neither the tree nor its base plays role ``name`` (a base role is
        checked against the base's manifest where it is called: ``native.Native.for_role``)."""
        if not self.present(name) and not self.from_base(name):
            raise self.absent_error(name)

    @property
    def glue_path(self) -> Path:
        return (self.path.parent / self.glue).resolve()

    def beside(self, rel: str) -> Path:
        """A path the manifest names relative to itself (a glue file, a shim folder)."""
        return (self.path.parent / rel).resolve()

    def base_root(self) -> Optional[Path]:
        """The base tree folder of the older ``base`` (headers and ``base_sources``); None with a base manifest."""
        if not self.base or self.base_manifest is not None:
            return None
        p = Path(self.base).expanduser()
        return (p if p.is_absolute() else self.path.parent / p).resolve()


def _err(path: Path, key: str, value: object, allowed: str, detail: str = "") -> UserError:
    return UserError(f"{FIELD}={path}: {key}", value, allowed, detail)


def _strings(path: Path, key: str, value: object) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise _err(path, key, value, "a list of non-empty strings")
    return tuple(v.strip() for v in value)


MAX_MANIFEST_BYTES = 1 << 20
"""The largest manifest read (the shipped ones are about 3 KiB): a larger file is refused unread."""


def load(path: object) -> Manifest:
    """The manifest at ``path``, checked against the schema (not yet against a tree: ``check_tree``)."""
    p = Path(str(path)).expanduser()
    if not p.is_file():
        raise UserError(FIELD, str(path), "a YAML manifest file (docs/native.md: writing a manifest)")
    p = p.resolve()
    where = f"{FIELD}={p}"  # bounded: a file over the limit unread, nesting and aliases counted, each key once
    data = loads_yaml(read_input_file(p, FIELD, max_bytes=MAX_MANIFEST_BYTES), where, p.name, unique_keys=True)
    if not isinstance(data, dict):
        raise _err(p, "(top level)", type(data).__name__, f"a mapping with keys {', '.join(TOP_KEYS)}")
    p = p.resolve()
    for key in data:
        if key not in TOP_KEYS:
            raise _err(p, str(key), data[key], f"a key of {', '.join(TOP_KEYS)}")
        if not isinstance(data[key], TOP_KEYS[key]):
            raise _err(p, key, data[key], f"a {TOP_KEYS[key].__name__}")
    for key in REQUIRED:
        if key not in data:
            raise _err(p, key, None, "given (required)")
    kind = data.get("compile", "sources")
    if kind not in COMPILE_KINDS:
        raise _err(p, "compile", kind, " or ".join(COMPILE_KINDS))
    detect = data.get("detect", {})
    for key in detect:
        if key not in ("present", "absent"):
            raise _err(p, f"detect.{key}", detect[key], "present or absent (lists of paths in the tree)")
    defines = _strings(p, "defines", data.get("defines", []))
    for d in defines:
        if not _DEFINE.match(d):
            raise _err(p, "defines", d, "NAME or NAME=VALUE (a C++ macro)")
    roles = {}
    given = data["roles"]
    base_manifest = _base_manifest(p, data)
    for name in given:
        if name not in ROLES:
            raise _err(p, f"roles.{name}", given[name], f"a role of {', '.join(ROLES)}")
    for name in ROLES:
        if name == "groups" and name not in given:
            roles[name] = Role(name=name, none=GROUPS_UNNAMED)
            continue
        if name not in given and base_manifest is not None:
            roles[name] = Role(name=name, base=f"left to the base {base_manifest.name}")
            continue
        if name == "worker_checks" and name not in given:  # upstream-cut: the tree's own cut; a port: absent
            roles[name] = Role(name=name, function=WORKER_CHECKS_FUNCTION) if kind == "upstream-cut" else \
                Role(name=name, absent=WORKER_CHECKS_UNNAMED)
            continue
        if name == "engine_options" and name not in given:  # upstream-cut: the tree's own cut; a port: absent
            roles[name] = Role(name=name, function=ENGINE_OPTIONS_FUNCTION) if kind == "upstream-cut" else \
                Role(name=name, absent=ENGINE_OPTIONS_UNNAMED)
            continue
        if name == "allocation_checks" and name not in given:  # as worker_checks: the tree's own cut, or absent
            roles[name] = Role(name=name, function=ALLOCATION_CHECKS_FUNCTION) if kind == "upstream-cut" else \
                Role(name=name, absent=ALLOCATION_CHECKS_UNNAMED)
            continue
        if name not in given:
            raise _err(p, f"roles.{name}", None, ROLE_FORMS,
                       "every role is either played or marked absent (or, with a base manifest, left to it)")
        spec = given[name]
        if not isinstance(spec, dict) or not spec:
            raise _err(p, f"roles.{name}", spec, ROLE_FORMS)
        for key in spec:
            if key not in ("file", "function", "absent", "none", "base"):
                raise _err(p, f"roles.{name}.{key}", spec[key], "file, function, absent, none or base")
        unplayed = [key for key in ("absent", "none", "base") if key in spec]
        if unplayed:
            key = unplayed[0]
            if len(spec) > 1:
                raise _err(p, f"roles.{name}", spec, f"either {key} or file + function, not both")
            if not isinstance(spec[key], str) or not spec[key].strip():
                raise _err(p, f"roles.{name}.{key}", spec[key], "a reason (text)")
            if key == "base" and base_manifest is None:
                raise _err(p, f"roles.{name}.base", spec[key], "a manifest whose base names a manifest "
                           "(base: upstream_494f293b5, or a path to a .yaml)")
            roles[name] = Role(name=name, **{key: spec[key].strip()})
            continue
        for key in ("file", "function"):
            if not isinstance(spec.get(key), str) or not spec[key].strip():
                raise _err(p, f"roles.{name}.{key}", spec.get(key), "a non-empty string")
        roles[name] = Role(name=name, file=spec["file"].strip(), function=spec["function"].strip())
    if kind == "sources" and not data.get("glue"):
        raise _err(p, "glue", None, "a C++ glue file (relative to the manifest) answering the harness's ops")
    if kind == "sources" and not data.get("sources"):
        raise _err(p, "sources", None, "a list of the tree's .cpp files to compile")
    allocation, tensors = _allocation(p, data)
    unsplit = (data.get("allocation") or {}).get("unsplit", "port")
    if unsplit not in ("port", "base") or (unsplit == "base" and base_manifest is None):
        raise _err(p, "allocation.unsplit", unsplit, "port, or base with a base manifest (base: upstream_494f293b5)",
                   "who allocates the worker's caches while the split is off (flag off or s 1)")
    if base_manifest is None:
        for key in ("base_source_dir",):
            if key in data:
                raise _err(p, key, data[key], "only with a base manifest (base: upstream_494f293b5, or a .yaml path)")
    else:
        for key in ("base_sources", "base_include_dirs"):
            if key in data:
                raise _err(p, key, data[key], "only with a base tree folder (base: <folder>)",
                           f"the base manifest {base_manifest.name} builds its own sources")
    files = data.get("files", {})
    if not all(isinstance(v, str) for v in files.values()):
        raise _err(p, "files", files, "a mapping of role to path")
    return Manifest(
        name=data["name"], path=p, description=data.get("description", ""),
        detect_present=_strings(p, "detect.present", detect.get("present", [])),
        detect_absent=_strings(p, "detect.absent", detect.get("absent", [])),
        compile=kind, include_dirs=_strings(p, "include_dirs", data.get("include_dirs", [])),
        defines=defines, sources=_strings(p, "sources", data.get("sources", [])), glue=data.get("glue", ""),
        files=dict(files), roles=roles, base=data.get("base", ""),
        base_include_dirs=_strings(p, "base_include_dirs", data.get("base_include_dirs", [])),
        base_sources=_strings(p, "base_sources", data.get("base_sources", [])), tests=data.get("tests", ""),
        allocation=allocation, tensors=tensors, base_manifest=base_manifest,
        base_source_dir=data.get("base_source_dir", "").strip(), unsplit_allocation=unsplit,
    )


def _base_manifest(p: Path, data: dict) -> Optional[Manifest]:
    """The manifest ``base`` names (a shipped manifest's name, or a ``.yaml`` path relative to ``p``), else None
    (no base, or a base tree folder)."""
    base = data.get("base", "").strip()
    if not base:
        return None
    shipped_path = SHIPPED_DIR / f"{base}.yaml"
    if "/" not in base and not base.endswith((".yaml", ".yml")):
        if shipped_path.is_file():
            target = shipped_path
        elif (p.parent / base).is_dir():
            return None
        else:
            raise _err(p, "base", base, f"a shipped manifest ({', '.join(sorted(q.stem for q in SHIPPED_DIR.glob('*.yaml')))}), "
                       "a path to a manifest (.yaml) or a base tree folder")
    else:
        target = (p.parent / Path(base).expanduser()).resolve()
        if target.is_dir():
            return None
        if not target.is_file():
            raise _err(p, "base", base, "a shipped manifest, a manifest file (.yaml) or a base tree folder",
                       f"{target} is missing")
    if target.resolve() == p:
        raise _err(p, "base", base, "another manifest", "a manifest cannot be its own base")
    m = load(target)
    if m.base_manifest is not None:
        raise _err(p, "base", base, "a manifest without a base manifest of its own",
                   f"{m.name} names {m.base_manifest.name} as its base: one level of base only")
    return m


ALLOCATION_KEYS = ("file", "function", "torch", "sources", "base_sources", "glue", "shims", "include_dirs", "defines",
                   "unity", "layout_defines", "split_only", "none", "unsplit")
KV_LAYOUTS = ("heads_major", "tokens_major")
"""The KV layouts a hardware profile names (``hardware.kv_layout``), the keys of ``allocation.layout_defines``."""


def _allocation(p: Path, data: dict) -> tuple[Optional[Role], Optional[TensorBuild]]:
    """The ``allocation`` block: the tree's function, and with ``torch: true`` how its tensor library is built."""
    if "allocation" not in data:
        return None, None
    spec = data["allocation"]
    for key in spec:
        if key not in ALLOCATION_KEYS:
            raise _err(p, f"allocation.{key}", spec[key], f"a key of {', '.join(ALLOCATION_KEYS)}")
    if "none" in spec:  # the engine's start-up path calls no allocation of the tree's (with the split on)
        if set(spec) - {"none", "unsplit"} or not isinstance(spec["none"], str) or not spec["none"].strip():
            raise _err(p, "allocation", spec, "{none: <why>} (with unsplit: base at most), or {file: ..., function: ...}")
        return Role(name="allocation", none=spec["none"].strip()), None
    for key in ("file", "function"):
        if not isinstance(spec.get(key), str) or not spec[key].strip():
            raise _err(p, f"allocation.{key}", spec.get(key), "a non-empty string")
    split_only = spec.get("split_only", False)
    if not isinstance(split_only, bool):
        raise _err(p, "allocation.split_only", split_only, "true or false")
    role = Role(name="allocation", file=spec["file"].strip(), function=spec["function"].strip(), split_only=split_only)
    torch_ = spec.get("torch", False)
    if not isinstance(torch_, bool):
        raise _err(p, "allocation.torch", torch_, "true or false")
    extra = [k for k in ("sources", "base_sources", "glue", "shims", "include_dirs", "defines", "unity",
                         "layout_defines") if k in spec]
    if not torch_:
        if extra:
            raise _err(p, f"allocation.{extra[0]}", spec[extra[0]], "only with allocation.torch: true",
                       "without torch the allocation runs in the planning library, built from the manifest's sources")
        return role, None
    for key in ("sources", "glue"):
        if key not in spec:
            raise _err(p, f"allocation.{key}", None, "given (required with allocation.torch: true)")
    if not isinstance(spec["glue"], str) or not spec["glue"].strip():
        raise _err(p, "allocation.glue", spec["glue"], "a C++ file relative to the manifest")
    unity = spec.get("unity", False)
    if not isinstance(unity, bool):
        raise _err(p, "allocation.unity", unity, "true or false")
    shims = spec.get("shims", "")
    if not isinstance(shims, str):
        raise _err(p, "allocation.shims", shims, "a folder relative to the manifest")
    defines = _strings(p, "allocation.defines", spec.get("defines", list(data.get("defines", []))))
    for d in defines:
        if not _DEFINE.match(d):
            raise _err(p, "allocation.defines", d, "NAME or NAME=VALUE (a C++ macro)")
    by_layout = spec.get("layout_defines", {})
    if not isinstance(by_layout, dict):
        raise _err(p, "allocation.layout_defines", by_layout, f"a mapping of {' and/or '.join(KV_LAYOUTS)} to lists of defines")
    layout_defines = []
    for layout, listed in by_layout.items():
        if layout not in KV_LAYOUTS:
            raise _err(p, f"allocation.layout_defines.{layout}", listed, f"a key of {', '.join(KV_LAYOUTS)}")
        values = _strings(p, f"allocation.layout_defines.{layout}", listed if listed is not None else [])
        for d in values:
            if not _DEFINE.match(d):
                raise _err(p, f"allocation.layout_defines.{layout}", d, "NAME or NAME=VALUE (a C++ macro)")
        layout_defines.append((layout, values))
    return role, TensorBuild(
        sources=_strings(p, "allocation.sources", spec["sources"]), glue=spec["glue"].strip(),
        base_sources=_strings(p, "allocation.base_sources", spec.get("base_sources", [])), shims=shims.strip(),
        include_dirs=_strings(p, "allocation.include_dirs", spec.get("include_dirs", list(data.get("include_dirs", [])))),
        defines=defines, unity=unity, layout_defines=tuple(layout_defines))


def check_tree(m: Manifest, root: Path) -> None:
    """``UserError`` for the first thing the manifest names that the tree lacks: a source, an include
    folder, a role's file, a role's function (defined in its file: a call or a declaration is not one), the glue file."""
    base = m.base_root()
    if m.base and m.base_manifest is None and (base is None or not base.is_dir()):
        raise _err(m.path, "base", m.base, "an existing folder (the base tree, relative to the manifest)")
    for key, items, under in (("sources", m.sources, root), ("include_dirs", m.include_dirs, root),
                              ("base_sources", m.base_sources, base), ("base_include_dirs", m.base_include_dirs, base)):
        for rel in items:
            target = (under or root) / rel
            ok = target.is_dir() if key.endswith("include_dirs") else target.is_file()
            if not ok:
                raise _err(m.path, key, rel, f"{'folders' if key.endswith('dirs') else 'files'} of {under or root}",
                           f"{target} is missing")
    if m.compile == "sources" and not m.glue_path.is_file():
        raise _err(m.path, "glue", m.glue, "a C++ file relative to the manifest", f"{m.glue_path} is missing")
    named = [(f"roles.{name}", role) for name, role in m.roles.items() if role.present and role.file]
    if m.allocation is not None and m.allocation.present:
        named.append(("allocation", m.allocation))
    for key, role in named:
        path = root / role.file
        if not path.is_file():
            raise _err(m.path, f"{key}.file", role.file, f"a file of {root}", f"{path} is missing")
        if not defines(path.read_text(encoding="utf-8", errors="replace"), role.function):
            raise _err(m.path, f"{key}.function", role.function, f"a function {role.file} defines",
                       f"{role.function} not found in {path}")
    check_tensors(m, root)


def check_tensors(m: Manifest, root: Path) -> None:
    """``UserError`` for the first file of the allocation's torch build (``allocation.torch``) the tree or the
    project lacks: its sources, include folders, glue and shim folder."""
    if m.tensors is None:
        return
    base = m.base_root()
    t = m.tensors
    for key, items, under in (("allocation.sources", t.sources, root), ("allocation.base_sources", t.base_sources, base),
                              ("allocation.include_dirs", t.include_dirs, root)):
        for rel in items:
            target = (under or root) / rel
            if not (target.is_dir() if key.endswith("dirs") else target.is_file()):
                raise _err(m.path, key, rel, f"{'folders' if key.endswith('dirs') else 'files'} of {under or root}",
                           f"{target} is missing")
    if not m.beside(t.glue).is_file():
        raise _err(m.path, "allocation.glue", t.glue, "a C++ file relative to the manifest",
                   f"{m.beside(t.glue)} is missing")
    if t.shims and not m.beside(t.shims).is_dir():
        raise _err(m.path, "allocation.shims", t.shims, "a folder relative to the manifest",
                   f"{m.beside(t.shims)} is missing")


def shipped() -> list[Manifest]:
    """The manifests the project ships, most specific detection first."""
    found = [load(p) for p in sorted(SHIPPED_DIR.glob("*.yaml"))]
    return sorted(found, key=lambda m: -(len(m.detect_present) + len(m.detect_absent)))


TREE_MANIFEST = "lwsplit-manifest.yaml"
"""A manifest a tree carries at its root: used for the tree given alone, before the shipped ones."""


PORT_SEARCH_DEPTH = 2
"""How many folders below a tree given alone a port's files are looked for (an xLLM fork carries a port's
``core/`` under ``xllm/``)."""
MAX_SEARCHED_FOLDERS = 4096


def _folders(root: Path) -> list[Path]:
    """``root``, then its folders ``PORT_SEARCH_DEPTH`` deep (breadth first, by name; links and hidden ones not
    followed), at most ``MAX_SEARCHED_FOLDERS``."""
    found, level = [root], [root]
    for _ in range(PORT_SEARCH_DEPTH):
        below = []
        for folder in level:
            try:
                below += sorted(p for p in folder.iterdir()
                                if not p.name.startswith(".") and p.is_dir() and not p.is_symlink())
            except OSError:
                continue
        found += below[:MAX_SEARCHED_FOLDERS - len(found)]
        level = below
    return found


def _not_that_tree(m: Manifest, root: Path) -> str:
    """Why ``root``, which has ``m``'s detect files, is still not the tree ``m`` describes (a source missing, a
    role's function not defined in its file); "" when it is."""
    for rel in m.sources:
        if not (root / rel).is_file():
            return f"it has no {rel} (sources)"
    for name, role in m.roles.items():
        if not (role.present and role.file):
            continue
        path = root / role.file
        if not path.is_file():
            return f"it has no {role.file} (roles.{name})"
        if not defines(path.read_text(encoding="utf-8", errors="replace"), role.function):
            return f"{role.file} does not define {role.function} (roles.{name})"
    return ""


def _has_files(m: Manifest, root: Path) -> bool:
    return bool(m.detect_present) and all((root / p).exists() for p in m.detect_present)


def for_tree(root: Path) -> tuple[Manifest, str, Path]:
    """The manifest for a tree given alone, why, and the tree's root: the manifest the tree carries
    (``TREE_MANIFEST`` at its root); else a shipped port manifest (``compile: sources``) whose ``detect`` files
    are present (others absent) at ``root`` or a folder up to ``PORT_SEARCH_DEPTH`` below it, and whose sources
    and role functions the tree has (most specific first): a tree holding a port's files is that port wherever
    they sit, even beside upstream's files; else an upstream-cut manifest fitting ``root`` likewise. A tree
    with a port's files that no port manifest fits is refused, saying why each did not."""
    own = root / TREE_MANIFEST
    if own.is_file():
        return load(own), f"the tree carries {TREE_MANIFEST}", root
    manifests = shipped()
    tried, port_files = [], []
    ports = [m for m in manifests if m.compile == "sources"]
    for where in _folders(root):
        for m in ports:
            if not _has_files(m, where):
                continue
            at = "" if where == root else f" at {where.relative_to(root)}/"
            port_files.append(f"{', '.join(m.detect_present)}{at}")
            extra = [p for p in m.detect_absent if (where / p).exists()]
            why_not = f"it has {', '.join(extra)}" if extra else _not_that_tree(m, where)
            if not why_not:
                why = f"it has {', '.join(m.detect_present)}{at}" + (
                    f" and no {', '.join(m.detect_absent)}" if m.detect_absent else "")
                why += ", and the manifest's sources and role functions"
                return m, why, where
            tried.append(f"{m.name}{at}: its detect files are there, but {why_not}")
    if not port_files:
        for m in manifests:
            if m.compile == "sources":
                continue
            missing = [p for p in m.detect_present if not (root / p).exists()]
            extra = [p for p in m.detect_absent if (root / p).exists()]
            why_not = f"needs {', '.join(missing)}" if missing else f"it has {', '.join(extra)}" if extra \
                else _not_that_tree(m, root)
            if m.detect_present and not why_not:
                return m, f"it has {', '.join(m.detect_present)}, and the manifest's role functions", root
            tried.append(f"{m.name}: {why_not or 'it names no detect files'}")
    else:
        tried.insert(0, f"a port's files are there ({'; '.join(port_files)}), so no upstream-cut manifest applies")
    raise UserError("implementation.source_dir", str(root), "a tree one shipped manifest fits, or "
                    "implementation.manifest=PATH (docs/native.md: writing a manifest)", "; ".join(tried))
