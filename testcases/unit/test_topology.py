"""ILU topology mapping (FEATURE section 4 Topology, section 9).

Expected groupings come from the topology descriptions (which cards share a PCIe
switch) and FEATURE section 4; bottlenecks are recomputed here with this file's
own ranking of link codes and a brute-force search, not with the module's helpers.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contract import topology_text
from contract.errors import ConfigError, PlanError, TopologyError
from contract.specs import HardwareProfile, ModelSpec, ParallelSpec, RunSpec, Topology
from harness.paths import TOPOLOGY_DIR
from implementations.reference import topology as topo

pytestmark = pytest.mark.unit

FIXTURES = Path(__file__).parent / "fixtures"
CONF_TOPOLOGY = TOPOLOGY_DIR


def load_fixture(path_or_name: str) -> Topology:
    """A topology by path, or by name from ``conf/topology`` (the harness's fixtures folder)."""
    return topology_text.load_topology(path_or_name, CONF_TOPOLOGY)

# This file's own ranking (FEATURE section 4 / nvidia-smi legend), worst first.
PCIE_WORST_FIRST = ["NET", "SYS", "NODE", "PHB", "PXB", "PIX"]


def rank_of(code: str) -> float:
    if code.startswith("NV"):
        return 100 + int(code[2:])
    return PCIE_WORST_FIRST.index(code)


def where_of(rank: int, num_cards: int, placement: tuple[int, ...]) -> tuple[int, int]:
    return rank // num_cards, placement[rank]


def code_between(links, num_cards, placement, a, b) -> str:
    (na, ca), (nb, cb) = where_of(a, num_cards, placement), where_of(b, num_cards, placement)
    return "NET" if na != nb else links[ca][cb]


def bottleneck(groups, links, num_cards, placement) -> float:
    return min(rank_of(code_between(links, num_cards, placement, a, b))
               for g in groups for a, b in itertools.combinations(g, 2))


def shares_card(groups, num_cards, placement) -> bool:
    return any(len({where_of(r, num_cards, placement) for r in g}) < len(g) for g in groups)


def all_groupings(ranks: tuple[int, ...], s: int):
    if not ranks:
        yield []
        return
    first, rest = ranks[0], ranks[1:]
    for mates in itertools.combinations(rest, s - 1):
        left = tuple(r for r in rest if r not in mates)
        for tail in all_groupings(left, s):
            yield [(first, *mates)] + tail


def brute_best(ranks, s, links, num_cards, placement):
    """Best bottleneck over groupings that keep each group on distinct cards (None: no such grouping)."""
    scores = [bottleneck(g, links, num_cards, placement) for g in all_groupings(ranks, s)
              if not shares_card(g, num_cards, placement)]
    return max(scores, default=None)


def consecutive(ranks, s):
    return tuple(tuple(ranks[i:i + s]) for i in range(0, len(ranks), s))


def key(groups, links, num_cards, placement) -> tuple:
    """FEATURE 4 keys (1) and (2): each group's worst link, sorted from worst to best (larger is better)."""
    return tuple(sorted(bottleneck([g], links, num_cards, placement) for g in groups))


def brute_spec_grouping(ranks, s, links, num_cards, placement):
    """FEATURE 4 by enumeration: the best key; then consecutive if among the best, else the first grouping
    (``all_groupings`` yields them in lexicographic order: groups listed by their smallest rank)."""
    valid = [tuple(g) for g in all_groupings(ranks, s) if not shares_card(g, num_cards, placement)]
    if not valid:
        return None
    best = max(key(g, links, num_cards, placement) for g in valid)
    among = [g for g in valid if key(g, links, num_cards, placement) == best]
    upstream = consecutive(ranks, s)
    return upstream if upstream in among else among[0]


def make_run(topology: Topology, *, num_cards: int, world: int, placement=None) -> RunSpec:
    model = ModelSpec(name="toy", model_type="deepseek_v32", num_hidden_layers=4, attention="mla",
                      kv_lora_rank=512, qk_rope_head_dim=64)
    hw = HardwareProfile(name="test", device_type="cpu", kv_layout="heads_major", num_cards=num_cards,
                         hbm_bytes_per_card=1 << 30, reserved_bytes_per_card=0, topology=topology)
    return RunSpec(model=model, parallel=ParallelSpec(world_size=world), hardware=hw, placement=placement)


def groups_for(name: str, tp: int, s: int, placement=None):
    t = load_fixture(name)
    n = len(t.cards)
    where = topo.place_ranks(make_run(t, num_cards=n, world=tp, placement=placement))
    return t, where, topo.form_split_groups(tuple(range(tp)), s, where, t)


# ---------------------------------------------------------------- link codes


def test_link_score_order_matches_feature():
    order = ["X", "NV12", "NV4", "NV1", "PIX", "PXB", "PHB", "NODE", "SYS", "NET"]
    scores = [topo.link_score(c) for c in order]
    assert scores == sorted(scores, reverse=True) and len(set(scores)) == len(scores)


@pytest.mark.parametrize("code", ["PCI", "nv4", "NV", "NV0", "pix", "", "SOC"])
def test_link_score_rejects_unknown(code):
    with pytest.raises(TopologyError, match="PIX, PXB, PHB, NODE, SYS") as err:
        topo.link_score(code)
    assert err.value.field == "hardware.topology"


# ---------------------------------------------------------------- fixtures parse


def test_bi_v100_fixture_is_flat_pix4():
    t = load_fixture("bi_v100_pix4")
    assert t.cards == ("GPU0", "GPU1", "GPU2", "GPU3") and t.name == "bi_v100_pix4"
    for i, j in itertools.product(range(4), repeat=2):
        assert t.links[i][j] == ("X" if i == j else "PIX")


def test_bi_v100_yaml_twin_matches_text():
    txt = load_fixture(str(CONF_TOPOLOGY / "bi_v100_pix4.txt"))
    yml = load_fixture(str(CONF_TOPOLOGY / "bi_v100_pix4.yaml"))
    assert (yml.cards, yml.links, yml.name) == (txt.cards, txt.links, "bi_v100_pix4")


def test_two_switch_fixture_cells_nic_column_dropped():
    t = load_fixture("pcie_2switch_8")  # has ANSI escapes and a NIC0 row/column
    assert t.cards == tuple(f"GPU{i}" for i in range(8))
    assert (t.links[0][3], t.links[0][4], t.links[5][7], t.links[7][0], t.links[6][6]) == (
        "PIX", "SYS", "PIX", "SYS", "X")


def test_interleaved_fixture_cells():
    t = load_fixture("pcie_2switch_8_interleaved")
    for i, j in itertools.product(range(8), repeat=2):
        expected = "X" if i == j else "PIX" if i % 2 == j % 2 else "NODE"
        assert t.links[i][j] == expected, (i, j)


def test_nvlink_fixture_all_to_all():
    t = load_fixture("nvlink_8")
    assert len(t.cards) == 8
    assert {t.links[i][j] for i in range(8) for j in range(8) if i != j} == {"NV12"}


def test_nvlink_mesh_fixture_cells():
    t = load_fixture("nvlink_mesh_8")  # old format: mlx5_* columns, CPU Affinity only
    assert len(t.cards) == 8
    assert (t.links[0][3], t.links[1][4], t.links[2][6], t.links[7][4]) == ("NV2", "SYS", "NV1", "NV2")


def test_cpu_sim_yaml_is_flat_pix8():
    t = load_fixture("cpu_sim_8")
    assert len(t.cards) == 8 and t.links == topo.flat_topology(8).links


@pytest.mark.parametrize("path", sorted(p.name for p in CONF_TOPOLOGY.iterdir()))
def test_every_fixture_loads_square_symmetric(path):
    t = load_fixture(str(CONF_TOPOLOGY / path))
    n = len(t.cards)
    assert n >= 1 and len(t.links) == n and all(len(row) == n for row in t.links)
    for i, j in itertools.product(range(n), repeat=2):
        assert t.links[i][j] == t.links[j][i] and (t.links[i][j] == "X") == (i == j)


def test_parse_spaces_and_ansi_and_legend():
    text = ("\x1b[4m       GPU0    GPU1    NIC0    CPU Affinity    NUMA Affinity    GPU NUMA ID\x1b[0m\n"
            "GPU0     X      NV4     SYS     0-7     0     N/A\n"
            "GPU1    NV4      X      SYS     0-7     0     N/A\n"
            "NIC0    SYS     SYS      X\n\nLegend:\n\n  X    = Self\n  GPU0 is not a row here\n")
    t = topo.parse_topo_text(text, name="inline")
    assert t.cards == ("GPU0", "GPU1") and t.links == (("X", "NV4"), ("NV4", "X")) and t.name == "inline"


def test_flat_topology_shape():
    t = topo.flat_topology(3, "NODE")
    assert t.links == (("X", "NODE", "NODE"), ("NODE", "X", "NODE"), ("NODE", "NODE", "X"))
    with pytest.raises(TopologyError):
        topo.flat_topology(0)
    with pytest.raises(TopologyError):
        topo.flat_topology(2, "X")


# ---------------------------------------------------------------- malformed input


@pytest.mark.parametrize("fixture, fragments", [
    ("topology_bad_asymmetric.txt", ["symmetric", "GPU1->GPU2 is SYS", "GPU2->GPU1 is PIX"]),
    ("topology_bad_unknown_code.txt", ["'PCI'", "row GPU0, column GPU2", "PIX, PXB, PHB, NODE, SYS"]),
    ("topology_bad_nonsquare.txt", ["square", "row GPU1 has 2 link entries", "3 columns"]),
    ("topology_bad_missing_row.txt", ["square", "header cards GPU0 GPU1 GPU2", "rows GPU0 GPU1"]),
    ("topology_bad_no_diagonal.txt", ["exactly on the diagonal", "row GPU0, column GPU0: 'PIX'"]),
    ("topology_bad_empty.txt", ["no header row", "GPU0 GPU1"]),
    ("topology_bad_asymmetric.yaml", ["symmetric", "GPU0->GPU1 is PIX but GPU1->GPU0 is SYS"]),
    ("topology_bad_unsafe.yaml", ["not valid YAML"]),
    ("topology_bad_unknown_key.yaml", ["unknown keys: link", "allowed: name, description, cards, links"]),
])
def test_malformed_file_rejected_clearly(fixture, fragments):
    with pytest.raises(TopologyError) as err:
        load_fixture(str(FIXTURES / fixture))
    assert err.value.field == "hardware.topology"
    for fragment in fragments:
        assert fragment in str(err.value)


def test_header_missing_rejected():
    with pytest.raises(TopologyError, match="header"):
        topo.parse_topo_text("GPU0\t X \tPIX\nGPU1\tPIX\t X \n")


def test_extra_link_entry_rejected():
    with pytest.raises(TopologyError, match="square"):
        topo.parse_topo_text("\tGPU0\tGPU1\nGPU0\t X \tPIX\tPIX\nGPU1\tPIX\t X \n")


def test_missing_name_lists_available():
    with pytest.raises(TopologyError) as err:
        load_fixture("no_such_box")
    assert err.value.field == "hardware.topology"
    for name in ("bi_v100_pix4", "pcie_2switch_8", "nvlink_8", "cpu_sim_8"):
        assert name in str(err.value)


def test_wrong_card_count_vs_hardware():
    three = load_fixture(str(FIXTURES / "topology_bad_3cards.txt"))
    assert len(three.cards) == 3
    with pytest.raises(TopologyError) as err:
        topo.place_ranks(make_run(three, num_cards=4, world=4))
    assert err.value.field == "hardware.num_cards" and "(3: GPU0 GPU1 GPU2)" in str(err.value)


# ---------------------------------------------------------------- placement and links


def test_place_ranks_default_and_explicit():
    t = topo.flat_topology(4)
    assert topo.place_ranks(make_run(t, num_cards=4, world=8)) == (
        (0, 0), (0, 1), (0, 2), (0, 3), (1, 0), (1, 1), (1, 2), (1, 3))
    assert topo.place_ranks(make_run(t, num_cards=4, world=4, placement=(3, 2, 1, 0))) == (
        (0, 3), (0, 2), (0, 1), (0, 0))


@pytest.mark.parametrize("placement, fragment", [
    ((0, 1, 2), "4 entries"),
    ((0, 1, 2, 4), "rank 3 -> card 4"),
    ((0, -1, 2, 3), "rank 1 -> card -1"),
])
def test_place_ranks_bad_placement(placement, fragment):
    with pytest.raises(TopologyError) as err:
        topo.place_ranks(make_run(topo.flat_topology(4), num_cards=4, world=4, placement=placement))
    assert err.value.field == "placement" and fragment in str(err.value)


def test_link_same_node_cross_node_same_card():
    t = load_fixture("pcie_2switch_8")
    where = ((0, 0), (0, 5), (1, 0), (0, 0))
    assert topo.link(t, where, 0, 1) == "SYS"
    assert topo.link(t, where, 0, 2) == "NET"
    assert topo.link(t, where, 0, 3) == "X"


# ---------------------------------------------------------------- split groups on the fixtures


@pytest.mark.parametrize("name, tp, s", [
    *[("bi_v100_pix4", 4, s) for s in (2, 4)],
    *[(name, tp, s) for name in ("cpu_sim_8", "nvlink_8", "pcie_2switch_8")
      for tp, s in ((4, 2), (4, 4), (8, 2), (8, 4), (8, 8))],
])
def test_consecutive_kept_where_optimal(name, tp, s):
    _, _, groups = groups_for(name, tp, s)
    assert groups == consecutive(tuple(range(tp)), s)  # upstream's grouping (FEATURE section 4)


@pytest.mark.parametrize("s, expected", [
    (2, ((0, 2), (1, 3), (4, 6), (5, 7))),
    (4, ((0, 2, 4, 6), (1, 3, 5, 7))),
])
def test_interleaved_regrouped_on_switches(s, expected):
    t, where, groups = groups_for("pcie_2switch_8_interleaved", 8, s)
    assert groups == expected
    placement = tuple(range(8))
    assert bottleneck(groups, t.links, 8, placement) > bottleneck(consecutive(placement, s), t.links, 8, placement)


def test_nvlink_mesh_exact_search_reaches_optimum():
    t, _, groups = groups_for("nvlink_mesh_8", 8, 2)
    placement = tuple(range(8))
    assert sorted(r for g in groups for r in g) == list(range(8))
    best = brute_best(placement, 2, t.links, 8, placement)
    assert bottleneck(groups, t.links, 8, placement) == best == rank_of("NV2")


def test_split_size_one_and_bad_split_size():
    t = topo.flat_topology(4)
    where = topo.place_ranks(make_run(t, num_cards=4, world=4))
    assert topo.form_split_groups((0, 1, 2, 3), 1, where, t) == ((0,), (1,), (2,), (3,))
    for bad in (3, 0, -1):
        with pytest.raises(ConfigError) as err:
            topo.form_split_groups((0, 1, 2, 3), bad, where, t)
        assert err.value.field == "layerwise.split_size"


def test_two_ranks_on_one_card_are_never_paired():
    t = topo.flat_topology(4)
    where = topo.place_ranks(make_run(t, num_cards=4, world=4, placement=(0, 0, 1, 1)))
    groups = topo.form_split_groups((0, 1, 2, 3), 2, where, t)
    assert groups == ((0, 2), (1, 3))  # consecutive (0, 1) would put ranks 0 and 1 on card 0


@pytest.mark.parametrize("placement, s", [((0, 0, 0, 1), 2), ((0, 0, 1, 1), 4)])
def test_no_grouping_avoids_shared_card_raises(placement, s):
    t = topo.flat_topology(4)
    where = topo.place_ranks(make_run(t, num_cards=4, world=4, placement=placement))
    with pytest.raises(TopologyError, match="node 0 card 0 holds ranks") as err:
        topo.form_split_groups((0, 1, 2, 3), s, where, t)
    assert err.value.field == "placement"


# ---------------------------------------------------------------- check_cards


def test_check_cards_shared_card_in_group():
    where = ((0, 0), (0, 1), (0, 1), (0, 2))
    with pytest.raises(TopologyError, match="ranks 1 and 2 are both on node 0 card 1"):
        topo.check_cards(((0, 3), (1, 2)), where, {0: 1, 1: 1, 2: 1, 3: 1}, 100, 0)


def test_check_cards_memory():
    where = ((0, 0), (0, 1), (0, 0), (0, 1))  # ranks 0 and 2 share card 0, in different groups
    per_rank = {0: 30, 1: 10, 2: 10, 3: 10}
    topo.check_cards(((0, 1), (2, 3)), where, per_rank, hbm_bytes_per_card=100, reserved_bytes_per_card=30)
    # card 0: 30 + 10 + 2 * 30 = 100 fits exactly; one more byte does not
    with pytest.raises(PlanError) as err:
        topo.check_cards(((0, 1), (2, 3)), where, {**per_rank, 2: 11}, 100, 30)
    assert err.value.field == "hardware.reserved_bytes_per_card"
    assert "node 0 card 0 holds ranks [0, 2]" in str(err.value) and "101 B > 100 B" in str(err.value)


# ---------------------------------------------------------------- properties


@st.composite
def tree_boxes(draw, *, tp_choices=(2, 4, 8), share_cards=False):
    """A random two-level PCIe tree (switches under sockets), one or two nodes, random placement."""
    tp = draw(st.sampled_from(tp_choices))
    s = draw(st.sampled_from([d for d in range(2, tp + 1) if tp % d == 0]))
    nodes = draw(st.sampled_from([1, 2])) if tp >= 4 else 1
    num_cards = tp // nodes
    switch = draw(st.lists(st.integers(0, 3), min_size=num_cards, max_size=num_cards))
    socket_of = draw(st.lists(st.integers(0, 1), min_size=4, max_size=4))
    near = draw(st.sampled_from(["PXB", "PHB", "NODE"]))
    links = [["X" if i == j else "PIX" if switch[i] == switch[j]
              else near if socket_of[switch[i]] == socket_of[switch[j]] else "SYS"
              for j in range(num_cards)] for i in range(num_cards)]
    if share_cards:
        cards = st.integers(0, num_cards - 1)
        placement = tuple(draw(st.lists(cards, min_size=tp, max_size=tp)))
    else:
        placement = tuple(c for _ in range(nodes) for c in draw(st.permutations(range(num_cards))))
    return tp, s, num_cards, links, placement


def run_groups(tp, s, num_cards, links, placement):
    t = Topology(cards=tuple(f"GPU{i}" for i in range(num_cards)), links=tuple(map(tuple, links)))
    where = topo.place_ranks(make_run(t, num_cards=num_cards, world=tp, placement=placement))
    return topo.form_split_groups(tuple(range(tp)), s, where, t)


def assert_partition(groups, tp, s):
    assert sorted(r for g in groups for r in g) == list(range(tp))
    assert all(len(g) == s and list(g) == sorted(g) for g in groups)


@settings(max_examples=150, deadline=None)
@given(tree_boxes())
def test_property_tree_follows_the_grouping_key(box):
    tp, s, num_cards, links, placement = box
    groups = run_groups(*box)
    assert_partition(groups, tp, s)
    got = bottleneck(groups, links, num_cards, placement)
    upstream = consecutive(tuple(range(tp)), s)
    assert got >= bottleneck(upstream, links, num_cards, placement)
    assert got == brute_best(tuple(range(tp)), s, links, num_cards, placement)
    assert groups == brute_spec_grouping(tuple(range(tp)), s, links, num_cards, placement)
    if groups != upstream:
        assert key(groups, links, num_cards, placement) > key(upstream, links, num_cards, placement)


@settings(max_examples=100, deadline=None)
@given(tree_boxes(tp_choices=(2, 4, 6, 8), share_cards=True))
def test_property_shared_cards_valid_or_refused(box):
    tp, s, num_cards, links, placement = box
    best = brute_best(tuple(range(tp)), s, links, num_cards, placement)
    if best is None:
        with pytest.raises(TopologyError):
            run_groups(*box)
        return
    groups = run_groups(*box)
    assert_partition(groups, tp, s)
    assert not shares_card(groups, num_cards, placement)
    assert bottleneck(groups, links, num_cards, placement) == best


@st.composite
def mesh_boxes(draw, *, share_cards=False):
    """Arbitrary symmetric matrices (NVLink partial meshes): usually not a tree."""
    tp = draw(st.sampled_from([4, 6, 8]))
    s = draw(st.sampled_from([d for d in range(2, tp + 1) if tp % d == 0]))
    num_cards = draw(st.integers(tp // 2, tp)) if share_cards else tp
    codes = st.sampled_from(["NV1", "NV2", "NV4", "PIX", "PHB", "SYS"])
    links = [["X"] * num_cards for _ in range(num_cards)]
    for i, j in itertools.combinations(range(num_cards), 2):
        links[i][j] = links[j][i] = draw(codes)
    if share_cards:  # one node: every rank on one of num_cards cards, some cards doubled
        placement = tuple(draw(st.lists(st.integers(0, num_cards - 1), min_size=tp, max_size=tp)))
        return tp, s, num_cards, links, placement
    return tp, s, tp, links, tuple(range(tp))


@settings(max_examples=100, deadline=None)
@given(mesh_boxes())
def test_property_mesh_follows_the_grouping_key(box):
    tp, s, num_cards, links, placement = box
    groups = run_groups(*box)
    assert_partition(groups, tp, s)
    upstream = consecutive(tuple(range(tp)), s)
    got = bottleneck(groups, links, num_cards, placement)
    assert got == brute_best(tuple(range(tp)), s, links, num_cards, placement)
    assert groups == brute_spec_grouping(tuple(range(tp)), s, links, num_cards, placement)
    if groups != upstream:
        assert key(groups, links, num_cards, placement) > key(upstream, links, num_cards, placement)


@settings(max_examples=100, deadline=None)
@given(mesh_boxes(share_cards=True))
def test_property_mesh_shared_cards_valid_or_refused(box):
    tp, s, num_cards, links, placement = box
    best = brute_best(tuple(range(tp)), s, links, num_cards, placement)
    if best is None:
        with pytest.raises(TopologyError):
            run_groups(*box)
        return
    groups = run_groups(*box)
    assert_partition(groups, tp, s)
    assert not shares_card(groups, num_cards, placement)
    assert bottleneck(groups, links, num_cards, placement) == best


@settings(max_examples=30, deadline=None)
@given(tree_boxes(tp_choices=(16,)))
def test_property_large_tree_partition_not_worse(box):
    tp, s, num_cards, links, placement = box
    groups = run_groups(*box)
    assert_partition(groups, tp, s)
    upstream = consecutive(tuple(range(tp)), s)
    assert key(groups, links, num_cards, placement) >= key(upstream, links, num_cards, placement)


def test_large_non_tree_group_is_searched_whole():
    """16 ranks on two hybrid cube meshes (NET between the nodes): each node's pairs as on one mesh
    (every rank has an NV2 partner: [0,3] [1,2] [4,7] [5,6]), which consecutive pairs (NV1) are not."""
    mesh = load_fixture("nvlink_mesh_8")
    tp_group = tuple(range(16))
    plain = topo.place_ranks(make_run(mesh, num_cards=8, world=16))
    groups = topo.form_split_groups(tp_group, 2, plain, mesh)
    one_node = ((0, 3), (1, 2), (4, 7), (5, 6))
    assert groups == one_node + tuple((a + 8, b + 8) for a, b in one_node)
    doubled = (0, 0, 1, 1, 2, 2, 3, 3) * 2
    where = topo.place_ranks(make_run(mesh, num_cards=8, world=16, placement=doubled))
    groups = topo.form_split_groups(tp_group, 2, where, mesh)
    assert_partition(groups, 16, 2)
    assert not shares_card(groups, 8, doubled)


@pytest.mark.parametrize("tp, s, expected", [
    (8, 2, ((0, 3), (1, 2), (4, 7), (5, 6))),  # consecutive pairs tie on the worst link (PXB) only: key (2)
    (8, 4, ((0, 1, 2, 3), (4, 5, 6, 7))),      # every other quad crosses the bridges (NODE): consecutive
    (4, 2, ((0, 3), (1, 2))),
])
def test_uneven_switches_regroup_by_the_groups_own_links(tp, s, expected):
    _, _, groups = groups_for("pcie_uneven_switches_8", tp, s)
    assert groups == expected
