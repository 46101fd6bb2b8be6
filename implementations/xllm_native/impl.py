"""xLLM's own planning and allocation code, compiled from a source tree, as an implementation under test.

``plan`` runs the tree's C++ (``build`` compiles it, ``native`` calls it):

* startup: ``validate_layerwise_split_size_startup_config`` (master.cpp), with the layout
  header's enablement checks; a CHECK that fires is the refusal, naming the field it guards;
* worker checks (role ``worker_checks``): the statements ``WorkerImpl::allocate_kv_cache_storage`` (worker_impl.cpp)
  runs before it names the linear state's dtype, cut and compiled: its linear + indexer CHECK and its KV-cache
  quantization block (the ``LOG(FATAL)`` on an int8 KV cache of a build that is not MLU's), on a target and a draft
  worker, with the run's cache dtypes; then, for a worker with an indexer, the indexed cache allocation's branch on
  the int8 indexer cache (``create_indexed_kv_cache_tensors``, file ``indexer_checks``: its ``CHECK`` of a build
  neither NPU's nor MLU's). A port: its own function where its manifest names one, else its base's compiled cut
  (the default with a base manifest); a port with neither fails the cases whose target or draft has linear layers
  and an indexer naming the role (``needs_worker_checks``), never a model of the CHECK;
* engine options (role ``engine_options``): the ``KVCacheEstimateOptions`` every estimate is handed, as
  ``LLMEngine`` computes them (its attention TP size, its local KV and linear heads per TP rank, the draft's TP-1
  body and split size 1: statements cut out of ``llm_engine.cpp``) and the draft's layer count
  (``WorkerImpl::get_num_layers``); a port: its own function where its manifest names one, else its base's compiled
  cut (the default with a base manifest); a port with neither fails every case needing an estimate naming the role;
* allocation checks (role ``allocation_checks``): ``allocate_kv_caches`` (kv_cache.cpp) from its sleep-mode branch up
  to its ordinary allocation, cut and compiled behind a shim of the create options the worker built (its mask, the
  run's sleep mode and xtensor): each branch's CHECK that no split mask is handed on, asked once the master has
  estimated and laid the split out (the end of ``plan``: where the worker allocates, after the master's layout
  and its CHECKs), where the split is active with either setting on (``needs_allocation_checks``). A port: its own function,
  else its base's cut fed the port's worker's mask (the default with a base manifest); with neither it fails those
  cases naming the role;
* estimate: ``estimate_kv_cache_capacity`` for the target (split block count included), and for
  a speculative draft the draft's capacity and ``SpeculativeEngine::calculate_kv_cache``;
* ownership: each split rank's mask from ``LayerwiseSplitLayout`` / ``build_layer_cache_owned``; a worker's own
  mask, for its global rank, from its compiled start-up (upstream's ``WorkerImpl``: split rank ``rank % s``) or a
  port's worker role;
* split groups (role ``groups``): upstream's ``MappingNPU::get_layerwise_split_group`` cut out of
  mapping_npu.cpp; a port's read off its workers' masks (nothing in its start-up path forms groups);
* activation: whether the split is active is the tree's own answer (``activation``): a port's engine function
  called with the run's flag (a layout passed on: active), s > 1 alone where upstream's engine plays the role;
  with the split off the estimation is fed s 1;
* allocation (manifest ``allocation.torch``): the tree's allocation compiled against torch, run in
  the rank (``tensor_lib``): upstream's ``allocate_kv_caches`` as its worker calls it; the worker holds
  the tensors it made.

Every start-up rule of FEATURE 3 is the tree's compiled code (its master's validation, its worker's start-up checks,
its allocation's): no Python rule runs after the tree accepted but the harness's input domain (whole numbers >= 1,
a world of whole attention TP groups to place ranks in: ``validate``), so a tree that drops a check is never
credited with a Python refusal. What the tree's files do not hold comes from the Python model of upstream
(``implementations.xllm_upstream``): placement (the harness's input, not a role), and ``engine_message`` (the master's plan handed
on: no tree holds code that checks what its workers receive, so ``init_worker`` checks nothing of it, no Python check
in its place, and the plan says so, ``tree_message_note``: TC-04 shows its tampered layout as not judged); for
upstream's tree (and a port whose engine is upstream's), the activation threshold s > 1, which upstream writes inline
(``worker_impl.cpp``, ``kv_cache_estimation.cpp``) with no function to call.

Which function plays each role comes from the tree's manifest (``manifest``): upstream's by
default, a shipped port manifest for a port tree, or ``implementation.manifest=PATH``. For a
tree built from its own sources (a port), every role the manifest lists is the tree's C++: its
validation alone decides startup (no Python startup rule runs), its master and engine layouts
are published in the plan (``KVPlan.published_layouts``), each worker's mask is the tree's
worker function's answer, and with the manifest's ``allocation`` the worker holds what the tree's
allocation returns (the port's ``allocate_kv_caches_layerwise`` creates no tensor). A role the manifest marks absent raises ``AbsentRoleError`` where a
case needs it: never a model of the role.
"""

from __future__ import annotations

import json
import os
from dataclasses import replace
from typing import Mapping, Optional

from contract.errors import ConfigError, ImplementationFailure, PlanError, UserError
from contract.interface import ROLES, LayerCache, WorkerKVCache
from contract.plan_types import TREE_CARDS_NOTE, TREE_GROUPS_NOTE, TREE_MESSAGE_NOTE, DraftPlan, KVPlan
from contract.specs import LayerwiseFlags, ModelSpec, RunSpec
from contract.upstream_tensors import TENSOR_NAMES, TENSOR_NAMES_MLA
from implementations.reference import estimation, layers, layout, validation
from implementations.xllm_native import manifest as manifest_mod
from implementations.xllm_native.build import library as build
from implementations.xllm_native.manifest import AbsentRoleError
from implementations.xllm_native.runtime import native as native_mod
from implementations.xllm_native.runtime import tensor_lib
from implementations.xllm_native.tree.facts import TreeFacts
from implementations.xllm_native.tree.files import (
    ALLOCATION_CHECKS_FUNCTION,
    INDEXER_CHECKS_FUNCTION,
    UPSTREAM_FILES,
    WORKER_CHECKS_FUNCTION,
)
from implementations.xllm_upstream.impl import XllmUpstreamImplementation

TORCH_SCALAR_TYPES = {"int8": 1, "float16": 5, "float32": 6, "bfloat16": 15, "fp8_e5m2": 23, "fp8_e4m3": 24}
"""c10::ScalarType codes of the model dtypes ``specs.DTYPE_BYTES`` names (the estimate options' ``dtype``)."""


ENGINE_COMPUTED = ("world_size", "n_local_kv_heads", "n_local_linear_k_heads", "n_local_linear_v_heads",
                   "layerwise_split_size")
"""The ``KVCacheEstimateOptions`` values the engine computes (role ``engine_options``: its attention TP size, its local
heads per TP rank, the draft's TP-1 body and split size 1) rather than copies from the launch's flags."""
PASSED_OPTIONS = ("dtype_code", "kv_cache_dtype", "indexer_cache_dtype", "cache_size_in_bytes", "block_size",
                  "max_seqs_per_batch", "num_speculative_tokens", "max_tokens_per_batch", "max_linear_state_cache_slots",
                  "is_draft_engine", "enable_prefix_cache")
"""The ``KVCacheEstimateOptions`` values the engine copies from the launch's flags (``engine_inputs``)."""


def field_value(run: RunSpec, name: str, fallback: object) -> object:
    """The run's value of a harness field (``parallel.cp_size``), else ``fallback``."""
    head, _, rest = name.partition(".")
    node = getattr(run, head, None)
    if node is None:
        return fallback
    if not rest:
        return getattr(node, "name", fallback)
    if head == "hardware" and rest == "reserved_bytes_per_card":
        return f"per-rank KV budget {run.kv_budget_bytes} B"
    return getattr(node, rest, fallback)


def engine_model_type(model_type: str) -> str:
    """The model type an xLLM engine hands its startup checks: a Qwen3.5 config's text model type
    (upstream's ``get_model_type`` for the llm backend, with no ``text_config`` to read)."""
    return f"{model_type}_text" if model_type in ("qwen3_5", "qwen3_5_moe") else model_type


