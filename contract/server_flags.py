"""The layerwise flags and the other xllm_server flags as the harness and the implementations both read them.

Neutral contract-layer module: the harness (config building, ``python -m harness.plan``,
``python -m harness.conformance``) and the reference implementation both read these
spellings, so neither imports the other's internals for them.

Layerwise flags from the three places they come from: gflag-style arguments, as
xllm_server takes them (``--enable_layerwise_split=true --layerwise_split_size=2``;
a bare bool flag means true, ``--noFLAG`` false; ``--flagfile=PATH`` read in place);
a ParallelConfig JSON (upstream writes ``layerwise_split_size`` only when it is not
the default 1, and has no enable key; its layout keys become ``parallel.*``); plain
values (the harness's Hydra config). Which values turn the split on is the one rule
of ``layerwise_state`` per semantics (FEATURE section 2, v2.1): the adaptation's
(enable flag and s > 1) or upstream's (s > 1 alone, no enable flag). The startup
rules on the values are the implementation's.
"""

from __future__ import annotations

import difflib
import math
import re
import shlex
from pathlib import Path
from typing import Mapping, Optional, Sequence, Union

from contract import bounded_inputs
from contract.errors import ConfigError
from contract.specs import LayerwiseFlags

ENABLE_FLAG = "enable_layerwise_split"
SIZE_FLAG = "layerwise_split_size"
TRUE_WORDS = ("true", "1")
FALSE_WORDS = ("false", "0")
BOOL_ALLOWED = "true, false, 1 or 0 (any case)"
GFLAG_TRUE_WORDS = ("true", "t", "yes", "y", "1")
GFLAG_FALSE_WORDS = ("false", "f", "no", "n", "0")
GFLAG_BOOL_ALLOWED = "true/false, t/f, yes/no, y/n or 1/0 (any case), as gflags reads a bool"
INT_ALLOWED = "a whole number, e.g. 2"

SEMANTICS = ("adaptation", "upstream")
"""FEATURE section 2 (v2.1): the adaptation (enable flag and s > 1) or upstream 494f293b5 (s > 1 alone)."""
DEFAULT_SEMANTICS = "adaptation"
UPSTREAM_FLAGS_ALLOWED = f"flags of an upstream xllm_server build: --{SIZE_FLAG}=N (s > 1 alone splits)"

PARALLEL_LAYOUT_KEYS = ("world_size", "dp_size", "cp_size", "tp_size", "kv_split_size")
"""ParallelConfig keys that set the harness's ``parallel.*`` (tp_size: the attention TP size)."""
PARALLEL_IGNORED_KEYS = (
    "dp_rank", "tp_rank", "cp_rank", "ep_size", "ep_rank", "moe_tp_size", "moe_tp_rank", "layerwise_split_rank",
    "sp_size", "cfg_size", "vae_size", "text_encoder_tp_size", "communication_backend", "enable_mm_encoder_dp",
    "enable_multi_stream_parallel", "micro_batch_num", "enable_dp_balance",
)
"""ParallelConfig keys that do not change the KV plan (one rank's ids, expert / DiT parallelism, streams)."""
PARALLEL_CONFIG_KEYS = PARALLEL_LAYOUT_KEYS + PARALLEL_IGNORED_KEYS + (SIZE_FLAG, ENABLE_FLAG)
"""Every key a ParallelConfig JSON may hold (``enable_layerwise_split``: the adaptation's only)."""
MAX_FLAGFILE_DEPTH = 4
"""``--flagfile`` inside a flagfile, at most this deep (gflags itself allows any depth)."""


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


def check_semantics(value: object) -> str:
    if value not in SEMANTICS:
        raise ConfigError("--semantics", value, " or ".join(SEMANTICS))
    return str(value)


def flags_from_values(enable: object = False, split_size: object = 1) -> LayerwiseFlags:
    """From plain values (``layerwise.enable``, ``layerwise.split_size``)."""
    return LayerwiseFlags(
        enable=parse_bool("layerwise.enable", enable),
        split_size=bounded_inputs.parse_int("layerwise.split_size", split_size, INT_ALLOWED),
    )


