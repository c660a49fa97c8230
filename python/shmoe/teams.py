"""Teams (OpenSHMEM 1.5 section 9.4) and the team-based collectives on symmetric arrays. Every
collective converts its arguments and agrees through the library before it starts (a bad
argument, or arguments that differ where they must not, raise on every PE of the team)."""

from __future__ import annotations

import numbers
from typing import Any, Callable, Optional, Tuple

from . import _shmoe
from ._arrays import ArrayArg
from ._runtime import Error, add_resource, agreed, remove_resource, require_init
from .core import supported_dtypes, symmetric, typed_function

__all__ = [
    "Team", "team_world", "team_shared", "broadcast", "fcollect", "alltoall", "reduce",
    "and_reduce", "or_reduce", "xor_reduce", "max_reduce", "min_reduce", "sum_reduce",
    "prod_reduce",
]


class Team:
    """A team of PEs. team_world() and team_shared() are predefined; split_strided makes new
    ones (collective over the parent), which destroy() (collective over the team) ends."""

    def __init__(self, handle: Optional[_shmoe.TeamHandle], name: str, predefined: bool) -> None:
        self._handle = handle
        self._name = name
        self._predefined = predefined

    def __repr__(self):
        return f"<shmoe.Team {self._name}>"

    def handle(self, call: str) -> _shmoe.TeamHandle:
        require_init(call)
        if self._handle is None:
            raise Error(f"{call}: team {self._name} has been destroyed")
        return self._handle

    def my_pe(self):
        return _shmoe.team_my_pe(self.handle("Team.my_pe"))

    def n_pes(self):
        return _shmoe.team_n_pes(self.handle("Team.n_pes"))

    def translate_pe(self, pe, team):
        """The number in `team` of this team's PE `pe`, or -1 where it is not a member."""
        call = "Team.translate_pe"
        mine = self.handle(call)
        n = _shmoe.team_n_pes(mine)
        if isinstance(pe, bool) or not isinstance(pe, numbers.Integral):
            raise TypeError(f"{call}: pe must be an int, not {type(pe).__name__}")
        if not 0 <= pe < n:
            raise ValueError(f"{call}: pe={pe} is out of range (0..{n - 1})")
        if not isinstance(team, Team):
            raise TypeError(f"{call}: team must be a shmoe.Team, not {type(team).__name__}")
        return _shmoe.team_translate_pe(mine, int(pe), team.handle(call))

    def split_strided(self, start: int, stride: int, size: int) -> Optional["Team"]:
        """The team of this team's PEs start, start + stride, ... (size of them); collective over
        this team, which agrees on the arguments first. Returns the new Team on its members and
        None on the other PEs."""
        call = "Team.split_strided"
        parent = self.handle(call)
        n = _shmoe.team_n_pes(parent)

        def convert() -> Tuple[int, int, int]:
            for name, v in (("start", start), ("stride", stride), ("size", size)):
                if isinstance(v, bool) or not isinstance(v, numbers.Integral):
                    raise TypeError(f"{call}: {name} must be an int, not {type(v).__name__}")
            if not 0 <= start < n:
                raise ValueError(f"{call}: start={start} is out of range (0..{n - 1})")
            if size < 1:
                raise ValueError(f"{call}: size={size} is out of range (1..{n})")
            if stride < 1:
                raise ValueError(f"{call}: stride={stride} must be at least 1")
            last = start + (size - 1) * stride
            if last >= n:
                raise ValueError(f"{call}: start={start}, stride={stride}, size={size} reach PE "
                                 f"{last} of a team of {n} PEs")
            return int(start), int(stride), int(size)

        args = agreed(call, convert,
                      lambda a: [("start", a[0]), ("stride", a[1]), ("size", a[2])], parent)
        rc, handle = _shmoe.team_split_strided(parent, *args)
        if rc != 0:
            raise Error(
                f"{call}: the split ({start}, {stride}, {size}) of {self._name} was refused")
        if handle is None:
            return None
        team = Team(handle, f"{self._name}.split({start}, {stride}, {size})", False)
        add_resource(team)
        return team

    def sync(self):
        if _shmoe.team_sync(self.handle("Team.sync")) != 0:
            raise Error(f"Team.sync: the synchronization of {self._name} failed")

    def destroy(self):
        """Ends the team (collective over its PEs)."""
        if self._predefined:
            raise ValueError(f"Team.destroy: {self._name} is predefined and cannot be destroyed")
        handle = self.handle("Team.destroy")
        self._handle = None
        remove_resource(self)
        _shmoe.team_destroy(handle)

    close = destroy  # what shmoe.finalize calls

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self._handle is not None:
            self.destroy()


_world = Team(None, "world", True)
_shared = Team(None, "shared", True)


def team_world() -> Team:
    require_init("shmoe.team_world")
    _world._handle = _shmoe.team_world()
    return _world


def team_shared() -> Team:
    require_init("shmoe.team_shared")
    _shared._handle = _shmoe.team_shared()
    return _shared


def _team(call: str, team: Any) -> Team:
    if team is None:
        return team_world()
    if not isinstance(team, Team):
        raise TypeError(f"{call}: team must be a shmoe.Team or None (the world), not "
                        f"{type(team).__name__}")
    team.handle(call)
    return team


