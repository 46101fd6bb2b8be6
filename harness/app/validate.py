"""Check a ``python -m harness`` command line before Hydra starts: one ``error:`` line per mistake.

Hydra reports a bad override with a traceback-like block (and in a sweep only when
the job that uses the value runs), and a results directory it cannot create with an
``OSError``. So every override is composed here first with
``harness.config.compose.compose_config`` (the vocabulary and messages of every
harness command); a sweep's jobs are the app's sweeper's own list of them
(``sweep_jobs``: its ``split_arguments``), and each value a job takes is composed
(``model=a,b`` composes ``model=a`` and ``model=b``, each with the first value of the
other sweeps). Then the results directory (``hydra.run.dir``, or ``hydra.sweep.dir``
with ``-m``) must be creatable and writable.

Only what the schema cannot hold is refused here: unknown options and keys, wrong
types, unreadable files, an implementation that cannot be built, more ranks than the
runner can start. Nothing is planned: whether the spec refuses a configuration
(FEATURE section 3) is the implementation under test's answer, which the job reports
and the TCs check.
"""

from __future__ import annotations

import argparse
import os
import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

from hydra import __version__
from hydra.core.override_parser.types import Glob
from hydra.core.plugins import Plugins
from hydra.core.utils import setup_globals
from hydra.plugins.sweeper import Sweeper
from omegaconf import OmegaConf

from contract.errors import ConfigError
from harness.config.build import build_implementation, build_run_spec
from harness.config.compose import compose_config, hydra_compose, parse_override
from harness.config.errors import APP_GROUPS, GROUPS, empty_value, group_options
from harness.config.schema import TC_IDS
from harness.files import check_writable, remove_empty
from harness.paths import CONF_DIR
from harness.rankpool.backend import BACKENDS, check_seconds, check_world_size
from harness.usage import fail

MODES = ("suite", "plan")
MAX_SWEEP_JOBS = 1000
"""Most jobs one ``python -m harness -m`` sweep may expand to: every value is composed before the first job
runs (about 10 ms each), so ``range(1,100000)`` would be minutes of checking before a word is printed."""


@dataclass(frozen=True)
class Invocation:
    """What the command line asks Hydra for."""

    multirun: bool
    overrides: list[str]
    """Task overrides (``model=...``, ``layerwise.split_size=1,2``)."""
    hydra_overrides: list[str]
    """``hydra.*`` / ``hydra/*`` overrides."""
    check: bool
    """False for ``--help``/``--info``/``--cfg``-like calls and other config sources, which run nothing."""


INFO_CHOICES = ("all", "config", "defaults", "defaults-tree", "plugins", "searchpath")
"""``--info``'s topics, as ``@hydra.main`` takes them."""


def command_line_parser() -> argparse.ArgumentParser:
    """The options of a ``@hydra.main`` command line (Hydra 1.3's, which has no public reader of them), read
    before Hydra starts: ``-m``, ``--cfg``, ``--info``, ``--config-name``... and the overrides."""
    parser = argparse.ArgumentParser(prog="python -m harness", add_help=False, description="Hydra")
    add = parser.add_argument
    add("--help", "-h", action="store_true", help="Application's help")
    add("--hydra-help", action="store_true", help="Hydra's help")
    add("--version", action="version", help="Show Hydra's version and exit", version=f"Hydra {__version__}")
    add("overrides", nargs="*", help="Any key=value arguments to override config values (use dots for.nested=overrides)")
    add("--cfg", "-c", choices=["job", "hydra", "all"], help="Show config instead of running [job|hydra|all]")
    add("--resolve", action="store_true", help="Used in conjunction with --cfg, resolve config interpolations before printing.")
    add("--package", "-p", help="Config package to show")
    add("--run", "-r", action="store_true", help="Run a job")
    add("--multirun", "-m", action="store_true", help="Run multiple jobs with the configured launcher and sweeper")
    add("--shell-completion", "-sc", action="store_true", help="Install or Uninstall shell completion")
    add("--config-path", "-cp", help="Overrides the config_path specified in hydra.main()")
    add("--config-name", "-cn", help="Overrides the config_name specified in hydra.main()")
    add("--config-dir", "-cd", help="Adds an additional config dir to the config search path")
    add("--experimental-rerun", help="Rerun a job from a previous config pickle")
    add("--info", "-i", const="all", nargs="?", action="store", choices=list(INFO_CHOICES),
        help=f"Print Hydra information [{'|'.join(INFO_CHOICES)}]")
    return parser


