"""The package's state on this PE: whether shmoe is initialised, and which collective objects are
still open (closed, in reverse order of creation, by shmoe.finalize()); and agreed(), the shape
of every collective call: convert the arguments, then agree through the library."""

from __future__ import annotations

import atexit
import os
import sys
from typing import (Any, Callable, List, NoReturn, Optional, Protocol, Sequence, Tuple, TypeVar,
                    Union)

from . import _shmoe

Error = _shmoe.Error
T = TypeVar("T")


class Closable(Protocol):
    def close(self) -> None: ...


class _State:
    def __init__(self) -> None:
        self.initialized = False
        self.finalized = False
        self.my_pe = -1
        self.n_pes = 0
        self.world: Optional[_shmoe.TeamHandle] = None
        self.resources: List[Closable] = []  # open collective objects, oldest first
        self.died = False  # an exception nobody caught is ending the program


state = _State()


def require_init(call: str) -> None:
    if state.finalized:
        raise Error(f"{call}: shmoe.finalize() has been called; shmoe cannot be used any more")
    if not state.initialized:
        raise Error(f"{call}: call shmoe.init() first")


def world() -> _shmoe.TeamHandle:
    assert state.world is not None
    return state.world


def agreed(call: str, convert: Callable[[], T],
           values: Callable[[Any], Sequence[Tuple[str, int]]] = lambda _: (),
           team: Optional[_shmoe.TeamHandle] = None) -> T:
    """The converted arguments of a collective call, once every PE of `team` (default: all) has
    converted its own and the library has agreed on them (shmoe_agree): if `convert` raises
    on any PE, that PE raises its own exception and every other one shmoe.Error naming it; the
    `values` of the converted arguments must be the same on every PE."""
    handle = world() if team is None else team
    try:
        result = convert()
    except Exception as e:
        try:
            _shmoe.agree(handle, call, str(e))
        except Error:
            pass
        raise
    _shmoe.agree(handle, call, None, list(values(result)))
    return result


def init(rank: Optional[int] = None, size: Optional[int] = None, store: Optional[str] = None,
         key: Optional[str] = None, *, store_apart: bool = False) -> None:
    """Starts this PE (collective). A second call does nothing.

    Without arguments the launcher (shmoerun, mpirun, srun) says who this PE is. A job that
    another framework started (torch.distributed) gives all four instead: this process is PE
    `rank` of `size`, PE 0 runs the config store at `store` ("HOST:PORT", a port the others can
    reach) and every PE proves `key` (32+ printable characters, the same on every PE, handed
    out through the framework, never on a command line). With `store_apart` the store already
    runs apart from every PE at `store` (`shmoerun --store-only`, with the same key), so no PE's
    loss, PE 0's included, takes it with it."""
    given = [rank, size, store, key]
    if state.initialized:
        return
    if state.finalized:
        raise Error("shmoe.init: shmoe was finalized in this process and cannot start again")
    if store_apart and all(v is None for v in given):
        raise TypeError("shmoe.init: store_apart=True needs rank, size, store and key: a "
                        "launcher's PEs join the store their launcher says")
    if any(v is not None for v in given):
        names = ["rank", "size", "store", "key"]
        missing = [n for n, v in zip(names, given) if v is None]
        if missing:
            raise TypeError(f"shmoe.init: {', '.join(missing)} missing: give rank, size, store "
                            "and key together, or none of them")
        for n, v, t in zip(names, given, (int, int, str, str)):
            if isinstance(v, bool) or not isinstance(v, t):
                raise TypeError(f"shmoe.init: {n} must be {t.__name__}, not {type(v).__name__}")
        _shmoe.init_from(int(rank), int(size), str(store), str(key),  # type: ignore[arg-type]
                         bool(store_apart))
    else:
        _shmoe.init()
    state.initialized = True
    state.my_pe = _shmoe.my_pe()
    state.n_pes = _shmoe.n_pes()
    state.world = _shmoe.team_world()
    _watch_uncaught_exceptions()
    atexit.register(_at_exit)


def _watch_uncaught_exceptions() -> None:
    """Marks this PE as failed when an exception ends the program: uncaught (sys.excepthook), or
    caught by a runner that then exits with a failure status through sys.exit, as
    torch.multiprocessing.spawn's workers and multiprocessing's spawned children do."""
    previous = sys.excepthook

    def hook(*exc_info):  # type: ignore[no-untyped-def]
        state.died = True
        previous(*exc_info)

    sys.excepthook = hook
    previous_exit = sys.exit

    def exit(status: Union[str, int, None] = None) -> NoReturn:
        if status not in (None, 0):
            state.died = True
        previous_exit(status)

    sys.exit = exit  # type: ignore[assignment]


def _at_exit() -> None:
    """finalize() at a normal exit. A PE that an uncaught exception ends leaves at once instead,
    as a C program that crashes does (the launcher then stops the others): the collective
    close would wait for PEs that are still elsewhere in the program."""
    if state.died and state.initialized:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(1)
    finalize()


def finalize() -> None:
    """Closes every open collective object (MoE buffers and layers, teams), then ends this PE's
    part of the job (collective). Symmetric arrays must not be used afterwards."""
    if not state.initialized:
        return
    for resource in reversed(list(state.resources)):
        resource.close()
    state.initialized = False
    state.finalized = True
    _shmoe.finalize()


def add_resource(obj: Closable) -> None:
    state.resources.append(obj)


def remove_resource(obj: Closable) -> None:
    state.resources.remove(obj)
