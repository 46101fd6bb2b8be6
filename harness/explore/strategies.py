"""Configurations within real bounds, as ``RunSpec`` values, decoded from one drawn byte string.

The explorer draws one fixed-length byte string per configuration (``search.drawn_strings``: seeded,
uniform bytes); ``decode`` reads it byte by byte, one decision per byte, and byte 0 always takes the
first, simplest option. So a configuration costs one string, and shrinking works axis by axis
(``search.shrunk`` moves each byte towards 0, each decision towards its simplest option).

Most draws are **valid by construction** (the spec accepts and plans them); a deliberate
share (``REFUSAL_SHARE``) are **refusals**: a valid configuration with one to three of the
spec's rules broken on purpose (``BREAKERS``: every startup rule of FEATURE 3, the
estimation refusals of FEATURE 5-6, the card refusals of FEATURE 4), so that where several
are broken the implementation must name the first in the spec's order (a quantized cache
with a later worker-side rule, say).

A valid configuration has one of these shapes:

- ``node``: the ranks on one node or, with dp x tp above its cards, replicas on several nodes;
  a shipped link matrix (the interleaved two-switch one most often) or a random PCIe tree (cards
  under switches under host bridges under sockets, NVLink inside a switch or not); the default
  cards or a permutation of them (random, reversed, neighbours swapped: card order unlike rank
  order);
- ``tp_across_nodes``: tp 8 on 4-card nodes, so each TP group spans two nodes (links across
  nodes are the network's, not the card matrix's);
- ``replicas_differ``: dp 2 x tp 4 on 8 cards whose two halves are wired differently (one half
  switch-blocked, the other interleaved, say), so the replicas' best split groups differ;
- ``recorded``: a shipped model at a layout with a recorded uniform baseline (TC-06).

The model: MLA (DeepSeek-V3 like), MLA with a DSA indexer (V3.2, GLM-5), hybrid linear +
full attention (Qwen3.5, Qwen3-Next; ``layer_types`` as a repeated pattern with a few layers
changed, both full spellings, or ``full_attention_interval``), and dense GQA where the
split is off; 1 to 128 layers; an MTP draft of 1 to 3 layers at the target's TP or at TP 1, the
target's shape or (at TP 1) its own, its own DSA indexer included (an indexed draft beside an
unindexed target, or the reverse).
The cache: block size, every KV cache and indexer dtype the hardware supports, speculative
tokens, the SSM dtype, prefix cache on or off with ``max_seqs_per_batch`` 0 to 16 (0 without
prefix cache too), explicit linear-state slots, and (split off) host cache, sleep mode,
xtensor. The budget is aimed at 1 to 8 blocks after the linear-state reservation, with any slack,
none, or one byte short of one block more; the reserve per rank is the profile's, or (in whole
MiB) the most at which every card holds its plan, one MiB less, or (a refusal) one MiB more.

Refusals lean on three corners (``CORNERS``): an s that divides the world but not the attention
TP size at dp 2 with a later master rule (host cache, cp, KV split); the int8 indexer cache with
only the draft indexed; a card that only the draft's KV overfills.

Bounds stay small where the real value only scales memory: the TC matrix runs the real
defaults; the explorer runs the shapes around them. Linear key and value head dims are equal,
as on every real model: where they differ upstream's conv state departs from its own
estimate (FEATURE 7), which no check here models.
"""

from __future__ import annotations

import hashlib
from dataclasses import replace
from functools import cache, lru_cache
from typing import Callable, Optional, Sequence

from contract.flags_and_topology import load_topology
from contract.specs import (
    FULL_ATTENTION_TYPES,
    INDEXER_CACHE_DTYPES,
    QUANTIZED_KV_CACHE_DTYPES,
    CacheSpec,
    HardwareProfile,
    LayerwiseFlags,
    ModelSpec,
    ParallelSpec,
    RunSpec,
    Topology,
)
from contract.units import MIB
from harness import oracle
from harness.paths import TOPOLOGY_DIR
from harness.suites import baseline
from harness.suites.case import resolve

MAX_LAYERS = 128
DRAWN_BYTES = 64
"""Bytes drawn per configuration: what 99 in 100 decodings read (past the end every byte reads as 0); one BLAKE2b
digest (``search.drawn_string``: at most 64 bytes)."""
FIXTURES = {8: ("cpu_sim_8", "pcie_2switch_8", "pcie_2switch_8_interleaved", "nvlink_8",
                "pcie_2switch_8_interleaved"), 4: ("bi_v100_pix4",)}
