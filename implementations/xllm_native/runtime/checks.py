"""A glog CHECK that fired in a tree's code: its condition read from the tree's source, and the harness field
it guards (``CHECK_RULES``: matched on the CHECK's own source text)."""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

from contract.errors import ConfigError, PlanError, UserError
from implementations.xllm_native.build import cachefs
from implementations.xllm_native.tree.files import ROLES, TreeMap

CONTEXT_LINES = 8
"""Lines after a CHECK's own line that ``check_condition`` reads for a condition spanning lines."""
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
MESSAGE_RULES: tuple[tuple[str, str, str], ...] = (
    (r"(?i)\bKV Cache quantization\b.*\bonly supported\b|\bint8 KV cache\b.*\bnot supported\b",
     "cache.kv_cache_dtype", "auto: the tree's build has no int8 KV cache (upstream: MLU only, FEATURE 3)"),
    (r"(?i)\bIndexer cache INT8\b.*\bunsupported\b", "cache.indexer_cache_dtype",
     "auto: the tree's build has no int8 indexer cache (upstream: NPU and MLU only, FEATURE 3)"),
)
"""The same over glog's message, for a CHECK whose condition names nothing (``LOG(FATAL)``, ``CHECK(false)``),
tried after ``CHECK_RULES``."""
MASTER_ROLES = ("master", "layout")
"""CHECKs in these roles' files are startup rules (``ConfigError``); the rest are planning (``PlanError``)."""
PORT_MASTER_ROLES = ("validation",)
"""The same for a manifest's roles: a CHECK in the validation role's file is a startup rule."""


@dataclass(frozen=True, kw_only=True)
class Check:
    """A CHECK that fired in the tree's code: where, its condition as written, glog's message; ``unquoted``
    says why the condition could not be read (then it is empty)."""

    file: str
    line: int
    condition: str
    message: str
    unquoted: str = ""

    @property
    def where(self) -> str:
        return f"{Path(self.file).name}:{self.line}"


def check_condition(file: str, line: int, roots: Sequence[object]) -> tuple[str, str]:
    """(the CHECK statement's condition at ``file:line``: the macro and its parenthesised arguments, ""), or
    ("", why it is not quoted). The file name is the tree's to report (glog's ``__FILE__``, ``#line``), so
    only a regular file whose real path is inside ``roots`` (folders, or files: what the build compiled) is
    read: opened without blocking and without following a last link (a FIFO or device is never read),
    at most ``cachefs.MAX_SOURCE_BYTES``, and no further than the lines needed."""
    if not os.path.isabs(file) or "\0" in file:
        return "", f"{file!r} is not an absolute path"
    real = os.path.realpath(file)
    if not any(cachefs.inside(real, os.path.realpath(str(r))) for r in roots):
        return "", f"{file} is outside the tree and the build folder"
    try:
        fd = os.open(real, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        return "", f"{file}: {exc.strerror}"
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return "", f"{file} is not a regular file"
        want, limit = max(line, 1) + CONTEXT_LINES, cachefs.MAX_SOURCE_BYTES
        data, newlines = bytearray(), 0
        while newlines < want and len(data) < limit:
            chunk = os.read(fd, min(1 << 16, limit - len(data)))
            if not chunk:
                break
            data += chunk
            newlines += chunk.count(b"\n")
    except OSError as exc:
        return "", f"{file}: {exc.strerror}"
    finally:
        os.close(fd)
    if newlines < line and len(data) >= limit:
        return "", f"line {line} of {file} is not within its first {limit >> 20} MiB"
    lines = data.decode("utf-8", errors="replace").splitlines()
    text = "\n".join(lines[max(line - 1, 0):line + CONTEXT_LINES])
    m = re.search(r"\b(?:P?CHECK\w*|LOG)\s*\(", text)
    if m is None:
        return (text.splitlines()[0].strip() if text else ""), ""
    depth, i = 0, m.end() - 1
    for i in range(m.end() - 1, len(text)):
        depth += {"(": 1, ")": -1}.get(text[i], 0)
        if depth == 0:
            break
    return " ".join(text[m.start():i + 1].split()), ""


def rule_of(check: Check) -> tuple[str, str]:
    """(field, allowed) of the CHECK; ``implementation`` for a CHECK no rule names."""
    for pattern, name, allowed in CHECK_RULES:
        if re.search(pattern, check.condition):
            return name, allowed
    for pattern, name, allowed in MESSAGE_RULES:
        if re.search(pattern, check.message):
            return name, allowed
    return "implementation", "a configuration the tree's CHECKs accept"


def field_of(check: Check) -> Optional[str]:
    name = rule_of(check)[0]
    return None if name == "implementation" else name


def refusal(tree: TreeMap, check: Check) -> UserError:
    """The ``UserError`` for a CHECK that fired in ``tree``'s code: the field it guards, the CHECK's place and
    text; a ``ConfigError`` for a startup rule's file (``MASTER_ROLES``, ``PORT_MASTER_ROLES``), else a
    ``PlanError``."""
    name, allowed = rule_of(check)
    if tree.port:
        roles = [name for name, role in tree.manifest.roles.items()
                 if role.present and str(tree.root / role.file) == check.file]
        cls = ConfigError if roles and roles[0] in PORT_MASTER_ROLES else PlanError
    else:
        roles = [r for r in ROLES if str(tree.path(r)) == check.file]
        cls = ConfigError if roles and roles[0] in MASTER_ROLES else PlanError
    detail = (f"CHECK at {check.where} (its condition not quoted: {check.unquoted})" if check.unquoted
              else f"CHECK at {check.where} `{check.condition}`")
    if check.message:
        detail += f": {check.message.splitlines()[-1]}"
    return cls(name, check.where, allowed, detail)
