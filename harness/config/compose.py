"""Compose ``conf/config.yaml`` with Hydra overrides into a checked ``DictConfig``.

The override vocabulary is the one every command uses: config groups ``model``,
``draft``, ``hardware``, ``parallel``, ``layerwise``, ``implementation`` (``group=option``)
and keys such as ``layerwise.split_size=2``, ``parallel.dp_size=2``,
``cache.block_size=64``. Any mistake (unknown option, misspelled key, wrong type,
malformed override, a sweep where one value is needed) is a one-line
``ConfigError``, never a Hydra traceback.

A model from a local Hugging Face ``config.json``: give ``model_path=PATH`` (a
schema key, so it is typed, shown in the composed config and sweepable). The
loaded numbers replace the ``model`` node; ``model.<key>=...`` overrides given with
it still apply on top, e.g.
``model_path=/ckpt/Qwen3.5/config.json model.mamba_ssm_dtype=float32``.
``draft_path=PATH`` does the same for the speculative draft (``draft.<key>=...`` on top).
"""

from __future__ import annotations

import copy
import functools
import re
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Optional, Sequence, Union

from omegaconf import MISSING, DictConfig, OmegaConf, open_dict
from omegaconf.errors import ConfigAttributeError, ConfigKeyError, OmegaConfBaseException

from contract.errors import ConfigError
from harness.config import errors
from harness.config.build import node_values
from harness.config.hf_loader import model_spec_from_hf_config
from harness.config.schema import APP_GROUPS, GROUPS, Config, ModelConfig, group_options
from harness.config.targets import check_override_targets
from harness.paths import CONF_DIR, CONFIG_NAME


def compose_config(overrides: Sequence[str] = (), config_dir: Optional[Union[str, Path]] = None) -> DictConfig:
    """The composed, schema-checked config for ``overrides``; ``ConfigError`` on any mistake."""
    conf_dir = Path(config_dir).resolve() if config_dir is not None else CONF_DIR
    if not (conf_dir / f"{CONFIG_NAME}.yaml").is_file():
        raise ConfigError("config_dir", str(conf_dir), f"a directory holding {CONFIG_NAME}.yaml")
    parsed = parse_overrides(list(overrides))
    return finish(_composition(conf_dir).compose(parsed), parsed, conf_dir)


def hydra_compose(overrides: Sequence[str] = (), conf_dir: Path = CONF_DIR, *,
                  return_hydra_config: bool = False) -> DictConfig:
    """Hydra's own composition of ``overrides`` (its public ``compose``), unchecked and unfinished: what the
    composer reads each option from, once, and what the tests hold ``compose_config`` to."""
    # Hydra (87 ms, python -X importtime): pytest's start-up imports this module and composes nothing
    from hydra import compose, initialize_config_dir

    # harness.config.store imports Hydra (87 ms, python -X importtime): pytest's start-up composes nothing
    from harness.config.store import register

    register()
    with _fresh_hydra(), initialize_config_dir(config_dir=str(conf_dir), version_base=None):
        return compose(config_name=CONFIG_NAME, overrides=list(overrides), return_hydra_config=return_hydra_config)


# -- the composer: each config-group option read once ---------------------------------------
#
# Hydra's composition costs ~0.1 s, and a test matrix composes hundreds of configurations that
# differ only in which option each group takes and in a few keys (tools/bench/compose.py). So a
# process reads each group option once (``_Composition.option``: from its file alone where that
# is all Hydra does, else what Hydra composes for that one choice, ``mode=plan``) and every
# configuration is assembled from those: the default config with each chosen group's node swapped
# in and the keys an option writes outside its group set, then the key overrides applied as
# Hydra applies them (``_apply_key_override``). testcases/unit/test_config.py holds the result to
# Hydra's whole composition for every shipped option, the CI matrix and each override form.
# ``option_node`` gives the same nodes to readers that need one group only. A group whose value
# is null (``draft: null``) has no node to share: its "node" is None.


@dataclass(frozen=True)
class _Option:
    """What choosing one option does to the default config."""

    node: Any
    """The group's node (None where the option sets it to null, or the group names no key: ``mode``)."""
    outside: tuple
    """(dotted key, value) for each key outside the group that the option sets (``suite.mode`` for ``mode=plan``)."""


