"""The compiled planning code of one xLLM tree, called through ctypes.

``load`` builds (or finds in the cache) the tree's library and opens it once per process.
``Native.call`` sends one request; a glog CHECK that fires inside the tree's code comes back as
the CHECK's file and line, and ``refusal`` turns it into the ``UserError`` naming the harness
field that CHECK guards (``CHECK_RULES``: matched on the CHECK's own source text).
"""

from __future__ import annotations

import ctypes
import json
import os
import re
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Optional

from implementations.errors import ConfigError, PlanError, UserError
from implementations.xllm_native import build
from implementations.xllm_native import manifest as manifest_mod

CHECK_RULES: tuple[tuple[str, str, str], ...] = (
    (r"layerwise_split_size\s*,\s*1\b", "layerwise.split_size", "a whole number >= 1"),
    (r"group_size_\s*,\s*0|local_rank_\s*>=", "layerwise.split_size", "a whole number >= 1"),
    (r"dp_size\(\)\s*,\s*1\b", "parallel.dp_size", "a whole number >= 1"),
    (r"global_world_size\s*%\s*dp_cp_size", "parallel.world_size", "a multiple of dp_size * cp_size"),
    (r"global_world_size\s*,\s*0\b", "parallel.world_size", "a whole number >= 1"),
    (r"is_layerwise_split_supported_model", "model.model_type", "a model type the tree splits"),
    (r"attn_tp_size\s*%\s*layerwise_split_size", "layerwise.split_size", "a divisor of the attention TP size"),
    (r"host_blocks_factor", "cache.host_blocks_factor", "<= 1 (host cache off) with the split"),
    (r"kv_split_size_effective", "parallel.kv_split_size", "1 (no KV split) with the split"),
    (r"cp_size\(\)\s*,\s*1\b", "parallel.cp_size", "1 (no context parallel) with the split"),
    (r"requested_blocks\s*,\s*max_blocks", "cache.max_linear_state_cache_slots",
     "at most the linear-state slots the budget holds"),
    (r"draft_full_attention_slot_size\s*,\s*target_full_attention_slot_size", "draft",
     "a draft slot <= the target's, or draft.body_tp1=true"),
    (r"block_size\(\)\s*,\s*draft_kv_cache_cap\.block_size", "cache.block_size", "the target's block size"),
    (r"common_block_count\s*,\s*std::numeric_limits", "model", "a model with a full-attention layer to split"),
    (r"linear_cache_size_in_bytes|available_full_cache_size_in_bytes", "cache.max_seqs_per_batch",
     "fewer sequences: the linear state must leave room for full-attention KV"),
    (r"common_block_count\s*,\s*0|n_blocks\(\)\s*,\s*0|n_blocks\s*,\s*0", "hardware.reserved_bytes_per_card",
     "a budget holding one block"),
    (r"cache_size_in_bytes(?:\(\))?\s*,\s*0\)", "cache.kv_budget_bytes", "a KV budget > 0"),
)
"""(pattern over the CHECK's condition, harness field it guards, what is allowed), first match wins."""
MASTER_ROLES = ("master", "layout")
"""CHECKs in these roles' files are startup rules (``ConfigError``); the rest are planning (``PlanError``)."""
PORT_MASTER_ROLES = ("validation",)
"""The same for a manifest's roles: a CHECK in the validation role's file is a startup rule."""


@dataclass(frozen=True, kw_only=True)
class Check:
    """A CHECK that fired in the tree's code: where, its condition as written, glog's message."""

    file: str
    line: int
    condition: str
    message: str

    @property
    def where(self) -> str:
        return f"{Path(self.file).name}:{self.line}"


def check_condition(file: str, line: int) -> str:
    """The CHECK statement's condition at ``file:line`` (the macro and its parenthesised arguments)."""
    try:
        lines = Path(file).read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return ""
    text = "\n".join(lines[max(line - 1, 0):line + 8])
    m = re.search(r"\b(?:P?CHECK\w*|LOG)\s*\(", text)
    if m is None:
        return text.splitlines()[0].strip() if text else ""
    depth, i = 0, m.end() - 1
    for i in range(m.end() - 1, len(text)):
        depth += {"(": 1, ")": -1}.get(text[i], 0)
        if depth == 0:
            break
    return " ".join(text[m.start():i + 1].split())


def rule_of(check: Check) -> tuple[str, str]:
    """(field, allowed) of the CHECK; ``implementation`` for a CHECK no rule names."""
    for pattern, name, allowed in CHECK_RULES:
        if re.search(pattern, check.condition):
            return name, allowed
    return "implementation", "a configuration the tree's CHECKs accept"


def field_of(check: Check) -> Optional[str]:
    name = rule_of(check)[0]
    return None if name == "implementation" else name


