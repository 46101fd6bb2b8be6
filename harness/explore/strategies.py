"""Hypothesis strategies: valid configurations within real bounds, as ``RunSpec`` values.

What is drawn (each axis shrinks towards its first, simplest value):

- a synthetic model: MLA (DeepSeek-V3 like), MLA with a DSA indexer (V3.2, GLM-5), dense
  GQA (the unsupported control), or hybrid linear + full attention (Qwen3.5, Qwen3-Next)
  whose layer kinds come from ``layer_types`` (a repeated pattern with a few layers changed;
  both full spellings, ``full_attention`` and ``attention``) or from ``full_attention_interval``; 1 to 128 layers; rarely a hybrid with
  an indexer (the spec refuses it);
- an MTP draft of one to three full-attention layers, its body at the target's TP or at TP 1;
- dp x cp x tp up to 16 ranks (rarely a world size dp * cp does not divide, cp 2, or a KV
  split), the enable flag and s (including 0, 3 and s > tp, which the spec refuses);
- block size, every KV cache dtype and indexer dtype, speculative tokens, the SSM dtype,
  prefix cache on/off, explicit linear-state slots, ``max_seqs_per_batch`` (0 too), rarely
  host cache, sleep mode or xtensor;
- the cpu or the BI-V100 profile, a shipped link matrix or a random PCIe tree (cards under
  switches under host bridges under sockets, NVLink inside a switch or not), the default card of
  each rank or a random placement (two ranks of a split group on one card: refused);
- a per-rank budget aimed at 0 to 8 blocks after the linear-state reservation, so a
  budget of one block and of none are drawn often.

Bounds stay small where the real value only scales memory (``max_seqs_per_batch`` up to 16):
the TC matrix runs the real defaults; the explorer runs the shapes around them. Linear key and
value head dims are equal, as on every real model: where they differ upstream's conv state departs
from its own estimate (FEATURE 7), which no check here models.
"""

from __future__ import annotations

import hashlib
from dataclasses import replace
from functools import cache, lru_cache

from hypothesis import strategies as st

from harness import oracle
from implementations.specs import (
    FULL_ATTENTION_TYPES,
    INDEXER_CACHE_DTYPES,
    KV_CACHE_DTYPES,
    CacheSpec,
    HardwareProfile,
    LayerwiseFlags,
    ModelSpec,
    ParallelSpec,
    RunSpec,
    Topology,
)

MAX_LAYERS = 128
HARDWARE = ("cpu", "bi_v100")
"""Hardware options drawn: the CPU simulation (every quantized cache) and the BI-V100 (none)."""
FIXTURES = {8: ("cpu_sim_8", "pcie_2switch_8", "pcie_2switch_8_interleaved", "nvlink_8"), 4: ("bi_v100_pix4",)}
"""Shipped link matrices (``conf/topology``) by card count."""
MODEL_KINDS = ("mla", "dsa", "hybrid", "hybrid", "gqa")
"""Repeated entries make a kind more likely; the indexer on a hybrid (refused) stays rare."""
RANDOM_TOPOLOGY_PREFIX = "explore_links_"


# Strategies are built once per distinct argument: building one per draw cost half of the drawing time.


@cache
def choice(choices: tuple) -> st.SearchStrategy:
    """``st.sampled_from``, shrinking towards the first choice."""
    return st.sampled_from(choices)


@cache
def integers(low: int, high: int) -> st.SearchStrategy:
    return st.integers(low, high)


@cache
def lists_of(element: st.SearchStrategy, size: int) -> st.SearchStrategy:
    return st.lists(element, min_size=size, max_size=size)


BOOLEANS = st.booleans()


