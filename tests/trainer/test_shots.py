"""prompt_shots' demonstrations: solved training problems of the run's tasks, never a test problem."""

from grpo_lab.spec.config import RunConfig
from grpo_lab.tasks import make_task, task_options
from grpo_lab.trainer.setup import demonstrations, eval_problems


def natural_tasks(cfg: RunConfig) -> dict:
    return {n: make_task(n, register="natural", **task_options(cfg, n)) for n in cfg.tasks}


def test_shots_take_the_tasks_in_turn_from_training_problems_whatever_the_seed():
    cfg = RunConfig(model="smollm2-135m", task=["math", "logic"], difficulty=0, prompt_shots=3,
                    eval={"problems": 400, "samples": 1, "k": [1]})
    tasks = natural_tasks(cfg)
    shots = demonstrations(cfg, tasks)
    assert len(shots) == 3 and len(set(shots)) == 3
    kinds = ["number inside" in prompt for prompt, _ in shots]  # math's instruction asks for a number
    assert kinds == [True, False, True]
    assert all("<answer>" in solution for _, solution in shots)  # a demonstration of the marks graded
    tests = {p.prompt for probs in eval_problems(cfg, tasks).values() for p in probs}
    assert len(tests) > 20 and not tests & {prompt for prompt, _ in shots}
    assert demonstrations(cfg.model_copy(update={"seed": 7}), tasks) == shots