class Native:
    """One loaded library; calls are serialised (the binding keeps global state)."""

    def __init__(self, tree: build.TreeMap, built: build.Built) -> None:
        self.tree = tree
        self.built = built
        self._lib = ctypes.CDLL(str(built.library))
        self._lib.lwsplit_call.restype = ctypes.c_char_p
        self._lib.lwsplit_call.argtypes = [ctypes.c_char_p]
        self._lock = threading.Lock()
        self.manifest: Optional[manifest_mod.Manifest] = tree.manifest
        self.why = ""

    def call(self, op: str, values: Mapping[str, object]) -> dict:
        """The reply to one request; raises ``UserError`` for a CHECK that fired."""
        lines = [f"op={op}"] + [f"{k}={_text(v)}" for k, v in values.items()]
        with self._lock:
            raw = self._lib.lwsplit_call("\n".join(lines).encode())
        reply = json.loads(raw.decode())
        if "check" in reply:
            c = reply["check"]
            raise self.refusal(Check(file=c["file"], line=c["line"], message=c["message"].strip(),
                                     condition=check_condition(c["file"], c["line"])))
        if "exception" in reply:
            raise PlanError("implementation", self.tree.root.name, "planning code that returns",
                            f"the compiled {op} threw: {reply['exception']}")
        return reply

    def refusal(self, check: Check) -> UserError:
        """The ``UserError`` for a CHECK: the field it guards, the CHECK's place and text."""
        name, allowed = rule_of(check)
        if self.tree.port:
            roles = [name for name, role in self.tree.manifest.roles.items()
                     if role.present and str(self.tree.root / role.file) == check.file]
            cls = ConfigError if roles and roles[0] in PORT_MASTER_ROLES else PlanError
        else:
            roles = [r for r in build.ROLES if str(self.tree.path(r)) == check.file]
            cls = ConfigError if roles and roles[0] in MASTER_ROLES else PlanError
        detail = f"CHECK at {check.where} `{check.condition}`"
        if check.message:
            detail += f": {check.message.splitlines()[-1]}"
        return cls(name, check.where, allowed, detail)


def _text(value: object) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, (list, tuple)):
        return ",".join(map(str, value))
    text = str(value)
    if "\n" in text:
        raise ValueError(f"a request value spans lines: {text!r}")
    return text


_LOADED: dict = {}
_LOAD_LOCK = threading.Lock()


def resolve(source_dir: Optional[str] = None, files: Optional[Mapping[str, str]] = None,
            manifest: Optional[str] = None) -> tuple[build.TreeMap, manifest_mod.Manifest, str]:
    """The tree to build, its manifest and why that manifest: ``manifest`` when given; upstream's
    when ``files`` re-point upstream's roles; else the shipped manifest whose ``detect`` fits the tree."""
    given = source_dir or os.environ.get(build.ENV_SOURCE) or None
    if manifest:
        m = manifest_mod.load(manifest)
        why = f"implementation.manifest={m.path}"
    elif files:
        m = manifest_mod.load(manifest_mod.SHIPPED_DIR / "upstream_494f293b5.yaml")
        why = "implementation.files re-point upstream's roles"
    else:
        if not given:
            raise UserError(build.FIELD, None,
                            f"an xLLM source tree: implementation.source_dir=<path> or ${build.ENV_SOURCE}")
        root = Path(str(given)).expanduser()
        if not root.is_dir():
            raise UserError(build.FIELD, str(given), "an existing folder holding an xLLM source tree")
        m, why = manifest_mod.for_tree(root.resolve())
    if m.compile == "upstream-cut":
        tree = build.tree_map(source_dir, {**m.files, **dict(files or {})})
        if manifest:
            manifest_mod.check_tree(m, tree.root)
        return build.TreeMap(root=tree.root, files=tree.files, manifest=m), m, why
    if not given:
        raise UserError(build.FIELD, None, f"the tree manifest {m.name} describes: "
                        f"implementation.source_dir=<path> or ${build.ENV_SOURCE}")
    return build.port_tree(m, Path(str(given))), m, why


def load(source_dir: Optional[str] = None, files: Optional[Mapping[str, str]] = None, *,
         cache: Optional[Path] = None, manifest: Optional[str] = None) -> Native:
    """The tree's library, built once per source and opened once per process."""
    tree, m, why = resolve(source_dir, files, manifest)
    memo = (str(tree.root), json.dumps(tree.files, sort_keys=True), str(m.path), str(cache))
    with _LOAD_LOCK:
        if memo not in _LOADED:
            manifest_mod.log.info("xllm_native: %s: manifest %s (%s)", tree.root, m.name, why)
            native = Native(tree, build.build(tree, root=cache))
            native.manifest, native.why = m, why
            _LOADED[memo] = native
        return _LOADED[memo]
