"""``_target_`` on the command line: only Protocol classes and shipped callbacks (harness.config.targets)."""

from __future__ import annotations

import pytest

from contract.errors import ConfigError
from harness.config import targets

pytestmark = pytest.mark.unit


def test_reference_class_is_accepted():
    cls = targets.check_implementation_node({"_target_": "implementations.reference.ReferenceImplementation"})
    assert cls.__name__ == "ReferenceImplementation"


@pytest.mark.parametrize("target,why", [
    ("builtins.open", "not a class"),
    ("os.system", "not a class"),
    ("subprocess.Popen", "lacks plan"),
    ("collections.OrderedDict", "lacks plan"),
    ("no_such_module_xyz.Thing", "importable"),
])
def test_callables_that_are_not_implementations_are_refused_before_any_call(target, why, tmp_path):
    with pytest.raises(ConfigError) as info:
        targets.check_implementation_node({"_target_": target})
    assert info.value.field == "implementation"
    assert why in str(info.value)


@pytest.mark.parametrize("key", ["_args_", "_partial_", "_recursive_", "_convert_"])
def test_instantiation_options_are_refused(key):
    node = {"_target_": "implementations.reference.ReferenceImplementation", key: ["/tmp/x", "w"]}
    with pytest.raises(ConfigError) as info:
        targets.check_implementation_node(node)
    assert info.value.field == f"implementation.{key}"


def test_nested_target_is_refused():
    node = {"_target_": "implementations.reference.ReferenceImplementation",
            "helper": {"inner": {"_target_": "os.system", "command": "true"}}}
    with pytest.raises(ConfigError, match="nested"):
        targets.check_implementation_node(node)


@pytest.mark.parametrize("override", [
    "+hydra.callbacks.x._target_=os.system",
    "hydra.callbacks.sweep._target_=builtins.print",
    "hydra.launcher._target_=os.system",
    "+model._target_=os.system",
    "+hydra.callbacks.x._args_=[rm]",
])
def test_target_overrides_outside_implementation_are_refused(override):
    with pytest.raises(ConfigError):
        targets.check_override_targets([override])


def test_shipped_callback_and_implementation_overrides_pass():
    targets.check_override_targets([
        "+hydra.callbacks.again._target_=harness.app.callback.SweepCallback",
        "implementation._target_=implementations.reference.ReferenceImplementation",
        "model=deepseek_v32", "layerwise.split_size=2",
    ])


def test_a_key_the_class_does_not_take_is_named_without_calling_it():
    from implementations.faults import FaultyImplementation

    with pytest.raises(ConfigError) as info:
        targets.check_arguments(FaultyImplementation, {"_target_": "x", "behaviour": "raise", "rnak": 2})
    assert info.value.field == "implementation.rnak" and info.value.value == 2
    assert "behaviour, rank, point, exit_code" in str(info.value)
    assert targets.check_arguments(FaultyImplementation, {"_target_": "x", "behaviour": "raise", "rank": 2}) == \
        {"behaviour": "raise", "rank": 2}


def test_a_missing_required_argument_is_named():
    from implementations.faults import FaultyImplementation

    with pytest.raises(ConfigError) as info:
        targets.check_arguments(FaultyImplementation, {"_target_": "x", "rank": 2})
    assert info.value.field == "implementation" and "behaviour" in str(info.value)


def test_every_shipped_option_binds_its_arguments():
    from omegaconf import OmegaConf

    from harness.paths import CONF_DIR

    for path in sorted((CONF_DIR / "implementation").glob("*.yaml")):
        node = OmegaConf.to_container(OmegaConf.load(path))
        cls = targets.check_implementation_node(node)
        assert targets.check_arguments(cls, node).keys() == node.keys() - {"_target_"}, path.name


def test_locate_finds_a_class_by_its_dotted_path_and_names_what_is_missing():
    from harness.config.targets import locate
    from implementations.reference import ReferenceImplementation

    assert locate("implementations.reference.ReferenceImplementation") is ReferenceImplementation
    assert locate("implementations.reference.impl.ReferenceImplementation") is ReferenceImplementation
    with pytest.raises(ImportError, match="nowhere"):
        locate("nowhere.Impl")
    with pytest.raises(AttributeError, match="Nope"):
        locate("implementations.reference.Nope")
    with pytest.raises(ImportError, match="dotted path"):
        locate("implementations..Impl")
