"""The compiled planning code of one xLLM tree, called in a child process.

``load`` builds (or finds in the cache) the tree's library, once per source and process; it does
not open it. ``Native.call`` sends one request to a host process (``host.py``) that has the library
open: the tree's code never runs in the process that asks, so a tree that exits, crashes, loops or
prints ends or stalls the host, and the caller gets an ``ImplementationFailure`` saying which, with
the host's last output, within the call's time limit. A glog CHECK that fires inside the tree's
code comes back as the CHECK's file and line, and ``refusal`` turns it into the ``UserError`` naming
the harness field that CHECK guards (``CHECK_RULES``: matched on the CHECK's own source text).
"""

from __future__ import annotations

import atexit
import json
import os
import re
import select
import shutil
import signal
import stat
import struct
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, NoReturn, Optional, Sequence

from contract.errors import ConfigError, ImplementationFailure, PlanError, UserError, clip
from contract.interface import NATIVE_LOG_ENV
from implementations.xllm_native import build, cachefs, host
from implementations.xllm_native import manifest as manifest_mod
from implementations.xllm_native.replies import reply_object

HOST = Path(host.__file__).resolve()
"""The child program that opens the library (standard library only)."""
DEFAULT_TIMEOUT_S = 60.0
"""A call's limit when the caller gives none (``runner.timeout_s``'s default)."""
LOAD_TIMEOUT_S = 60.0
"""The limit on starting the host and opening the library (its static constructors run then)."""
MAX_PARKED_THREADS = 64
MAX_REPLY_BYTES = 64 << 20
"""The largest reply read from a host (64 MiB): the length comes from the host's process, which the tree's code
can write to; a real reply is a few KiB."""
CONTEXT_LINES = 8
"""Lines after a CHECK's own line that ``check_condition`` reads for a condition spanning lines."""
"""CHECKs one host answers before it is replaced: each leaves the thread it fired on parked (``cpp/protocol.h``)."""

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
    (r"enable_linear_attention\s*&&\s*enable_lighting_indexer", "model.index_n_heads",
     "0 on a model with linear-attention layers (no DSA indexer with linear attention)"),
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
MASTER_ROLES = ("master", "layout", "worker_checks")
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
    if not any(cachefs._inside(real, os.path.realpath(str(r))) for r in roots):
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


