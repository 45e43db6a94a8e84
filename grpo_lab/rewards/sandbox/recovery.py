"""What the code sandbox (``pool.py``) and the scoring worker (``rewards/scoring/worker.py``) share
about surviving their template and their process: the retry-alone rule for a lost template,
and a lock a forked child gets back released.
"""

from __future__ import annotations

import collections
import os
import threading
import weakref
from typing import Callable, Iterable

LOSSES_IN_A_ROW = 3  # template losses with nothing scored in between: the host is broken


def run_all(owner, indices: Iterable[int], attempt: Callable, fail: Callable[[int], Exception], empty):
    """Every index's value, whatever happens to ``owner``'s template.

    ``attempt(batch)`` runs a batch on the current template and returns (values, None), or once
    the template is lost (the values it gave, (interrupted, never started)). After a loss,
    ``owner._discard()`` drops the template, the interrupted indices run again one at a time and
    the unstarted ones in the next batch; one that loses the template alone gets ``empty``.
    ``owner.templates_lost`` and ``owner.scored_zero_alone`` count those events; ``fail(n)`` is
    raised after ``LOSSES_IN_A_ROW`` losses with nothing scored in between."""
    queue = collections.deque(indices)
    suspects: collections.deque = collections.deque()
    values: dict = {}
    losses_in_a_row = 0
    while queue or suspects:
        alone = bool(suspects)
        batch = [suspects.popleft()] if alone else list(queue)
        if not alone:
            queue.clear()
        done, lost = attempt(batch)
        values.update(done)
        if lost is None:
            losses_in_a_row = 0
            continue
        interrupted, unstarted = lost
        owner.templates_lost += 1
        losses_in_a_row = 0 if done else losses_in_a_row + 1
        owner._discard()
        if losses_in_a_row >= LOSSES_IN_A_ROW:
            raise fail(losses_in_a_row)
        if alone:
            values[batch[0]] = empty
            owner.scored_zero_alone += 1
        else:
            suspects.extend(interrupted)
            queue.extend(unstarted)
    return values


class ForkSafeLock:
    """A ``threading.Lock`` (as a context manager) that a child forked while another thread held
    it gets back released: the holder does not exist in the child, so the child would wait forever."""

    def __init__(self):
        self._lock = threading.Lock()
        _LOCKS.add(self)

    def __enter__(self):
        self._lock.acquire()
        return self

    def __exit__(self, *exc):
        self._lock.release()


_LOCKS: weakref.WeakSet = weakref.WeakSet()


def _release_in_child() -> None:
    for lock in list(_LOCKS):
        lock._lock = threading.Lock()


os.register_at_fork(after_in_child=_release_in_child)
