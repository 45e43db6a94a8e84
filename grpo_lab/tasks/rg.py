"""reasoning-gym's procedural datasets as a task family: ``task: rg:<dataset>``.

Each level is one dataset built from the dataset's curriculum at that global level (reasoning-gym's
own difficulty settings; a dataset without a curriculum has one level). Problems are entries of
that dataset at indices drawn by the task's seeded sampler; the split of an entry is a hash of its
question, as for every task, so train and test never share a question. The answer is the content
of the ``<answer>`` tags (natural) or the whole completion (compact). The run id records
reasoning-gym's version: a new version may generate other questions.

Scoring (``reward.scoring``):

- ``strict`` (default): 1.0 when the dataset's own ``score_answer`` gives full credit **and** the
  answer names no more candidates than the dataset's reference answer (alternatives, list items,
  numbers, words: ``rewards/strict.py``), else 0. Every distinct tagged answer must earn it. The
  datasets' scorers pay partial credit that a hedge can collect (the base rule pays
  len(reference)/len(answer) when the reference is a substring, so "A or B" earns ~1/2; gsm_symbolic
  reads the first number, letter_jumble the first words; countdown, fraction_simplification and
  prime_factorization pay 0.01 for anything), so strict pays only a clean, complete answer. A
  dataset whose own reference answers do not earn full credit (propositional_logic accepts any
  valid conclusion and scores its reference 0) is refused at load under strict scoring.
- ``lenient``: the dataset's own ``score_answer`` of the last tagged answer, partial credit included.
"""

from __future__ import annotations

import functools
import random
from importlib.metadata import version

from grpo_lab.rewards import strict
from grpo_lab.rewards.extract import extract_tagged, marked_answers
from grpo_lab.rewards.format import has_answer_tags
from grpo_lab.rewards.scoring import check as check_isolation, score_rg
from grpo_lab.tasks._common import BUILTIN_LEVELS, BaseTask, Draft, content_id
from grpo_lab.tasks.base import Problem, Score, TaskEntry

_INSTRUCTION = "Give the final answer inside <answer></answer> tags."
_SIZE = 1_000_000  # index range per level; entries are generated on access, so size costs nothing
_SEED = 20_250_101  # the datasets' own seed: the problem space, not the sampling, is fixed by it
SCORINGS = ("strict", "lenient")
_FULL = 1.0 - 1e-9  # scorers that sum per-part credit reach 1.0 only up to rounding
_CHECKED = 5  # reference answers scored at load under strict scoring


def _library():
    try:
        import reasoning_gym.factory as factory
    except ModuleNotFoundError:
        raise ValueError("rg:<dataset> tasks need reasoning-gym: pip install 'grpo-lab[verifiers]'") from None
    return factory


def rg_entry(name: str):
    from grpo_lab.util.yamlio import suggest

    dataset = name.removeprefix("rg:")
    known = _library().DATASETS
    if dataset not in known:
        raise ValueError(f"unknown reasoning-gym dataset {dataset!r} in task {name!r}{suggest(dataset, known)}; "
                         f"{len(known)} datasets, e.g. {', '.join(sorted(known)[:5])}")
    return TaskEntry(name, "family", functools.partial(RGTask, dataset),
                     f"reasoning-gym=={version('reasoning-gym')}:{dataset}",
                     f"reasoning-gym's {dataset}; scorer: strict (full credit from its score_answer and no more "
                     "candidates than its reference answer, else 0), or its own score_answer with "
                     "reward.scoring: lenient")