"""Shipped link matrices (``conf/topology``) by card count (the interleaved two-switch one twice: with a
permuted placement its best groups follow the cards, not the ranks)."""
RANDOM_TOPOLOGY_PREFIX = "explore_links_"
SHAPES = ("node", "node", "tp_across_nodes", "replicas_differ", "node", "recorded")
"""The valid shapes, a repeated entry more likely."""
REFUSAL_SHARE = (False, False, False, True)
"""One draw in four is a deliberate refusal."""
LAYER_KINDS = ("linear_attention",) + FULL_ATTENTION_TYPES


class Choices:
    """Decisions read from a byte string, one byte each; 0 (and every byte past the end) takes the first
    option, so shrinking a byte towards 0 simplifies its decision."""

    __slots__ = ("data", "at")

    def __init__(self, data: bytes):
        self.data, self.at = data, 0

    def byte(self) -> int:
        at = self.at
        self.at = at + 1
        return self.data[at] if at < len(self.data) else 0

    def pick(self, options: Sequence):
        at = self.at  # (``byte`` inlined: some 26 picks a draw)
        self.at = at + 1
        return options[(self.data[at] if at < len(self.data) else 0) % len(options)]

    def number(self, low: int, high: int) -> int:
        """``low`` to ``high`` (at most 256 values)."""
        return low + self.byte() % (high - low + 1)

    def wide(self, high: int) -> int:
        """0 to ``high`` from two bytes."""
        return (self.byte() << 8 | self.byte()) % (high + 1)

    def flag(self, one_in: int = 2) -> bool:
        """True about once in ``one_in`` (False at 0)."""
        return self.byte() % one_in == one_in - 1


# ---- hardware ---------------------------------------------------------------------------


@cache
def base_hardware(name: str) -> HardwareProfile:
    """The shipped hardware profile ``conf/hardware/<name>.yaml`` (composed once per process)."""
    return resolve((f"hardware={name}",)).run.hardware


@cache
def fixture_topology(name: str) -> Topology:
    return load_topology(name, TOPOLOGY_DIR)


@cache
def random_topology(links: tuple) -> Topology:
    """A symmetric link matrix from ``((i, j), code)`` pairs for i < j; named by its content."""
    codes = dict(links)
    n = 1 + max(j for _, j in codes)
    rows = tuple(tuple("X" if i == j else codes[(min(i, j), max(i, j))] for j in range(n)) for i in range(n))
    digest = hashlib.sha256(repr(rows).encode()).hexdigest()[:10]
    return Topology(cards=tuple(f"GPU{i}" for i in range(n)), links=rows, name=RANDOM_TOPOLOGY_PREFIX + digest)


def tree_links(switch: Sequence[int], bridge: Sequence[int], socket: Sequence[int], nvlink: bool) -> tuple:
    """Links of cards hung off a PCIe tree: card -> switch -> host bridge -> socket. Same switch:
    PIX (NV2 with NVLink between them), same bridge: PXB, same socket: NODE, else SYS."""
    out = []
    for i in range(len(switch)):
        for j in range(i + 1, len(switch)):
            if switch[i] == switch[j]:
                code = "NV2" if nvlink else "PIX"
            elif bridge[switch[i]] == bridge[switch[j]]:
                code = "PXB"
            elif socket[bridge[switch[i]]] == socket[bridge[switch[j]]]:
                code = "NODE"
            else:
                code = "SYS"
            out.append(((i, j), code))
    return tuple(out)


