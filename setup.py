"""Ships the checkout's experiments/ and runners/ inside the wheel as grpo_lab/bundled/, so a plain
`pip install` has the trick catalog, model cards, hardware and runner profiles
(grpo_lab/util/paths.py finds them there). Everything else is in pyproject.toml."""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

BUNDLED = ("experiments", "runners")


class BuildWithDefinitions(build_py):
    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):  # an editable install reads the checkout itself
            return
        for folder in BUNDLED:
            if Path(folder).is_dir():
                shutil.copytree(folder, Path(self.build_lib) / "grpo_lab" / "bundled" / folder, dirs_exist_ok=True,
                                ignore=shutil.ignore_patterns("tuned", "__pycache__", "*.pyc"))


setup(cmdclass={"build_py": BuildWithDefinitions})
