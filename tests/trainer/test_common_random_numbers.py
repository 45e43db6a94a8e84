"""Common random numbers across arms: the same seed index gives every arm the same test problems,
the same prompt order and the same sampling streams wherever its trick leaves them alone, so
arm-to-arm differences are not drowned in draw-to-draw noise (analysis/paired.py relies on it)."""

import json

from grpo_lab.trainer.grpo import train
from grpo_lab.trainer.setup import setup


def prompt_order(run, steps: int = 6) -> list[str]:
    return [p.uid for step in range(steps) for p in run.curriculum.sample(step, run.cfg.sampling.prompts_per_step)]


def first_rollout(run) -> list[str]:
    problems = run.curriculum.sample(0, run.cfg.sampling.prompts_per_step)
    prompts = [run.codec.encode(run.codec.format_prompt(p.prompt)) for p in problems]
    s = run.cfg.sampling
    return run.engine.generate(prompts, s.group_size, s.temperature, s.top_p, s.max_new_tokens,
                               seed=run.seed_for(0)).texts(run.codec)


def test_arms_of_one_seed_share_prompts_and_sampling_streams(tmp_path, make_cfg):
    def fresh(seed: int, *tricks: str):
        return setup(make_cfg(seed=seed, tricks=list(tricks)), tmp_path / f"{seed}-{'+'.join(tricks)}")

    order = prompt_order(fresh(3))
    assert prompt_order(fresh(3, "lr_warmup")) == order  # touches the optimiser only
    assert prompt_order(fresh(3, "group_size_16")) == order  # touches G, not which prompts
    assert prompt_order(fresh(4)) != order  # a different seed index is a different draw
    base, warm = fresh(3), fresh(3, "lr_warmup")
    assert [base.seed_for(s, r) for s in range(5) for r in range(2)] == \
        [warm.seed_for(s, r) for s in range(5) for r in range(2)]
    assert first_rollout(base) == first_rollout(warm)  # same weights at step 0, same stream, same samples
    assert first_rollout(base) != first_rollout(fresh(4))
    uids = [p.uid for p in base.eval_problems["math"]]
    assert [p.uid for p in fresh(4, "group_size_16").eval_problems["math"]] == uids  # one test set for all


def test_eval_writes_per_problem_records_shared_by_arms(tmp_path, make_cfg):
    train(make_cfg(seed=1, steps=2), tmp_path / "a")
    train(make_cfg(seed=1, steps=2, tricks=["lr_warmup"]), tmp_path / "b")
    files = sorted(p.name for p in (tmp_path / "a" / "eval").iterdir())
    assert files == ["problems-000002.json", "problems-base.json"]
    a = json.loads((tmp_path / "a" / "eval" / "problems-000002.json").read_text())["rows"]
    b = json.loads((tmp_path / "b" / "eval" / "problems-000002.json").read_text())["rows"]
    assert len(a) == 8 and [r["uid"] for r in a] == [r["uid"] for r in b]
    assert all(r["samples"] == 2 and 0 <= r["passes"] <= 2 and 0.0 <= r["reward_mean"] <= 1.0 for r in a)
    base_a = json.loads((tmp_path / "a" / "eval" / "problems-base.json").read_text())["rows"]
    base_b = json.loads((tmp_path / "b" / "eval" / "problems-base.json").read_text())["rows"]
    assert base_a == base_b  # before training, same model and eval stream: identical records