@cache
def mostly(common: tuple, rare: tuple, weight: int = 6) -> st.SearchStrategy:
    """``common`` values ``weight`` times as likely as each ``rare`` one. The rare ones sit in the
    middle: Hypothesis favours the ends of a range, and shrinks towards the first value."""
    return st.sampled_from(common * (weight // 2) + rare + common * (weight - weight // 2))


@cache
def base_hardware(name: str) -> HardwareProfile:
    """The shipped hardware profile ``conf/hardware/<name>.yaml`` (composed once per process)."""
    from harness.suites.case import resolve

    return resolve((f"hardware={name}",)).run.hardware


@cache
def fixture_topology(name: str) -> Topology:
    from harness.paths import TOPOLOGY_DIR
    from implementations.formats import load_topology

    return load_topology(name, TOPOLOGY_DIR)


def random_topology(links: dict) -> Topology:
    """A symmetric link matrix from ``{(i, j): code}`` for i < j; named by its content."""
    n = 1 + max(j for _, j in links)
    rows = tuple(tuple("X" if i == j else links[(min(i, j), max(i, j))] for j in range(n)) for i in range(n))
    digest = hashlib.sha256(repr(rows).encode()).hexdigest()[:10]
    return Topology(cards=tuple(f"GPU{i}" for i in range(n)), links=rows, name=RANDOM_TOPOLOGY_PREFIX + digest)


def tree_links(switch: list, bridge: list, socket: list, nvlink: bool) -> dict:
    """Links of cards hung off a PCIe tree: card -> switch -> host bridge -> socket. Same switch:
    PIX (NV2 with NVLink between them), same bridge: PXB, same socket: NODE, else SYS."""
    out = {}
    for i in range(len(switch)):
        for j in range(i + 1, len(switch)):
            if switch[i] == switch[j]:
                out[(i, j)] = "NV2" if nvlink else "PIX"
            elif bridge[switch[i]] == bridge[switch[j]]:
                out[(i, j)] = "PXB"
            elif socket[bridge[switch[i]]] == socket[bridge[switch[j]]]:
                out[(i, j)] = "NODE"
            else:
                out[(i, j)] = "SYS"
    return out


# ---- model ------------------------------------------------------------------------------


@lru_cache(maxsize=256)  # one strategy per distinct argument, not one per draw
@st.composite
def models(draw) -> ModelSpec:
    kind = draw(mostly(MODEL_KINDS, ("hybrid_indexer",), 4))
    n = draw(integers(1, 6) if draw(BOOLEANS) else integers(1, MAX_LAYERS))  # few layers often: fewer full than s
    values = dict(name=f"explore_{kind}", num_hidden_layers=n,
                  dtype=draw(choice(("bfloat16", "float16", "float32"))))
    if kind in ("mla", "dsa"):
        values.update(attention="mla", kv_lora_rank=draw(choice((512, 64, 128, 256))),
                      qk_rope_head_dim=draw(choice((64, 0, 32))))
    else:
        values.update(attention="gqa", num_key_value_heads=draw(choice((2, 1, 4, 8, 16))),
                      head_dim=draw(choice((128, 64, 256))))
    if kind in ("dsa", "hybrid_indexer"):
        values.update(index_n_heads=draw(choice((64, 32))), index_head_dim=draw(choice((128, 64))))
    if kind == "mla":
        values["model_type"] = "deepseek_v3"
    elif kind == "dsa":
        values["model_type"] = draw(choice(("deepseek_v32", "glm_moe_dsa")))
    elif kind == "gqa":
        values["model_type"] = "llama"
    else:
        head_dim = draw(choice((128, 64)))  # key = value head dim, as on every real model (FEATURE 7)
        values.update(
            model_type=draw(choice(("qwen3_5_moe", "qwen3_next"))),
            linear_num_key_heads=draw(choice((16, 4, 8))),
            linear_num_value_heads=draw(choice((32, 8, 16))),
            linear_key_head_dim=head_dim,
            linear_value_head_dim=head_dim,
            linear_conv_kernel_dim=draw(choice((4, 2, 3))),
            mamba_ssm_dtype=draw(choice((None, "float32", "bfloat16", "float16"))),
        )
        if draw(BOOLEANS):
            values["layer_types"] = draw(layer_types(n))
        else:
            values["full_attention_interval"] = draw(integers(1, 8))
    return ModelSpec(**values)


LAYER_KINDS = ("linear_attention",) + FULL_ATTENTION_TYPES


@lru_cache(maxsize=256)  # one strategy per distinct argument, not one per draw
@st.composite
def layer_types(draw, n: int) -> tuple[str, ...]:
    """``layer_types`` of n layers: a drawn pattern of 1 to 8 kinds repeated (real hybrids repeat one),
    then up to three layers changed anywhere (irregular models, none or all full layers)."""
    pattern = draw(lists_of(choice(LAYER_KINDS), draw(integers(1, 8))))
    kinds = [pattern[i % len(pattern)] for i in range(n)]
    for _ in range(draw(integers(0, 3))):
        kinds[draw(integers(0, n - 1))] = draw(choice(LAYER_KINDS))
    return tuple(kinds)


@lru_cache(maxsize=256)  # one strategy per distinct argument, not one per draw
@st.composite
def drafts(draw, target: ModelSpec):
    """None, or an MTP draft of full-attention layers shaped like the target's (or drawn anew)."""
    if not draw(BOOLEANS):
        return None
    layers = draw(integers(1, 3))
    values = dict(name="explore_mtp", model_type=target.model_type, dtype=target.dtype, num_hidden_layers=layers,
                  attention=target.attention, body_tp1=draw(BOOLEANS),
                  num_nextn_predict_layers=draw(choice((0, layers))))
    same = draw(BOOLEANS)
    if target.attention == "mla":
        values.update(kv_lora_rank=target.kv_lora_rank if same else draw(choice((512, 128))),
                      qk_rope_head_dim=target.qk_rope_head_dim if same else 64,
                      index_n_heads=target.index_n_heads, index_head_dim=target.index_head_dim)
    else:
        values.update(num_key_value_heads=target.num_key_value_heads if same else draw(choice((2, 8))),
                      head_dim=target.head_dim if same else draw(choice((128, 256))))
    return ModelSpec(**values)


# ---- layout, cache, hardware -------------------------------------------------------------


@lru_cache(maxsize=256)  # one strategy per distinct argument, not one per draw
@st.composite
def parallels(draw) -> ParallelSpec:
    tp = draw(choice((4, 1, 2, 8)))
    dp = draw(choice((1, 2)))
    # one draw for the rare layouts the spec refuses when split: cp 2, a world dp * cp does not divide, KV split
    quirk = draw(mostly(("none",), ("cp2", "cp2", "world+1", "kv_split0", "kv_split2"), 16))
    cp = 2 if quirk == "cp2" else 1
    return ParallelSpec(world_size=dp * cp * tp + (quirk == "world+1"), dp_size=dp, cp_size=cp,
                        kv_split_size={"kv_split0": 0, "kv_split2": 2}.get(quirk, 1))


@lru_cache(maxsize=256)  # one strategy per distinct argument, not one per draw
@st.composite
def layerwise_flags(draw, attn_tp_size: int) -> LayerwiseFlags:
    """Mostly an s dividing the attention TP size; sometimes 1, or one the spec refuses (0, 3, s > tp)."""
    dividing = tuple(s for s in (2, 4, 8) if attn_tp_size % s == 0) or (1,)
    split = draw(mostly(dividing, (1, 0, 1, 3, 1, 16), 12))
    return LayerwiseFlags(enable=draw(mostly((True,), (False,), 4)), split_size=split)


@lru_cache(maxsize=256)  # one strategy per distinct argument, not one per draw
@st.composite
def caches(draw) -> CacheSpec:
    """Every cache option but the budget (``configs`` aims it at a few blocks)."""
    return CacheSpec(
        block_size=draw(choice((16, 1, 2, 8, 64, 128))),
        kv_cache_dtype=draw(choice(KV_CACHE_DTYPES)),
        indexer_cache_dtype=draw(choice(INDEXER_CACHE_DTYPES)),
        max_seqs_per_batch=draw(choice((4, 0, 1, 2, 16))),
        max_linear_state_cache_slots=draw(choice((0, 0, 1, 3))),
        enable_prefix_cache=draw(BOOLEANS),
        num_speculative_tokens=draw(choice((0, 1, 2, 3))),
        **dict(draw(RARE_CACHE_OPTIONS)),
    )


RARE_CACHE_OPTIONS = mostly(((),), ((("host_blocks_factor", 2.0),), (("enable_sleep_mode", True),),
                                    (("enable_xtensor", True),)), 24)
"""One draw for the cache options a split refuses (host cache, sleep mode, xtensor), each rare."""


@lru_cache(maxsize=256)  # one strategy per distinct argument, not one per draw
@st.composite
def hardware_profiles(draw) -> HardwareProfile:
    hw = base_hardware(draw(mostly(HARDWARE[:1], HARDWARE[1:], 8)))
    kind = draw(choice(("default", "fixture", "random")))
    if kind == "default":
        return hw
    cards = draw(choice((4, 8))) if hw.name == "cpu" else hw.num_cards
    if kind == "fixture":
        return replace(hw, num_cards=cards, topology=fixture_topology(draw(choice(FIXTURES[cards]))))
    switches = draw(integers(1, 4))
    mode = draw(choice(("blocks", "interleaved", "any")))
    if mode == "any":
        switch = draw(lists_of(integers(0, switches - 1), cards))
    else:
        switch = [c * switches // cards if mode == "blocks" else c % switches for c in range(cards)]
    bridges = draw(choice(("one", "pairs", "each")))  # host bridges over the switches: 1, 2 or one per switch
    bridge = [0 if bridges == "one" else (s // 2 if bridges == "pairs" else s) for s in range(4)]
    socket = [0, draw(integers(0, 1))]  # bridges 2 and 3 on the other socket, or the same
    socket = [0, 0, socket[1], socket[1]]
    links = tree_links(switch, bridge, socket, draw(BOOLEANS))
    return replace(hw, num_cards=cards, topology=random_topology(links))


@lru_cache(maxsize=256)  # one strategy per distinct argument, not one per draw
@st.composite
def placements(draw, world_size: int, num_cards: int):
    if draw(mostly((False,), (True,), 4)):
        return tuple(draw(lists_of(integers(0, num_cards - 1), world_size)))
    return None


# ---- the whole configuration -------------------------------------------------------------


def aimed_budget_bytes(run: RunSpec, blocks: int, slack: int) -> int:
    """A per-rank budget leaving room for about ``blocks`` uniform blocks (target + draft) after the
    linear-state reservation, which itself grows with the budget (three fixed-point steps)."""
    tp = max(1, oracle.attn_tp_size(run))
    per_block = oracle.expected_full_bytes_per_block(run.model, run.cache, tp)
    if run.draft is not None:
        per_block += oracle.expected_draft_bytes_per_block(replace(run, cache=replace(run.cache, kv_budget_bytes=1)))
    want = blocks * per_block + slack % max(1, per_block)
    budget = max(1, want)
    for _ in range(3):
        budget = max(1, want + oracle.expected_linear_state_bytes(run.model, run.cache, tp, budget))
    return budget


@lru_cache(maxsize=256)  # one strategy per distinct argument, not one per draw
@st.composite
def configs(draw) -> RunSpec:
    model = draw(models())
    parallel = draw(parallels())
    hardware = draw(hardware_profiles())
    run = RunSpec(model=model, draft=draw(drafts(model)), parallel=parallel, cache=draw(caches()),
                  layerwise=draw(layerwise_flags(max(1, parallel.world_size // (parallel.dp_size * parallel.cp_size)))), hardware=hardware,
                  placement=draw(placements(parallel.world_size, hardware.num_cards)))
    blocks = draw(choice((1, 2, 0, 3, 5, 8)))
    slack = draw(integers(0, 2**20))
    return replace(run, cache=replace(run.cache, kv_budget_bytes=aimed_budget_bytes(run, blocks, slack)))


# ---- shipped models with a recorded uniform baseline (TC-06) -----------------------------


@cache
def recorded_entries() -> tuple[tuple[str, str, str], ...]:
    """(model, parallel, hardware) of every entry of the recorded uniform baseline, in file order."""
    from harness.suites import baseline

    return tuple((e["model"], e["parallel"], e["hardware"]) for e in baseline.load()["entries"].values())


@cache
def recorded_run(model: str, parallel: str, hardware: str) -> RunSpec:
    """The shipped configuration a baseline entry was recorded for (composed once per process)."""
    from harness.suites.case import resolve

    return resolve((f"model={model}", f"parallel={parallel}", f"hardware={hardware}")).run


@lru_cache(maxsize=256)  # one strategy per distinct argument, not one per draw
@st.composite
def recorded_configs(draw) -> RunSpec:
    """A shipped model at a recorded layout and budget, with any flags: TC-06 judges those that do not split."""
    run = recorded_run(*draw(choice(recorded_entries())))
    return replace(run, layerwise=draw(layerwise_flags(run.parallel.world_size // run.parallel.dp_size)))


@cache
def explorable() -> st.SearchStrategy:
    """Mostly synthetic configurations; one in five a recorded shipped one."""
    return st.sampled_from(("synthetic",) * 4 + ("recorded",)).flatmap(
        lambda kind: configs() if kind == "synthetic" else recorded_configs())
