"""The case matrix: axes from ``conf/matrix/<name>.yaml``, narrowed by overrides.

An override on an axis (``model=qwen3_5_moe``, ``layerwise=s2,s4``) replaces that
axis's values. A key of the ``layerwise`` or ``parallel`` group
(``layerwise.split_size=2``, ``parallel.dp_size=2``) changes that axis's options: every
case composing one of them gets it, and the TCs choose their cases by the value that
results (``Matrix.layerwise_flags``, ``Matrix.parallel_spec``), never by option name.
Options a TC names itself that the axis lacks (a rule's own variant) stay as shipped.
Any other override (``cache.block_size=64``) is passed to every case's composition.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Mapping, Optional, Sequence

from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from contract.errors import ConfigError
from contract.specs import LayerwiseFlags, ParallelSpec
from harness.config.compose import parse_override
from harness.config.schema import TC_IDS
from harness.paths import CONF_DIR
from harness.suites.case import Case, option_spec

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
VALUE_GROUPS = ("layerwise", "parallel")
"""Groups whose key overrides change the matrix axis's options rather than every case."""
NEUTRAL_ROOTS = ("implementation", "runner", "report", "suite")
"""Key roots that choose or locate the implementation (``implementation.source_dir``, ``implementation._target_``)
or steer the runner and the reports: they never change what a case configures, so they never remove a case."""


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
    group_keys: dict[str, list[str]] = field(default_factory=dict)
    """``layerwise``/``parallel`` -> that group's key overrides, applied to the axis's options."""

    def keys_for(self, group: str, option: Optional[str]) -> tuple[str, ...]:
        """The group's key overrides if ``option`` is on its axis; none for ``None``."""
        return tuple(self.group_keys.get(group, ())) if option in getattr(self, AXIS_KEYS[group]) else ()

    def extra_for(self, layerwise: Optional[str] = None, parallel: Optional[str] = None) -> tuple[str, ...]:
        """A case's key overrides: the group keys of the options it takes from the axes, then the
        matrix's other key overrides. Pass ``None`` for an option the TC names itself: it stays as shipped."""
        return (*self.keys_for("layerwise", layerwise), *self.keys_for("parallel", parallel), *self.extra)

    def config_keys(self) -> tuple[str, ...]:
        """The key overrides (``extra``) that change a case's configuration: all but those under ``NEUTRAL_ROOTS``."""
        return tuple(k for k in self.extra if k.lstrip("+~").split(".", 1)[0].split("=", 1)[0] not in NEUTRAL_ROOTS)

    def first_case(self, implementation: Optional[str] = None) -> Case:
        """The configuration of the first option on every axis (``implementation`` instead of the first
        implementation, where given), with the key overrides its options take, as a case of no TC: one
        configuration of the matrix for the checks made once per session; for a job's matrix (one option
        per axis, ``job_matrix``) the job's own configuration, whose id its TCs' result lines carry."""
        lw, par = self.layerwise[0], self.parallel[0]
        return Case(tc="", model=self.models[0], layerwise=lw, parallel=par, hardware=self.hardware[0],
                    implementation=implementation or self.implementations[0], extra=self.extra_for(lw, par))

    def layerwise_flags(self, option: str) -> LayerwiseFlags:
        """What an axis option means in this matrix: the shipped option with the group's keys on top."""
        return option_spec("layerwise", option, self.keys_for("layerwise", option))

    def parallel_spec(self, option: str) -> ParallelSpec:
        return option_spec("parallel", option, self.keys_for("parallel", option))

    def value(self, group: str, option: str):
        return self.layerwise_flags(option) if group == "layerwise" else self.parallel_spec(option)

    def offers(self, group: str, option: str) -> bool:
        """Whether an axis option means what the shipped ``option`` means (a TC's own variant of it runs)."""
        return bool(self.offered(group, [option]))

    def offered(self, group: str, options: Sequence[str]) -> list[str]:
        """The axis options whose value here equals a shipped option of ``options`` (in their order)."""
        axis = getattr(self, AXIS_KEYS[group])
        out = []
        for option in options:
            shipped = option_spec(group, option)
            out += [a for a in axis if self.value(group, a) == shipped and a not in out][:1]
        return out

    def preferred(self, group: str, options: Sequence[str]) -> list[str]:
        """The axis options equal to one of ``options``; the whole axis if none are (a run narrowed to
        other values gets those, rather than no cases)."""
        return self.offered(group, options) or list(getattr(self, AXIS_KEYS[group]))


def available(group: str) -> list[str]:
    if group == "topology":
        return sorted({p.stem for p in (CONF_DIR / group).iterdir() if p.suffix in (".txt", ".yaml", ".yml")})
    return sorted(p.stem for p in (CONF_DIR / group).glob("*.yaml"))


def load_matrix(name: str, overrides: list[str] = ()) -> Matrix:
    """Load ``conf/matrix/<name>.yaml`` and apply ``overrides``; ConfigError on any mistake."""
    matrix = _load(name)
    for item in overrides:
        _apply(matrix, item)
    return _checked(matrix)


def job_matrix(name: str, axes: Mapping[str, str], tcs: Sequence[str], keys: Sequence[str] = ()) -> Matrix:
    """The matrix of one configuration (``python -m harness``'s job): ``conf/matrix/<name>.yaml`` with
    each axis of ``axes`` (``{"model": "qwen3_5_moe", ...}``) set to that one option, ``tcs`` as its TCs,
    and the configuration's key overrides ``keys`` placed as ``load_matrix`` places them. ConfigError on
    any mistake, as ``load_matrix``'s."""
    matrix = _load(name)
    for group, option in axes.items():
        setattr(matrix, AXIS_KEYS[group], [option])
    matrix.tcs = list(tcs)
    for item in keys:
        _apply(matrix, item)
    return _checked(matrix)


def _checked(matrix: Matrix) -> Matrix:
    _check(matrix)
    for group in VALUE_GROUPS:
        _drop_equal_options(matrix, group)
    return matrix


def _load(name: str) -> Matrix:
    path = CONF_DIR / "matrix" / f"{name}.yaml"
    if not path.is_file():
        raise ConfigError("matrix", name, f"allowed: {', '.join(available('matrix'))}")
    try:
        loaded = OmegaConf.merge(OmegaConf.structured(Matrix), OmegaConf.load(path))
    except OmegaConfBaseException as exc:
        key = getattr(exc, "full_key", "") or "?"
        allowed = ", ".join(f.name for f in fields(Matrix))
        raise ConfigError(f"matrix {name}: {key}", "", f"allowed keys: {allowed}") from None
    return Matrix(**OmegaConf.to_container(loaded))


def _drop_equal_options(matrix: Matrix, group: str) -> None:
    """Keep the first of the axis options the group keys make equal (``layerwise.split_size=2`` turns
    s2 and s4 into the same split): one case per value, not two with one id."""
    kept, values = [], []
    for option in getattr(matrix, AXIS_KEYS[group]):
        value = matrix.value(group, option)
        if value not in values:
            kept.append(option)
            values.append(value)
    setattr(matrix, AXIS_KEYS[group], kept)


def _apply(matrix: Matrix, item: str) -> None:
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
    elif key.split(".", 1)[0] in VALUE_GROUPS and "." in key:
        matrix.group_keys.setdefault(key.split(".", 1)[0], []).append(item)
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
