"""Candidate values as data: tagged JSON in, plain Python values out, at a cost linear in the bytes.

A child sends each test's hole values as JSON of plain types (``encode`` in ``_zygote.py``):
lists are arrays; tuples, sets, frozensets, dicts, bytes, complex and non-finite floats are
one-key objects (``{"set": [...]}``); anything else is refused. A child can also write any
bytes it likes instead, so nothing here trusts the message's shape, and nothing costs more
than about its size:

- parsing runs in the json module's C scanner, whose recursion guard refuses deep nesting;
  where the trainer raised its recursion limit past what the C stack bears, a linear check
  first refuses a message nested deeper than an encoded value can be (``shallow``); each
  tagged object is one call of ``_tagged``;
- a set, a frozenset or a dict's keys are built only if at most ``MAX_SAME_HASH`` distinct
  items share one hash value. Python hashes an int by its value modulo 2**61 - 1, so a
  candidate can send thousands of distinct ints (tuples, floats, frozensets of them) with
  one hash, and building or probing a set of n of them costs n**2 comparisons. The check
  is linear: the items' hashes are counted first (they are ints below 2**61 that hash to
  themselves, so they cannot collide in turn), and only crowded hashes are looked into;
- an int has at most ``MAX_INT_DIGITS`` digits (converting decimal text is quadratic): the
  interpreter's own limit (4300 digits by default) applies, and this one where it is off.

``CHECKED`` holds the judge's ``set``, ``frozenset``, ``dict`` and ``int``: the same rules
for what a test builds from candidate values (``set(f(x))``, ``sorted(xs, key=frozenset)``),
and ``isinstance`` answered as for the real types.
"""

from __future__ import annotations

import collections
import json
import sys
from typing import Any

MAX_SAME_HASH = 4  # distinct items one hash may hold; honest data has 1 (-1 and -2 share one)
MAX_INT_DIGITS = 4300
MAX_DEPTH = 100  # the child's encoder refuses deeper values
_MAX_JSON_DEPTH = 3 * MAX_DEPTH + 4  # a dict level is three JSON levels; the message wraps the values in two
# Up to this recursion limit the scanner's own recursion guard stops deep nesting well inside
# the C stack, and ``shallow`` need not run; a trainer that raised its limit gets the check.
_SAFE_RECURSION = 4000
_OPENERS = (b"[", b"{")
_STEPS = bytes(1 if b in b"[{" else 255 if b in b"]}" else 0 for b in range(256))  # int8: +1 in, -1 out


class Undecodable(ValueError):
    """A value from the candidate that is not tagged JSON of plain types, or costs too much."""


def check_hashes(items: list) -> None:
    """Refuse ``items`` if more than MAX_SAME_HASH distinct ones share a hash; TypeError if
    one is unhashable. Linear in the items (each crowded group holds at most
    MAX_SAME_HASH + 1 distinct items before it is refused)."""
    hashes = list(map(hash, items))
    if len(set(hashes)) == len(hashes):
        return
    crowded = {h for h, count in collections.Counter(hashes).items() if count > MAX_SAME_HASH}
    groups: dict[int, set] = {}
    for h, item in zip(hashes, items):
        if h in crowded:
            group = groups.setdefault(h, set())
            group.add(item)
            if len(group) > MAX_SAME_HASH:
                raise Undecodable(f"more than {MAX_SAME_HASH} distinct items share one hash")


def _hash_safe_set(kind):
    def build(iterable=()):
        items = list(iterable)
        check_hashes(items)
        return kind(items)
    return build


def _hash_safe_dict(*args, **kwargs):
    if len(args) > 1:
        raise TypeError("dict expected at most 1 argument")
    if args and not isinstance(args[0], dict):  # a dict here was built by these rules already
        pairs = [tuple(p) for p in args[0]]
        if any(len(p) != 2 for p in pairs):
            raise ValueError("dict() needs pairs")
        check_hashes([k for k, _ in pairs])
        args = (pairs,)
    return dict(*args, **kwargs)


def _bounded_int(*args, **kwargs):
    if args and isinstance(args[0], (str, bytes, bytearray)) and len(args[0]) > MAX_INT_DIGITS + 64:
        raise ValueError("int() of a string too long to judge")
    return int(*args, **kwargs)


class _Checked(type):
    """A judge's stand-in for a built-in type: calling it builds the real type through
    ``build``; ``isinstance``/``issubclass`` answer as for the real type."""

    def __instancecheck__(cls, obj) -> bool:
        return isinstance(obj, cls.real)

    def __subclasscheck__(cls, sub) -> bool:
        return issubclass(sub, cls.real)

    def __call__(cls, *args, **kwargs):
        return cls.build(*args, **kwargs)


