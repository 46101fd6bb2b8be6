"""Which ``_target_`` a command line may name: code is chosen from a short list, never typed in.

Hydra instantiates any importable callable named by ``_target_``, so a typo or a
pasted line (``implementation._target_=builtins.open '+implementation._args_=[f,w]'``)
could call arbitrary code before any interface check. The harness therefore accepts:

* for ``implementation``: a class (not a function) whose class body provides the
  implementation Protocol (``name``, ``plan``, ``engine_message``, ``init_worker``),
  checked before anything is called; keyword arguments only, each one the class
  accepts (bound to its signature, not called), no nested ``_target_``;
* for ``hydra.callbacks.*``: only the callbacks this project ships;
* nowhere else: any other ``_target_`` override (launcher, sweeper, ...) is refused;
  launchers are chosen with ``launcher=<option>``.

Locating a class imports its module, as ``import`` would; that is the user's own
code on their own command line, not a privilege boundary.
"""

from __future__ import annotations

import importlib
import inspect
from typing import Any, Mapping

from contract.errors import ConfigError

IMPLEMENTATION_METHODS = ("plan", "engine_message", "init_worker")
SHIPPED_CALLBACKS = ("harness.app.callback.SweepCallback",)
FORBIDDEN_KEYS = ("_args_", "_partial_", "_recursive_", "_convert_")


def check_override_targets(overrides: list[str]) -> None:
    """Refuse ``_target_`` overrides outside ``implementation`` and the shipped callbacks."""
    for text in overrides:
        key, sep, value = text.partition("=")
        key = key.lstrip("+~")
        if not sep:
            continue
        parts = key.split(".")
        if key.startswith("hydra.callbacks."):
            if parts[-1] == "_target_" and value not in SHIPPED_CALLBACKS:
                raise ConfigError(key, value, f"a callback this project ships: {', '.join(SHIPPED_CALLBACKS)}")
            if any(p in FORBIDDEN_KEYS for p in parts):
                raise ConfigError(key, value, "no instantiation options on the command line")
            continue
        if parts[0] == "implementation":
            continue  # checked on the composed node by check_implementation_node
        if "_target_" in parts or any(p in FORBIDDEN_KEYS for p in parts):
            raise ConfigError(key, value, "no _target_ here: choose code with a config group "
                                          "(implementation=<option>, launcher=<option>)")


def locate(path: str) -> object:
    """The object a dotted path names (``package.module.Class``): the longest importable module prefix, then
    attributes. ImportError or AttributeError when nothing there has that name."""
    parts = path.split(".")
    if not all(parts):
        raise ImportError(f"{path!r} is not a dotted path")
    for cut in range(len(parts), 0, -1):
        module_name = ".".join(parts[:cut])
        try:
            obj = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name is not None and not module_name.startswith(exc.name) and exc.name != module_name:
                raise  # the module exists but imports something missing: its own error
            continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr)
        return obj
    raise ImportError(f"no module named {parts[0]!r}")


def check_implementation_node(node: Mapping[str, Any], field: str = "implementation") -> type:
    """The class ``node._target_`` names, once it is known to be a Protocol class; nothing is called."""
    target = node.get("_target_")
    if not isinstance(target, str) or not target:
        raise ConfigError(field, target, "a node with _target_: <importable class>")
    for key, value in node.items():
        if key in FORBIDDEN_KEYS:
            raise ConfigError(f"{field}.{key}", value, "keyword arguments only (no _args_, _partial_, ...)")
        if key != "_target_" and _has_target(value):
            raise ConfigError(f"{field}.{key}", "a nested _target_", "plain values (no nested instantiation)")
    try:
        obj = locate(target)
    except Exception as exc:  # ImportError, AttributeError, ...: the user's typo
        raise ConfigError(field, target, "an importable class", str(exc).splitlines()[0]) from None
    if not inspect.isclass(obj):
        raise ConfigError(field, target, "a class implementing the KVShardingImplementation Protocol",
                          f"it is a {type(obj).__name__}, not a class")
    missing = [m for m in IMPLEMENTATION_METHODS if not callable(getattr(obj, m, None))]
    if missing:
        raise ConfigError(field, target, "a class implementing the KVShardingImplementation Protocol",
                          f"it lacks {', '.join(missing)}")
    return obj


def check_arguments(cls: type, node: Mapping[str, Any], field: str = "implementation") -> dict:
    """The node's keys besides ``_target_`` are keyword arguments ``cls`` accepts, its required ones all
    given (bound to its signature, not called); returns them. ``ConfigError`` naming the key."""
    kwargs = {k: v for k, v in node.items() if k != "_target_"}
    try:
        signature = inspect.signature(cls)
    except (TypeError, ValueError):  # no signature to read (a C type): the call itself will say
        return kwargs
    params = signature.parameters.values()
    named = [p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    try:
        signature.bind(**kwargs)
    except TypeError as exc:
        takes_any = any(p.kind == p.VAR_KEYWORD for p in params)
        unknown = [] if takes_any else [k for k in kwargs if k not in named]
        allowed = f"keyword arguments of {cls.__name__}: {', '.join(named) if named else 'none'}"
        if unknown:
            takers = []
            if field == "implementation":  # a key of another implementation option (source_dir: xllm_native)
                from harness.config.errors import implementation_options_with

                takers = implementation_options_with(unknown[0])
            detail = (f"the implementation options that take it: {', '.join(takers)} "
                      f"(choose one: implementation={takers[0]})" if takers else "")
            raise ConfigError(f"{field}.{unknown[0]}", kwargs[unknown[0]], allowed, detail) from None
        raise ConfigError(field, f"{cls.__module__}.{cls.__qualname__}", allowed, str(exc)) from None
    return kwargs


def build_implementation_node(node: Mapping[str, Any], field: str = "implementation") -> Any:
    """The implementation ``node`` names, built: the class checked (``check_implementation_node``),
    the keys bound to its signature (``check_arguments``), then called with them, as Hydra's
    ``instantiate(node, _recursive_=False)`` would for plain keyword arguments, without its
    per-call config copies (ranks build one per case). A ``UserError`` the constructor raises
    about its own arguments propagates; anything else it raises is a bug and keeps its traceback."""
    cls = check_implementation_node(node, field)
    return cls(**check_arguments(cls, node, field))


def _has_target(value: Any) -> bool:
    if isinstance(value, Mapping):
        return "_target_" in value or any(_has_target(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return any(_has_target(v) for v in value)
    return False
