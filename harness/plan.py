"""``python -m harness.plan``: the plan for one configuration, before touching hardware.

    python -m harness.plan model=deepseek_v32 hardware=bi_v100 parallel=tp4 layerwise=s2
    python -m harness.plan --table model=qwen3_5_moe layerwise=s4 implementation=xllm_upstream
    python -m harness.plan --gflags "--enable_layerwise_split=true --layerwise_split_size=2" model=glm_moe_dsa
    python -m harness.plan --semantics upstream --gflags "--layerwise_split_size=2" model=glm_moe_dsa
    python -m harness.plan --semantics upstream --parallel-config parallel_config.json model_path=/ckpt/config.json
    python -m harness.plan --table --run-spec run.json implementation=reference

Composes the config (Hydra overrides, the vocabulary of every harness command),
validates, lays out and estimates through the implementation's ``plan``, and prints
the ``KVPlan`` as JSON (or a table). No process group, no allocation, no torch.
``--gflags`` / ``--parallel-config`` are the engine's own flags, applied after the
overrides (they win; a value both set differently is refused): the layerwise flags and
every other flag that changes the KV plan (``--block_size``, ``--kv_cache_dtype``,
``--nnodes``, ... : ``contract.server_flags.GFLAG_CONFIG_KEYS``); the budget flags
(``--max_memory_utilization``, ``--max_cache_size``) are refused by name (the budget is
``hardware=`` or ``cache.kv_budget_bytes=``), and so is ``--model`` without ``model=`` /
``model_path=``. ``--semantics`` picks
FEATURE section 2's rule: ``adaptation`` (default: enable flag and s > 1) or ``upstream``
(a binary built from upstream 494f293b5: no enable flag, s > 1 alone splits); the
output says which one it applied and why the split is on or off (JSON key
``semantics``, or the table's ``semantics:`` line). A user error prints one ``error:``
line and exits 2, writing nothing. ``--run-spec FILE`` plans a ``RunSpec`` written as data (the
explorer's reproduce file, ``harness.config.spec_file``) instead of composing one.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from typing import Optional, Sequence

from contract.errors import ConfigError
from contract.server_flags import DEFAULT_SEMANTICS, SEMANTICS, layerwise_state
from contract.units import MIB
from harness.config import spec_file
from harness.config.build import apply_semantics, build_implementation, build_run_spec, engine_flags
from harness.config.compose import compose_config, parse_override
from harness.usage import Parser, command, join_flag_values

GAIN_UNDEFINED = "n/a"
"""A table's cell for a capacity gain the spec leaves undefined (FEATURE 6: no uniform block fits; JSON null)."""


def gain_text(gain: Optional[float], digits: int = 2) -> str:
    """``1.91x``, or ``n/a`` for an undefined (null) capacity gain: never infinity or 0."""
    return GAIN_UNDEFINED if gain is None else f"{gain:.{digits}f}x"


def parser() -> argparse.ArgumentParser:
    p = Parser(
        prog="python -m harness.plan",
        description="Print the layerwise split KV plan of one configuration (JSON, or --table).",
    )
    p.add_argument("--table", action="store_true", help="print a readable table instead of JSON")
    p.add_argument("--semantics", choices=SEMANTICS, default=DEFAULT_SEMANTICS,
                   help="flag semantics: adaptation (enable flag and s > 1, default) or upstream (s > 1 alone)")
    p.add_argument("--gflags", metavar="FLAGS",
                   help='xllm_server flags, e.g. "--enable_layerwise_split=true --layerwise_split_size=2 --block_size=64" '
                        '(adaptation) or "--layerwise_split_size=2" (upstream); every flag that changes the KV plan '
                        'is read; --flagfile=PATH is read')
    p.add_argument("--parallel-config", metavar="FILE",
                   help="a ParallelConfig JSON (layerwise_split_size, world_size, dp_size, cp_size, tp_size, kv_split_size)")
    p.add_argument("--run-spec", metavar="FILE",
                   help="plan the RunSpec in this JSON file (the explorer's reproduce file: harness.config.spec_file); "
                        "beside it only implementation=... overrides")
    p.add_argument("overrides", nargs="*", help="Hydra overrides: model=qwen3_5_moe layerwise.split_size=2 ...")
    return p




def plan_json(overrides: Sequence[str], semantics: str = DEFAULT_SEMANTICS) -> tuple[dict, str]:
    """(the plan as JSON-able dict, the readable table) for ``overrides`` under ``semantics``."""
    cfg = compose_config(list(overrides))
    why = apply_semantics(cfg, semantics)
    return _planned(build_implementation(cfg), build_run_spec(cfg), semantics, why)


