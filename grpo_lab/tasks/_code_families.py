"""Built-in function-writing problems for the natural code register, MBPP-style.

Each family is a description plus a reference implementation, optionally parametrised by
a constant ``c`` so one family yields many distinct problems. Expected test values are
computed by running the reference (our own source, never model output), so a problem's
solution passes its tests by construction.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Callable


@dataclass(frozen=True)
class Family:
    fid: str
    level: int
    name: str  # function name, may use {c}
    args: str  # parameter list as written in the signature
    desc: str  # completes "Write a Python function `name(args)` that ..."; may use {c}
    body: str  # indented function body; may use {c} (or {c!r} for strings)
    consts: tuple[Any, ...]  # values of {c}; (None,) for families without a constant
    inputs: Callable[[Any], list[tuple]]  # argument tuples for the tests, given c


_WORDS = ["apple", "kiwi", "banana", "fig", "cherry", "plum"]
_LISTS = [[3, 8, 1, 6], [5, 2, 9, 2, 7], [10, 4], [1, 2, 3, 4, 5, 6]]

FAMILIES: tuple[Family, ...] = (
    # level 0: one-line functions of scalars
    Family("add", 0, "add_{c}", "x", "returns x plus {c}", "return x + {c}",
           tuple(range(1, 21)), lambda c: [(5,), (0,), (-3,), (12,)]),
    Family("sub", 0, "minus_{c}", "x", "returns x minus {c}", "return x - {c}",
           tuple(range(1, 21)), lambda c: [(30,), (0,), (7,), (-2,)]),
    Family("mul", 0, "times_{c}", "x", "returns x multiplied by {c}", "return x * {c}",
           tuple(range(2, 13)), lambda c: [(4,), (0,), (-2,), (7,)]),
    Family("div", 0, "divisible_by_{c}", "n",
           "returns True if n is divisible by {c} and False otherwise", "return n % {c} == 0",
           tuple(range(2, 10)), lambda c: [(3 * c,), (3 * c + 1,), (0,), (7 * c - 1,)]),
    Family("rep", 0, "repeat_{c}", "s", "returns the string s repeated {c} times",
           "return s * {c}", tuple(range(2, 7)), lambda c: [("ab",), ("",), ("xyz",)]),
    Family("max2", 0, "larger", "a, b", "returns the larger of the two numbers a and b",
           "return max(a, b)", (None,), lambda c: [(3, 9), (7, 2), (-1, -5), (4, 4)]),
    Family("last", 0, "last_item", "items", "returns the last element of the list items",
           "return items[-1]", (None,), lambda c: [(lst,) for lst in _LISTS]),
    # level 1: a loop or comprehension over a list or string
    Family("cnt", 1, "count_{c}", "s",
           "returns how many times the character {c!r} appears in the string s",
           "return s.count({c!r})", tuple("abcdefghijklmnopqrstuvwxyz"),
           lambda c: [(f"{c}x{c}",), ("hello world",), ("",), (c * 3 + "q",)]),
    Family("scale", 1, "scale_by_{c}", "nums",
           "returns a new list with every element of nums multiplied by {c}",
           "return [x * {c} for x in nums]", tuple(range(2, 10)),
           lambda c: [(lst,) for lst in _LISTS[:3]] + [([],)]),
    Family("gt", 1, "count_above_{c}", "nums",
           "returns how many numbers in the list nums are greater than {c}",
           "return sum(1 for x in nums if x > {c})", tuple(range(0, 10)),
           lambda c: [(lst,) for lst in _LISTS]),
    Family("long", 1, "longer_than_{c}", "words",
           "returns the words of the list words that have more than {c} letters, in order",
           "return [w for w in words if len(w) > {c}]", tuple(range(2, 7)),
           lambda c: [(_WORDS,), (["a", "bbbbbbb"],), ([],)]),
    Family("even", 1, "sum_even", "nums", "returns the sum of the even numbers in the list nums",
           "return sum(x for x in nums if x % 2 == 0)", (None,),
           lambda c: [(lst,) for lst in _LISTS] + [([],)]),
    Family("vow", 1, "count_vowels", "s",
           "returns the number of vowels (a, e, i, o, u, lower case) in the string s",
           "return sum(ch in 'aeiou' for ch in s)", (None,),
           lambda c: [("banana",), ("sky",), ("education",), ("",)]),
    Family("rev", 1, "reverse_words", "s",
           "returns the words of the sentence s in reverse order, joined by single spaces",
           "return ' '.join(reversed(s.split()))", (None,),
           lambda c: [("a b c",), ("hello world",), ("one",)]),
    # level 2: small algorithms
    Family("fib", 2, "fib", "n",
           "returns the n-th Fibonacci number, where fib(0) = 0 and fib(1) = 1",
           "a, b = 0, 1\n    for _ in range(n):\n        a, b = b, a + b\n    return a",
           (None,), lambda c: [(0,), (1,), (7,), (20,)]),
    Family("pal", 2, "is_palindrome", "s",
           "returns True if s reads the same forwards and backwards, ignoring case",
           "s = s.lower()\n    return s == s[::-1]", (None,),
           lambda c: [("Level",), ("abc",), ("",), ("noon",)]),
    Family("second", 2, "second_largest", "nums",
           "returns the second largest distinct number in the list nums",
           "return sorted(set(nums))[-2]", (None,),
           lambda c: [([3, 8, 1, 6],), ([5, 5, 2],), ([10, 4],), ([1, 9, 9, 7],)]),
    Family("primes", 2, "primes_below", "n", "returns the list of all prime numbers smaller than n",
           "return [p for p in range(2, n) if all(p % d for d in range(2, int(p ** 0.5) + 1))]",
           (None,), lambda c: [(10,), (2,), (30,)]),
    Family("mults", 2, "count_multiples_{c}", "n",
           "returns how many integers from 1 to n inclusive are divisible by {c}",
           "return n // {c}", tuple(range(2, 10)), lambda c: [(20,), (c - 1,), (c,), (100,)]),
    Family("rot", 2, "rotate_left_{c}", "items",
           "returns the list items rotated left by {c} positions (wrapping around); "
           "an empty list stays empty",
           "if not items:\n        return []\n    k = {c} % len(items)\n    return items[k:] + items[:k]",
           tuple(range(1, 5)), lambda c: [([1, 2, 3, 4, 5],), ([7, 8],), ([],)]),
    Family("chunk", 2, "chunks_of_{c}", "items",
           "splits the list items into consecutive chunks of {c} elements (the last chunk may "
           "be shorter) and returns the list of chunks",
           "return [items[i:i + {c}] for i in range(0, len(items), {c})]",
           tuple(range(2, 5)), lambda c: [([1, 2, 3, 4, 5],), ([],), ([9],)]),
    Family("pow", 2, "power_sum_{c}", "nums",
           "returns the sum of x ** {c} over the numbers x in the list nums",
           "return sum(x ** {c} for x in nums)", tuple(range(2, 5)),
           lambda c: [([1, 2, 3],), ([],), ([-2, 5],)]),
)


def source(family: Family, c: Any) -> str:
    """The reference implementation as source text."""
    name = family.name.format(c=c)
    return f"def {name}({family.args}):\n    {family.body.format(c=c)}\n"


@lru_cache(maxsize=1024)
def tests(family: Family, c: Any) -> tuple[str, ...]:
    """``assert name(args) == expected`` strings, expected values from the reference."""
    env: dict[str, Any] = {}
    exec(source(family, c), env)  # trusted: our own reference implementation
    name = family.name.format(c=c)
    fn = env[name]
    out = []
    for args in family.inputs(c):
        expected = fn(*[list(a) if isinstance(a, list) else a for a in args])
        out.append(f"assert {name}({', '.join(map(repr, args))}) == {expected!r}")
    return tuple(out)