def _bridges_and_sockets(c: Choices, switches: int) -> tuple[list, list]:
    """Host bridges over the switches (one, pairs, one each) and their sockets (one, or two)."""
    kind = c.pick(("one", "pairs", "each"))
    bridge = [0 if kind == "one" else (s // 2 if kind == "pairs" else s) for s in range(switches)]
    other = c.number(0, 1)
    return bridge, [0 if b < max(1, switches // 2) else other for b in range(switches)]


def tree_topology(c: Choices, cards: int) -> Topology:
    """A random PCIe tree of ``cards`` cards: 1 to 4 switches, cards in blocks, interleaved or anywhere."""
    switches = c.number(1, 4)
    mode = c.pick(("blocks", "interleaved", "any"))
    if mode == "any":
        switch = [c.number(0, switches - 1) for _ in range(cards)]
    else:
        switch = [k * switches // cards if mode == "blocks" else k % switches for k in range(cards)]
    bridge, socket = _bridges_and_sockets(c, 4)
    return random_topology(tree_links(switch, bridge, socket, c.flag()))


HALF_PATTERNS = ((0, 0, 1, 1), (0, 1, 0, 1), (0, 1, 1, 0))
"""Switches of four cards: blocked, interleaved, outer pairs: each gives other best pairs."""


def halves_topology(c: Choices) -> Topology:
    """8 cards whose halves (cards 0-3 and 4-7) hang off their own two switches in different patterns, so a
    4-rank TP group on each half has other best pairs."""
    first = c.number(0, 2)
    second = (first + c.number(1, 2)) % 3
    switch = [*HALF_PATTERNS[first], *(2 + s for s in HALF_PATTERNS[second])]
    bridge, socket = _bridges_and_sockets(c, 4)
    return random_topology(tree_links(switch, bridge, socket, c.flag()))


def hardware_with(c: Choices, cards: int, *, profile: str = "") -> HardwareProfile:
    """The cpu profile (or ``profile``) with ``cards`` cards per node: its default matrix, a shipped one
    or a random tree."""
    hw = base_hardware(profile or ("cpu" if cards == 8 or c.flag() else "bi_v100"))
    if hw.name == "bi_v100":
        return hw if c.flag() else hardware_of(hw.name, hw.num_cards, tree_topology(c, 4))
    kind = c.pick(("default", "fixture", "random")) if cards == 8 else c.pick(("fixture", "random"))
    if kind == "default":
        return hw
    topology = fixture_topology(c.pick(FIXTURES[cards])) if kind == "fixture" else tree_topology(c, cards)
    return hardware_of(hw.name, cards, topology)


@lru_cache(maxsize=1024)
def hardware_of(name: str, cards: int, topology: Topology) -> HardwareProfile:
    """The shipped profile ``name`` with ``cards`` cards and ``topology``, one object per distinct arguments (the
    topologies are kept objects): the draws that share a matrix share their hardware, made and hashed once."""
    return replace(base_hardware(name), num_cards=cards, topology=topology)


# ---- model ------------------------------------------------------------------------------


def layer_types(c: Choices, n: int) -> tuple[str, ...]:
    """``layer_types`` of n layers: a pattern of 1 to 8 kinds repeated (real hybrids repeat one), then up to
    three layers changed anywhere (irregular models, none or all full layers)."""
    pattern = [c.pick(LAYER_KINDS) for _ in range(c.number(1, 8))]
    kinds = [pattern[i % len(pattern)] for i in range(n)]
    for _ in range(c.number(0, 3)):
        kinds[c.number(0, n - 1) if n <= 256 else 0] = c.pick(LAYER_KINDS)
    return tuple(kinds)


def model(c: Choices, kind: str) -> ModelSpec:
    """A synthetic model of ``kind``: ``mla``, ``dsa`` (MLA + indexer), ``hybrid``, ``hybrid_indexer``
    (refused) or ``gqa`` (a dense model no split supports)."""
    n = c.number(1, MAX_LAYERS) if c.flag() else c.number(1, 6)  # few layers often: fewer full than s
    values = dict(name=f"explore_{kind}", num_hidden_layers=n, dtype=c.pick(("bfloat16", "float16", "float32")))
    if kind in ("mla", "dsa"):
        values.update(attention="mla", kv_lora_rank=c.pick((512, 64, 128, 256)), qk_rope_head_dim=c.pick((64, 0, 32)),
                      model_type="deepseek_v3" if kind == "mla" else c.pick(("deepseek_v32", "glm_moe_dsa")))
    else:
        values.update(attention="gqa", num_key_value_heads=c.pick((2, 1, 4, 8, 16)), head_dim=c.pick((128, 64, 256)))
    if kind in ("dsa", "hybrid_indexer"):
        values.update(index_n_heads=c.pick((64, 32)), index_head_dim=c.pick((128, 64)))
    if kind == "gqa":
        values["model_type"] = "llama"
    elif kind.startswith("hybrid"):
        head_dim = c.pick((128, 64))  # key = value head dim, as on every real model (FEATURE 7)
        values.update(model_type=c.pick(("qwen3_5_moe", "qwen3_next")), linear_num_key_heads=c.pick((16, 4, 8)),
                      linear_num_value_heads=c.pick((32, 8, 16)), linear_key_head_dim=head_dim,
                      linear_value_head_dim=head_dim, linear_conv_kernel_dim=c.pick((4, 2, 3)),
                      mamba_ssm_dtype=c.pick((None, "float32", "bfloat16", "float16")))
        if c.flag():
            values["layer_types"] = layer_types(c, n)
        else:
            values["full_attention_interval"] = c.number(1, 8)
    return ModelSpec(**values)


def with_a_full_layer(m: ModelSpec) -> ModelSpec:
    """``m``, or ``m`` with its last layer full attention when it has none (nothing to split: refused)."""
    if oracle.expected_full_layers(m):
        return m
    if m.layer_types:
        return replace(m, layer_types=m.layer_types[:-1] + ("full_attention",))
    return replace(m, full_attention_interval=1)


def draft(c: Choices, target: ModelSpec):
    """None, or an MTP draft of full-attention layers: the target's shape, or (with its body at TP 1, where
    its slot is not compared with the target's) a shape of its own, its own DSA indexer included: an
    indexed draft on an unindexed target (DeepSeek-V3.2's MTP beside a plain MLA target) or the reverse,
    where a rule the spec applies to both engines shows whether a port applies it to the target alone."""
    if not c.flag():
        return None
    layers = c.number(1, 3)
    body_tp1 = c.flag()
    values = dict(name="explore_mtp", model_type=target.model_type, dtype=target.dtype, num_hidden_layers=layers,
                  attention=target.attention, body_tp1=body_tp1, num_nextn_predict_layers=c.pick((0, layers)))
    own = body_tp1 and c.flag()
    if target.attention == "mla":
        values.update(kv_lora_rank=c.pick((512, 128)) if own else target.kv_lora_rank,
                      qk_rope_head_dim=64 if own else target.qk_rope_head_dim)
        heads, head_dim = own_indexer(c, target) if own else (target.index_n_heads, target.index_head_dim)
        values.update(index_n_heads=heads, index_head_dim=head_dim)
    else:
        values.update(num_key_value_heads=c.pick((2, 8)) if own else target.num_key_value_heads,
                      head_dim=c.pick((128, 256)) if own else target.head_dim)
    return ModelSpec(**values)


def target_shaped_draft(target: ModelSpec) -> ModelSpec:
    """A one-layer MTP draft of the target's own shape, at its TP."""
    shape = (dict(kv_lora_rank=target.kv_lora_rank, qk_rope_head_dim=target.qk_rope_head_dim,
                  index_n_heads=target.index_n_heads, index_head_dim=target.index_head_dim)
             if target.attention == "mla" else dict(num_key_value_heads=target.num_key_value_heads,
                                                      head_dim=target.head_dim))
    return ModelSpec(name="explore_mtp", model_type=target.model_type, dtype=target.dtype, num_hidden_layers=1,
                     attention=target.attention, **shape)


def own_indexer(c: Choices, target: ModelSpec) -> tuple[int, int]:
    """(index_n_heads, index_head_dim) of a draft of its own: unlike the target's more often than not (an
    indexer where the target has none, none where it has one), else the target's."""
    unlike = (0, 0) if oracle.expected_indexer(target) else (c.pick((64, 32)), c.pick((128, 64)))
    return c.pick((unlike, unlike, (target.index_n_heads, target.index_head_dim)))


# ---- layout ------------------------------------------------------------------------------


def divisors_above_one(tp: int) -> tuple[int, ...]:
    return tuple(s for s in (2, 4, 8) if tp % s == 0)


PLACEMENTS = ("default", "default", "permuted", "reversed", "pairs_swapped", "permuted")
"""How ranks map to a node's cards: rank % cards, or a permutation of the cards (a random one, reversed, or
neighbours swapped): card order unlike rank order, where a group search that walks cards in matrix order
and one that walks ranks part."""


def placement(c: Choices, world: int, cards: int):
    """None (rank % cards), or a permutation of each node's cards. (Two ranks on one card overfill it on
    every shipped profile, whose reserve is per rank: those are refusals, ``BREAKERS``.)"""
    kind = c.pick(PLACEMENTS)
    if kind == "default":
        return None
    if kind == "reversed":
        perm = list(range(cards))[::-1]
    elif kind == "pairs_swapped":
        perm = [k ^ 1 if k ^ 1 < cards else k for k in range(cards)]
    else:
        perm = permutation(c, cards)
    return tuple(perm[r % cards] for r in range(world))


def permutation(c: Choices, n: int) -> list[int]:
    perm = list(range(n))
    for i in range(n - 1, 0, -1):  # Fisher-Yates from the drawn bytes
        j = c.number(0, i)
        perm[i], perm[j] = perm[j], perm[i]
    return perm


def layout(c: Choices, shape: str, split: bool):
    """(parallel, hardware, layerwise flags, placement) of a valid ``shape``; ``split``: an active split."""
    if shape == "tp_across_nodes":
        tp, dp = 8, c.pick((1, 2))
        hw = hardware_with(c, 4)
    elif shape == "replicas_differ":
        tp, dp = 4, 2
        hw = hardware_of("cpu", 8, halves_topology(c))
    else:
        hw = hardware_with(c, c.pick((8, 4)))
        tp, dp = c.pick((4, 1, 2, 8)), c.pick((1, 2))
    dividing = divisors_above_one(tp)
    if split and not dividing:
        tp = 2 * tp
        dividing = divisors_above_one(tp)
    if split:
        s = c.pick((2, 2, 2, 4)) if shape == "replicas_differ" else c.pick(dividing)
        flags = LayerwiseFlags(enable=True, split_size=s)
    elif c.flag(4):  # s = 1
        flags = LayerwiseFlags(enable=True, split_size=1)
    else:  # the flag off, at any s
        flags = LayerwiseFlags(enable=False, split_size=c.pick((1, *dividing)))
    world = dp * tp
    return (ParallelSpec(world_size=world, dp_size=dp), hw, flags,
            placement(c, world, hw.num_cards))


# ---- cache and budget --------------------------------------------------------------------

SEQUENCES = ((4, True), (0, False), (1, True), (16, False), (0, True), (2, False))
"""(max_seqs_per_batch, enable_prefix_cache): 0 sequences without prefix cache reserves the two padding
slots alone."""


def cache_options(c: Choices, hw: HardwareProfile, *, split: bool, blocks: int) -> CacheSpec:
    """Every cache option but the budget, valid on ``hw``: quantized caches where the hardware has them;
    host cache, sleep mode and xtensor only without a split; explicit linear-state slots up to ``blocks``."""
    quantized = oracle.hardware_quantized_kv_dtypes(hw)
    max_seqs, prefix = c.pick(SEQUENCES)
    rare = c.pick(((),) * 12 + ((("host_blocks_factor", 2.0),), (("enable_sleep_mode", True),),
                                 (("enable_xtensor", True),))) if not split else ()
    return CacheSpec(
        block_size=c.pick((16, 1, 2, 8, 64, 128)),
        kv_cache_dtype=c.pick(("auto", *quantized)),
        indexer_cache_dtype=c.pick(INDEXER_CACHE_DTYPES) if oracle.hardware_int8_indexer_cache(hw) else "auto",
        max_seqs_per_batch=max_seqs, enable_prefix_cache=prefix,
        max_linear_state_cache_slots=min(c.pick((0, 0, 0, 1, 2)), blocks),
        num_speculative_tokens=c.pick((0, 1, 2, 3)), **dict(rare))


def aimed_budget_bytes(run: RunSpec, blocks: int, slack: int) -> int:
    """A per-rank budget leaving room for about ``blocks`` uniform blocks (target + draft) after the
    linear-state reservation, which itself grows with the budget (three fixed-point steps)."""
    tp = max(1, oracle.attn_tp_size(run))
    per_block = oracle.expected_full_bytes_per_block(run.model, run.cache, tp)
    if run.draft is not None:
        per_block += oracle.expected_draft_bytes_per_block(run)  # (D reads no budget: asked of the run itself)
    want = blocks * per_block + slack % max(1, per_block)
    budget = max(1, want)
    for _ in range(3):
        aimed = max(1, want + oracle.expected_linear_state_bytes(run.model, run.cache, tp, budget))
        if aimed == budget:  # a fixed point: the steps left would give it again (a model without linear layers: at once)
            break
        budget = aimed
    return budget


def with_budget(run: RunSpec, blocks: int, slack: int) -> RunSpec:
    return replace(run, cache=replace(run.cache, kv_budget_bytes=aimed_budget_bytes(run, blocks, slack)))


def slack(c: Choices) -> int:
    """Bytes past the aimed blocks: any (0 to 2^16, modulo one block), none (exactly the blocks), or one
    byte short of one block more: the budget on either side of where the block count flips."""
    kind = c.pick(("any", "exact", "short"))
    return c.wide(2**16) if kind == "any" else (0 if kind == "exact" else -1)


RESERVES_FITTING = (None, None, 0, -1)
"""A card's reserve (whole MiB, as a hardware profile gives it): the profile's (twice as likely); the most
that still fits every card's plan (target + draft KV plus one reserve per rank); one MiB less."""
RESERVES_OVER = (None, 0, -1, 1)
"""... and (a refusal) one MiB more than fits: a card check that leaves out a part of a card's plan of a MiB
or more (the draft's KV, a second rank) accepts what the spec refuses."""
DRAFT_DECIDES_BYTES = 2 * MIB
"""The draft KV per rank that ``card_full_with_the_draft`` aims at: above the one MiB a reserve moves."""


def fitting_reserve_mib(run: RunSpec) -> Optional[int]:
    """The largest reserve per rank (whole MiB) at which every card holds its plan (the spec's bytes per
    card, target and draft), or None where the spec refuses or cannot plan the configuration."""
    if (oracle.expected_rejection(run) is not None or oracle.expected_estimation_rejection(run) is not None
            or oracle.expected_split_group_tuples(run) is None):  # (at a reserve that fits, no card is refused outright)
        return None
    ranks_on = oracle.expected_ranks_per_card(run)
    hbm = run.hardware.hbm_bytes_per_card
    fit = min((hbm - planned) // ranks_on[card] for card, planned in oracle.expected_card_bytes(run).items())
    return fit // MIB if fit >= 0 else None


def with_reserve(c: Choices, run: RunSpec, options: Sequence) -> RunSpec:
    """``run`` with the reserve per rank of ``options`` (``RESERVES_*``: MiB from the one that just fits)."""
    delta = c.pick(options)
    if delta is None:
        return run
    fit = fitting_reserve_mib(run)
    if fit is None or fit + delta < 0:
        return run
    return oracle.with_reserved_bytes_per_card(run, (fit + delta) * MIB)  # (the answers the reserve leaves alone kept)


def with_draft_deciding(c: Choices, run: RunSpec) -> RunSpec:
    """A budget whose blocks give the draft ``DRAFT_DECIDES_BYTES`` of KV per rank or more, and a reserve one
    MiB above the one that fits: the card overflows by less than the draft's KV."""
    per_block = oracle.expected_draft_bytes_per_block(run) if run.draft is not None else 0
    if per_block > 0:
        run = with_budget(run, -(-DRAFT_DECIDES_BYTES // per_block), 0)
    return with_reserve(c, run, (1,))


# ---- a valid configuration ---------------------------------------------------------------


def valid(c: Choices, *, split: bool = False, aimed: bool = True) -> RunSpec:
    """A configuration the spec accepts and plans (``split``: with an active split); ``aimed=False``: before its
    budget and reserve are aimed (a refusal's base, whose broken rules change what they would aim at)."""
    shape = c.pick(SHAPES[:-1] if split else SHAPES)
    if shape == "recorded":
        return recorded(c)
    if not split:
        split = c.pick((True, True, True, False))
    parallel, hw, flags, place = layout(c, shape, split)
    kind = c.pick(("mla", "dsa", "hybrid", "hybrid", "dsa") + (() if split else ("gqa",)))
    target = model(c, kind)
    if split:
        target = with_a_full_layer(target)
    blocks = c.pick((1, 2, 3, 5, 8))
    run = RunSpec(model=target, draft=draft(c, target), parallel=parallel, layerwise=flags, hardware=hw,
                  placement=place, cache=cache_options(c, hw, split=split, blocks=blocks))
    if not aimed:
        return run
    return with_reserve(c, repaired(with_budget(run, blocks, slack(c))), RESERVES_FITTING)


def repaired(run: RunSpec) -> RunSpec:
    """``run`` with what the aimed budget may miss made plannable: explicit linear-state slots above the
    cap dropped, a budget that holds no block after the linear state (the split's busiest rank can cost
    more per block than a uniform rank, the reservation grows with the budget) doubled, at most thrice."""
    for _ in range(3):
        rejection = oracle.expected_estimation_rejection(run)
        if rejection is None:
            break
        if rejection.field == "cache.max_linear_state_cache_slots":
            run = _cache(run, max_linear_state_cache_slots=0)
        elif rejection.field == "cache.kv_budget_bytes":
            run = _cache(run, kv_budget_bytes=2 * run.cache.kv_budget_bytes)
        else:
            break
    return run


# ---- refusals: a valid configuration with rules broken on purpose -------------------------


def _cache(run: RunSpec, **changes) -> RunSpec:
    return replace(run, cache=replace(run.cache, **changes))


def _bi_v100(run: RunSpec) -> RunSpec:
    """The run on the BI-V100 (no quantized cache, no int8 indexer), the default cards of its 4."""
    return replace(run, hardware=base_hardware("bi_v100"), placement=None)


def _indexed(c: Choices, run: RunSpec) -> RunSpec:
    """``run`` with an indexer somewhere: its own, an indexed target, or an indexed draft (``_indexed_draft``)."""
    if oracle.expected_indexer(run.model) or (run.draft is not None and oracle.expected_indexer(run.draft)):
        return run
    return replace(run, model=model(c, "dsa"), draft=None) if not c.flag() else _indexed_draft(c, run)


def _indexed_draft(c: Choices, run: RunSpec) -> RunSpec:
    """An indexed draft (its body at TP 1) beside an unindexed MLA target: the rules the spec applies to both
    engines (the int8 indexer cache) must see the draft's indexer."""
    target = with_a_full_layer(model(c, "mla"))
    mtp = ModelSpec(name="explore_mtp", model_type=target.model_type, dtype=target.dtype, num_hidden_layers=1,
                    attention="mla", kv_lora_rank=target.kv_lora_rank, qk_rope_head_dim=target.qk_rope_head_dim,
                    body_tp1=True, index_n_heads=c.pick((64, 32)), index_head_dim=c.pick((128, 64)))
    return replace(run, model=target, draft=mtp)


def _slot_larger_draft(c: Choices, run: RunSpec) -> RunSpec:
    """A draft at the target's TP whose slot is larger than the target's (FEATURE 6: refused)."""
    target = model(c, "mla")
    target = replace(target, kv_lora_rank=64, qk_rope_head_dim=0)
    mtp = ModelSpec(name="explore_mtp", model_type=target.model_type, dtype=target.dtype, num_hidden_layers=1,
                    attention="mla", kv_lora_rank=512, qk_rope_head_dim=64)
    return replace(run, model=with_a_full_layer(target), draft=mtp)


def _all_linear(c: Choices) -> ModelSpec:
    """A hybrid whose layers are all linear attention: nothing to split (FEATURE 6: refused)."""
    n = c.number(1, 6)
    return replace(model(c, "hybrid"), num_hidden_layers=n, layer_types=("linear_attention",) * n)


BREAKERS: dict[str, Callable[[Choices, RunSpec], RunSpec]] = {
    # FEATURE 3's startup rules, in the contracted order
    "split_size_below_one": lambda c, run: replace(run, layerwise=replace(run.layerwise, split_size=0)),
    "world_not_divisible": lambda c, run: replace(run, parallel=replace(run.parallel, world_size=run.parallel.world_size + 1),
                                                  placement=None),
    "model_type_unsupported": lambda c, run: replace(run, model=model(c, "gqa"), draft=None),
    "split_not_dividing_tp": lambda c, run: replace(run, layerwise=replace(run.layerwise, split_size=c.pick(
        (3, 2 * max(1, oracle.attn_tp_size(run)))))),
    "host_cache": lambda c, run: _cache(run, host_blocks_factor=2.0),
    "context_parallel": lambda c, run: replace(run, parallel=replace(run.parallel, cp_size=2,
                                                                     world_size=2 * run.parallel.world_size),
                                               placement=None),
    "kv_split": lambda c, run: replace(run, parallel=replace(run.parallel, kv_split_size=2)),
    "quantized_kv_cache": lambda c, run: _cache(_bi_v100(run), kv_cache_dtype=c.pick(QUANTIZED_KV_CACHE_DTYPES)),
    "int8_indexer_cache": lambda c, run: _cache(_indexed(c, _bi_v100(run)), indexer_cache_dtype="int8"),
    "int8_indexer_cache_of_the_draft": lambda c, run: _cache(_indexed_draft(c, _bi_v100(run)),
                                                             indexer_cache_dtype="int8"),
    "linear_with_indexer": lambda c, run: replace(run, model=with_a_full_layer(model(c, "hybrid_indexer")), draft=None),
    "sleep_mode": lambda c, run: _cache(run, enable_sleep_mode=True),
    "xtensor": lambda c, run: _cache(run, enable_xtensor=True),
    # FEATURE 5-6: cannot be planned
    "linear_slots_above_cap": lambda c, run: _cache(replace(run, model=with_a_full_layer(model(c, "hybrid"))),
                                                    max_linear_state_cache_slots=c.pick((1000, 100_000))),
    "draft_slot_larger": _slot_larger_draft,
    "no_full_layer": lambda c, run: replace(run, model=_all_linear(c), draft=None),
    # FEATURE 4: cards
    "split_group_on_one_card": lambda c, run: replace(run, placement=(0,) * run.parallel.world_size),
    "ranks_share_a_card": lambda c, run: replace(run, placement=tuple(
        (r % run.hardware.num_cards) // 2 for r in range(run.parallel.world_size))),
    "card_full_with_the_draft": lambda c, run: run if run.draft is not None else replace(
        run, draft=target_shaped_draft(run.model)),
}
"""Each breaks one rule of the spec on a valid configuration with an active split."""
AFTER_BUDGET = {
    "card_full_with_the_draft": with_draft_deciding,
    "no_block": lambda c, run: with_budget(run, 0, c.wide(2**16)),
    "card_overflow": lambda c, run: _cache(run, kv_budget_bytes=int(run.hardware.kv_budget_bytes * c.pick((1.1, 2.0)))),
}
"""Breakers of the budget itself, applied after it is aimed."""
MASTER_RULES = ("split_size_below_one", "world_not_divisible", "split_not_dividing_tp", "host_cache",
                "context_parallel", "kv_split")
LATER_WORKER_RULES = ("int8_indexer_cache", "linear_with_indexer", "sleep_mode", "xtensor")
BREAKERS["quantized_kv_cache_and_a_master_rule"] = lambda c, run: BREAKERS[c.pick(MASTER_RULES)](
    c, BREAKERS["quantized_kv_cache"](c, run))
BREAKERS["quantized_kv_cache_and_a_later_rule"] = lambda c, run: BREAKERS[c.pick(LATER_WORKER_RULES)](
    c, BREAKERS["quantized_kv_cache"](c, run))
"""The quantized cache's place in the order: after the master's rules, before the later worker-side ones."""
LATER_MASTER_RULES = ("host_cache", "context_parallel", "kv_split")


def _split_dividing_world_not_tp(c: Choices, run: RunSpec) -> RunSpec:
    """At dp 2 (at least), an s that divides the world but not the attention TP size, with a later master rule
    broken too: the TP rule comes first. (Alone, such an s is refused later by the split groups, naming the
    same field: only a later rule shows a port that checks s against the world size.)"""
    p = run.parallel
    if p.dp_size == 1:
        p = replace(p, dp_size=2, world_size=2 * p.world_size)
    tp = p.world_size // (p.dp_size * p.cp_size)
    s = c.pick(tuple(d * tp for d in range(2, p.dp_size + 1) if p.dp_size % d == 0))
    run = replace(run, parallel=p, placement=None, layerwise=replace(run.layerwise, split_size=s))
    return BREAKERS[c.pick(LATER_MASTER_RULES)](c, run)


BREAKERS["split_dividing_world_not_tp_and_a_later_rule"] = _split_dividing_world_not_tp
CORNERS = ("split_dividing_world_not_tp_and_a_later_rule", "int8_indexer_cache_of_the_draft",
           "card_full_with_the_draft")
"""Drawn four times as often: the refusal order under dp, a rule of both engines seen through the draft, and a
card that only the draft's KV overfills (a reserve one MiB past the fit)."""
BREAKER_NAMES = tuple(dict.fromkeys((*BREAKERS, *AFTER_BUDGET))) + 3 * CORNERS


def refusal(c: Choices) -> RunSpec:
    """A valid configuration with an active split and one to three rules broken (the spec names the first); its
    budget and reserve aimed once, after the rules are broken (aimed before, the oracle's answers about the
    unbroken configuration were thrown away: about a tenth of an exploration's CPU)."""
    run = valid(c, split=True, aimed=False)
    names = [c.pick(BREAKER_NAMES) for _ in range(c.pick((1, 1, 2, 3)))]
    for name in names:
        if name in BREAKERS:
            run = BREAKERS[name](c, run)
    run = with_budget(run, c.pick((1, 2, 3, 5, 8)), slack(c))
    for name in names:
        if name in AFTER_BUDGET:
            run = AFTER_BUDGET[name](c, run)
    return run if "card_full_with_the_draft" in names else with_reserve(c, run, RESERVES_OVER)


# ---- shipped models with a recorded uniform baseline (TC-06) -----------------------------


@cache
def recorded_entries() -> tuple[tuple[str, str, str], ...]:
    """(model, parallel, hardware) of every entry of the recorded uniform baseline, in file order."""
    return tuple((e["model"], e["parallel"], e["hardware"]) for e in baseline.load()["entries"].values())


@cache
def recorded_run(model_name: str, parallel: str, hardware: str) -> RunSpec:
    """The shipped configuration a baseline entry was recorded for (composed once per process)."""
    return resolve((f"model={model_name}", f"parallel={parallel}", f"hardware={hardware}")).run


def recorded(c: Choices) -> RunSpec:
    """A shipped model at a recorded layout and budget, with any flags: TC-06 judges those that do not split."""
    run = recorded_run(*c.pick(recorded_entries()))
    tp = run.parallel.world_size // run.parallel.dp_size
    splits = run.model.model_type in oracle.SPLIT_MODEL_TYPES  # else only with the flag off
    return replace(run, layerwise=LayerwiseFlags(enable=splits and not c.flag(4),
                                                 split_size=c.pick((1, *divisors_above_one(tp)))))


# ---- the whole configuration -------------------------------------------------------------


DECODED_REMEMBERED = 4096
"""Byte strings whose configurations ``decode`` keeps: every implementation of CI's matrix explores from the same
seed, so each draws the same 1000 strings (and ``reach``'s test draws them again)."""


@lru_cache(maxsize=DECODED_REMEMBERED)
def decode(data: bytes) -> RunSpec:
    """The configuration a drawn byte string names: valid, or (one in four) a deliberate refusal. The same
    (frozen) configuration object for the same bytes, decoded once (``DECODED_REMEMBERED``)."""
    c = Choices(data)
    return refusal(c) if c.pick(REFUSAL_SHARE) else valid(c)


def bytes_read(data: bytes) -> int:
    """How many bytes of ``data`` decoding reads (the rest decide nothing)."""
    c = Choices(data)
    refusal(c) if c.pick(REFUSAL_SHARE) else valid(c)
    return min(c.at, len(data))
