"""Strict grading, table by table: completions with the reward a careful grader gives them.

Each family gets hedges (both orders), empty and unmarked answers, correct answers in several
equivalent forms and wrong ones. A hedge names more candidates than the target and earns 0 even
when one of its candidates is right; a wrong answer earns 0 even where the dataset's own scorer
pays partial credit.
"""

import pytest

from grpo_lab.tasks import make_task
from grpo_lab.tasks.base import Problem

# (completion, target, reward) for the natural math task, verifier extract.
MATH_EXTRACT = [
    # right, marked in each way, in equivalent forms
    ("<answer>4</answer>", "4", 1.0), ("\\boxed{4}", "4", 1.0), ("work\n#### 4", "4", 1.0),
    ("<answer>\\boxed{4}</answer>", "4", 1.0), ("<answer>4</answer> so \\boxed{4}", "4", 1.0),
    ("<answer>4.0</answer>", "4", 1.0), ("<answer>2+2</answer>", "4", 1.0), ("<answer>\\frac{8}{2}</answer>", "4", 1.0),
    ("<answer>x = 4</answer>", "4", 1.0), ("<answer>4 apples</answer>", "4", 1.0),
    ("<answer>The answer is 4.</answer>", "4", 1.0), ("<answer>$4$</answer>", "4", 1.0),
    ("<answer>2^2</answer>", "4", 1.0), ("<answer>(1+1) \\cdot 2</answer>", "4", 1.0),
    ("reasoning <answer>4", "4", 1.0), ("<answer>4</answer><answer>4.0</answer>", "4", 1.0),
    ("<answer>2 + 2 = 4</answer>", "4", 1.0), ("<answer>1 + x</answer>", "x+1", 1.0),
    ("<answer>(x+1)^2</answer>", "x^2+2x+1", 1.0), ("<answer>1, 2</answer>", "\\{1,2\\}", 1.0),
    ("<answer>2, 1</answer>", "1, 2", 1.0), ("<answer>\\{2, 1\\}</answer>", "1, 2", 1.0),
    ("<answer>\\frac{1}{2}</answer>", "0.5", 1.0), ("<answer>(1, 2]</answer>", "(1,2]", 1.0),
    ("<answer>1,000</answer>", "1000", 1.0),
    ("\\boxed{18\\%}", "18", 1.0), ("<answer>18\\%</answer>", "18", 1.0), ("<answer>**18**</answer>", "18", 1.0),
    ("<answer>*18*</answer>", "18", 1.0), ("<answer>`18`</answer>", "18", 1.0), ("<answer>\\mathbf{18}</answer>", "18", 1.0),
    ("<answer>\u221218</answer>", "-18", 1.0), ("<answer>18€</answer>", "18", 1.0), ("<answer>£18</answer>", "18", 1.0),
    ("<answer>18 (apples)</answer>", "18", 1.0), ("<answer>1 000</answer>", "1000", 1.0),
    ("<answer>Answer: 4</answer>", "4", 1.0), ("<answer>4 dollars</answer>", "4", 1.0),
    ("<answer>4 percent</answer>", "4", 1.0), ("<answer>4 apples each</answer>", "4", 1.0),
    # hedges, both orders
    ("<answer>3 or 4</answer>", "4", 0.0), ("<answer>4 or 3</answer>", "4", 0.0),
    ("\\boxed{3} or \\boxed{4}", "4", 0.0), ("\\boxed{4} or \\boxed{3}", "4", 0.0),
    ("<answer>3, 4</answer>", "4", 0.0), ("<answer>4, 3</answer>", "4", 0.0),
    ("<answer>\\pm 4</answer>", "4", 0.0), ("<answer>±4</answer>", "4", 0.0), ("<answer>4 +/- 1</answer>", "4", 0.0),
    ("<answer>x = 3 \\text{ or } x = 4</answer>", "4", 0.0), ("<answer>x = 4 \\text{ or } x = 3</answer>", "4", 0.0),
    ("<answer>3</answer> <answer>4</answer>", "4", 0.0), ("<answer>4</answer> <answer>3</answer>", "4", 0.0),
    ("#### 3\n<answer>4</answer>", "4", 0.0), ("<answer>\\{3, 4\\}</answer>", "4", 0.0),
    ("<answer>\\{4\\}</answer>", "4", 0.0), ("<answer>[3, 4]</answer>", "4", 0.0), ("<answer>3 4</answer>", "4", 0.0),
    ("<answer>3; 4</answer>", "4", 0.0), ("<answer>3 and 4</answer>", "4", 0.0), ("<answer>3 = 4</answer>", "4", 0.0),
    ("<answer>x = 3 = 4</answer>", "4", 0.0), ("<answer>x + 1 or x - 1</answer>", "x+1", 0.0),
    ("<answer>1, 2, 3</answer>", "\\{1,2\\}", 0.0), ("<answer>0.5 or 1</answer>", "0.5", 0.0),
    # unmarked, empty
    ("The answer is 3. 4", "4", 0.0), ("The answer is 4.", "4", 0.0), ("4", "4", 0.0),
    ("<answer></answer>", "4", 0.0), ("<answer>  </answer>", "4", 0.0), ("\\boxed{}", "4", 0.0), ("", "4", 0.0),
    # wrong
    ("<answer>5</answer>", "4", 0.0), ("<answer>44</answer>", "4", 0.0), ("<answer>-4</answer>", "4", 0.0),
    ("<answer>not 4</answer>", "4", 0.0), ("<answer>about 4</answer>", "4", 0.0), ("<answer>4 thousand</answer>", "4", 0.0),
    ("<answer>x < 4</answer>", "4", 0.0), ("<answer>x+2</answer>", "x+1", 0.0), ("<answer>[1, 2]</answer>", "(1,2]", 0.0),
    ("<answer>1</answer>", "\\{1,2\\}", 0.0),
    # exponent notation is not a plain number (and 1e5000 would cost its digits)
    ("<answer>1e5000</answer>", "4", 0.0), ("<answer>1e100000000</answer>", "4", 0.0), ("<answer>4e0</answer>", "4", 0.0),
    # range words and qualifiers beside the number
    *[(f"<answer>{w}</answer>", "4", 0.0) for w in ("max 4", "4 max", "minimum 4", "maximum of 4", "upto 4", "within 4",
                                                    "4 at minimum", "approx 4", "4 ish", "4 tops", "at most 4",
                                                    "4 onwards", "4 or above", "4 above", "4 maybe", "4 (approx)")],
    ("<answer>1 0</answer>", "10", 0.0), ("<answer>**3 or 4**</answer>", "4", 0.0), ("<answer>\\text{3, 4}</answer>", "4", 0.0),
]

