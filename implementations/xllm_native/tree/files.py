"""Where each role lives in one xLLM tree: upstream's file of each role, a port manifest's tree, and the
folder the harness is pointed at (``implementation.source_dir``, ``$LWSPLIT_XLLM_SRC``)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from contract.errors import UserError

ENV_SOURCE = "LWSPLIT_XLLM_SRC"
FIELD = "implementation.source_dir"
ROLES = ("estimation", "layout", "speculative", "master", "utils", "model_args")
UPSTREAM_FILES = {
    "estimation": "xllm/core/framework/kv_cache/kv_cache_estimation.cpp",
    "layout": "xllm/core/framework/kv_cache/layerwise_split_layout.h",
    "speculative": "xllm/core/distributed_runtime/speculative_engine.cpp",
    "master": "xllm/core/distributed_runtime/master.cpp",
    "utils": "xllm/core/util/utils.h",
    "model_args": "xllm/core/framework/model/model_args.h",
    "support": "xllm/core/framework/block/block_utils.cpp,xllm/core/util/pretty_print.cpp",
    "utils_headers": "xllm/core/common/constants.h",
    "include_dirs": "xllm,xllm/core",
    "worker_checks": "xllm/core/runtime/worker_impl.cpp",
    "allocation_checks": "xllm/core/framework/kv_cache/kv_cache.cpp",
    "indexer_checks": "xllm/core/framework/kv_cache/kv_cache_utils.cpp",
    "groups": "xllm/core/framework/parallel_state/mapping_npu.cpp",
    "engine_options": "xllm/core/distributed_runtime/llm_engine.cpp",
    "engine_platform": "xllm/core/platform/platform.h",
}
"""Upstream xLLM's file of each role (494f293b5); ``files`` overrides any of them for a port."""
ENTRY_POINTS = {
    "estimation": ("estimate_kv_cache_capacity", "build_layer_cache_owned", "resolve_indexer_cache_enabled_layers"),
    "layout": ("LayerwiseSplitLayout", "validate_layerwise_split_enablement"),
    "speculative": ("SpeculativeEngine::calculate_kv_cache",),
    "master": ("validate_layerwise_split_size_startup_config",),
    "model_args": ("ModelArgs", "is_full_attention_layer"),
}
"""Names each role's file must define; the first two of speculative/master are cut out."""
WORKER_CHECKS_FUNCTION = "WorkerImpl::allocate_kv_cache_storage"
"""The worker's KV-cache start-up (file ``worker_checks``): its statements before the first that names the linear
state's dtype (``WORKER_CHECKS_END``) are cut out and compiled (``build.generate``: op ``worker_checks``): its linear +
indexer CHECK, its mask, the indexer cache's CHECK against the shape and its KV-cache quantization block (the
``LOG(FATAL)`` of a build that is not MLU's)."""
WORKER_CHECKS_END = r"\bssm_dtype\b"
INDEXER_CHECKS_FUNCTION = "create_indexed_kv_cache_tensors"
"""The allocation of an indexed KV cache (file ``indexer_checks``: upstream's ``kv_cache_utils.cpp``): its statements
from its branch on the int8 indexer cache (``INDEXER_CHECKS_START``) up to its return (``INDEXER_CHECKS_END``) are
cut out and compiled (``build.generate``: op ``worker_checks``, where the worker has an indexer): the ``CHECK`` of a
build that is neither NPU's nor MLU's."""
INDEXER_CHECKS_START = r"\bif\s*\(\s*create_options\.enable_indexer_cache_quant\(\)"
INDEXER_CHECKS_END = r"\breturn\s+tensors\s*;"
ALLOCATION_CHECKS_FUNCTION = "allocate_kv_caches"
"""The allocation the worker calls once it has built its create options (file ``allocation_checks``): its branches
for sleep mode and xtensor, from the first statement matching ``ALLOCATION_CHECKS_START`` up to the ordinary
allocation (``ALLOCATION_CHECKS_END``), are cut out and compiled (``build.generate``: op ``allocation_checks``)."""
ALLOCATION_CHECKS_START = r"\bif\s*\(\s*create_options\.enable_sleep_mode\(\)"
ALLOCATION_CHECKS_END = r"\bif\s*\(\s*layer_cache_owned\.empty\(\)\s*\)"
UTILS_REQUIRED = ("ceil_div", "kv_split_size_effective", "enable_kvcache_split")
UTILS_OPTIONAL = ("align_up", "mla_model_type_set", "is_mla_model_type", "has_mtp_model_type_marker",
                  "starts_with_model_type", "is_target_mtp_model_type", "kDeepseekV4DSparkModelType",
                  "is_deepseek_v4_dspark_model_type", "is_deepseek_v4_model_type",
                  "is_tp_invariant_kv_cache_model_type", "is_target_model_type")