class RGTask(BaseTask):
    """One reasoning-gym dataset, levels from its curriculum, reward = its score_answer, strictly."""

    grading_version = 2  # strict scoring; scoring=lenient is in the run id by itself

    def __init__(self, dataset: str, register: str = "natural", levels: int | None = None,
                 scoring: str = "strict", sandbox: str = "bwrap", **kw):
        if scoring not in SCORINGS:
            raise ValueError(f"unknown scoring {scoring!r} for task rg:{dataset}; known: {', '.join(SCORINGS)}")
        check_isolation(sandbox)
        self.dataset = dataset
        self.scoring = scoring
        self.sandbox = sandbox  # where the dataset's scorer runs (rewards/scoring)
        self.name = f"rg:{dataset}"
        factory = _library()
        self._curriculum = dataset in factory.CURRICULA
        most = BUILTIN_LEVELS if self._curriculum else 1
        if kw.get("data_path") is not None or kw.get("data") is not None:
            raise ValueError(f"task {self.name} generates its problems; drop data_path/data")
        if levels is not None and not 1 <= levels <= most:
            raise ValueError(f"task {self.name}: levels must be in 1..{most}, got {levels}")
        self._datasets: dict[int, object] = {}
        self._configs: dict[int, dict] = {}
        super().__init__(register, levels=levels or most,
                         **{k: v for k, v in kw.items() if k not in ("data_path", "data")})
        if scoring == "strict":
            self._check_reference_answers()

    def _check_reference_answers(self) -> None:
        """Refuse a dataset whose scorer does not give its own reference answers full credit:
        strict scoring would pay nothing for any answer, whatever the model learns. The scorer,
        not the level, decides this, so the first entries of the first level are enough."""
        for index in range(_CHECKED):
            entry = self._dataset(0)[index]
            reward = self._raw_score(0, str(entry["answer"]), entry)
            if reward < _FULL:
                raise ValueError(
                    f"task {self.name}: reasoning-gym's scorer gives the dataset's own reference answer {reward:g} "
                    f"(entry {index}), so strict scoring would pay nothing; set reward.scoring: lenient to train "
                    "on its own partial credit")

    def _config(self, level: int) -> dict:
        """The keyword arguments of ``create_dataset`` for this level (the scoring worker builds
        the same dataset from them)."""
        if level not in self._configs:
            if self._curriculum:
                curriculum = _library().create_curriculum(self.dataset)
                curriculum.set_global_level(level)
                config = vars(curriculum.generate_configuration({"seed": _SEED + level, "size": _SIZE}))
            else:
                config = {"seed": _SEED, "size": _SIZE}
            self._configs[level] = config
        return self._configs[level]

    def _dataset(self, level: int):
        if level not in self._datasets:
            self._datasets[level] = _library().create_dataset(self.dataset, **self._config(level))
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
        readings = [self._reading(completion) for completion in completions]
        # every answer the grading may ask about, scored in one batch of the worker (cached)
        asked = [(p, a) for p, (answer, _, marks) in zip(problems, readings, strict=True)
                 if len(set(marks)) <= strict.MAX_MARKS  # more is refused unread: never a batch of guesses
                 for a in dict.fromkeys([answer, *marks])]
        self._raw_scores([(p.difficulty, a, p.target) for p, a in asked])
        scores = []
        for problem, (answer, format_ok, marks) in zip(problems, readings):
            reward = self._reward(problem, answer, marks)
            scores.append(Score(reward, format_ok, answer, {"correct": float(reward == 1.0), "format": float(format_ok)}))
        return scores

    def _reading(self, completion: str) -> tuple[str | None, bool, list[str]]:
        """(the last answer, the format flag, the distinct marked answers) of a completion."""
        if self.register == "compact":
            answer = completion.strip() or None
            return answer, answer is not None, [answer] if answer else []
        return (extract_tagged(completion), has_answer_tags(completion),
                marked_answers(completion, boxes=False, hash_marks=False))

    def _reward(self, problem: Problem, answer: str | None, marks: list[str]) -> float:
        """Lenient: the dataset's score of the last answer. Strict: see the module doc."""
        level, entry = problem.difficulty, problem.target
        if self.scoring == "lenient":
            return self._raw_score(level, answer, entry)
        full = lambda mark: (self._raw_score(level, mark, entry) >= _FULL, mark)
        return strict.grade(marks, str(entry["answer"]), full, strict.ALL)[0]

    def _raw_score(self, level: int, answer: str | None, entry: dict) -> float:
        return self._raw_scores([(level, answer, entry)])[0]

    def _raw_scores(self, asked: list[tuple[int, str | None, dict]]) -> list[float]:
        """The dataset's own score_answer of each (level, answer, entry), in [0, 1], run in the
        scoring worker (rewards/scoring): a scorer failing on odd model text scores 0."""
        return score_rg(self.dataset, [self._config(level) for level, _, _ in asked],
                        [entry for _, _, entry in asked], [answer for _, answer, _ in asked], self.sandbox)
