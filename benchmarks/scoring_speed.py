"""Scoring cost per answer of third-party scorers: in the trainer's process vs the scoring worker.

    python benchmarks/scoring_speed.py [--answers 256] [--rounds 3] [--isolation bwrap]

For a few reasoning-gym datasets (and math-verify), a batch of ``--answers`` answers (reference
answers and near misses, half each, all distinct) is scored two ways, alternating A B A B over
``--rounds`` rounds: ``score_answer`` called here, as the trainer used to, and ``score_rg`` /
``math_verify_equal`` (the guard, a fresh sandboxed child per answer, the strict reply; its
cache cleared before each call). One warm-up call per side first (the worker's template
start and the dataset's preparation are not counted). Prints the median milliseconds per
answer, the ratio, and whether both gave the same values.
"""

from __future__ import annotations

import argparse
import math
import statistics
import time

DATASETS = ("countdown", "spiral_matrix", "n_queens", "intermediate_integration", "leg_counting", "basic_arithmetic")
CONFIG = {"seed": 3, "size": 100_000}
MATH = [("\\frac{1}{2}", "0.5"), ("\\sqrt{8}", "2\\sqrt{2}"), ("\\{1,2\\}", "\\{2, 1\\}"), ("3", "4"),
        ("x^2+2x+1", "(x+1)^2"), ("\\pi", "3.14"), ("(1,2]", "(1, 2]"), ("10^3", "1000")]


def rg_batch(name: str, n: int):
    import reasoning_gym.factory as factory

    ds = factory.create_dataset(name, **CONFIG)
    entries, answers = [], []
    index = 0
    while len(answers) < n:
        try:
            entry = ds[index]
        except ValueError:  # countdown finds no expression for some indices
            index += 1
            continue
        reference = str(entry["answer"])
        entries += [entry, entry]
        answers += [reference, reference[:-1] + ("2" if reference.endswith("1") else "1")]
        index += 1
    return ds, entries[:n], answers[:n]


def own(ds, answer, entry) -> float:
    try:
        value = float(ds.score_answer(answer, entry))
    except Exception:
        return 0.0
    return min(max(value, 0.0), 1.0) if math.isfinite(value) else 0.0


def measure(sides: dict, rounds: int) -> tuple[dict[str, float], bool]:
    """Median seconds per call of each side (A B A B), and whether all sides agree."""
    results = {name: fn() for name, fn in sides.items()}  # warm-up
    times: dict[str, list[float]] = {name: [] for name in sides}
    for _ in range(rounds):
        for name, fn in sides.items():
            start = time.perf_counter()
            results[name] = fn()
            times[name].append(time.perf_counter() - start)
    values = list(results.values())
    return {name: statistics.median(ts) for name, ts in times.items()}, all(v == values[0] for v in values)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--answers", type=int, default=256)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--isolation", default="bwrap")
    args = parser.parse_args()
    from grpo_lab.rewards import scoring

    def worker_side(fn):
        def call():
            scoring._CACHE.clear()
            return fn()
        return call

    rows = []
    for name in DATASETS:
        ds, entries, answers = rg_batch(name, args.answers)
        sides = {"in-process": lambda: [own(ds, a, e) for a, e in zip(answers, entries)],
                 "worker": worker_side(lambda: scoring.score_rg(name, [CONFIG] * len(answers), entries, answers,
                                                                args.isolation))}
        medians, same = measure(sides, args.rounds)
        rows.append((f"rg:{name}", medians, same))
    from math_verify import parse, verify

    pairs = (MATH * (args.answers // len(MATH) + 1))[:args.answers]
    pairs = [(t, m if i < len(MATH) else f"{m} + 0 \\cdot {i}") for i, (t, m) in enumerate(pairs)]  # distinct
    sides = {"in-process": lambda: [bool(verify(parse(f"${t}$") or parse(t), parse(f"${m}$") or parse(m)))
                                    for t, m in pairs],
             "worker": worker_side(lambda: scoring.math_verify_equal([t for t, _ in pairs], [m for _, m in pairs],
                                                                     args.isolation))}
    medians, same = measure(sides, args.rounds)
    rows.append(("math-verify", medians, same))

    worker = scoring.worker_for(args.isolation)
    print(f"{args.answers} answers per batch, median of {args.rounds} rounds; worker: {args.isolation}, "
          f"{worker.workers} in flight on {worker.workers // int(worker.stretch)} cores\n")
    print(f"{'scorer':32s} {'in-process ms/answer':>21s} {'worker ms/answer':>17s} {'ratio':>8s}  same values")
    for name, medians, same in rows:
        local, sandboxed = (medians[k] * 1000 / args.answers for k in ("in-process", "worker"))
        print(f"{name:32s} {local:21.3f} {sandboxed:17.3f} {sandboxed / local:7.1f}x  {same}")


if __name__ == "__main__":
    main()