def layerwise_state(semantics: str, enable: Optional[bool], split_size: int) -> tuple[LayerwiseFlags, str]:
    """The one rule per semantics (FEATURE section 2, v2.1), whichever route carried the values:
    (the flags in the harness's vocabulary, why the split is on or off).

    adaptation: active iff the enable flag is true and s > 1 (absent enable: false);
    upstream: no enable flag, s > 1 alone activates (``enable`` must be None here)."""
    check_semantics(semantics)
    if semantics == "upstream":
        if enable is not None:
            raise ConfigError(f"--{ENABLE_FLAG}", enable, UPSTREAM_FLAGS_ALLOWED,
                              "upstream 494f293b5 has no enable flag: its gflags stop on an unknown command line flag")
        on = split_size > 1
        why = (f"upstream semantics: split {'on' if on else 'off'}: layerwise_split_size {split_size} "
               f"{'> 1' if on else '<= 1'} (upstream has no enable flag)")
        return LayerwiseFlags(enable=on, split_size=split_size), why
    flag = bool(enable)
    on = flag and split_size > 1
    if on:
        reason = f"enable_layerwise_split (layerwise.enable) true and layerwise_split_size {split_size} > 1"
    elif not flag:
        reason = "enable_layerwise_split (layerwise.enable) " + ("false" if enable is not None
                                                                 else "not set (default false)")
    else:
        reason = f"layerwise_split_size {split_size} <= 1"
    why = f"adaptation semantics: split {'on' if on else 'off'}: {reason}"
    return LayerwiseFlags(enable=flag, split_size=split_size), why


def _gflag_bool(field: str, value: str) -> bool:
    """A bool as gflags reads one on a command line (FEATURE section 2)."""
    word = value.strip().lower()
    if word in GFLAG_TRUE_WORDS:
        return True
    if word in GFLAG_FALSE_WORDS:
        return False
    raise ConfigError(field, value, GFLAG_BOOL_ALLOWED)


def _split_flag(arg: str) -> tuple[str, Union[str, None]]:
    """``--name=value`` -> (name, value); ``--name`` -> (name, None). One or two dashes, as gflags."""
    body = arg[2:] if arg.startswith("--") else arg[1:]
    name, eq, value = body.partition("=")
    return name, (value if eq else None)


def _argv(args: Union[str, Sequence[str]], field: str) -> list:
    try:
        return shlex.split(args, comments=True) if isinstance(args, str) else list(args)
    except ValueError as exc:  # an unbalanced quote
        raise ConfigError(field, args, "flags quoted as a shell would quote them", str(exc)) from None


def _flagfile_argv(path: str, depth: int) -> list:
    """The flags of a gflags ``--flagfile`` (one flag a line, ``#`` / ``//`` comments), read bounded."""
    field = f"--flagfile={path}"
    if depth >= MAX_FLAGFILE_DEPTH:
        raise ConfigError("--flagfile", path, f"flagfiles nested at most {MAX_FLAGFILE_DEPTH} deep")
    text = bounded_inputs.read_input_file(Path(path), field)
    out = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith(("#", "//")):
            continue
        out += _argv(line, field)
    return out


GFLAG_CONFIG_KEYS = {
    # xllm_server flag -> (the harness config key it sets, kind); upstream 494f293b5 defines each
    "nnodes": ("parallel.world_size", "int"),  # master.cpp:401: the world size is the node count
    "dp_size": ("parallel.dp_size", "int"),
    "cp_size": ("parallel.cp_size", "int"),
    "kv_split_size": ("parallel.kv_split_size", "int"),
    "block_size": ("cache.block_size", "int"),
    "kv_cache_dtype": ("cache.kv_cache_dtype", "name"),
    "indexer_cache_dtype": ("cache.indexer_cache_dtype", "name"),
    "max_seqs_per_batch": ("cache.max_seqs_per_batch", "int"),
    "max_linear_state_cache_slots": ("cache.max_linear_state_cache_slots", "int"),
    "enable_prefix_cache": ("cache.enable_prefix_cache", "bool"),
    "num_speculative_tokens": ("cache.num_speculative_tokens", "int"),
    "host_blocks_factor": ("cache.host_blocks_factor", "float"),
    "enable_xtensor": ("cache.enable_xtensor", "bool"),
    "enable_mtp_draft_body_tp1": ("draft.body_tp1", "bool"),
}
"""The engine flags besides the layerwise ones that change the KV plan, read into the harness config."""
GFLAG_MEMORY_FLAGS = {"max_memory_utilization": "float", "max_cache_size": "int"}
"""Flags that set the KV budget with the card's free memory, which no flag gives: not a config value
(``harness.conformance`` judges them against the worker lines, which print both)."""
GFLAG_NAMED_FLAGS = {"model": "model=NAME or model_path=PATH/config.json",
                     "draft_model": "draft=NAME or draft_path=PATH/config.json"}
