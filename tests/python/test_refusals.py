"""Every refusal of the core is a Python exception naming the call, the parameter and the value,
raised before the C library sees the arguments (it would end the process). Every PE passes the
same bad arguments, so all refuse alike."""

import numpy as np
import pytest

import shmoe


@pytest.fixture
def sym():
    a = shmoe.zeros(8, np.int64)
    yield a
    shmoe.free(a)


def test_pe_out_of_range(n, sym):
    src = np.zeros(8, np.int64)
    for call in (lambda pe: shmoe.put(sym, src, pe), lambda pe: shmoe.get(src, sym, pe),
                 lambda pe: shmoe.atomic_add(sym, 0, 1, pe), lambda pe: shmoe.peer_array(sym, pe)):
        with pytest.raises(ValueError, match=rf"pe={n} is out of range \(0\.\.{n - 1}\)"):
            call(n)
        with pytest.raises(ValueError, match=r"pe=-1 is out of range"):
            call(-1)
        with pytest.raises(TypeError, match=r"pe must be an int, not str"):
            call("0")


def test_not_symmetric(sym):
    private = np.zeros(8, np.int64)
    with pytest.raises(ValueError, match=r"shmoe.put: dest \(at 0x[0-9a-f]+, 64 bytes\) is not "
                                         r"symmetric"):
        shmoe.put(private, private, 0)
    with pytest.raises(ValueError, match=r"shmoe.get: src .* is not symmetric"):
        shmoe.get(private, private, 0)
    with pytest.raises(ValueError, match=r"shmoe.atomic_fetch_add: a .* is not symmetric"):
        shmoe.atomic_fetch_add(private, 0, 1, 0)
    with pytest.raises(ValueError, match=r"shmoe.peer_array: a .* is not symmetric"):
        shmoe.peer_array(private, 0)
    with pytest.raises(ValueError, match=r"shmoe.sum_reduce: dest .* is not symmetric"):
        shmoe.sum_reduce(None, private, sym)
    with pytest.raises(ValueError, match=r"shmoe.fcollect: src .* is not symmetric"):
        shmoe.fcollect(None, sym, private)


def test_size_and_type_mismatch(sym):
    with pytest.raises(ValueError, match=r"shmoe.put: dest has 8 elements but src has 4"):
        shmoe.put(sym, np.zeros(4, np.int64), 0)
    with pytest.raises(TypeError, match=r"shmoe.put: dest has dtype int64 but src has dtype int32"):
        shmoe.put(sym, np.zeros(8, np.int32), 0)
    with pytest.raises(ValueError, match=r"shmoe.get: dest has 9 elements but src has 8"):
        shmoe.get(np.zeros(9, np.int64), sym, 0)
    with pytest.raises(ValueError, match=r"shmoe.put: dest has 4 elements but src has 8"):
        shmoe.put(sym[:4], np.zeros(8, np.int64), 0)
    with pytest.raises(ValueError, match=r"shmoe.put: src must be C-contiguous"):
        shmoe.put(sym[:4], np.zeros(8, np.int64)[::2], 0)
    with pytest.raises(ValueError, match=r"shmoe.get: dest is read-only"):
        ro = np.zeros(8, np.int64)
        ro.flags.writeable = False
        shmoe.get(ro, sym, 0)
    with pytest.raises(TypeError, match=r"shmoe.put: src must be a numpy.ndarray"):
        shmoe.put(sym, [0] * 8, 0)
    # A slice reaching past the allocation is not inside it.
    with pytest.raises(ValueError, match="not symmetric"):
        shmoe.put(np.lib.stride_tricks.as_strided(sym, (9,)), np.zeros(9, np.int64), 0)


