"""A plain (non-editable) install works outside the checkout: the wheel carries the trick catalog,
model cards, hardware and runner profiles, and a project's own definitions extend them."""

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """A fresh venv holding only the wheel of this checkout; its dependencies come from the test
    venv's site-packages (a plain path entry: the test venv's editable finder is not loaded)."""
    tmp = tmp_path_factory.mktemp("install")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w",
                    str(tmp / "dist"), str(ROOT)], check=True, cwd=tmp)
    [wheel] = (tmp / "dist").glob("grpo_lab-*.whl")
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    site = Path(subprocess.run([str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               check=True, capture_output=True, text=True).stdout.strip())
    (site / "test-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)],
                   check=True)
    return venv


def grpo_lab(venv: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "GRPO_LAB_HOME")}
    return subprocess.run([str(venv / "bin" / "grpo-lab"), *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=600)


def test_the_installed_package_is_not_the_checkout(installed, tmp_path):
    out = subprocess.run([str(installed / "bin" / "python"), "-c", "import grpo_lab; print(grpo_lab.__file__)"],
                         cwd=tmp_path, capture_output=True, text=True, check=True).stdout
    assert not Path(out.strip()).is_relative_to(ROOT)


def test_tricks_plan_and_a_two_step_run_from_a_folder_outside_the_checkout(installed, tmp_path):
    tricks = grpo_lab(installed, tmp_path, "tricks", "--json")
    assert tricks.returncode == 0, tricks.stderr
    assert {"group_size_16", "ema_reference"} <= set(json.loads(tricks.stdout))
    (tmp_path / "m.yaml").write_text("name: outside\nmodels: [tiny]\ntasks: [math]\nseeds: [0]\n"
                                     "tricks: [baseline, {singles: [ema_reference]}]\nbase: {steps: 4}\n")
    plan = grpo_lab(installed, tmp_path, "plan", "m.yaml", "--json")
    assert plan.returncode == 0, plan.stderr
    assert '"cells": 2' in plan.stdout
    card = tmp_path / "tiny-fast.yaml"
    shutil.copy(ROOT / "tests" / "data" / "tiny-fast.yaml", card)
    run = grpo_lab(installed, tmp_path, "run", "--set", f"model={card}", "--set", "steps=2", "--set", "levels=2",
                   "--set", "eval.every=2", "--set", "eval.problems=4", "--set", "sampling.prompts_per_step=2",
                   "--set", "sampling.group_size=2", "--set", "sampling.max_new_tokens=4", "--out", str(tmp_path / "run"))
    assert run.returncode == 0, run.stdout + run.stderr
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["steps"] == 2


def test_a_project_adds_its_own_trick_and_model_card(installed, tmp_path):
    (tmp_path / "experiments" / "models").mkdir(parents=True)
    shutil.copy(ROOT / "tests" / "data" / "tiny-fast.yaml", tmp_path / "experiments" / "models" / "mine.yaml")
    (tmp_path / "experiments" / "tricks.yaml").write_text(
        "tricks:\n  my_trick:\n    dimension: kl\n    settings: {kl: {beta: 0.02}}\n    description: our own\n")
    tricks = json.loads(grpo_lab(installed, tmp_path, "tricks", "--json").stdout)
    assert tricks["my_trick"]["description"] == "our own" and "group_size_16" in tricks  # merged, not replaced
    (tmp_path / "m.yaml").write_text("models: [mine]\ntasks: [math]\nseeds: [0]\ntricks: [baseline, {singles: [my_trick]}]\n")
    plan = grpo_lab(installed, tmp_path, "plan", "m.yaml")
    assert plan.returncode == 0, plan.stdout + plan.stderr
    assert "mine" in plan.stdout and "my_trick" in plan.stdout
