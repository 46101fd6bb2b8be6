"""``enable_layerwise_split`` / ``layerwise_split_size`` from the three places they come from.

* gflag-style arguments, as xllm_server takes them (``--enable_layerwise_split=true
  --layerwise_split_size=2``; a bare bool flag means true, ``--noFLAG`` false);
* a ParallelConfig JSON (upstream writes ``layerwise_split_size`` only when it is
  not the default 1, and has no enable key: there a size > 1 is what enables);
* plain values (the harness's Hydra config).

Parsing only checks spelling; the rules on the values are in ``validation``.
"""

from __future__ import annotations

import json
import shlex
from typing import Mapping, Sequence, Union

from implementations.errors import ConfigError
from implementations.specs import LayerwiseFlags

ENABLE_FLAG = "enable_layerwise_split"
SIZE_FLAG = "layerwise_split_size"
TRUE_WORDS = ("true", "1")
FALSE_WORDS = ("false", "0")
BOOL_ALLOWED = "true, false, 1 or 0 (any case)"
INT_ALLOWED = "a whole number, e.g. 2"


def parse_bool(field: str, value: object) -> bool:
    """A bool, or one of true/false/1/0 in any case."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str):
        word = value.strip().lower()
        if word in TRUE_WORDS:
            return True
        if word in FALSE_WORDS:
            return False
    raise ConfigError(field, value, BOOL_ALLOWED)


def parse_int(field: str, value: object) -> int:
    """An int, or its decimal spelling (a bool or a fraction is not a size)."""
    if isinstance(value, bool):
        raise ConfigError(field, value, INT_ALLOWED)
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        try:
            return int(value.strip(), 10)
        except ValueError:
            pass
    raise ConfigError(field, value, INT_ALLOWED)


def flags_from_values(enable: object = False, split_size: object = 1) -> LayerwiseFlags:
    """From plain values (``layerwise.enable``, ``layerwise.split_size``)."""
    return LayerwiseFlags(
        enable=parse_bool("layerwise.enable", enable),
        split_size=parse_int("layerwise.split_size", split_size),
    )


def _split_flag(arg: str) -> tuple[str, Union[str, None]]:
    """``--name=value`` -> (name, value); ``--name`` -> (name, None). One or two dashes, as gflags."""
    body = arg[2:] if arg.startswith("--") else arg[1:]
    name, eq, value = body.partition("=")
    return name, (value if eq else None)


def flags_from_gflags(args: Union[str, Sequence[str]]) -> LayerwiseFlags:
    """From an xllm_server command line (a string or an argv list); other flags are ignored.

    A later occurrence of a flag overrides an earlier one, as gflags does.
    """
    argv = shlex.split(args) if isinstance(args, str) else list(args)
    enable, split_size = False, 1
    i = 0
    while i < len(argv):
        arg = argv[i]
        i += 1
        if not arg.startswith("-") or arg in ("-", "--"):
            continue
        name, value = _split_flag(arg)
        if name == ENABLE_FLAG:
            enable = True if value is None else parse_bool(f"--{ENABLE_FLAG}", value)
        elif name == f"no{ENABLE_FLAG}":
            if value is not None:
                raise ConfigError(f"--no{ENABLE_FLAG}", value, "no value (it means false)")
            enable = False
        elif name == SIZE_FLAG:
            if value is None:  # gflags also takes "--flag value" for non-bool flags
                if i >= len(argv):
                    raise ConfigError(f"--{SIZE_FLAG}", None, INT_ALLOWED, "the flag has no value")
                value = argv[i]
                i += 1
            split_size = parse_int(f"--{SIZE_FLAG}", value)
        elif "layerwise" in name:
            raise ConfigError(
                arg, value, f"one of --{ENABLE_FLAG}[=BOOL], --no{ENABLE_FLAG}, --{SIZE_FLAG}=N",
                "unknown layerwise flag",
            )
    return LayerwiseFlags(enable=enable, split_size=split_size)


def flags_from_parallel_config_json(obj: Union[str, bytes, Mapping]) -> LayerwiseFlags:
    """From a ParallelConfig JSON object (dict or JSON text).

    A missing ``layerwise_split_size`` means 1; a missing ``enable_layerwise_split``
    means "enabled iff the size > 1" (upstream has only the size).
    """
    if isinstance(obj, (str, bytes)):
        try:
            obj = json.loads(obj)
        except json.JSONDecodeError as exc:
            raise ConfigError("parallel_config", str(obj)[:60], "a JSON object", str(exc)) from None
    if not isinstance(obj, Mapping):
        raise ConfigError("parallel_config", type(obj).__name__, "a JSON object")
    size_value = obj.get(SIZE_FLAG, 1)
    if isinstance(size_value, float):  # JSON ints only; 2.0 is a writer's mistake
        raise ConfigError(SIZE_FLAG, size_value, "a JSON integer")
    split_size = parse_int(SIZE_FLAG, size_value)
    enable = parse_bool(ENABLE_FLAG, obj[ENABLE_FLAG]) if ENABLE_FLAG in obj else split_size > 1
    return LayerwiseFlags(enable=enable, split_size=split_size)