"""Checkpoint paths: the harness names a model with an override instead of opening the engine's path."""
_BOOL_FLAGS = (ENABLE_FLAG,) + tuple(f for f, (_, kind) in GFLAG_CONFIG_KEYS.items() if kind == "bool")
_FLOAT_RE = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]{1,3})?")


_ALLOWED = {"bool": GFLAG_BOOL_ALLOWED, "int": INT_ALLOWED, "float": "a decimal number, e.g. 0.9",
            "name": "a dtype name such as auto or int8"}


def _gflag_value(flag: str, kind: str, value: str) -> object:
    field = f"--{flag}"
    if kind == "bool":
        return _gflag_bool(field, value)
    if kind == "int":
        return bounded_inputs.parse_int(field, value, INT_ALLOWED)
    if kind == "float":
        if len(value) > 64 or not _FLOAT_RE.fullmatch(value.strip()) or not math.isfinite(float(value)):
            raise ConfigError(field, value, _ALLOWED[kind], "a finite number")
        return float(value.strip())
    if not re.fullmatch(r"[A-Za-z0-9_]{1,32}", value.strip()):
        raise ConfigError(field, value, _ALLOWED[kind])
    return value.strip()


def _gflag_items(args: Union[str, Sequence[str]], _depth: int = 0) -> list:
    """``(arg, name, value)`` of each flag in order, ``--flagfile=PATH`` read in place (bounded); a
    flag that is not a bool takes the next argument as its value when it has no ``=``, as gflags does;
    other arguments are skipped."""
    argv = _argv(args, "--gflags")
    out = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        i += 1
        if not arg.startswith("-") or arg in ("-", "--"):
            continue
        name, value = _split_flag(arg)
        takes_value = name == SIZE_FLAG or name == "flagfile" or name in GFLAG_MEMORY_FLAGS or name in GFLAG_NAMED_FLAGS \
            or (name in GFLAG_CONFIG_KEYS and name not in _BOOL_FLAGS)
        if value is None and takes_value:
            if i >= len(argv):
                kind = GFLAG_CONFIG_KEYS.get(name, (None, GFLAG_MEMORY_FLAGS.get(name, "int")))[1]
                allowed = ("a path to a gflags flagfile" if name == "flagfile" else "a path" if name in GFLAG_NAMED_FLAGS
                           else _ALLOWED[kind])
                raise ConfigError(f"--{name}", None, allowed, "the flag has no value")
            value = argv[i]
            i += 1
        if name == "flagfile":
            out += _gflag_items(_flagfile_argv(value, _depth), _depth + 1)
        else:
            out.append((arg, name, value))
    return out