class _Composition:
    """What this process has read from one config directory: the harness's one cache of config
    reading (the default config, and each group option)."""

    def __init__(self, conf_dir: Path) -> None:
        self.conf_dir = conf_dir
        primary = OmegaConf.load(conf_dir / f"{CONFIG_NAME}.yaml")
        self.primary_keys = frozenset(k for k in primary if k not in ("defaults", "hydra"))
        """Keys the primary config sets itself (besides its defaults list and ``hydra``)."""
        entries = [e for e in primary.get("defaults", []) if isinstance(e, DictConfig)]
        self.default_choice = {str(k): str(v) for e in entries for k, v in e.items() if str(k) in CHOICE_GROUPS}
        """Group -> the option the primary config's defaults list takes."""
        self.order = tuple(self.default_choice) + tuple(g for g in CHOICE_GROUPS if g not in self.default_choice)
        """Groups in the order of the defaults list: the order Hydra merges them in."""
        self.schema = OmegaConf.structured(Config)
        self._found: dict = {}
        self._bases: dict = {}

    def _once(self, key: tuple, make):
        """``make()``, once per ``key``: its value, or the exception it raised (raised again each time)."""
        if key not in self._found:
            try:
                self._found[key] = make(), None
            except Exception as exc:  # Hydra/OmegaConf raise many types; each is the user's input here
                self._found[key] = None, exc
        value, error = self._found[key]
        if error is not None:
            raise error.with_traceback(None)  # the same error again, not a traceback grown by each raise
        return value

    def default(self) -> DictConfig:
        """Hydra's composition of the default config."""
        return self._once(("default",), lambda: hydra_compose((), self.conf_dir))

    def hydra_node(self) -> DictConfig:
        """The default config's ``hydra`` node, against which ``hydra.*`` overrides are checked."""
        return self._once(("hydra",), lambda: hydra_compose((), self.conf_dir, return_hydra_config=True).hydra)

    def option(self, group: str, option: str) -> _Option:
        """What choosing ``option`` of ``group`` does; Hydra's exception where it cannot be composed."""
        return self._once((group, option), lambda: self._read_option(group, option))

    def _read_option(self, group: str, option: str) -> _Option:
        node = self.read_alone(group, option)
        if node is not None:
            return _Option(node, ())
        base, alone = self.default(), hydra_compose((f"{group}={option}",), self.conf_dir)
        outside = _changed_leaves(_without(base, group), _without(alone, group))
        if outside is None or _chooses_other_options(self.conf_dir / group / f"{option}.yaml"):
            raise ConfigError(group, option, "an option that sets keys; not one that chooses another group's "
                              "option (a defaults list with override /group) or removes keys outside its group")
        return _Option(alone[group] if group in alone else None, outside)

    def read_alone(self, group: str, option: str):
        """The option's node as Hydra's composition makes it, read from its file alone (Hydra's compose
        costs ~0.1 s per option; this, a few ms): its YAML merged into the schema's node of the group.

        Only where that is all Hydra does: the file has no ``@package`` header and no defaults list,
        so it writes its own group and nothing else, and the primary config sets nothing under the
        group. Else None, and the option is composed by Hydra.
        """
        path = self.conf_dir / group / f"{option}.yaml"
        try:
            if group not in GROUPS or not path.is_file() or group in self.primary_keys:
                return None
        except OSError:  # a name past the system's limit (ENAMETOOLONG): Hydra's composition refuses it
            return None
        if "@package" in path.read_text(encoding="utf-8"):
            return None
        try:
            loaded = OmegaConf.load(path)
            if not isinstance(loaded, DictConfig) or "defaults" in loaded:
                return None
            return OmegaConf.merge(self.schema, {group: loaded})[group]
        except Exception:  # Hydra composes it and reports the problem in its words
            return None

    def base(self, nodes: dict) -> tuple:
        """(a config to copy a configuration from, its group nodes by group) for one taking the option nodes
        ``nodes`` (group -> node, None for a null one).

        The default config, where each group it sets to null (``draft: null``) and the configuration sets to
        a node holds a node instead, so that the configuration's node substitutes it as any other group's:
        ``cfg[group]`` is a group's node itself only where its value is a config. Made once per such set of
        groups, and never modified after."""
        default = self.default()
        if not self._bases:
            self._bases[frozenset()] = default, {g: default[g] for g in CHOICE_GROUPS if g in default}
        plain = self._bases[frozenset()][1]
        lifted = frozenset(g for g, node in nodes.items() if node is not None and plain.get(g) is None)
        if lifted not in self._bases:
            config = default
            if lifted:
                config = copy.deepcopy(default)
                for group in sorted(lifted):
                    config[group] = nodes[group]  # a stand-in: each configuration substitutes its own node
            self._bases[lifted] = config, {g: config[g] for g in CHOICE_GROUPS if g in config}
        return self._bases[lifted]

    def compose(self, parsed: Sequence) -> DictConfig:
        """The configuration of ``parsed`` (``parse_overrides``), before ``finish``: Hydra's result."""
        try:
            return self._compose(parsed)
        except ConfigError:
            raise
        except Exception as exc:  # Hydra/OmegaConf raise many types; each is the user's input here
            raise errors.translate(exc, self.conf_dir, parsed) from None

    def _compose(self, parsed: Sequence) -> DictConfig:
        # Hydra (87 ms, python -X importtime): pytest's start-up imports this module and composes nothing
        from hydra.errors import ConfigCompositionException

        choices, deleted, keys = _sorted_overrides(parsed, self.default_choice)
        options = {group: self.option(group, option) for group, option in choices.items()}
        nodes = {g: o.node for g, o in options.items() if g in GROUPS or g in self.default()}
        base, defaults = self.base(nodes)
        # One copy of the default config in which each chosen group's node is a fresh copy of the
        # option's node (copy.deepcopy's memo substitutes it; the copy re-parents it). Assigning the
        # nodes after copying would copy each group twice and validate nodes Hydra already typed.
        # An option that sets its group to null where the default holds a node is assigned after.
        memo, assigned = {}, {}
        for group, node in nodes.items():
            if node is not None:
                memo[id(defaults[group])] = copy.deepcopy(node)
            elif defaults[group] is not None:
                assigned[group] = node
        cfg = copy.deepcopy(base, memo)
        for group, node in assigned.items():
            cfg[group] = node
        for group in self.order:  # keys an option sets outside its group, in the order Hydra merges them
            if group in deleted:
                self._unset(cfg, group)
            elif group in options:
                for key, value in options[group].outside:
                    OmegaConf.update(cfg, key, value, merge=False, force_add=True)
        hydra_node = None
        for override in keys:  # in the order given, as Hydra applies them
            if override.key_or_group.split(".", 1)[0] == "hydra":
                if hydra_node is None:  # checked against the app's node, which the composed config leaves out
                    hydra_node = OmegaConf.create({"hydra": copy.deepcopy(self.hydra_node())})
                    OmegaConf.set_struct(hydra_node, True)
                _apply_key_override(hydra_node, override, ConfigCompositionException)
            else:
                _apply_key_override(cfg, override, ConfigCompositionException)
        return cfg

    def _unset(self, cfg: DictConfig, group: str) -> None:
        """``~group``: what the default config holds without the group's option (the schema's value)."""
        if group in cfg:
            cfg[group] = MISSING if OmegaConf.is_missing(self.schema, group) else copy.deepcopy(self.schema[group])
        default_option = self.default_choice.get(group)
        if default_option is not None:
            for key, _ in self.option(group, default_option).outside:
                OmegaConf.update(cfg, key, OmegaConf.select(self.schema, key), merge=False, force_add=True)


