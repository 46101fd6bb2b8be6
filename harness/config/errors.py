"""Hydra / OmegaConf failures turned into one-line ``UserError``s in the override vocabulary.

Hydra's own messages are multi-line and speak of search paths and merge steps;
a user wants ``layerwise.spilt_size: no such key; allowed keys under layerwise:
enable, split_size``. Every message names the key (or group) and what would be
accepted, read from the schema (``schema.Config``) and the YAMLs in ``conf/``.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
import typing
from pathlib import Path
from typing import Any, Optional, Sequence

from harness.config.schema import Config
from implementations.errors import ConfigError

GROUPS = ("model", "draft", "hardware", "parallel", "layerwise", "implementation")
"""Config groups: a directory of YAML options each."""
APP_GROUPS = ("suite", "mode", "launcher")
"""Config groups of ``python -m harness`` (what it runs and where), beside the run's ``GROUPS``."""

_MISSING_OPTION_RE = re.compile(r"Could not (?:find|load) '([^/']+)/([^']*)'")
_PATH_PART_RE = re.compile(r"[^.\[\]]+")
_IN_FILE_RE = re.compile(r"In '([^']+)': (\w+) raised while composing config")
_FULL_KEY_RE = re.compile(r"full_key: (\S+)")
_VALUE_RE = re.compile(r"Value '(.*?)' (?:of type|is not)")


