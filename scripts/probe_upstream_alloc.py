"""Probe upstream xLLM's KV-cache allocation, compiled on CPU (scripts/build_upstream_alloc.sh), in
this process: ask it to allocate for three models, take its tensors over DLPack, print each layer's
tensors and compare their shapes and dtypes with harness/oracle/tensors.py.

    PYTHONPATH=. python scripts/probe_upstream_alloc.py LIB.so [--case a|b|c ...]

Exit status 0 when every shape and dtype matches the oracle (differences are printed as FINDING).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import sys
from types import SimpleNamespace

import torch
import torch.utils.dlpack

from harness import oracle
from harness.oracle.tensors import full_layer_tensor_specs, linear_layer_tensor_specs

DTYPE_CODE = {"bfloat16": 15, "float16": 5, "float32": 6}
# oracle name -> the glue's name of the same tensor (MLA's latent/rope are upstream's k/v caches)
ORACLE_TO_GLUE = {"latent": "k", "rope": "v", "latent_scale": "k_scale", "recurrent": "ssm"}


class Library:
    """The built library, loaded into this process (tensors cannot cross a process boundary)."""

    def __init__(self, path: str):
        self.lib = ctypes.CDLL(path)
        self.lib.lwsplit_call.restype = ctypes.c_char_p
        self.lib.lwsplit_call.argtypes = [ctypes.c_char_p]
        self.lib.lwsplit_take_tensor.restype = ctypes.c_void_p
        self.lib.lwsplit_take_tensor.argtypes = [ctypes.c_int64]
        self.lib.lwsplit_clear_tensors.restype = None
        new = ctypes.pythonapi.PyCapsule_New
        new.restype = ctypes.py_object
        new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
        self._capsule = new

    def call(self, request: dict) -> dict:
        text = "".join(f"{k}={v}\n" for k, v in request.items())
        return json.loads(self.lib.lwsplit_call(text.encode()).decode())

    def take(self, index: int) -> torch.Tensor:
        ptr = self.lib.lwsplit_take_tensor(index)
        if not ptr:
            raise IndexError(index)
        return torch.utils.dlpack.from_dlpack(self._capsule(ptr, b"dltensor", None))


def request_for(model, cache, cap, *, world_size: int, split: int, rank: int) -> dict:
    req = {
        "op": "allocate",
        "model_type": model.model_type,
        "dtype": model.dtype,
        "dtype_code": DTYPE_CODE[model.dtype],
        "n_layers": model.num_hidden_layers,
        "enable_mla": int(model.attention == "mla"),
        "head_dim": model.head_dim,
        "n_heads": model.num_attention_heads,
        "n_kv_heads": model.num_key_value_heads,
        "kv_lora_rank": model.kv_lora_rank,
        "qk_rope_head_dim": model.qk_rope_head_dim,
        "index_n_heads": model.index_n_heads,
        "index_head_dim": model.index_head_dim,
        "full_attention_interval": model.full_attention_interval,
        "layer_types": ",".join(model.layer_types),
        "linear_conv_kernel_dim": model.linear_conv_kernel_dim,
        "linear_key_head_dim": model.linear_key_head_dim,
        "linear_value_head_dim": model.linear_value_head_dim,
        "linear_num_key_heads": model.linear_num_key_heads,
        "linear_num_value_heads": model.linear_num_value_heads,
        "mamba_ssm_dtype": model.mamba_ssm_dtype or "",
        "world_size": world_size,
        "layerwise_split_size": split,
        "rank": rank,
        "kv_cache_dtype": cache.kv_cache_dtype,
        "indexer_cache_dtype": cache.indexer_cache_dtype,
        "block_size": cache.block_size,
    }
    for name, value in cap.items():
        req[f"cap.{name}"] = int(value)
    return req


def capacity(model, cache, *, attn_tp: int, n_blocks: int, split: int) -> dict:
    """The capacity the engine would pass (oracle's estimate for slot sizes and the linear state), with
    ``n_blocks`` fixed small so the CPU tensors stay small."""
    est = oracle.estimate_capacity(model, cache, attn_tp=attn_tp, budget_bytes=1 << 30, split=split)
    return {
        "n_blocks": n_blocks, "cache_size_in_bytes": est.cache_size_bytes, "block_size": est.block_size,
        "slot_size": est.slot_size, "index_slot_size": est.index_slot_size,
        "num_indexer_layers": est.num_indexer_layers,
        "enable_indexer_cache_quant": int(cache.indexer_cache_dtype == "int8"),
        "scale_slot_size": est.scale_slot_size, "linear_slot_size": est.linear_slot_size,
        "linear_cache_size_in_bytes": est.linear_cache_bytes,
        "linear_conv_state_len": est.linear_conv_state_len,
        "linear_ssm_checkpoint_stride": est.linear_ssm_checkpoint_stride,
        "n_layers": est.n_layers, "num_linear_state_blocks": est.num_linear_state_blocks,
        "num_full_attention_layers": est.num_full_attention_layers,
        "num_linear_attention_layers": est.num_linear_attention_layers,
        "swa_count": 0, "c4_count": 0, "c128_count": 0,
    }


def model_spec(**kw):
    base = dict(model_type="qwen3", dtype="bfloat16", attention="gqa", num_hidden_layers=8, head_dim=128,
                num_attention_heads=32, num_key_value_heads=8, kv_lora_rank=0, qk_rope_head_dim=0,
                index_n_heads=0, index_head_dim=0, full_attention_interval=1, layer_types=(),
                linear_conv_kernel_dim=0, linear_key_head_dim=0, linear_value_head_dim=0,
                linear_num_key_heads=0, linear_num_value_heads=0, mamba_ssm_dtype=None,
                num_nextn_predict_layers=0)
    base.update(kw)
    return SimpleNamespace(**base)


def cache_spec(**kw):
    base = dict(block_size=16, kv_cache_dtype="auto", indexer_cache_dtype="auto", max_seqs_per_batch=4,
                max_linear_state_cache_slots=0, enable_prefix_cache=False, num_speculative_tokens=0,
                kv_budget_bytes=0)
    base.update(kw)
    return SimpleNamespace(**base)


CASES = {
    "a": dict(title="GQA, 8 layers, 8 kv heads, head_dim 128, world_size 4, s=2, rank 1, bf16",
              model=model_spec(), cache=cache_spec(), world_size=4, split=2, rank=1, n_blocks=16),
    "b": dict(title="MLA + indexer (deepseek_v32-like), 4 layers, world_size 4, s=2, rank 1, bf16",
              model=model_spec(model_type="deepseek_v32", attention="mla", num_hidden_layers=4, head_dim=192,
                               num_attention_heads=128, num_key_value_heads=128, kv_lora_rank=512,
                               qk_rope_head_dim=64, index_n_heads=64, index_head_dim=128),
              cache=cache_spec(), world_size=4, split=2, rank=1, n_blocks=16),
    "c": dict(title="Qwen3.5-MoE-like hybrid, 8 layers (3 linear + 1 full) x 2, world_size 2, s=2, rank 1, bf16",
              model=model_spec(model_type="qwen3_5_moe", num_hidden_layers=8, head_dim=256,
                               num_attention_heads=16, num_key_value_heads=2, full_attention_interval=4,
                               layer_types=tuple(("full_attention" if (i + 1) % 4 == 0 else "linear_attention")
                                                 for i in range(8)),
                               linear_conv_kernel_dim=4, linear_key_head_dim=128, linear_value_head_dim=128,
                               linear_num_key_heads=16, linear_num_value_heads=32),
              cache=cache_spec(), world_size=2, split=2, rank=1, n_blocks=16),
}
# (c) on split rank 0: upstream's owner rule (layer % s) gives rank 1 both full layers (3, 7), so
# rank 0's full layers are views of the one scratch cache.
CASES["d"] = dict(CASES["c"], title=CASES["c"]["title"].replace("rank 1", "rank 0"), rank=0)
# Not in the default set (a divergence, not a regression): (c) with layer_types but no
# full_attention_interval. Ownership, the estimate and KVCacheShape read layer_types first
# (is_full_attention_layer, has_linear_attention_layers); allocate_kv_caches picks a layer's cache
# with is_linear_attention_layer(layer, full_attention_interval) alone (kv_cache.cpp
# create_kv_cache_impl), so every layer gets K/V and no layer gets conv/ssm.
CASES["e"] = dict(CASES["c"], title=CASES["c"]["title"] + ", full_attention_interval unset",
                  model=model_spec(**dict(vars(CASES["c"]["model"]), full_attention_interval=0)))
DEFAULT_CASES = ("a", "b", "c", "d")


def dtype_name(t: torch.Tensor) -> str:
    return str(t.dtype).replace("torch.", "")


def run_case(lib: Library, key: str, out=print) -> dict:
    """Allocate case ``key``, print its layers; returns {"findings": [...], "scratch_pointer_sets": n,
    "layers": [(layer, owned, {name: (shape, dtype)})]}."""
    print = out  # noqa: A001 (the report goes where the caller says)
    case = CASES[key]
    model, cache = case["model"], case["cache"]
    ws, s, rank, n_blocks = case["world_size"], case["split"], case["rank"], case["n_blocks"]
    cap = capacity(model, cache, attn_tp=ws, n_blocks=n_blocks, split=s)
    print(f"\n=== ({key}) {case['title']}")
    print("capacity:", {k: v for k, v in cap.items() if v})
    reply = lib.call(request_for(model, cache, cap, world_size=ws, split=s, rank=rank))
    if "layers" not in reply:
        print("REPLY:", reply)
        return {"findings": [f"no layers: {reply}"], "scratch_pointer_sets": 0, "layers": []}
    for name in ("key", "value", "index", "index_cache_scale", "conv", "ssm"):
        field = f"{name}_cache_shape" if name != "index_cache_scale" else "index_cache_scale_shape"
        print(f"  {field}: {reply[field]}")
    print("  layer_cache_owned:", reply["layer_cache_owned"])

    full = oracle.expected_full_layers(model)
    upstream_owner = oracle.expected_upstream_owner(full, s)
    spec_owner = oracle.expected_owner(full, s)
    slots = cap["num_linear_state_blocks"]
    expect_full = full_layer_tensor_specs(model, cache, ws, "heads_major", n_blocks)
    expect_linear = linear_layer_tensor_specs(model, cache, ws, slots) if slots else {}
    findings = []
    seen = []
    storages = {}
    for layer in reply["layers"]:
        i = layer["layer"]
        tensors = {name: lib.take(index) for name, index in layer["tensors"].items()}
        is_full = i in full
        expect = expect_full if is_full else expect_linear
        expect = {ORACLE_TO_GLUE.get(n, n): spec for n, spec in expect.items()}
        seen.append((i, layer["owned"], {n: (tuple(t.shape), dtype_name(t)) for n, t in tensors.items()}))
        desc = ", ".join(f"{n}{list(t.shape)}:{dtype_name(t)}@{t.data_ptr():#x}" for n, t in tensors.items())
        print(f"  layer {i} {'full  ' if is_full else 'linear'} owned={layer['owned']}: {desc}")
        if not layer["owned"]:
            storages.setdefault("scratch", set()).add(tuple(t.data_ptr() for t in tensors.values()))
        # ownership: upstream owns a full layer iff layer % s == split rank; the spec's rule differs
        owned_expect_upstream = (not is_full) or upstream_owner[i] == rank % s
        owned_expect_spec = (not is_full) or spec_owner[i] == rank % s
        if layer["owned"] != owned_expect_upstream:
            findings.append(f"layer {i}: owned={layer['owned']} but the oracle's upstream rule says {owned_expect_upstream}")
            print("    FINDING: " + findings[-1])
        if layer["owned"] != owned_expect_spec:
            print(f"    note: the spec's round-robin rule would say owned={owned_expect_spec} (upstream layer % s)")
        if set(tensors) != set(expect):
            findings.append(f"layer {i}: tensors {sorted(tensors)} but the oracle expects {sorted(expect)}")
            print("    FINDING: " + findings[-1])
        for n in sorted(set(tensors) & set(expect)):
            t, spec = tensors[n], expect[n]
            if tuple(t.shape) != spec.shape or dtype_name(t) != spec.dtype:
                findings.append(f"layer {i}: {n} {list(t.shape)}:{dtype_name(t)} but the oracle expects "
                                f"{list(spec.shape)}:{spec.dtype}")
                print("    FINDING: " + findings[-1])
    shared = storages.get("scratch", set())
    if shared:
        print(f"  non-owned layers share one storage: {len(shared) == 1} ({len(shared)} distinct pointer set(s))")
    lib.lib.lwsplit_clear_tensors()
    print(f"  findings: {len(findings)}")
    return {"findings": findings, "scratch_pointer_sets": len(shared), "layers": seen}


def check_reply(lib: Library) -> dict:
    """A CHECK inside the library is answered, not fatal: (a) with world_size 0 trips KVCacheShape's
    CHECK_GT(world_size, 0)."""
    case = CASES["a"]
    cap = capacity(case["model"], case["cache"], attn_tp=4, n_blocks=16, split=2)
    return lib.call(request_for(case["model"], case["cache"], cap, world_size=0, split=2, rank=1))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("library")
    ap.add_argument("--case", action="append", choices=sorted(CASES))
    args = ap.parse_args(argv)
    lib = Library(args.library)
    findings = sum(len(run_case(lib, key)["findings"]) for key in (args.case or DEFAULT_CASES))
    print("\nworld_size=0 ->", check_reply(lib))
    print(f"\ntotal findings: {findings}")
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
