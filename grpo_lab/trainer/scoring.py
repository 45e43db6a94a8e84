"""Score a rollout: main reward, shape rewards, format flags, and the per-token loss mask.

This is the "score" phase of the step; it runs after generation and never inside it.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import torch

from grpo_lab.rewards import plugins
from grpo_lab.rewards.shaping import length_shaping
from grpo_lab.rollout.base import Rollout
from grpo_lab.tasks.base import Score
from grpo_lab.trainer.advantages import REWARD_COMBINERS
from grpo_lab.trainer.batch import code_token_mask


@dataclass
class Scored:
    main: torch.Tensor  # [N, G] task reward (plus in-main shaping)
    shape: torch.Tensor  # [N, G] shaping added after normalisation
    raw: torch.Tensor  # [N, G] the main reward before shaping: the task score, or the main reward functions' sum
    format_ok: torch.Tensor  # [N, G] bool
    answers: list  # N lists of G normalised answers (None when none was found)
    texts: list[str]  # B decoded completions
    # N dicts {reward function label: G values, None where not applicable}; logged as reward/<label>
    components: list = field(default_factory=list)


def score_rollout(tasks: dict, problems: list, rollout: Rollout, codec, cfg, progress: float) -> Scored:
    N = len(problems)
    G = len(rollout.group) // N
    texts = rollout.texts(codec)
    scores = [None] * len(texts)
    for task in tasks.values():  # one batched call per task (the code sandbox runs once)
        rows = [r for r, g in enumerate(rollout.group) if problems[g].task == task.name]
        if rows:
            for r, s in zip(rows, task_scores(task, [problems[rollout.group[r]] for r in rows], [texts[r] for r in rows])):
                scores[r] = s
    check_task_rewards(tasks, problems, rollout, scores)
    raw = torch.tensor([s.reward for s in scores], dtype=torch.float32).view(N, G)
    fmt = torch.tensor([s.format_ok for s in scores]).view(N, G)
    terms = shape_terms(cfg, texts, rollout.completion_ids, fmt, progress)
    components: list = [{} for _ in range(N)]
    functions = plugins.configured(cfg.reward)
    if functions:
        raw, plugin_shapes, components = function_rewards(functions, problems, rollout, texts, raw)
        terms.update(plugin_shapes)
    shape = sum(terms.values(), torch.zeros(N, G))
    main = raw.clone() if cfg.reward.combine == "sum" else combined_main(functions, components, raw, cfg.reward.combine)
    if cfg.reward.shape_mode == "in_main":
        main, shape = main + shape, torch.zeros_like(shape)
    answers = [[scores[g * G + j].answer for j in range(G)] for g in range(N)]
    return Scored(main, shape, raw, fmt, answers, texts, components)


_WARNED: set[str] = set()  # tasks whose grading has raised, warned about once per process


def task_scores(task, problems: list, completions: list[str]) -> list[Score]:
    """``task.score`` of a batch, never raising into training: when the batch's grading raises,
    each completion is scored alone and one whose grading raises scores 0 (format not met), so a
    completion that breaks the grader earns nothing and its batch-mates keep their scores. The
    first failure of each task is reported by a warning."""
    try:
        return task.score(problems, completions)
    except Exception as error:  # noqa: BLE001 -- any grader bug must cost the completion, not the run
        _warn_once(task.name, error)
    scores = []
    for problem, completion in zip(problems, completions, strict=True):
        try:
            [score] = task.score([problem], [completion])
        except Exception as error:  # noqa: BLE001
            _warn_once(task.name, error)
            score = Score(0.0, False, None, {})
        scores.append(score)
    return scores


def _warn_once(name: str, error: Exception) -> None:
    if name not in _WARNED:
        _WARNED.add(name)
        warnings.warn(f"task {name!r}: grading raised {type(error).__name__}: {error}; the completions whose "
                      "grading raises score 0 (reported once per task)", RuntimeWarning, stacklevel=3)


def check_task_rewards(tasks: dict, problems: list, rollout: Rollout, scores: list) -> None:
    """A task's reward outside [0, 1] (NaN included) breaks the task contract: the run ends naming it."""
    for r, s in enumerate(scores):
        if not 0.0 <= s.reward <= 1.0:
            problem = problems[rollout.group[r]]
            name = next((n for n, t in tasks.items() if t.name == problem.task), problem.task)
            raise ValueError(f"task {name!r} scored {s.reward!r} on {problem.uid!r}; task rewards must be in [0, 1] "
                             "(grpo_lab/tasks/base.py)")


def function_rewards(functions, problems: list, rollout: Rollout, texts: list[str],
                     task_raw: torch.Tensor) -> tuple[torch.Tensor, dict, list]:
    """(main reward [N, G], shape terms, per-group components) from the reward functions: main
    functions' weighted values summed (replacing the task's score unless `task` is listed)."""
    N, G = task_raw.shape
    prompts, columns = plugins.batch_columns([problems[g] for g in rollout.group])
    main = torch.zeros(N, G) if any(f.role == "main" for f in functions) else task_raw
    shapes: dict[str, torch.Tensor] = {}
    components: list = [{} for _ in range(N)]
    for f in functions:
        if f.fn is None:
            values = task_raw.flatten().tolist()
        else:
            values = plugins.call(f, prompts, texts, columns)
        tensor = torch.tensor(plugins.weighted(values, f.weight), dtype=torch.float32).view(N, G)
        if f.role == "main":
            main = main + tensor
        else:
            shapes[f"fn_{f.name}"] = tensor
        for g in range(N):
            components[g][f.name] = values[g * G:(g + 1) * G]
    return main, shapes, components


