"""Structured config schemas: what ``conf/`` may contain, key by key, with types.

One definition per config group: ``model``, ``draft``, ``parallel``, ``layerwise`` and
``cache`` ARE the domain specs of ``contract.specs`` (``ModelSpec``,
``ParallelSpec``, ``LayerwiseFlags``, ``CacheSpec``): their schema classes here are
derived from those dataclasses field by field (``structured_from_spec``), so a
field added to a spec is a config key at once, with the same name, type and
default (tuples become lists, a field without a default is ``MISSING``). Only
``hardware`` has a schema of its own: a YAML states sizes in MiB and names a
topology fixture, where ``specs.HardwareProfile`` holds bytes and a parsed
``Topology`` (``harness.config.build.hardware_profile`` converts).

OmegaConf enforces these: a misspelled key or a wrong type fails at composition
(``compose``), before any planning.
"""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional

from omegaconf import MISSING

from contract.specs import CacheSpec, LayerwiseFlags, ModelSpec, ParallelSpec

TC_IDS = ("TC-01", "TC-02", "TC-03", "TC-04", "TC-05", "TC-06", "TC-07")
"""The seed test plan's TCs (the one owner of this list in the harness)."""

# -- the override vocabulary: config groups (``group=option``) beside keys (``key=value``) ----

GROUPS = ("model", "draft", "hardware", "parallel", "layerwise", "implementation")
"""Config groups: a directory of YAML options each."""
APP_GROUPS = ("suite", "mode", "launcher")
"""Config groups of ``python -m harness`` (what it runs and where), beside the run's ``GROUPS``."""


def group_options(conf_dir: Path, group: str) -> List[str]:
    """Option names of a config group: the YAML files in ``conf/<group>``."""
    return sorted(p.stem for p in (conf_dir / group).glob("*.yaml"))


def _config_type(annotation: Any) -> Any:
    """The OmegaConf-typed twin of a spec annotation: ``tuple[str, ...]`` -> ``List[str]``."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Union:
        inner = [_config_type(a) for a in args if a is not type(None)]
        return Optional[inner[0]] if len(inner) == 1 and type(None) in args else annotation
    if origin is tuple:
        item = args[0] if args else Any
        return List[_config_type(item)]
    if origin is list:
        return List[_config_type(args[0])] if args else List[Any]
    return annotation


def structured_from_spec(spec: type, name: str, doc: str) -> type:
    """A mutable dataclass OmegaConf can type-check, with ``spec``'s fields, types and defaults."""
    hints = typing.get_type_hints(spec)
    fields = []
    for f in dataclasses.fields(spec):
        if f.default is not dataclasses.MISSING:
            default = field(default=f.default)
        elif f.default_factory is not dataclasses.MISSING:
            default = field(default_factory=f.default_factory)
        else:
            default = field(default=MISSING)
        fields.append((f.name, _config_type(hints[f.name]), default))
    cls = dataclasses.make_dataclass(name, fields, namespace={"__doc__": doc, "spec": spec})
    cls.__module__ = __name__  # (make_dataclass's module= is Python 3.12+)
    return cls


ModelConfig = structured_from_spec(
    ModelSpec, "ModelConfig", "One model's architecture numbers (``conf/model/<name>.yaml``): ``specs.ModelSpec``.")
ParallelConfig = structured_from_spec(
    ParallelSpec, "ParallelConfig", "Process layout (``conf/parallel/<name>.yaml``): ``specs.ParallelSpec``.")
LayerwiseConfig = structured_from_spec(
    LayerwiseFlags, "LayerwiseConfig",
    "``--enable_layerwise_split`` / ``--layerwise_split_size`` (``conf/layerwise``): ``specs.LayerwiseFlags``.")
CacheConfig = structured_from_spec(CacheSpec, "CacheConfig", "KV cache options of the engine: ``specs.CacheSpec``.")
SPEC_CONFIGS = (ModelConfig, ParallelConfig, LayerwiseConfig, CacheConfig)
"""Schema classes derived from a domain spec (``cls.spec``)."""


