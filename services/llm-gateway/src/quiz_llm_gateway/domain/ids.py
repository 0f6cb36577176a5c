"""Ids of calls and holds: UUID-shaped, unique across replicas, without a syscall each (pure).

A random 64-bit prefix per process and a counter: unique within the process by the counter and
across replicas by the prefix, without uuid4's getrandom syscall per id (issue 24).
"""

from __future__ import annotations

import itertools
import secrets
import uuid

_ID_PREFIX = secrets.randbits(64) << 64
_id_counter = itertools.count(1)


def new_id() -> str:
    """A fresh UUID-shaped id (version 4 bits set) for a call or a hold: 36 characters."""
    return str(uuid.UUID(int=_ID_PREFIX | next(_id_counter), version=4))
