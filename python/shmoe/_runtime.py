"""The package's state on this PE: whether shmoe is initialised, which symmetric allocations are
live (the arrays the binding accepts as symmetric), and which collective objects are still open
(closed, in reverse order of creation, by shmoe.finalize())."""

import atexit
import bisect
import os
import sys

from . import _shmoe

Error = _shmoe.Error


class _State:
    def __init__(self):
        self.initialized = False
        self.finalized = False
        self.my_pe = -1
        self.n_pes = 0
        self.starts = []  # sorted start addresses of the live allocations
        self.sizes = {}  # start -> bytes
        self.resources = []  # open collective objects, oldest first
        self.agreement = None  # scratch of _agree.py
        self.died = False  # an exception nobody caught is ending the program


state = _State()


def require_init(call):
    if state.finalized:
        raise Error(f"{call}: shmoe.finalize() has been called; shmoe cannot be used any more")
    if not state.initialized:
        raise Error(f"{call}: call shmoe.init() first")


def init():
    """Starts this PE (collective). A second call does nothing."""
    if state.initialized:
        return
    if state.finalized:
        raise Error("shmoe.init: shmoe was finalized in this process and cannot start again")
    _shmoe.init()
    state.initialized = True
    state.my_pe = _shmoe.my_pe()
    state.n_pes = _shmoe.n_pes()
    from . import _agree  # noqa: PLC0415  (it imports this module)

    state.agreement = _agree.Scratch(state.my_pe, state.n_pes)
    _watch_uncaught_exceptions()
    atexit.register(_at_exit)


def _watch_uncaught_exceptions():
    previous = sys.excepthook

    def hook(*exc_info):
        state.died = True
        previous(*exc_info)

    sys.excepthook = hook


def _at_exit():
    """finalize() at a normal exit. A PE that an uncaught exception ends leaves at once instead,
    as a C program that crashes does (the launcher then stops the others): the collective
    close would wait for PEs that are still elsewhere in the program."""
    if state.died and state.initialized:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(1)
    finalize()


def finalize():
    """Closes every open collective object (MoE buffers and layers, teams), then ends this PE's
    part of the job (collective). Symmetric arrays must not be used afterwards."""
    if not state.initialized:
        return
    for resource in reversed(list(state.resources)):
        resource.close()
    state.starts.clear()
    state.sizes.clear()
    state.initialized = False
    state.finalized = True
    _shmoe.finalize()


def add_allocation(start, nbytes):
    bisect.insort(state.starts, start)
    state.sizes[start] = nbytes


def remove_allocation(start):
    del state.sizes[start]
    state.starts.remove(start)


def allocation_of(address, nbytes):
    """The (start, size) of the live allocation that holds [address, address + nbytes), or
    None."""
    i = bisect.bisect_right(state.starts, address) - 1
    if i < 0:
        return None
    start = state.starts[i]
    size = state.sizes[start]
    if address + nbytes <= start + size:
        return start, size
    return None


def add_resource(obj):
    state.resources.append(obj)


def remove_resource(obj):
    state.resources.remove(obj)
