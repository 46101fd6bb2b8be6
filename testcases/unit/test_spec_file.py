"""A ``RunSpec`` as data (``harness.config.spec_file``) and ``python -m harness.plan --run-spec FILE``: the spec
reads back as written, a field that is not the spec's is one error line naming it, and the command plans the
file's spec exactly as the overrides composing it are planned."""

from __future__ import annotations

import json

import pytest

from contract.errors import ConfigError
from harness import plan as plan_cli
from harness.config import spec_file
from harness.suites.case import resolve

pytestmark = pytest.mark.unit

WORKED = ("model=deepseek_v32", "hardware=bi_v100", "parallel=tp4", "layerwise=s2")
HYBRID = ("model=qwen3_5_moe", "draft=qwen3_5_mtp", "layerwise=s2", "placement=[0,0,1,1]", "cache.kv_cache_dtype=int8")


@pytest.mark.parametrize("overrides", [WORKED, HYBRID], ids=["worked", "hybrid-draft-placement"])
def test_a_spec_reads_back_as_written(tmp_path, overrides):
    run = resolve(overrides).run
    assert spec_file.read(spec_file.write(tmp_path / "run.json", run)) == run
    assert spec_file.from_data(json.loads(spec_file.to_text(run))) == run


@pytest.mark.parametrize("change, expected", [
    (lambda d: d["cache"].update(block_size="64"), "--run-spec run.cache.block_size='64': an int"),
    (lambda d: d["cache"].update(bogus=1), "--run-spec run.cache.bogus=1: a field of CacheSpec: block_size,"),
    (lambda d: d.pop("parallel"), "--run-spec run.parallel=None: given: RunSpec has no default for it"),
    (lambda d: d["layerwise"].update(enable=1), "--run-spec run.layerwise.enable=1: a bool (true or false)"),
    (lambda d: d["hardware"]["topology"].update(cards="GPU0"), "run.hardware.topology.cards='GPU0': a list"),
    (lambda d: d["model"].update(num_hidden_layers=10**9), "model.num_hidden_layers=1000000000: at most"),
], ids=["string-for-int", "unknown-field", "missing-field", "int-for-bool", "string-for-list", "past-bounds"])
def test_a_field_that_is_not_the_specs_is_named(change, expected):
    data = spec_file.to_data(resolve(WORKED).run)
    change(data)
    with pytest.raises(ConfigError) as info:
        spec_file.from_data(data)
    assert expected in str(info.value) and "\n" not in str(info.value), str(info.value)


def test_the_command_plans_the_files_spec_as_the_overrides_plan_it(tmp_path, capsys):
    path = spec_file.write(tmp_path / "run.json", resolve((*WORKED, "implementation=reference")).run)
    assert plan_cli.main(["--run-spec", str(path), "implementation=reference"]) == 0
    from_file = json.loads(capsys.readouterr().out)
    assert plan_cli.main([*WORKED, "implementation=reference"]) == 0
    assert from_file == json.loads(capsys.readouterr().out)
    assert (from_file["n_blocks"], from_file["uniform_n_blocks"]) == (2978, 1562)  # FEATURE section 6


@pytest.mark.parametrize("extra, expected", [
    (["model=qwen3_5_moe"], "model='qwen3_5_moe': implementation=... only, beside --run-spec"),
    (["--gflags", "--layerwise_split_size=2"], "not with --gflags or --parallel-config"),
    (["--run-spec", "/nonexistent/run.json"], "--run-spec"),
], ids=["another-group", "engine-flags", "no-file"])
def test_what_the_file_does_not_allow_beside_it_is_one_line(tmp_path, capsys, extra, expected):
    path = spec_file.write(tmp_path / "run.json", resolve(WORKED).run)
    with pytest.raises(SystemExit) as info:
        plan_cli.main(["--run-spec", str(path), *extra])
    out, err = capsys.readouterr()
    assert info.value.code == 2 and out == "" and err.count("\n") == 1 and err.startswith("error: "), err
    assert expected in err, err


def test_a_specs_kept_hash_is_its_fields_hash_and_never_travels():
    """A spec keeps its hash (the oracle's memos key on specs): equal specs hash alike, a variant hashes anew, and
    pickling or copying a spec (to a rank, a worker) carries its fields only, never the hash of this process."""
    import copy
    import pickle
    from dataclasses import replace

    run = resolve(HYBRID).run
    assert hash(run) == hash(replace(run)) and hash(run.model) == hash(replace(run.model))
    assert hash(run.model) == hash(tuple(getattr(run.model, f) for f in run.model.__dataclass_fields__))
    assert hash(replace(run.cache, block_size=run.cache.block_size * 2)) != hash(run.cache)
    for again in (pickle.loads(pickle.dumps(run)), copy.deepcopy(run), copy.copy(run.hardware)):
        assert again == run or again == run.hardware
        assert "_hash_of_fields" not in vars(again)
    with pytest.raises(AttributeError):  # still frozen (FrozenInstanceError)
        run.model.num_hidden_layers = 1