# (completion, target, reward) for the natural math task, verifier math-verify: the rows above
# plus LaTeX that only math-verify reads, and hedges hidden from a lenient parser.
MATH_VERIFY = [
    *MATH_EXTRACT,
    ("<answer>\\sqrt{16}</answer>", "4", 1.0), ("\\boxed{\\sqrt{16}}", "4", 1.0), ("<answer>\\binom{4}{1}</answer>", "4", 1.0),
    ("<answer>\\frac{\\sqrt3}{2}</answer>", "\\frac{\\sqrt{3}}{2}", 1.0), ("<answer>\\pi</answer>", "\\pi", 1.0),
    ("<answer>\\sqrt{16} or 3</answer>", "4", 0.0), ("<answer>\\pm\\frac{\\sqrt3}{2}</answer>", "\\frac{\\sqrt{3}}{2}", 0.0),
    ("<answer>\\frac{\\sqrt3}{2}, \\frac{1}{2}</answer>", "\\frac{\\sqrt{3}}{2}", 0.0),
    ("<answer>\\pi \\text{ or } 2\\pi</answer>", "\\pi", 0.0), ("<answer>3.14</answer>", "\\pi", 0.0),
    ("<answer>(1,2] or [1,2]</answer>", "(1,2]", 0.0), ("<answer>\\{1,2,3\\}</answer>", "\\{1,2\\}", 0.0),
    ("<answer>3 \\text{, } 4</answer>", "4", 0.0), ("<answer>3 \\quad 4</answer>", "4", 0.0),
    ("<answer>x=3 \\quad x=4</answer>", "4", 0.0), ("<answer>3 \\\\ 4</answer>", "4", 0.0),
    ("<answer>3 \\& 4</answer>", "4", 0.0), ("<answer>3 \\to 4</answer>", "4", 0.0), ("<answer>3 | 4</answer>", "4", 0.0),
    ("<answer>3 \\dots 4</answer>", "4", 0.0), ("<answer>3 ... 4</answer>", "4", 0.0),
    ("<answer>3 \\otimes 4</answer>", "4", 0.0), ("<answer>3 \\hspace{1cm} 4</answer>", "4", 0.0),
    ("<answer>3 \\implies 4</answer>", "4", 0.0), ("<answer>\\sqrt{9} = 4</answer>", "4", 0.0),
    # a command outside the value-building set, an empty group, an unpaired $ or \\left, or two
    # operators in a row put two values side by side; the reverse order scores 0 as well
    *[(f"<answer>{a} {c} {b}</answer>", "4", 0.0) for a, b in (("3", "4"), ("4", "3")) for c in (
        "\\cup", "\\cap", "\\setminus", "\\in", "\\notin", "\\subset", "\\subseteq", "\\circ", "\\degree",
        "\\gcd", "\\lcm", "\\max", "\\lim", "\\sum", "\\prod", "\\emptyset", "\\langle", "\\rangle", "\\lceil",
        "\\vec", "\\bar", "\\hat", "\\tilde", "\\choose", "\\boxed{}", "\\fbox{}", "\\operatorname{}",
        "\\sqrt{}", "\\div\\div", "$", "\\left(")],
    ("<answer>3 \\left( 4 \\right.</answer>", "4", 0.0), ("<answer>4 \\left( 3 \\right.</answer>", "4", 0.0),
    # honest LaTeX still read
    ("<answer>90^\\circ</answer>", "90", 1.0), ("<answer>\\left(\\sqrt{16}\\right)</answer>", "4", 1.0),
    ("<answer>\\$\\sqrt{16}</answer>", "4", 1.0),
    ("<answer>\\gcd(8, 12)</answer>", "\\gcd(12, 8)", 1.0),
    ("<answer>\\begin{pmatrix} 1 & 2 \\\\ 3 & 4 \\end{pmatrix}</answer>", "\\begin{pmatrix} 1 & 2 \\\\ 3 & 4 \\end{pmatrix}", 1.0),
    ("<answer>\\begin{pmatrix} 1 & 2 \\\\ 3 & 5 \\end{pmatrix}</answer>", "\\begin{pmatrix} 1 & 2 \\\\ 3 & 4 \\end{pmatrix}", 0.0),
]


