"""What the spec predicts before a case runs: rejections, and the failures of known variants.

Decided by the spec (the oracle), never by the code under test.

- ``expected_rejection(run)``: the first startup rule of FEATURE section 3 the config
  breaks, as ``Rejection(field, reason)``; a case passes its rejection only when the
  implementation raises ``implementations.errors.UserError`` naming that field.
- ``PREDICTIONS``: per implementation name, the problems the spec predicts a check finds
  (FEATURE section 4: upstream's literal owner rule ``layer_id % s`` puts every
  full-attention layer of a hybrid model on one split rank, so that rank exceeds the
  uniform peak). ``judge`` compares the problems a check found with the prediction: the
  predicted problems must all be found (rank and bytes exact), anything else found, and
  any exception, fails the test. Data keyed by implementation name: add an entry to
  predict another variant.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

from harness import oracle

# ---- rejections ---------------------------------------------------------------------------

try:  # the oracle owns these; the fallback below is TEMPORARY, until harness/oracle.py ships them
    from harness.oracle import Rejection, expected_rejection  # type: ignore[attr-defined]
except ImportError:  # TEMPORARY fallback (same field names and order as the oracle's contract)

    @dataclass(frozen=True)
    class Rejection:  # type: ignore[no-redef]
        field: str
        reason: str

    _SPLIT_MODEL_TYPES = ("deepseek_v3", "deepseek_v32", "glm_moe_dsa", "qwen3_5_moe", "qwen3_next")
    _QUANTIZED = ("int8", "fp8_e4m3", "fp8_e5m2")

    def _quantized_allowed(hw) -> tuple:
        allowed = getattr(hw, "quantized_kv_cache_dtypes", None)  # TEMPORARY: the engine adds the field
        return tuple(allowed) if allowed is not None else (_QUANTIZED if hw.name == "cpu" else ())

    def expected_rejection(run) -> Optional[Rejection]:  # type: ignore[no-redef]
        """TEMPORARY: FEATURE section 3's first broken rule (see CONTRACTS: oracle.expected_rejection)."""
        lw, par, cache, model, hw = run.layerwise, run.parallel, run.cache, run.model, run.hardware
        if lw.split_size < 1:
            return Rejection("layerwise.split_size", f"split size {lw.split_size} < 1")
        if par.world_size % (par.dp_size * par.cp_size):
            return Rejection("parallel.world_size", f"world {par.world_size} not divisible by dp*cp")
        tp = oracle.attn_tp_size(run)
        if tp % lw.split_size:
            return Rejection("layerwise.split_size", f"attention tp {tp} % split size {lw.split_size} != 0")
        if oracle.expected_linear_layers(model) and model.index_n_heads > 0:
            return Rejection("model.index_n_heads", "linear-attention layers and a DSA indexer")
        if cache.kv_cache_dtype in _QUANTIZED and cache.kv_cache_dtype not in _quantized_allowed(hw):
            return Rejection("cache.kv_cache_dtype", f"{cache.kv_cache_dtype} KV cache not supported on {hw.name}")
        indexer = getattr(cache, "indexer_cache_dtype", getattr(cache, "index_cache_dtype", "auto"))
        if indexer == "int8" and model.index_n_heads > 0 and not getattr(hw, "int8_indexer_cache", hw.name == "cpu"):
            return Rejection("cache.indexer_cache_dtype", f"int8 indexer cache not supported on {hw.name}")
        if oracle.split_size(run) == 1:
            return None
        for broken, fld, reason in (
            (model.model_type not in _SPLIT_MODEL_TYPES, "model.model_type", "model does not support the split"),
            (cache.host_blocks_factor > 1, "cache.host_blocks_factor", "host cache with split"),
            (par.cp_size > 1, "parallel.cp_size", "context parallel with split"),
            (par.kv_split_size > 1, "parallel.kv_split_size", "KV split with split"),
            (cache.enable_sleep_mode, "cache.enable_sleep_mode", "sleep mode with split"),
            (cache.enable_xtensor, "cache.enable_xtensor", "xtensor with split"),
        ):
            if broken:
                return Rejection(fld, reason)
        return None


def rejection_problems(error, run) -> Optional[list[str]]:
    """None when the spec expects no rejection; else the problems of the master's answer (empty: the
    implementation refused with a UserError naming the expected field)."""
    want = expected_rejection(run)
    if want is None:
        return None
    if error is None:
        return [Problem(f"master accepted a config the spec refuses: {want.reason} (expected a UserError "
                        f"naming {want.field})", rule="rejection")]
    if not error.user_error:
        return [Problem(f"master refused with {error} (not a UserError); expected a UserError naming "
                        f"{want.field} ({want.reason})", rule="rejection")]
    if error.field != want.field:
        return [Problem(f"master refused naming {error.field!r} ({error}); the spec's rule is {want.field} "
                        f"({want.reason})", rule="rejection")]
    return []


# ---- problems -----------------------------------------------------------------------------


class Problem(str):
    """A problem a check found: its text, plus what a prediction matches on.

    ``rule`` names the spec rule broken (``owner``, ``peak``, ...); ``rank`` and ``amount``
    (bytes) locate it. Plain strings are problems of rule ``""``, which no prediction covers.
    """

    rule: str
    rank: Optional[int]
    amount: Optional[int]

    def __new__(cls, text: str, *, rule: str = "", rank: Optional[int] = None, amount: Optional[int] = None):
        self = super().__new__(cls, text)
        self.rule, self.rank, self.amount = rule, rank, amount
        return self

    def __reduce__(self):
        return (_problem, (str(self), self.rule, self.rank, self.amount))


