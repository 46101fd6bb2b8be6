"""From a composed config to what an implementation takes: a ``RunSpec`` and the implementation.

Also turns the two other spellings of the layerwise flags (xllm_server gflags, a
ParallelConfig JSON) into ``layerwise.*`` overrides, so every source goes through
the same composition and schema checks.
"""

from __future__ import annotations

import dataclasses
import functools
import sys
import typing
from pathlib import Path
from typing import Any, Optional, Sequence, TypeVar, Union

from omegaconf import DictConfig, OmegaConf

from contract import bounded_inputs
from contract.errors import ConfigError, UserError
from contract.interface import KVShardingImplementation
from contract.server_flags import (
    GFLAG_NAMED_FLAGS,
    gflag_settings,
    layerwise_state,
    merge_settings,
    parallel_config_settings,
)
from contract.specs import (
    CacheSpec,
    HardwareProfile,
    LayerwiseFlags,
    ModelSpec,
    ParallelSpec,
    RunSpec,
)
from contract.topology_text import load_topology
from contract.units import MIB
from harness.config.schema import group_options
from harness.config.targets import (
    IMPLEMENTATION_METHODS,
    build_implementation_node,
    check_arguments,
    check_implementation_node,
)
from harness.paths import CONF_DIR, TOPOLOGY_DIR

S = TypeVar("S")


def spec_from_node(spec: type[S], node: Any) -> S:
    """A config node of a spec-derived schema (``schema.SPEC_CONFIGS``) -> the frozen spec.

    Lists become tuples where the spec's field is a tuple; nothing else changes.
    """
    values = _plain(node)
    hints = typing.get_type_hints(spec)
    for f in dataclasses.fields(spec):
        if isinstance(values.get(f.name), list) and _is_tuple(hints[f.name]):
            values[f.name] = tuple(values[f.name])
    return spec(**values)


def node_values(spec_value: Any) -> dict:
    """A spec -> plain values its derived schema takes (tuples as lists): the other direction."""
    return {f.name: list(v) if isinstance(v := getattr(spec_value, f.name), tuple) else v
            for f in dataclasses.fields(spec_value)}


def _is_tuple(annotation: Any) -> bool:
    if typing.get_origin(annotation) is Union:
        return any(_is_tuple(a) for a in typing.get_args(annotation))
    return typing.get_origin(annotation) is tuple


def model_spec(node: Any) -> ModelSpec:
    """A ``model`` / ``draft`` node -> ``ModelSpec``."""
    return spec_from_node(ModelSpec, node)


def hardware_profile(node: Any) -> HardwareProfile:
    """A ``HardwareConfig`` node -> ``HardwareProfile``: MiB -> bytes, topology loaded."""
    hw = _plain(node)
    if hw["reserved_mib_per_card"] > hw["hbm_mib_per_card"]:
        raise ConfigError(
            "hardware.reserved_mib_per_card", hw["reserved_mib_per_card"],
            f"at most hardware.hbm_mib_per_card ({hw['hbm_mib_per_card']})",
        )
    values = {key: value for key, value in hw.items() if key in HARDWARE_SAME_FIELDS}
    values.update(
        hbm_bytes_per_card=hw["hbm_mib_per_card"] * MIB,
        reserved_bytes_per_card=hw["reserved_mib_per_card"] * MIB,
        topology=load_topology(hw["topology"], TOPOLOGY_DIR),
    )
    return spec_from_node(HardwareProfile, values)


HARDWARE_CONVERTED = {"hbm_mib_per_card": "hbm_bytes_per_card", "reserved_mib_per_card": "reserved_bytes_per_card",
                      "topology": "topology"}
"""``hardware`` keys that ``hardware_profile`` converts (MiB -> bytes, a fixture name -> ``Topology``)."""
HARDWARE_CONFIG_ONLY = ("facts",)
"""``hardware`` keys kept for reports only."""
HARDWARE_SAME_FIELDS = frozenset(f.name for f in dataclasses.fields(HardwareProfile)) - set(HARDWARE_CONVERTED.values())
"""``HardwareProfile`` fields a ``hardware`` key of the same name fills as is."""