def _chooses_other_options(path: Path) -> bool:
    """Whether the option's defaults list overrides another group's option (``override /hardware: x``; the app's
    ``override /hydra/...`` aside): a choice on the command line would then be Hydra's to order against it."""
    try:
        loaded = OmegaConf.load(path)
    except Exception:  # Hydra read it: anything unreadable here chooses nothing the composer could see
        return False
    entries = loaded.get("defaults", []) if isinstance(loaded, DictConfig) else []
    return any(isinstance(e, DictConfig) and any(str(k).startswith("override /") and not str(k).startswith(
        "override /hydra/") for k in e) for e in entries)


CHOICE_GROUPS = GROUPS + APP_GROUPS
"""Config groups an override chooses an option of."""


def _sorted_overrides(parsed: Sequence, default_choice: dict) -> tuple:
    """(group -> chosen option, deleted groups, key overrides in order) of ``parsed``; Hydra's refusal
    (``ConfigCompositionException``, its words) of a group override it would refuse."""
    # Hydra (87 ms, python -X importtime): pytest's start-up imports this module and composes nothing
    from hydra.errors import ConfigCompositionException

    choices: dict = {}
    deleted: set = set()
    keys = []
    for o in parsed:
        key = o.key_or_group
        if key not in CHOICE_GROUPS:
            if not key.startswith("hydra/"):  # hydra/<group>: the app's own config, which composition leaves out
                keys.append(o)
            continue
        value = o.value()
        if o.package is not None:
            raise ConfigCompositionException(f"Could not override '{key}@{o.package}'.")
        if o.is_force_add():
            raise ConfigCompositionException(f"force-add of config groups is not supported: '{o.input_line}'")
        if o.is_add():
            raise ConfigCompositionException(f"Multiple values for {key}. To override a value use "
                                             f"'override {key}: {value}'")
        if o.is_delete():
            chosen = choices.get(key, default_choice.get(key))
            if value is not None and value != chosen:
                raise ConfigCompositionException(f"Could not delete '{key}={value}'. No match in the defaults list")
            choices.pop(key, None)
            deleted.add(key)
            continue
        if not isinstance(value, str):
            raise ConfigCompositionException(f"Config group override must be a string or a list. "
                                             f"Got {type(value).__name__}")
        choices[key] = value
    for group in deleted:  # a deleted group stays deleted, whichever comes first (as in Hydra's defaults list)
        choices.pop(group, None)
    return choices, deleted, keys