def _problem(text, rule, rank, amount) -> Problem:
    return Problem(text, rule=rule, rank=rank, amount=amount)


@dataclass(frozen=True, kw_only=True)
class Predicted:
    """A problem the spec predicts: its rule, and the rank and amount when they are fixed."""

    rule: str
    rank: Optional[int] = None
    amount: Optional[int] = None
    why: str = ""

    def matches(self, p) -> bool:
        return (getattr(p, "rule", "") == self.rule
                and (self.rank is None or getattr(p, "rank", None) == self.rank)
                and (self.amount is None or getattr(p, "amount", None) == self.amount))


@dataclass(frozen=True, kw_only=True)
class Prediction:
    """``required``: each must match a found problem. ``consequences``: rules that may also appear
    because of them (e.g. a different block count changes every byte figure)."""

    required: tuple[Predicted, ...]
    consequences: tuple[str, ...] = ()
    reason: str = ""


def _upstream_block_count(run, owner: dict[int, int]) -> int:
    """FEATURE 6's common block count with ``owner`` in place of the round-robin."""
    tp = oracle.attn_tp_size(run)
    per_layer = oracle.expected_layer_bytes_per_block(run.model, run.cache, tp)
    scratch = oracle.expected_scratch_bytes_per_block(run.model, run.cache, tp)
    additional = oracle.expected_full_bytes_per_block(run.draft, run.cache, tp) if run.draft is not None else 0
    available = run.hardware.kv_budget_bytes - oracle.expected_linear_state_bytes(run.model, run.cache, tp)
    costs = [sum(per_layer[l] for l, o in owner.items() if o == r) + scratch + additional
             for r in sorted(set(owner.values()))]
    return min(available // c for c in costs)


def owner_rule_prediction(tc: str, run) -> Optional[Prediction]:
    """Upstream's owner rule ``layer_id % s`` (FEATURE 4) where it differs from the round-robin: the
    ranks whose full layers differ (TC-01, TC-07), and the split ranks that then exceed the uniform
    peak at the same block count, by the scratch they add (TC-02)."""
    s = oracle.split_size(run)
    if s == 1 or expected_rejection(run) is not None:
        return None
    full = tuple(oracle.expected_full_layers(run.model))
    spec, upstream = oracle.expected_owner(full, s), oracle.expected_upstream_owner(full, s)
    if spec == upstream:
        return None
    from harness.suites import ownership

    groups = ownership.expected_split_groups(run)
    if groups is None:
        return None
    differ = [r for r in range(run.parallel.world_size)
              if sorted(l for l, o in spec.items() if o == ownership.expected_position(groups, r)[1])
              != sorted(l for l, o in upstream.items() if o == ownership.expected_position(groups, r)[1])]
    reason = (f"upstream owner rule (layer_id % s) on {run.model.name} at s={s}: split ranks own "
              f"{ {r: sum(1 for o in upstream.values() if o == r) for r in range(s)} } full layers (FEATURE 4)")
    if tc in ("TC-01", "TC-07"):
        return Prediction(required=tuple(Predicted(rule="owner", rank=r) for r in differ),
                          consequences=("bytes", "n_blocks"), reason=reason)
    if tc == "TC-02":
        tp = oracle.attn_tp_size(run)
        per_layer = oracle.expected_layer_bytes_per_block(run.model, run.cache, tp)
        scratch = oracle.expected_scratch_bytes_per_block(run.model, run.cache, tp)
        n = _upstream_block_count(run, upstream)
        uniform = n * sum(per_layer[l] for l in full)
        over = []
        for r in range(run.parallel.world_size):
            owned = n * sum(per_layer[l] for l, o in upstream.items() if o == ownership.expected_position(groups, r)[1])
            if owned + n * scratch > uniform:
                over.append(Predicted(rule="peak", rank=r, amount=owned + n * scratch - uniform,
                                      why=f"rank {r} holds {owned} B of owned layers + {n * scratch} B scratch"))
        return Prediction(required=tuple(over), consequences=("n_blocks", "estimate", "figure"), reason=reason)
    return None


PREDICTIONS: dict[str, Callable[[str, object], Optional[Prediction]]] = {
    "xllm_upstream": owner_rule_prediction,
    "upstream_owner_rule": owner_rule_prediction,
}
"""Implementation name -> predict(tc, run). A faithful model of upstream 494f293b5 adds, from
FEATURE 2-4 and 6: no enable flag (an ``off`` config with s > 1 splits), upstream's model list
(``deepseek_v32``, ``glm_moe_dsa``), ``rank % s`` split ranks on regrouped topologies and
upstream's draft cost; extend its entry when that model lands."""


def prediction(tc: str, implementation: str, run) -> Optional[Prediction]:
    predict = PREDICTIONS.get(implementation)
    return predict(tc, run) if predict is not None else None


def judge(tc: str, implementation: str, run, problems: list) -> list[str]:
    """The test's failures: ``problems`` when nothing is predicted; else what the prediction does not
    explain, plus every predicted problem not found (an expected failure is strict)."""
    pred = prediction(tc, implementation, run)
    if pred is None:
        return list(problems)
    failures = [f"{implementation}: predicted problem not found: {p.rule} on rank {p.rank}"
                + (f" by {p.amount} B" if p.amount is not None else "") + (f" ({p.why})" if p.why else "")
                for p in pred.required if not any(p.matches(x) for x in problems)]
    unexplained = [f"unpredicted: {x}" for x in problems
                   if not any(p.matches(x) for p in pred.required) and getattr(x, "rule", "") not in pred.consequences]
    if not pred.required:
        failures.append(f"{implementation}: the prediction names no problem ({pred.reason})")
    return failures + unexplained
