"""Task registry: ``make_task("math", register="compact")``, ``make_task("rg:leg_counting")``,
``make_task("my_pkg.tasks:GeoTask")`` and friends (see ``registry``)."""

from __future__ import annotations

from grpo_lab.tasks import registry
from grpo_lab.tasks.base import REGISTERS, SPLITS, Problem, Score, Task
from grpo_lab.tasks.code import CodeTask
from grpo_lab.tasks.logic import LogicTask
from grpo_lab.tasks.math import MathTask

# The generated built-ins (what budget estimates and presets know); every other name goes
# through registry.resolve.
TASKS: dict[str, type] = {"math": MathTask, "code": CodeTask, "logic": LogicTask}

__all__ = ["TASKS", "REGISTERS", "SPLITS", "Problem", "Score", "Task", "make_task", "check_task", "task_options"]


def check_task(name: str) -> None:
    """ValueError (naming the known tasks, with a suggestion) unless ``name`` resolves."""
    registry.resolve(name)


def make_task(name: str, register: str = "compact", **kw) -> Task:
    """Instantiate a task; ``kw`` goes to its constructor (levels, data_path, difficulty, ...),
    as far as a plugin's constructor takes them. Unknown names fail with the known ones."""
    return registry.construct(name, {"register": register, **kw})


def task_options(cfg, name: str) -> dict:
    """Constructor options of one task of the run (a RunConfig); None means "the task's default",
    so a plugin whose constructor lacks an option still runs while the config leaves it unset."""
    options = {"data_path": cfg.data_path, "data": cfg.data, "difficulty": cfg.difficulty, "levels": cfg.levels}
    if name in ("code", "humaneval") or name.startswith("rg:"):
        options["sandbox"] = cfg.sandbox
    if name == "math" and cfg.reward.verifier != "extract":
        options["verifier"] = cfg.reward.verifier
        options["sandbox"] = cfg.sandbox
    if name.startswith("rg:") and cfg.reward.scoring != "strict":
        options["scoring"] = cfg.reward.scoring
    return {k: v for k, v in options.items() if v is not None or k in ("data_path", "difficulty")}
