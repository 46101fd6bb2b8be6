"""The option values the engine hands the estimation are the tree's compiled code (role ``engine_options``), never the
Python model: the build cuts ``LLMEngine``'s attention TP size (its constructor), its local KV and linear heads per
TP rank (``init_model``) and the ``KVCacheEstimateOptions`` it fills (``estimate_kv_cache_capacity``: the draft's
TP-1 body, the draft's split size 1) out of ``llm_engine.cpp``, and the draft's layer count
(``WorkerImpl::get_num_layers``) out of ``worker_impl.cpp``, behind ``cpp/engine_options_shim.h``.

Expected values come from the oracle (``harness.departures.judge.spec_engine_options``). On the upstream-shaped
fixture tree (its ``xllm/core/distributed_runtime/llm_engine.cpp``) and, in the real-tree step, on upstream's;
planted: a build whose engine keeps every KV head on each TP rank (``FIXTURE_PLANT_HEADS_UNDIVIDED``) is one
``engine_options`` departure with the tree's figure against the spec's; a port with neither an engine of its own
nor a base fails naming the role; a tree without the engine's statements fails naming its file."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from contract.errors import PlanError
from contract.specs import CacheSpec
from harness.departures.judge import JudgedCase, case_tcs, judge, spec_engine_options
from implementations.xllm_native import call_role
from implementations.xllm_native.manifest import AbsentRoleError
from testcases.real_trees import UPSTREAM, real_tree
from testcases.unit import _models as M

pytestmark = pytest.mark.slow  # builds C++: scheduled first

FIXTURE = Path(__file__).resolve().parent / "fixture_tree"
FIXTURE_PORT = Path(__file__).resolve().parent / "fixture_port"
BODY_TP1 = replace(M.QWEN3_5_MTP, body_tp1=True)
RUNS = {  # (run, its target's and its draft's local KV heads as FEATURE 5 gives them)
    "deepseek_v3 tp4 (MLA: one latent head)": (M.run_spec(M.DEEPSEEK_V3, world=4), 1, None),
    "deepseek_v32 tp4 s2": (M.run_spec(M.DEEPSEEK_V32, split=2, world=4), 1, None),
    "qwen3_5_moe tp4: max(1, 2 / 4)": (M.run_spec(M.QWEN3_5_MOE, split=2, world=4), 1, None),
    "llama3_8b tp4: 8 / 4": (M.run_spec(M.LLAMA3_8B, world=4), 2, None),
    "llama3_8b dp2 x tp4": (M.run_spec(M.LLAMA3_8B, world=8, dp=2), 2, None),
    "qwen3_5_moe s2 + MTP draft": (M.run_spec(M.QWEN3_5_MOE, split=2, world=4, draft=M.QWEN3_5_MTP), 1, 1),
    "qwen3_5_moe s2 + MTP draft, body TP1": (M.run_spec(M.QWEN3_5_MOE, split=2, world=4, draft=BODY_TP1), 1, 2),
}



def assert_spec_values(impl) -> None:
    for name, (run, heads, draft_heads) in RUNS.items():
        s = run.layerwise.split_size if run.layerwise.enable else 1
        for draft, want_heads in ((False, heads), (True, draft_heads)):
            if draft and run.draft is None:
                continue
            got = call_role(impl, "engine_options", run, draft=draft)
            spec = spec_engine_options(run, s, draft=draft)
            assert {k: got[k] for k in spec} == spec, (name, "draft" if draft else "target", got, spec)
            assert got["n_local_kv_heads"] == want_heads, (name, got)
        if run.draft is not None:
            assert call_role(impl, "engine_options", run, draft=True)["layerwise_split_size"] == 1, name


def test_the_engines_option_values_are_the_spec_s_on_the_upstream_shaped_tree(implementation):
    assert_spec_values(implementation())


@pytest.mark.real_tree
@real_tree(UPSTREAM)
def test_upstreams_engine_option_values_are_the_spec_s(implementation):
    assert_spec_values(implementation(source_dir=UPSTREAM))


def test_an_engine_keeping_every_head_is_one_engine_options_departure(implementation, tmp_path):
    """The heads not divided by the TP size, and a draft engine keeping the split size, each read once as the engine's
    departure with both figures; the estimation and the speculative engine, fed the spec's values, do not repeat
    them; the plain build has no engine_options departure."""
    planted = tmp_path / "lwsplit-manifest.yaml"
    planted.write_text((FIXTURE / "lwsplit-manifest.yaml").read_text().replace(
        "compile: upstream-cut\n",
        "compile: upstream-cut\ndefines: [FIXTURE_PLANT_HEADS_UNDIVIDED, FIXTURE_PLANT_DRAFT_KEEPS_SPLIT]\n"))
    budget = {"budget_bytes": 1 << 30, "cache": CacheSpec(block_size=16)}
    split_model = replace(M.LLAMA3_8B, model_type="fixture_split")
    draft = replace(split_model, name="llama_draft", num_hidden_layers=1)
    cases = [JudgedCase(id=f"llama-{w}", run=M.run_spec(M.LLAMA3_8B, world=w, **budget), tcs=case_tcs(False))
             for w in (4, 2)]
    cases.append(JudgedCase(id="split-draft", run=M.run_spec(split_model, split=2, world=4, draft=draft, **budget),
                            tcs=case_tcs(True, draft=True)))
    found = judge(implementation(manifest=planted), cases)
    engine = [d for d in found.departures if d.role == "engine_options"]
    assert [(d.rule.split(":")[0], d.tree, d.spec, d.cases) for d in engine] == [
        ("target", "8", "2", ("llama-4", "split-draft")), ("target", "8", "4", ("llama-2",)),
        ("draft", "8", "2", ("split-draft",)), ("draft", "2", "1", ("split-draft",))], engine
    assert engine[0].rule.startswith("target: KV heads per TP rank") and engine[0].function == \
        "LLMEngine::estimate_kv_cache_capacity" and engine[0].file.endswith("llm_engine.cpp"), engine[0]
    assert engine[3].rule.startswith("draft: the draft engine never splits"), engine[3]
    plain = judge(implementation(), cases)
    assert not [d for d in plain.departures if d.role == "engine_options"], plain.departures
    fed = ("estimation", "speculative")  # judged on the spec's engine values: the planted build's list is the plain's
    assert [d for d in found.departures if d.role in fed] == [d for d in plain.departures if d.role in fed]


def test_a_port_with_no_engine_and_no_base_fails_naming_the_role(implementation, tmp_path):
    text = (FIXTURE_PORT / "manifest.yaml").read_text()
    manifest = tmp_path / "no_engine.yaml"
    manifest.write_text("\n".join(line for line in text.splitlines() if not line.lstrip().startswith("engine_options:"))
                        .replace("glue: glue.cpp", f"glue: {FIXTURE_PORT / 'glue.cpp'}")
                        .replace("glue: alloc_glue.cpp", f"glue: {FIXTURE_PORT / 'alloc_glue.cpp'}") + "\n")
    impl = implementation(manifest, source_dir=FIXTURE_PORT)
    with pytest.raises(AbsentRoleError) as err:
        impl.plan(M.run_spec(M.QWEN3_5_MOE, split=2, world=4))
    assert err.value.role == "engine_options" and "manifest role `engine_options` is absent" in str(err.value)


def test_a_tree_without_the_engines_statements_fails_naming_the_file(implementation, tmp_path):
    elsewhere = tmp_path / "llm_engine.cpp"
    elsewhere.write_text("// no LLMEngine here\n")
    impl = implementation(manifest=FIXTURE / "lwsplit-manifest.yaml", files={"engine_options": str(elsewhere)})
    with pytest.raises(PlanError) as err:
        impl.plan(M.run_spec(M.LLAMA3_8B, world=4))
    assert err.value.field == "implementation.files.engine_options", err.value
    assert "defines no LLMEngine::LLMEngine" in str(err.value), err.value


def test_upstreams_engine_hands_no_linear_heads_to_a_model_without_linear_layers_and_tc02_predicts_it():
    """A model with linear-attention heads but every layer full attention (the explorer draws such): upstream's
    engine divides the linear heads only when ``has_linear_attention_layers``, so its compiled estimation gives
    ``linear_slot_size`` 0 where FEATURE 5's formula gives more; TC-02 of upstream's tree predicts exactly that
    (strict: the test fails if the plan holds the formula's figure), no other TC does, and a model with linear
    layers is predicted nothing."""
    from harness.suites import expectations

    no_linear = replace(M.QWEN3_5_MOE, name="all_full", num_hidden_layers=4, layer_types=None,
                        full_attention_interval=1)
    run = M.run_spec(no_linear, world=4)
    pred = expectations.prediction("TC-02", "xllm_native", run)
    assert pred is not None and [(p.rule, p.says) for p in pred.required] == [("layout", "linear_slot_size: plan 0,")]
    assert expectations.prediction("TC-05", "xllm_native", run) is None
    assert expectations.prediction("TC-02", "xllm_native", M.run_spec(M.QWEN3_5_MOE, world=4)) is None


ENGINE_TEXT = """\
Engine::Engine(const Options& options) : options_(options), pool_(make_pool(1)) {
  CHECK(ready());
  // "dp_size_ = fake" in a comment is not the statement
  dp_size_ = options_.dp_size();
  if (dp_size_ > 1) {
    tp_ = world_ / dp_size_;
  }
  pool_ = make_pool(tp_);
}
void Engine::half() {
  a_ = 1;
  if (b_) {
    c_ = 2;
  }
}
"""


@pytest.mark.parametrize("name, start, end, want", [
    ("Engine::Engine", r"\bdp_size_\s*=\s*options_", r"\bpool_\s*=", (4, "dp_size_ = options_.dp_size();")),
    ("Engine::Engine", r"\bnothing_here\b", r"\bpool_\b", "Engine::Engine has no statement matching"),
    ("Engine::half", r"\bif\s*\(\s*b_", r"\bc_\s*=", "not whole blocks"),
    ("Engine::gone", r"\ba_\b", r"\bb_\b", "defines no Engine::gone"),
])
def test_statements_between_cuts_a_constructors_statements_past_its_initializers(name, start, end, want):
    """``tree.cut.statements_between`` (what ``ENGINE_OPTIONS_CUTS`` uses): a constructor's body past its member
    initializers, patterns matched on code only (a comment saying the same is skipped), and the statements up to the
    line of the end pattern; none (with why) when a pattern is missing, the function is not there, or the cut
    would split a block."""
    from implementations.xllm_native.tree.cut import statements_between

    line, text, why = statements_between(ENGINE_TEXT, name, start, end)
    if isinstance(want, tuple):
        assert (line, why) == (want[0], "") and text.startswith("  " + want[1]) and "tp_ = world_ / dp_size_;" in text \
            and "pool_ = make_pool(tp_)" not in text, (line, text, why)
    else:
        assert (line, text) == (0, "") and want in why, why