def test_unsupported_dtypes():
    f16 = shmoe.zeros(4, np.float16)
    b = shmoe.zeros(4, np.bool_)
    f32 = shmoe.zeros(4, np.float32)
    with pytest.raises(TypeError, match=r"shmoe.atomic_fetch_add: a has dtype float16, which has "
                                        r"no atomic fetch add "
                                        r"\(supported: int32, int64, uint32, uint64\)"):
        shmoe.atomic_fetch_add(f16, 0, 1, 0)
    with pytest.raises(TypeError, match=r"shmoe.atomic_add: a has dtype float32, which has no "
                                        r"atomic add"):
        shmoe.atomic_add(f32, 0, 1, 0)
    with pytest.raises(TypeError, match=r"shmoe.sum_reduce: src has dtype bool, which has no sum "
                                        r"reduce"):
        shmoe.sum_reduce(None, b, b)
    with pytest.raises(TypeError, match=r"shmoe.xor_reduce: src has dtype float32, which has no "
                                        r"xor reduce"):
        shmoe.xor_reduce(None, f32, f32)
    with pytest.raises(TypeError, match=r"shmoe.wait_until: a has dtype float32"):
        shmoe.wait_until(f32, 0, "eq", 0)
    for a in (f32, b, f16):
        shmoe.free(a)


def test_element_and_value_checks(n, sym):
    with pytest.raises(IndexError,
                       match=r"shmoe.atomic_inc: index=8 is out of range for 8 elements"):
        shmoe.atomic_inc(sym, 8, 0)
    with pytest.raises(IndexError, match=r"index=-9 is out of range"):
        shmoe.atomic_fetch(sym, -9, 0)
    with pytest.raises(ValueError, match=r"index \(1, 2\) has 2 subscripts but a has 1 dimensions"):
        shmoe.atomic_fetch(sym, (1, 2), 0)
    with pytest.raises(TypeError, match=r"shmoe.atomic_set: index must be an int, not float"):
        shmoe.atomic_set(sym, 1.0, 3, 0)
    u = shmoe.zeros(2, np.uint32)
    with pytest.raises(ValueError, match=r"shmoe.atomic_add: value=-1 is out of range for uint32 "
                                         r"\(0\.\.4294967295\)"):
        shmoe.atomic_add(u, 0, -1, 0)
    with pytest.raises(TypeError, match=r"shmoe.atomic_add: value must be an int for dtype uint32, "
                                        r"not float"):
        shmoe.atomic_add(u, 0, 1.5, 0)
    with pytest.raises(TypeError, match=r"atomic_compare_swap\(\) takes \(a, index, cond, value, "
                                        r"pe\)"):
        shmoe.atomic_compare_swap(u, 0, 1, 0)
    shmoe.free(u)


def test_signals(sym):
    sig = shmoe.zeros(2, np.uint64)
    src = np.zeros(8, np.int64)
    with pytest.raises(TypeError, match=r"shmoe.put_signal: sig must be one uint64 element .* not "
                                        r"uint64 of shape \[2\]"):
        shmoe.put_signal(sym, src, sig, 1, "set", 0)
    with pytest.raises(TypeError, match=r"sig must be one uint64 element .* not int64 of shape "
                                        r"\[1\]"):
        shmoe.put_signal(sym, src, sym[:1], 1, "set", 0)
    with pytest.raises(ValueError, match=r"shmoe.put_signal: op='or' is not one of set, add"):
        shmoe.put_signal(sym, src, sig[:1], 1, "or", 0)
    with pytest.raises(ValueError, match=r"shmoe.put_signal: value=-3 is out of range "
                                         r"\(0\.\.2\*\*64-1\)"):
        shmoe.put_signal(sym, src, sig[:1], -3, "add", 0)
    with pytest.raises(ValueError, match=r"shmoe.signal_wait_until: cmp='lte' is not one of eq, "
                                         r"ne, gt, ge, lt, le"):
        shmoe.signal_wait_until(sig[:1], "lte", 0)
    with pytest.raises(ValueError, match=r"cmp=9 is not one of"):
        shmoe.signal_wait_until(sig[:1], 9, 0)
    shmoe.free(sig)