def gflag_settings(args: Union[str, Sequence[str]], semantics: str = DEFAULT_SEMANTICS) -> dict:
    """What an xllm_server command line sets: ``{"enable": bool, "split_size": int}`` (the layerwise
    flags), ``"parallel"`` / ``"cache"`` / ``"draft"`` (the other flags of ``GFLAG_CONFIG_KEYS``, by
    config key), ``"memory"`` (``GFLAG_MEMORY_FLAGS``), ``"named"`` (``GFLAG_NAMED_FLAGS``) and
    ``"unread"`` (the names of flags that do not change the KV plan); only what is present. A later
    occurrence overrides an earlier one, as gflags does; ``--flagfile=PATH`` is read in place
    (bounded). Under upstream semantics the enable flag is an unknown flag."""
    check_semantics(semantics)
    out: dict = {}
    for arg, name, value in _gflag_items(args):
        if name in (ENABLE_FLAG, f"no{ENABLE_FLAG}") and semantics == "upstream":
            raise ConfigError(arg, "(bare flag)" if value is None else value, UPSTREAM_FLAGS_ALLOWED,
                              "upstream 494f293b5 has no enable flag: its gflags stop on an unknown command line flag")
        if name == ENABLE_FLAG:
            out["enable"] = True if value is None else _gflag_bool(f"--{ENABLE_FLAG}", value)
        elif name == f"no{ENABLE_FLAG}":
            if value is not None:
                raise ConfigError(f"--no{ENABLE_FLAG}", value, "no value (it means false)")
            out["enable"] = False
        elif name == SIZE_FLAG:
            out["split_size"] = bounded_inputs.parse_int(f"--{SIZE_FLAG}", value, INT_ALLOWED)
        elif name in GFLAG_CONFIG_KEYS or (name.startswith("no") and name[2:] in _BOOL_FLAGS):
            flag = name if name in GFLAG_CONFIG_KEYS else name[2:]
            if flag != name and value is not None:
                raise ConfigError(f"--{name}", value, "no value (it means false)")
            key, kind = GFLAG_CONFIG_KEYS[flag]
            if flag != name:
                parsed: object = False
            elif value is None:  # a bare bool flag
                parsed = True
            else:
                parsed = _gflag_value(flag, kind, value)
            group, _, leaf = key.partition(".")
            out.setdefault(group, {})[leaf] = parsed
        elif name in GFLAG_MEMORY_FLAGS:
            out.setdefault("memory", {})[name] = _gflag_value(name, GFLAG_MEMORY_FLAGS[name], value)
        elif name in GFLAG_NAMED_FLAGS:
            out.setdefault("named", {})[name] = value
        elif "layerwise" in name.lower():  # --ENABLE_LAYERWISE_SPLIT must not silently leave the split off
            known = (ENABLE_FLAG, f"no{ENABLE_FLAG}", SIZE_FLAG)
            hint = "gflags names are case-sensitive" if name.lower() in known else "unknown layerwise flag"
            allowed = (UPSTREAM_FLAGS_ALLOWED if semantics == "upstream"
                       else f"one of --{ENABLE_FLAG}[=BOOL], --no{ENABLE_FLAG}, --{SIZE_FLAG}=N")
            raise ConfigError(arg, value, allowed, hint)
        elif name.lower() in GFLAG_CONFIG_KEYS or name.lower() in GFLAG_MEMORY_FLAGS:
            raise ConfigError(arg, value, f"--{name.lower()}", "gflags names are case-sensitive")
        elif name not in out.get("unread", ()):
            out.setdefault("unread", []).append(name)
    return out


def flags_from_gflags(args: Union[str, Sequence[str]], semantics: str = DEFAULT_SEMANTICS) -> LayerwiseFlags:
    """From an xllm_server command line (a string or an argv list): absent flags take the binary's
    defaults, then the semantics' rule (``layerwise_state``)."""
    got = gflag_settings(args, semantics)
    return layerwise_state(semantics, got.get("enable"), got.get("split_size", 1))[0]