def combined_main(functions, components: list, raw: torch.Tensor, mode: str) -> torch.Tensor:
    """[N, G] main reward from the main functions' values by reward.combine (advantages.REWARD_COMBINERS);
    a value that is not applicable (None or NaN) counts 0, as in the weighted sum. Without main
    functions the task's score `raw` [N, G] is the one component."""
    mains = [f for f in functions if f.role == "main"]
    if not mains:
        return REWARD_COMBINERS[mode](raw[..., None], torch.ones(1))
    values = torch.stack([component_tensor(components, f.name) for f in mains], dim=-1).nan_to_num(nan=0.0)
    return REWARD_COMBINERS[mode](values, torch.tensor([f.weight for f in mains]))


def component_means(components: list) -> dict[str, float]:
    """reward/<label>: the mean of each reward function's applicable values (NaN if it gave one)."""
    out: dict[str, list] = {}
    for group in components:
        for name, values in group.items():
            out.setdefault(name, []).extend(v for v in values if v is not None)
    return {f"reward/{name}": (sum(v) / len(v) if v else 0.0) for name, v in out.items()}


def component_tensor(components: list, name: str) -> torch.Tensor:
    """[N, G] values of one reward function, 0 where not applicable (preflight's statistics)."""
    return torch.tensor([[0.0 if v is None else v for v in group[name]] for group in components])


def shape_terms(cfg, texts: list[str], completion_ids: list[list[int]], format_ok: torch.Tensor,
                progress: float) -> dict[str, torch.Tensor]:
    """Each shaping term the config turns on, shaped like format_ok ([N, G]). score_rollout sums
    them; preflight looks at each one apart, to see which term carries the reward's variance."""
    terms: dict[str, torch.Tensor] = {}
    if cfg.reward.format == "bonus":
        terms["format_bonus"] = cfg.reward.format_bonus * format_ok.float()
    if cfg.reward.length.kind != "none":
        pen = [length_shaping(cfg.reward.length, t, len(c), cfg.sampling.max_new_tokens, progress)
               for t, c in zip(texts, completion_ids)]
        terms[f"length_{cfg.reward.length.kind}"] = torch.tensor(pen).view(format_ok.shape)
    return terms


def loss_mask(batch, scored: Scored, rollout: Rollout, codec, cfg) -> torch.Tensor:
    """[B, C] mask of trained tokens: completion tokens, minus format-masked and truncated samples,
    minus non-code tokens when the loss mask is 'code_only'."""
    mask = batch.completion_mask.clone()
    if cfg.reward.format == "mask":
        mask *= scored.format_ok.view(-1, 1).to(mask)
    if cfg.reward.mask_truncated:
        truncated = torch.tensor([s == "length" for s in rollout.stop], device=mask.device)
        mask *= (~truncated).view(-1, 1).to(mask)
    if cfg.loss.mask == "code_only":
        C = mask.size(1)
        code = [code_token_mask(codec, c, codec.eos_id) + [0.0] * (C - len(c)) for c in rollout.completion_ids]
        mask *= torch.tensor(code, device=mask.device)
    return mask


def unique_answer_ratio(answers: list) -> float:
    """Mean over groups of (distinct answers / G); a missing answer counts as its own kind."""
    ratios = [len({repr(a) for a in group}) / len(group) for group in answers]
    return sum(ratios) / max(len(ratios), 1)


def merge_rounds(parts) -> tuple[Rollout, Scored]:
    """Concatenate the kept groups of several sampling rounds, each (rollout, scored, kept group
    indices, G): dynamic sampling's refills, and preflight's batches."""
    cols = {k: [] for k in ("prompt_ids", "completion_ids", "logprobs", "stop", "group")}
    main, shape, raw, fmt, answers, texts, comps, offset = [], [], [], [], [], [], [], 0
    for ro, sc, keep, G in parts:
        for new_g, g in enumerate(keep):
            for r in range(g * G, (g + 1) * G):
                for k in ("prompt_ids", "completion_ids", "logprobs", "stop"):
                    cols[k].append(getattr(ro, k)[r])
                cols["group"].append(offset + new_g)
                texts.append(sc.texts[r])
            for out, value in zip((main, shape, raw, fmt), (sc.main, sc.shape, sc.raw, sc.format_ok)):
                out.append(value[g])
            answers.append(sc.answers[g])
            comps.append(sc.components[g] if sc.components else {})
        offset += len(keep)
    tensors = [torch.stack(xs) for xs in (main, shape, raw, fmt)]
    return Rollout(**cols), Scored(*tensors, answers, texts, comps)
