"""Build hook: a wheel carries a copy of ``conf/`` as ``harness/_conf``, made from it at build time.

The harness reads ``conf/`` of the checkout when there is one (``harness.paths``); an
installed wheel has no checkout, so ``build_py`` copies the folder into the built
package. The copy is never edited apart: it exists only in the build output.
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


setup(cmdclass={"build_py": BuildPyWithConf})
