"""``--alluredir`` from the environment, for the top-level pytest run only.

CI sets ``LW_ALLUREDIR`` and runs the README's test command unchanged. The controller
takes the directory (unless ``--alluredir`` was given) and removes the variable, so a
pytest that a test starts in a subprocess (the bad-input, fault and report tests do)
writes no results into the run's folder; xdist workers get it through their
``workerinput`` instead of the environment.
"""

from __future__ import annotations

import os

ENV = "LW_ALLUREDIR"
_KEY = "lw_alluredir"


def take(config) -> None:
    """At configure, before allure-pytest's: set ``--alluredir`` from the variable or the controller."""
    workerinput = getattr(config, "workerinput", None)
    chosen = workerinput.get(_KEY) if workerinput is not None else os.environ.pop(ENV, None)
    if chosen and not getattr(config.option, "allure_report_dir", None):
        config.option.allure_report_dir = chosen


def hand_to_worker(node) -> None:
    """``pytest_configure_node`` (xdist): the worker reports into the controller's directory."""
    chosen = getattr(node.config.option, "allure_report_dir", None)
    if chosen:
        node.workerinput[_KEY] = chosen
