"""ILU topology mapping: link matrices, rank placement, topology-aware split groups.

Reads the matrix that ``nvidia-smi topo -m`` prints (Iluvatar's ``ixsmi topo -m``
prints the same format) or a YAML topology into a ``specs.Topology``, places
ranks on (node, card), and cuts each attention TP group into split groups that
maximise the worst link inside a group, ties keeping upstream's consecutive
groups (FEATURE section 4). Pure Python: no torch, no process groups.
"""

from __future__ import annotations

import itertools
import re
from collections import Counter
from pathlib import Path
from typing import Sequence

import yaml

from implementations.errors import ConfigError, PlanError, TopologyError
from implementations.specs import RunSpec, Topology

TOPOLOGY_DIR = Path(__file__).resolve().parents[2] / "conf" / "topology"
TOPOLOGY_SUFFIXES = (".txt", ".yaml", ".yml")
FIELD = "hardware.topology"

LINK_CODES = ("X", "NV<n>", "PIX", "PXB", "PHB", "NODE", "SYS", "NET")
"""Best to worst. NV<n>: n bonded NVLinks (more is better); NET: ranks on different nodes."""
ALLOWED_CODES = (
    "link codes are X (diagonal only), NV<n> (n >= 1 bonded NVLinks), PIX, PXB, PHB, NODE, SYS, NET"
)
EXACT_SEARCH_MAX_RANKS = 8
"""Largest TP group searched exhaustively when the link matrix is not a tree."""

_PCIE_SCORES = {"PIX": 6, "PXB": 5, "PHB": 4, "NODE": 3, "SYS": 2, "NET": 1}
_NV_BASE_SCORE = 100
_SELF_SCORE = 10_000
_NV_RE = re.compile(r"NV([1-9][0-9]{0,2})")
_ANSI_RE = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_GPU_RE = re.compile(r"GPU[0-9]+")
# A link cell (known code or not) starts with a letter; affinity values (0-47, N/A) do not look like one.
_CELL_RE = re.compile(r"[A-Za-z][A-Za-z0-9#]*")
# Words of the trailing "CPU Affinity", "NUMA Affinity", "GPU NUMA ID" header columns.
_AFFINITY_WORDS = frozenset({"CPU", "NUMA", "GPU", "Affinity", "ID"})
_YAML_KEYS = ("name", "description", "cards", "links")


def link_score(code: str) -> int:
    """Rank of a link code: higher is better (X > NV12 > NV4 > PIX > ... > SYS > NET)."""
    if code == "X":
        return _SELF_SCORE
    if code in _PCIE_SCORES:
        return _PCIE_SCORES[code]
    match = _NV_RE.fullmatch(code) if isinstance(code, str) else None
    if match:
        return _NV_BASE_SCORE + int(match.group(1))
    raise TopologyError(FIELD, code, ALLOWED_CODES)


def _is_code(token: str) -> bool:
    return token == "X" or token in _PCIE_SCORES or _NV_RE.fullmatch(token) is not None


# ---------------------------------------------------------------- building and parsing


def _error(name: str, rule: str, detail: str = "") -> TopologyError:
    return TopologyError(FIELD, name, rule, detail)