def build_run_spec(cfg: DictConfig) -> RunSpec:
    """Everything a master needs for one configuration."""
    placement = cfg.placement
    return check_bounds(RunSpec(
        model=model_spec(cfg.model),
        draft=model_spec(cfg.draft) if cfg.draft is not None else None,
        parallel=spec_from_node(ParallelSpec, cfg.parallel),
        cache=spec_from_node(CacheSpec, cfg.cache),
        layerwise=spec_from_node(LayerwiseFlags, cfg.layerwise),
        hardware=hardware_profile(cfg.hardware),
        placement=tuple(placement) if placement is not None else None,
    ))


DEVICE_TYPES = ("cpu", "cuda")
"""``hardware.device_type``: simulated cards, or cards the framework sees as CUDA devices (Iluvatar's too)."""


def check_bounds(run: RunSpec) -> RunSpec:
    """What the schema cannot hold, beyond types: sizes the harness could not even represent or run.

    Upper bounds keep a typo (``model.num_hidden_layers=10**12``) from growing memory
    until MemoryError; NaN would pass every ``>`` check. Spec rules stay with the
    implementation under test.
    """
    for prefix, model in (("model", run.model), ("draft", run.draft)):
        if model is not None:
            bounded_inputs.at_most(f"{prefix}.num_hidden_layers", model.num_hidden_layers, bounded_inputs.MAX_LAYERS, "layers per model")
    bounded_inputs.at_most("parallel.world_size", run.parallel.world_size, bounded_inputs.MAX_WORLD_SIZE, "ranks per configuration")
    bounded_inputs.finite("cache.host_blocks_factor", run.cache.host_blocks_factor, "a finite number (> 1 turns the host cache on)")
    if run.hardware.device_type not in DEVICE_TYPES:
        raise ConfigError("hardware.device_type", run.hardware.device_type, f"one of {', '.join(DEVICE_TYPES)}")
    if run.hardware.warp_size < 1:
        raise ConfigError("hardware.warp_size", run.hardware.warp_size, "a whole number >= 1 (64 on Iluvatar)")
    for prefix, model in (("model", run.model), ("draft", run.draft)):
        if model is not None and getattr(model, "layer_types", None):
            warn_unknown_layer_types(f"{prefix}.layer_types", tuple(model.layer_types))
    return run


KNOWN_LINEAR_TYPES = ("linear_attention",)
"""``layer_types`` values upstream's hybrids use for linear attention (Qwen3-Next, Qwen3.5: ``model_args.h``
and its tests at 494f293b5). FEATURE section 4 treats every value but ``full_attention`` / ``attention`` as
linear, so a typo or another kind (``sliding_attention``) silently becomes a linear layer."""


@functools.lru_cache(maxsize=64)
def warn_unknown_layer_types(field: str, layer_types: tuple) -> None:
    """One ``warning:`` line on stderr (once per distinct list) for values the spec treats as linear
    attention but no known model uses that way. Not an error: the spec's rule decides, as upstream's does."""
    # the oracle (10 ms, python -X importtime): --help and a bad override are one line without it
    from harness.oracle import FULL_TYPES

    unknown = sorted({t for t in layer_types if t not in FULL_TYPES and t not in KNOWN_LINEAR_TYPES})
    if unknown:
        layers = [i for i, t in enumerate(layer_types) if t in unknown]
        shown = ", ".join(map(str, layers[:6])) + (", ..." if len(layers) > 6 else "")
        print(f"warning: {field}: {', '.join(repr(t) for t in unknown[:5])} (layer {shown}) is not a known "
              f"kind; the spec treats it as linear attention (known: {', '.join(KNOWN_LINEAR_TYPES)} linear; "
              f"{', '.join(FULL_TYPES)} full)", file=sys.stderr)


