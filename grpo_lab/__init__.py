"""grpo-lab: decide which GRPO training tricks are worth their GPUs."""

__version__ = "0.1.0"
