"""The recorded pre-feature uniform allocation that TC-06 compares against.

    python -m harness.suites.baseline --record   # (re)write harness/baselines/uniform_allocation.json
    python -m harness.suites.baseline --check    # recompute and diff against the recorded file

Computed from the model config numbers (the ``conf/model`` options, composed as the
suites compose them) and FEATURE.md alone, never by running an implementation:
section 5 (bytes and heads per rank), section 6 (the uniform block count, via
``harness.oracle``) and section 7 (every rank allocates every layer; heads-major
``[n_blocks, n_heads, block_size, head_dim]``; MLA latent + rope, GQA k + v, an index
tensor on DSA layers; linear layers keep conv + recurrent state). Tensor names are
the interface's (``contract/interface.py``: latent/rope, k/v, index,
conv/recurrent). Linear state shapes follow upstream's ``KVCacheShape`` (FEATURE v2
section 7): conv ``[slots, kernel - 1, conv_dim]``, recurrent ``[slots, v_heads,
key_dim, value_dim]``; slots per FEATURE v2 section 5 (upstream
``calculate_linear_state_blocks``, written out here in ``linear_state_slots``).
Provenance: harness/baselines/README.md.
"""

from __future__ import annotations

import argparse
import datetime
import json
import subprocess
import sys
from pathlib import Path

from harness import oracle
from harness.paths import BASELINE_PATH, REPO_ROOT  # package data: an installed harness has it too
from harness.suites.case import resolve

MODELS = ("deepseek_v3", "deepseek_v32", "glm_moe_dsa", "qwen3_5_moe", "qwen3_next", "llama3_8b")
PARALLEL = ("tp4", "dp2_tp4")
HARDWARE = ("cpu",)
FORMAT = 2
"""2: FEATURE v2 defaults (prefix cache on, 200 sequences) and upstream's linear-state slots / conv shape."""
LINEAR_STATE_PADDING_SLOTS = 2
_DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4, "int8": 1, "fp8_e4m3": 1, "fp8_e5m2": 1}
_TORCH_DTYPE = {"fp8_e4m3": "float8_e4m3fn", "fp8_e5m2": "float8_e5m2"}
"""The names torch prints (the suites record ``str(tensor.dtype)`` without ``torch.``)."""


def key(model: str, parallel: str, hardware: str) -> str:
    return f"{model}/{parallel}/{hardware}"


def conditions(run) -> dict:
    """Everything besides model and parallel that the uniform allocation depends on."""
    c = run.cache
    return {
        "kv_layout": run.hardware.kv_layout,
        "kv_budget_bytes": run.kv_budget_bytes,
        "block_size": c.block_size,
        "kv_cache_dtype": c.kv_cache_dtype,
        "indexer_cache_dtype": c.indexer_cache_dtype,
        "max_seqs_per_batch": c.max_seqs_per_batch,
        "max_linear_state_cache_slots": c.max_linear_state_cache_slots,
        "enable_prefix_cache": c.enable_prefix_cache,
        "num_speculative_tokens": c.num_speculative_tokens,
    }


