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

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import (
    ConfigAttributeError,
    ConfigKeyError,
    ConfigTypeError,
    OmegaConfBaseException,
    ValidationError,
)

from contract.errors import ConfigError
from harness.config.schema import APP_GROUPS, GROUPS, Config, group_options
from harness.paths import CONF_DIR, CONFIG_NAME

_PATH_PART_RE = re.compile(r"[^.\[\]]+")
"""The parts of a key path: ``placement[1]`` -> placement, 1 (a key the user wrote, not a message)."""


class UnknownKeyError(ConfigError):
    """A key the schema does not have (misspelled, or an override of a key that does not exist)."""

    def __init__(self, key: str, parent: str, allowed: Sequence[str]) -> None:
        where = f"under {parent}" if parent else "at the top level"
        close = difflib.get_close_matches(key.rsplit(".", 1)[-1], allowed, n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        super().__init__(key, None, f"allowed keys {where}: {', '.join(allowed)}")
        self.args = (f"{key}: no such key{hint}; allowed keys {where}: {', '.join(allowed)}",)


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
    if parent == "implementation":  # an implementation's own argument: name the options that take it
        takers = implementation_options_with(full_key.split(".", 1)[1])
        if takers:
            error = ConfigError(full_key, None, f"a key of {', '.join(takers)}")
            error.args = (f"{full_key}: not a key of the chosen implementation; the implementation options that "
                          f"take it: {', '.join(takers)} (choose one: implementation={takers[0]})",)
            return error
    if parent and not allowed:  # a free-form node (hardware.facts, implementation kwargs)
        error = ConfigError(full_key, None, f"no such key; add one with +{full_key}=VALUE")
        error.args = (f"{full_key}: no such key under {parent}; add one with +{full_key}=VALUE",)
        return error
    return UnknownKeyError(full_key, parent, allowed)


def implementation_options_with(key: str, conf_dir: Optional[Path] = None) -> list[str]:
    """The ``implementation`` options whose file sets ``key`` (``source_dir``: ``xllm_native``); read only
    for an error message."""
    folder = (conf_dir or CONF_DIR) / "implementation"
    found = []
    for option in group_options(conf_dir or CONF_DIR, "implementation"):
        try:
            node = OmegaConf.load(folder / f"{option}.yaml")
        except Exception:  # an option file that does not load is not one that takes the key
            continue
        if isinstance(node, DictConfig) and key in node:
            found.append(option)
    return found


def wrong_type(full_key: str, value: object, message: str) -> ConfigError:
    annotation, _, _ = _schema_path(full_key)
    if annotation is None:
        return ConfigError(full_key, value, "wrong type", _first_line(message))
    return ConfigError(full_key, value, "must be " + describe_type(annotation))


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else ""


def translate(exc: BaseException, conf_dir: Path, parsed: Sequence) -> ConfigError:
    """The one-line ``ConfigError`` for an exception raised by Hydra's ``compose``.

    ``parsed`` are the overrides it composed (``compose.parse_overrides``). The error is read
    from the exception's own fields (Hydra's ``MissingConfigException.missing_cfg_file``,
    OmegaConf's ``full_key`` / ``value`` / ``msg`` on the error Hydra chains) and from the
    overrides themselves, never from the wording of Hydra's message.
    """
    # Hydra (87 ms, python -X importtime): pytest's start-up imports this module and composes nothing
    from hydra.errors import MissingConfigException

    if isinstance(exc, MissingConfigException) and exc.missing_cfg_file:
        group, _, option = exc.missing_cfg_file.partition("/")
        if group in GROUPS:
            return unknown_option(conf_dir, group, option)
    cause = exc.__cause__ or exc.__context__ or exc  # OmegaConf's error, raised from or during Hydra's
    full_key = getattr(cause, "full_key", None) if isinstance(cause, OmegaConfBaseException) else None
    error: Optional[ConfigError] = None
    if isinstance(cause, (ConfigKeyError, ConfigAttributeError)) and full_key:
        error = unknown_key(full_key)
    elif isinstance(cause, ValidationError) and full_key:
        error = wrong_type(full_key, getattr(cause, "value", None), getattr(cause, "msg", None) or str(cause))
    elif isinstance(cause, ConfigTypeError) and full_key and _override_of(parsed, full_key, delete=True):
        error = ConfigError(full_key, None, "cannot be deleted: the schema needs it; set a value instead")
    if error is not None:
        if not _override_of(parsed, full_key):  # a mistake inside a YAML option: name the file
            error.args = (f"{error.args[0]} (in {_option_file(conf_dir, parsed, full_key)}.yaml)",)
        return error
    draft_keys = [o for o in parsed if o.key_or_group.startswith("draft.")]
    if draft_keys and _chosen_option(conf_dir, parsed, "draft") == "none":
        return ConfigError(
            draft_keys[0].key_or_group, draft_keys[0].get_value_element_as_str(),
            f"no draft model is selected (draft=none); choose one first: "
            f"draft={' / draft='.join(o for o in group_options(conf_dir, 'draft') if o != 'none')}",
        )
    for o in parsed:  # an override of a key the schema does not have (Hydra refuses it by name)
        key = o.key_or_group
        if key not in GROUPS + APP_GROUPS and key.split(".", 1)[0] != "hydra" and not _schema_has(key):
            return unknown_key(key)
    return ConfigError("overrides", " ".join(o.input_line for o in parsed), "could not compose the config",
                       _first_line(str(exc)))


def _override_of(parsed: Sequence, full_key: str, *, delete: bool = False) -> bool:
    """Whether a key override (a delete, with ``delete``) sets ``full_key`` or a node above it.

    A group choice (``model=mine``) sets no key: a mistake under ``model.`` is in its YAML.
    """
    return any(
        (full_key == o.key_or_group or full_key.startswith((o.key_or_group + ".", o.key_or_group + "[")))
        and (o.is_delete() if delete else o.key_or_group not in GROUPS + APP_GROUPS)
        for o in parsed
    )


def _chosen_option(conf_dir: Path, parsed: Sequence, group: str) -> Optional[str]:
    """The option of ``group`` an override chooses, else the primary config's defaults list."""
    for o in reversed(parsed):
        if o.key_or_group == group and not o.is_delete() and isinstance(o.value(), str):
            return o.value()
    for entry in OmegaConf.to_container(OmegaConf.load(conf_dir / f"{CONFIG_NAME}.yaml")).get("defaults", []):
        if isinstance(entry, dict) and group in entry:
            return str(entry[group])
    return None


def _option_file(conf_dir: Path, parsed: Sequence, full_key: str) -> str:
    """``group/option`` of the YAML that set ``full_key`` (the primary config for keys outside the groups)."""
    group = _PATH_PART_RE.findall(full_key)[0]
    option = _chosen_option(conf_dir, parsed, group) if group in GROUPS else None
    return f"{group}/{option}" if option else CONFIG_NAME


def _schema_has(key: str) -> bool:
    """Whether the schema has ``key`` (any key under a free-form node counts)."""
    parts = _PATH_PART_RE.findall(key)
    node: Any = Config
    for part in parts:
        node = _unwrap_optional(node)
        if not dataclasses.is_dataclass(node):
            return True  # a free-form node (hardware.facts, implementation kwargs) or a list item
        hints = typing.get_type_hints(node)
        if part not in hints:
            return False
        node = hints[part]
    return True