def parse_argv(argv: Sequence[str]) -> Invocation:
    """The command line read with ``@hydra.main``'s options, its usage errors as one line."""
    parser = command_line_parser()

    def error(message: str):
        fail(f"{message} (see python -m harness --help)")

    parser.error = error  # type: ignore[method-assign]
    args: argparse.Namespace = parser.parse_args(list(argv))
    task, hydra = [], []
    for text in args.overrides:
        (hydra if text.lstrip("+~").startswith(("hydra.", "hydra/")) else task).append(text)
    runs_nothing = any((args.help, args.hydra_help, args.info, args.shell_completion, args.cfg, args.resolve))
    other_source = any((args.config_path, args.config_name, args.config_dir, args.experimental_rerun))
    return Invocation(multirun=bool(args.multirun), overrides=task, hydra_overrides=hydra,
                      check=not (runs_nothing or other_source))


def check_invocation(inv: Invocation) -> Optional[Path]:
    """Raise ``ConfigError`` for any mistake; returns the results directory checked."""
    if not inv.check:
        return None

    for text in inv.hydra_overrides:  # _target_ only for the callbacks this project ships (harness.config.targets)
        parse_override(text, sweep=True)
    sweeper = app_sweeper(inv.hydra_overrides) if inv.multirun else None
    jobs = check_overrides(inv.overrides, multirun=inv.multirun, sweeper=sweeper)
    return check_results_dir(jobs[0], inv.hydra_overrides, multirun=inv.multirun, n_jobs=len(jobs))


# ---- overrides ---------------------------------------------------------------------------


def check_sweep_override(text: str) -> None:
    """One override, refused where its sweep could not run: no value (``model=``), an ``interval()`` (an
    optimizing sweeper's), a ``glob()`` outside a config group or one that selects no option."""
    override = parse_override(text, sweep=True)
    if override.is_delete():
        return
    if not override.is_sweep_override():
        if override.get_value_element_as_str() == "":
            raise empty_value(CONF_DIR, override.key_or_group)
        return
    if override.is_interval_sweep():
        raise ConfigError(override.key_or_group, text.split("=", 1)[1],
                          "interval() needs an optimizing sweeper; give values a,b,c or range(start,stop)")
    value = override.value()
    if isinstance(value, Glob):
        group = override.key_or_group
        if group not in GROUPS + APP_GROUPS:
            raise ConfigError(group, text.split("=", 1)[1], "glob() only selects options of a config group")
        if not value.filter(group_options(CONF_DIR, group)):
            raise empty_value(CONF_DIR, group)
    elif not list(override.sweep_string_iterator()):
        raise empty_value(CONF_DIR, override.key_or_group)


def _glob_as_options(text: str) -> str:
    """``group=glob(...)`` as the options it selects (``group=a,b``): what Hydra's config loader gives the sweeper."""
    override = parse_override(text, sweep=True)
    value = None if override.is_delete() else override.value()
    if not isinstance(value, Glob):
        return text
    return f"{override.get_key_element()}={','.join(value.filter(group_options(CONF_DIR, override.key_or_group)))}"


def sweeper_class(target: str):
    """The Hydra sweeper class ``target`` (``hydra.sweeper._target_``) names, as Hydra finds its plugins
    (``hydra.core.plugins.Plugins.discover``); ``ConfigError`` where it has none of that name."""
    found = {f"{c.__module__}.{c.__name__}": c for c in Plugins.instance().discover(Sweeper)}
    if target not in found:
        raise ConfigError("hydra.sweeper._target_", target, f"a sweeper Hydra has: {', '.join(sorted(found))}")
    return found[target]


