"""Hyper-parameter search over run-config keys (Optuna), each trial a registered run.

space.py: the search-space file; base.py: the config trials start from; trial.py: one trial as a
run (registry attempt, run folder); study.py: the tune loop; output.py: the tuned baseline file
and the trials table; track.py: MLflow.
"""

from grpo_lab.tune.space import SearchSpace, load_space
from grpo_lab.tune.study import TuneOptions, TuneResult, tune

__all__ = ["SearchSpace", "TuneOptions", "TuneResult", "load_space", "tune"]