def parallel_config_settings(obj: Union[str, bytes, Mapping], semantics: str = DEFAULT_SEMANTICS) -> dict:
    """What a ParallelConfig JSON object (dict or JSON text) sets: ``split_size``, ``enable`` (the
    adaptation's key only) and ``parallel`` (``{"world_size": .., "dp_size": .., ...}`` in the
    harness's ``parallel.*`` names, when any layout key is present; absent ones are upstream's
    default 1, world_size is dp * cp * tp when only tp_size is given). Every key is read or refused."""
    check_semantics(semantics)
    if isinstance(obj, (str, bytes)):
        text = obj.decode("utf-8", errors="replace") if isinstance(obj, bytes) else obj
        obj = bounded_inputs.loads_json(text, "parallel_config")
    if not isinstance(obj, Mapping):
        raise ConfigError("parallel_config", type(obj).__name__, "a JSON object")
    known = PARALLEL_CONFIG_KEYS if semantics == "adaptation" else tuple(k for k in PARALLEL_CONFIG_KEYS
                                                                           if k != ENABLE_FLAG)
    for key in obj:  # a near miss or an unknown key would silently mean "no split"
        if key in known:
            continue
        close = [k for k in known if isinstance(key, str) and k.lower() == key.lower()]
        close = close or difflib.get_close_matches(str(key), known, n=1, cutoff=0.8)
        if key == ENABLE_FLAG:
            raise ConfigError(f"parallel_config.{key}", obj[key], UPSTREAM_FLAGS_ALLOWED,
                              "upstream 494f293b5 has no enable key")
        if close:
            raise ConfigError(f"parallel_config.{key}", obj[key], f"a ParallelConfig key; did you mean {close[0]}?",
                              "keys are case-sensitive" if close[0].lower() == str(key).lower() else "")
        what = "a nested object (a ParallelConfig JSON is one flat object)" if isinstance(obj[key], Mapping) else ""
        raise ConfigError(f"parallel_config.{key}", obj[key], "a ParallelConfig key: " + ", ".join(known), what)
    out: dict = {}

    def json_int(key: str) -> int:
        value = obj[key]
        if isinstance(value, (bool, float)) or not isinstance(value, int):  # JSON ints only; 2.0 is a writer's mistake
            raise ConfigError(key, value, "a JSON integer")
        return value

    for key in PARALLEL_IGNORED_KEYS:  # read for their type even though they do not change the plan
        if key in obj and key not in ("communication_backend",) and not key.startswith("enable_"):
            json_int(key)
    if SIZE_FLAG in obj:
        out["split_size"] = json_int(SIZE_FLAG)
    if ENABLE_FLAG in obj:
        out["enable"] = parse_bool(ENABLE_FLAG, obj[ENABLE_FLAG])
    layout = {k: json_int(k) for k in PARALLEL_LAYOUT_KEYS if k in obj}
    if layout:
        for key, value in layout.items():
            if value < (0 if key == "kv_split_size" else 1):
                raise ConfigError(f"parallel_config.{key}", value, ">= 0" if key == "kv_split_size" else ">= 1")
        dp, cp = layout.get("dp_size", 1), layout.get("cp_size", 1)
        world = layout.get("world_size")
        if "tp_size" in layout:
            from_tp = dp * cp * layout["tp_size"]
            if world is not None and world != from_tp:
                raise ConfigError("parallel_config.world_size", world,
                                  f"dp_size {dp} * cp_size {cp} * tp_size {layout['tp_size']} = {from_tp}",
                                  f"world_size {world} != {from_tp}")
            world = from_tp
        parallel = {"dp_size": dp, "cp_size": cp}
        if world is not None:
            parallel["world_size"] = world
        if "kv_split_size" in layout:
            parallel["kv_split_size"] = layout["kv_split_size"]
        out["parallel"] = parallel
    return out


def flags_from_parallel_config_json(obj: Union[str, bytes, Mapping], semantics: str = DEFAULT_SEMANTICS) -> LayerwiseFlags:
    """From a ParallelConfig JSON: a missing ``layerwise_split_size`` means 1; then the semantics'
    rule: under the adaptation the JSON alone (no enable key) leaves the split off, under upstream
    s > 1 alone turns it on."""
    got = parallel_config_settings(obj, semantics)
    return layerwise_state(semantics, got.get("enable"), got.get("split_size", 1))[0]


def merge_settings(routes: Sequence[tuple]) -> dict:
    """[(route name, settings)] -> one settings dict; a key two routes set to different values is
    refused naming both (an engine started with both would not tell which one it used)."""
    merged: dict = {}
    where: dict = {}
    for route, settings in routes:
        flat = {k: v for k, v in settings.items() if not isinstance(v, (dict, list))}
        for group in ("parallel", "cache", "draft", "memory", "named"):
            flat.update({f"{group}.{k}": v for k, v in settings.get(group, {}).items()})
        if settings.get("unread"):
            merged["unread"] = [*merged.get("unread", []), *settings["unread"]]
        for key, value in flat.items():
            if key in merged and merged[key] != value:
                name = {"split_size": SIZE_FLAG, "enable": ENABLE_FLAG}.get(key, key)
                raise ConfigError(name, f"{where[key]} {merged[key]!r} vs {route} {value!r}",
                                  "one value: --gflags and --parallel-config must agree")
            merged[key], where[key] = value, route
    return merged
