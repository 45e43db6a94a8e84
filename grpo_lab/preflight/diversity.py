"""Group diversity (docs/study.md "New settings": sample groups for ~20 representative prompts and check
that the G outputs cover different solution paths; "Monitoring": a unique-sample ratio per group
below 60% makes advantages collapse to zero). Pure functions of answers and texts.

A low unique-answer ratio is red only when its consequence shows too: at least half the groups'
main rewards are all equal (measured on the reward-signal sample, ~125 groups, at the same
temperature and G: 20 groups are too few to measure a share). On short-answer tasks the answer
space is small, so a healthy sampler repeats answers: the built-in tiny model on tiny-math at
temperature 1.0 has a ratio of ~0.44 with only ~3% zero-variance groups, and GRPO trains it. At
temperature 0.1 its ratio is ~0.2 with ~70% zero-variance groups: the collapse the study warns of.
"""

from __future__ import annotations

from collections.abc import Sequence

from grpo_lab.preflight.checks import Check
from grpo_lab.trainer.scoring import unique_answer_ratio

UNIQUE_RATIO_MIN = 0.6
COLLAPSED_GROUPS = 0.5  # zero-variance share at which a low ratio has reached the advantages
DISTINCT_SHARE_YELLOW = 0.6  # distinct completion texts / G; softer: texts can differ yet agree


def normalise_text(text: str) -> str:
    """Whitespace runs collapsed, ends stripped: layout alone is not another solution path."""
    return " ".join(text.split())


def group_diversity(prompts: Sequence[str], answers: Sequence[Sequence], texts: Sequence[str]) -> list[dict]:
    """Per group: unique-answer ratio (as the trainer logs it), distinct completion texts, and the
    prompt and completions themselves, for a person to read. `texts` holds G completions per group."""
    G = len(answers[0]) if answers else 0
    out = []
    for g, (prompt, group) in enumerate(zip(prompts, answers, strict=True)):
        completions = list(texts[g * G:(g + 1) * G])
        out.append({"prompt": prompt, "unique_answer_ratio": unique_answer_ratio([group]),
                    "distinct_solutions": len({normalise_text(t) for t in completions}), "G": G,
                    "completions": completions})
    return out


def diversity_summary(groups: Sequence[dict], zero_var_share: float) -> dict[str, float]:
    """Means over groups; `zero_var_share`: the share of zero-variance groups at these settings."""
    n = max(len(groups), 1)
    return {
        "groups": len(groups),
        "unique_answer_ratio": sum(g["unique_answer_ratio"] for g in groups) / n,
        "min_unique_answer_ratio": min((g["unique_answer_ratio"] for g in groups), default=0.0),
        "distinct_solutions": sum(g["distinct_solutions"] for g in groups) / n,
        "distinct_share": sum(g["distinct_solutions"] / g["G"] for g in groups) / n,
        "zero_var_share": zero_var_share,
    }


def diversity_checks(summary: dict[str, float]) -> list[Check]:
    ratio, share, flat = summary["unique_answer_ratio"], summary["distinct_share"], summary["zero_var_share"]
    low = ratio < UNIQUE_RATIO_MIN
    verdict = "red" if low and flat >= COLLAPSED_GROUPS else "yellow" if low else "green"
    notes = {"red": "groups repeat one answer: advantages collapse to zero",
             "yellow": "answers repeat, but most groups still disagree on reward", "green": ""}
    return [
        Check("diversity: unique-answer ratio",
              f"{ratio:.2f} (min {summary['min_unique_answer_ratio']:.2f}); {flat:.0%} zero-variance groups",
              f">= {UNIQUE_RATIO_MIN:.2f} (red below it with >= {COLLAPSED_GROUPS:.0%} zero-variance groups)",
              verdict, notes[verdict]),
        Check("diversity: distinct solutions", f"{summary['distinct_solutions']:.1f} per group ({share:.0%} of G)",
              f">= {DISTINCT_SHARE_YELLOW:.0%} of G", "yellow" if share < DISTINCT_SHARE_YELLOW else "green",
              "the G outputs retrace few solution paths" if share < DISTINCT_SHARE_YELLOW else ""),
    ]
