"""grpo-lab: decide which GRPO training tricks are worth their GPUs.

    import grpo_lab
    p = grpo_lab.plan("matrices/quickstart.yaml")
    result = grpo_lab.sweep("matrices/quickstart.yaml", workspace="ws")
    html, md = grpo_lab.report_sweep("quickstart", workspace="ws")

(grpo_lab/api.py; the CLI `grpo-lab` is a thin layer over the same calls.)
"""

from grpo_lab.api import plan, report_sweep, sweep

__version__ = "0.1.0"
__all__ = ["plan", "report_sweep", "sweep"]