def _apply_key_override(cfg: DictConfig, override, failure: type) -> None:
    """One key override applied as Hydra's composition applies it (``key=value``, ``+key=value``,
    ``++key=value``, ``~key[=value]``), raising ``failure`` (Hydra's ``ConfigCompositionException``) with its
    words and the OmegaConf error it came from, for ``errors.translate`` to read."""
    key, value = override.key_or_group, override.value()
    try:
        if override.is_delete():
            found = OmegaConf.select(cfg, key, throw_on_missing=False)
            if found is None:
                raise failure(f"Could not delete from config. '{key}' does not exist.")
            if value is not None and value != found:
                raise failure(f"Could not delete from config. The value of '{key}' is {found} and not {value}.")
            parent, _, last = key.rpartition(".")
            with open_dict(cfg):
                del (OmegaConf.select(cfg, parent) if parent else cfg)[last]
        elif override.is_add():
            if OmegaConf.select(cfg, key, throw_on_missing=False) is None or isinstance(value, (dict, list)):
                OmegaConf.update(cfg, key, value, merge=True, force_add=True)
            else:
                raise failure(f"Could not append to config. An item is already at '{key}'.")
        elif override.is_force_add():
            OmegaConf.update(cfg, key, value, merge=True, force_add=True)
        else:
            try:
                OmegaConf.update(cfg, key, value, merge=True)
            except (ConfigAttributeError, ConfigKeyError) as exc:
                raise failure(f"Could not override '{key}'.\nTo append to your config use +{override.input_line}") from exc
    except OmegaConfBaseException as exc:
        raise failure(f"Error merging override {override.input_line}") from exc


def _changed_leaves(before: dict, after: dict, prefix: str = "") -> Optional[tuple]:
    """(dotted key, value) for each leaf ``after`` sets differently from ``before`` (lists are leaves);
    None where ``after`` lacks a key ``before`` has."""
    if set(before) - set(after):
        return None
    out = []
    for key, value in after.items():
        old = before.get(key, _UNSET)
        if isinstance(value, dict) and isinstance(old, dict):
            inner = _changed_leaves(old, value, f"{prefix}{key}.")
            if inner is None:
                return None
            out += inner
        elif old is _UNSET or old != value or type(old) is not type(value):
            out.append((f"{prefix}{key}", value))
    return tuple(out)


_UNSET = object()
_compositions: dict = {}
"""conf_dir -> its ``_Composition`` (one per directory a process composes from)."""


def _composition(conf_dir: Path) -> _Composition:
    # harness.config.store imports Hydra (87 ms, python -X importtime): pytest's start-up composes nothing
    from harness.config.store import register

    key = str(conf_dir)
    if key not in _compositions:
        register()
        _compositions[key] = _Composition(conf_dir)
    return _compositions[key]


