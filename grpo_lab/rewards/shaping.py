"""Shape rewards: length penalties and the format bonus. Pure functions of one completion.

These are *shape* rewards in the study's sense: they steer the output's form, and by default
they are added after the main reward is normalised, so they never distort the z-score.
"""

from __future__ import annotations

import re


def decayed_coef(coef: float, final_frac: float, progress: float) -> float:
    """coef at training progress in [0, 1]: linear from coef to coef * final_frac."""
    return coef * (1.0 + (final_frac - 1.0) * min(max(progress, 0.0), 1.0))


def piecewise_length_penalty(n_tokens: int, upper: int, coef: float) -> float:
    """0 while n_tokens <= upper (inside or below the band), then -coef per token over upper."""
    return -coef * max(0, n_tokens - upper)


def overlong_penalty(n_tokens: int, max_tokens: int, buffer: int) -> float:
    """DAPO's soft overlong punishment: 0 up to max - buffer, then linear down to -1 at max."""
    start = max_tokens - buffer
    if n_tokens <= start:
        return 0.0
    return -min(1.0, (n_tokens - start) / max(buffer, 1))


SPLIT = re.compile(r"(?<=[.;!?\n])\s*")


def information_length(text: str, min_chars: int = 12) -> int:
    """Characters of the text with every repeated fragment counted once.

    Fragments are sentences (split after . ; ! ? or newline), compared after lower-casing and
    collapsing whitespace; fragments shorter than `min_chars` always count (they carry little
    to game). "A. B. A." has the information length of "A. B.".
    """
    seen: set[str] = set()
    total = 0
    for frag in SPLIT.split(text):
        key = " ".join(frag.lower().split())
        if not key:
            continue
        if len(key) >= min_chars and key in seen:
            continue
        seen.add(key)
        total += len(frag)
    return total


def _info_penalty(cfg, text: str, n_tokens: int, max_tokens: int, coef: float) -> float:
    # Scale tokens by the share of characters that carry new information.
    info_tokens = round(n_tokens * information_length(text, cfg.fragment_chars) / max(len(text), 1))
    return piecewise_length_penalty(info_tokens, cfg.upper, coef)


LENGTH_PENALTIES = {  # reward.length.kind -> (cfg, text, n_tokens, max_tokens, decayed coef) -> penalty
    "none": lambda cfg, text, n, max_tokens, coef: 0.0,
    "piecewise": lambda cfg, text, n, max_tokens, coef: piecewise_length_penalty(n, cfg.upper, coef),
    "overlong": lambda cfg, text, n, max_tokens, coef: overlong_penalty(n, max_tokens, cfg.overlong_buffer),
    "info": _info_penalty,
}


def length_shaping(cfg, text: str, n_tokens: int, max_tokens: int, progress: float) -> float:
    """The length shape reward of one completion under a LengthConfig."""
    coef = decayed_coef(cfg.coef, cfg.coef_final_frac, progress)
    return LENGTH_PENALTIES[cfg.kind](cfg, text, n_tokens, max_tokens, coef)
