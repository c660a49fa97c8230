"""Refusals of collective calls, made on every PE alike.

A collective operator that one PE refuses before it starts would leave the others waiting for
that PE. So before such a call (MoE buffers and layers, their dispatch, combine and forward),
every PE publishes whether it refuses the call and why (an fcollect of one record per PE), and
then every PE raises: the refusing PE its own ValueError or TypeError, the others shmoe.Error
naming that PE and its reason."""

import numpy as np

from . import _shmoe
from ._arrays import array_at

_RECORD = 256  # bytes: a status byte, then the message in UTF-8


class Scratch:
    """Symmetric records for the exchange, two sets used alternately: a PE may enter the next
    exchange while a slower one still reads the last."""

    def __init__(self, n_pes):
        self.n_pes = n_pes
        per_set = _RECORD * (1 + n_pes)
        self.address = _shmoe.malloc(2 * per_set)
        if self.address == 0:
            raise _shmoe.Error("shmoe.init: the symmetric heap has no room for shmoe's own records")
        self.memory = array_at(self.address, (2 * per_set,), np.uint8)
        self.calls = 0

    def exchange(self, record):
        """Every PE's record (collective over all PEs)."""
        per_set = _RECORD * (1 + self.n_pes)
        base = (self.calls % 2) * per_set
        self.calls += 1
        self.memory[base : base + _RECORD] = np.frombuffer(record, np.uint8)
        src = self.address + base
        dest = src + _RECORD
        if _shmoe.fcollectmem(_shmoe.team_world(), dest, src, _RECORD) != 0:
            raise _shmoe.Error("shmoe: the exchange of refusals between PEs failed")
        out = self.memory[base + _RECORD : base + per_set].reshape(self.n_pes, _RECORD)
        return [bytes(row) for row in out]


def agree(call, refusal):
    """Raises on every PE if any PE refuses `call`; `refusal` is this PE's exception or None."""
    from ._runtime import state  # noqa: PLC0415

    record = bytearray(_RECORD)
    if refusal is not None:
        record[0] = 1
        text = str(refusal).encode("utf-8")[: _RECORD - 1]
        record[1 : 1 + len(text)] = text
    records = state.agreement.exchange(bytes(record))
    if refusal is not None:
        raise refusal
    for pe, r in enumerate(records):
        if r[0]:
            reason = r[1:].rstrip(b"\0").decode("utf-8", "replace")
            raise _shmoe.Error(f"{call}: PE {pe} refused the call: {reason}")


def checked(call, check):
    """Runs the local check `check()` (which raises ValueError, TypeError or shmoe.Error for bad
    arguments), agrees with the other PEs, and returns what the check returned."""
    try:
        result = check()
    except (ValueError, TypeError, _shmoe.Error) as e:
        agree(call, e)
        raise  # not reached: agree raised
    agree(call, None)
    return result