class UnknownKeyError(ConfigError):
    """A key the schema does not have (misspelled, or an override of a key that does not exist)."""

    def __init__(self, key: str, parent: str, allowed: Sequence[str]) -> None:
        where = f"under {parent}" if parent else "at the top level"
        close = difflib.get_close_matches(key.rsplit(".", 1)[-1], allowed, n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        super().__init__(key, None, f"allowed keys {where}: {', '.join(allowed)}")
        self.args = (f"{key}: no such key{hint}; allowed keys {where}: {', '.join(allowed)}",)


def group_options(conf_dir: Path, group: str) -> list[str]:
    """Option names of a config group: the YAML files in ``conf/<group>``."""
    return sorted(p.stem for p in (conf_dir / group).glob("*.yaml"))


def empty_value(conf_dir: Path, key: str) -> ConfigError:
    """An override or sweep with no value (``model=``, ``model=choice()``)."""
    if key in GROUPS + APP_GROUPS:
        allowed = f"give one or more of {', '.join(group_options(conf_dir, key))}, e.g. {key}=a,b"
    else:
        allowed = f"give one or more values, e.g. {key}=1,2"
    return ConfigError(key, "", f"no value (an empty sweep); {allowed}")


def unknown_option(conf_dir: Path, group: str, option: str) -> ConfigError:
    options = group_options(conf_dir, group)
    detail = ""
    if group == "model" and (option.endswith(".json") or "/" in option):
        detail = "a Hugging Face config.json is given as model_path=PATH"
    return ConfigError(group, option, f"unknown option; allowed: {', '.join(options)}", detail)


def _schema_path(full_key: str) -> tuple[Optional[Any], Optional[type], str]:
    """(type annotation of ``full_key``, dataclass holding it, parent key) by walking ``Config``."""
    parts = _PATH_PART_RE.findall(full_key)
    node: Any = Config
    owner: Optional[type] = None
    for part in parts:
        node = _unwrap_optional(node)
        if dataclasses.is_dataclass(node):
            hints = typing.get_type_hints(node)
            if part not in hints:
                return None, node, ""
            owner, node = node, hints[part]
        elif typing.get_origin(node) in (list, dict):
            owner, node = None, typing.get_args(node)[-1]
        else:
            return None, None, ""
    parent = full_key.rsplit(".", 1)[0] if "." in full_key else ""
    return node, owner, parent


def _unwrap_optional(annotation: Any) -> Any:
    if typing.get_origin(annotation) is typing.Union:
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return annotation


def describe_type(annotation: Any) -> str:
    """``int`` -> "an int", ``Optional[List[int]]`` -> "a list of int or null"."""
    inner = _unwrap_optional(annotation)
    suffix = " or null" if inner is not annotation else ""
    origin = typing.get_origin(inner)
    if origin is list:
        return f"a list of {typing.get_args(inner)[0].__name__}{suffix}"
    if origin is dict:
        return f"a mapping{suffix}"
    names = {int: "an int", float: "a number", bool: "a bool (true or false)", str: "a string"}
    return names.get(inner, "a value of the schema's type") + suffix


def allowed_keys(parent: str) -> list[str]:
    """Keys the schema allows under ``parent`` ('' for the top level)."""
    node = Config
    if parent:
        node, _, _ = _schema_path(parent)
        node = _unwrap_optional(node)
    if dataclasses.is_dataclass(node):
        return [f.name for f in dataclasses.fields(node)]
    return []


def unknown_key(full_key: str) -> ConfigError:
    parent = full_key.rsplit(".", 1)[0] if "." in full_key else ""
    allowed = allowed_keys(parent)
    if parent and not allowed:  # a free-form node (hardware.facts, implementation kwargs)
        error = ConfigError(full_key, None, f"no such key; add one with +{full_key}=VALUE")
        error.args = (f"{full_key}: no such key under {parent}; add one with +{full_key}=VALUE",)
        return error
    return UnknownKeyError(full_key, parent, allowed)


def wrong_type(full_key: str, value: object, message: str) -> ConfigError:
    annotation, _, _ = _schema_path(full_key)
    if annotation is None:
        return ConfigError(full_key, value, "wrong type", _first_line(message))
    return ConfigError(full_key, value, "must be " + describe_type(annotation))


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else ""


def translate(exc: BaseException, conf_dir: Path, overrides: Sequence[str]) -> ConfigError:
    """The one-line ``ConfigError`` for an exception raised by Hydra's ``compose``."""
    from omegaconf.errors import ConfigKeyError, ConfigTypeError, ValidationError

    text = str(exc)
    match = _MISSING_OPTION_RE.search(text)
    if match and match.group(1) in GROUPS:
        return unknown_option(conf_dir, match.group(1), match.group(2))
    cause = exc.__cause__ if exc.__cause__ is not None else exc
    full_key = getattr(cause, "full_key", None)
    if isinstance(cause, ConfigKeyError) and full_key:  # ConfigAttributeError is one too
        return unknown_key(full_key)
    if isinstance(cause, ValidationError) and full_key:
        return wrong_type(full_key, getattr(cause, "value", None), getattr(cause, "msg", text))
    in_file = _IN_FILE_RE.search(text)
    file_key = _FULL_KEY_RE.search(text)
    if in_file and file_key:  # a mistake inside a YAML option: Hydra keeps only the text
        kind, key = in_file.group(2), file_key.group(1)
        if kind in ("ConfigKeyError", "ConfigAttributeError"):
            error = unknown_key(key)
        else:
            value = _VALUE_RE.search(text)
            error = wrong_type(key, value.group(1) if value else None, text.split("\n", 1)[-1])
        error.args = (f"{error.args[0]} (in {in_file.group(1)}.yaml)",)
        return error
    if isinstance(cause, ConfigTypeError) and full_key and "deletion" in text + str(cause):
        return ConfigError(full_key, None, "cannot be deleted: the schema needs it; set a value instead")
    if "Unexpected type for root: NoneType" in text:
        from harness.config.compose import parse_overrides

        draft_keys = [o for o in parse_overrides(overrides) if o.key_or_group.startswith("draft.")]
        if draft_keys:
            return ConfigError(
                draft_keys[0].key_or_group, draft_keys[0].get_value_element_as_str(),
                f"no draft model is selected (draft=none); choose one first: "
                f"draft={' / draft='.join(o for o in group_options(conf_dir, 'draft') if o != 'none')}",
            )
    match = re.search(r"Could not (?:override|delete) '([^']+)'", text)
    if match:
        return unknown_key(match.group(1))
    return ConfigError("overrides", " ".join(overrides), "could not compose the config", _first_line(text))
