"""Teams (OpenSHMEM 1.5 section 9.4) and the team-based collectives on symmetric arrays."""

import numbers

from . import _shmoe
from ._runtime import Error, add_resource, remove_resource, require_init, state
from .core import _pe, supported_dtypes, symmetric, typed_function

__all__ = [
    "Team", "team_world", "team_shared", "broadcast", "fcollect", "alltoall", "reduce",
    "and_reduce", "or_reduce", "xor_reduce", "max_reduce", "min_reduce", "sum_reduce",
    "prod_reduce",
]


class Team:
    """A team of PEs. team_world() and team_shared() are predefined; split_strided makes new
    ones (collective over the parent), which destroy() (collective over the team) ends."""

    def __init__(self, handle, name, predefined):
        self._handle = handle
        self._name = name
        self._predefined = predefined

    def __repr__(self):
        return f"<shmoe.Team {self._name}>"

    def handle(self, call):
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

    def split_strided(self, start, stride, size):
        """The team of this team's PEs start, start + stride, ... (size of them); collective over
        this team. Returns the new Team on its members and None on the other PEs."""
        call = "Team.split_strided"
        parent = self.handle(call)
        n = _shmoe.team_n_pes(parent)
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
        rc, handle = _shmoe.team_split_strided(parent, int(start), int(stride), int(size))
        if rc != 0:
            raise Error(
                f"{call}: the split ({start}, {stride}, {size}) of {self._name} was refused")
        if handle == 0:
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


def team_world():
    require_init("shmoe.team_world")
    _world._handle = _shmoe.team_world()
    return _world


def team_shared():
    require_init("shmoe.team_shared")
    _shared._handle = _shmoe.team_shared()
    return _shared


def _team(call, team):
    if team is None:
        return team_world()
    if not isinstance(team, Team):
        raise TypeError(f"{call}: team must be a shmoe.Team or None (the world), not "
                        f"{type(team).__name__}")
    team.handle(call)
    return team


def _operands(call, team, dest, src):
    require_init(call)
    team = _team(call, team)
    d = symmetric(call, dest, "dest", writable=True)
    s = symmetric(call, src, "src")
    if d.dtype != s.dtype:
        raise TypeError(f"{call}: dest has dtype {d.dtype} but src has dtype {s.dtype}")
    return team, d, s


def _check_status(call, rc):
    if rc != 0:
        raise Error(f"{call}: the collective failed (status {rc})")


def broadcast(team, dest, src, root):
    """dest on every PE of `team` (None: the world) = src of the team's PE `root` (collective)."""
    call = "shmoe.broadcast"
    team, d, s = _operands(call, team, dest, src)
    n = team.n_pes()
    if isinstance(root, bool) or not isinstance(root, numbers.Integral):
        raise TypeError(f"{call}: root must be an int, not {type(root).__name__}")
    if not 0 <= root < n:
        raise ValueError(f"{call}: root={root} is out of range (0..{n - 1}, the team's PEs)")
    if d.size != s.size:
        raise ValueError(f"{call}: dest has {d.size} elements but src has {s.size}")
    _check_status(call,
                  _shmoe.broadcastmem(team._handle, d.address, s.address, s.nbytes, int(root)))


def fcollect(team, dest, src):
    """dest = the src of every PE of `team`, concatenated in team order (collective)."""
    call = "shmoe.fcollect"
    team, d, s = _operands(call, team, dest, src)
    n = team.n_pes()
    if d.size != n * s.size:
        raise ValueError(f"{call}: dest has {d.size} elements; it needs {n} x {s.size} (the team's "
                         "PEs times the elements of src)")
    _check_status(call, _shmoe.fcollectmem(team._handle, d.address, s.address, s.nbytes))


def alltoall(team, dest, src):
    """Block j of src on team PE i lands in block i of dest on team PE j; src and dest hold
    n_pes blocks of equal size (collective)."""
    call = "shmoe.alltoall"
    team, d, s = _operands(call, team, dest, src)
    n = team.n_pes()
    if s.size % n != 0:
        raise ValueError(f"{call}: src has {s.size} elements, not a multiple of the team's {n} PEs")
    if d.size != s.size:
        raise ValueError(f"{call}: dest has {d.size} elements but src has {s.size}")
    _check_status(call, _shmoe.alltoallmem(team._handle, d.address, s.address, s.nbytes // n))


_REDUCTIONS = ("and", "or", "xor", "max", "min", "sum", "prod")


def reduce(team, dest, src, op):
    """dest = op over the team's PEs of src, element by element (collective); op is one of and,
    or, xor, max, min, sum, prod."""
    call = "shmoe.reduce"
    if op not in _REDUCTIONS:
        raise ValueError(f"{call}: op={op!r} is not one of {', '.join(_REDUCTIONS)}")
    _reduce(f"shmoe.{op}_reduce", op, team, dest, src)


def _reduce(call, op, team, dest, src):
    team, d, s = _operands(call, team, dest, src)
    f = typed_function(call, f"{op}_reduce", "src", s)
    if d.size != s.size:
        raise ValueError(f"{call}: dest has {d.size} elements but src has {s.size}")
    _check_status(call, f(team._handle, d.address, s.address, s.size))


def _named_reduction(op):
    def reduction(team, dest, src):
        _reduce(f"shmoe.{op}_reduce", op, team, dest, src)

    reduction.__name__ = reduction.__qualname__ = f"{op}_reduce"
    reduction.__doc__ = (f"{op}_reduce(team, dest, src): dest = {op} over the team's PEs of src "
                         f"(collective). Types: {', '.join(supported_dtypes(op + '_reduce'))}.")
    return reduction


for _op in _REDUCTIONS:
    globals()[f"{_op}_reduce"] = _named_reduction(_op)
