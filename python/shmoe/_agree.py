"""Refusals of collective calls, made on every PE alike.

A collective operator that one PE refuses before it starts would leave the others waiting for
that PE. So before such a call (MoE buffers and layers, their dispatch, combine and forward),
every PE publishes whether it refuses the call and why (one record per PE, put to every PE), and
then every PE raises: the refusing PE its own ValueError or TypeError, the others shmoe.Error
naming that PE and its reason."""

import numpy as np

from . import _shmoe
from ._arrays import array_at
from ._runtime import state

_RECORD = 256  # bytes: a status byte, then the message in UTF-8


class Scratch:
    """Symmetric records for the exchange: each PE puts its record into its slot at every PE,
    with a signal carrying the exchange's number, and waits for every PE's signal (one round, no
    barrier). Two sets are used alternately: a PE that has seen every record of exchange g may
    enter g + 1 while a slower one still reads the records of g, but not reach g + 2."""

    def __init__(self, my_pe, n_pes):
        self.my_pe = my_pe
        self.n_pes = n_pes
        self.records_bytes = _RECORD * n_pes
        self.set_bytes = self.records_bytes + 8 * n_pes
        self.address = _shmoe.malloc(2 * self.set_bytes)
        if self.address == 0:
            raise _shmoe.Error("shmoe.init: the symmetric heap has no room for shmoe's own records")
        self.memory = array_at(self.address, (2 * self.set_bytes,), np.uint8)
        self.memory[:] = 0
        self.calls = 0
        self.mine = np.zeros(_RECORD, np.uint8)
        _shmoe.barrier_all()  # every PE's signals are zero before any exchange

    def exchange(self, record):
        """Every PE's record (collective over all PEs)."""
        self.calls += 1
        base = self.address + (self.calls % 2) * self.set_bytes
        records, signals = base, base + self.records_bytes
        me = self.my_pe
        self.mine[:] = np.frombuffer(record, np.uint8)
        source = self.mine.__array_interface__["data"][0]
        for pe in range(self.n_pes):
            _shmoe.putmem_signal(records + me * _RECORD, source, _RECORD, signals + 8 * me,
                                 self.calls, _shmoe.SIGNAL_SET, pe)
        for pe in range(self.n_pes):
            _shmoe.signal_wait_until(signals + 8 * pe, _shmoe.CMP_GE, self.calls)
        first = records - self.address
        out = self.memory[first : first + self.records_bytes].reshape(self.n_pes, _RECORD)
        return [bytes(row) for row in out]


def agree(call, refusal):
    """Raises on every PE if any PE refuses `call`; `refusal` is this PE's exception or None."""
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