def sweep_jobs(overrides: Sequence[str], sweeper: str) -> list[list[str]]:
    """Every job of a ``-m`` sweep of ``overrides``, in the order the app's sweeper runs them: that sweeper's own
    expansion (its class's ``split_arguments``; ``sweeper`` is ``hydra.sweeper._target_``), on the overrides with
    each ``glob()`` of a config group given as its options. A sweep of more than ``MAX_SWEEP_JOBS`` jobs is
    refused before it is expanded."""
    split = getattr(sweeper_class(sweeper), "split_arguments", None)
    if not callable(split):
        raise ConfigError("hydra.sweeper._target_", sweeper, "a sweeper that lists its jobs (split_arguments, as "
                          "Hydra's basic sweeper): python -m harness checks every job before the first runs")
    parsed = [parse_override(_glob_as_options(text), sweep=True) for text in overrides]
    sizes = {o.get_key_element(): len(list(o.sweep_string_iterator())) if o.is_sweep_override() else 1
             for o in parsed}  # a key given twice: the last one (the sweeper's rule)
    jobs = 1
    for size in sizes.values():
        jobs *= size
    if jobs > MAX_SWEEP_JOBS:
        shown = " x ".join(str(size) for size in sizes.values() if size > 1)
        raise ConfigError("sweep", f"{jobs} jobs ({shown})", f"at most {MAX_SWEEP_JOBS} jobs in one sweep "
                          "(each value is checked before the first job; split a larger sweep)")
    return [list(job) for batch in split(parsed, None) for job in batch]


def job_axes(jobs: Sequence[Sequence[str]]) -> list[list[str]]:
    """Per position of a job's overrides, the distinct overrides the jobs have there, in order."""
    return [list(dict.fromkeys(job[i] for job in jobs)) for i in range(len(jobs[0]))] if jobs else []


def check_overrides(overrides: Sequence[str], *, multirun: bool, sweeper: Optional[str] = None) -> list[list[str]]:
    """Compose every value of every override; returns the jobs (one without ``-m``; with it, as ``sweeper``,
    the app's ``hydra.sweeper._target_``, expands the sweep)."""
    for text in overrides:
        check_sweep_override(text)
    if not multirun:
        for text in overrides:
            override = parse_override(text, sweep=True)
            if override.is_sweep_override():
                raise ConfigError(override.key_or_group, text.split("=", 1)[1],
                                  "one value here; sweeps (a,b / range()) need `python -m harness -m ...`")
        jobs = [list(overrides)]
    else:
        jobs = sweep_jobs(overrides, sweeper or app_sweeper(()))
    axes = job_axes(jobs)
    check_path_replaces_option(axes)
    for values in axes:
        for value in values:
            _check_app_group(value)
    firsts = [values[0] for values in axes]
    tried = set()
    for i, values in enumerate(axes):
        for value in values:
            job = tuple(firsts[:i] + [value] + firsts[i + 1:])
            if job not in tried:
                tried.add(job)
                check_config(list(job))
    if not axes:
        check_config([])
    return jobs


def app_sweeper(hydra_overrides: Sequence[str]) -> str:
    """``hydra.sweeper._target_`` of the app under those of ``hydra_overrides`` that choose or set the sweeper
    (``hydra/sweeper=...``, ``hydra.sweeper.*``); the others are checked with the results folder, as before."""
    hydra_overrides = [o for o in hydra_overrides if o.lstrip("+~").startswith(("hydra/sweeper", "hydra.sweeper"))]
    try:
        return str(hydra_compose(hydra_overrides, return_hydra_config=True).hydra.sweeper._target_)
    except Exception as exc:  # a bad hydra.* override: Hydra's message, first line
        text = str(exc).strip().splitlines()
        raise ConfigError("hydra override", ", ".join(hydra_overrides), "Hydra rejects it",
                          text[0] if text else type(exc).__name__) from None


PATH_KEYS = {"model": "model_path", "draft": "draft_path"}
"""Group -> the key whose config.json replaces the group's node (``harness.config.compose``)."""


def check_path_replaces_option(axes: Sequence[Sequence[str]]) -> None:
    """``model_path`` replaces the ``model`` node whichever option is chosen: with a sweep over ``model``
    every job would plan the same file while its line names another model. Refused, naming both.
    ``axes``: the values each override takes over the jobs (``job_axes``)."""
    swept = {}
    given = {}
    for values in axes:
        parsed = [parse_override(v) for v in values]
        key = parsed[0].key_or_group
        if parsed[0].is_delete():
            continue
        if key in PATH_KEYS and len(values) > 1:
            swept[key] = ",".join(o.get_value_element_as_str() for o in parsed)
        if key in PATH_KEYS.values() and not all(o.value() is None for o in parsed):
            given[key] = ",".join(o.get_value_element_as_str() for o in parsed)
    for group, path_key in PATH_KEYS.items():
        if group in swept and path_key in given:
            raise ConfigError(group, swept[group], f"one {group} per job: sweep {group}= or {path_key}=, not both",
                              f"{path_key}={given[path_key]} replaces the {group} option in every job, so each "
                              f"job would plan that file under another {group}'s name")


