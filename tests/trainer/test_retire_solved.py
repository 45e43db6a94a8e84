"""Retiring solved prompts (ScaleRL's no-positive-resampling) in the curriculum."""

from grpo_lab.spec.config import CurriculumConfig
from grpo_lab.tasks.base import Problem
from grpo_lab.trainer.curriculum import Curriculum, live, solved


def problem(uid: str) -> Problem:
    return Problem(uid, "math", f"{uid}=", "0", "0", 0)


class ThreeProblems:
    name, register, levels = "math", "compact", 1

    def problems(self, split, n, seed, difficulty=None):
        return [problem("a"), problem("b"), problem("c")]


def test_solved_is_a_group_pass_rate_at_or_above_the_threshold():
    a, b, c = problem("a"), problem("b"), problem("c")
    # 7/8 = 0.875 stays, 0.9 (at the threshold) and 8/8 go
    assert solved([a, b, c], [0.875, 0.9, 1.0], 0.9) == {"b", "c"}
    assert solved([a, b, c], [0.875, 0.9, 1.0], None) == set()


def test_live_drops_retired_problems_until_the_pool_is_gone():
    pool = [problem("a"), problem("b")]
    assert [p.uid for p in live(pool, {"a"})] == ["b"]
    assert live(pool, {"a", "b"}) == pool  # an exhausted arm draws from all again
    assert live(pool, set()) == pool


def test_a_retired_problem_is_not_drawn_again_and_survives_a_checkpoint():
    cur = Curriculum([ThreeProblems()], CurriculumConfig(retire_at=0.9), 10, 0, None, 3)
    cur.retire([problem("a"), problem("b")], [1.0, 0.5])
    assert {p.uid for p in cur.sample(0, 200)} == {"b", "c"}
    assert cur.metrics(0)["curriculum/retired"] == 1.0
    again = Curriculum([ThreeProblems()], CurriculumConfig(retire_at=0.9), 10, 0, None, 3)
    again.load_state_dict(cur.state_dict())
    assert again.retired == {"a"}


def test_off_by_default_draws_as_before():
    on = Curriculum([ThreeProblems()], CurriculumConfig(), 10, 0, None, 3)
    off = Curriculum([ThreeProblems()], CurriculumConfig(), 10, 0, None, 3)
    on.retire([problem("a")], [1.0])
    assert [p.uid for p in on.sample(0, 50)] == [p.uid for p in off.sample(0, 50)]
    assert "curriculum/retired" not in on.metrics(0)
