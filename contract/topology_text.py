"""Card topologies as the harness and the implementations both read them: the matrix ``nvidia-smi topo -m``
prints (Iluvatar's ``ixsmi topo -m`` prints the same format) or a YAML topology, into a ``specs.Topology``.

Neutral contract-layer module (the reference's topology and the harness's config both read these files).
"""

from __future__ import annotations

import functools
import itertools
import re
from collections import Counter
from pathlib import Path
from typing import Optional, Sequence

from contract import bounded_inputs
from contract.errors import ConfigError, TopologyError
from contract.specs import Topology

TOPOLOGY_SUFFIXES = (".txt", ".yaml", ".yml")
FIELD = "hardware.topology"

LINK_CODES = ("X", "NV<n>", "PIX", "PXB", "PHB", "NODE", "SYS", "NET")
"""Best to worst. NV<n>: n bonded NVLinks (more is better); NET: ranks on different nodes."""
ALLOWED_CODES = (
    "link codes are X (diagonal only), NV<n> (n >= 1 bonded NVLinks), PIX, PXB, PHB, NODE, SYS, NET"
)
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
    header: Optional[list[str]] = None
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
        data = bounded_inputs.loads_yaml(text, FIELD, source=name)  # data only, bounded nesting
    except ConfigError as exc:
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


def available_topologies(fixtures_dir: Optional[Path]) -> tuple[str, ...]:
    """Names that ``load_topology`` resolves from ``fixtures_dir``."""
    if fixtures_dir is None or not Path(fixtures_dir).is_dir():
        return ()
    return tuple(sorted({p.stem for p in Path(fixtures_dir).iterdir() if p.suffix in TOPOLOGY_SUFFIXES}))


def _resolve(path_or_name: str, fixtures_dir: Optional[Path]) -> Path:
    given = Path(str(path_or_name)).expanduser()
    candidates = [given] if given.suffix in TOPOLOGY_SUFFIXES or given.parent != Path(".") else []
    if given.parent == Path("."):
        names = [given.name] if given.suffix in TOPOLOGY_SUFFIXES else [given.name + s for s in TOPOLOGY_SUFFIXES]
        if fixtures_dir is not None:
            candidates += [Path(fixtures_dir) / n for n in names]  # .txt wins over a .yaml twin
    for path in candidates:
        try:
            if path.is_file():
                return path
        except OSError:  # a name past the system's limits (ENAMETOOLONG): not a file it can read
            continue
    raise _error(
        str(path_or_name),
        f"a file (.txt from `nvidia-smi topo -m`, or .yaml) or a name in {fixtures_dir}: "
        f"{', '.join(available_topologies(fixtures_dir)) or '(none)'}",
        "not found",
    )


def load_topology(path_or_name: str, fixtures_dir: Optional[Path] = None) -> Topology:
    """Load a topology by file path, or by fixture name from ``fixtures_dir`` (the harness passes
    its ``conf/topology``; this module reads no folder on its own)."""
    path = _resolve(path_or_name, fixtures_dir)
    if path.suffix not in TOPOLOGY_SUFFIXES:
        raise _error(str(path), f"a topology file ends in {', '.join(TOPOLOGY_SUFFIXES)}")
    text = bounded_inputs.read_input_file(path, FIELD)  # bounded size; a FIFO or device is refused unread
    return _parsed_topology(text, path.suffix, path.stem)


@functools.lru_cache(maxsize=64)
def _parsed_topology(text: str, suffix: str, name: str) -> Topology:
    """One parse per distinct file text (a test matrix loads the same fixture for every case);
    a Topology is frozen, so sharing it is safe. Errors are not cached: each call raises anew."""
    if suffix == ".txt":
        return parse_topo_text(text, name=name)
    return _parse_yaml(text, name)
