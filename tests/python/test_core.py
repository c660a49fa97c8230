"""The core calls on real PEs: every value written encodes the PE that wrote it and its index,
and is checked where it lands. NumPy only: torch must not be imported by shmoe."""

import sys

import numpy as np
import pytest

import shmoe
from conftest import encode

RMA_DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
              "float16", "float32", "float64", "complex64", "complex128"]


def test_torch_is_not_imported():
    assert "torch" not in sys.modules


def test_setup(me, n):
    assert 0 <= me < n
    assert shmoe.info() == ("shmoe", (1, 6))  # OpenSHMEM 1.6
    ids = shmoe.zeros(n, np.int32)
    mine = shmoe.zeros(1, np.int32)
    mine[0] = me
    shmoe.fcollect(None, ids, mine)
    assert ids.tolist() == list(range(n))
    shmoe.free(ids)
    shmoe.free(mine)


def test_zeros_empty_free(me, n):
    a = shmoe.zeros((3, 5), np.float64)
    assert a.shape == (3, 5) and a.dtype == np.float64 and not a.any()
    assert shmoe.is_symmetric(a) and shmoe.is_symmetric(a[1:]) and not shmoe.is_symmetric(a.copy())
    b = shmoe.empty(7, "uint16")
    assert b.shape == (7,) and b.dtype == np.uint16
    z = shmoe.zeros((0, 4), np.int32)
    assert z.size == 0 and shmoe.is_symmetric(z)
    shmoe.free(a)
    assert not shmoe.is_symmetric(a)
    shmoe.free(b)
    shmoe.free(z)
    # The heap takes back what was freed: many allocations in a row do not exhaust it.
    for _ in range(50):
        shmoe.free(shmoe.zeros(1 << 20, np.uint8))


@pytest.mark.parametrize("dtype", RMA_DTYPES)
def test_put_get_ring(me, n, dtype):
    right, left = (me + 1) % n, (me - 1) % n
    a = shmoe.zeros((4, 6), dtype)
    shmoe.put(a, encode(me, np.arange(24).reshape(4, 6), dtype), right)
    shmoe.barrier_all()
    np.testing.assert_array_equal(a, encode(left, np.arange(24).reshape(4, 6), dtype))
    got = np.zeros((4, 6), dtype)
    shmoe.get(got, a, right)  # right's copy holds what I put
    np.testing.assert_array_equal(got, encode(me, np.arange(24).reshape(4, 6), dtype))
    # A slice of a symmetric array is symmetric: rows 1..2 of the peer's copy only.
    shmoe.barrier_all()
    part = encode(me + 50, np.arange(12).reshape(2, 6), dtype)
    shmoe.put(a[1:3], part, right)
    shmoe.barrier_all()
    np.testing.assert_array_equal(a[1:3], encode(left + 50, np.arange(12).reshape(2, 6), dtype))
    np.testing.assert_array_equal(a[0], encode(left, np.arange(6), dtype))
    shmoe.barrier_all()
    shmoe.free(a)


def test_peer_array(me, n):
    a = shmoe.zeros(8, np.int64)
    inbox = shmoe.zeros(n, np.int64)
    a[:] = encode(me, np.arange(8), np.int64)
    shmoe.barrier_all()
    for pe in range(n):
        view = shmoe.peer_array(a, pe)
        assert view.shape == a.shape and view.dtype == a.dtype
        np.testing.assert_array_equal(view, encode(pe, np.arange(8), np.int64))
        shmoe.peer_array(inbox, pe)[me] = encode(me, pe, np.int64)  # a store into PE pe's copy
    shmoe.barrier_all()
    np.testing.assert_array_equal(inbox, [encode(src, me, np.int64) for src in range(n)])
    shmoe.barrier_all()
    shmoe.free(inbox)
    shmoe.free(a)


def test_put_signal(me, n):
    right, left = (me + 1) % n, (me - 1) % n
    data = shmoe.zeros(16, np.float32)
    sig = shmoe.zeros(2, np.uint64)
    shmoe.put_signal(data, encode(me, np.arange(16), np.float32), sig[0:1], 1, "add", right)
    assert shmoe.signal_wait_until(sig[0:1], "ge", 1) == 1
    np.testing.assert_array_equal(data, encode(left, np.arange(16), np.float32))
    shmoe.barrier_all()
    shmoe.put_signal(data[:4], encode(me + 7, np.arange(4), np.float32), sig[1:2], 100 + me,
                     shmoe.SIGNAL_SET, right)
    assert shmoe.signal_wait_until(sig[1:2], shmoe.CMP_EQ, 100 + left) == 100 + left
    assert shmoe.signal_fetch(sig[1:2]) == 100 + left
    np.testing.assert_array_equal(data[:4], encode(left + 7, np.arange(4), np.float32))
    shmoe.quiet()
    shmoe.fence()
    shmoe.barrier_all()
    shmoe.free(sig)
    shmoe.free(data)


