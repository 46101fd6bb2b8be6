"""Planning cost: validation + topology + layout + estimation, no allocation.

    python -m tools.bench.planning [--docs]

A 1,000-layer hybrid model (full attention every 4th layer, GDN elsewhere) at world
size 64 (dp 8 x tp 8, 8 nodes of 8 cards behind two PCIe switches), split size 4,
planned by the reference; the uniform plan (split off) of the same config is timed
side by side, so the split overhead is a ratio measured in this run. Target: < 50 ms.
``--docs`` also records the figures into docs/benchmarks.md (``tools.docs_blocks``).
"""

from __future__ import annotations

import os
import platform
import statistics
import sys
import time
from dataclasses import replace
from typing import Optional

from contract.specs import CacheSpec, HardwareProfile, LayerwiseFlags, ModelSpec, ParallelSpec, RunSpec
from contract.topology_text import load_topology
from contract.units import GIB as GiB
from harness.paths import TOPOLOGY_DIR
from harness.usage import Parser, command, fail
from implementations.reference import ReferenceImplementation

TARGET_S = 0.050


def hybrid_run(num_layers: int = 1000, split_size: int = 4) -> RunSpec:
    model = ModelSpec(
        name=f"hybrid_{num_layers}", model_type="qwen3_next", num_hidden_layers=num_layers, attention="gqa",
        num_key_value_heads=2, head_dim=256, full_attention_interval=4,
        linear_num_key_heads=16, linear_num_value_heads=32, linear_key_head_dim=128,
        linear_value_head_dim=128, linear_conv_kernel_dim=4
    )
    hardware = HardwareProfile(
        name="pcie8", device_type="cuda", kv_layout="heads_major", num_cards=8,
        hbm_bytes_per_card=96 * GiB, reserved_bytes_per_card=16 * GiB, topology=load_topology("pcie_2switch_8", TOPOLOGY_DIR),
    )
    return RunSpec(
        model=model, parallel=ParallelSpec(world_size=64, dp_size=8), cache=CacheSpec(max_seqs_per_batch=8),
        layerwise=LayerwiseFlags(enable=True, split_size=split_size), hardware=hardware,
    )


def timed(fn, repeats: int) -> list[float]:
    out = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        out.append(time.perf_counter() - start)
    return out


@command
def main(argv: Optional[list[str]] = None) -> int:
    parser = Parser(prog="python -m tools.bench.planning", description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=50, help="plans timed per kind (default 50)")
    parser.add_argument("--docs", action="store_true", help="also record the figures into docs/benchmarks.md")
    args = parser.parse_args(argv)
    if args.repeats < 1:
        fail(f"--repeats={args.repeats}: a whole number >= 1")
    report(args.repeats, docs=args.docs)
    return 0


def report(repeats: int = 50, *, docs: bool = False) -> None:
    """Time both plans and print the table (and record it into its docs page)."""
    impl = ReferenceImplementation()
    split = hybrid_run()
    uniform = replace(split, layerwise=LayerwiseFlags(enable=False, split_size=1))
    impl.plan(split), impl.plan(uniform)  # warm imports
    t_split = timed(lambda: impl.plan(split), repeats)
    t_uniform = timed(lambda: impl.plan(uniform), repeats)
    plan = impl.plan(split)
    med_s, med_u = statistics.median(t_split), statistics.median(t_uniform)
    print(f"machine: {os.cpu_count()} cores, Python {platform.python_version()}, load {os.getloadavg()[0]:.2f}")
    print(f"model: 1000 layers ({len(plan.full_layers)} full attention), world 64 = dp 8 x tp 8, s = 4, "
          f"{len(plan.split_groups)} split groups, n_blocks {plan.n_blocks} (uniform {plan.uniform_n_blocks})")
    print(f"{'plan':>14} | {'median':>9} | {'max':>9} | target")
    print(f"{'split (s=4)':>14} | {med_s * 1e3:7.2f} ms | {max(t_split) * 1e3:7.2f} ms | "
          f"< {TARGET_S * 1e3:.0f} ms: {'met' if med_s < TARGET_S else 'MISSED'}")
    print(f"{'uniform':>14} | {med_u * 1e3:7.2f} ms | {max(t_uniform) * 1e3:7.2f} ms |")
    print(f"split / uniform planning time: {med_s / med_u:.2f}x")
    if docs:
        from tools import docs_blocks

        page = docs_blocks.publish(docs_blocks.measured(
            "bench_planning", command="python -m tools.bench.planning --docs",
            columns=("what", "command", "result", "target"), align="llll",
            rows=[(f"planning, 1,000-layer hybrid, world 64 (dp 8 x tp 8), s = 4 (median of {repeats})",
                   "`python -m tools.bench.planning`",
                   f"{med_s * 1e3:.2f} ms median (uniform plan of the same config {med_u * 1e3:.2f} ms: "
                   f"split costs {med_s / med_u:.2f}x)", f"< {TARGET_S * 1e3:.0f} ms")]))
        print(f"wrote {page}")


if __name__ == "__main__":
    sys.exit(main())
