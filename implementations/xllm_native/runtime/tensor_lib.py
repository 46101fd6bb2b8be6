"""A tree's allocation compiled against torch, called in the rank process: the rank holds its tensors.

The planning library runs in a child host (``native``); tensors cannot cross a process boundary, so a
manifest whose ``allocation`` says ``torch: true`` gets a second library (``build.build(tree,
tensors=True)``: the tree's allocation sources, the project's glue and shims, linked with the torch
this process runs) that the rank opens itself. Its failure is still a verdict: it runs in a rank,
under the rank's time limit, and a CHECK that fires comes back as the CHECK's place and text
(``cpp/protocol.h``), and a tensor it cannot hand over (a C++ exception caught at the library's C boundary, e.g.
one on the meta device) is an ``ImplementationFailure`` of the tree naming it. The reply names each layer's tensors by index; ``lwsplit_take_tensor`` hands
each over through DLPack, so the rank's torch tensors share the tree's storage (two layers that are
views of one scratch stay one storage).
"""

from __future__ import annotations

import ctypes
import os
import threading
from pathlib import Path
from typing import Mapping

from contract.errors import ImplementationFailure, PlanError, clip
from implementations.xllm_native.build import cachefs
from implementations.xllm_native.build.cache import cache_error
from implementations.xllm_native.runtime.replies import reply_object

ABI_VERSION = 2
"""``lwsplit_tensor_abi_version()`` of ``cpp/alloc_protocol.h`` this loader speaks."""

_OPEN: dict = {}
_LOCK = threading.Lock()


def load_held(fd: int, library: Path, who: str) -> ctypes.CDLL:
    """``dlopen`` of the library open at ``fd``, by its name ``/proc/self/fd/<fd>``, the descriptor then held for the
    process's life (the library stays loaded as long). The dynamic loader knows a loaded library by that name: were
    the descriptor closed, the next library opened would likely get the same number, and its ``dlopen`` would hand
    back the first library instead of loading it (a tokens-major build judged as the heads-major one opened
    before it). A handle the process already holds is refused, so that can never go unseen."""
    try:
        lib = ctypes.CDLL(f"/proc/self/fd/{fd}", mode=os.RTLD_NOW | os.RTLD_LOCAL)
    except OSError as exc:
        os.close(fd)
        raise ImplementationFailure(who, f"the tensor library {library} could not be opened: {exc}") from None
    if lib._handle in _HANDLES:
        os.close(fd)
        raise ImplementationFailure(who, f"the tensor library {library} opened as {_HANDLES[lib._handle]}, already "
                                         "loaded in this process: the loader handed back another library")
    _HANDLES[lib._handle] = library
    return lib


_HANDLES: dict = {}
"""Each loaded tensor library's ``dlopen`` handle and its file (the descriptors stay open: ``load_held``)."""