def gathered(value, dtype):
    """Every PE's `value`, gathered (collective)."""
    n = shmoe.n_pes()
    src = shmoe.zeros(1, dtype)
    dest = shmoe.zeros(n, dtype)
    src[0] = value
    shmoe.fcollect(None, dest, src)
    out = dest.tolist()
    shmoe.free(dest)
    shmoe.free(src)
    return out


@pytest.mark.parametrize("dtype", ["int32", "int64", "uint32", "uint64"])
def test_atomics_integer(me, n, dtype):
    right, left = (me + 1) % n, (me - 1) % n
    a = shmoe.zeros((2, 4), dtype)
    # Every PE adds me + 1 to element (1, 2) of PE 0 and sets its bit in element 7 of PE 0; draws
    # a ticket from element 3 of every PE; adds to, increments and xors into its right
    # neighbour's elements 0, 1 and 5.
    old = shmoe.atomic_fetch_add(a, (1, 2), me + 1, 0)
    tickets = [shmoe.atomic_fetch_inc(a, 3, pe) for pe in range(n)]
    shmoe.atomic_add(a, 0, 5, right)
    shmoe.atomic_inc(a, 1, right)
    shmoe.atomic_or(a, -1, 1 << me, 0)
    shmoe.atomic_xor(a, 5, 3 << me, right)
    shmoe.barrier_all()
    if me == 0:
        assert a[1, 2] == n * (n + 1) // 2
        assert a[1, 3] == (1 << n) - 1
    assert (a[0, 0], a[0, 1], a[0, 3], a[1, 1]) == (5, 1, n, 3 << left)
    # What the fetches returned: distinct partial sums, and tickets 0..n-1 from each counter.
    all_old = gathered(old, dtype)
    assert len(set(all_old)) == n and all(0 <= v < n * (n + 1) // 2 for v in all_old)
    for pe in range(n):
        assert sorted(gathered(tickets[pe], dtype)) == list(range(n))
    # compare_swap: of all PEs swapping element 0 of PE 0 from 5, exactly one wins.
    won = shmoe.atomic_compare_swap(a, 0, 5, 100 + me, 0) == 5
    assert sum(gathered(int(won), "int32")) == 1
    if me == 0:
        assert 100 <= a[0, 0] < 100 + n
    # set, fetch, swap on the right neighbour's element 4.
    shmoe.atomic_set(a, 4, 1000 + me, right)
    shmoe.barrier_all()
    assert a[1, 0] == 1000 + left
    assert shmoe.atomic_fetch(a, 4, right) == 1000 + me
    shmoe.barrier_all()
    assert shmoe.atomic_swap(a, 4, 2000 + me, right) == 1000 + me
    shmoe.barrier_all()
    assert a[1, 0] == 2000 + left
    shmoe.barrier_all()
    # The bitwise fetching forms on this PE's own element 5.
    shmoe.atomic_set(a, 5, 0b1111, me)
    assert shmoe.atomic_fetch_and(a, 5, 0b0110, me) == 0b1111
    assert shmoe.atomic_fetch_or(a, 5, 0b1000, me) == 0b0110
    assert shmoe.atomic_fetch_xor(a, 5, 0b0001, me) == 0b1110
    shmoe.atomic_and(a, 5, 0b0011, me)
    assert a[1, 1] == 0b0011
    shmoe.barrier_all()
    shmoe.free(a)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_atomics_floating(me, n, dtype):
    a = shmoe.zeros(n, dtype)
    shmoe.atomic_set(a, me, me + 0.25, (me + 1) % n)
    shmoe.barrier_all()
    assert a[(me - 1) % n] == (me - 1) % n + 0.25
    assert shmoe.atomic_fetch(a, me, (me + 1) % n) == me + 0.25
    shmoe.barrier_all()
    assert shmoe.atomic_swap(a, me, -1.5, (me + 1) % n) == me + 0.25
    shmoe.barrier_all()
    assert a[(me - 1) % n] == -1.5
    shmoe.barrier_all()
    shmoe.free(a)


def test_wait_until_and_test(me, n):
    right, left = (me + 1) % n, (me - 1) % n
    flags = shmoe.zeros(n, np.int64)  # ends with a barrier: every PE's copy is zero
    assert not shmoe.test(flags, left, "eq", 7 + left)
    shmoe.barrier_all()  # nobody sets before everyone has tested
    shmoe.atomic_set(flags, me, 7 + me, right)
    shmoe.wait_until(flags, left, "eq", 7 + left)
    assert shmoe.test(flags, left - n, shmoe.CMP_GE, 7)  # a negative index counts from the end
    shmoe.barrier_all()
    shmoe.free(flags)


def test_teams(me, n):
    world = shmoe.team_world()
    assert world.my_pe() == me and world.n_pes() == n
    size = (n + 1) // 2
    evens = world.split_strided(0, 2, size)
    if me % 2 == 0:
        assert evens is not None
        assert evens.my_pe() == me // 2 and evens.n_pes() == size
        for i in range(size):
            assert evens.translate_pe(i, world) == 2 * i
        # A reduction over the team only: the sum of its members' encoded values.
        src = shmoe.zeros(3, np.int64)
        dest = shmoe.zeros(3, np.int64)
        src[:] = encode(me, np.arange(3), np.int64)
        shmoe.sum_reduce(evens, dest, src)
        expected = sum(encode(2 * i, np.arange(3), np.int64) for i in range(size))
        np.testing.assert_array_equal(dest, expected)
        evens.sync()
        shmoe.free(dest)  # collective over the world: the odd PEs free theirs below
        shmoe.free(src)
        evens.destroy()
    else:
        assert evens is None
        shmoe.free(shmoe.zeros(3, np.int64))
        shmoe.free(shmoe.zeros(3, np.int64))
    shared = shmoe.team_shared()
    assert shared.n_pes() == n  # every PE of these tests runs on this host
    assert shared.translate_pe(shared.my_pe(), world) == me
    shmoe.barrier_all()


def test_team_context_manager(me, n):
    world = shmoe.team_world()
    with world.split_strided(0, 1, n) as everyone:
        assert everyone.my_pe() == me and everyone.n_pes() == n
    with pytest.raises(shmoe.Error, match="destroyed"):
        everyone.n_pes()


@pytest.mark.parametrize("dtype", ["int8", "int32", "float16", "float64", "complex64"])
def test_broadcast(me, n, dtype):
    for root in range(n):
        src = shmoe.zeros(10, dtype)
        dest = shmoe.zeros(10, dtype)
        src[:] = encode(me, np.arange(10), dtype)
        shmoe.broadcast(None, dest, src, root)
        np.testing.assert_array_equal(dest, encode(root, np.arange(10), dtype))
        shmoe.free(dest)
        shmoe.free(src)


@pytest.mark.parametrize("dtype", ["uint8", "int64", "float32", "bool"])
def test_fcollect_alltoall(me, n, dtype):
    src = shmoe.zeros(5, dtype)
    dest = shmoe.zeros((n, 5), dtype)
    src[:] = encode(me, np.arange(5), dtype)
    shmoe.fcollect(None, dest, src)
    for pe in range(n):
        np.testing.assert_array_equal(dest[pe], encode(pe, np.arange(5), dtype))
    # alltoall: block j of PE i's src (encoding i and j) lands in block i of PE j's dest.
    blocks = shmoe.zeros((n, 3), dtype)
    out = shmoe.zeros((n, 3), dtype)
    for j in range(n):
        blocks[j] = encode(me, 10 * j + np.arange(3), dtype)
    shmoe.alltoall(None, out, blocks)
    for i in range(n):
        np.testing.assert_array_equal(out[i], encode(i, 10 * me + np.arange(3), dtype))
    for a in (out, blocks, dest, src):
        shmoe.free(a)


REDUCTIONS = [
    ("sum", ["int8", "int32", "int64", "uint64", "float32", "float64", "complex128"]),
    ("prod", ["int64", "float64"]),
    ("max", ["int16", "uint32", "float32"]),
    ("min", ["int64", "float64"]),
    ("and", ["uint8", "int32", "uint64"]),
    ("or", ["int16", "uint32"]),
    ("xor", ["int64", "uint16"]),
]


@pytest.mark.parametrize("op,dtype", [(op, d) for op, ds in REDUCTIONS for d in ds])
def test_reductions(me, n, op, dtype):
    def values(pe):
        v = encode(pe, np.arange(6), dtype)
        if op == "prod":
            return (np.arange(6) % 3 + pe + 1).astype(dtype)  # small, exact products
        return v

    src = shmoe.zeros(6, dtype)
    dest = shmoe.zeros(6, dtype)
    src[:] = values(me)
    getattr(shmoe, f"{op}_reduce")(None, dest, src)
    numpy_op = {"sum": np.add, "prod": np.multiply, "max": np.maximum, "min": np.minimum,
                "and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}[op]
    expected = values(0)
    for pe in range(1, n):
        expected = numpy_op(expected, values(pe)).astype(dtype)
    np.testing.assert_array_equal(dest, expected)
    # The generic form, in place (dest is source).
    src[:] = values(me)
    shmoe.reduce(shmoe.team_world(), src, src, op)
    np.testing.assert_array_equal(src, expected)
    shmoe.free(dest)
    shmoe.free(src)
