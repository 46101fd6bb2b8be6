"""Build hook: a wheel carries a copy of ``conf/`` as ``harness/_conf`` and of the TC modules
(``testcases/tc/test_tc*.py``) as ``harness/_tc``, made from them at build time.

The harness reads ``conf/`` and ``testcases/tc`` of the checkout when there is one
(``harness.paths``); an installed wheel has no checkout, so ``build_py`` copies them into
the built package (``_tc`` with a ``pytest.ini`` of its own, so that ``python -m harness``
runs them under no ini file found above the install folder). The copies are never edited
apart: they exist only in the build output.
Everything else is declared in ``pyproject.toml``.
"""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent


class BuildPyWithConf(build_py):
    def run(self):
        super().run()
        if self.editable_mode:  # an editable install reads the checkout's conf/ itself
            return
        target = Path(self.build_lib) / "harness" / "_conf"
        if target.exists():
            shutil.rmtree(target)
        shutil.copytree(ROOT / "conf", target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        tc = Path(self.build_lib) / "harness" / "_tc"
        if tc.exists():
            shutil.rmtree(tc)
        tc.mkdir()
        for path in sorted((ROOT / "testcases" / "tc").glob("test_tc*.py")):
            shutil.copy2(path, tc / path.name)
        (tc / "__init__.py").write_text('"""The TC modules ``python -m harness`` runs, copied from testcases/tc at build time."""\n')
        (tc / "pytest.ini").write_text("# harness/_tc: the TC modules of an installed harness (see setup.py)\n[pytest]\n")


setup(cmdclass={"build_py": BuildPyWithConf})
