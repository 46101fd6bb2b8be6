"""The compiled planning code of one xLLM tree, called in a child process.

``load`` builds (or finds in the cache) the tree's library, once per source and process; it does
not open it. ``Native.call`` sends one request to a host process (``host.py``) that has the library
open: the tree's code never runs in the process that asks, so a tree that exits, crashes, loops or
prints ends or stalls the host, and the caller gets an ``ImplementationFailure`` saying which, with
the host's last output, within the call's time limit. A glog CHECK that fires inside the tree's
code comes back as the CHECK's file and line, and ``refusal`` turns it into the ``UserError`` naming
the harness field that CHECK guards (``checks``, over ``contract.upstream_checks``: matched on the CHECK's own
source text).
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Mapping, Optional

from contract.errors import ImplementationFailure, PlanError, UserError, clip
from implementations.xllm_native import manifest as manifest_mod
from implementations.xllm_native.build import commands, library
from implementations.xllm_native.build.cache import Built
from implementations.xllm_native.build.deps import watched_roots
from implementations.xllm_native.runtime import tensor_lib
from implementations.xllm_native.runtime.checks import Check, check_condition, refusal
from implementations.xllm_native.runtime.host_client import Host
from implementations.xllm_native.runtime.replies import reply_object
from implementations.xllm_native.tree.facts import TreeFacts, facts_of
from implementations.xllm_native.tree.files import TreeMap
from implementations.xllm_native.tree.resolve import ENV_BASE_SOURCE as ENV_BASE_SOURCE  # impl.py's names for them
from implementations.xllm_native.tree.resolve import base_error, resolve, resolve_base
from implementations.xllm_native.tree.resolve import base_missing_reason as base_missing_reason

DEFAULT_TIMEOUT_S = 60.0
"""A call's limit when the caller gives none (``runner.timeout_s``'s default)."""
MAX_PARKED_THREADS = 256
"""CHECKs a host answers before it is replaced: each parks its call's thread for good, about 30 KiB resident (the
pages its stack touched, glog's message) and its stack's address space (8 MiB, not resident). Replacing a host
costs a Python start and a ``dlopen`` (about 60 ms of CPU): exploring a tree that refuses one configuration in
two paid that every 64 CHECKs, more than the tree's own code."""
GLOG_FATAL_TEXT_BYTES = 30000
"""glog 0.6's ``LogMessage::kMaxLogMessageLen``: after a process's first CHECK, every CHECK's text is written on
from where the one before ended in one buffer of this size (the ``LogMessage`` that would start it afresh never
ends: its thread is parked), so the texts of a host's CHECKs share it, and past it glog answers a CHECK's message
cut short, then empty (p6_v3's master CHECK, about 140 bytes with glog's prefix: empty from the 219th)."""
CHECK_TEXT_ROOM = 4096
"""Text room a host keeps for its next CHECK: it is replaced once its CHECKs' texts (``check_text_bytes``) leave
less of ``GLOG_FATAL_TEXT_BYTES``."""
GLOG_PREFIX_BYTES = 64
"""What glog writes before a CHECK's message, its file's name aside (severity, date, time, thread, ``:line] ``), at
most."""