"""Helpers cut out of the utils file when it has them (a port may lack the DeepSeek-V4 ones)."""
ENGINE_OPTIONS_CUTS = (
    ("LLMEngine::LLMEngine", r"\bdp_size_\s*=\s*options_\.dp_size\s*\(", r"\blink_threadpool_\b"),
    ("LLMEngine::init_model", r"\bworld_size\s*=\s*dp_local_tp_size_\s*;", r"\bLOG\s*\(\s*INFO\s*\)"),
    ("LLMEngine::estimate_kv_cache_capacity", r"\bKVCacheEstimateOptions\s+estimate_options\s*;",
     r"\bKVCacheCapacity\s+kv_cache_cap\s*="),
)
"""What the ``engine_options`` role cuts out of its file (upstream: ``llm_engine.cpp``), (function, first statement,
the statement it stops before): the engine's attention TP size (``dp_local_tp_size_``, in its constructor), its local
KV and linear heads per TP rank (``init_model``) and the ``KVCacheEstimateOptions`` it hands the estimation
(``estimate_kv_cache_capacity``: the draft's TP-1 body, the draft's split size 1). ``cpp/engine_options_shim.h``
holds the members they read; the platform queries they make (``Platform::uses_model_cp_sharding``, ``is_mlu``) are
the tree's own header (file ``engine_platform``)."""
ENGINE_LAYERS_FUNCTION = "WorkerImpl::get_num_layers"
"""The draft's layer count as upstream's worker decides it (file ``worker_checks``: ``worker_impl.cpp``): cut whole
into the ``engine_options`` role beside ``ENGINE_OPTIONS_CUTS``."""
GROUPS_CUT = ("MappingNPU::validate", "MappingNPU::get_tp_group", "MappingNPU::get_layerwise_split_group",
              "MappingNPU::get_current_group_id")
"""What the ``groups`` role cuts out of its file (upstream: ``mapping_npu.cpp``) when the manifest plays it: the
split groups, the TP groups they cut, the group lookup and the CHECKs run before them (``cpp/mapping_shim.h``
holds the members they read)."""


@dataclass(frozen=True, kw_only=True)
class TreeMap:
    """Where each role lives in one tree: paths relative to ``root``."""

    root: Path
    files: dict = field(default_factory=dict)
    manifest: Optional[object] = None
    """A ``manifest.Manifest`` with ``compile: sources`` (its sources and glue compiled one object each);
    None for upstream's cut-out build over ``files``."""

    @property
    def port(self) -> bool:
        return self.manifest is not None and self.manifest.compile == "sources"

    def path(self, role: str) -> Path:
        return self.root / self.files[role]

    def paths(self, role: str) -> tuple[Path, ...]:
        return tuple(self.root / p.strip() for p in self.files[role].split(",") if p.strip())


def tree_map(source_dir: Optional[str], files: Optional[dict] = None) -> TreeMap:
    """The tree to compile: ``source_dir``, else ``$LWSPLIT_XLLM_SRC``; upstream's map with ``files`` over it."""
    given = source_dir or os.environ.get(ENV_SOURCE) or None
    if not given:
        raise UserError(FIELD, None, f"an xLLM source tree: implementation.source_dir=<path> or ${ENV_SOURCE}")
    root = Path(str(given)).expanduser()
    if not root.is_dir():
        raise UserError(FIELD, str(given), "an existing folder holding an xLLM source tree")
    unknown = sorted(set(files or {}) - set(UPSTREAM_FILES))
    if unknown:
        raise UserError(f"implementation.files.{unknown[0]}", (files or {})[unknown[0]],
                        f"a role of {', '.join(UPSTREAM_FILES)}")
    merged = dict(UPSTREAM_FILES)
    merged.update({k: str(v) for k, v in (files or {}).items()})
    tree = TreeMap(root=root.resolve(), files=merged)
    for role in ROLES:
        if not tree.path(role).is_file():
            raise UserError(f"implementation.files.{role}", merged[role],
                            f"a file of {tree.root} (the {role} role; is this an xLLM tree?)")
    for role in ("support", "utils_headers"):
        for p in tree.paths(role):
            if not p.is_file():
                raise UserError(f"implementation.files.{role}", merged[role], f"files of {tree.root}",
                                f"{p} is missing")
    return tree


def port_tree(m, root: Path) -> TreeMap:
    """The tree of a ``compile: sources`` manifest (``manifest.check_tree`` says whether it holds what the
    manifest names)."""
    root = root.expanduser().resolve()
    if not root.is_dir():
        raise UserError(FIELD, str(root), "an existing folder holding the tree the manifest describes")
    return TreeMap(root=root, files={}, manifest=m)


def plays_groups(tree: TreeMap) -> bool:
    """An upstream-cut manifest that plays the ``groups`` role (its file is ``files.groups``); a tree map with no
    manifest (``tree_map`` alone): the map's groups file exists."""
    m = tree.manifest
    if m is None:
        return "groups" in tree.files and tree.path("groups").is_file()
    return "groups" in m.roles and m.roles["groups"].present


def cut_defines(tree: TreeMap) -> tuple[str, ...]:
    """The defines of an upstream-cut build: its manifest's (the cut is what the preprocessor keeps under them)."""
    return tree.manifest.defines if tree.manifest is not None else ()
