"""Config of what a team brings: its reward functions (`reward.functions`) and its data (`data`).

Both are checked when the config loads, so a missing module, a wrong signature or a data file
that is not there is an error naming the config key before anything runs.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from grpo_lab.util.validate import Strict

TASK_REWARD = "task"  # reward.functions entry meaning the task's own score
DATA_FORMATS = ("jsonl", "parquet", "csv", "hf_disk")


class RewardFunctionConfig(Strict):
    """One reward function with TRL's signature f(prompts, completions, **columns) -> list[float | None]."""

    function: str = Field(description="'my_pkg.rewards:exact_match', 'path/to/rewards.py:exact_match', "
                                      "or 'task' for the task's own score")
    weight: float = Field(1.0, description="multiplies the function's values before they are summed")
    name: str | None = Field(None, description="metric name reward/<name>; default: the function's name")
    role: Literal["main", "shape"] = Field("main", description="main: summed into the reward normalised "
                                           "in-group; shape: a shaping term, placed by reward.shape_mode")

    @field_validator("function")
    @classmethod
    def _loads(cls, path: str) -> str:
        if path != TASK_REWARD:
            from grpo_lab.rewards.plugins import load_function
            load_function(path)
        return path

    @property
    def is_task(self) -> bool:
        """The task's own score, not a function to load."""
        return self.function == TASK_REWARD

    @property
    def label(self) -> str:
        return self.name or (TASK_REWARD if self.function == TASK_REWARD else self.function.rsplit(":", 1)[-1])


class DataConfig(Strict):
    """A dataset as its users keep it: a file or folder, and which of its fields mean what."""

    path: str = Field(description="file, or folder for hf_disk; '{split}' in it names one file per split")
    format: Literal["jsonl", "parquet", "csv", "hf_disk"] | None = Field(
        None, description="jsonl, parquet, csv or hf_disk (datasets.load_from_disk); default: from the suffix")
    prompt: str = Field("question", description="field holding the prompt text")
    answer: str | None = Field("answer", description="field holding the answer (math, logic, plugin tasks)")
    tests: str | None = Field(None, description="field holding a list of test strings (code)")
    solution: str | None = Field(None, description="field holding a reference solution (optional)")
    difficulty: str | None = Field(None, description="field holding an integer difficulty level (optional)")
    split: str | None = Field(None, description="field naming each row's split (train/test; other values "
                                                "are skipped); None: a hash of the prompt decides")

    @model_validator(mode="after")
    def _check(self) -> "DataConfig":
        if self.format is None:
            self.__dict__["format"] = infer_format(self.path)
        return self


def infer_format(path: str) -> str:
    for suffix, fmt in ((".jsonl", "jsonl"), (".json", "jsonl"), (".parquet", "parquet"), (".csv", "csv")):
        if path.endswith(suffix):
            return fmt
    raise ValueError(f"cannot tell the format of {path!r} from its suffix; set data.format "
                     f"({', '.join(DATA_FORMATS)})")