class Native:
    """One tree's library, called in a child process (``host.py``) that opens it: calls are serialised.

    The library is never opened in this process. The host starts on the first call, lives for the
    process (``close`` at exit), and starts again after a failure. What the tree's code does to its
    process (exits, crashes, hangs past ``timeout_s``, writes to standard output) is an
    ``ImplementationFailure`` naming it, with the last lines the host's process wrote."""

    def __init__(self, tree: build.TreeMap, built: build.Built) -> None:
        self.tree = tree
        self.built = built
        self._host: Optional[_Host] = None
        self._lock = threading.Lock()
        self.manifest: Optional[manifest_mod.Manifest] = tree.manifest
        self.why = ""
        self.cache: Optional[Path] = None
        """The cache folder ``load`` was given (None: ``build.cache_root()``)."""
        self._tensors = None

    def tensor_library(self, kv_layout: Optional[str] = None):
        """The tree's allocation compiled against torch (the manifest's ``allocation.torch``; the build for
        ``kv_layout`` where it has ``layout_defines``), built once and opened in this process: its tensors
        are this process's (``tensor_lib``)."""
        from implementations.xllm_native import tensor_lib

        if self._tensors is None or self._tensors[0] != os.getpid():
            self._tensors = (os.getpid(), {})
        opened = self._tensors[1]
        if kv_layout not in opened:
            built = build.build(self.tree, root=self.cache, tensors=True, kv_layout=kv_layout)
            opened[kv_layout] = tensor_lib.open_library(built.library, built.manifest.get("library_sha256"), self.who)
        return opened[kv_layout]

    @property
    def who(self) -> str:
        return f"xllm_native tree {self.tree.root}"

    def call(self, op: str, values: Mapping[str, object], *, timeout_s: Optional[float] = None) -> dict:
        """The reply to one request; raises ``UserError`` for a CHECK that fired, ``ImplementationFailure``
        when the tree's code ended, crashed, hung, wrote to standard output or answered malformed."""
        lines = [f"op={op}"] + [f"{k}={_text(v)}" for k, v in values.items()]
        limit = DEFAULT_TIMEOUT_S if timeout_s is None else float(timeout_s)
        with self._lock:
            if self._host is None or not self._host.usable():
                self._host = _Host(self.built, self.who)
            raw = self._host.call(op, "\n".join(lines).encode(), limit)
            if raw.startswith(b'{"check":'):  # the call's thread is parked in the host for good (cpp/protocol.h)
                self._host.parked += 1
                if self._host.parked >= MAX_PARKED_THREADS:
                    self._host.close()
                    self._host = None
            try:
                reply = reply_object(raw, self.who, op)
            except ImplementationFailure:  # the host's protocol cannot be trusted after it
                if self._host is not None:
                    self._host.close()
                    self._host = None
                raise
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
        roots = [*build._watched_roots(self.tree), build.CPP_DIR, self.built.library.parent]
        roots += [p for role in self.tree.files for p in self.tree.paths(role)]
        m = self.tree.manifest
        if m is not None and m.compile == "sources":
            roots.append(m.glue_path)
        if m is not None and m.tensors is not None and m.tensors.glue:
            roots.append(m.beside(m.tensors.glue))
        return roots

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
        """The ``UserError`` for a CHECK: the field it guards, the CHECK's place and text."""
        name, allowed = rule_of(check)
        if self.tree.port:
            roles = [name for name, role in self.tree.manifest.roles.items()
                     if role.present and str(self.tree.root / role.file) == check.file]
            cls = ConfigError if roles and roles[0] in PORT_MASTER_ROLES else PlanError
        else:
            roles = [r for r in (*build.ROLES, "worker_checks") if str(self.tree.path(r)) == check.file]
            cls = ConfigError if roles and roles[0] in MASTER_ROLES else PlanError
        detail = (f"CHECK at {check.where} (its condition not quoted: {check.unquoted})" if check.unquoted
                  else f"CHECK at {check.where} `{check.condition}`")
        if check.message:
            detail += f": {check.message.splitlines()[-1]}"
        return cls(name, check.where, allowed, detail)


SIGNAL_WORDS = {"SIGSEGV": "segmentation fault", "SIGABRT": "abort", "SIGBUS": "bus error",
                "SIGFPE": "arithmetic error", "SIGILL": "illegal instruction", "SIGKILL": "killed",
                "SIGXFSZ": f"wrote more than {host.MAX_OUTPUT_BYTES >> 20} MiB of output"}
TAIL_BYTES = 4096
TAIL_LINES = 4