def option_node(group: str, option: str, conf_dir: Optional[Path] = None):
    """Group ``group``'s node (typed by the schema) when ``option`` is chosen, as Hydra composes it (None
    where the option sets the group to null, ``draft=none``); shared, never to be modified. ``ConfigError``
    where composing the option fails."""
    conf_dir = conf_dir if conf_dir is not None else CONF_DIR
    try:
        return _composition(conf_dir).option(group, option).node
    except ConfigError:
        raise
    except Exception as exc:  # Hydra/OmegaConf raise many types; each is the user's input here
        raise errors.translate(exc, conf_dir, parse_overrides([f"{group}={option}"])) from None


def _without(cfg: DictConfig, group: str) -> dict:
    data = OmegaConf.to_container(cfg, resolve=False)
    data.pop(group, None)
    return data


def finish(cfg: DictConfig, parsed: Sequence, conf_dir: Path = CONF_DIR) -> DictConfig:
    """The checks Hydra's composition leaves out, and ``model_path``; on a composed ``cfg``.

    ``parsed`` are the overrides it was composed with (``parse_overrides``). ``compose_config`` calls it on
    every configuration it composes; the tests call it on Hydra's whole composition to compare the two.
    """
    try:
        if any(o.is_add() or o.is_force_add() for o in parsed):
            _check_schema(cfg, conf_dir, parsed)
        _check_missing(cfg, conf_dir)
        OmegaConf.to_container(cfg, resolve=True)  # a bad ${...} given by the user fails here, as one line
    except ConfigError:
        raise
    except Exception as exc:  # OmegaConf interpolation / resolver errors
        raise errors.translate(exc, conf_dir, parsed) from None
    if cfg.model_path is not None:
        _load_model_path(cfg, parsed)
    if cfg.draft_path is not None:
        _load_model_path(cfg, parsed, node="draft")
    return cfg


def parse_override(text: str, *, sweep: bool = False):
    """Hydra's parse of one override (its ``Override``): the one override parser of the harness.

    ``ConfigError`` naming the override when it is malformed, has no key, or (unless
    ``sweep``) is a sweep where one value is needed. ``.key_or_group`` is the key,
    ``.value()`` the typed value (what Hydra itself would set).
    """
    if not isinstance(text, str):
        raise ConfigError("override", text, "a string key=value")
    return _parse_checked(text, sweep)


@functools.lru_cache(maxsize=4096)
def _parse_checked(text: str, sweep: bool):
    """``parse_override``'s work, once per distinct text (a test matrix repeats a few dozen overrides
    thousands of times). A refusal raises every time; the shared result is never modified."""
    # Hydra (87 ms, python -X importtime): pytest's start-up imports this module and composes nothing
    from hydra.errors import HydraException

    try:
        override = _parser().parse_override(text)
    except (HydraException, ValueError, RecursionError) as exc:  # ValueError: an int past Python's digit limit
        key, _, value = text.partition("=")
        if _EMPTY_CHOICE.fullmatch(value):  # what the user wrote, not Hydra's wording of its refusal
            raise errors.empty_value(CONF_DIR, key.lstrip("+~")) from None
        detail = str(exc).strip().splitlines()
        key, _, value = text.partition("=")
        hint = (f"; quote a value with non-ASCII characters: {key}='{value}'"
                if not value.isascii() and value[:1] not in "'\"" else "")
        raise ConfigError(
            "override", text,
            "malformed; use group=option (model=deepseek_v3), key=value (layerwise.split_size=2)"
            + (" or a sweep (model=a,b)" if sweep else "") + hint,
            detail[-1] if detail else "",
        ) from None
    if not override.key_or_group:
        raise ConfigError("override", text, "a key or group before '='")
    if override.is_sweep_override() and not sweep:
        raise ConfigError(
            override.key_or_group, override.input_line.split("=", 1)[-1],
            "one value here; sweeps (a,b / range()) need `python -m harness -m ...`",
        )
    if (override.key_or_group in errors.GROUPS + errors.APP_GROUPS and not override.is_delete()
            and isinstance(override.value(), list)):
        raise ConfigError(override.key_or_group, override.input_line.split("=", 1)[-1],
                          "one option (a list would merge several options into one config); "
                          "a sweep over options is `python -m harness -m group=a,b`")
    _check_values(override)
    return override


_EMPTY_CHOICE = re.compile(r"\s*choice\(\s*\)\s*")
"""``model=choice()``: a sweep of no value, which Hydra's parser refuses."""
_OPTION_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_-]*")
_ASCII_NUMBER = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|[+-]?(?:inf|nan)", re.IGNORECASE)


