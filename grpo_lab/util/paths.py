"""Where the definitions grpo-lab reads live: a search path of data roots, first match wins.

Each root holds the folders of a checkout (`experiments/`: trick catalog, model cards, hardware
profiles, run configs, spaces; `runners/`: runner profiles). In order:

    1. ./experiments and ./runners of the current directory (a project of the user's own)
    2. $GRPO_LAB_HOME/experiments and $GRPO_LAB_HOME/runners
    3. the copy shipped inside the installed package (grpo_lab/bundled/, see pyproject.toml),
       or, in a checkout, the checkout's own folders

So a user adds a model card, a hardware profile or a trick in their project without forking, and a
plain `pip install grpo-lab` has the shipped definitions.
"""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # the checkout, when running from one
_BUNDLED = Path(__file__).resolve().parents[1] / "bundled"


def _shipped(folder: str) -> Path:
    """The package's own copy: the wheel's bundled/ folder, else the checkout's (editable)."""
    bundled = _BUNDLED / folder
    return bundled if bundled.is_dir() else ROOT / folder


def search_path(folder: str) -> list[Path]:
    """Existing roots of `folder` ('experiments' or 'runners'), highest priority first."""
    roots = [Path.cwd() / folder]
    if home := os.environ.get("GRPO_LAB_HOME"):
        roots.append(Path(home) / folder)
    roots.append(_shipped(folder))
    seen, out = set(), []
    for root in roots:
        key = root.resolve()
        if key not in seen and root.is_dir():
            seen.add(key)
            out.append(root)
    return out


def find(folder: str, relative: str) -> Path:
    """The first `folder/relative` on the search path; the shipped one (which may not exist)
    when none has it, so an error names a path the user recognises."""
    for root in search_path(folder):
        if (root / relative).exists():
            return root / relative
    return _shipped(folder) / relative


def find_all(folder: str, relative: str) -> list[Path]:
    """Every `folder/relative` on the search path that exists, highest priority first."""
    return [root / relative for root in search_path(folder) if (root / relative).exists()]


def names(folder: str, sub: str, suffix: str = ".yaml") -> list[str]:
    """File stems under `folder/sub` over the whole search path, sorted, each once."""
    return sorted({p.stem for root in search_path(folder) if (root / sub).is_dir()
                   for p in (root / sub).glob(f"*{suffix}")})


def cache_dir() -> Path:
    """Where grpo-lab keeps what it may rebuild (warm-started tiny models, converted weights, the
    CLI's error log): $GRPO_LAB_CACHE, else ~/.cache/grpo-lab."""
    return Path(os.environ.get("GRPO_LAB_CACHE", Path.home() / ".cache" / "grpo-lab"))