class _Host:
    """One child process holding the library open; used by the process that started it only."""

    def __init__(self, built: build.Built, who: str) -> None:
        library = built.library
        self.who = who
        self.pid = os.getpid()
        self.folder = private_temp_folder("lwsplit-host-")  # the host's working folder
        try:  # checked again now, by descriptor: the host never opens a path someone could have swapped since
            lib_fd = cachefs.open_library(library, built.manifest.get("library_sha256"))
        except (cachefs.NotPrivate, cachefs.TooLarge, OSError) as exc:
            shutil.rmtree(self.folder, ignore_errors=True)
            raise build._cache_error(library.parent.parent, f"the library {exc}") from None
        self._out = tempfile.TemporaryFile(prefix="lwsplit-host-out-")  # unnamed: nothing to plant or leave
        self._err = tempfile.TemporaryFile(prefix="lwsplit-host-err-")
        self._out_seen = 0
        self.parked = 0
        """CHECKs this host answered (threads parked in it)."""
        req_r, self._req = os.pipe()
        self._rep, rep_w = os.pipe()
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-I", "-S", str(HOST), str(lib_fd), str(req_r), str(rep_w), str(os.getpid()), "1"],
                stdin=subprocess.DEVNULL, stdout=self._out, stderr=self._err, pass_fds=(lib_fd, req_r, rep_w),
                env={**os.environ, NATIVE_LOG_ENV: "/dev/fd/2"},  # the tree's log lines: the host's last output
                cwd=self.folder, start_new_session=True)  # Ctrl-C at a terminal is the parent's; killpg takes it all
        except BaseException:
            for fd in (self._req, self._rep):
                os.close(fd)
            shutil.rmtree(self.folder, ignore_errors=True)
            raise
        finally:
            for fd in (lib_fd, req_r, rep_w):
                os.close(fd)
        _HOSTS.add(self)
        kind = self._read(1, time.monotonic() + LOAD_TIMEOUT_S, "opening the library", LOAD_TIMEOUT_S)
        if kind != b"L":
            message = self._drain()
            self.close()
            raise ImplementationFailure(self.who, f"the library {library} could not be opened: "
                                                  f"{message.decode('utf-8', 'replace')}")

    def usable(self) -> bool:
        return self.pid == os.getpid() and self.proc.poll() is None

    def call(self, op: str, request: bytes, timeout_s: float) -> bytes:
        if self.pid != os.getpid():
            raise RuntimeError("a host is used by the process that started it only")
        deadline = time.monotonic() + timeout_s
        try:
            _write_all(self._req, struct.pack(">I", len(request)) + request)
        except BrokenPipeError:
            self._ended(f"the compiled {op}")
        what = f"the compiled {op}"
        kind = self._read(1, deadline, what, timeout_s)
        if kind != b"R":
            self.close()
            raise ImplementationFailure(self.who, f"the host answered {op} out of protocol ({kind!r})")
        size = struct.unpack(">I", self._read(4, deadline, what, timeout_s))[0]
        if size > MAX_REPLY_BYTES:
            self.close()
            raise ImplementationFailure(self.who, f"{what} answered a reply of {size} bytes, more than the "
                                                  f"{MAX_REPLY_BYTES >> 20} MiB a reply may hold; its process was killed")
        raw = self._read(size, deadline, what, timeout_s)
        self._check_stdout(what)
        return raw

    def _read(self, n: int, deadline: float, what: str, timeout_s: float) -> bytes:
        out = b""
        try:
            while len(out) < n:
                left = deadline - time.monotonic()
                ready = select.select([self._rep], [], [], max(left, 0))[0] if left > 0 else []
                if not ready:
                    self.close()
                    raise ImplementationFailure(
                        self.who, f"{what} did not return within {timeout_s:g} s (runner.timeout_s); its process "
                                  f"was killed", self.tail())
                chunk = os.read(self._rep, n - len(out))
                if not chunk:
                    self._ended(what)
                out += chunk
        except ImplementationFailure:
            raise
        except BaseException:  # Ctrl-C, SIGTERM turned into KeyboardInterrupt, any error: the call is abandoned
            self.close()
            raise
        return out

    def _ended(self, what: str) -> NoReturn:
        try:
            rc = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            rc = None
        tail = self.tail()
        self.close()
        if rc is None:
            how = "closed its pipe without ending"
        elif rc < 0:
            try:
                name = signal.Signals(-rc).name
            except ValueError:
                name = f"signal {-rc}"
            how = f"crashed: killed by {name}" + (f" ({SIGNAL_WORDS[name]})" if name in SIGNAL_WORDS else "")
        else:
            how = f"ended the process: it exited with status {rc} (exit() in the tree's code)"
        raise ImplementationFailure(self.who, f"{what} {how}", tail)

    def _check_stdout(self, what: str) -> None:
        size = os.fstat(self._out.fileno()).st_size
        if size <= self._out_seen:
            return
        text = os.pread(self._out.fileno(), min(size - self._out_seen, TAIL_BYTES), self._out_seen)
        self._out_seen = size
        raise ImplementationFailure(self.who, f"{what} wrote to standard output (planning code must not print): "
                                              f"{clip(' | '.join(_lines(text)), 160)!r}")

    def _drain(self) -> bytes:
        chunks = []
        while select.select([self._rep], [], [], 1.0)[0]:
            chunk = os.read(self._rep, 65536)
            if not chunk:
                break
            chunks.append(chunk)
        return b"".join(chunks)

    def tail(self) -> str:
        """The last lines the host's process wrote (stderr, then stdout), as one line."""
        lines: list = []
        for f in (self._err, self._out):
            try:
                size = os.fstat(f.fileno()).st_size
                lines += _lines(os.pread(f.fileno(), TAIL_BYTES, max(size - TAIL_BYTES, 0)))
            except (OSError, ValueError):
                continue
        return " | ".join(lines[-TAIL_LINES:])

    def close(self) -> None:
        """Kill everything the host's tree started (a subreaper: its descendants, in sessions of their own
        included), then the host's process group; reap it and remove its working folder (only from the
        process that started it)."""
        _HOSTS.discard(self)
        if self.pid != os.getpid():
            return
        if self.proc.poll() is None:
            host.kill_descendants(self.proc.pid)
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        for fd in (self._req, self._rep):
            try:
                os.close(fd)
            except OSError:
                pass
        self._req = self._rep = -1
        for f in (self._out, self._err):
            f.close()
        shutil.rmtree(self.folder, ignore_errors=True)


