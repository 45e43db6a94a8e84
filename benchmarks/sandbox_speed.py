"""Scoring cost of the code sandbox: this tree's sandbox vs an earlier commit's, side by side.

    python benchmarks/sandbox_speed.py [--rounds 3] [--reps 3] [--gap 0.5] [--baseline 0a82059]

The baseline commit is checked out into a temporary git worktree. Each side runs in a process
of its own (this script with ``--side``), importing the sandbox from its tree, and the two
alternate A B A B over ``--rounds`` rounds on the same batches. Two batches of 256
natural-register programs (reference solutions and wrong ones mixed): "distinct" (256
different programs: no dedup helps) and "grpo" (32 problems x 8 samples, the duplicates a GRPO
group has). ``--gap`` seconds of idle time come before each call, as generation gives in a
training step; gap 0 measures back-to-back calls, where children are forked on the scoring
path. Prints median wall seconds and CPU seconds (trainer, template and children) per call,
new/old ratios and whether both sides gave the same rewards. Target: new <= 1.2x old (0a82059: before every program's process was killed and seen
reaped on its verdict, the cgroup, and the linear-cost judge).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_WRONG = "```python\ndef {name}(*args):\n    return {value!r}\n```"


def batches() -> dict[str, list[tuple[str, list[str]]]]:
    """(program, tests) batches built from the natural code task, as ``CodeTask.score`` builds them."""
    from grpo_lab.tasks.code import CodeTask, _program

    task, rng = CodeTask("natural"), random.Random(0)
    problems = task.problems("train", 256, seed=0)

    def completion(p, i: int) -> str:
        name = p.target[0].split("(")[0].removeprefix("assert ").strip()
        return p.solution if i % 2 == 0 else _WRONG.format(name=name, value=i % 7)

    distinct = [(p, completion(p, i)) for i, p in enumerate(problems)]
    grpo = [(p, completion(p, rng.randrange(4))) for p in problems[:32] for _ in range(8)]
    return {name: [(_program("natural", c, list(p.target))[0], list(p.target)) for p, c in batch]
            for name, batch in {"distinct": distinct, "grpo": grpo}.items()}


def sandbox_cpu(box) -> float:
    """CPU seconds the box's template and the children it has reaped used so far (bwrap's
    own processes only wait)."""
    def tree(pid: int) -> list[int]:
        try:
            kids = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        except OSError:
            kids = []
        return [pid] + [p for k in kids for p in tree(int(k))]

    for pid in tree(box._proc.pid):  # parents first: the template before its children
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes()
            if b"_zygote.py" in command and not command.startswith(b"bwrap"):
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
                return sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")  # utime stime cutime cstime
        except OSError:
            continue
    raise LookupError("no template process")


def side(tree: str, work_file: str, gaps: list[float], reps: int) -> None:
    """Measure the sandbox of ``tree`` (this process only): prints {batch/gap: [seconds], rewards}."""
    sys.meta_path[:] = [f for f in sys.meta_path if "editable" not in type(f).__module__ + str(f)]
    sys.path.insert(0, tree)
    from grpo_lab.rewards.sandbox import Sandbox, compile_test

    assert Path(sys.modules["grpo_lab"].__file__).resolve().is_relative_to(Path(tree).resolve())
    timeout = 2.0
    box = Sandbox("bwrap")
    work = json.loads(Path(work_file).read_text())
    compiled = {name: [(c, [compile_test(t) for t in ts]) for c, ts in programs] for name, programs in work.items()}
    box.run(compiled["grpo"][:8], timeout)  # start the template: not what is measured
    out: dict = {}
    for name, programs in compiled.items():
        for gap in gaps:
            key = f"{name}/{gap}"
            out[key], out[f"{key}/cpu"] = [], []
            for _ in range(reps):
                before = sandbox_cpu(box)  # the gap's forks count: the sandbox does them for this call
                time.sleep(gap)
                start, trainer = time.perf_counter(), time.process_time()
                passed = box.run(programs, timeout)
                out[key].append(time.perf_counter() - start)
                out[f"{key}/cpu"].append(time.process_time() - trainer + sandbox_cpu(box) - before)
            out[f"{key}/rewards"] = [sum(p) / len(p) if p else 0.0 for p in passed]
    box.close()
    print(json.dumps(out))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--gap", type=float, default=0.5)
    ap.add_argument("--baseline", default="0a82059")
    ap.add_argument("--side", help=argparse.SUPPRESS)
    ap.add_argument("--work", help=argparse.SUPPRESS)
    args = ap.parse_args()
    gaps = sorted({0.0, args.gap})
    if args.side:
        return side(args.side, args.work, gaps, args.reps)
    with tempfile.TemporaryDirectory(prefix="sandbox-speed-") as tmp:
        old_tree = str(Path(tmp) / "old")
        subprocess.run(["git", "worktree", "add", "--detach", old_tree, args.baseline], cwd=ROOT, check=True,
                       capture_output=True)
        work = Path(tmp) / "work.json"
        work.write_text(json.dumps(batches()))
        try:
            results: dict[str, dict[str, list]] = {"old": {}, "new": {}}
            for _ in range(args.rounds):
                for label, tree in (("old", old_tree), ("new", str(ROOT))):
                    cmd = [sys.executable, __file__, "--side", tree, "--work", str(work), "--gap", str(args.gap),
                           "--reps", str(args.reps)]
                    measured = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
                    for key, value in measured.items():
                        results[label].setdefault(key, []).extend(value if not key.endswith("rewards") else [value])
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", old_tree], cwd=ROOT, capture_output=True)
    print(f"baseline {args.baseline}; {args.rounds} rounds x {args.reps} calls per side, A B A B")
    print("wall: seconds per call; CPU: CPU seconds per call (trainer, template, children: what other load on")
    print("the machine changes least)")
    print(f"{'batch':<10}{'gap s':>6}{'old s':>9}{'new s':>9}{'new/old':>9}{'old CPU':>9}{'new CPU':>9}{'new/old':>9}"
          "  rewards equal")
    for name in ("distinct", "grpo"):
        for gap in gaps:
            key = f"{name}/{gap}"
            o, n = statistics.median(results["old"][key]), statistics.median(results["new"][key])
            oc, nc = statistics.median(results["old"][f"{key}/cpu"]), statistics.median(results["new"][f"{key}/cpu"])
            same = results["old"][f"{key}/rewards"][-1] == results["new"][f"{key}/rewards"][-1]
            print(f"{name:<10}{gap:>6.1f}{o:>9.3f}{n:>9.3f}{n / o:>9.2f}{oc:>9.3f}{nc:>9.3f}{nc / oc:>9.2f}  {same}")


if __name__ == "__main__":
    main()