def run_spec_plan_json(path: str, overrides: Sequence[str], semantics: str = DEFAULT_SEMANTICS) -> tuple[dict, str]:
    """``plan_json`` of the ``RunSpec`` in the file ``path`` (``harness.config.spec_file``), planned by the
    implementation ``overrides`` choose (``implementation=...`` and its keys only: the file holds the rest)."""
    for text in overrides:
        key = parse_override(text).key_or_group
        if key != "implementation" and not key.startswith("implementation."):
            raise ConfigError(key, text.split("=", 1)[-1], f"implementation=... only, beside {spec_file.OPTION} "
                              "(the file holds the rest of the configuration)")
    run = spec_file.read(path)
    upstream = semantics == "upstream"
    flags, why = layerwise_state(semantics, None if upstream else run.layerwise.enable, run.layerwise.split_size)
    if upstream:
        run = dataclasses.replace(run, layerwise=dataclasses.replace(run.layerwise, enable=flags.enable))
        why += "; layerwise.enable of the file is not read"
    return _planned(build_implementation(compose_config(list(overrides))), run, semantics, why)


def _planned(impl, run, semantics: str, why: str) -> tuple[dict, str]:
    plan = impl.plan(run)
    out = plan.to_json()
    out["hardware"] = run.hardware.name
    out["semantics"] = {"name": semantics, "split": why}
    return out, table(out)


def table(p: dict) -> str:
    """Per-rank owned layers and MiB, peak vs uniform, capacity gain."""
    state = f"s={p['split_size']} {'active' if p['active'] else 'inactive'}"
    lines = [
        f"model {p['model']} | implementation {p['implementation']} | hardware {p['hardware']}",
        f"world {p['world_size']} = dp {p['dp_size']} x cp {p['cp_size']} x tp {p['attn_tp_size']} | "
        f"layerwise split {state} | block_size {p['block_size']} | layout {p['kv_layout']}",
        *([f"semantics: {p['semantics']['split']}"] if "semantics" in p else []),
        f"layers {p['num_layers']} ({len(p['full_layers'])} full attention) | "
        f"available {_mib(p['available_bytes'])} MiB/rank (budget {_mib(p['budget_bytes'])}, "
        f"linear state {_mib(p['linear_state_bytes'])})",
        f"n_blocks {p['n_blocks']} (uniform {p['uniform_n_blocks']}) | capacity gain {gain_text(p['capacity_gain'], 3)}",
        "",
        f"{'rank':>4} {'node':>4} {'card':>4} {'group':>5} {'split_rank':>10} {'owned':>5}  {'est MiB':>10}  owned full layers",
    ]
    if p.get("draft"):
        lines[-1] = lines[-1].replace("  owned full layers", f"  {'draft MiB':>10}  owned full layers")
    for r in p["ranks"]:
        owned = r["owned_full_layers"]
        draft = f"  {_mib(r['draft_estimated_bytes']):>10}" if p.get("draft") else ""
        lines.append(
            f"{r['rank']:>4} {r['node']:>4} {r['card']:>4} {r['split_group']:>5} {r['split_rank']:>10} "
            f"{len(owned):>5}  {_mib(r['estimated_bytes']):>10}{draft}  {compact_ids(owned)}"
        )
    lines += [
        "",
        f"peak {_mib(p['peak_bytes'])} MiB vs uniform {_mib(p['uniform_peak_bytes'])} MiB at the same n_blocks "
        f"(savings {_mib(p['savings_bytes'])} MiB, mean {_mib(p['mean_bytes'])} MiB)",
    ]
    if p.get("draft"):
        lines.append(f"draft {p['draft']['model']}: {len(p['draft']['full_layers'])} full layers, never split")
    lines += [f"note: {n}" for n in p.get("notes", ())]
    return "\n".join(lines)


def compact_ids(ids: Sequence[int]) -> str:
    """``0,2,4,...,60`` for an arithmetic run, else the plain list; ``-`` when empty."""
    ids = list(ids)
    if not ids:
        return "-"
    if len(ids) >= 5:
        step = ids[1] - ids[0]
        if step > 0 and all(b - a == step for a, b in zip(ids, ids[1:])):
            return f"{ids[0]},{ids[1]},{ids[2]},...,{ids[-1]}"
    return ",".join(map(str, ids))


def _mib(n_bytes: int) -> str:
    return f"{n_bytes / MIB:.1f}"


@command
def main(argv: Optional[Sequence[str]] = None) -> int:
    # intermixed: an option may come anywhere among the overrides (model=x --table layerwise=s2)
    args = parser().parse_intermixed_args(join_flag_values(sys.argv[1:] if argv is None else list(argv)))
    overrides = list(args.overrides)
    if args.gflags is not None or args.parallel_config is not None:
        flags = engine_flags(args.gflags, args.parallel_config, args.semantics, args.overrides)
        for name, value in flags.memory.items():  # the engine sizes C with the card's free memory
            raise ConfigError(f"--{name}", value, "the budget as hardware=NAME or cache.kv_budget_bytes=N",
                              "harness.plan does not read it; python -m harness.conformance judges it against "
                              "the engine's worker lines")
        overrides += flags.overrides
    if args.run_spec is not None:
        if args.gflags is not None or args.parallel_config is not None:
            raise ConfigError("--run-spec", args.run_spec, "the configuration alone: not with --gflags or "
                              "--parallel-config (the file holds every flag's value)")
        out, text = run_spec_plan_json(args.run_spec, overrides, args.semantics)
    else:
        out, text = plan_json(overrides, args.semantics)
    print(text if args.table else json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