def _math_rewards(verifier, rows):
    task = make_task("math", "natural", verifier=verifier)
    problems = [Problem(f"math/natural/train/{i}", "math", "q", target, "", 0) for i, (_, target, _) in enumerate(rows)]
    return task.score(problems, [completion for completion, _, _ in rows])


@pytest.mark.parametrize("completion, target, reward", MATH_EXTRACT)
def test_math_extract_table(completion, target, reward):
    [score] = _math_rewards("extract", [(completion, target, reward)])
    assert score.reward == reward


@pytest.mark.parametrize("completion, target, reward", MATH_VERIFY)
def test_math_verify_table(completion, target, reward):
    pytest.importorskip("math_verify")
    [score] = _math_rewards("math-verify", [(completion, target, reward)])
    assert score.reward == reward


def test_tables_are_large_and_mostly_refusals():
    assert len(MATH_EXTRACT) >= 60 and len(MATH_VERIFY) >= 80
    assert 0.3 < sum(r for _, _, r in MATH_EXTRACT) / len(MATH_EXTRACT) < 0.6


# (completion, reward) for the natural logic task against the target "Bob" ({t}) and "True".
LOGIC_PERSON = [
    ("<answer>Bob</answer>", 1.0), ("<answer>bob</answer>", 1.0), ("<answer>Bob.</answer>", 1.0),
    ("\\boxed{Bob}", 1.0), ("<answer> Bob </answer>", 1.0), ("<answer>\\boxed{Bob}</answer>", 1.0),
    ("<answer>Bob</answer> \\boxed{bob}", 1.0), ("Bob is tallest. <answer>Bob</answer>", 1.0), ("<answer>'Bob'</answer>", 1.0),
    ("reasoning <answer>Bob", 1.0), ("<answer>BOB</answer>", 1.0), ("<answer>Bob!</answer>", 1.0),
    ("\\boxed{\\text{Bob}}", 1.0), ("<answer>**Bob**</answer>", 1.0), ("<answer>\\text{Ann or Bob}</answer>", 0.0),
    ("<answer>Ann or Bob</answer>", 0.0), ("<answer>Bob or Ann</answer>", 0.0), ("<answer>Ann, Bob</answer>", 0.0),
    ("<answer>Bob, Ann</answer>", 0.0), ("<answer>Ann</answer> <answer>Bob</answer>", 0.0),
    ("<answer>Bob</answer> <answer>Ann</answer>", 0.0), ("\\boxed{Ann} or \\boxed{Bob}", 0.0),
    ("\\boxed{Bob} or \\boxed{Ann}", 0.0), ("<answer>Ann; Bob</answer>", 0.0), ("<answer>Bob\nAnn</answer>", 0.0),
    ("<answer>Ann/Bob</answer>", 0.0), ("<answer>Ann and Bob</answer>", 0.0), ("<answer>either Ann or Bob</answer>", 0.0),
    ("Ann or Bob", 0.0), ("Bob", 0.0), ("The tallest is Bob.", 0.0), ("", 0.0),
    ("<answer></answer>", 0.0), ("<answer> </answer>", 0.0), ("\\boxed{}", 0.0),
    ("<answer>Ann</answer>", 0.0), ("<answer>Bobby</answer>", 0.0), ("<answer>nobody</answer>", 0.0),
]
LOGIC_FLAG = [
    ("<answer>True</answer>", 1.0), ("<answer>true</answer>", 1.0), ("<answer>T</answer>", 1.0),
    ("<answer>yes</answer>", 1.0), ("\\boxed{True}", 1.0), ("\\boxed{T}", 1.0),
    ("<answer>\\text{True}</answer>", 1.0), ("<answer>True.</answer>", 1.0), ("<answer>TRUE</answer> \\boxed{T}", 1.0), ("work <answer>True", 1.0),
    ("<answer>True or False</answer>", 0.0), ("<answer>False or True</answer>", 0.0), ("<answer>True, False</answer>", 0.0),
    ("<answer>False</answer> <answer>True</answer>", 0.0), ("<answer>True</answer> <answer>False</answer>", 0.0),
    ("\\boxed{T} or \\boxed{F}", 0.0), ("True", 0.0), ("It is True.", 0.0), ("<answer>False</answer>", 0.0),
    ("<answer>no</answer>", 0.0), ("<answer>maybe</answer>", 0.0), ("<answer></answer>", 0.0),
    ("<answer>True/False</answer>", 0.0), ("<answer>not True</answer>", 0.0), ("<answer>T F</answer>", 0.0),
]


