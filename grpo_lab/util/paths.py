"""Where the project's data folders are: the checkout's root, beside the package."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXPERIMENTS = ROOT / "experiments"  # trick catalog, model cards, hardware profiles, tuned configs
PROFILES = ROOT / "runners"  # runner profiles
