"""Strict grading of reasoning-gym datasets: their scorers' partial credit, first-item reading and
floors pay hedges and wrong answers; the rg: task pays only a clean, complete answer."""

import re

import pytest

from grpo_lab.tasks import make_task

pytest.importorskip("reasoning_gym")

DATASETS = ("leg_counting", "basic_arithmetic", "gsm_symbolic", "countdown", "letter_jumble", "spell_backward",
            "knights_knaves", "fraction_simplification", "prime_factorization")


def wrong(ref: str) -> str:
    """A wrong answer of the reference's own form: its last digit changed, or its text reversed."""
    digits = [m.start() for m in re.finditer(r"\d", ref)]
    if digits:
        i = digits[-1]
        return ref[:i] + str((int(ref[i]) + 1) % 10) + ref[i + 1:]
    return ref[::-1] if ref[::-1] != ref else ref + "x"


# (template, reward): {ref} is the dataset's reference answer, {wrong} a wrong one of its form.
TEMPLATES = [
    ("<answer>{ref}</answer>", 1.0), ("<answer> {ref} </answer>", 1.0), ("work\n<answer>{ref}</answer>", 1.0),
    ("<answer>{ref}</answer> <answer>{ref}</answer>", 1.0),
    ("<answer>{ref} or {wrong}</answer>", 0.0), ("<answer>{wrong} or {ref}</answer>", 0.0),
    ("<answer>{ref}, {wrong}</answer>", 0.0), ("<answer>{wrong}, {ref}</answer>", 0.0),
    ("<answer>{ref}</answer> <answer>{wrong}</answer>", 0.0), ("<answer>{wrong}</answer> <answer>{ref}</answer>", 0.0),
    ("<answer>{ref} {wrong}</answer>", 0.0), ("<answer>{ref}\n{wrong}</answer>", 0.0), ("<answer>{ref} \\pm 1</answer>", 0.0),
    ("<answer>{wrong}</answer>", 0.0), ("<answer>anything</answer>", 0.0), ("<answer></answer>", 0.0), ("{ref}", 0.0),
]
# Forms of the reference answer that the dataset's own scorer rightly accepts.
EQUIVALENT = {
    "gsm_symbolic": lambda ref: f"{ref}.0",
    "letter_jumble": str.upper,
    "spell_backward": str.upper,
    "knights_knaves": lambda ref: ", ".join(reversed(ref.rstrip(".").replace(", and ", ", ").split(", "))) + ".",
    "countdown": lambda ref: ref.replace(" ", ""),
}


@pytest.fixture(scope="module")
def tasks():
    return {d: make_task(f"rg:{d}", "natural") for d in DATASETS}


def _rows():
    rows = [(d, t, r) for d in DATASETS for t, r in TEMPLATES]
    rows += [(d, EQUIVALENT[d], 1.0) for d in EQUIVALENT]
    return rows


@pytest.mark.parametrize("dataset, template, reward", _rows(), ids=lambda v: v if isinstance(v, str) else None)
def test_rg_table(tasks, dataset, template, reward):
    task = tasks[dataset]
    [problem] = task.problems("train", 1, seed=0)
    ref = str(problem.target["answer"])
    if callable(template):
        completion = f"<answer>{template(ref)}</answer>"
    else:
        completion = template.format(ref=ref, wrong=wrong(ref))
    assert task.score([problem], [completion])[0].reward == reward, completion


def test_table_size():
    assert len(_rows()) >= 60


def test_lenient_scoring_is_the_datasets_own_and_only_on_request():
    strict, lenient = make_task("rg:leg_counting", "natural"), make_task("rg:leg_counting", "natural", scoring="lenient")
    [problem] = strict.problems("train", 1, seed=0)
    ref = problem.target["answer"]
    hedge = f"<answer>{ref} or {wrong(ref)}</answer>"
    assert strict.score([problem], [hedge])[0].reward == 0.0
    assert lenient.score([problem], [hedge])[0].reward == pytest.approx(len(ref) / len(f"{ref} or {wrong(ref)}"))
    first = make_task("rg:gsm_symbolic", "natural", scoring="lenient")
    [problem] = first.problems("train", 1, seed=0)
    ref = problem.target["answer"]
    assert first.score([problem], [f"<answer>{ref} or {wrong(ref)}</answer>"])[0].reward == 1.0  # the first number
    with pytest.raises(ValueError, match="unknown scoring 'loose'"):
        make_task("rg:leg_counting", "natural", scoring="loose")


def test_a_dataset_whose_reference_answers_fail_its_own_scorer_is_refused_under_strict():
    with pytest.raises(ValueError) as e:
        make_task("rg:propositional_logic", "natural")
    message = str(e.value)
    assert "rg:propositional_logic" in message and "reference answer" in message and "lenient" in message
    assert "\n" not in message
    assert make_task("rg:propositional_logic", "natural", scoring="lenient").scoring == "lenient"


def test_the_run_config_passes_scoring_to_rg_tasks_and_the_listing_names_the_scorer():
    from grpo_lab.spec.config import RunConfig
    from grpo_lab.tasks.registry import resolve
    from grpo_lab.tasks import task_options

    lenient = RunConfig(task=["rg:leg_counting", "math"], reward={"scoring": "lenient"})
    assert task_options(lenient, "rg:leg_counting")["scoring"] == "lenient" and "scoring" not in task_options(lenient, "math")
    assert "scoring" not in task_options(RunConfig(task="rg:leg_counting"), "rg:leg_counting")
    assert lenient.run_id() != RunConfig(task=["rg:leg_counting", "math"]).run_id()
    assert "strict" in resolve("rg:leg_counting").description and "lenient" in resolve("rg:leg_counting").description


def test_the_tables_hedges_and_wrong_answers_are_paid_by_the_datasets_own_scorers(tasks):
    paid, full = 0, 0
    for dataset in DATASETS:
        lenient = make_task(f"rg:{dataset}", "natural", scoring="lenient")
        [problem] = lenient.problems("train", 1, seed=0)
        ref = str(problem.target["answer"])
        refused = [t.format(ref=ref, wrong=wrong(ref)) for t, r in TEMPLATES if r == 0.0]
        own = [s.reward for s in lenient.score([problem] * len(refused), refused)]
        assert [s.reward for s in tasks[dataset].score([problem] * len(refused), refused)] == [0.0] * len(refused)
        paid, full = paid + sum(r > 0 for r in own), full + sum(r == 1.0 for r in own)
    assert paid >= 60 and full >= 30  # of 117: what strict scoring takes away