def _check_values(override) -> None:
    """What Hydra would accept but the harness must not: code, paths as options, numbers in disguise."""
    key = override.key_or_group
    values = [] if override.is_delete() else _value_strings(override)
    check_override_targets([f"{key}={v}" for v in values] or [override.input_line])
    if key.lstrip("+~") in GROUPS + APP_GROUPS:
        group = key.lstrip("+~")
        for v in values:  # an option is a file name in conf/<group>/: no path may reach outside it
            if v and not _OPTION_NAME.fullmatch(v):  # (an empty value has its own message)
                hint = f"a Hugging Face config.json is given as {group}_path=PATH" if group in ("model", "draft") else ""
                raise ConfigError(key, v, f"an option name of conf/{group}/ (letters, digits, _ and -; no path)", hint)
    elif "." in key:
        for v in values:  # int("0_2") and int("２") are 2, float("１.５") is 1.5: refuse what looks
            try:           # like a number to Python but is not plain ASCII
                float(v)
            except ValueError:
                continue
            if not _ASCII_NUMBER.fullmatch(v.strip()):
                raise ConfigError(key, v, "a number in plain ASCII digits (no '_', no other scripts)")


def _value_strings(override) -> list:
    """The value(s) as the user typed them; none for a glob() or interval() (no name to check)."""
    if override.is_sweep_override():
        try:
            return [str(v) for v in override.sweep_string_iterator()]
        except Exception:  # interval(): not enumerable (the app refuses it with its own message)
            return []
    value = override.value()
    if isinstance(value, str):
        return [value]
    return [override.get_value_element_as_str()] if isinstance(value, (int, float, bool)) or value is None else []


def parse_overrides(overrides: Sequence[str]) -> list:
    """``parse_override`` of each, one at a time so an error names the one at fault."""
    return [parse_override(text) for text in overrides]


@functools.lru_cache(maxsize=1)
def _parser():
    # Hydra (87 ms, python -X importtime): pytest's start-up imports this module and composes nothing
    from hydra.core.override_parser.overrides_parser import OverridesParser

    return OverridesParser.create()


@contextmanager
def _fresh_hydra() -> Iterator[None]:
    """Compose works inside a running Hydra app too: park its global state meanwhile."""
    # Hydra (87 ms, python -X importtime): pytest's start-up imports this module and composes nothing
    from hydra.core.global_hydra import GlobalHydra
    from hydra.initialize import get_gh_backup, restore_gh_from_backup

    if not GlobalHydra.instance().is_initialized():
        yield
        return
    backup = get_gh_backup()
    GlobalHydra.instance().clear()
    try:
        yield
    finally:
        restore_gh_from_backup(backup)


def _check_schema(cfg: DictConfig, conf_dir: Path, parsed: Sequence) -> None:
    """Re-validate against the schema: ``+key=value`` appends bypass Hydra's struct check."""
    try:
        OmegaConf.merge(OmegaConf.structured(Config), OmegaConf.to_container(cfg, resolve=False))
    except Exception as exc:  # OmegaConf's key/validation errors
        raise errors.translate(exc, conf_dir, parsed) from None


def _check_missing(cfg: DictConfig, conf_dir: Path) -> None:
    """A deleted group (``~model``) or a YAML that leaves a required key unset."""
    missing = sorted(OmegaConf.missing_keys(cfg))
    if not missing:
        return
    key = missing[0]
    if key in GROUPS:
        raise ConfigError(key, None, f"missing; choose one of {', '.join(group_options(conf_dir, key))}")
    raise ConfigError(key, None, "missing: the chosen options do not set it", f"{len(missing)} missing: {', '.join(missing)}")


def _load_model_path(cfg: DictConfig, parsed: list, node: str = "model") -> None:
    """Replace ``cfg.<node>`` by the config.json at ``<node>_path``, then re-apply ``<node>.*`` overrides."""
    spec = model_spec_from_hf_config(cfg[f"{node}_path"], field=f"{node}_path")
    cfg[node] = OmegaConf.structured(ModelConfig(**node_values(spec)))
    for override in parsed:
        key = override.key_or_group
        if key.startswith(f"{node}.") and not override.is_delete():
            OmegaConf.update(cfg, key, override.value(), merge=False)
