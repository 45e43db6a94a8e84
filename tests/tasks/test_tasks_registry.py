"""Task registry: names, registers, and helpful errors."""

import pytest

from grpo_lab.tasks import TASKS, make_task
from grpo_lab.tasks.base import Task


@pytest.mark.parametrize("name", sorted(TASKS))
@pytest.mark.parametrize("register", ["compact", "natural"])
def test_make_task_builds_every_task(name, register):
    task = make_task(name, register, difficulty=1)
    assert isinstance(task, Task)
    assert (task.name, task.register, task.difficulty) == (name, register, 1)


def test_unknown_task_names_known_ones_and_suggests():
    with pytest.raises(ValueError) as info:
        make_task("mathh")
    message = str(info.value)
    assert "'mathh'" in message and "code, humaneval, logic, math" in message and "did you mean 'math'" in message
    assert "rg:<dataset>" in message and "my_pkg.tasks:MyTask" in message
    with pytest.raises(ValueError, match="tasks: ") as info:
        make_task("zzz")
    assert "did you mean" not in str(info.value)


def test_unknown_register_fails():
    with pytest.raises(ValueError, match="register"):
        make_task("logic", "chat")


def test_plugin_task_errors_are_one_line():
    with pytest.raises(ValueError, match="no module named 'no_such_pkg'"):
        make_task("no_such_pkg.tasks:Geo")
    with pytest.raises(ValueError, match="file path must be relative"):
        make_task("/abs/tasks.py:Geo")
    with pytest.raises(ValueError, match="is not a class following grpo_lab.tasks.base.Task"):
        make_task("tests/plugins/rewards_file.py:brevity")
