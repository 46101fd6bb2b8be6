#!/usr/bin/env bash
# What only a card can show. Not yet run on a card: the CPU checks cover its no-card line
# and its plan (testcases/meta/test_check_cards.py).
#
#   bash scripts/check_cards.sh            # run every step for the cards torch sees
#   bash scripts/check_cards.sh --plan N   # print the steps for N cards, run nothing
#
# Steps (each one command, logged to reports/cards/<step>.log; a summary at the end):
#   topology   `ixsmi topo -m` or `nvidia-smi topo -m`, parsed by the harness's parser;
#              it must list every card torch sees
#   nccl       a rank pool on NCCL over all visible cards (world = cards; 1 card: world 1):
#              world all_reduce, pairwise subgroups, rank i on cuda:i
#   With 4 or more cards:
#   matrix     pytest -n 4 over the default TC matrix on NCCL, one rank per card: CUDA
#              allocation, the allocator counters as measured bytes (TC-02 estimate vs
#              measured, TC-05 nothing alive after teardown) and each xdist worker's HBM
#              share (harness/suites/bring_up.py) with 4 workers on the same cards
#   With 1 to 3 cards:
#   alloc      pytest -n 4 over TC-02 and TC-05 with every rank on the card(s) under gloo
#              (gloo carries CUDA tensors; LWSPLIT_RUNNER_DEVICE=cuda): CUDA allocation,
#              the allocator counters, and the HBM share split over 4 workers x their ranks
#   Always:
#   native     a C++ tree's allocation compiled against this torch (its C++ ABI, recorded in
#              the summary) and run in the ranks: the fixture port's tensor tests
#              (testcases/native/test_ports.py; needs g++, glog, gflags)
# Without a card: one line saying so, exit 1. Any failed step: exit 1.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
OUT=${LWSPLIT_CARDS_OUT:-reports/cards}
TC=testcases/tc
PYTEST=("$PY" -m pytest -q -p no:randomly -n 4)

usage() { echo "usage: bash scripts/check_cards.sh [--plan N]" >&2; exit 2; }

# steps N: one "name<TAB>command" line per step for N cards
steps() {
  local n=$1
  printf 'topology\t%s scripts/card_tools.py topology --cards %s --save %s/topo.txt\n' "$PY" "$n" "$OUT"
  printf 'nccl\t%s scripts/card_tools.py nccl --world %s\n' "$PY" "$n"
  if [ "$n" -ge 4 ]; then
    printf 'matrix\t%s %s --lw-backend nccl\n' "${PYTEST[*]}" "$TC"
  else
    printf 'alloc\tLWSPLIT_RUNNER_DEVICE=cuda %s %s/test_tc02_estimation.py %s/test_tc05_shard_application.py --lw-backend gloo\n' \
      "${PYTEST[*]}" "$TC" "$TC"
  fi
  printf 'native\t%s -m pytest -q -p no:randomly -n 0 testcases/native/test_ports.py -k "%s"\n' "$PY" \
    "tensors or check_inside_the_trees_allocation or compiled_allocation_crashes"
}

case "${1:-}" in
  "") ;;
  --plan)
    [[ "${2:-}" =~ ^[0-9]+$ ]] && [ "$2" -ge 1 ] || { echo "error: --plan: a card count >= 1, got '${2:-}'" >&2; exit 2; }
    steps "$2"; exit 0 ;;
  -h|--help) sed -n '2,26p' "$0"; exit 0 ;;
  *) usage ;;
esac

if ! counted=$("$PY" scripts/card_tools.py count 2>/dev/null); then
  echo "error: $PY cannot import torch; run bash setup.sh first (or set PYTHON=...)" >&2
  exit 1
fi
read -r cards torch_version <<< "$counted"
if [ "$cards" -eq 0 ]; then
  echo "no card: torch ($torch_version) sees no CUDA device; nothing to check" >&2
  exit 1
fi

mkdir -p "$OUT"
summary="$OUT/summary.txt"
{
  echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "host: $(hostname)"
  echo "cards: $cards ($("$PY" -c 'import torch; print(", ".join(torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())))'))"
  echo "torch: $torch_version (C++11 ABI: $("$PY" -c 'import torch; print(bool(torch._C._GLIBCXX_USE_CXX11_ABI))'))"
} > "$summary"
failed=0
while IFS=$'\t' read -r name cmd; do
  echo "== $name: $cmd"
  start=$SECONDS
  if bash -c "$cmd" < /dev/null > "$OUT/$name.log" 2>&1; then verdict=ok; else verdict=FAILED; failed=1; fi
  tail -n 15 "$OUT/$name.log"
  echo "$name: $verdict ($((SECONDS - start)) s) -- $cmd" | tee -a "$summary"
done < <(steps "$cards")
echo "summary: $summary"
exit $failed
