"""The configurations of the native baseline (``native_planning.json``) and what is recorded of each.

``grid()`` lists the configurations as plain dicts (JSON); ``run_for`` turns one into a ``RunSpec``
with the models the baseline file itself carries, so the recorded numbers stay tied to the model
numbers they were computed for. ``observe`` is what both the recorder (on xLLM's compiled planning
code, ``implementation=xllm_native``) and the check (on ``xllm_upstream``) keep of a plan or a refusal.
"""

from __future__ import annotations

import itertools
from dataclasses import asdict, fields, replace
from typing import Optional

from omegaconf import OmegaConf

from contract.errors import UserError
from contract.plan_types import KVPlan
from contract.specs import CacheSpec, HardwareProfile, LayerwiseFlags, ModelSpec, ParallelSpec, RunSpec, Topology
from harness.config.build import model_spec
from harness.paths import CONF_DIR

GiB, MiB, KiB = 1 << 30, 1 << 20, 1 << 10
CONF_MODELS = ("deepseek_v3", "deepseek_v32", "glm_moe_dsa", "qwen3_5_moe", "qwen3_next", "llama3_8b")
CONF_DRAFTS = ("deepseek_mtp", "deepseek_v32_mtp", "qwen3_5_mtp")
SYNTHETIC = (
    ModelSpec(name="tiny_mla", model_type="deepseek_v32", num_hidden_layers=5, attention="mla", kv_lora_rank=16,
              qk_rope_head_dim=8, index_n_heads=2, index_head_dim=16),
    ModelSpec(name="tiny_glm", model_type="glm_moe_dsa", num_hidden_layers=3, attention="mla", kv_lora_rank=8,
              qk_rope_head_dim=8),
    ModelSpec(name="tiny_gqa", model_type="llama", num_hidden_layers=3, attention="gqa", num_key_value_heads=3,
              head_dim=8, dtype="float16"),
    ModelSpec(name="tiny_hybrid", model_type="qwen3_5_moe", num_hidden_layers=8, attention="gqa",
              num_key_value_heads=2, head_dim=8, full_attention_interval=4, linear_num_key_heads=2,
              linear_num_value_heads=4, linear_key_head_dim=8, linear_value_head_dim=8, linear_conv_kernel_dim=4),
    ModelSpec(name="tiny_mtp", model_type="deepseek_v32", num_hidden_layers=1, attention="mla", kv_lora_rank=16,
              qk_rope_head_dim=8, index_n_heads=2, index_head_dim=16),
)
TINY = ("tiny_mla", "tiny_glm", "tiny_gqa", "tiny_hybrid")
PARALLEL = ((1, 1, 1, 1), (2, 1, 1, 1), (3, 1, 1, 1), (4, 1, 1, 1), (6, 1, 1, 1), (8, 1, 1, 1), (8, 2, 1, 1),
            (6, 2, 1, 1), (4, 1, 2, 1), (4, 1, 1, 2), (4, 1, 1, 0))
"""(world, dp, cp, kv_split): attention tp 1, 2, 3, 4, 6, 8, 4 (dp 2), 3 (dp 2), 2 (cp 2), 4 with KV split 2
and 0 (follows cp)."""


def load_models() -> dict:
    """The shipped models and drafts (``conf/model``, ``conf/draft``) and the synthetic ones, by name."""
    out = {m.name: m for m in SYNTHETIC}
    for group, names in (("model", CONF_MODELS), ("draft", CONF_DRAFTS)):
        for name in names:
            out[name] = model_spec(OmegaConf.to_container(OmegaConf.load(CONF_DIR / group / f"{name}.yaml")))
    return out


def model_to_json(model: ModelSpec) -> dict:
    return {k: v for k, v in asdict(model).items() if v != ModelSpec.__dataclass_fields__[k].default or k == "name"}


def model_from_json(node: dict) -> ModelSpec:
    node = dict(node)
    if node.get("layer_types") is not None:
        node["layer_types"] = tuple(node["layer_types"])
    return ModelSpec(**node)


def _cfg(model: str, s: int, par=(4, 1, 1, 1), **kw) -> dict:
    world, dp, cp, kv_split = par
    out = {"model": model, "s": s, "world": world, "dp": dp, "cp": cp, "kv_split": kv_split}
    out.update(kw)
    return out


