"""Scoring cost of the code sandbox: this one vs the one it replaced, side by side (A B A B).

    python benchmarks/sandbox_speed.py [--reps 6] [--gap 0.5] [--baseline ab80ad5]

The baseline is the sandbox of commit ``--baseline`` (one child process ran a whole batch, no
namespaces, grading inside the child), read from git history into a temporary folder, so both
are measured in one run on the same box. Two batches of 256 natural-register programs (reference
solutions and wrong ones mixed): "distinct" (256 different programs: no dedup helps) and "grpo"
(32 problems x 8 samples, the duplicates a GRPO group has). ``--gap`` seconds of idle time come
before each call, as generation would give in a training step; gap 0 measures back-to-back
calls, where the new sandbox forks its children on the scoring path. Prints median seconds per
call and new/old ratios. Target: new <= 1.5x old.
"""

from __future__ import annotations

import argparse
import importlib.util
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from grpo_lab.rewards.sandbox import Sandbox, compile_test
from grpo_lab.tasks.code import NATURAL_TIMEOUT_S, CodeTask, _program

ROOT = Path(__file__).resolve().parent.parent
_WRONG = "```python\ndef {name}(*args):\n    return {value!r}\n```"


def load_baseline(commit: str):
    """The old ``grpo_lab/rewards/sandbox.py`` (and its child script) as a module."""
    folder = Path(tempfile.mkdtemp(prefix="old-sandbox-"))
    for name in ("sandbox.py", "_sandbox_child.py"):
        text = subprocess.run(["git", "show", f"{commit}:grpo_lab/rewards/{name}"], cwd=ROOT,
                              check=True, capture_output=True, text=True).stdout
        (folder / name).write_text(text)
    spec = importlib.util.spec_from_file_location("old_sandbox", folder / "sandbox.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["old_sandbox"] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def batches() -> dict[str, list[tuple[str, list[str]]]]:
    """(program, tests) batches built from the natural code task, as ``CodeTask.score`` builds them."""
    task, rng = CodeTask("natural"), random.Random(0)
    problems = task.problems("train", 256, seed=0)

    def completion(p, i: int) -> str:
        name = p.target[0].split("(")[0].removeprefix("assert ").strip()
        return p.solution if i % 2 == 0 else _WRONG.format(name=name, value=i % 7)

    distinct = [(p, completion(p, i)) for i, p in enumerate(problems)]
    grpo = [(p, completion(p, rng.randrange(4))) for p in problems[:32] for _ in range(8)]
    return {name: [(_program("natural", c, list(p.target))[0], list(p.target)) for p, c in batch]
            for name, batch in {"distinct": distinct, "grpo": grpo}.items()}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=6)
    ap.add_argument("--gap", type=float, default=0.5)
    ap.add_argument("--baseline", default="ab80ad5")
    args = ap.parse_args()
    old = load_baseline(args.baseline)
    new = Sandbox("bwrap")
    work = batches()

    def run_new(programs, gap):
        compiled = [(code, [compile_test(t) for t in tests]) for code, tests in programs]
        return [sum(p) / len(p) for p in new.run(compiled, NATURAL_TIMEOUT_S)]

    def run_old(programs, gap):
        return old.run_tests(programs, timeout_s=NATURAL_TIMEOUT_S, memory_mb=256)

    run_new(work["grpo"][:8], 0)  # start the template: not what is measured
    print(f"{'batch':<10}{'gap s':>6}{'old s':>9}{'new s':>9}{'new/old':>9}  rewards equal")
    for name, programs in work.items():
        for gap in sorted({0.0, args.gap}):
            times: dict[str, list[float]] = {"old": [], "new": []}
            rewards = {}
            for _ in range(args.reps):
                for label, fn in (("old", run_old), ("new", run_new)):
                    time.sleep(gap)
                    t0 = time.perf_counter()
                    rewards[label] = fn(programs, gap)
                    times[label].append(time.perf_counter() - t0)
            o, n = statistics.median(times["old"]), statistics.median(times["new"])
            print(f"{name:<10}{gap:>6.1f}{o:>9.3f}{n:>9.3f}{n / o:>9.2f}  {rewards['old'] == rewards['new']}")
            sys.stdout.flush()
    new.close()


if __name__ == "__main__":
    main()
