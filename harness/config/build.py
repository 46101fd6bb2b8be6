"""From a composed config to what an implementation takes: a ``RunSpec`` and the implementation.

Also turns the two other spellings of the layerwise flags (xllm_server gflags, a
ParallelConfig JSON) into ``layerwise.*`` overrides, so every source goes through
the same composition and schema checks.
"""

from __future__ import annotations

import dataclasses
import typing
from pathlib import Path
from typing import Any, Optional, Sequence, TypeVar, Union

from omegaconf import DictConfig, OmegaConf

from implementations.errors import ConfigError, UserError
from implementations.interface import KVShardingImplementation
from implementations.specs import (
    CacheSpec,
    HardwareProfile,
    LayerwiseFlags,
    ModelSpec,
    ParallelSpec,
    RunSpec,
)
from implementations.units import MIB

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
    from harness.paths import TOPOLOGY_DIR
    from implementations.formats import load_topology

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
    from implementations import inputs

    for prefix, model in (("model", run.model), ("draft", run.draft)):
        if model is not None:
            inputs.at_most(f"{prefix}.num_hidden_layers", model.num_hidden_layers, inputs.MAX_LAYERS, "layers per model")
    inputs.at_most("parallel.world_size", run.parallel.world_size, inputs.MAX_WORLD_SIZE, "ranks per configuration")
    inputs.finite("cache.host_blocks_factor", run.cache.host_blocks_factor, "a finite number (> 1 turns the host cache on)")
    if run.hardware.device_type not in DEVICE_TYPES:
        raise ConfigError("hardware.device_type", run.hardware.device_type, f"one of {', '.join(DEVICE_TYPES)}")
    if run.hardware.warp_size < 1:
        raise ConfigError("hardware.warp_size", run.hardware.warp_size, "a whole number >= 1 (64 on Iluvatar)")
    return run


def build_implementation(cfg: DictConfig) -> KVShardingImplementation:
    """Build ``cfg.implementation`` (its ``_target_``) and check it has the interface.

    Checked first (``check_implementation_config``: the class, its keyword arguments), then
    built by ``harness.config.targets.build_implementation_node``, as the ranks do."""
    from harness.config.targets import IMPLEMENTATION_METHODS, build_implementation_node

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
    from harness.config.targets import check_arguments, check_implementation_node

    target = impl_cfg.get("_target_") if isinstance(impl_cfg, dict) else None
    try:
        cls = check_implementation_node(impl_cfg if isinstance(impl_cfg, dict) else {})
    except ConfigError as exc:
        raise _implementation_error(target, exc.allowed, exc.detail) from None
    check_arguments(cls, impl_cfg)  # names the key the class does not take (not the option list)


def _implementation_error(target: object, allowed: str, detail: str = "") -> UserError:
    from harness.config.schema import group_options
    from harness.paths import CONF_DIR

    options = ", ".join(group_options(CONF_DIR, "implementation"))
    return ConfigError("implementation", target, f"{allowed}; options: {options}", detail)


def layerwise_overrides(
    gflags: Optional[Union[str, Sequence[str]]] = None,
    parallel_config: Optional[Union[str, Path]] = None,
) -> list[str]:
    """``layerwise.enable`` / ``layerwise.split_size`` overrides from the other flag spellings.

    ``parallel_config`` (a ParallelConfig JSON file) first, then ``gflags``
    (``"--enable_layerwise_split=true --layerwise_split_size=2"``), so the command
    line wins, as on xllm_server. Append the result after the user's overrides.
    """
    from implementations.formats import flags_from_gflags, flags_from_parallel_config_json

    out: list[str] = []
    if parallel_config is not None:
        from implementations import inputs

        # bounded: a FIFO or /dev/zero is refused unread, a huge file by its size
        text = inputs.read_input_file(Path(parallel_config), "--parallel-config", max_bytes=inputs.MAX_FILE_BYTES)
        out += _as_overrides(flags_from_parallel_config_json(text))
    if gflags is not None:
        out += _as_overrides(flags_from_gflags(gflags))
    return out


def _as_overrides(flags: LayerwiseFlags) -> list[str]:
    return [f"layerwise.enable={str(flags.enable).lower()}", f"layerwise.split_size={flags.split_size}"]


def _plain(node: Any) -> dict:
    return OmegaConf.to_container(node, resolve=True) if isinstance(node, DictConfig) else dict(node)