def check_config(overrides: list[str]) -> None:
    """Compose, check this app's keys, and build what a job builds (run spec, implementation).

    Plans nothing: a configuration the spec refuses is a test input, not a mistake.
    """
    cfg = compose_config(overrides)
    check_app_config(cfg)
    build_run_spec(cfg)
    build_implementation(cfg)
    check_runner(cfg)


def check_runner(cfg) -> None:
    """Runner keys; in suite mode, a world size the rank pool can start."""
    if cfg.runner.backend not in BACKENDS:
        raise ConfigError("runner.backend", cfg.runner.backend, f"allowed: {', '.join(BACKENDS)}")
    check_seconds("runner.timeout_s", cfg.runner.timeout_s)
    if cfg.suite.mode == "suite":
        check_world_size(cfg.parallel.world_size)


def _check_app_group(text: str) -> None:
    override = parse_override(text)
    key = override.key_or_group
    if key in APP_GROUPS and not override.is_delete():
        options = group_options(CONF_DIR, key)
        value = override.get_value_element_as_str()
        if value not in options:
            raise ConfigError(key, value, f"unknown option; allowed: {', '.join(options)}")


def check_app_config(cfg) -> None:
    """Keys only this app reads: ``suite.mode``, ``suite.tcs``, ``suite.matrix``, ``suite.departures_against``."""
    # harness.suites.matrix (35 ms, python -X importtime): --help and a bad override are one line without it
    from harness.suites.matrix import available

    if cfg.suite.mode not in MODES:
        raise ConfigError("suite.mode", cfg.suite.mode, f"allowed: {', '.join(MODES)} (or mode=plan)")
    tcs = list(cfg.suite.tcs)
    if not tcs:
        raise ConfigError("suite.tcs", tcs, f"at least one of {', '.join(TC_IDS)}")
    for tc in tcs:
        if tc not in TC_IDS:
            raise ConfigError("suite.tcs", tc, f"allowed: {', '.join(TC_IDS)}")
    if cfg.suite.matrix not in available("matrix"):
        raise ConfigError("suite.matrix", cfg.suite.matrix, f"allowed: {', '.join(available('matrix'))}")
    against = cfg.suite.get("departures_against") or ""
    if against:
        # harness.departures (3 ms, python -X importtime): read only where a run names a departures file
        from harness import departures

        try:
            departures.load(Path(against))
        except ValueError as exc:
            raise ConfigError("suite.departures_against", against, "a departures.json (or a folder holding one, or a "
                              "job's result.json) from an earlier run", str(exc)) from None


# ---- results directory ---------------------------------------------------------------------


def results_dir(job: Sequence[str], hydra_overrides: Sequence[str], *, multirun: bool) -> tuple[str, str, Path]:
    """(the key naming it, the value given for that key, the directory) Hydra will write results to."""
    key = "hydra.sweep.dir" if multirun else "hydra.run.dir"
    setup_globals()  # the ${now:...} resolver
    try:  # the app's own node (hydra.*), which only Hydra composes
        cfg = hydra_compose(list(job) + list(hydra_overrides), return_hydra_config=True)
        path = str(OmegaConf.select(cfg, key, throw_on_missing=True))
    except Exception as exc:  # a bad hydra.* override: Hydra's message, first line
        text = str(exc).strip().splitlines()
        bad = ", ".join(hydra_overrides) or key
        raise ConfigError("hydra override", bad, "Hydra rejects it", text[0] if text else type(exc).__name__) from None

    given = {o.key_or_group: o.get_value_element_as_str()
             for o in (parse_override(text) for text in list(job) + list(hydra_overrides)) if not o.is_delete()}
    if key in given:
        return key, given[key], Path(path)
    if "report.results_dir" in given:
        return "report.results_dir", given["report.results_dir"], Path(path)
    return key, path, Path(path)


