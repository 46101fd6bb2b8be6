"""``python -m harness.conformance LOGFILE [overrides]`` (see ``harness/conformance/__init__.py``).

    python -m harness.conformance xllm.INFO model=deepseek_v32 hardware=bi_v100 parallel=tp4 layerwise=s2
    python -m harness.conformance xllm.INFO model_path=/ckpt/config.json layerwise=s2 cache.kv_budget_bytes=17179869184
    python -m harness.conformance xllm.INFO --gflags "--enable_layerwise_split=true --layerwise_split_size=2" model=glm_moe_dsa

``--gflags`` takes the server's layerwise flags (read by the oracle's own gflag reader)
and applies them after the overrides.
"""

from __future__ import annotations

import argparse
import sys
from typing import Optional, Sequence

from harness.cli import command, fail, join_flag_values

DISAGREE_EXIT_CODE = 1


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):
        fail(f"{message} (see python -m harness.conformance --help)")


def parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="python -m harness.conformance",
        description="Check an xLLM engine log's KV cache figures against the spec (FEATURE.md).",
    )
    p.add_argument("logfile", help="the engine's log (glog INFO file or captured stderr)")
    p.add_argument("--gflags", metavar="FLAGS",
                   help='xllm_server flags, e.g. "--enable_layerwise_split=true --layerwise_split_size=2"')
    p.add_argument("overrides", nargs="*", help="the run's config, e.g. model=deepseek_v32 layerwise=s2 hardware=bi_v100")
    return p


@command
def main(argv: Optional[Sequence[str]] = None) -> int:
    from harness.config.build import build_run_spec
    from harness.config.compose import compose_config
    from harness.conformance.check import check, render
    from harness.conformance.log import LogError, read_log

    args = parser().parse_intermixed_args(join_flag_values(sys.argv[1:] if argv is None else list(argv)))
    overrides = list(args.overrides)
    if args.gflags is not None:
        from harness import oracle

        try:
            flags = oracle.parse_layerwise_gflags(args.gflags)
        except ValueError as exc:
            fail(f"--gflags: {exc}")
        overrides += [f"layerwise.{key}={str(value).lower()}" for key, value in sorted(flags.items())]
    try:
        log = read_log(args.logfile)
    except LogError as exc:
        fail(exc)
    run = build_run_spec(compose_config(overrides))
    try:
        figures = check(run, log)
    except LogError as exc:
        fail(exc)
    print(render(figures, log, overrides))
    return DISAGREE_EXIT_CODE if any(f.agree is False for f in figures) else 0




if __name__ == "__main__":
    sys.exit(main())
