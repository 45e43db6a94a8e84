"""The software environment (grpo_lab.util.environment) against a pinned snapshot (docs/study.md: pin Python,
PyTorch, vLLM, CUDA)."""

from __future__ import annotations

from collections.abc import Mapping

from grpo_lab.util.environment import package_version
from grpo_lab.preflight.checks import Check


def _current(name: str, env: Mapping[str, str | None]) -> str | None:
    return env[name] if name in env else package_version(name)


def environment_checks(env: Mapping[str, str | None], pin: Mapping[str, str | None] | None) -> list[Check]:
    """One green summary row without a pin; with one, a row per pinned name, yellow on mismatch.
    A pinned name outside `env` is looked up as an installed distribution."""
    if not pin:
        here = ", ".join(f"{k} {v}" for k, v in env.items() if v)
        return [Check("env: versions", here, "no pin given", "green")]
    checks = []
    for name, pinned in pin.items():
        current = _current(name, env)
        same = current == (None if pinned is None else str(pinned))
        value = f"{name} {current or 'absent'} here, {pinned or 'absent'} pinned"
        checks.append(Check(f"env: {name}", value, f"== {pinned or 'absent'}", "green" if same else "yellow",
                            "" if same else "compared runs should share one environment"))
    return checks