class Native:
    """One tree's library, called in a child process (``host.py``) that opens it: calls are serialised.

    The library is never opened in this process. The host starts on the first call, lives for the
    process (``close`` at exit), and starts again after a failure. What the tree's code does to its
    process (exits, crashes, hangs past ``timeout_s``, writes to standard output) is an
    ``ImplementationFailure`` naming it, with the last lines the host's process wrote."""

    def __init__(self, tree: TreeMap, built: Built, *, why: str = "", cache: Optional[Path] = None) -> None:
        self.tree = tree
        self.built = built
        self._host: Optional[Host] = None
        self._lock = threading.Lock()
        self.manifest: Optional[manifest_mod.Manifest] = tree.manifest
        self.why = why
        """Why the tree is built by its manifest (``resolve``)."""
        self.cache = cache
        """The cache folder ``load`` was given (None: ``cache.cache_root()``)."""
        self._tensors = None
        self._roots: Optional[list] = None

    def tensor_library(self, kv_layout: Optional[str] = None):
        """The tree's allocation compiled against torch (the manifest's ``allocation.torch``; the build for
        ``kv_layout`` where it has ``layout_defines``), built once and opened in this process: its tensors
        are this process's (``tensor_lib``)."""
        if self._tensors is None or self._tensors[0] != os.getpid():
            self._tensors = (os.getpid(), {})
        opened = self._tensors[1]
        if kv_layout not in opened:
            built = library.build(self.tree, root=self.cache, tensors=True, kv_layout=kv_layout)
            opened[kv_layout] = tensor_lib.open_library(built.library, built.manifest.get("library_sha256"), self.who)
        return opened[kv_layout]

    def facts(self) -> TreeFacts:
        """What the harness may know of this tree (``tree.facts``): its identity, what it compiles, its own tests."""
        return facts_of(self.tree, self.why)

    @property
    def who(self) -> str:
        return f"xllm_native tree {self.tree.root}"

    def call(self, op: str, values: Mapping[str, object], *, timeout_s: Optional[float] = None) -> dict:
        """The reply to one request; raises ``UserError`` for a CHECK that fired, ``ImplementationFailure``
        when the tree's code ended, crashed, hung, wrote to standard output or answered malformed."""
        request = _request(op, values)
        limit = DEFAULT_TIMEOUT_S if timeout_s is None else float(timeout_s)
        with self._lock:
            if self._host is None or not self._host.usable():
                self._host = Host(self.built, self.who)
            raw = self._host.call(op, request, limit)
            parked = raw.startswith(b'{"check":')  # the call's thread is parked in the host for good (cpp/protocol.h)
            if parked:
                self._host.parked += 1
            try:
                reply = reply_object(raw, self.who, op)
            except ImplementationFailure:  # the host's protocol cannot be trusted after it
                self._host.close()
                self._host = None
                raise
            if parked:
                self._host.check_text_bytes += check_text_bytes(reply.get("check"))
                if self._host.parked >= MAX_PARKED_THREADS or \
                        self._host.check_text_bytes > GLOG_FATAL_TEXT_BYTES - CHECK_TEXT_ROOM:
                    self._host.close()
                    self._host = None
        if "check" in reply:
            raise self.refusal(self.check_of(reply["check"], op))
        if "exception" in reply:
            raise PlanError("implementation", self.tree.root.name, "planning code that returns",
                            f"the compiled {op} threw: {reply['exception']}")
        return reply

    def check_of(self, c: object, op: str = "allocate") -> Check:
        """The ``Check`` of a reply's ``check`` ({file, line, message}); its condition read only from what this
        tree's build compiled (``source_roots``)."""
        if not (isinstance(c, dict) and isinstance(c.get("file"), str) and isinstance(c.get("line"), int)
                and isinstance(c.get("message"), str)):
            raise ImplementationFailure(self.who, f"the compiled {op} answered a malformed check: {clip(repr(c), 120)}")
        condition, unquoted = check_condition(c["file"], c["line"], self.source_roots())
        return Check(file=c["file"], line=c["line"], message=c["message"].strip(), condition=condition,
                     unquoted=unquoted)

    def source_roots(self) -> list:
        """What a CHECK's file may be read from: the tree, its manifest's base tree, its role files (``files`` may
        point outside the tree), the glue files its manifest names, the project's C++ (``cpp/``) and the library's
        build folder."""
        if self._roots is not None:
            return list(self._roots)
        roots = [*watched_roots(self.tree), commands.CPP_DIR, self.built.library.parent]
        roots += [p for role in self.tree.files for p in self.tree.paths(role)]
        m = self.tree.manifest
        if m is not None and m.compile == "sources":
            roots.append(m.glue_path)
        if m is not None and m.tensors is not None and m.tensors.glue:
            roots.append(m.beside(m.tensors.glue))
        self._roots = roots  # the tree's and its build's: fixed for this Native (its library is built)
        return list(roots)

    @property
    def host_pid(self) -> Optional[int]:
        """The process id of this process's live host (its keeper: the process it started), or None."""
        with self._lock:
            return self._host.proc.pid if self._host is not None and self._host.usable() else None

    def close(self) -> None:
        """End the host (if this process started one)."""
        with self._lock:
            if self._host is not None:
                self._host.close()
                self._host = None

    def refusal(self, check: Check) -> UserError:
        """The ``UserError`` for a CHECK: the field it guards, the CHECK's place and text (``checks.refusal``)."""
        return refusal(self.tree, check)