def private_temp_folder(prefix: str) -> str:
    """A new folder (``mkdtemp``: mode 0700, a name no one could guess) in the temporary folder, where every
    folder on the way, the temporary folder itself included, is one no other user can rename or replace an
    entry of (``cachefs.trusted_folder``); a ``UserError`` naming ``TMPDIR`` otherwise."""
    parent = tempfile.gettempdir()
    try:
        trusted = cachefs.trusted_folder(Path(parent))
    except cachefs.NotPrivate as exc:
        raise UserError("TMPDIR", parent, "a temporary folder no other user can write to (or sticky, as /tmp)",
                        str(exc)) from None
    except OSError as exc:
        raise UserError("TMPDIR", parent, "an existing temporary folder", exc.strerror or str(exc)) from None
    return tempfile.mkdtemp(prefix=prefix, dir=str(trusted))


def _lines(raw: bytes) -> list:
    return [line.strip() for line in raw.decode("utf-8", errors="replace").splitlines() if line.strip()]


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


_HOSTS: weakref.WeakSet[_Host] = weakref.WeakSet()


@atexit.register
def _close_hosts() -> None:
    for h in list(_HOSTS):
        h.close()


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
    when ``files`` re-point upstream's roles; else the manifest the tree carries (``lwsplit-manifest.yaml``),
    else the shipped manifest whose ``detect`` fits the tree."""
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
        m, why, found = manifest_mod.for_tree(root.resolve())
        given = str(found)  # a port's files may sit below the folder given (an xLLM fork's xllm/)
    if m.compile == "upstream-cut":
        tree = build.tree_map(source_dir, {**m.files, **dict(files or {})})
        if manifest:
            manifest_mod.check_tree(m, tree.root)
        else:
            manifest_mod.check_tensors(m, tree.root)
        return build.TreeMap(root=tree.root, files=tree.files, manifest=m), m, why
    if not given:
        raise UserError(build.FIELD, None, f"the tree manifest {m.name} describes: "
                        f"implementation.source_dir=<path> or ${build.ENV_SOURCE}")
    tree = build.port_tree(m, Path(str(given)))
    manifest_mod.check_tree(m, tree.root)
    return tree, m, why


def load(source_dir: Optional[str] = None, files: Optional[Mapping[str, str]] = None, *,
         cache: Optional[Path] = None, manifest: Optional[str] = None) -> Native:
    """The tree's library, built once per source; one ``Native`` (one host, started on its first call) per process."""
    tree, m, why = resolve(source_dir, files, manifest)
    memo = (str(tree.root), json.dumps(tree.files, sort_keys=True), str(m.path), str(cache))
    with _LOAD_LOCK:
        if memo not in _LOADED:
            manifest_mod.log.info("xllm_native: %s: manifest %s (%s)", tree.root, m.name, why)
            native = Native(tree, build.build(tree, root=cache))
            native.manifest, native.why, native.cache = m, why, cache
            _LOADED[memo] = native
        return _LOADED[memo]