def _validated(cards: Sequence[str], links: Sequence[Sequence[str]], name: str) -> Topology:
    """Check the matrix is square, symmetric, X exactly on the diagonal, known codes only."""
    if not cards:
        raise _error(name, "a topology needs at least one card")
    dupes = sorted(card for card, count in Counter(cards).items() if count > 1)
    if dupes:
        raise _error(name, "card names must be unique", f"repeated: {', '.join(dupes)}")
    n = len(cards)
    if len(links) != n:
        raise _error(name, "the link matrix must be square", f"{n} cards but {len(links)} rows")
    for i, row in enumerate(links):
        if len(row) != n:
            raise _error(
                name, "the link matrix must be square",
                f"row {cards[i]} has {len(row)} entries, expected {n} ({' '.join(cards)})",
            )
        for j, code in enumerate(row):
            where = f"row {cards[i]}, column {cards[j]}: {code!r}"
            if not isinstance(code, str) or not _is_code(code):
                raise _error(name, ALLOWED_CODES, where)
            if (code == "X") != (i == j):
                raise _error(name, "X (self) must appear exactly on the diagonal", where)
    for i, j in itertools.combinations(range(n), 2):
        if links[i][j] != links[j][i]:
            raise _error(
                name, "the link matrix must be symmetric",
                f"{cards[i]}->{cards[j]} is {links[i][j]} but {cards[j]}->{cards[i]} is {links[j][i]}",
            )
    return Topology(cards=tuple(cards), links=tuple(tuple(row) for row in links), name=name)


def flat_topology(num_cards: int, code: str = "PIX") -> Topology:
    """``num_cards`` cards, every pair joined by ``code`` (BI-V100: one PCIe bridge, PIX)."""
    if isinstance(num_cards, bool) or not isinstance(num_cards, int) or num_cards < 1:
        raise TopologyError("hardware.num_cards", num_cards, "must be an integer >= 1")
    if code == "X" or not _is_code(code):
        raise TopologyError(FIELD, code, ALLOWED_CODES, "flat topology link between distinct cards")
    cards = tuple(f"GPU{i}" for i in range(num_cards))
    links = [["X" if i == j else code for j in range(num_cards)] for i in range(num_cards)]
    return _validated(cards, links, f"flat_{code.lower()}{num_cards}")


def parse_topo_text(text: str, *, name: str = "topology") -> Topology:
    """Parse ``nvidia-smi topo -m`` / ``ixsmi topo -m`` output.

    The header row names the columns (GPU<i>, NIC or mlx columns, then the affinity
    columns); each GPU<i> row holds one link code per column. NIC rows and columns,
    affinity values, the legend, ``#`` comment lines and ANSI escapes are ignored.
    """
    header: list[str] | None = None
    rows: list[tuple[str, list[str]]] = []
    for raw in text.splitlines():
        tokens = _ANSI_RE.sub("", raw).split()
        if not tokens or tokens[0].startswith("#"):
            continue
        if "Legend:" in tokens:
            break
        if header is None:
            if any(_GPU_RE.fullmatch(t) for t in tokens):
                header = tokens
            continue
        if _GPU_RE.fullmatch(tokens[0]):
            rows.append((tokens[0], tokens[1:]))
    if header is None:
        raise _error(name, "expected `nvidia-smi topo -m` output: a header row of card names "
                     "(GPU0 GPU1 ...) followed by one row per card", "no header row found")
    if any(_is_code(t) for t in header):
        raise _error(name, "the first row naming GPU<i> must be the header of card names",
                     f"it holds link codes: {' '.join(header)}")
    columns = list(itertools.takewhile(lambda t: t not in _AFFINITY_WORDS, header))
    gpu_cols = [k for k, col in enumerate(columns) if _GPU_RE.fullmatch(col)]
    cards = [columns[k] for k in gpu_cols]
    links = []
    for row_name, tokens in rows:
        cells = list(itertools.takewhile(_CELL_RE.fullmatch, tokens))
        if len(cells) != len(columns):
            raise _error(
                name, "the link matrix must be square",
                f"row {row_name} has {len(cells)} link entries but the header "
                f"has {len(columns)} columns ({' '.join(columns)})",
            )
        links.append([cells[k] for k in gpu_cols])
    row_names = [row_name for row_name, _ in rows]
    if row_names != cards:
        raise _error(
            name, "the link matrix must be square: one row per header card, in header order",
            f"header cards {' '.join(cards) or '(none)'}; rows {' '.join(row_names) or '(none)'}",
        )
    return _validated(cards, links, name)