def linear_state_slots(*, budget_bytes: int, num_linear_layers: int, linear_slot_bytes: int,
                       full_bytes_per_block: int, max_seqs_per_batch: int, max_linear_state_cache_slots: int,
                       enable_prefix_cache: bool) -> int:
    """FEATURE v2 section 5, as written there (C budget, L layers, ls slot bytes, F uniform bytes per block)."""
    pad = LINEAR_STATE_PADDING_SLOTS
    if num_linear_layers == 0 or linear_slot_bytes == 0:
        return pad
    per_slot = num_linear_layers * linear_slot_bytes
    c, f = budget_bytes, full_bytes_per_block
    cap = max(pad, min((c - 1) // per_slot, (c + pad * f) // (per_slot + f)))
    if max_linear_state_cache_slots > 0:
        if max_linear_state_cache_slots + pad > cap:
            raise ValueError(f"max_linear_state_cache_slots {max_linear_state_cache_slots} + 2 > cap {cap}")
        return max_linear_state_cache_slots + pad
    if not enable_prefix_cache:
        return max(pad, min(max_seqs_per_batch + pad, cap))
    return min(max(pad, int(float(c) * (0.9 / 1.9)) // per_slot), cap)


def _tensor(shape: list[int], dtype: str) -> dict:
    numel = 1
    for dim in shape:
        numel *= dim
    return {"shape": shape, "dtype": _TORCH_DTYPE.get(dtype, dtype), "bytes": numel * _DTYPE_BYTES[dtype]}


def _blocks(layout: str, n_blocks: int, block_size: int, heads: int, dim: int) -> list[int]:
    if layout == "heads_major":
        return [n_blocks, heads, block_size, dim]
    return [n_blocks, block_size, heads, dim]


def full_layer_tensors(model, cache, tp: int, layout: str, n_blocks: int) -> dict:
    """FEATURE sections 5 and 7, unquantized KV (the recorded conditions say which)."""
    kv_dtype = model.dtype if cache.kv_cache_dtype == "auto" else cache.kv_cache_dtype
    if kv_dtype != model.dtype or cache.indexer_cache_dtype != "auto":
        raise ValueError("the baseline records unquantized KV and index caches only (kv/index cache dtype auto)")
    bs = cache.block_size
    if model.attention == "mla":
        out = {"latent": _tensor(_blocks(layout, n_blocks, bs, 1, model.kv_lora_rank), kv_dtype),
               "rope": _tensor(_blocks(layout, n_blocks, bs, 1, model.qk_rope_head_dim), kv_dtype)}
    else:
        heads = max(1, model.num_key_value_heads // tp)
        out = {"k": _tensor(_blocks(layout, n_blocks, bs, heads, model.head_dim), kv_dtype),
               "v": _tensor(_blocks(layout, n_blocks, bs, heads, model.head_dim), kv_dtype)}
    if model.index_n_heads > 0:  # one index head, model dtype
        out["index"] = _tensor(_blocks(layout, n_blocks, bs, 1, model.index_head_dim), model.dtype)
    return out


def linear_layer_tensors(model, cache, tp: int, slots: int) -> dict:
    """One linear layer's state (no speculative tokens: the recorded conditions say 0)."""
    if cache.num_speculative_tokens:
        raise ValueError("the baseline records runs without speculative tokens only")
    k_heads, v_heads = max(1, model.linear_num_key_heads // tp), max(1, model.linear_num_value_heads // tp)
    # Upstream init_conv_cache_shape counts value channels with linear_key_head_dim (FEATURE 7).
    conv_dim = 2 * model.linear_key_head_dim * k_heads + model.linear_key_head_dim * v_heads
    ssm_dtype = getattr(model, "mamba_ssm_dtype", None) or model.dtype
    return {
        "conv": _tensor([slots, model.linear_conv_kernel_dim - 1, conv_dim], model.dtype),
        "recurrent": _tensor([slots, v_heads, model.linear_key_head_dim, model.linear_value_head_dim], ssm_dtype),
    }


def _full_slot_bytes(model, tp: int) -> int:
    """Bytes per token slot of one full layer, FEATURE section 5, unquantized (KV and index dtype auto)."""
    d = _DTYPE_BYTES[model.dtype]
    if model.attention == "mla":
        slot = d * (model.kv_lora_rank + model.qk_rope_head_dim)
    else:
        slot = 2 * d * model.head_dim * max(1, model.num_key_value_heads // tp)
    return slot + (d * model.index_head_dim if model.index_n_heads > 0 else 0)


def _linear_slot_bytes(model, tp: int) -> int:
    """ls of FEATURE v2 section 5 (no speculative tokens), from the model numbers."""
    d = _DTYPE_BYTES[model.dtype]
    d_ssm = _DTYPE_BYTES[getattr(model, "mamba_ssm_dtype", None) or model.dtype]
    nk, nv = max(1, model.linear_num_key_heads // tp), max(1, model.linear_num_value_heads // tp)
    conv = d * (2 * model.linear_key_head_dim * nk + model.linear_value_head_dim * nv) * (
        model.linear_conv_kernel_dim - 1)
    return conv + d_ssm * nv * model.linear_key_head_dim * model.linear_value_head_dim


def entry(run, model: str, parallel: str, hardware: str) -> dict:
    """The uniform allocation of one configuration: identical on every rank."""
    tp = oracle.attn_tp_size(run)
    budget = run.kv_budget_bytes
    full = oracle.expected_full_layers(run.model)
    per_layer = [run.cache.block_size * _full_slot_bytes(run.model, tp) if layer in full else 0
                 for layer in range(run.model.num_hidden_layers)]
    full_bytes = sum(per_layer[layer] for layer in full)
    n_linear = run.model.num_hidden_layers - len(full)
    ls = _linear_slot_bytes(run.model, tp) if n_linear else 0
    c = run.cache
    slots = linear_state_slots(
        budget_bytes=budget, num_linear_layers=n_linear, linear_slot_bytes=ls, full_bytes_per_block=full_bytes,
        max_seqs_per_batch=c.max_seqs_per_batch, max_linear_state_cache_slots=c.max_linear_state_cache_slots,
        enable_prefix_cache=c.enable_prefix_cache)
    n_blocks = (budget - n_linear * slots * ls) // full_bytes  # FEATURE section 6, uniform
    layout = run.hardware.kv_layout
    layers = []
    for layer in range(run.model.num_hidden_layers):
        if layer in full:
            tensors = full_layer_tensors(run.model, run.cache, tp, layout, n_blocks)
        else:
            tensors = linear_layer_tensors(run.model, run.cache, tp, slots)
        layers.append({"layer": layer, "kind": "full" if layer in full else "linear", "tensors": tensors})
    _cross_check(run, layers, n_blocks, per_layer, slots * ls)
    return {
        "model": model,
        "parallel": parallel,
        "hardware": hardware,
        "world_size": run.parallel.world_size,
        "dp_size": run.parallel.dp_size,
        "attn_tp_size": tp,
        "conditions": conditions(run),
        "n_blocks": n_blocks,
        "num_linear_state_blocks": slots,
        "rank_bytes": sum(t["bytes"] for layer in layers for t in layer["tensors"].values()),
        "layers": layers,
    }


def _cross_check(run, layers: list[dict], n_blocks: int, per_layer, linear: int) -> None:
    """The shapes must add up to the byte formulas (two spellings of section 5)."""
    for layer in layers:
        got = sum(t["bytes"] for t in layer["tensors"].values())
        want = n_blocks * per_layer[layer["layer"]] if layer["kind"] == "full" else linear
        if got != want:
            raise ValueError(f"{run.model.name} layer {layer['layer']}: shapes give {got} B, section 5 gives {want} B")


def compute(models=MODELS, parallel=PARALLEL, hardware=HARDWARE) -> dict:
    out = {}
    for hw in hardware:
        for par in parallel:
            for model in models:
                overrides = (f"model={model}", "layerwise=off", f"parallel={par}", f"hardware={hw}", "draft=none")
                out[key(model, par, hw)] = entry(resolve(overrides).run, model, par, hw)
    return out


def load(path: Path = BASELINE_PATH) -> dict:
    return json.loads(Path(path).read_text(encoding="utf-8"))


def dumps(data: dict) -> str:
    """Pretty JSON with one line per layer (readable diffs, a short file)."""
    lines = ["{"]
    head = {k: v for k, v in data.items() if k != "entries"}
    for k, v in head.items():
        lines.append(f"  {json.dumps(k)}: {json.dumps(v)},")
    lines.append('  "entries": {')
    names = sorted(data["entries"])
    for i, name in enumerate(names):
        e = data["entries"][name]
        lines.append(f"    {json.dumps(name)}: {{")
        for k, v in e.items():
            if k != "layers":
                lines.append(f"      {json.dumps(k)}: {json.dumps(v)},")
        lines.append('      "layers": [')
        for j, layer in enumerate(e["layers"]):
            lines.append(f"        {json.dumps(layer)}{',' if j < len(e['layers']) - 1 else ''}")
        lines.append("      ]")
        lines.append(f"    }}{',' if i < len(names) - 1 else ''}")
    lines.append("  }")
    lines.append("}")
    return "\n".join(lines) + "\n"


def diff(recorded: dict, fresh: dict) -> list[str]:
    out = []
    for name in sorted(set(recorded) | set(fresh)):
        if name not in fresh:
            out.append(f"{name}: recorded but no longer computed")
        elif name not in recorded:
            out.append(f"{name}: computed but not recorded")
        elif recorded[name] != fresh[name]:
            fields = [k for k in fresh[name] if recorded[name].get(k) != fresh[name][k]]
            out.append(f"{name}: differs in {', '.join(fields)}")
    return out


def _git_commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True,
                              cwd=REPO_ROOT).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.suites.baseline", description=__doc__.split("\n")[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--record", action="store_true", help=f"write {BASELINE_PATH.name}")
    mode.add_argument("--check", action="store_true", help="recompute and diff against the recorded file")
    parser.add_argument("--path", type=Path, default=BASELINE_PATH)
    args = parser.parse_args(argv)
    fresh = compute()
    if args.check:
        problems = diff(load(args.path)["entries"], fresh)
        for p in problems:
            print(p)
        print(f"{len(fresh)} entries recomputed: {'OK' if not problems else f'{len(problems)} differ'}")
        return 1 if problems else 0
    data = {
        "format": FORMAT,
        "what": "pre-feature uniform KV allocation per rank (every rank allocates every layer, no scratch)",
        "source": "FEATURE.md sections 5-7 + conf/model numbers; harness/suites/baseline.py; see README.md",
        "recorded_by": "python -m harness.suites.baseline --record",
        "recorded_at": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "commit": _git_commit(),
        "entries": fresh,
    }
    args.path.parent.mkdir(parents=True, exist_ok=True)
    args.path.write_text(dumps(data), encoding="utf-8")
    print(f"wrote {len(fresh)} entries to {args.path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