def _checked(real: type, build) -> type:
    return _Checked(real.__name__, (), {"real": real, "build": staticmethod(build)})


CHECKED = {"set": _checked(set, _hash_safe_set(set)), "frozenset": _checked(frozenset, _hash_safe_set(frozenset)),
           "dict": _checked(dict, _hash_safe_dict), "int": _checked(int, _bounded_int)}


def _pairs(body) -> list:
    if type(body) is not list or not all(type(p) is list and len(p) == 2 for p in body):
        raise Undecodable("a dict travels as [key, value] pairs")
    return body


def _number(value) -> float:
    if type(value) not in (int, float):
        raise Undecodable("a complex part is a number")
    return value


_TAGS = {
    "tuple": lambda body: tuple(body) if type(body) is list else None,
    "set": lambda body: CHECKED["set"](body) if type(body) is list else None,
    "frozenset": lambda body: CHECKED["frozenset"](body) if type(body) is list else None,
    "dict": lambda body: CHECKED["dict"](_pairs(body)),
    "bytes": lambda body: bytes.fromhex(body) if type(body) is str else None,
    "float": lambda body: float(body) if body in ("nan", "inf", "-inf") else None,
    "complex": lambda body: complex(*map(_number, body)) if type(body) is list and len(body) == 2 else None,
}


def _tagged(pairs: list) -> Any:
    """One JSON object, its body already decoded -> the value its one tag names."""
    if len(pairs) != 1 or pairs[0][0] not in _TAGS:
        raise Undecodable(f"not a tagged value: {[k for k, _ in pairs][:3]}")
    tag, body = pairs[0]
    try:
        value = _TAGS[tag](body)
    except TypeError as e:  # an unhashable set item or dict key
        raise Undecodable(str(e)) from None
    if value is None:
        raise Undecodable(f"malformed {tag}")
    return value


def decode(value: Any, depth: int = 0) -> Any:
    """Tagged JSON already loaded (plain lists, dicts, scalars) -> Python value."""
    if depth > MAX_DEPTH:
        raise Undecodable("nested too deep")
    kind = type(value)
    if value is None or kind in (bool, int, float, str):
        return value
    if kind is list:
        return [decode(v, depth + 1) for v in value]
    if kind is dict:
        return _tagged([(k, decode(v, depth + 1)) for k, v in value.items()])
    raise Undecodable(f"unexpected {kind.__name__}")


def shallow(line: bytes, limit: int = _MAX_JSON_DEPTH) -> bool:
    """Does this JSON text nest at most ``limit`` deep (and close no more than it opened)?
    Linear, at C speed: escapes are cut out as the scanner reads them (backslash pairs from
    the left, then escaped quotes), a bracket after an odd number of quotes is text, and the
    running depth is summed over the rest."""
    if sum(map(line.count, _OPENERS)) <= limit:
        return True
    import numpy as np  # only for long messages

    text = np.frombuffer(line.replace(b"\\\\", b"").replace(b'\\"', b""), dtype=np.uint8)
    steps = np.frombuffer(_STEPS, dtype=np.int8)[text]
    if b'"' in line:
        steps[np.bitwise_xor.accumulate(text == ord('"'))] = 0
    depth = np.cumsum(steps, dtype=np.int32)
    return not depth.size or (int(depth.max()) <= limit and int(depth.min()) >= 0)


def _reject_constant(name: str) -> None:
    raise Undecodable(f"bare {name} (non-finite floats travel tagged)")


def _int_text(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise Undecodable(f"an int of more than {MAX_INT_DIGITS} digits")
    return int(text)


def _int_parser():
    """None (the C default) where the interpreter limits int digits itself."""
    limit = getattr(sys, "get_int_max_str_digits", lambda: 0)()
    return None if 0 < limit <= MAX_INT_DIGITS else _int_text


def parse_line(line: bytes) -> tuple[int, list | None]:
    """One result message ``[test_index, [value, ...]]`` -> (index, decoded values, or None
    if the child could not evaluate the test). ValueError if it is not that, or would cost
    more than its size to decode."""
    # Strict UTF-8 (no multi-byte sequence holds an ASCII byte, so shallow's byte scan sees
    # the scanner's structure), and decoded here: json.loads would take bytes such as
    # b"[\x00" for UTF-16.
    text = line.decode()
    if sys.getrecursionlimit() > _SAFE_RECURSION and not shallow(line):
        raise Undecodable("nested too deep")
    data = json.loads(text, object_pairs_hook=_tagged, parse_constant=_reject_constant, parse_int=_int_parser())
    if type(data) is not list or len(data) != 2 or type(data[0]) is not int:
        raise Undecodable("result line must be [index, values]")
    return data[0], data[1] if type(data[1]) is list else None
