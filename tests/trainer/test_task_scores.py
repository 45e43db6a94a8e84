"""A task whose grading raises never raises into training: the completions that break it score 0."""

import warnings

from grpo_lab.tasks import make_task
from grpo_lab.tasks.base import Problem
from grpo_lab.trainer import scoring


class _Fragile:
    """The real math task, except that grading a completion holding "BOOM" raises, as a grader bug would."""

    name = "fragile-math"

    def __init__(self):
        self.inner = make_task("math", "natural")

    def score(self, problems, completions):
        if any("BOOM" in c for c in completions):
            raise ValueError("grader bug")
        return self.inner.score(problems, completions)


def test_a_raising_completion_scores_zero_and_its_mates_keep_their_scores():
    task = _Fragile()
    problem = Problem("math/natural/train/0", "math", "q", "4", "", 0)
    completions = ["<answer>4</answer>", "<answer>BOOM</answer>", "<answer>3</answer>", "\\boxed{4}"]
    honest = task.inner.score([problem] * 4, completions)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        scores = scoring.task_scores(task, [problem] * 4, completions)
        again = scoring.task_scores(task, [problem] * 4, completions)
    assert [s.reward for s in scores] == [1.0, 0.0, 0.0, 1.0] == [s.reward for s in again]
    assert [s.format_ok for s in scores] == [True, False, True, True]
    assert scores[0] == honest[0] and scores[3] == honest[3]
    assert sum("grading raised ValueError" in str(w.message) for w in caught) == 1  # once per task


def test_a_batch_that_grades_cleanly_is_the_task_s_own_scores():
    task = make_task("math", "natural")
    problem = Problem("math/natural/train/0", "math", "q", "4", "", 0)
    completions = ["<answer>4</answer>", "<answer>1e5000</answer>", "<answer>3 or 4</answer>"]
    assert scoring.task_scores(task, [problem] * 3, completions) == task.score([problem] * 3, completions)