def _parse_yaml(text: str, name: str) -> Topology:
    rule = "a YAML topology is a mapping {name, cards: [names], links: [[codes per card], ...]}"
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise _error(name, rule, f"not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise _error(name, rule, f"got {type(data).__name__}")
    unknown = sorted(str(k) for k in data if k not in _YAML_KEYS)
    if unknown:
        raise _error(name, rule, f"unknown keys: {', '.join(unknown)}; allowed: {', '.join(_YAML_KEYS)}")
    cards, links = data.get("cards"), data.get("links")
    if not isinstance(cards, list) or not all(isinstance(c, str) for c in cards):
        raise _error(name, rule, f"cards must be a list of names, got {cards!r}")
    if not isinstance(links, list) or not all(isinstance(row, list) for row in links):
        raise _error(name, rule, f"links must be a list of rows (lists of codes), got {links!r}")
    display = data.get("name", name)
    return _validated(cards, links, display if isinstance(display, str) else name)


def available_topologies() -> tuple[str, ...]:
    """Names that ``load_topology`` resolves from ``conf/topology``."""
    if not TOPOLOGY_DIR.is_dir():
        return ()
    return tuple(sorted({p.stem for p in TOPOLOGY_DIR.iterdir() if p.suffix in TOPOLOGY_SUFFIXES}))


def _resolve(path_or_name: str) -> Path:
    given = Path(str(path_or_name)).expanduser()
    candidates = [given] if given.suffix in TOPOLOGY_SUFFIXES or given.parent != Path(".") else []
    if given.parent == Path("."):
        names = [given.name] if given.suffix in TOPOLOGY_SUFFIXES else [given.name + s for s in TOPOLOGY_SUFFIXES]
        candidates += [TOPOLOGY_DIR / n for n in names]  # .txt wins over a .yaml twin
    for path in candidates:
        if path.is_file():
            return path
    raise _error(
        str(path_or_name),
        f"a file (.txt from `nvidia-smi topo -m`, or .yaml) or a name in {TOPOLOGY_DIR}: "
        f"{', '.join(available_topologies()) or '(none)'}",
        "not found",
    )


def load_topology(path_or_name: str) -> Topology:
    """Load a topology by file path or by name from ``conf/topology``."""
    path = _resolve(path_or_name)
    if path.suffix not in TOPOLOGY_SUFFIXES:
        raise _error(str(path), f"a topology file ends in {', '.join(TOPOLOGY_SUFFIXES)}")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise _error(str(path), "a readable UTF-8 text file", str(exc)) from None
    if path.suffix == ".txt":
        return parse_topo_text(text, name=path.stem)
    return _parse_yaml(text, path.stem)


# ---------------------------------------------------------------- placement


def place_ranks(run: RunSpec) -> tuple[tuple[int, int], ...]:
    """(node, card) of every global rank: node = rank // num_cards, card from placement."""
    hw = run.hardware
    num_cards, topo = hw.num_cards, hw.topology
    if num_cards != len(topo.cards) or num_cards < 1:
        raise TopologyError(
            "hardware.num_cards", num_cards,
            f"must equal the number of cards in topology {topo.name!r} ({len(topo.cards)}: "
            f"{' '.join(topo.cards) or 'none'}) and be >= 1",
        )
    world = run.parallel.world_size
    if run.placement is None:
        cards = [rank % num_cards for rank in range(world)]
    else:
        cards = list(run.placement)
        if len(cards) != world:
            raise TopologyError(
                "placement", run.placement,
                f"needs one card index per rank: {world} entries (parallel.world_size)",
                f"got {len(cards)}",
            )
        for rank, card in enumerate(cards):
            if isinstance(card, bool) or not isinstance(card, int) or not 0 <= card < num_cards:
                raise TopologyError(
                    "placement", run.placement,
                    f"card indices must be integers in 0..{num_cards - 1} (hardware.num_cards={num_cards})",
                    f"rank {rank} -> card {card!r}",
                )
    return tuple((rank // num_cards, card) for rank, card in enumerate(cards))


def link(topology: Topology, placement: Sequence[tuple[int, int]], rank_a: int, rank_b: int) -> str:
    """Link code between two ranks: the topology cell on one node, NET across nodes."""
    (node_a, card_a), (node_b, card_b) = placement[rank_a], placement[rank_b]
    if node_a != node_b:
        return "NET"
    return topology.links[card_a][card_b]


def worst_link(group: Sequence[int], placement: Sequence[tuple[int, int]], topology: Topology) -> str:
    """Worst link inside one group (X for a one-rank group)."""
    codes = [link(topology, placement, a, b) for a, b in itertools.combinations(group, 2)]
    return min(codes, key=link_score, default="X")


# ---------------------------------------------------------------- split groups


def form_split_groups(
    tp_group: tuple[int, ...],
    split_size: int,
    placement: Sequence[tuple[int, int]],
    topology: Topology,
) -> tuple[tuple[int, ...], ...]:
    """Cut one attention TP group into groups of ``split_size`` with the best worst link.

    Upstream's consecutive groups are returned unchanged when they are already
    optimal and put no two ranks on one card; otherwise the groups are rank-sorted
    inside and ordered by their first rank.
    """
    n, s = len(tp_group), split_size
    if isinstance(s, bool) or not isinstance(s, int) or s < 1 or n % s:
        raise ConfigError("layerwise.split_size", s, f"must be >= 1 and divide the attention TP size {n}")
    consecutive = tuple(tuple(tp_group[i:i + s]) for i in range(0, n, s))
    if s == 1:
        return consecutive
    where = [placement[rank] for rank in tp_group]
    _require_distinct_cards_possible(tp_group, where, s)
    scores = [[link_score(link(topology, placement, a, b)) for b in tp_group] for a in tp_group]
    consecutive_idx = [list(range(i, i + s)) for i in range(0, n, s)]
    incumbent = _bottleneck(consecutive_idx, scores) if _distinct_cards(consecutive_idx, where) else 0

    by_levels = _best_on_tree(scores, where, s)
    if by_levels is not None:
        level, groups = by_levels
        if incumbent >= level:
            return consecutive
    elif n <= EXACT_SEARCH_MAX_RANKS:
        groups = _exact_search(scores, where, s, incumbent)
        if groups is None:
            return consecutive
    elif incumbent:
        return consecutive
    else:  # large non-tree matrix and consecutive shares a card: any valid grouping
        groups = _chunk(list(range(n)), where, s)
    ranked = [tuple(sorted(tp_group[i] for i in group)) for group in groups]
    return tuple(sorted(ranked))


def _require_distinct_cards_possible(tp_group, where, s: int) -> None:
    # A valid grouping exists iff no card holds more ranks than there are groups.
    (card, count), = Counter(where).most_common(1)
    if count > len(tp_group) // s:
        ranks = [r for r, w in zip(tp_group, where) if w == card]
        raise TopologyError(
            "placement", tuple(tp_group),
            f"no card may hold two ranks of one split group (NCCL refuses duplicate devices); "
            f"with split size {s} a card may hold at most {len(tp_group) // s} ranks of this TP group",
            f"node {card[0]} card {card[1]} holds ranks {ranks}",
        )


def _distinct_cards(groups, where) -> bool:
    return all(len({where[i] for i in group}) == len(group) for group in groups)


def _bottleneck(groups, scores) -> int:
    return min(scores[a][b] for group in groups for a, b in itertools.combinations(group, 2))


def _best_on_tree(scores, where, s: int):
    """Optimal (level, groups) when "link >= level" is an equivalence at each level tried.

    That holds for PCIe trees (ultrametric matrices). Returns None as soon as a
    level's relation is not an equivalence, so the caller searches instead.
    """
    n = len(scores)
    levels = sorted({scores[a][b] for a, b in itertools.combinations(range(n), 2) if where[a] != where[b]},
                    reverse=True)
    for level in levels:
        buckets: list[list[int]] = []
        for i in range(n):
            home = next((b for b in buckets if scores[i][b[0]] >= level), None)
            if home is None:
                buckets.append([i])
            else:
                home.append(i)
        label = {i: k for k, bucket in enumerate(buckets) for i in bucket}
        if any((scores[a][b] >= level) != (label[a] == label[b])
               for a, b in itertools.combinations(range(n), 2)):
            return None
        if all(len(b) % s == 0 and max(Counter(where[i] for i in b).values()) <= len(b) // s
               for b in buckets):
            return level, [group for bucket in buckets for group in _chunk(bucket, where, s)]
    return None  # not reached after _require_distinct_cards_possible


def _chunk(members: list[int], where, s: int) -> list[list[int]]:
    """Consecutive chunks of s; if one repeats a card, deal card by card round-robin instead."""
    chunks = [members[i:i + s] for i in range(0, len(members), s)]
    if _distinct_cards(chunks, where):
        return chunks
    k = len(members) // s
    dealt = sorted(members, key=lambda i: (where[i], i))  # same-card ranks contiguous, <= k of each
    return [sorted(dealt[g::k]) for g in range(k)]


def _exact_search(scores, where, s: int, incumbent: int):
    """Best grouping strictly better than ``incumbent``, or None (small non-tree groups)."""
    best: list = [incumbent, None]

    def extend(remaining: tuple[int, ...], chosen: list[list[int]], floor: int) -> None:
        if not remaining:
            best[0], best[1] = floor, [list(g) for g in chosen]
            return
        first, rest = remaining[0], remaining[1:]
        for mates in itertools.combinations(rest, s - 1):
            group = (first, *mates)
            if len({where[i] for i in group}) < s:
                continue
            worst = min(floor, min(scores[a][b] for a, b in itertools.combinations(group, 2)))
            if worst <= best[0]:
                continue
            chosen.append(list(group))
            extend(tuple(i for i in rest if i not in mates), chosen, worst)
            chosen.pop()

    extend(tuple(range(len(scores))), [], _SELF_SCORE)
    return best[1]


# ---------------------------------------------------------------- card checks


def check_cards(
    split_groups: Sequence[Sequence[int]],
    placement: Sequence[tuple[int, int]],
    per_rank_bytes: dict[int, int],
    hbm_bytes_per_card: int,
    reserved_bytes_per_card: int,
) -> None:
    """Refuse two ranks of one split group on a card, or a card whose plan exceeds its HBM."""
    for group in split_groups:
        seen: dict[tuple[int, int], int] = {}
        for rank in group:
            node, card = placement[rank]
            if (node, card) in seen:
                raise TopologyError(
                    "placement", tuple(group),
                    "no card may hold two ranks of one split group (NCCL refuses duplicate devices)",
                    f"ranks {seen[(node, card)]} and {rank} are both on node {node} card {card}",
                )
            seen[(node, card)] = rank
    on_card: dict[tuple[int, int], list[int]] = {}
    for rank in sorted(per_rank_bytes):
        on_card.setdefault(tuple(placement[rank]), []).append(rank)
    for (node, card), ranks in sorted(on_card.items()):
        kv_bytes = sum(per_rank_bytes[r] for r in ranks)
        total_bytes = kv_bytes + reserved_bytes_per_card * len(ranks)
        if total_bytes > hbm_bytes_per_card:
            raise PlanError(
                "hardware.reserved_bytes_per_card", reserved_bytes_per_card,
                f"each card's planned memory must fit hardware.hbm_bytes_per_card={hbm_bytes_per_card}",
                f"node {node} card {card} holds ranks {ranks}: KV {kv_bytes} B + reserved "
                f"{len(ranks)} x {reserved_bytes_per_card} B = {total_bytes} B > {hbm_bytes_per_card} B",
            )
