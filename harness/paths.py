"""Where the harness finds its data: the one owner of every repository and package path.

In a checkout, ``conf/`` (Hydra config groups and topology fixtures) sits next to the
``harness`` package. An installed wheel carries a copy of it built from that same
folder at build time (``harness/_conf``, see ``setup.py``), and of the TC modules
(``harness/_tc``), so ``python -m harness`` and ``python -m harness.plan`` work from any
directory without a checkout; an installed harness writes its reports under the working
directory (``reports/``), never into the install folder. The recorded pre-feature baseline is
package data (``harness/baselines``) in both cases.
"""

from __future__ import annotations

from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
"""The ``harness`` package."""
REPO_ROOT = PACKAGE_DIR.parent
"""The checkout (or, installed, the site-packages folder holding the package)."""
CONFIG_NAME = "config"
"""The primary config: ``<CONF_DIR>/config.yaml``."""
_CHECKOUT_CONF = REPO_ROOT / "conf"
_PACKAGED_CONF = PACKAGE_DIR / "_conf"
IN_CHECKOUT = (_CHECKOUT_CONF / f"{CONFIG_NAME}.yaml").is_file()
"""Whether the package sits in a checkout (else: an installed wheel, its data copied in at build time)."""
CONF_DIR = _CHECKOUT_CONF if IN_CHECKOUT else _PACKAGED_CONF
"""Hydra config groups: the checkout's ``conf/``, else the copy an installed wheel carries."""
TOPOLOGY_DIR = CONF_DIR / "topology"
"""Named topology fixtures (``hardware.topology: bi_v100_pix4``)."""
BASELINE_DIR = PACKAGE_DIR / "baselines"
"""Recorded pre-feature allocation and its provenance README."""
BASELINE_PATH = BASELINE_DIR / "uniform_allocation.json"
TC_DIR = REPO_ROOT / "testcases" / "tc" if IN_CHECKOUT else PACKAGE_DIR / "_tc"
"""The TC test modules ``python -m harness mode=suite`` runs: the checkout's, else the wheel's copy."""

REPORTS_DIR = REPO_ROOT / "reports" if IN_CHECKOUT else Path("reports")
"""Default home of what a run writes (results, the Allure report and its history): the checkout's
``reports/``, else ``reports/`` of the working directory (relative: read where it is used)."""
ALLURE_RESULTS_DIR = REPORTS_DIR / "allure-results"
"""``pytest --alluredir`` results the report is built from, by default."""
ALLURE_REPORT_DIR = REPORTS_DIR / "allure-report"
"""The single-file Allure report (``index.html`` inside), by default."""
ALLURE_HISTORY_DIR = REPORTS_DIR / "allure-history"
"""Trend history carried from report to report, by default."""
LOCAL_ALLURE_CLI = REPO_ROOT / ".tools" / "allure" / "node_modules" / ".bin" / "allure"
"""The repository's pinned Allure CLI (``setup.sh`` installs it)."""
DOCS_DIR = REPO_ROOT / "docs"
"""The user documentation (Markdown pages; generated blocks inside, see ``tools.docs_blocks``)."""
FEATURE_DOC = DOCS_DIR / "FEATURE.md"
"""The spec the harness checks, kept in the repository; reports link their TCs' sections in a copy of it."""
DOCS_DATA_DIR = DOCS_DIR / "data"
"""Recorded figures (one JSON per generated block) the docs pages are rendered from."""