def layout_facts(layout: Optional[list], full: tuple) -> tuple:
    """A tree's layout reply (its layer i is the i-th full layer) as ((full layer id, ranks, heads), ...);
    () when the tree published none (its layout function returned nothing)."""
    if layout is None:
        return ()
    return tuple((full[e["layer"]] if 0 <= e["layer"] < len(full) else -1 - e["layer"], tuple(e["ranks"]),
                  tuple(e["heads"])) for e in layout)


def describe_layout(name: str, layers: tuple) -> str:
    if not layers:
        return f"{name}: the tree published no layout"
    shapes = sorted({(ranks, heads) for _, ranks, heads in layers})
    if len(shapes) == 1:
        ranks, heads = shapes[0]
        return f"{name}: every full layer on TP ranks {list(ranks)} with KV heads {list(heads)}"
    return f"{name}: " + "; ".join(f"layer {l} on ranks {list(r)} heads {list(h)}" for l, r, h in layers[:6]) + \
        (" ..." if len(layers) > 6 else "")


def tree_allocation(message: KVPlan, *, rank: int, role: str, mask: tuple, device: str) -> WorkerKVCache:
    """The worker's caches as a tree's allocation left them when it returned no tensor: every layer
    present with the tree's mask, no tensor of its own, no scratch."""
    full = set(message.full_layers)
    layers = [LayerCache(layer_id=l, kind="full" if l in full else "linear", owned=bool(mask[l]) or l not in full)
              for l in range(message.num_layers)]
    rank_plan = next(r for r in message.ranks if r.rank == rank)
    if message.active:
        split_size, split_rank = message.split_size, rank_plan.split_rank
        split_group = tuple(message.split_groups[rank_plan.split_group])
    else:
        split_size, split_rank, split_group = 1, 0, (rank,)
    return WorkerKVCache(rank=rank, role=role, plan_digest=message.digest, split_size=split_size,
                         split_rank=split_rank, split_group=split_group, n_blocks=message.n_blocks,
                         kv_layout=message.kv_layout, device=device, layers=layers, scratch={})


def needs_allocation_checks(run: RunSpec, split_active: bool) -> bool:
    """Whether a case needs the worker's allocation's refusals of the split: sleep mode or xtensor on with the split
    active (the worker hands its allocation a mask). A tree that plays none fails exactly these cases naming the
    role; with the split off the branches are sleep mode's and xtensor's own, not the split's, and are not asked."""
    return split_active and bool(run.cache.enable_sleep_mode or run.cache.enable_xtensor)


def needs_worker_checks(run: RunSpec) -> bool:
    """Whether a case needs the worker's start-up checks to be answered: its target or its draft has both
    linear-attention layers and a DSA indexer (the configuration the worker's CHECK is there to refuse). A tree
    that plays no worker checks fails exactly these cases naming the role; every other case starts as it would
    without them."""
    return any(m is not None and m.index_n_heads > 0 and bool(layers.linear_layers(m)) for m in (run.model, run.draft))


_OPENED: dict = {}
"""(the implementation's options, the settings they fall back on, the process) -> (its ``Native``, its base's
implementation): a process builds one per configuration it explores (as each rank builds its own) and resolves
and checks the tree once (``native.load`` keeps the library and its host for the process's life already)."""