ENV_BASE_SOURCE = "LWSPLIT_XLLM_BASE_SRC"
"""The base manifest's tree when neither the manifest (``base_source_dir``) nor ``implementation.base_source_dir``
names it."""
BASE_FIELD = "implementation.base_source_dir"


def base_tree_dir(m: manifest_mod.Manifest, base_source_dir: Optional[str] = None) -> tuple[Optional[Path], str]:
    """The base manifest's tree (None when nothing names it) and what named it: the manifest's
    ``base_source_dir``, else ``implementation.base_source_dir``, else ``$LWSPLIT_XLLM_BASE_SRC``."""
    for given, why in ((m.base_source_dir and str(m.beside(m.base_source_dir)), f"{m.path}: base_source_dir"),
                       (base_source_dir, BASE_FIELD), (os.environ.get(ENV_BASE_SOURCE), f"${ENV_BASE_SOURCE}")):
        if given:
            root = Path(str(given)).expanduser()
            if not root.is_dir():
                raise UserError(BASE_FIELD if why != f"{m.path}: base_source_dir" else f"{manifest_mod.FIELD}={m.path}: "
                                "base_source_dir", str(given),
                                f"an existing folder holding the tree of base manifest {m.base_manifest.name}")
            return root.resolve(), why
    return None, ""


def base_missing_reason(m: manifest_mod.Manifest) -> str:
    return (f"the tree of its base {m.base_manifest.name} is not given (the manifest's base_source_dir, "
            f"{BASE_FIELD}=<path> or ${ENV_BASE_SOURCE})")


def _base_error(m: manifest_mod.Manifest, root: Path, exc: UserError) -> UserError:
    """A base that does not resolve or compile: named as the base's, never as the port's."""
    return UserError(f"{manifest_mod.FIELD}={m.path}: base", m.base,
                     f"a base tree that builds as its manifest {m.base_manifest.name} builds it",
                     f"the base {m.base_manifest.name} (tree {root}) failed, not the port: "
                     f"{exc.detail or exc}" + (f" [{exc.field}]" if exc.detail else ""))


def resolve_base(m: manifest_mod.Manifest, base_source_dir: Optional[str] = None
                 ) -> Optional[tuple[build.TreeMap, manifest_mod.Manifest]]:
    """The base manifest's tree and manifest, checked (None: no base manifest, or its tree not given)."""
    if m.base_manifest is None:
        return None
    root, _why = base_tree_dir(m, base_source_dir)
    if root is None:
        return None
    try:
        tree, bm, _ = resolve(str(root), None, str(m.base_manifest.path))
    except UserError as exc:
        raise _base_error(m, root, exc) from None
    return tree, bm


def build_base(m: manifest_mod.Manifest, base_source_dir: Optional[str] = None, *, cache: Optional[Path] = None) -> None:
    """Build the base's libraries (planning, and its allocation's when it has one) as its manifest builds them;
    a failure names the base."""
    found = resolve_base(m, base_source_dir)
    if found is None:
        return
    tree, bm = found
    try:
        build.build(tree, root=cache)
        if bm.tensors is not None:
            build.build(tree, root=cache, tensors=True)
    except UserError as exc:
        raise _base_error(m, tree.root, exc) from None


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
        raise _base_error(m, tree.root, exc) from None