@dataclass
class HardwareConfig:
    """One machine kind (``conf/hardware/<name>.yaml``) (MiB and a topology name; ``specs.HardwareProfile`` holds bytes)."""

    name: str = MISSING
    """Option name."""
    device_type: str = MISSING
    """``cpu`` (simulated cards) or ``cuda`` (Iluvatar cards appear as CUDA devices)."""
    kv_layout: str = MISSING
    """``heads_major`` (ILU/MLU) or ``tokens_major`` (CUDA/NPU)."""
    num_cards: int = MISSING
    """Cards per node."""
    hbm_mib_per_card: int = MISSING
    """Device memory of one card, MiB."""
    reserved_mib_per_card: int = MISSING
    """Weights, activations, runtime: what is not for KV, MiB; each rank on the card keeps its own (two ranks
    on one card reserve it twice)."""
    topology: str = MISSING
    """Fixture name in ``conf/topology`` or a path to a topo -m text / YAML file."""
    warp_size: int = 32
    """Threads per warp (64 on Iluvatar)."""
    quantized_kv_cache_dtypes: List[str] = field(default_factory=list)
    """Quantized KV cache dtypes this hardware supports (none on bi_v100 and CUDA; FEATURE section 3)."""
    int8_indexer_cache: bool = False
    """Whether an int8 DSA indexer cache is supported (upstream: NPU and MLU only)."""
    facts: Dict[str, Any] = field(default_factory=dict)
    """Facts the spec does not carry (bus ids, clocks, SDK versions), kept for reports."""


@dataclass
class RunnerConfig:
    """How the distributed suites start rank processes."""

    backend: str = "auto"
    """auto, gloo or nccl."""
    timeout_s: float = 60.0
    """Seconds before a hung rank fails its test."""


@dataclass
class ReportConfig:
    """Where results go."""

    results_dir: str = "reports"
    """Machine-readable results and Allure results, relative to the working directory."""


@dataclass
class SuiteConfig:
    """Which TCs ``python -m harness`` runs for its one configuration (``conf/suite/<name>.yaml``)."""

    name: str = "all"
    """Option name."""
    tcs: List[str] = field(default_factory=lambda: list(TC_IDS))
    """TC ids (TC-01 .. TC-07) to run."""
    matrix: str = "ci"
    """``conf/matrix/<name>.yaml`` the TC suites draw their cases from (narrowed to this configuration)."""
    mode: str = "suite"
    """``suite``: run the TCs on rank processes; ``plan``: only plan (no process group). Group ``mode`` sets it."""
    departures_against: str = ""
    """A C++ tree's earlier departure list (a ``departures.json`` ``harness.native_verdicts --out`` wrote, or a job's
    ``result.json``): results.md says which departures are new, gone and remaining."""


@dataclass
class Config:
    """The whole configuration ``conf/config.yaml`` composes."""

    model: ModelConfig = MISSING
    """Target model (group ``model``)."""
    draft: Optional[ModelConfig] = None
    """Speculative draft model (group ``draft``; ``none`` = not speculative). Never split."""
    hardware: HardwareConfig = MISSING
    """Machine kind (group ``hardware``)."""
    parallel: ParallelConfig = MISSING
    """Process layout (group ``parallel``)."""
    layerwise: LayerwiseConfig = field(default_factory=LayerwiseConfig)
    """Layerwise split flags (group ``layerwise``)."""
    cache: CacheConfig = field(default_factory=CacheConfig)
    """KV cache options."""
    implementation: Any = MISSING
    """Implementation under test: a node with ``_target_`` (group ``implementation``)."""
    placement: Optional[List[int]] = None
    """Card of each rank within its node; null = rank % num_cards."""
    model_path: Optional[str] = None
    """A local Hugging Face config.json that replaces ``model`` (see ``compose``)."""
    draft_path: Optional[str] = None
    """A local Hugging Face config.json that replaces ``draft`` (see ``compose``)."""
    runner: RunnerConfig = field(default_factory=RunnerConfig)
    """Distributed runner settings."""
    report: ReportConfig = field(default_factory=ReportConfig)
    """Result locations."""
    suite: SuiteConfig = field(default_factory=SuiteConfig)
    """What ``python -m harness`` runs (groups ``suite`` and ``mode``)."""