class TensorLibrary:
    """One opened tensor library (one per library file and process)."""

    def __init__(self, library: Path, sha256: object, who: str) -> None:
        self.who = who
        self.library = library
        try:  # checked again now and opened by that descriptor (``cachefs.open_library``), as the host does
            fd = cachefs.open_library(library, sha256)
        except (cachefs.NotPrivate, cachefs.TooLarge, OSError) as exc:
            raise cache_error(library.parent.parent, f"the tensor library {exc}") from None
        self._lib = load_held(fd, library, who)
        lib = self._lib
        try:
            version = lib.lwsplit_tensor_abi_version
        except AttributeError:
            raise ImplementationFailure(who, f"{library} has no lwsplit_tensor_abi_version: its allocation glue "
                                             "does not include cpp/alloc_protocol.h") from None
        if version() != ABI_VERSION:
            raise ImplementationFailure(who, f"{library} speaks tensor protocol {version()}, this harness {ABI_VERSION}")
        lib.lwsplit_call.restype = ctypes.c_char_p
        lib.lwsplit_call.argtypes = [ctypes.c_char_p]
        lib.lwsplit_take_tensor.restype = ctypes.c_void_p
        lib.lwsplit_take_tensor.argtypes = [ctypes.c_int64]
        lib.lwsplit_tensor_error.restype = ctypes.c_char_p
        lib.lwsplit_tensor_count.restype = ctypes.c_int64
        lib.lwsplit_clear_tensors.restype = None
        self._ready()

    @classmethod
    def over(cls, lib, who: str, library: Path = Path("-")) -> TensorLibrary:
        """The calls of ``lib``, a library already opened and typed (what ``__init__`` does with a file after
        checking it): how a test plants a library whose replies the reader must refuse."""
        self = cls.__new__(cls)
        self.who, self.library = who, library
        self._lib = lib
        self._ready()
        return self

    def _ready(self) -> None:
        """The capsule maker and the call lock, once ``_lib`` is set."""
        self._capsule = ctypes.pythonapi.PyCapsule_New
        self._capsule.restype = ctypes.py_object
        self._capsule.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
        self._call_lock = threading.Lock()

    def allocate(self, request: str) -> tuple[dict, list]:
        """(reply, tensors): the glue's JSON reply to ``request`` and every tensor it kept, in index order.
        A CHECK that fired is the reply's ``check`` (the caller names the field); a thrown exception is a
        ``PlanError``; anything that is not a JSON object an ``ImplementationFailure``."""
        from torch.utils.dlpack import from_dlpack  # here: importing torch takes about 2 s, which a module
        # that only names the library (the planning path, a controller) never needs

        with self._call_lock:
            raw = self._lib.lwsplit_call(request.encode())
            try:  # one reader of a compiled reply: a JSON object, else ImplementationFailure (deep nesting too)
                reply = reply_object(raw or b"", self.who, "allocate")
            except ImplementationFailure:
                self._lib.lwsplit_clear_tensors()
                raise
            tensors = []
            for i in range(self._lib.lwsplit_tensor_count()):
                ptr = self._lib.lwsplit_take_tensor(i)
                if not ptr:
                    why = (self._lib.lwsplit_tensor_error() or b"").decode("utf-8", errors="replace")
                    self._lib.lwsplit_clear_tensors()
                    raise ImplementationFailure(self.who, f"the compiled allocate's tensor {i} cannot be handed to "
                                                          f"the rank (DLPack): {clip(first_line(why), 300)}")
                tensors.append(from_dlpack(self._capsule(ptr, b"dltensor", None)))
            self._lib.lwsplit_clear_tensors()
        if "exception" in reply:
            raise PlanError("implementation", self.library.parent.name, "an allocation that returns",
                            f"the compiled allocate threw: {reply['exception']}")
        return reply, tensors


def first_line(text: str) -> str:
    """A C++ exception's first line (c10's messages go on with a backtrace)."""
    return (text.strip().splitlines() or ["(no message)"])[0]


def open_library(library: Path, sha256: object, who: str) -> TensorLibrary:
    """The tensor library at ``library`` (a cache entry's, whose manifest records ``sha256``), opened once in
    this process."""
    with _LOCK:
        key = (str(library), os.getpid())
        if key not in _OPEN:
            _OPEN[key] = TensorLibrary(library, sha256, who)
        return _OPEN[key]


def request(values: Mapping[str, object]) -> str:
    """``key=value`` lines (lists comma-joined, booleans 1/0) for ``lwsplit_call``."""
    lines = []
    for k, v in values.items():
        if isinstance(v, bool):
            text = "1" if v else "0"
        elif isinstance(v, (list, tuple)):
            text = ",".join(str(int(x)) if isinstance(x, bool) else str(x) for x in v)
        else:
            text = str(v)
        if "\n" in text or "\n" in k:
            raise ValueError(f"a request value spans lines: {k}={text!r}")
        lines.append(f"{k}={text}")
    return "\n".join(lines)