class XllmNativeImplementation(XllmUpstreamImplementation):
    name = "xllm_native"
    manifest = None
    port = False
    base = None

    def __init__(self, source_dir: Optional[str] = None, files: Optional[Mapping[str, str]] = None,
                 manifest: Optional[str] = None, timeout_s: Optional[float] = None,
                 base_source_dir: Optional[str] = None) -> None:
        memo = (source_dir, json.dumps(dict(files or {}), sort_keys=True), manifest, base_source_dir, timeout_s,
                os.environ.get(build.ENV_SOURCE, ""), os.environ.get(native_mod.ENV_BASE_SOURCE, ""),
                os.environ.get(build.ENV_CACHE, ""), os.getpid())
        known = _OPENED.get(memo)
        if known is None:
            native = native_mod.load(source_dir, dict(files or {}), manifest=manifest)
            base = native_mod.load_base(native.manifest, base_source_dir, cache=native.cache)
            known = _OPENED[memo] = (native, base and XllmNativeImplementation(
                source_dir=str(base.tree.root), manifest=str(base.manifest.path), timeout_s=timeout_s))
        self.native = known[0]
        self.manifest = self.native.manifest
        self.port = self.native.tree.port
        self.timeout_s = timeout_s
        """Each call's limit (``runner.timeout_s``; ``native.DEFAULT_TIMEOUT_S`` when None)."""
        self.base: Optional[XllmNativeImplementation] = known[1]
        """The engine around the port (the manifest's ``base`` manifest, built as that manifest builds it): it
        plays every role the port leaves to it. None: no base manifest, or its tree not given."""

    @staticmethod
    def check_inputs(source_dir: Optional[str] = None, files: Optional[Mapping[str, str]] = None,
                     manifest: Optional[str] = None, base_source_dir: Optional[str] = None, **_options: object) -> None:
        """The tree is given (``source_dir``, else ``$LWSPLIT_XLLM_SRC``), exists and holds the files its manifest
        names, and so does its base manifest's tree where one is given; ``UserError`` naming the key otherwise.
        Nothing is built: a harness asks this once before its cases run. The other options (``timeout_s``) are the
        calls' settings, not inputs."""
        _tree, m, _why = native_mod.resolve(source_dir, dict(files or {}), manifest)
        native_mod.resolve_base(m, base_source_dir)

    @staticmethod
    def prepare(source_dir: Optional[str] = None, files: Optional[Mapping[str, str]] = None,
                manifest: Optional[str] = None, base_source_dir: Optional[str] = None, **_options: object) -> None:
        """Build the tree's libraries (planning, and the allocation's torch library when the manifest has one)
        before any case runs: compiling runs the compiler, never the tree's code, so the controller may do it,
        and no rank spends its case's time limit on a cold build. A tree that does not compile is one
        ``UserError`` naming the role and the compiler's first error."""
        tree, m, _why = native_mod.resolve(source_dir, dict(files or {}), manifest)
        build.build(tree)
        if m.tensors is not None:
            build.build(tree, tensors=True)
        native_mod.build_base(m, base_source_dir)

    def facts(self) -> TreeFacts:
        """What the harness may know of this adapter's tree (``tree.facts.TreeFacts``): asked by ``harness.app``
        (the tree's name on a job's reports; the tree and manifest its own tests and refusal cases run once for)
        and ``harness.departures.judge`` (the tree and manifest its departure list names)."""
        return self.native.facts()

    def compiled_with(self) -> dict:
        """``{"compiler", "flags"}`` of this tree's planning build: the provenance ``harness.baselines.record_native``
        records beside its figures."""
        built = self.native.built.manifest
        return {"compiler": built["compiler"], "flags": built["flags"]}

    def require(self, role: str) -> None:
        """``AbsentRoleError`` when neither the tree nor its base plays ``role``."""
        self.manifest.require(role)
        if self.manifest.from_base(role):
            self.base_for(role)

    def base_for(self, role: str) -> XllmNativeImplementation:
        """The base that plays ``role`` (the manifest leaves it to the base); ``AbsentRoleError`` naming the role
        when the base's tree is not given or the base's manifest marks the role absent too."""
        m = self.manifest
        if self.base is None:
            raise AbsentRoleError(m.name, role, f"{m.roles[role].base}, and {native_mod.base_missing_reason(m)}")
        if not self.base.manifest.present(role):
            raise AbsentRoleError(m.name, role, f"{m.roles[role].base}, whose manifest marks it absent too: "
                                                f"{self.base.manifest.roles[role].absent}")
        return self.base

    def plays(self, role: str) -> str:
        """Who plays ``role``: ``port`` (a tree built from its own sources), ``base`` (the engine around it) or
        ``tree`` (upstream's cut-out build)."""
        if self.manifest is not None and self.manifest.from_base(role):
            return "base"
        return "port" if self.port else "tree"

    def require_allocation(self, split_active: bool) -> None:
        """``AbsentRoleError`` where the engine's start-up path calls no allocation of the tree's: the manifest's
        ``allocation: {none: ...}``, or (``split_only``) the flag off or s 1, where the engine runs its ordinary
        allocation, which a port leaves to the engine around it."""
        alloc = self.manifest.allocation
        if alloc is None:
            return
        if alloc.none:
            raise manifest_mod.AbsentRoleError(self.manifest.name, "allocation", alloc.none, uncalled=True)
        if alloc.split_only and not split_active:
            raise manifest_mod.AbsentRoleError(
                self.manifest.name, "allocation", f"{alloc.function} runs only with the split active; with the flag "
                "off or s 1 the engine runs its ordinary allocation, which this tree does not have")

    def source_note(self) -> str:
        return f"tree {self.native.tree.root}: manifest {self.manifest.name} ({self.native.why})"

    # ---- inputs the engine hands the planning code -------------------------------------------

    def model_args(self, model: ModelSpec, *, draft: bool = False) -> dict:
        """``ModelArgs`` as the model loader fills them; a draft engine's MTP layer count is the draft worker's layer
        count as the tree decides it (``draft_layers``)."""
        full = [("full_attention" if t in ("full_attention", "attention") else t) for t in model.layer_types or ()]
        return {
            "model_type": model.model_type, "dtype": model.dtype, "n_layers": model.num_hidden_layers,
            "enable_mla": model.attention == "mla", "head_dim": model.head_dim,
            "n_heads": model.num_attention_heads, "n_kv_heads": model.num_key_value_heads,
            "kv_lora_rank": model.kv_lora_rank, "qk_rope_head_dim": model.qk_rope_head_dim,
            "index_n_heads": model.index_n_heads, "index_head_dim": model.index_head_dim,
            "num_nextn_predict_layers": self.draft_layers(model) if draft else model.num_nextn_predict_layers,
            "full_attention_interval": model.full_attention_interval or 0,  # the loader's value, layer_types or not
            "layer_types": full, "linear_conv_kernel_dim": model.linear_conv_kernel_dim,
            "linear_key_head_dim": model.linear_key_head_dim, "linear_value_head_dim": model.linear_value_head_dim,
            "linear_num_key_heads": model.linear_num_key_heads,
            "linear_num_value_heads": model.linear_num_value_heads,
            "mamba_ssm_dtype": model.mamba_ssm_dtype or "",
        }

    def estimate_options(self, run: RunSpec, model: ModelSpec, *, split_size: int, draft: bool = False) -> dict:
        """``KVCacheEstimateOptions`` as the engine's own code fills them (role ``engine_options``: upstream's
        ``LLMEngine`` statements, the base's where a port leaves them to it), for the target or the draft engine of
        ``run`` with the split size ``split_size`` on the command line. Fed the spec's values (``fed_engine``: what
        ``roles.estimation`` judges the estimation with), those replace the engine's computed ones and the rest are
        the launch's own inputs (``engine_inputs``)."""
        fed = self._fed_engine
        if fed is not None:
            inputs = self.engine_inputs(run, model, split_size=split_size, draft=draft)
            given = fed["draft" if draft else "target"]
            return {**{k: inputs[k] for k in PASSED_OPTIONS}, **{k: v for k, v in given.items() if k != "n_layers"}}
        answer = self.engine_options(run, model, split_size=split_size, draft=draft)
        return {k: v for k, v in answer.items() if k not in ("dp_local_tp_size", "n_layers")}

    _fed_engine: Optional[dict] = None
    """``{"target": {...}, "draft": {...}}``: option values handed to the estimation instead of the engine's
    (``ENGINE_COMPUTED`` keys, and the draft's layer count ``n_layers``; ``roles.estimation``, ``roles.speculative``),
    None: the engine's own (role ``engine_options``)."""

    def engine_inputs(self, run: RunSpec, model: ModelSpec, *, split_size: int, draft: bool = False) -> dict:
        """What a launch hands the engine for ``model`` (its flags, its workers, the cache size its workers' memory
        leaves): the request of op ``engine_options``, before the engine computes anything."""
        cache, p = run.cache, run.parallel
        return {**self.model_args(model), "dp_size": p.dp_size, "cp_size": p.cp_size,
                "kv_split_size": p.kv_split_size, "n_workers": p.world_size,
                "dtype_code": TORCH_SCALAR_TYPES[model.dtype], "kv_cache_dtype": cache.kv_cache_dtype,
                "indexer_cache_dtype": cache.indexer_cache_dtype, "cache_size_in_bytes": run.kv_budget_bytes,
                "block_size": cache.block_size, "max_seqs_per_batch": cache.max_seqs_per_batch,
                "num_speculative_tokens": cache.num_speculative_tokens, "max_tokens_per_batch": 0,
                "max_linear_state_cache_slots": cache.max_linear_state_cache_slots, "is_draft_engine": draft,
                "enable_mtp_draft_body_tp1": bool(draft and model.body_tp1),
                "enable_prefix_cache": cache.enable_prefix_cache, "layerwise_split_size": split_size}

    def engine_options(self, run: Optional[RunSpec], model: ModelSpec, *, split_size: int = 1,
                       draft: bool = False) -> dict:
        """The option values the tree's engine computes for ``model`` (role ``engine_options``, op ``engine_options``):
        every ``KVCacheEstimateOptions`` key, ``dp_local_tp_size`` and the worker's layer count ``n_layers``. The
        base's where the port leaves the role to it; ``AbsentRoleError`` where neither plays it (never a model of
        the engine); an upstream-cut tree without the engine's statements fails naming
        ``implementation.files.engine_options``. ``run`` None: only the model's (the draft's layer count)."""
        role = self.manifest.role("engine_options")
        if role.state == "base":
            return self.base_for("engine_options").engine_options(run, model, split_size=split_size, draft=draft)
        if not role.present:
            raise self.manifest.absent_error("engine_options")
        if run is None:
            values = {**self.model_args(model), "dtype_code": TORCH_SCALAR_TYPES[model.dtype], "is_draft_engine": draft,
                      "enable_mtp_draft_body_tp1": bool(draft and model.body_tp1), "layerwise_split_size": split_size}
            reply = self.native.call("engine_options", values, timeout_s=self.timeout_s)
        else:
            reply = self.call(run, "engine_options", self.engine_inputs(run, model, split_size=split_size, draft=draft))
        if "absent" in reply:
            raise PlanError("implementation.files.engine_options", UPSTREAM_FILES["engine_options"],
                            "a file holding LLMEngine's option statements (tree.files.ENGINE_OPTIONS_CUTS)",
                            f"the tree computes no engine options: {reply['absent']}")
        bad = [k for k in ENGINE_COMPUTED + ("n_layers",) if isinstance(reply.get(k), bool) or
               not isinstance(reply.get(k), int)]
        if bad:
            raise self._malformed("engine_options", f"{bad[0]} {reply.get(bad[0])!r}, not a whole number")
        return reply

    def draft_layers(self, model: ModelSpec) -> int:
        """The draft engine's layer count as the tree's draft worker decides it (upstream's
        ``WorkerImpl::get_num_layers``: its MTP layers when it has any, else every layer), through role
        ``engine_options``; what the draft's ``ModelArgs`` hand the estimation as its MTP layers."""
        fed = self._fed_engine
        if fed is not None and "n_layers" in fed.get("draft", {}):
            return fed["draft"]["n_layers"]
        memo = self.__dict__.setdefault("_draft_layers", {})
        if model not in memo:
            memo[model] = self.engine_options(None, model, draft=True)["n_layers"]
        return memo[model]

    def call(self, run: RunSpec, op: str, values: dict) -> dict:
        """One call into the compiled code; a CHECK's refusal carries the run's value of the field it names."""
        try:
            return self.native.call(op, values, timeout_s=self.timeout_s)
        except UserError as exc:
            raise type(exc)(exc.field, field_value(run, exc.field, exc.value), exc.allowed, exc.detail) from None

    def _parallel(self, run: RunSpec) -> dict:
        return {"cp_size": run.parallel.cp_size, "kv_split_size": run.parallel.kv_split_size}

    # ---- master ---------------------------------------------------------------------------------

    def validate(self, run: RunSpec, *, workers: bool = True) -> None:
        """Schema (what the harness's inputs must hold), then the tree's master validation, then (``workers``) the
        worker's compiled start-up checks (``worker_checks``). The allocation's refusals of the split with sleep mode
        and xtensor (``allocation_checks``) come later, where the worker allocates: at the end of ``plan``."""
        if self.port:
            return self.validate_port(run, workers=workers)
        self.require("validation")
        validation.check_model(run.model)
        validation.check_cache(run.cache)
        validation.check_hardware(run.hardware)
        if not isinstance(run.layerwise.split_size, int) or isinstance(run.layerwise.split_size, bool):
            raise ConfigError("layerwise.split_size", run.layerwise.split_size, "a whole number >= 1")
        for name in ("world_size", "dp_size", "cp_size"):
            value = getattr(run.parallel, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"parallel.{name}", value, "a whole number >= 1")
        self.call(run, "validate", {
            "layerwise_split_size": run.layerwise.split_size, "dp_size": run.parallel.dp_size,
            "world_size": run.parallel.world_size, "model_type": run.model.model_type,
            "host_blocks_factor": run.cache.host_blocks_factor, **self._parallel(run)})
        # The harness's input domain only, after the tree's validation accepted: a world of whole attention TP
        # groups, which the harness needs to place its ranks at all (the tree's master CHECKs it only with the split
        # on). No spec rule of section 3 is checked here: s against the attention TP is the tree's compiled
        # CHECK (``validate_layerwise_split_enablement``), the quantized caches its worker's (``worker_checks``).
        validation.check_parallel(run.parallel)
        if not workers:  # the master's validation alone (the base's, for a port that leaves validation to it)
            return
        self.worker_checks(run)
        if run.draft is not None:  # the input domain; the draft worker's linear + indexer CHECK is worker_checks'
            validation.check_draft(run.draft, worker_rule=False)

    def worker_checks(self, run: RunSpec) -> None:
        """The CHECKs the engine's worker runs as it starts its KV cache (role ``worker_checks``): upstream's
        ``WorkerImpl::allocate_kv_cache_storage``'s statements through its quantization block, and for a worker with
        an indexer the indexed cache allocation's int8 branch (file ``indexer_checks``), compiled (op
        ``worker_checks``, handed the run's cache dtypes), on a target worker and, with a draft, a draft worker (never
        split): a CHECK or ``LOG(FATAL)`` that fires is the refusal naming its field (``draft.`` for the draft's
        model fields; a tree without the indexed allocation fails an int8 indexer case naming
        ``implementation.files.indexer_checks``). An upstream-cut tree without those
        statements fails every case naming ``implementation.files.worker_checks``. A port: its own function where
        its manifest plays the role (the same op), the base's compiled cut where it leaves the role to the base
        (``{base: ...}``, the default with a base manifest), nothing where the engine calls none (``{none: ...}``),
        and where the role is absent (no base, no function of its own) ``AbsentRoleError`` on the cases that need
        it (``needs_worker_checks``), never a model of the CHECK."""
        state = self.manifest.role("worker_checks").state
        if state == "base" and (self.base is not None or needs_worker_checks(run)):
            return self.base_for("worker_checks").worker_checks(run)  # no base tree: absent where needed
        if state == "absent" and needs_worker_checks(run):
            raise self.manifest.absent_error("worker_checks")
        if state != "played":
            return  # none: the engine's worker checks nothing; base without its tree, absent: not needed here
        s = run.layerwise.split_size if self.is_active(run.layerwise) else 1
        for prefix, model, split in (("model", run.model, s), ("draft", run.draft, 1)):
            if model is None:
                continue
            try:
                reply = self.call(run, "worker_checks", {**self.model_args(model, draft=prefix == "draft"),
                                                         "layerwise_split_size": split, "rank": 0,
                                                         "kv_cache_dtype": run.cache.kv_cache_dtype,
                                                         "indexer_cache_dtype": run.cache.indexer_cache_dtype})
            except UserError as exc:
                if prefix == "model" or not exc.field.startswith("model."):
                    raise
                raise type(exc)(f"draft.{exc.field[len('model.'):]}", getattr(model, exc.field[len("model."):], exc.value),
                                exc.allowed, exc.detail) from None
            if "absent" in reply:
                raise PlanError("implementation.files.worker_checks", UPSTREAM_FILES["worker_checks"],
                                f"a file defining {WORKER_CHECKS_FUNCTION} (the worker's start-up checks)",
                                f"the tree implements no worker-side checks: {reply['absent']}")
            if "indexer_absent" in reply:  # the worker reaches the indexed cache's allocation with an int8 cache
                raise PlanError("implementation.files.indexer_checks", UPSTREAM_FILES["indexer_checks"],
                                f"a file defining {INDEXER_CHECKS_FUNCTION} (the indexed cache's allocation)",
                                f"the tree implements no int8 indexer cache check: {reply['indexer_absent']}")

    def allocation_checks(self, run: RunSpec, owned: Optional[list] = None) -> None:
        """The CHECKs the worker's allocation runs on the create options it built (role ``allocation_checks``):
        upstream's ``allocate_kv_caches`` branches for sleep mode and xtensor, cut and compiled (op
        ``allocation_checks``), fed the target worker's mask (``owned``, else the worker's own at rank 0: upstream's
        ``worker_checks`` answer, a port's worker role) and the run's sleep mode and xtensor; a CHECK that fires is
        the refusal naming its field. Asked where a case needs it (``needs_allocation_checks``: either setting on, the
        split active, so the worker hands a mask on); the draft's worker is never split. A port: its own function,
        the base's cut (the default with a base manifest, fed the port's worker's mask), nothing where the engine
        calls none (``{none: ...}``), ``AbsentRoleError`` where absent; an upstream-cut tree without the statements
        fails naming ``implementation.files.allocation_checks``. Never a model of the CHECK."""
        if owned is None and not needs_allocation_checks(run, self.is_active(run.layerwise)):
            return
        role = self.manifest.role("allocation_checks")
        if role.state == "base":
            return self.base_for("allocation_checks").allocation_checks(run, owned=self.worker_owned(run))
        if role.state == "absent":
            raise self.manifest.absent_error("allocation_checks")
        if role.state != "played":
            return  # none: the engine's allocation refuses nothing of the split
        mask, flags = (owned, {}) if owned is not None else self.worker_owned(run, flags=True)
        reply = self.call(run, "allocation_checks", {
            "owned": [int(bool(m)) for m in mask], "enable_sleep_mode": run.cache.enable_sleep_mode,
            "enable_xtensor": run.cache.enable_xtensor, "model_id": run.model.name, **flags})
        if "absent" in reply:
            raise PlanError("implementation.files.allocation_checks", UPSTREAM_FILES["allocation_checks"],
                            f"a file defining {ALLOCATION_CHECKS_FUNCTION} with its sleep-mode and xtensor branches",
                            f"the tree implements no allocation refusals of the split: {reply['absent']}")

    def worker_owned(self, run: RunSpec, *, flags: bool = False):
        """The target worker's mask at rank 0 as its create options carry it (a port: its worker role; upstream's tree:
        its compiled ``worker_checks``); with ``flags``, (the mask, the worker's ``linear_attention`` and
        ``lighting_indexer`` where the tree says them)."""
        s = run.layerwise.split_size if self.is_active(run.layerwise) else 1
        if self.port:
            mask = list(self.tree_worker_mask(run.model, 0, s, run)) if s > 1 else []
            return (mask, {}) if flags else mask
        reply = self.call(run, "worker_checks", {**self.model_args(run.model), "layerwise_split_size": s, "rank": 0})
        if "absent" in reply:
            self.worker_checks(run)  # the tree builds no mask: the refusal naming implementation.files.worker_checks
        mask = [bool(v) for v in reply.get("owned") or []]
        told = {k: bool(reply[k]) for k in ("linear_attention", "lighting_indexer") if k in reply}
        return (mask, told) if flags else mask

    def validate_port(self, run: RunSpec, *, workers: bool = True) -> None:
        """A port tree: the schema of the harness's inputs, then the tree's validation role, then (``workers``) its
        worker's start-up checks (role ``worker_checks``: the port's own, or the base's compiled cut)."""
        validation.check_model(run.model)
        validation.check_cache(run.cache)
        validation.check_hardware(run.hardware)
        s = run.layerwise.split_size
        if isinstance(s, bool) or not isinstance(s, int):
            raise ConfigError("layerwise.split_size", s, "a whole number")
        for name in ("world_size", "dp_size", "cp_size"):
            value = getattr(run.parallel, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"parallel.{name}", value, "a whole number >= 1")
        if not self.manifest.role("validation").none:  # none: the engine calls no validation, accepts everything
            self.require("validation")
            if self.plays("validation") == "base":
                self.base.validate(run, workers=False)
            else:
                self.call(run, "validate", {
                    "layerwise_split_size": s, "attn_tp_size": self.port_tp(run),
                    "model_type": engine_model_type(run.model.model_type)})
        if workers:
            self.worker_checks(run)  # then the worker's start-up checks (the port's, the base's, or absent)

    # ---- whether the split is active: the tree's own start-up code decides ------------------------

    def is_active(self, flags: LayerwiseFlags) -> bool:
        """Whether the tree's start-up path runs the split for these flags (``activation``)."""
        return self.activation(flags)[0]

    def activation(self, flags: LayerwiseFlags) -> tuple[bool, str]:
        """(active, whose rule decided). Every tree splits only at s > 1 (upstream's ``worker_impl.cpp`` and
        ``kv_cache_estimation.cpp`` test ``layerwise_split_size > 1``; the BI-V100 port's worker
        ``layerwise_split_size <= 1`` for "no layerwise split"). Whether a flag gates it is the engine role's to
        say: a port's engine function is called with the run's flag (the BI-V100 port's
        ``maybe_compute_layerwise_layout`` reads ``FLAGS_enable_layerwise_split``) and the split is active when it
        passes a layout on; where upstream's code plays the engine (upstream's tree, or the base around a port) no
        flag exists and s > 1 alone decides. With the split off the plan, and so the tree's estimation, gets s 1."""
        s = flags.split_size
        if isinstance(s, bool) or not isinstance(s, int) or s <= 1:
            return False, "s <= 1"
        self.require("engine")
        player = self.base_for("engine") if self.plays("engine") == "base" else self
        if not player.port:
            return True, f"s > 1 alone ({player.manifest.name}'s engine has no enable flag)"
        memo = getattr(self, "_activation", None)
        if memo is None:
            memo = self._activation = {}
        key = (bool(flags.enable), s)
        if key not in memo:
            function = player.manifest.role("engine").function
            reply = player.native.call("engine", {"per_layer_kv_heads": [s], "world_size": s,
                                                  "layerwise_split_size": s, "enable": bool(flags.enable)},
                                       timeout_s=self.timeout_s)
            active = reply.get("layout") is not None
            memo[key] = (active, f"{function} with the flag {'on' if flags.enable else 'off'} "
                                 f"{'passes a layout on' if active else 'passes no layout on (uniform allocation)'}")
        return memo[key]

    def port_tp(self, run: RunSpec) -> int:
        """The attention TP size the engine hands a port's functions: world / (dp x cp), rounded down."""
        return max(1, run.parallel.world_size // (run.parallel.dp_size * run.parallel.cp_size))

    def native_estimate(self, run: RunSpec, split_size: int) -> dict:
        """The target's capacity from the tree's code, and with a draft its capacity and the common block count.
        A role left to the base is the base's: its estimation, or (the port estimating) the base's speculative
        engine on the two capacities the port's estimation computed (``speculative_caps``)."""
        self.require("estimation")
        if run.draft is not None:
            self.require("speculative")
        if self.plays("estimation") == "base" and (run.draft is None or self.plays("speculative") == "base"):
            return self.base.native_estimate(run, split_size)
        if run.draft is not None and self.plays("speculative") == "base":
            return self.base_speculative(run, split_size)
        target = {**self.model_args(run.model), **self.estimate_options(run, run.model, split_size=split_size)}
        if run.draft is None:
            reply = self.call(run, "estimate", {**target, **self._parallel(run)})
            est = {"target": reply.get("capacity"), "draft": None, "target_shape_capacity": reply.get("shape_capacity"),
                   "n_blocks": (reply.get("capacity") or {}).get("n_blocks"),
                   "full_attention": reply.get("full_attention"), "indexer_layers": reply.get("indexer_layers")}
            return self._checked_estimate("estimate", run, est)
        draft = {**self.model_args(run.draft, draft=True),
                 **self.estimate_options(run, run.draft, split_size=split_size, draft=True)}
        values = {**{f"t.{k}": v for k, v in target.items()}, **{f"d.{k}": v for k, v in draft.items()},
                  "draft_body_tp1": run.draft.body_tp1, **self._parallel(run)}
        return self._checked_estimate("speculative", run, self.call(run, "speculative", values))

    def base_speculative(self, run: RunSpec, split_size: int) -> dict:
        """The draft's capacity as the engine around the port computes it: the port's estimation (or the base's,
        where the port leaves it) for the target and for the draft engine, then the base's
        ``SpeculativeEngine::calculate_kv_cache`` on the two capacities."""
        est = self.base if self.plays("estimation") == "base" else self
        target_run = replace(run, draft=None)
        target = est.native_estimate(target_run, split_size)
        draft_values = {**self.model_args(run.draft, draft=True),
                        **self.estimate_options(run, run.draft, split_size=split_size, draft=True)}
        memo = getattr(self, "_draft_estimate", None)  # the same question at s and at s 1 of one configuration
        if memo is None or memo[0] is not run or memo[1] is not est:
            memo = self._draft_estimate = (run, est, est.call(run, "estimate", {**draft_values, **self._parallel(run)}))
        reply = memo[2]
        draft_cap = reply.get("shape_capacity") or reply.get("capacity")
        target_cap = target.get("target_shape_capacity") or target.get("target")
        if not isinstance(draft_cap, dict) or not isinstance(target_cap, dict):
            raise self._malformed("estimate", "no capacity for the base's speculative engine")
        target_values = {**self.model_args(run.model),
                         **self.estimate_options(run, run.model, split_size=split_size)}
        combined = self.base.call(run, "speculative_caps", {
            **{f"t.{k}": v for k, v in target_values.items()}, **{f"t.cap.{k}": v for k, v in target_cap.items()},
            **{f"d.cap.{k}": v for k, v in draft_cap.items()}, "draft_body_tp1": run.draft.body_tp1,
            **self._parallel(run)})
        est_out = {**target, "draft": reply.get("capacity"), "draft_shape_capacity": reply.get("shape_capacity"),
                   "n_blocks": combined.get("n_blocks")}
        return self._checked_estimate("speculative_caps", run, est_out)

    def _malformed(self, op: str, what: str) -> ImplementationFailure:
        return ImplementationFailure(self.native.who, f"the compiled {op} answered {what}")

    def _checked_estimate(self, op: str, run: RunSpec, est: dict) -> dict:
        """``est`` when its shapes fit the model: one flag per layer of ``model.num_hidden_layers`` (an
        indexer mask empty or as long), whole block counts; else ``ImplementationFailure`` naming the key."""
        n = run.model.num_hidden_layers
        full, indexer = est.get("full_attention"), est.get("indexer_layers")
        if not isinstance(full, list) or len(full) != n:
            got = f"{len(full)} full_attention flags" if isinstance(full, list) else f"full_attention {full!r}"
            raise self._malformed(op, f"{got} for a model of {n} layers (model.num_hidden_layers): "
                                      f"the tree's layer count is not the model's")
        if not isinstance(indexer, list) or len(indexer) not in (0, n):
            got = f"{len(indexer)} indexer_layers flags" if isinstance(indexer, list) else f"indexer_layers {indexer!r}"
            raise self._malformed(op, f"{got} for a model of {n} layers (model.num_hidden_layers)")
        for name in ("target",) + (("draft",) if run.draft is not None else ()):
            if not isinstance(est.get(name), dict):
                raise self._malformed(op, f"no {name} capacity")
        if isinstance(est.get("n_blocks"), bool) or not isinstance(est.get("n_blocks"), int):
            raise self._malformed(op, f"n_blocks {est.get('n_blocks')!r}, not a whole number")
        return est

    def owned_masks(self, run: RunSpec, split_size: int) -> list:
        """Each split rank's owned-layer mask from the tree's layout: ``split_size`` masks of one flag per layer
        (the base's, where the port leaves ``ownership`` to it)."""
        if self.plays("ownership") == "base":
            return self.base_for("ownership").owned_masks(run, split_size)
        masks = self.call(run, "layout", {**self.model_args(run.model), "layerwise_split_size": split_size}).get("owned")
        n = run.model.num_hidden_layers
        if not isinstance(masks, list) or len(masks) != split_size:
            got = f"{len(masks)} owned masks" if isinstance(masks, list) else f"owned {masks!r}"
            raise self._malformed("layout", f"{got} for layerwise.split_size {split_size}")
        for rank, mask in enumerate(masks):
            if not isinstance(mask, list) or len(mask) != n:
                got = f"{len(mask)} flags" if isinstance(mask, list) else repr(mask)
                raise self._malformed("layout", f"split rank {rank}'s owned mask with {got} for a model of {n} "
                                                f"layers (model.num_hidden_layers)")
        return masks

    def plan(self, run: RunSpec) -> KVPlan:
        self.validate(run)
        model, cache = run.model, run.cache
        tp = self.port_tp(run) if self.port else self.attn_tp_size(run.parallel)
        active = self.is_active(run.layerwise)
        s = run.layerwise.split_size if active else 1
        est = self.native_estimate(run, s)
        cap = est["target"]
        n_blocks = est["n_blocks"]
        if n_blocks < 1:
            raise PlanError("hardware.reserved_bytes_per_card", f"per-rank KV budget {run.kv_budget_bytes} B",
                            "a budget holding one block", f"the compiled estimate gives n_blocks {n_blocks}")
        full = tuple(l for l, f in enumerate(est["full_attention"]) if f)
        indexer_mask = est["indexer_layers"]
        block = cap["block_size"]
        slot, scale, index = cap["slot_size"], cap["scale_slot_size"], cap["index_slot_size"]
        indexed = {l for l in full if index > 0 and (not indexer_mask or indexer_mask[l])}
        layer_bytes = tuple(block * (slot + scale + (index if l in indexed else 0)) if l in full else 0
                            for l in range(model.num_hidden_layers))
        scratch = block * (slot + scale + (index if indexed else 0)) if active else 0
        linear = cap["linear_cache_size_in_bytes"]
        budget = run.kv_budget_bytes
        available = budget - linear
        draft = self._draft_plan(run, est) if run.draft is not None else None
        additional = draft.bytes_per_block if draft is not None else 0
        uniform_n_blocks = self._uniform_n_blocks(run, n_blocks if not active else None)
        notes: list[str] = []
        published: tuple = ()
        if active:
            self.require("ownership")
            masks = self.owned_masks(run, s)
            layer_owner = tuple((l, next(r for r in range(s) if masks[r][l])) for l in full)
            idle = [r for r in range(s) if not any(o == r for _, o in layer_owner)]
            if idle:
                notes.append(f"split ranks {idle} own no full-attention layer ({len(full)} full layers, s={s})")
            if self.port:
                published = self.published_layouts(run, full, tp, s, n_blocks, cap)
                notes += [describe_layout(name, layers) for name, layers in published]
        else:
            layer_owner = ()
        placement = self.place_ranks(run)
        groups = self.split_groups(run, placement)
        if active:
            notes.append(self.tree_groups_note())
        if self.port and isinstance(run.layerwise.split_size, int) and run.layerwise.split_size > 1:
            notes.append(f"split {'active' if active else 'off'} at s {run.layerwise.split_size}: "
                         f"{self.activation(run.layerwise)[1]}")
        notes.append(TREE_CARDS_NOTE)
        notes.append(self.tree_message_note())
        if self.port:
            notes.insert(0, self.source_note())
        ranks = self._rank_plans(run, tp, placement, groups, full, layer_owner, layer_bytes, split_size=s,
                                 n_blocks=n_blocks, scratch=scratch, linear=linear,
                                 draft_bytes_per_block=additional)
        per_rank = {r.rank: r.estimated_bytes for r in ranks}
        uniform_peak = estimation.rank_bytes(n_blocks, estimation.owned_bytes_per_block(layer_bytes, full), 0, linear)
        peak = estimation.peak_bytes(per_rank)
        if active and uniform_n_blocks < 1 <= n_blocks:
            notes.append(f"{estimation.GAIN_UNDEFINED_NOTE} at this budget: the capacity gain is undefined (null)")
        if peak > uniform_peak:
            notes.append(f"{estimation.RAISES_PEAK_NOTE}: split peak {peak} B > uniform peak {uniform_peak} B")
        self.check_cards(groups, placement, {r.rank: r.estimated_bytes + r.draft_estimated_bytes for r in ranks}, run)
        self.allocation_checks(run)  # the workers allocate once the master has estimated and laid the split out
        return KVPlan(
            implementation=self.name, model=model.name, world_size=run.parallel.world_size,
            dp_size=run.parallel.dp_size, cp_size=run.parallel.cp_size, attn_tp_size=tp, split_size=s,
            active=active, block_size=cache.block_size, kv_layout=run.hardware.kv_layout,
            num_layers=model.num_hidden_layers, full_layers=full, layer_bytes_per_block=layer_bytes,
            scratch_bytes_per_block=scratch, additional_bytes_per_block=additional, linear_state_bytes=linear,
            budget_bytes=budget, available_bytes=available, split_groups=groups, layer_owner=layer_owner,
            n_blocks=n_blocks, uniform_n_blocks=uniform_n_blocks, peak_bytes=peak,
            mean_bytes=estimation.mean_bytes(per_rank), uniform_peak_bytes=uniform_peak,
            savings_bytes=uniform_peak - peak,
            capacity_gain=estimation.capacity_gain(n_blocks, uniform_n_blocks) if active else 1.0,
            ranks=ranks, draft=draft, notes=tuple(notes), slot_size=slot, index_slot_size=index,
            scale_slot_size=scale, num_indexer_layers=cap["num_indexer_layers"],
            linear_slot_size=cap["linear_slot_size"], num_linear_state_blocks=cap["num_linear_state_blocks"],
            published_layouts=published,
        )

    # ---- a port's own layouts and worker ------------------------------------------------------------

    def published_layouts(self, run: RunSpec, full: tuple, tp: int, s: int, n_blocks: int, cap: dict) -> tuple:
        """The master's layout (role ``layout``) and what the engine passes on (role ``engine``), as the
        tree computes them: per full layer, the TP ranks holding it and their KV heads. A role left to an
        upstream-cut base publishes nothing (upstream's layout is its owner rule: the masks)."""
        model = run.model
        kv_heads = model.num_key_value_heads if model.attention == "gqa" else 1
        requests = (
            ("layout", "master layout", "master_layout", {
                "layer_types": self.model_args(model)["layer_types"], "kv_heads": kv_heads, "world_size": tp,
                "n_blocks": n_blocks, "block_size": cap["block_size"], "head_dim": model.head_dim,
                "max_tokens": 0, "dtype_code": TORCH_SCALAR_TYPES[model.dtype], "layerwise_split_size": s,
                "enable": run.layerwise.enable}),
            ("engine", "engine layout", "engine", {
                "per_layer_kv_heads": [kv_heads] * len(full), "world_size": tp, "layerwise_split_size": s,
                "enable": run.layerwise.enable}))
        out = []
        for role, name, op, values in requests:
            self.require(role)
            player = self.base_for(role) if self.plays(role) == "base" else self
            if not player.port:
                continue
            whose = "the base's " if player is not self else ""
            out.append((f"{name} ({whose}{player.manifest.role(role).function})",
                        player.call(run, op, values)["layout"]))
        return tuple((name, layout_facts(layout, full)) for name, layout in out)

    def ownership_mask(self, message: KVPlan, rank: int) -> tuple[bool, ...]:
        """The mask the tree's worker builds for this global rank: a port's worker function (role ``worker``);
        upstream's tree, its compiled start-up (``worker_checks``: ``build_layer_cache_owned`` over its layout at
        split rank ``rank % s``, as ``WorkerImpl`` writes it), never the plan's owners at a Python ``rank % s``."""
        self.worker_split_rank(message, rank)  # the rank must be in the plan
        if not self.port:
            return self.compiled_worker_mask(message, rank)
        return self.tree_worker_mask(self._worker_model, rank, message.split_size if message.active else 1)

    def compiled_worker_mask(self, message: KVPlan, rank: int) -> tuple[bool, ...]:
        """Upstream's tree: the mask its worker's compiled start-up builds for global ``rank`` (op ``worker_checks``;
        with the split off, or a draft's message, every layer)."""
        if not message.active:
            return (True,) * message.num_layers
        reply = self.native.call("worker_checks", {**self.model_args(self._worker_model),
                                                   "layerwise_split_size": message.split_size, "rank": rank},
                                 timeout_s=self.timeout_s)
        if "absent" in reply:
            raise PlanError("implementation.files.worker_checks", UPSTREAM_FILES["worker_checks"],
                            f"a file defining {WORKER_CHECKS_FUNCTION} (the worker's start-up)",
                            f"the tree builds no worker mask: {reply['absent']}")
        owned = reply.get("owned")
        if not isinstance(owned, list) or len(owned) != message.num_layers:
            raise self._malformed("worker_checks", f"owned {owned!r} for a model of {message.num_layers} layers")
        return tuple(bool(v) for v in owned)

    def tree_worker_mask(self, model: ModelSpec, rank: int, split_size: int,
                         run: Optional[RunSpec] = None) -> tuple[bool, ...]:
        """The mask the tree's worker builds for global ``rank`` at ``split_size`` (role ``worker``); the base's
        where the port leaves it (upstream's ``WorkerImpl``: its layout over split rank ``rank % s``,
        ``build_layer_cache_owned``)."""
        self.require("worker")
        if self.plays("worker") == "base":
            base = self.base_for("worker")
            reply = base.native.call("layout", {**base.model_args(model), "layerwise_split_size": split_size},
                                     timeout_s=self.timeout_s)
            masks = reply.get("owned")
            if not isinstance(masks, list) or len(masks) != split_size:
                raise self._malformed("layout", f"owned {masks!r} from the base for layerwise.split_size {split_size}")
            return tuple(bool(v) for v in masks[rank % split_size])
        values = {"layer_types": self.model_args(model)["layer_types"], "layerwise_split_size": split_size,
                  "rank": rank, "n_layers": model.num_hidden_layers}
        reply = self.call(run, "worker", values) if run is not None else \
            self.native.call("worker", values, timeout_s=self.timeout_s)
        owned = reply.get("owned")
        if not isinstance(owned, list) or len(owned) != model.num_hidden_layers:
            raise self._malformed("worker", f"owned {owned!r} for a model of {model.num_hidden_layers} layers")
        return tuple(bool(v) for v in owned)

    def split_groups(self, run: RunSpec, placement=None) -> tuple[tuple[int, ...], ...]:
        """The split groups as the tree forms them (role ``groups``): its groups function where the manifest names
        one (upstream: ``MappingNPU::get_layerwise_split_group`` over its TP groups), the base's where the port
        leaves it to the base, ``AbsentRoleError`` where it is absent. ``none`` (the engine forms no groups): read
        off the worker role's masks; inside each attention TP group, ranks holding the same mask took the same
        split rank, and the j-th rank of each such class (in rank order) form the j-th split group. The split
        off: one group per rank."""
        if not self.is_active(run.layerwise):
            return tuple((rank,) for rank in range(run.parallel.world_size))
        role = self.manifest.role("groups")
        self._untold = []
        if role.state == "absent":
            raise self.manifest.absent_error("groups")
        if role.state == "base" and self.base is not None and self.base.manifest.role("groups").state == "none":
            return self.mask_groups(run)  # the engine around the port forms none either: the port's workers decide
        if role.state == "base":
            return self.base_for("groups").split_groups(run, placement)
        if role.state == "played":
            return self.tree_groups(run)
        return self.mask_groups(run)

    def tree_groups(self, run: RunSpec) -> tuple[tuple[int, ...], ...]:
        """The groups function's answer (glue op ``groups``): every rank's group, checked to cover each rank once."""
        p = run.parallel
        reply = self.call(run, "groups", {"world_size": p.world_size, "dp_size": p.dp_size, "cp_size": p.cp_size,
                                          "kv_split_size": p.kv_split_size,
                                          "layerwise_split_size": run.layerwise.split_size})
        groups = reply.get("groups")
        if not isinstance(groups, list) or not all(isinstance(g, list) for g in groups) or \
                sorted(r for g in groups for r in g) != list(range(p.world_size)):
            raise self._malformed("groups", f"groups {groups!r}, not a partition of ranks 0..{p.world_size - 1}")
        return tuple(tuple(int(r) for r in g) for g in groups)

    def mask_groups(self, run: RunSpec) -> tuple[tuple[int, ...], ...]:
        """The groups the workers' masks make (the tree forms none): see ``split_groups``."""
        s = run.layerwise.split_size
        tp = self.port_tp(run) if self.port else self.attn_tp_size(run.parallel)
        masks = None if self.port else self.owned_masks(run, s)
        groups: list = []
        for tp_group in layout.tp_groups(run.parallel, tp):
            classes: dict = {}
            for rank in tp_group:
                mask = self.tree_worker_mask(run.model, rank, s, run) if masks is None \
                    else tuple(bool(v) for v in masks[rank % s])
                classes.setdefault(mask, []).append(rank)
            columns = list(classes.values())
            if len(columns) != s:
                self._untold.append(f"TP group {list(tp_group)}: {len(columns)} distinct masks at s={s}, ranks "
                                    f"{[c for c in columns if len(c) > len(tp_group) // s]} not told apart")
            groups += [tuple(c[j] for c in columns if j < len(c)) for j in range(max(len(c) for c in columns))]
        return tuple(groups)

    def tree_groups_note(self) -> str:
        """``TREE_GROUPS_NOTE``: where the tree's split groups come from (its groups role, or each rank's mask from
        the worker role), that no role of the tree is handed the topology, and what masks could not tell apart."""
        owner = self.base_for("groups") if self.plays("groups") == "base" and \
            self.base.manifest.role("groups").state != "none" else self
        role = owner.manifest.role("groups")
        if role.present:
            where = (f"the groups role ({role.function}, {role.file}), handed world, dp, cp, kv_split and s and no "
                     "topology, so the tree has no topology-aware grouping")
        else:
            worker = owner.base_for("worker").manifest.role("worker") if owner.plays("worker") == "base" \
                else owner.manifest.role("worker")
            where = (f"read off each rank's mask from the worker role ({worker.function}); the tree forms no split "
                     "groups and no role of it reads the topology, so it has no topology-aware grouping")
        untold = getattr(owner, "_untold", [])
        return f"{TREE_GROUPS_NOTE}: {where}" + (f"; {'; '.join(untold)}" if untold else "")

    def check_cards(self, split_groups: tuple, placement, per_rank_bytes: dict, run: RunSpec) -> None:
        """None. No compiled code of a tree (upstream's included: its engine sizes the KV cache to what each device
        reports free and forms its groups without knowing the cards) refuses two ranks of a split group on one card
        or a card planned past its HBM, so the tree is credited with no such refusal; the plan says so
        (``TREE_CARDS_NOTE``) and TC-03 names it where the spec refuses."""

    def tree_message_note(self) -> str:
        """``TREE_MESSAGE_NOTE``: no code of the tree checks a layout its workers receive (upstream's workers, and
        the ports', take their split from their own s and rank; what they check is their start-up CHECKs, role
        ``worker_checks``), so TC-04 judges no tampered layout; the note says where the tree's workers take their
        split from. A manifest role that checks a received layout would be called in ``check_message`` and leave
        this note out (no manifest names one yet)."""
        owner = self.base if self.plays("worker") == "base" and self.base is not None else self
        role = owner.manifest.role("worker")
        whose = "the base's " if owner is not self else ""
        if not role.present:
            why = role.absent or role.none or role.base
            where = f"the tree plays no worker role (manifest role `worker` is {role.state}: {why})"
        elif owner.port:
            where = (f"its workers take their split from {whose}{role.function} ({role.file}), handed the layer types, "
                     "s, the worker's rank and the layer count")
        else:
            where = (f"its workers take their split from {whose}{role.function} ({role.file}) over LayerwiseSplitLayout("
                     f"s, rank % s), as {WORKER_CHECKS_FUNCTION} calls it with its own s and rank")
        return (f"{TREE_MESSAGE_NOTE}: {where}, not from a received layout, and no code of the tree compares what a "
                "worker receives with what the master published (a worker's checks are its start-up CHECKs, role "
                "worker_checks, judged by TC-01 and TC-07)")

    def check_message(self, message: KVPlan, expected_digest: str, rank: int) -> None:
        """No digest check: none of the tree's code makes one (``tree_message_note``), and no Python check runs in
        its place. The message must name the worker's rank: the glue builds the worker's caches from its entry."""
        if not any(r.rank == rank for r in message.ranks):
            raise PlanError("rank", rank, f"a rank of the plan (0..{message.world_size - 1})")

    def init_worker(self, message: KVPlan, run: RunSpec, *, rank: int, role: str, device: str,
                    expected_digest: str) -> WorkerKVCache:
        """The worker: the tree's mask; with the manifest's ``allocation``, the tensors the tree's own
        allocation returns (compiled against torch and run in this rank: ``tensor_worker``); with none, the
        harness allocates the tree's mask."""
        self._worker_model = run.model if role == "target" else run.draft
        if self.unsplit_by_base(message, role, run):
            base = self.base
            if base is None:
                raise AbsentRoleError(self.manifest.name, "worker", "the allocation with the split off is left to "
                                      f"the base: {native_mod.base_missing_reason(self.manifest)}")
            if base.manifest.tensors is None:
                raise AbsentRoleError(self.manifest.name, "worker", "the allocation with the split off is left to "
                                      f"the base {base.manifest.name}, whose manifest compiles no allocation")
            return self.tensor_worker(message, run, rank=rank, role=role, device=device,
                                      expected_digest=expected_digest, library=base.native)
        self.require_allocation(message.active and bool(run.layerwise.enable) and role == "target")
        if self.manifest.tensors is not None:
            return self.tensor_worker(message, run, rank=rank, role=role, device=device,
                                      expected_digest=expected_digest)
        if not self.port or self.manifest.allocation is None:
            return super().init_worker(message, run, rank=rank, role=role, device=device,
                                       expected_digest=expected_digest)
        if role not in ROLES:
            raise ConfigError("role", role, f"one of {', '.join(ROLES)}")
        self.check_message(message, expected_digest, rank)
        mask = self.ownership_mask(message, rank)
        reply = self.native.call("allocate", {"owned": [int(m) for m in mask], "n_layers": message.num_layers,
                                              "rank": rank, "n_blocks": message.n_blocks,
                                              "block_size": message.block_size})
        if reply.get("tensors"):
            raise PlanError("implementation", self.manifest.name, "a tree allocation the harness can take over",
                            f"{self.manifest.allocation.function} returned tensors; handing a tree's tensors "
                            "to the rank (torch's C++ extension API) is not supported yet")
        return tree_allocation(message, rank=rank, role=role, mask=mask, device=device)

    # ---- the tree's allocation, compiled against torch, in this rank ----------------------------------

    def unsplit_by_base(self, message: KVPlan, role: str, run: RunSpec) -> bool:
        """The worker's allocation is the base's: the manifest's ``allocation.unsplit: base`` and the split off
        for this worker: s 1, every draft worker (the draft is never split), or the port's engine role passing
        no layout on (the BI-V100 port's ``maybe_compute_layerwise_layout`` with the flag off: "fallback to
        uniform allocation")."""
        if self.manifest.unsplit_allocation != "base":
            return False
        return role == "draft" or not message.active  # ``activation``: the port's engine decided

    def tensor_worker(self, message: KVPlan, run: RunSpec, *, rank: int, role: str, device: str,
                      expected_digest: str, library: Optional[native_mod.Native] = None) -> WorkerKVCache:
        """The worker's caches as the tree's own allocation made them in this process.

        The engine's capacity comes from the tree's estimation (as the engine hands the workers the shape
        it builds from it); the glue builds the tree's shape and create options from it and calls the
        manifest's ``allocation`` function (upstream: ``allocate_kv_caches``, with the mask its worker builds
        from ``rank % s``; a port: the mask its worker role gives). Each layer holds the tensors the tree
        allocated for it; a full layer the tree does not own holds its view of the scratch."""
        if role not in ROLES:
            raise ConfigError("role", role, f"one of {', '.join(ROLES)}")
        self.check_message(message, expected_digest, rank)
        model = run.model if role == "target" else run.draft
        if model is None:
            raise ConfigError("draft", None, "a draft model is needed for role 'draft'")
        split = message.active and role == "target" and library is None  # the base's allocation: the split off
        s = message.split_size if split else 1
        tp = message.attn_tp_size
        est = self.native_estimate(run, message.split_size if message.active else 1)
        shape_model = model
        if role == "target":
            shape_cap = est.get("target_shape_capacity") or est.get("target")
        elif not run.draft.body_tp1:  # MTPWorkerImpl::allocate_kv_cache: the draft is handed the target's shape
            shape_cap, shape_model = est.get("target_shape_capacity") or est.get("target"), run.model
        else:  # MTPDraftKVCacheShape: a capacity of only the block count and size, the draft's args, TP 1
            shape_cap, tp = {"n_blocks": message.n_blocks, "block_size": message.block_size}, 1
        if not isinstance(shape_cap, dict):
            raise self._malformed("estimate", f"no {role} capacity for the worker's shape")
        shape_cap = {**shape_cap, "n_blocks": message.n_blocks}
        values = {**self.model_args(model, draft=role == "draft"), **{f"cap.{k}": v for k, v in shape_cap.items()},
                  "op": "allocate", "world_size": tp, "layerwise_split_size": s, "rank": rank,
                  "dtype_code": TORCH_SCALAR_TYPES[model.dtype], "kv_cache_dtype": run.cache.kv_cache_dtype,
                  "indexer_cache_dtype": run.cache.indexer_cache_dtype, "block_size": message.block_size,
                  "device": device}
        if shape_model is not model:
            values.update({f"shape.{k}": v for k, v in self.model_args(shape_model).items()})
        if self.port and s > 1 and library is None:
            values["owned"] = [int(m) for m in self.ownership_mask(message, rank)]
        owner = library or self.native
        reply, tensors = owner.tensor_library(message.kv_layout).allocate(tensor_lib.request(values))
        if "check" in reply:
            raise owner.refusal(owner.check_of(reply["check"]))
        return self.worker_cache(message, reply, tensors, rank=rank, role=role, model=model, device=device,
                                 split=split or (message.active and library is None))

    def worker_cache(self, message: KVPlan, reply: dict, tensors: list, *, rank: int, role: str,
                     model: ModelSpec, device: str, split: bool = True) -> WorkerKVCache:
        """The glue's reply as the rank's caches: each layer's tensors under the harness's names."""
        layers_reply = reply.get("layers")
        if not isinstance(layers_reply, list) or len(layers_reply) != message.num_layers:
            got = f"{len(layers_reply)} layers" if isinstance(layers_reply, list) else f"layers {layers_reply!r}"
            raise self._malformed("allocate", f"{got} for a model of {message.num_layers} layers")
        names = TENSOR_NAMES_MLA if model.attention == "mla" else TENSOR_NAMES
        full = set(message.full_layers)
        layers, scratch = [], {}
        for layer_id, entry in enumerate(layers_reply):
            if not isinstance(entry, dict) or entry.get("layer") != layer_id or not isinstance(entry.get("tensors"), dict):
                raise self._malformed("allocate", f"layer entry {entry!r} at position {layer_id}")
            held = {}
            for name, index in entry["tensors"].items():
                if name not in names:
                    raise self._malformed("allocate", f"tensor {name!r} of layer {layer_id} (known: {', '.join(names)})")
                if not isinstance(index, int) or not 0 <= index < len(tensors):
                    raise self._malformed("allocate", f"tensor index {index!r} of layer {layer_id} "
                                                      f"({len(tensors)} tensors handed over)")
                held[names[name]] = tensors[index]
            owned = bool(entry.get("owned", True))
            if layer_id in full and not owned and not scratch:
                scratch = dict(held)
            layers.append(LayerCache(layer_id=layer_id, kind="full" if layer_id in full else "linear",
                                     owned=owned, tensors=held))
        rank_plan = next(r for r in message.ranks if r.rank == rank)
        if message.active and split:
            split_size, split_rank = message.split_size, rank_plan.split_rank
            split_group = tuple(message.split_groups[rank_plan.split_group])
        else:
            split_size, split_rank, split_group = 1, 0, (rank,)
        return WorkerKVCache(rank=rank, role=role, plan_digest=message.digest, split_size=split_size,
                             split_rank=split_rank, split_group=split_group, n_blocks=message.n_blocks,
                             kv_layout=message.kv_layout, device=device, layers=layers, scratch=scratch)

    def _uniform_n_blocks(self, run: RunSpec, known: Optional[int]) -> int:
        """The block count at s = 1 from the same compiled code (0 when not one block fits)."""
        if known is not None:
            return known
        try:
            return self.native_estimate(run, 1)["n_blocks"]
        except PlanError:
            return 0

    def _draft_plan(self, run: RunSpec, est: dict) -> DraftPlan:
        """The draft's KV per block as ``calculate_kv_cache`` costs it (target shape unless body_tp1)."""
        t, d = est["target"], est["draft"]
        block = t["block_size"]
        n = d["n_layers"]
        if run.draft.body_tp1:
            per_layer = tuple(block * (d["slot_size"] + d["scale_slot_size"]
                                       + (d["index_slot_size"] if l < d["num_indexer_layers"] else 0))
                              for l in range(n))
        else:
            per_layer = (block * (t["slot_size"] + t["index_slot_size"] + t["scale_slot_size"]),) * n
        return DraftPlan(model=run.draft.name, num_layers=n, full_layers=tuple(range(n)),
                         layer_bytes_per_block=per_layer, body_tp1=run.draft.body_tp1)