def _operands(call: str, team: Any, dest: Any, src: Any) -> Tuple[Team, ArrayArg, ArrayArg]:
    team = _team(call, team)
    d = symmetric(call, dest, "dest", writable=True)
    s = symmetric(call, src, "src")
    if d.dtype != s.dtype:
        raise TypeError(f"{call}: dest has dtype {d.dtype} but src has dtype {s.dtype}")
    return team, d, s


Converted = Tuple[ArrayArg, ArrayArg, int]


def _collective(call: str, team: Any, convert: Callable[[Team], Converted],
                value: str) -> Tuple[Team, ArrayArg, ArrayArg, int]:
    """The team and operands of a collective, converted by convert(team) -> (dest, src, n), once
    every member agrees; every member must pass the same src size and n (named `value`)."""
    require_init(call)
    t = _team(call, team)
    d, s, n = agreed(call, lambda: convert(t), lambda c: [("bytes", c[1].nbytes), (value, c[2])],
                     t.handle(call))
    return t, d, s, n


def _check_status(call: str, rc: int) -> None:
    if rc != 0:
        raise Error(f"{call}: the collective failed (status {rc})")


def _int_arg(call: str, name: str, v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, numbers.Integral):
        raise TypeError(f"{call}: {name} must be an int, not {type(v).__name__}")
    return int(v)


def broadcast(team: Any, dest: Any, src: Any, root: int) -> None:
    """dest on every PE of `team` (None: the world) = src of the team's PE `root` (collective;
    every member passes the same root and sizes)."""
    call = "shmoe.broadcast"

    def convert(t: Team) -> Tuple[ArrayArg, ArrayArg, int]:
        _, d, s = _operands(call, t, dest, src)
        n = t.n_pes()
        r = _int_arg(call, "root", root)
        if not 0 <= r < n:
            raise ValueError(f"{call}: root={root} is out of range (0..{n - 1}, the team's PEs)")
        if d.size != s.size:
            raise ValueError(f"{call}: dest has {d.size} elements but src has {s.size}")
        return d, s, r

    t, d, s, r = _collective(call, team, convert, "root")
    _check_status(call, _shmoe.broadcastmem(t.handle(call), d.buffer, s.buffer, r))


def fcollect(team: Any, dest: Any, src: Any) -> None:
    """dest = the src of every PE of `team`, concatenated in team order (collective)."""
    call = "shmoe.fcollect"

    def convert(t: Team) -> Tuple[ArrayArg, ArrayArg, int]:
        _, d, s = _operands(call, t, dest, src)
        n = t.n_pes()
        if d.size != n * s.size:
            raise ValueError(f"{call}: dest has {d.size} elements; it needs {n} x {s.size} (the "
                             "team's PEs times the elements of src)")
        return d, s, n

    t, d, s, _ = _collective(call, team, convert, "team size")
    _check_status(call, _shmoe.fcollectmem(t.handle(call), d.buffer, s.buffer))


def alltoall(team: Any, dest: Any, src: Any) -> None:
    """Block j of src on team PE i lands in block i of dest on team PE j; src and dest hold
    n_pes blocks of equal size (collective)."""
    call = "shmoe.alltoall"

    def convert(t: Team) -> Tuple[ArrayArg, ArrayArg, int]:
        _, d, s = _operands(call, t, dest, src)
        n = t.n_pes()
        if s.size % n != 0:
            raise ValueError(f"{call}: src has {s.size} elements, not a multiple of the team's "
                             f"{n} PEs")
        if d.size != s.size:
            raise ValueError(f"{call}: dest has {d.size} elements but src has {s.size}")
        return d, s, s.nbytes // n

    t, d, s, block = _collective(call, team, convert, "block bytes")
    _check_status(call, _shmoe.alltoallmem(t.handle(call), d.buffer, s.buffer, block))


_REDUCTIONS = ("and", "or", "xor", "max", "min", "sum", "prod")


def reduce(team: Any, dest: Any, src: Any, op: str) -> None:
    """dest = op over the team's PEs of src, element by element (collective); op is one of and,
    or, xor, max, min, sum, prod."""
    call = "shmoe.reduce"
    if op not in _REDUCTIONS:
        raise ValueError(f"{call}: op={op!r} is not one of {', '.join(_REDUCTIONS)}")
    _reduce(f"shmoe.{op}_reduce", op, team, dest, src)


def _reduce(call: str, op: str, team: Any, dest: Any, src: Any) -> None:
    f: Any = None

    def convert(t: Team) -> Tuple[ArrayArg, ArrayArg, int]:
        nonlocal f
        _, d, s = _operands(call, t, dest, src)
        f = typed_function(call, f"{op}_reduce", "src", s)
        if d.size != s.size:
            raise ValueError(f"{call}: dest has {d.size} elements but src has {s.size}")
        return d, s, d.nbytes

    t, d, s, _ = _collective(call, team, convert, "dest bytes")
    _check_status(call, f(t.handle(call), d.buffer, s.buffer))


def _named_reduction(op: str) -> Callable[[Any, Any, Any], None]:
    def reduction(team: Any, dest: Any, src: Any) -> None:
        _reduce(f"shmoe.{op}_reduce", op, team, dest, src)

    reduction.__name__ = reduction.__qualname__ = f"{op}_reduce"
    reduction.__doc__ = (f"{op}_reduce(team, dest, src): dest = {op} over the team's PEs of src "
                         f"(collective). Types: {', '.join(supported_dtypes(op + '_reduce'))}.")
    return reduction


for _op in _REDUCTIONS:
    globals()[f"{_op}_reduce"] = _named_reduction(_op)
