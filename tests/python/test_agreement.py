"""Every collective call of the package refuses on every PE or on none: a bad argument on one PE
(here the last) raises there, with its own exception naming the argument, and on every other PE
shmoe.Error naming that PE, promptly (well within a second, far below the hang timeout); and
the PEs can go on afterwards. Arguments that must be the same on every PE but differ are refused
on every PE by the library's agreement, naming them."""

import time

import numpy as np
import pytest

import shmoe
from shmoe import moe

pytestmark = pytest.mark.skipif("shmoe.n_pes() < 2")


def refused_everywhere(call, bad, good, own_error, own_match, name):
    """Runs call(bad) on the last PE and call(good) on the others; checks each PE's exception
    and that it came within a second."""
    me, n = shmoe.my_pe(), shmoe.n_pes()
    culprit = n - 1
    shmoe.barrier_all()
    start = time.monotonic()
    if me == culprit:
        with pytest.raises(own_error, match=own_match):
            call(bad)
    else:
        with pytest.raises(shmoe.Error, match=rf"^{name}: PE {culprit} refused the call: "
                                              rf"{own_match}"):
            call(good)
    assert time.monotonic() - start < 1.0
    shmoe.barrier_all()  # every PE is still in step


def disagreement_everywhere(call, mine, name, what):
    me = shmoe.my_pe()
    shmoe.barrier_all()
    start = time.monotonic()
    with pytest.raises(shmoe.Error, match=rf"^{name}: the PEs disagree on {what}"):
        call(mine(me))
    assert time.monotonic() - start < 1.0
    shmoe.barrier_all()


def test_allocation():
    refused_everywhere(lambda s: shmoe.zeros(s, np.int64), (-1,), (4,), ValueError,
                       r"shape\[0\]=-1 is negative", "shmoe.zeros")
    refused_everywhere(lambda d: shmoe.empty(4, d), "no-such-type", np.int64, TypeError,
                       r"dtype='no-such-type' is not a numpy dtype", "shmoe.empty")
    disagreement_everywhere(lambda s: shmoe.zeros(s, np.int64), lambda me: 4 + me,
                            "shmoe.zeros", "bytes")


@pytest.mark.parametrize("dtype", [object, "U8", "S4", "V8", [("a", object)]])
def test_pointer_and_string_dtypes_are_refused(dtype):
    with pytest.raises(TypeError, match=r"shmoe.zeros: dtype=.* cannot live in symmetric memory"):
        shmoe.zeros((4,), dtype)


def test_free():
    a = shmoe.zeros(4, np.int64)
    private = np.zeros(4, np.int64)
    refused_everywhere(shmoe.free, private, a, ValueError, r"a \(at 0x[0-9a-f]+\) is not an "
                       r"array from shmoe.zeros/empty", "shmoe.free")
    shmoe.free(a)  # still allocated on every PE: nobody freed it


def test_team_split():
    world = shmoe.team_world()
    n = shmoe.n_pes()
    refused_everywhere(lambda s: world.split_strided(s, 1, 1), n, 0, ValueError,
                       rf"start={n} is out of range", "Team.split_strided")
    disagreement_everywhere(lambda s: world.split_strided(0, 1, s), lambda me: 1 + me % 2,
                            "Team.split_strided", "size")


def test_collectives():
    n = shmoe.n_pes()
    src = shmoe.zeros(4, np.int64)
    dest = shmoe.zeros(4 * n, np.int64)
    small = shmoe.zeros(4 * n - 1, np.int64)
    refused_everywhere(lambda r: shmoe.broadcast(None, dest[:4], src, r), n, 0, ValueError,
                       rf"root={n} is out of range", "shmoe.broadcast")
    disagreement_everywhere(lambda r: shmoe.broadcast(None, dest[:4], src, r), lambda me: me,
                            "shmoe.broadcast", "root")
    refused_everywhere(lambda d: shmoe.fcollect(None, d, src), small, dest, ValueError,
                       r"dest has .* elements; it needs", "shmoe.fcollect")
    disagreement_everywhere(lambda k: shmoe.sum_reduce(None, dest[:k], src[:k]),
                            lambda me: 1 + me % 2, "shmoe.sum_reduce", "bytes")
    refused_everywhere(lambda d: shmoe.max_reduce(None, d, src), dest[:3], dest[:4], ValueError,
                       r"dest has 3 elements but src has 4", "shmoe.max_reduce")
    for a in (small, dest, src):
        shmoe.free(a)


def test_moe_calls():
    n = shmoe.n_pes()
    E = 2 * n
    refused_everywhere(lambda h: moe.MoeBuffer(8, h, E, 2, "float32"), 0, 16, shmoe.Error,
                       r"hidden=0 must be at least 1", "shmoe.MoeBuffer")
    buf = moe.MoeBuffer(8, 16, E, 2, "float32")
    x = np.ones((8, 16), np.float32)
    idx = np.tile(np.arange(2, dtype=np.int64), (8, 1))
    w = np.ones((8, 2), np.float32)
    refused_everywhere(lambda a: buf.dispatch(a, idx, w), x[:, :15], x, shmoe.Error,
                       r"x has shape \[8, 15\]; dimension 1 must be 16", "MoeBuffer.dispatch")
    recv_x, _, _, _, handle = buf.dispatch(x, idx, w)
    refused_everywhere(lambda k: buf.combine(recv_x, handle, w[:, :k]), 1, 2, shmoe.Error,
                       r"topk_weights has shape \[8, 1\]", "MoeBuffer.combine")
    out = buf.combine(recv_x, handle, w)
    np.testing.assert_array_equal(out, 2 * x)
    buf.close()

    refused_everywhere(lambda f: moe.MegaMoE(4, 32, f, n, 1), 63, 64, shmoe.Error,
                       r"intermediate_hidden=63 must be even", "shmoe.MegaMoE")
    layer = moe.MegaMoE(4, 32, 64, n, 1)
    w1, w2 = np.zeros((1, 64, 32), np.float32), np.zeros((1, 32, 32), np.float32)
    refused_everywhere(lambda a: layer.load_weights(a, w2), w1[:, :63], w1, shmoe.Error,
                       r"w1 has shape \[1, 63, 32\]", "MegaMoE.load_weights")
    layer.load_weights(w1, w2)
    xb = np.zeros((4, 32), np.uint16)
    refused_everywhere(lambda a: layer(a, np.zeros((4, 1), np.int64), np.ones((4, 1), np.float32)),
                       xb.astype(np.float32), xb, shmoe.Error, r"x has dtype float32",
                       "MegaMoE.__call__")
    layer.close()
