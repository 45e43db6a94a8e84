"""Per-problem eval records as seeds x problems matrices, aligned on the problems every run has."""

import json

from grpo_lab.analysis import paired


def test_problem_frame_reads_final_records_and_aligns_problems(tmp_path):
    def run(name, tricks, seed, ys):
        folder = tmp_path / name / "eval"
        folder.mkdir(parents=True)
        rows = [{"task": "math", "uid": f"p{i}", "samples": 4, "passes": y, "reward_mean": y / 4} for i, y in ys]
        (folder / "problems-000010.json").write_text(json.dumps({"step": 9, "rows": rows}))
        (folder / "problems-base.json").write_text(json.dumps({"step": -1, "rows": []}))
        return {"model": "tiny", "task": "math", "tricks": tricks, "seed": seed}, tmp_path / name

    runs = [run("a", "", 0, [(0, 4), (1, 0), (2, 2)]), run("b", "", 1, [(0, 4), (1, 2), (2, 2)]),
            run("c", "kl_anneal", 0, [(0, 2), (2, 2)])]  # this run lacks p1: it is dropped for all
    arms = paired.cell_matrices(paired.problem_frame(runs))[("tiny", "math")]
    seeds, Y = arms["baseline"]
    assert seeds == (0, 1) and Y.tolist() == [[1.0, 0.5], [1.0, 0.5]]
    assert arms["kl_anneal"][1].tolist() == [[0.5, 0.5]]