def grid() -> list[dict]:
    """Every configuration, each a dict of the settings that differ from ``run_for``'s defaults."""
    models = CONF_MODELS + TINY
    out: list[dict] = []
    for model, s, par in itertools.product(models, range(7), PARALLEL):  # startup rules and the split itself
        out.append(_cfg(model, s, par))
        if par == (4, 1, 1, 1):
            out.append(_cfg(model, s, par, budget=48 * MiB, block=16))
    for model, kv, idx, s in itertools.product(models, ("auto", "int8", "fp8_e4m3", "fp8_e5m2"), ("auto", "int8"),
                                               (1, 2, 4)):
        out.append(_cfg(model, s, kv_dtype=kv, idx_dtype=idx))
    for model, block, s in itertools.product(TINY, (1, 16, 128), (1, 2, 4)):  # budgets down to one block
        for budget in (256, 1 * KiB, 3 * KiB, 8 * KiB, 64 * KiB):
            out.append(_cfg(model, s, block=block, budget=budget, max_seqs=0))
    for model, block in itertools.product(CONF_MODELS, (16, 256)):
        out.append(_cfg(model, 2, block=block, budget=8 * MiB))
    targets = ("deepseek_v3", "deepseek_v32", "glm_moe_dsa", "qwen3_5_moe", "tiny_mla", "tiny_hybrid")
    for target, draft, tp1, s in itertools.product(targets, CONF_DRAFTS + ("tiny_mtp",), (False, True), (1, 2, 4)):
        out.append(_cfg(target, s, draft=draft, body_tp1=tp1))
    for model, prefix, seqs, slots, spec, s in itertools.product(
            ("qwen3_5_moe", "qwen3_next", "tiny_hybrid"), (True, False), (0, 8, 200), (0, 4), (0, 2), (1, 2)):
        out.append(_cfg(model, s, prefix=prefix, max_seqs=seqs, max_slots=slots, spec_tokens=spec,
                        budget=2 * GiB if model != "tiny_hybrid" else 64 * KiB))
    return out


def run_for(cfg: dict, models: dict) -> RunSpec:
    """The ``RunSpec`` of one grid entry (KV budget 16 GiB, block 128, every quantized cache allowed)."""
    world = cfg["world"]
    budget = cfg.get("budget", 16 * GiB)
    model = models[cfg["model"]]
    draft = None
    if cfg.get("draft"):
        draft = replace(models[cfg["draft"]], body_tp1=cfg.get("body_tp1", False))
    cards = tuple(f"C{i}" for i in range(world))
    links = tuple(tuple("X" if i == j else "PIX" for j in range(world)) for i in range(world))
    hardware = HardwareProfile(
        name="native_grid", device_type="cpu", kv_layout="heads_major", num_cards=world,
        hbm_bytes_per_card=budget + GiB, reserved_bytes_per_card=GiB,
        topology=Topology(cards=cards, links=links, name=f"flat_{world}"),
        quantized_kv_cache_dtypes=("int8", "fp8_e4m3", "fp8_e5m2"), int8_indexer_cache=True)
    cache = CacheSpec(block_size=cfg.get("block", 128), kv_cache_dtype=cfg.get("kv_dtype", "auto"),
                      indexer_cache_dtype=cfg.get("idx_dtype", "auto"), max_seqs_per_batch=cfg.get("max_seqs", 200),
                      max_linear_state_cache_slots=cfg.get("max_slots", 0),
                      enable_prefix_cache=cfg.get("prefix", True), num_speculative_tokens=cfg.get("spec_tokens", 0))
    return RunSpec(model=model, parallel=ParallelSpec(world_size=world, dp_size=cfg["dp"], cp_size=cfg["cp"],
                                                      kv_split_size=cfg["kv_split"]),
                   cache=cache, layerwise=LayerwiseFlags(enable=True, split_size=cfg["s"]), hardware=hardware,
                   draft=draft)


PLAN_FIELDS = ("active", "n_blocks", "uniform_n_blocks", "slot_size", "index_slot_size", "scale_slot_size",
               "num_indexer_layers", "linear_slot_size", "num_linear_state_blocks", "linear_state_bytes",
               "scratch_bytes_per_block", "additional_bytes_per_block")
"""Plan figures the baseline records (the compiled code's, or computed from its capacities)."""
assert set(PLAN_FIELDS) <= {f.name for f in fields(KVPlan)}


def observe(plan: Optional[KVPlan], error: Optional[UserError] = None) -> dict:
    """What the baseline keeps: the refusal's field, or the plan's figures and each full layer's owner."""
    if error is not None:
        return {"refused": error.field}
    out = {name: getattr(plan, name) for name in PLAN_FIELDS}
    out["full_layers"] = len(plan.full_layers)
    out["owners"] = [owner for _, owner in plan.layer_owner]
    out["draft_layer_bytes"] = list(plan.draft.layer_bytes_per_block) if plan.draft is not None else None
    return out


def observe_run(impl, run: RunSpec) -> dict:
    try:
        return observe(impl.plan(run))
    except UserError as exc:
        return observe(None, exc)