def check_results_dir(job: Sequence[str], hydra_overrides: Sequence[str], *, multirun: bool,
                      n_jobs: int = 1) -> Path:
    """The results folder is a path Hydra can create and write; a sweep's job folders differ per job.
    (That no other run writes the same folder is claimed when the run starts: ``harness.app.claim``.)"""
    key, value, path = results_dir(job, hydra_overrides, multirun=multirun)
    if not str(value).strip():
        raise ConfigError(key, value, "a folder for the results",
                          "an empty path is the current folder; give a new folder, or leave it out")
    check_path_length(path, key, value)  # first: a name past the limits cannot even be looked at
    check_path_characters(path, key, value)
    check_job_name(path, hydra_overrides)
    if key in ("hydra.run.dir", "hydra.sweep.dir"):  # a folder given outright: no other run's (claimed at start)
        from harness.app.claim import check_free

        check_free(path, key, value)
    kept = check_writable(path, key, value)
    if multirun:  # each job writes into <sweep dir>/<subdir>: a subdir may point anywhere (an absolute path)
        from harness.config.compose import parse_override

        try:
            for text in hydra_overrides:
                override = parse_override(text)
                if override.key_or_group == "hydra.sweep.subdir" and not override.is_delete():
                    value = override.value()  # as given: get_value_element_as_str() escapes ${...}
                    given = value if isinstance(value, str) else override.get_value_element_as_str()
                    if not given.strip() or ("${" not in given and n_jobs > 1):
                        raise ConfigError("hydra.sweep.subdir", given, "a folder that differs per job, e.g. "
                                          "${hydra.job.num} (the default) or ${hydra.job.override_dirname}",
                                          "otherwise the jobs write over each other's results")
                    check_path_characters(Path(given), "hydra.sweep.subdir", given)
                    first_job = re.sub(r"\$\{[^}]*\}", "0", given)  # ${hydra.job.num} of the first job
                    kept += check_writable(path / first_job, "hydra.sweep.subdir", given)
        except BaseException:  # refused after all (or a signal): the first check's folders go too
            remove_empty(kept)
            raise
    return path


def check_job_name(path: Path, hydra_overrides: Sequence[str]) -> None:
    """``hydra.job.name`` names the job's log file (``<results folder>/<name>.log``): one file name that fits,
    or Hydra's logging setup fails with a traceback after the folder was claimed."""
    for text in hydra_overrides:
        override = parse_override(text)
        if override.key_or_group != "hydra.job.name" or override.is_delete():
            continue
        name = override.get_value_element_as_str()
        allowed = "a file name (no '/'), the job's log file <name>.log"
        if not name.strip() or "/" in name or "\0" in name:
            raise ConfigError("hydra.job.name", name, allowed)
        check_path_length(Path(path) / f"{name}.log", "hydra.job.name", name)
        check_path_characters(Path(name), "hydra.job.name", name)


def check_path_characters(path: Path, key: str, value: Optional[str] = None) -> None:
    """No control character (newline, tab, ESC, ...) in a path the run's lines name: a ``result:`` line or a
    results table naming a folder with a newline in it reads as two lines to every tool after."""
    text = str(path)
    bad = next((ch for ch in text if unicodedata.category(ch) == "Cc"), None)
    if bad is not None:
        raise ConfigError(key, text if value is None else value, "a path without control characters",
                          f"it holds {ascii(bad)}")


RESERVED_PATH_BYTES = 160
"""Room kept below the system's path limit for what a run writes under its folder (a sweep's job folder,
``allure-results/<uuid>-attachment.<ext>``, the report's staging folder): about 110 bytes."""


def check_path_length(path: Path, key: str, value: Optional[str] = None) -> None:
    """Every name under ``path`` a run writes fits the system's limits (``ENAMETOOLONG`` otherwise, partway
    through the run): each part of ``path`` at most NAME_MAX bytes, the whole at most PATH_MAX less
    ``RESERVED_PATH_BYTES``."""
    path = Path(path).absolute()
    value = str(path) if value is None else value
    existing = path
    while not os.path.exists(existing) and existing != existing.parent:  # False, not ENAMETOOLONG, for a long name
        existing = existing.parent
    try:
        name_max = os.pathconf(existing, "PC_NAME_MAX")
        path_max = os.pathconf(existing, "PC_PATH_MAX")
    except (OSError, ValueError):
        name_max, path_max = 255, 4096
    for part in path.parts:
        if len(os.fsencode(part)) > name_max:
            raise ConfigError(key, value, f"a path whose every part has at most {name_max} bytes",
                              f"one part has {len(os.fsencode(part))}")
    total = len(os.fsencode(str(path)))
    if total > path_max - RESERVED_PATH_BYTES:
        raise ConfigError(key, value, f"a path of at most {path_max - RESERVED_PATH_BYTES} bytes (the system's "
                                      f"limit {path_max} less room for the files a run writes there)",
                          f"it has {total}")