def build_implementation(cfg: DictConfig) -> KVShardingImplementation:
    """Build ``cfg.implementation`` (its ``_target_``) and check it has the interface.

    Checked first (``check_implementation_config``: the class, its keyword arguments), then
    built by ``harness.config.targets.build_implementation_node``, as the ranks do."""
    node = cfg.implementation
    target = node.get("_target_") if isinstance(node, DictConfig) else None
    if not isinstance(target, str) or not target:
        raise _implementation_error(target, "a node with _target_: <importable class>")
    container = OmegaConf.to_container(node, resolve=True)
    check_implementation_config(container)
    impl = build_implementation_node(container)
    missing = [m for m in IMPLEMENTATION_METHODS if not callable(getattr(impl, m, None))]
    if missing or not isinstance(getattr(impl, "name", None), str):
        lacks = ", ".join(missing) if missing else "a str name"
        raise _implementation_error(target, "a KVShardingImplementation", f"it lacks {lacks}")
    return impl


def check_implementation_config(impl_cfg: Any) -> None:
    """Before anything is called: ``_target_`` names a class with the Protocol's methods and the node
    passes keyword arguments only, each one the class takes (``harness.config.targets``); one
    ``ConfigError`` naming the options, or the key the class does not take."""
    target = impl_cfg.get("_target_") if isinstance(impl_cfg, dict) else None
    try:
        cls = check_implementation_node(impl_cfg if isinstance(impl_cfg, dict) else {})
    except ConfigError as exc:
        raise _implementation_error(target, exc.allowed, exc.detail) from None
    check_arguments(cls, impl_cfg)  # names the key the class does not take (not the option list)


def implementation_needs_inputs(target: str) -> bool:
    """Whether the class ``target`` names checks inputs of its own (``check_inputs``: a source tree to compile)."""
    return callable(getattr(check_implementation_node({"_target_": target}), "check_inputs", None))


def check_implementation_inputs(impl_cfg: Any) -> None:
    """What the implementation must be given besides its options, checked without building it: its class's
    ``check_inputs(**keys)`` when it has one (``xllm_native``: the source tree is given, exists and holds the
    files it compiles). ``UserError`` naming the key (``implementation.source_dir``) otherwise."""
    check_implementation_config(impl_cfg)

    check = getattr(check_implementation_node(impl_cfg), "check_inputs", None)
    if callable(check):
        check(**{k: v for k, v in impl_cfg.items() if k != "_target_"})


def prepare_implementation(impl_cfg: Any) -> None:
    """The implementation's ``prepare(**keys)`` when its class has one (``xllm_native``: compile the tree's
    libraries once, before the cases and their time limits); run by the controller after
    ``check_implementation_inputs``."""
    prepare = getattr(check_implementation_node(impl_cfg), "prepare", None)
    if callable(prepare):
        prepare(**{k: v for k, v in impl_cfg.items() if k != "_target_"})


def _implementation_error(target: object, allowed: str, detail: str = "") -> UserError:
    options = ", ".join(group_options(CONF_DIR, "implementation"))
    return ConfigError("implementation", target, f"{allowed}; options: {options}", detail)


@dataclasses.dataclass(frozen=True)
class EngineFlags:
    """What the engine's own flags (``--gflags``, ``--parallel-config``) say, for a command to apply."""

    overrides: list
    """Config overrides (``layerwise.*``, ``parallel.*``, ``cache.*``, ``draft.body_tp1``): append them after
    the user's."""
    read: list
    """``--flag=value -> config.key`` for each flag read besides the layerwise ones."""
    memory: dict
    """``max_memory_utilization`` / ``max_cache_size`` as given: they set the budget with the card's free
    memory, so they are judged against a log's worker lines, never turned into a budget."""
    unread: list
    """Flags given that do not change the KV plan (``--port``, ``--model`` beside ``model=``): not read."""


def _named_by_override(overrides: Sequence[str], flag: str) -> bool:
    keys = {"model": ("model", "model_path"), "draft_model": ("draft", "draft_path")}[flag]
    return any(o.split("=", 1)[0].lstrip("+~") in keys for o in overrides)


