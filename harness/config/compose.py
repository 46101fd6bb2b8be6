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

import functools
import re
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Optional, Sequence, Union

from omegaconf import DictConfig, OmegaConf

from contract.errors import ConfigError
from harness.config import errors
from harness.config.schema import APP_GROUPS, GROUPS, Config, ModelConfig, group_options
from harness.paths import CONF_DIR, CONFIG_NAME


def compose_config(overrides: Sequence[str] = (), config_dir: Optional[Union[str, Path]] = None) -> DictConfig:
    """The composed, schema-checked config for ``overrides``; ``ConfigError`` on any mistake."""
    from harness.config.store import register

    conf_dir = Path(config_dir).resolve() if config_dir is not None else CONF_DIR
    if not (conf_dir / f"{CONFIG_NAME}.yaml").is_file():
        raise ConfigError("config_dir", str(conf_dir), f"a directory holding {CONFIG_NAME}.yaml")
    overrides = list(overrides)
    parsed = parse_overrides(overrides)
    register()
    cfg = assembled(parsed, conf_dir)
    if cfg is None:
        try:
            cfg = _hydra_compose(conf_dir, overrides)
        except Exception as exc:  # Hydra/OmegaConf raise many types; each is the user's input here
            raise errors.translate(exc, conf_dir, parsed) from None
    return finish(cfg, parsed, conf_dir)


def _hydra_compose(conf_dir: Path, overrides: Sequence[str]) -> DictConfig:
    from hydra import compose, initialize_config_dir

    with _fresh_hydra(), initialize_config_dir(config_dir=str(conf_dir), version_base=None):
        return compose(config_name=CONFIG_NAME, overrides=list(overrides))


# -- composition, once per config-group option ---------------------------------------------
#
# Hydra's composition costs ~0.1 s, and a test matrix composes hundreds of configurations
# that differ only in which option each group takes. So each group option is composed
# once per process (``_Composition.option``: read from its file alone where that is all
# Hydra does, else composed by Hydra alone, ``model=qwen3_5_moe``), and a configuration made
# of plain choices (``group=option`` for ``GROUPS``) and plain key changes
# (``cache.block_size=64``) is assembled from those nodes: the default config with each
# chosen group's node swapped in, then the key changes applied as Hydra applies a plain
# ``key=value`` (``OmegaConf.update(..., merge=True)``). That is Hydra's result whenever
# choosing an option changes nothing but its own node, which is checked for every option
# before it is used; anything else (an option that writes elsewhere, ``+``/``~`` overrides,
# ``hydra.*``, ``suite``/``mode``/``launcher`` choices, any error) is composed by Hydra
# whole, and its errors are Hydra's. testcases/unit/test_config.py proves the two equal
# for every shipped option and the CI matrix. ``option_node`` gives the same nodes to
# readers that need one group only (a case's layerwise and parallel options). A group
# whose value is null (``draft: null``) has no node to share: its "node" is None.


class _Composition:
    """What this process has composed from one config directory: the harness's one cache of
    config reading (the default config, and each group option's node)."""

    def __init__(self, conf_dir: Path) -> None:
        self.conf_dir = conf_dir
        primary = OmegaConf.load(conf_dir / f"{CONFIG_NAME}.yaml")
        self.primary_keys = frozenset(k for k in primary if k not in ("defaults", "hydra"))
        """Keys the primary config sets itself (besides its defaults list and ``hydra``)."""
        self.schema = OmegaConf.structured(Config)
        self._default: object = _UNSET
        self._options: dict = {}
        self._bases: dict = {}

    def default(self) -> Optional[DictConfig]:
        """Hydra's composition of the default config; None where Hydra raised."""
        if self._default is _UNSET:
            self._default = self._hydra_or_none(())
        return self._default

    def base(self, nodes: dict) -> Optional[tuple]:
        """(a config to copy a case from, its group nodes by group) for a case taking the option nodes
        ``nodes`` (group -> node, None for a null one); None where there is no default config.

        The default config, where each group it sets to null (``draft: null``) and the case sets to a node
        holds a node instead, so that the case's node substitutes it as any other group's: ``cfg[group]``
        is a group's node itself only where its value is a config. Made once per such set of groups,
        and never modified after."""
        default = self.default()
        if default is None:
            return None
        if not self._bases:
            self._bases[frozenset()] = default, {g: default[g] for g in GROUPS}
        plain = self._bases[frozenset()][1]
        lifted = frozenset(g for g, node in nodes.items() if node is not None and plain[g] is None)
        if lifted not in self._bases:
            import copy

            config = default
            if lifted:
                config = copy.deepcopy(default)
                for group in sorted(lifted):
                    config[group] = nodes[group]  # a stand-in: each case substitutes its own node for it
            self._bases[lifted] = config, {g: config[g] for g in GROUPS}
        return self._bases[lifted]

    def option(self, group: str, option: str) -> Optional[tuple]:
        """(the group's node when ``option`` is chosen, whether choosing it changes nothing else);
        None where Hydra cannot compose it (the caller composes whole and reports the error)."""
        key = (group, option)
        if key not in self._options:
            self._options[key] = self._compose_option(group, option)
        return self._options[key]

    def _compose_option(self, group: str, option: str) -> Optional[tuple]:
        node = self.read_alone(group, option)
        if node is not None:
            return node, True
        base, alone = self.default(), self._hydra_or_none((f"{group}={option}",))
        if base is None or alone is None:
            return None
        return alone[group], _without(alone, group) == _without(base, group)

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

    def _hydra_or_none(self, overrides: tuple) -> Optional[DictConfig]:
        try:
            return _hydra_compose(self.conf_dir, overrides)
        except Exception:  # composed whole again by the caller, which reports the error
            return None


