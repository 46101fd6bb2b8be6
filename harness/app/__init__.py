"""``python -m harness``: the harness as a Hydra application (one configuration, or a sweep).

One configuration, its TCs run through the same pytest suites CI runs::

    python -m harness model=qwen3_5_moe layerwise=s2                  # suite=all: TC-01..TC-07
    python -m harness model=deepseek_v32 layerwise=s2 suite=quick     # TC-01, TC-02
    python -m harness model=glm_moe_dsa layerwise=s4 'suite.tcs=[TC-03]' parallel=dp2_tp4
    python -m harness mode=plan hardware=bi_v100 model=deepseek_v32 layerwise=s2   # plan only

``conf/config.yaml`` composes model, draft, hardware, parallel, layerwise,
implementation, suite (``conf/suite``: all, l1, l2, quick), mode (suite, plan) and
launcher (local, slurm). Overrides are the vocabulary of every harness command
(``harness.config.compose``).
``mode=suite`` (default) runs ``pytest`` in-process on ``testcases/tc`` narrowed to
this configuration; ``mode=plan`` only plans (no process group: fast, and works for a
hardware profile this machine cannot allocate, e.g. BI-V100's 16 GiB of KV per rank).

Results go to ``reports/runs/<date>/<time>-<run id>/`` (``report.results_dir=DIR`` or
``hydra.run.dir=DIR`` to move them): ``result.json`` (per-TC outcome counts, each
case's per-rank estimated and measured bytes, n_blocks, savings, capacity gain; or
the plan's numbers), ``allure-results/`` (build the HTML with
``python -m harness.reporting.report --results <dir>/allure-results``) and
``.hydra/`` (the composed config). A folder given outright (``hydra.run.dir``,
``hydra.sweep.dir``) must be new or empty: the run claims it when it starts
(``harness.app.claim``, a ``.lwsplit-run`` file made with ``O_EXCL``), so a second run given
the same folder, at once or later, is refused with one ``error:`` line.

Sweeps (Hydra multirun)::

    python -m harness -m model=deepseek_v32,glm_moe_dsa,qwen3_5_moe layerwise.enable=true layerwise.split_size=1,2,4
    python -m harness -m model=deepseek_v32,qwen3_5_moe layerwise=off,s2,s4 implementation=reference,xllm_upstream

Each job gets ``reports/sweeps/<date>/<time>-<run id>/<job number>/`` with its ``result.json``
(and its pytest output in ``pytest.log``); a line per job reports progress, e.g.
``[3/9] model=qwen3_5_moe layerwise.split_size=2: 7 passed, 1 xfailed (4.1 s)``. At
the end ``harness.app.callback.SweepCallback`` writes ``results.csv``, ``results.md``
and ``results.svg`` (peak per-rank KV and capacity gain against split size, one line
per model) into the sweep directory. A failed job is a row with its status (failed,
error, missing) and makes the command exit 1. Local jobs run one after another in
this process and share the rank pools. The README's figures table::

    python -m harness -m mode=plan hardware=bi_v100 \\
        model=deepseek_v3,deepseek_v32,glm_moe_dsa,qwen3_5_moe,qwen3_next,llama3_8b \\
        implementation=reference,xllm_upstream layerwise=off,s2,s4

Slurm (``pip install -e '.[slurm]'``, hydra-submitit-launcher): ``launcher=slurm``
(``conf/launcher/slurm.yaml``) submits every job of a sweep as one Slurm job with
one task and 4 GPUs on one node (the job starts its own rank processes), 60 minutes::

    python -m harness -m launcher=slurm hardware=bi_v100 hydra.launcher.partition=ilu \\
        model=deepseek_v32,qwen3_5_moe layerwise=off,s2,s4 runner.backend=nccl

Any submitit setting is an override: ``hydra.launcher.gpus_per_node=8`` (for
``parallel=dp2_tp4``), ``hydra.launcher.timeout_min=120``, ``hydra.launcher.account=A``,
``hydra.launcher.qos=Q``, ``'hydra.launcher.setup=[source .venv/bin/activate]'``. The sweep
directory must be on a file system the compute nodes share: the jobs write their
``result.json`` there and this process aggregates them when the array finishes
(submitit logs under ``<sweep dir>/.submitit/``). Progress lines then appear in each
job's log, not here.

Mistakes (unknown option, misspelled key, wrong type, an empty sweep such as
``model=``, a results directory that cannot be written, more ranks than the runner
starts) are one ``error:`` line and exit 2 before anything runs
(``harness.app.validate``). A configuration the spec refuses (FEATURE section 3) is
not one: the job runs, prints ``note: the spec refuses this configuration ...``, and
the implementation's answer is the result (``rejected`` in plan mode; in suite mode
the TCs check that the implementation under test refuses it).
"""