def engine_flags(
    gflags: Optional[Union[str, Sequence[str]]] = None,
    parallel_config: Optional[Union[str, Path]] = None,
    semantics: str = "adaptation",
    overrides: Sequence[str] = (),
    log_flags: Optional[str] = None,
) -> EngineFlags:
    """The config overrides the engine's own flags amount to.

    ``parallel_config`` (a ParallelConfig JSON file) and ``gflags`` (``"--layerwise_split_size=2
    --block_size=64"``, ``--flagfile=PATH`` read in place) are the engine's flags: a value both set
    differently is refused naming both. The layerwise flags take the binary's defaults when absent
    (under the adaptation the enable flag is emitted, absent: false; under upstream semantics it does not
    exist, ``apply_semantics`` decides); every other flag that changes the KV plan
    (``contract.server_flags.GFLAG_CONFIG_KEYS``) sets its config key when given. ``--model`` /
    ``--draft_model`` (checkpoint paths) are refused unless ``overrides`` name the model (``model=`` or
    ``model_path=``; ``draft=`` or ``draft_path=``).
    """
    routes = []
    if parallel_config is not None:
        # bounded: a FIFO or /dev/zero is refused unread, a huge file by its size
        text = bounded_inputs.read_input_file(Path(parallel_config), "--parallel-config", max_bytes=bounded_inputs.MAX_FILE_BYTES)
        routes.append(("--parallel-config", parallel_config_settings(text, semantics)))
    if gflags is not None:
        routes.append(("--gflags", gflag_settings(gflags, semantics)))
    if log_flags:  # the layerwise flags an engine log echoes (harness.conformance): a third route, as the others
        routes.append(("the log's command line", gflag_settings(log_flags, semantics)))
    if not routes:
        return EngineFlags(overrides=[], read=[], memory={}, unread=[])
    merged = merge_settings(routes)
    unread = list(merged.get("unread", []))
    for flag, instead in GFLAG_NAMED_FLAGS.items():
        path = merged.get(f"named.{flag}")
        if path is None:
            continue
        if not _named_by_override(overrides, flag):
            raise ConfigError(f"--{flag}", path, f"{instead} beside the flags",
                              "the harness does not open the engine's checkpoint path; name the model with an override")
        unread.append(flag)
    config = sorted((k, v) for k, v in merged.items() if k.startswith(("parallel.", "cache.", "draft.")))
    out = [f"{key}={str(value).lower() if isinstance(value, bool) else value}" for key, value in config]
    given = {o.split("=", 1)[0]: o.split("=", 1)[1] for o in overrides if "=" in o}
    for item in out:  # an override and a flag that set one key differently: which one did the engine run with?
        key, value = item.split("=", 1)
        if key in given and given[key].strip().lower() != value.lower():
            raise ConfigError(key, f"override {given[key]!r} vs engine flag {value!r}",
                              "one value: an override and the engine's flag must agree")
    read = list(out)
    if semantics == "adaptation":
        out.append(f"layerwise.enable={str(merged.get('enable', False)).lower()}")
    out.append(f"layerwise.split_size={merged.get('split_size', 1)}")
    memory = {k.split(".", 1)[1]: v for k, v in merged.items() if k.startswith("memory.")}
    return EngineFlags(overrides=out, read=read, memory=memory, unread=unread)


def layerwise_overrides(
    gflags: Optional[Union[str, Sequence[str]]] = None,
    parallel_config: Optional[Union[str, Path]] = None,
    semantics: str = "adaptation",
    overrides: Sequence[str] = (),
) -> list[str]:
    """``engine_flags(...).overrides``: the config overrides of the engine's own flags."""
    return engine_flags(gflags, parallel_config, semantics, overrides).overrides


def apply_semantics(cfg: DictConfig, semantics: str = "adaptation") -> str:
    """Apply FEATURE section 2's rule of ``semantics`` to a composed config (``layerwise.enable`` under
    upstream semantics is ``split_size > 1``: upstream has no enable flag); returns why the split is
    on or off, for the command to print."""
    node = cfg.layerwise
    enable = None if semantics == "upstream" else bool(node.enable)
    flags, why = layerwise_state(semantics, enable, int(node.split_size))
    if semantics == "upstream":
        node.enable = flags.enable
        why += "; layerwise.enable of the harness config is not read"
    return why


def _plain(node: Any) -> dict:
    return OmegaConf.to_container(node, resolve=True) if isinstance(node, DictConfig) else dict(node)
