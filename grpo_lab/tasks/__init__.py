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

__all__ = ["TASKS", "REGISTERS", "SPLITS", "Problem", "Score", "Task", "make_task", "check_task"]


def check_task(name: str) -> None:
    """ValueError (naming the known tasks, with a suggestion) unless ``name`` resolves."""
    registry.resolve(name)


def make_task(name: str, register: str = "compact", **kw) -> Task:
    """Instantiate a task; ``kw`` goes to its constructor (levels, data_path, difficulty, ...),
    as far as a plugin's constructor takes them. Unknown names fail with the known ones."""
    return registry.construct(name, {"register": register, **kw})