def test_heap(sym):
    with pytest.raises(ValueError, match=r"shmoe.zeros: shape\[1\]=-2 is negative"):
        shmoe.zeros((3, -2), np.int32)
    with pytest.raises(TypeError, match=r"shmoe.zeros: dtype='no such type' is not a numpy dtype"):
        shmoe.zeros(3, "no such type")
    with pytest.raises(TypeError, match=r"numpy has no bfloat16"):
        shmoe.empty(3, "bfloat16")
    with pytest.raises(TypeError, match=r"shmoe.zeros: shape must be an int or a sequence of ints"):
        shmoe.zeros("3", np.int32)
    with pytest.raises(MemoryError, match=r"shmoe.zeros: the symmetric heap has no room for \d+ "
                                          r"bytes; raise SHMEM_SYMMETRIC_SIZE"):
        shmoe.zeros(1 << 40, np.uint8)
    with pytest.raises(ValueError, match=r"shmoe.free: a \(at 0x[0-9a-f]+\) is not an array from "
                                         r"shmoe.zeros/empty"):
        shmoe.free(sym[1:])
    with pytest.raises(ValueError, match=r"shmoe.free: a .* is not an array from"):
        shmoe.free(np.zeros(3))
    a = shmoe.zeros(4, np.int32)
    shmoe.free(a)
    with pytest.raises(ValueError, match=r"shmoe.free: a .* that is still allocated"):
        shmoe.free(a)
    with pytest.raises(ValueError, match=r"shmoe.put: dest .* is not symmetric"):
        shmoe.put(a, np.zeros(4, np.int32), 0)


def test_collectives(n, sym):
    d = shmoe.zeros(8 * n + 1, np.int64)
    with pytest.raises(ValueError, match=rf"shmoe.fcollect: dest has {8 * n + 1} elements; it "
                                         rf"needs {n} x 8"):
        shmoe.fcollect(None, d, sym)
    with pytest.raises(ValueError, match=rf"shmoe.broadcast: root={n} is out of range "
                                         rf"\(0\.\.{n - 1}, the team's PEs\)"):
        shmoe.broadcast(None, sym, sym, n)
    with pytest.raises(ValueError, match=r"shmoe.broadcast: dest has 7 elements but src has 8"):
        shmoe.broadcast(None, d[:7], sym, 0)
    if n > 1:
        with pytest.raises(ValueError, match=rf"shmoe.alltoall: src has {8 * n + 1} elements, not "
                                             rf"a multiple of the team's {n} PEs"):
            shmoe.alltoall(None, d, d)
    with pytest.raises(ValueError, match=r"shmoe.reduce: op='avg' is not one of and, or, xor, max, "
                                         r"min, sum, prod"):
        shmoe.reduce(None, sym, sym, "avg")
    with pytest.raises(TypeError, match=r"shmoe.sum_reduce: dest has dtype float64 but src has "
                                        r"dtype int64"):
        f = shmoe.zeros(8, np.float64)
        try:
            shmoe.sum_reduce(None, f, sym)
        finally:
            shmoe.free(f)
    with pytest.raises(TypeError, match=r"shmoe.sum_reduce: team must be a shmoe.Team or None "
                                        r"\(the world\), not int"):
        shmoe.sum_reduce(0, sym, sym)
    shmoe.free(d)


def test_teams(n):
    world = shmoe.team_world()
    with pytest.raises(ValueError, match=rf"Team.split_strided: start={n} is out of range "
                                         rf"\(0\.\.{n - 1}\)"):
        world.split_strided(n, 1, 1)
    with pytest.raises(ValueError, match=r"Team.split_strided: size=0 is out of range"):
        world.split_strided(0, 1, 0)
    with pytest.raises(ValueError, match=r"Team.split_strided: stride=0 must be at least 1"):
        world.split_strided(0, 0, 1)
    with pytest.raises(ValueError, match=rf"start=0, stride=1, size={n + 1} reach PE {n} of a team "
                                         rf"of {n} PEs"):
        world.split_strided(0, 1, n + 1)
    with pytest.raises(ValueError, match=r"Team.destroy: world is predefined"):
        world.destroy()
    with pytest.raises(ValueError, match=rf"Team.translate_pe: pe={n} is out of range"):
        world.translate_pe(n, world)
    with pytest.raises(TypeError, match=r"Team.translate_pe: team must be a shmoe.Team, not "
                                        r"NoneType"):
        world.translate_pe(0, None)
    team = world.split_strided(0, 1, n)
    team.destroy()
    with pytest.raises(shmoe.Error, match=r"Team.my_pe: team world.split\(0, 1, \d+\) has been "
                                          r"destroyed"):
        team.my_pe()
    with pytest.raises(shmoe.Error, match=r"shmoe.broadcast: team .* has been destroyed"):
        shmoe.broadcast(team, None, None, 0)
