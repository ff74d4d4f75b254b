"""Packaging hook (the metadata is in pyproject.toml): a built wheel carries the checkout's data
folders inside the package, under kernelevolve/bundled/, where kernelevolve.paths finds them. An
editable install reads them from the checkout instead."""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

BUNDLED = ("harness_templates", "knowledge_base", "specs")


class BuildWithData(build_py):
    def run(self):
        super().run()
        if getattr(self, "editable_mode", False):
            return
        root = Path(__file__).resolve().parent
        for name in BUNDLED:
            target = Path(self.build_lib) / "kernelevolve" / "bundled" / name
            shutil.rmtree(target, ignore_errors=True)
            shutil.copytree(root / name, target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))


setup(cmdclass={"build_py": BuildWithData})