def check_text_bytes(check: object) -> int:
    """The bytes of glog's buffer a CHECK's text took (``GLOG_FATAL_TEXT_BYTES``): its message, its file's name and
    glog's prefix; the whole prefix and a long message's worth where the reply's check is malformed."""
    if not isinstance(check, dict):
        return CHECK_TEXT_ROOM
    file, message = check.get("file"), check.get("message")
    return GLOG_PREFIX_BYTES + (len(os.path.basename(file).encode()) if isinstance(file, str) else 256) + \
        (len(message.encode("utf-8", "replace")) if isinstance(message, str) else CHECK_TEXT_ROOM)


def _request(op: str, values: Mapping[str, object]) -> bytes:
    """The request's ``key=value`` lines (``_text``; the common types first, without its checks' cost)."""
    lines = [f"op={op}"]
    for key, value in values.items():
        kind = type(value)
        if kind is int:
            lines.append(f"{key}={value}")
        elif kind is list or kind is tuple:
            lines.append(f"{key}={','.join(map(str, value))}")
        else:
            lines.append(f"{key}={_text(value)}")
    return "\n".join(lines).encode()


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


def load(source_dir: Optional[str] = None, files: Optional[Mapping[str, str]] = None, *,
         cache: Optional[Path] = None, manifest: Optional[str] = None) -> Native:
    """The tree's library, built once per source; one ``Native`` (one host, started on its first call) per process."""
    tree, m, why = resolve(source_dir, files, manifest)
    memo = (str(tree.root), json.dumps(tree.files, sort_keys=True), str(m.path), str(cache))
    with _LOAD_LOCK:
        if memo not in _LOADED:
            manifest_mod.log.info("xllm_native: %s: manifest %s (%s)", tree.root, m.name, why)
            _LOADED[memo] = Native(tree, library.build(tree, root=cache), why=why, cache=cache)
        return _LOADED[memo]


def build_base(m: manifest_mod.Manifest, base_source_dir: Optional[str] = None, *, cache: Optional[Path] = None) -> None:
    """Build the base's libraries (planning, and its allocation's when it has one) as its manifest builds them;
    a failure names the base."""
    found = resolve_base(m, base_source_dir)
    if found is None:
        return
    tree, bm = found
    try:
        library.build(tree, root=cache)
        if bm.tensors is not None:
            library.build(tree, root=cache, tensors=True)
    except UserError as exc:
        raise base_error(m, tree.root, exc) from None


def load_base(m: manifest_mod.Manifest, base_source_dir: Optional[str] = None, *,
              cache: Optional[Path] = None) -> Optional[Native]:
    """The base manifest's library (its own host), built as the base's manifest builds it; None when the
    manifest has no base manifest or its tree is not given (``base_missing_reason``)."""
    found = resolve_base(m, base_source_dir)
    if found is None:
        return None
    tree, bm = found
    try:
        return load(str(tree.root), None, cache=cache, manifest=str(bm.path))
    except UserError as exc:
        raise base_error(m, tree.root, exc) from None
