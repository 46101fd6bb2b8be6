"""The case matrix: axes from ``conf/matrix/<name>.yaml``, narrowed by overrides.

An override on an axis (``model=qwen3_5_moe``, ``layerwise=s2,s4``) replaces that
axis's values; any other override (``cache.block_size=64``,
``layerwise.split_size=2``) is passed to every case's composition.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from harness.config.schema import TC_IDS
from harness.paths import CONF_DIR
from implementations.errors import ConfigError

# override key -> matrix axis it narrows
AXIS_KEYS = {
    "model": "models",
    "layerwise": "layerwise",
    "parallel": "parallel",
    "implementation": "implementations",
    "hardware": "hardware",
    "topology": "topologies",
    "tc": "tcs",
}


@dataclass
class Matrix:
    """Axes of a case matrix (one list per config group)."""

    name: str = "ci"
    hardware: list[str] = field(default_factory=lambda: ["cpu"])
    models: list[str] = field(default_factory=list)
    layerwise: list[str] = field(default_factory=list)
    parallel: list[str] = field(default_factory=list)
    implementations: list[str] = field(default_factory=list)
    topologies: list[str] = field(default_factory=list)
    tcs: list[str] = field(default_factory=lambda: list(TC_IDS))
    extra: list[str] = field(default_factory=list)
    """Key overrides applied to every case."""


def available(group: str) -> list[str]:
    if group == "topology":
        return sorted({p.stem for p in (CONF_DIR / group).iterdir() if p.suffix in (".txt", ".yaml", ".yml")})
    return sorted(p.stem for p in (CONF_DIR / group).glob("*.yaml"))


def load_matrix(name: str, overrides: list[str] = ()) -> Matrix:
    """Load ``conf/matrix/<name>.yaml`` and apply ``overrides``; ConfigError on any mistake."""
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    path = CONF_DIR / "matrix" / f"{name}.yaml"
    if not path.is_file():
        raise ConfigError("matrix", name, f"allowed: {', '.join(available('matrix'))}")
    try:
        loaded = OmegaConf.merge(OmegaConf.structured(Matrix), OmegaConf.load(path))
    except OmegaConfBaseException as exc:
        key = getattr(exc, "full_key", "") or "?"
        allowed = ", ".join(f.name for f in fields(Matrix))
        raise ConfigError(f"matrix {name}: {key}", "", f"allowed keys: {allowed}") from None
    matrix = Matrix(**OmegaConf.to_container(loaded))
    for item in overrides:
        _apply(matrix, item)
    _check(matrix)
    return matrix


def _apply(matrix: Matrix, item: str) -> None:
    from harness.config.compose import parse_override

    usage = "use key=value, e.g. model=qwen3_5_moe or cache.block_size=64"
    if not isinstance(item, str) or "=" not in item:
        raise ConfigError("--lw-override", item, usage)
    try:
        override = parse_override(item, sweep=True)
    except ConfigError as exc:
        raise ConfigError("--lw-override", item, usage, str(exc)) from None
    key = override.key_or_group
    if key in AXIS_KEYS:
        if override.is_sweep_override():
            values = [str(v).strip() for v in override.sweep_string_iterator()]
        else:
            values = [override.get_value_element_as_str().strip()]
        values = [v for v in values if v]
        if not values:
            allowed = TC_IDS if key == "tc" else available(key)
            raise ConfigError(key, override.get_value_element_as_str(),
                              f"at least one value (empty sweep); allowed: {', '.join(allowed)}")
        setattr(matrix, AXIS_KEYS[key], values)
    else:
        matrix.extra.append(item)


def _check(matrix: Matrix) -> None:
    groups = {
        "models": "model",
        "layerwise": "layerwise",
        "parallel": "parallel",
        "implementations": "implementation",
        "hardware": "hardware",
        "topologies": "topology",
    }
    for axis, group in groups.items():
        allowed = available(group)
        for value in getattr(matrix, axis):
            if value not in allowed:
                raise ConfigError(group, value, f"allowed: {', '.join(allowed)}")
    for tc in matrix.tcs:
        if tc not in TC_IDS:
            raise ConfigError("tc", tc, f"allowed: {', '.join(TC_IDS)}")
