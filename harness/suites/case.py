"""One parameterized case of a TC: which config options it composes, and its readable id."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from functools import cache, cached_property
from typing import Any, Mapping

from omegaconf import OmegaConf
from omegaconf.errors import ConfigAttributeError, ConfigKeyError, ValidationError

from harness.config import errors, schema
from harness.config.build import build_run_spec, check_implementation_config, spec_from_node
from harness.config.compose import compose_config, option_node, parse_override


@dataclass(frozen=True, kw_only=True)
class Case:
    """A TC run on one configuration. Option names are Hydra config-group options."""

    tc: str
    model: str
    layerwise: str
    parallel: str
    implementation: str
    hardware: str = "cpu"
    draft: str = "none"
    variant: str = ""
    """A TC-specific flavour (e.g. ``spec`` for target + draft engines), part of the id."""
    extra: tuple[str, ...] = field(default_factory=tuple)
    """Key overrides (``cache.block_size=64``) applied on top of the options."""

    def overrides(self) -> list[str]:
        out = [
            f"model={self.model}",
            f"layerwise={self.layerwise}",
            f"parallel={self.parallel}",
            f"implementation={self.implementation}",
            f"hardware={self.hardware}",
            f"draft={self.draft}",
        ]
        return out + list(self.extra)

    @property
    def resolved(self) -> Resolved:
        return resolve(tuple(self.overrides()))

    def shape(self) -> dict:
        """world_size, dp_size, enable, split_size from the option YAMLs and key overrides.

        Read without composing (Hydra composition costs ~0.1 s): ids and ordering are
        needed for every case at collection, composition only for the cases a worker runs.
        """
        par = option_spec("parallel", self.parallel, self.key_overrides("parallel"))
        lw = option_spec("layerwise", self.layerwise, self.key_overrides("layerwise"))
        return {"world_size": par.world_size, "dp_size": par.dp_size, "enable": lw.enable,
                "split_size": lw.split_size}

    def key_overrides(self, group: str) -> tuple[str, ...]:
        """The case's key overrides of ``group`` (``layerwise.split_size=2``, ``~parallel.x``...), in order."""
        return tuple(o for o in self.extra if o.lstrip("+~").startswith(f"{group}."))

    @property
    def world_size(self) -> int:
        return self.shape()["world_size"]

    @property
    def id(self) -> str:
        r = self.shape()
        parts = [self.model, f"s{r['split_size']}" if r["enable"] else "off", f"w{r['world_size']}", self.implementation]
        if r["dp_size"] > 1:
            parts[2] = f"w{r['world_size']}dp{r['dp_size']}"
        if self.hardware != "cpu":
            parts.append(self.hardware)
        if self.variant:
            parts.append(self.variant)
        return "-".join(parts)

    @property
    def title(self) -> str:
        return f"{self.tc}[{self.id}]"


@dataclass(frozen=True)
class Resolved:
    """What a case composes to: the RunSpec, the implementation config, the whole config."""

    run: Any
    impl_cfg: dict
    config: Any
    """The composed config as plain containers (``OmegaConf.to_container``, interpolations kept):
    ``config_yaml`` renders the same YAML as the DictConfig. Kept as containers because a run
    keeps every case it composed, and a DictConfig holds about 430 objects the garbage
    collector walks in each full collection, its containers about 5."""
    world_size: int
    dp_size: int
    split_size: int
    enable: bool
    backend: str
    timeout_s: float

    @cached_property
    def config_yaml(self) -> str:
        """The whole config as YAML (the report attaches it); rendered when first asked for."""
        return OmegaConf.to_yaml(self.config)


@cache
def option_spec(group: str, option: str, keys: tuple[str, ...] = ()):
    """What a ``layerwise`` or ``parallel`` option means, as its frozen spec (``LayerwiseFlags``,
    ``ParallelSpec``): the group's node as composition makes it (``compose.option_node``, the
    one reader of config options) with the group's key overrides ``keys``
    (``layerwise.split_size=2``) on top, type-checked by the group's schema.

    Without composing the whole config: case ids, and which cases a TC runs, need it
    for every case at collection. A key or value the schema cannot hold is the
    ``ConfigError`` composition would raise. Memoized: the frozen spec of a few dozen
    (option, keys) pairs is asked for thousands of times at collection (without the memo,
    collecting the TC matrix costs 0.5 s more CPU per pytest process).
    """
    node_schema = {"layerwise": schema.LayerwiseConfig, "parallel": schema.ParallelConfig}[group]
    node = option_node(group, option)
    if keys:
        node = copy.deepcopy(node)  # the shared node stays as composed
    for text in keys:
        override = parse_override(text)
        if override.is_delete():
            continue
        full_key = override.key_or_group
        try:
            OmegaConf.update(node, full_key.split(".", 1)[1], override.value(), merge=True)
        except (ConfigAttributeError, ConfigKeyError):
            raise errors.unknown_key(full_key) from None
        except ValidationError as exc:
            raise errors.wrong_type(full_key, override.value(), str(exc)) from None
    return spec_from_node(node_schema.spec, node)


RESOLVED: dict[tuple[str, ...], Resolved] = {}
"""Override set -> what it composed to, in this process (``adopt`` adds what another rank composed; a test of
that starts it empty, as a process that composed nothing)."""


def resolve(overrides: tuple[str, ...]) -> Resolved:
    """Compose once per distinct override set (cached per process: ids and tests share it)."""
    found = RESOLVED.get(overrides)
    if found is None:
        found = RESOLVED[overrides] = _compose_case(overrides)
    return found


def adopt(resolved: Mapping[tuple[str, ...], Resolved]) -> None:
    """Take cases another process of the same run composed, so this one does not compose them again.

    Under an external launcher rank 0 composes every case and broadcasts the results
    (``harness.suites.torchrun_matrix``): one composition for the whole group, the same
    configuration on every host.
    """
    RESOLVED.update(resolved)


def _compose_case(overrides: tuple[str, ...]) -> Resolved:
    cfg = compose_config(list(overrides))
    run = build_run_spec(cfg)
    impl_cfg = OmegaConf.to_container(cfg.implementation, resolve=True)
    check_implementation_config(impl_cfg)  # _target_: a Protocol class, keyword arguments only; nothing called
    return Resolved(
        run=run,
        impl_cfg=impl_cfg,
        config=OmegaConf.to_container(cfg, resolve=False),
        world_size=run.parallel.world_size,
        dp_size=run.parallel.dp_size,
        split_size=run.layerwise.split_size,
        enable=run.layerwise.enable,
        backend=str(cfg.runner.backend),
        timeout_s=float(cfg.runner.timeout_s),
    )
