"""grpo-lab's trainer side by side with TRL's GRPOTrainer on one workload, printed as tables.

    python benchmarks/peer_trl.py speed [--rounds 2 --steps 3]
    python benchmarks/peer_trl.py learn [--seeds 0,1 --steps 60 --lr 1e-6 --problems 64 --workdir DIR]
    python benchmarks/peer_trl.py show --workdir DIR     # the tables and curves.png of a finished learn

Needs TRL (`pip install -e ".[bench]"`). Each side runs in its own process (benchmarks/peer_sides.py,
which defines the shared workload), alternately, A B A B, so both see the same state of a box
whose speed drifts: speed prints each round's median seconds per step and the TRL / grpo-lab
ratio, then the ratio of the medians over all rounds. learn trains both on the same problems with
the same lr and steps for each seed, and prints test pass@1 before and after with 95% bootstrap
intervals over the test problems (seeds averaged per problem; every run is evaluated on the same
problems), and the gain of grpo-lab minus the gain of TRL, paired by problem; then the training
reward per step of both (mean over seeds) as a table and DIR/curves.png.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent
SIDES = ("grpo-lab", "trl")


def side(name: str, mode: str, *args: str) -> dict:
    cmd = [sys.executable, str(ROOT / "benchmarks" / "peer_sides.py"), name, mode, *args]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    results = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    if done.returncode or not results:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{done.stderr[-3000:]}")
    return json.loads(results[-1].removeprefix("RESULT "))


def speed(rounds: int, steps: int) -> None:
    table = Table(title=f"seconds per GRPO step, SmolLM2-135M fp32, 4 prompts x G=8 x 64 tokens ({steps} steps each)")
    for col in ("round", "grpo-lab s/step", "TRL s/step", "TRL / grpo-lab"):
        table.add_column(col, justify="right")
    every = {s: [] for s in SIDES}
    for r in range(rounds):
        med = {}
        for name in SIDES:
            times = side(name, "speed", "--steps", str(steps))["step_s"]
            every[name] += times
            med[name] = statistics.median(times)
            print(f"round {r + 1} {name}: {', '.join(f'{t:.1f}' for t in times)} s", flush=True)
        table.add_row(str(r + 1), f"{med['grpo-lab']:.1f}", f"{med['trl']:.1f}", f"{med['trl'] / med['grpo-lab']:.2f}x")
    a, b = statistics.median(every["grpo-lab"]), statistics.median(every["trl"])
    table.add_row("all", f"{a:.1f}", f"{b:.1f}", f"{b / a:.2f}x")
    Console().print(table)


def per_problem(out: Path, name: str) -> dict[str, float]:
    """Pass rate per distinct test problem: a small pool (level 0 holds 22) is drawn with repeats,
    whose samples are pooled rather than letting the last draw stand for the problem."""
    counts: dict[str, list[int]] = {}
    for r in json.loads((out / "eval" / f"problems-{name}.json").read_text())["rows"]:
        c = counts.setdefault(r["uid"], [0, 0])
        c[0], c[1] = c[0] + r["passes"], c[1] + r["samples"]
    return {uid: passes / samples for uid, (passes, samples) in counts.items()}


def bootstrap(values: np.ndarray, reps: int = 4000, seed: int = 0) -> tuple[float, float, float]:
    """Mean of per-problem values and its 95% percentile-bootstrap interval over problems."""
    idx = np.random.default_rng(seed).integers(0, len(values), (reps, len(values)))
    means = values[idx].mean(axis=1)
    return float(values.mean()), float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


def learn(seeds: list[int], steps: int, lr: float, problems: int, workdir: Path) -> None:
    for seed in seeds:
        for name in SIDES:  # A B per seed: both sides see the box in the same state
            out = workdir / f"{name}-seed{seed}"
            res = side(name, "learn", "--steps", str(steps), "--seed", str(seed), "--lr", str(lr),
                       "--problems", str(problems), "--out", str(out))
            print(f"{name} seed {seed}: pass@1 {res['base']:.3f} -> {res['final']:.3f} ({res['wall_s']:.0f} s)", flush=True)
    show(workdir)


def train_curve(out: Path, name: str) -> np.ndarray:
    """Mean training reward of each step: grpo-lab's metrics log, or TRL's log history."""
    if name == "trl":
        rows = json.loads((out / "trl_curve.json").read_text())
    else:
        rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
        rows = [{"step": r["step"], "reward": r["reward/mean"]} for r in rows if "reward/mean" in r]
    return np.array([r["reward"] for r in sorted(rows, key=lambda r: r["step"])])


def show(workdir: Path) -> None:
    """Tables (pass@1 before/after with CIs; training-reward curve) and curves.png from a learn workdir."""
    runs = {s: sorted(workdir.glob(f"{s}-seed*")) for s in SIDES}
    cfg = json.loads((runs["grpo-lab"][0] / "config.json").read_text())
    title = f"{cfg['steps']} steps, lr {cfg['optim']['lr']:g}"
    final = max(p.stem.removeprefix("problems-") for p in (runs["grpo-lab"][0] / "eval").glob("problems-0*.json"))
    uids = sorted(per_problem(runs["grpo-lab"][0], "base"))
    table = Table(title=f"test pass@1, SmolLM2-135M natural math level 0: {title}, {len(runs['trl'])} seeds, "
                        f"{len(uids)} distinct problems (95% bootstrap CI over them)")
    for col in ("trainer", "before", "after", "gain"):
        table.add_column(col, justify="right")
    gains = {}
    for name in SIDES:
        tables = {k: np.array([[per_problem(o, k)[u] for u in uids] for o in runs[name]]).mean(axis=0)
                  for k in ("base", final)}
        gains[name] = tables[final] - tables["base"]
        cells = [bootstrap(v) for v in (tables["base"], tables[final], gains[name])]
        table.add_row(name, *(f"{m:.3f} [{lo:.3f}, {hi:.3f}]" for m, lo, hi in cells))
    m, lo, hi = bootstrap(gains["grpo-lab"] - gains["trl"])
    table.add_row("grpo-lab - TRL", "", "", f"{m:+.3f} [{lo:+.3f}, {hi:+.3f}]")
    Console().print(table)
    curves = {name: np.mean([train_curve(o, name) for o in runs[name]], axis=0) for name in SIDES}
    plot_curves(curves, workdir / "curves.png", title)


def plot_curves(curves: dict[str, np.ndarray], path: Path, title: str, window: int = 5) -> None:
    """Training reward per step (mean over seeds) in windows of `window` steps: a table and a PNG."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = len(curves["grpo-lab"])
    window = min(window, steps)
    table = Table(title=f"training reward (mean of 32 samples per step, over seeds), {window}-step windows")
    table.add_column("steps", justify="right")
    for name in SIDES:
        table.add_column(name, justify="right")
    for lo in range(0, steps, window):
        table.add_row(f"{lo}-{min(lo + window, steps) - 1}", *(f"{curves[n][lo:lo + window].mean():.3f}" for n in SIDES))
    Console().print(table)
    fig, ax = plt.subplots(figsize=(6, 3.5))
    for name in SIDES:
        ax.plot(curves[name], alpha=0.35)
        smooth = np.convolve(curves[name], np.ones(window) / window, mode="valid")
        ax.plot(np.arange(window - 1, len(curves[name])), smooth, label=f"{name} ({window}-step mean)",
                color=ax.lines[-1].get_color())
    ax.set(xlabel="step", ylabel="training reward", title=f"SmolLM2-135M math, {title}")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"wrote {path}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["speed", "learn", "show"])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--steps", type=int, default=None, help="speed: timed steps per side (3); learn: steps (60)")
    ap.add_argument("--seeds", default="0,1")
    ap.add_argument("--lr", type=float, default=1e-6)
    ap.add_argument("--problems", type=int, default=64)
    ap.add_argument("--workdir", type=Path, default=None, help="learn: where runs go; show: a learn workdir")
    a = ap.parse_args()
    if a.mode == "speed":
        speed(a.rounds, a.steps or 3)
    elif a.mode == "show":
        show(a.workdir)
    else:
        learn([int(s) for s in a.seeds.split(",")], a.steps or 60, a.lr, a.problems,
              a.workdir or Path(tempfile.mkdtemp(prefix="peer-trl-")))


if __name__ == "__main__":
    main()
