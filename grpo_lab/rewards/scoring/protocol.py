"""What passes between the trainer and the scoring worker's children.

Trainer to child: one job, an 8-byte big-endian length and a pickle of a tuple (see
``_scorers.py``); the trainer writes it, so the child may unpickle it. Child to trainer: one
float in ASCII, then the child's end of the socket closes. The trainer never unpickles or
evaluates what a child sends: ``parse_reply`` accepts at most ``MAX_REPLY`` bytes spelling one
finite decimal number in [0, 1], and anything else scores 0.
"""

from __future__ import annotations

import math
import pickle
import re
import socket

MAX_REPLY = 32
_HEADER = 8
_NUMBER = re.compile(rb"[0-9]+(?:\.[0-9]+)?(?:e-[0-9]+)?")


def job(*fields) -> bytes:
    return pickle.dumps(fields, protocol=pickle.HIGHEST_PROTOCOL)


def frame(payload: bytes) -> bytes:
    return len(payload).to_bytes(_HEADER, "big") + payload


def parse_reply(data: bytes) -> float:
    """The child's score, or 0.0 for anything but one finite number in [0, 1]."""
    if len(data) > MAX_REPLY or not _NUMBER.fullmatch(data):
        return 0.0
    value = float(data)
    return value if math.isfinite(value) and 0.0 <= value <= 1.0 else 0.0


def drain(sock: socket.socket, reply: bytearray) -> str:
    """Append what the child has sent. "open": it may send more; "closed": it closed its end
    (the reply is complete); "over": it sent more than a reply may hold."""
    while True:
        try:
            chunk = sock.recv(MAX_REPLY + 1, socket.MSG_DONTWAIT)
        except BlockingIOError:
            return "open"
        except OSError:
            return "closed"
        if not chunk:
            return "closed"
        reply += chunk
        if len(reply) > MAX_REPLY:
            return "over"