@pytest.mark.parametrize("target, completion, reward",
                         [("Bob", c, r) for c, r in LOGIC_PERSON] + [("True", c, r) for c, r in LOGIC_FLAG])
def test_logic_table(target, completion, reward):
    [score] = make_task("logic", "natural").score([Problem("logic/natural/train/0", "logic", "q", target, "", 0)], [completion])
    assert score.reward == reward
    assert len(LOGIC_PERSON) + len(LOGIC_FLAG) >= 55


def test_format_bonus_needs_a_non_empty_answer():
    task = make_task("math", "natural")
    problem = Problem("math/natural/train/0", "math", "q", "4", "", 0)
    completions = ["<answer></answer>", "<answer>  </answer>", "\\boxed{}", "\\boxed{ }", "<answer>3</answer>",
                   "\\boxed{3 or 4}", "<answer></answer> \\boxed{4}"]
    assert [s.format_ok for s in task.score([problem] * len(completions), completions)] == [
        False, False, False, False, True, True, True]


def test_hostile_completions_cost_about_what_honest_ones_do():
    import time

    problem = Problem("math/natural/train/0", "math", "q", "4", "", 0)
    honest = ["Two and two make four. " * 200 + "<answer>4</answer>"] * 8
    hostile = ["<answer>" * 1200, "\\boxed{" * 1200, "<answer>" * 600 + "</answer>" * 600, "#### " * 1000,
               "<answer>" + "(" * 2000 + "</answer>", "<answer>" + "1," * 2000 + "</answer>",
               "<answer>" + "x^8*" * 500 + "</answer>", "<answer>" + "3 or " * 800 + "4</answer>"]
    for task in (make_task("math", "natural"), make_task("logic", "natural")):
        def cost(batch):
            start = time.perf_counter()
            scores = task.score([problem] * len(batch), batch)
            return time.perf_counter() - start, scores

        honest_s = min(cost(honest)[0] for _ in range(3))
        hostile_s, scores = min((cost(hostile) for _ in range(3)), key=lambda r: r[0])
        assert [s.reward for s in scores] == [0.0] * len(hostile)
        assert hostile_s < 10 * honest_s + 0.02  # generous: the machine is shared
