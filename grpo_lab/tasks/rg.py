"""reasoning-gym's procedural datasets as a task family: ``task: rg:<dataset>``.

Each level is one dataset built from the dataset's curriculum at that global level (reasoning-gym's
own difficulty settings; a dataset without a curriculum has one level). Problems are entries of
that dataset at indices drawn by the task's seeded sampler; the split of an entry is a hash of its
question, as for every task, so train and test never share a question. The reward is the dataset's
own ``score_answer`` on the answer inside ``<answer>`` tags (natural) or the whole completion
(compact). The run id records reasoning-gym's version: a new version may generate other questions.
"""

from __future__ import annotations

import functools
import random
from importlib.metadata import version

from grpo_lab.rewards.extract import extract_tagged
from grpo_lab.rewards.format import has_answer_tags
from grpo_lab.tasks._common import BUILTIN_LEVELS, BaseTask, Draft, content_id
from grpo_lab.tasks.base import Problem, Score

_INSTRUCTION = "Give the final answer inside <answer></answer> tags."
_SIZE = 1_000_000  # index range per level; entries are generated on access, so size costs nothing
_SEED = 20_250_101  # the datasets' own seed: the problem space, not the sampling, is fixed by it


def _library():
    try:
        import reasoning_gym.factory as factory
    except ModuleNotFoundError:
        raise ValueError("rg:<dataset> tasks need reasoning-gym: pip install 'grpo-lab[verifiers]'") from None
    return factory


def rg_entry(name: str):
    from grpo_lab.tasks.registry import TaskEntry
    from grpo_lab.util.yamlio import suggest

    dataset = name.removeprefix("rg:")
    known = _library().DATASETS
    if dataset not in known:
        raise ValueError(f"unknown reasoning-gym dataset {dataset!r} in task {name!r}{suggest(dataset, known)}; "
                         f"{len(known)} datasets, e.g. {', '.join(sorted(known)[:5])}")
    return TaskEntry(name, "family", functools.partial(RGTask, dataset),
                     f"reasoning-gym=={version('reasoning-gym')}:{dataset}", f"reasoning-gym's {dataset}")


class RGTask(BaseTask):
    """One reasoning-gym dataset, levels from its curriculum, reward = its score_answer."""

    def __init__(self, dataset: str, register: str = "natural", levels: int | None = None, **kw):
        self.dataset = dataset
        self.name = f"rg:{dataset}"
        factory = _library()
        self._curriculum = dataset in factory.CURRICULA
        most = BUILTIN_LEVELS if self._curriculum else 1
        if kw.get("data_path") is not None or kw.get("data") is not None:
            raise ValueError(f"task {self.name} generates its problems; drop data_path/data")
        if levels is not None and not 1 <= levels <= most:
            raise ValueError(f"task {self.name}: levels must be in 1..{most}, got {levels}")
        self._datasets: dict[int, object] = {}
        super().__init__(register, levels=levels or most,
                         **{k: v for k, v in kw.items() if k not in ("data_path", "data")})

    def _dataset(self, level: int):
        if level not in self._datasets:
            factory = _library()
            if self._curriculum:
                curriculum = factory.create_curriculum(self.dataset)
                curriculum.set_global_level(level)
                config = curriculum.generate_configuration({"seed": _SEED + level, "size": _SIZE})
                self._datasets[level] = factory.create_dataset(self.dataset, **vars(config))
            else:
                self._datasets[level] = factory.create_dataset(self.dataset, seed=_SEED, size=_SIZE)
        return self._datasets[level]

    def _draft(self, rng: random.Random, level: int) -> Draft:
        entry = self._dataset(level)[rng.randrange(_SIZE)]
        question, answer = str(entry["question"]).strip(), str(entry["answer"])
        if self.register == "compact":
            prompt, solution = question, answer
        else:
            prompt, solution = f"{question}\n{_INSTRUCTION}", f"<answer>{answer}</answer>"
        return Draft(content_id(question), prompt, entry, solution, level)

    def score(self, problems: list[Problem], completions: list[str]) -> list[Score]:
        scores = []
        for problem, completion in zip(problems, completions, strict=True):
            if self.register == "compact":
                answer, format_ok = completion.strip() or None, bool(completion.strip())
            else:
                answer, format_ok = extract_tagged(completion), has_answer_tags(completion)
            try:
                reward = float(self._dataset(problem.difficulty).score_answer(answer, problem.target))
            except Exception:  # a dataset's scorer failing on odd model text: no credit
                reward = 0.0
            reward = min(max(reward, 0.0), 1.0)
            scores.append(Score(reward, format_ok, answer, {"correct": float(reward == 1.0), "format": float(format_ok)}))
        return scores
