"""reasoning-gym datasets as tasks: seeded, levels from the dataset's curriculum, its own scorer."""

import pytest

from grpo_lab.tasks import make_task

pytest.importorskip("reasoning_gym")

DATASETS = ("leg_counting", "basic_arithmetic", "knights_knaves")


@pytest.mark.parametrize("dataset", DATASETS)
def test_rg_reward_is_the_datasets_score_answer(dataset):
    task = make_task(f"rg:{dataset}", "natural")
    problems = task.problems("train", 12, seed=0)
    right = task.score(problems, [f"<answer>{p.target['answer']}</answer>" for p in problems])
    wrong = task.score(problems, ["<answer>no idea</answer>"] * len(problems))
    untagged = task.score(problems, [str(p.target["answer"]) for p in problems])
    assert all(s.reward == 1.0 and s.format_ok for s in right)
    assert all(s.reward < 1.0 for s in wrong) and not any(s.format_ok for s in untagged)


def test_levels_are_the_curriculum_and_seeds_change_problems():
    task = make_task("rg:leg_counting", "natural")
    assert task.levels == 3
    animals = [len(p.target["metadata"]["animals"]) for p in task.problems("train", 30, seed=0, difficulty=2)]
    easy = [len(p.target["metadata"]["animals"]) for p in task.problems("train", 30, seed=0, difficulty=0)]
    assert max(easy) < max(animals)  # level 2 asks about more kinds of animals than level 0
    assert [p.uid for p in task.problems("train", 8, seed=0)] != [p.uid for p in task.problems("train", 8, seed=1)]


def test_unknown_dataset_is_named_with_a_suggestion():
    with pytest.raises(ValueError, match=r"unknown reasoning-gym dataset 'leg_countin'.*leg_counting"):
        make_task("rg:leg_countin")