_UNSET = object()
_compositions: dict = {}
"""conf_dir -> its ``_Composition`` (one per directory a process composes from)."""


def _composition(conf_dir: Path) -> _Composition:
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
    found = _composition(conf_dir).option(group, option)
    if found is None:
        return compose_config([f"{group}={option}"], conf_dir)[group]  # raises the error, or is Hydra's
    return found[0]


def _without(cfg: DictConfig, group: str) -> dict:
    data = OmegaConf.to_container(cfg, resolve=False)
    data.pop(group, None)
    return data


def assembled(parsed: Sequence, conf_dir: Path = CONF_DIR) -> Optional[DictConfig]:
    """The config for ``parsed`` (``parse_overrides``) assembled from the once-composed option nodes, before
    ``finish``; None where it is not assembled and Hydra composes it whole (``compose_config`` does both).
    Public for the tests that prove an assembled config is Hydra's."""
    import copy

    choices: dict = {}
    changes = []
    for o in parsed:
        key = o.key_or_group
        if o.is_sweep_override() or o.is_delete() or o.is_add() or o.is_force_add() or o.package is not None:
            return None
        if key in GROUPS:
            value = o.value()
            if not isinstance(value, str) or key in choices:
                return None
            choices[key] = value
        elif key.split(".", 1)[0] == "hydra" or key in APP_GROUPS or "/" in key:
            return None
        else:  # a key: cache.block_size, layerwise.split_size, model_path
            changes.append(o)
    composition = _composition(conf_dir)
    if composition.default() is None:
        return None
    nodes = {}
    for group, option in choices.items():
        found = composition.option(group, option)
        if found is None or not found[1]:  # Hydra cannot compose it, or it changes more than its node
            return None
        nodes[group] = found[0]
    try:
        found = composition.base(nodes)
    except Exception:  # a node the default's group cannot hold: composed whole by the caller
        return None
    if found is None:
        return None
    base, defaults = found
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
    try:
        for group, node in assigned.items():
            cfg[group] = node
        for change in changes:  # what Hydra does with a plain key=value override (no +, ~ or @package)
            OmegaConf.update(cfg, change.key_or_group, change.value(), merge=True)
    except Exception:  # composed whole by the caller, whose error names the override
        return None
    return cfg


def finish(cfg: DictConfig, parsed: Sequence, conf_dir: Path = CONF_DIR) -> DictConfig:
    """The checks Hydra's composition leaves out, and ``model_path``; on a composed ``cfg``.

    ``parsed`` are the overrides it was composed with (``parse_overrides``). The app
    calls this on the config Hydra composed for its job, so a job composes once.
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
    from harness.config.targets import check_override_targets

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
    from hydra.core.override_parser.overrides_parser import OverridesParser

    return OverridesParser.create()


@contextmanager
def _fresh_hydra() -> Iterator[None]:
    """Compose works inside a running Hydra app too: park its global state meanwhile."""
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
    from harness.config.build import node_values
    from harness.config.hf_loader import model_spec_from_hf_config

    spec = model_spec_from_hf_config(cfg[f"{node}_path"], field=f"{node}_path")
    cfg[node] = OmegaConf.structured(ModelConfig(**node_values(spec)))
    for override in parsed:
        key = override.key_or_group
        if key.startswith(f"{node}.") and not override.is_delete():
            OmegaConf.update(cfg, key, override.value(), merge=False)
