"""shmoe.MoeBuffer in shrink mode (shrink_timeout_ms > 0) with every PE live: the same rows and
sums as the golden references, a pe_mask left all zero; and its refusals, each made alike on
every PE (shrink-mode calls check their arguments on their own PE only). Failed PEs are
tested through deep_ep (test_deep_ep_shrink.py)."""

import numpy as np
import pytest

import shmoe
from shmoe import moe
from reference import STORAGE, expert_step, golden_dispatch, moe_inputs
from test_moe import check_combine, expert_outputs, same_bits

SEED = 20250301
MS = 5000  # below the tests' SHMOE_HANG_TIMEOUT of 60 s


@pytest.mark.parametrize("dtype", ["bfloat16", "int32"])
def test_shrink_mode_with_every_pe_live(dtype):
    me, n = shmoe.my_pe(), shmoe.n_pes()
    tokens, hidden, topk, L = 10, 40, min(3, 2 * n), 2
    E = n * L
    buf = moe.MoeBuffer(tokens, hidden, E, topk, dtype, shrink_timeout_ms=MS)
    assert buf.shrink and buf.recv_capacity == L * n * tokens  # a slot per (expert, PE, token)
    mask = np.zeros(n, np.int32)
    for it in range(2):
        inputs = [moe_inputs(SEED + it, pe, tokens - it * (pe % 2), hidden, topk, E, dtype, 0.2)
                  for pe in range(n)]
        x, idx, w = inputs[me]
        recv_x, recv_idx, recv_w, counts, handle = buf.dispatch(x, idx, w, pe_mask=mask)
        rows, local, weights, _ = golden_dispatch(inputs, me, L)
        golden = np.array(rows, dtype=STORAGE[dtype]).reshape(len(rows), hidden)
        assert same_bits(recv_x, golden) and same_bits(recv_w, weights)
        np.testing.assert_array_equal(recv_idx, local)
        assert counts == [int((local == le).sum()) for le in range(L)]
        out = buf.combine(expert_outputs(dtype, me, L, recv_x, recv_idx), handle, w, pe_mask=mask)
        ys = np.stack([np.stack([expert_step(dtype, int(idx[t, k]), x[t]) for k in range(topk)])
                       for t in range(idx.shape[0])])
        check_combine(dtype, out, ys, idx, w, f"shrink {dtype}")
        buf.sync_live(mask)
        assert not mask.any(), mask
    buf.close()


def test_shrink_mode_refusals():
    me, n = shmoe.my_pe(), shmoe.n_pes()
    with pytest.raises(shmoe.Error, match=r"shrink_timeout_ms=-1 must be at least 0"):
        moe.MoeBuffer(4, 8, n, 1, "float32", shrink_timeout_ms=-1)
    with pytest.raises(shmoe.Error, match=r"shrink_timeout_ms=100000000 is out of range \(1\.\."):
        moe.MoeBuffer(4, 8, n, 1, "float32", shrink_timeout_ms=10 ** 8)
    with pytest.raises(shmoe.Error, match=r"must be 0 in shrink mode"):
        moe.MoeBuffer(4, 8, n, 1, "float32", shrink_timeout_ms=MS, max_recv_rows=4 * n)
    with pytest.raises(shmoe.Error, match=r"fp8='e4m3' with shrink_timeout_ms=5000"):
        moe.MoeBuffer(4, 8, n, 1, "bfloat16", fp8="e4m3", shrink_timeout_ms=MS)

    buf = moe.MoeBuffer(4, 8, n, 1, "float32", shrink_timeout_ms=MS)
    x, idx = np.ones((4, 8), np.float32), np.full((4, 1), me, np.int32)
    mask = np.zeros(n, np.int32)
    with pytest.raises(shmoe.Error, match=r"shrink mode: pass pe_mask"):
        buf.dispatch(x, idx)
    with pytest.raises(shmoe.Error, match=rf"pe_mask is int64\[{n}\]; it must be int32\[{n}\]"):
        buf.dispatch(x, idx, pe_mask=np.zeros(n, np.int64))
    with pytest.raises(shmoe.Error, match=rf"pe_mask is int32\[{n + 1}\]"):
        buf.dispatch(x, idx, pe_mask=np.zeros(n + 1, np.int32))
    frozen = np.zeros(n, np.int32)
    frozen.flags.writeable = False
    with pytest.raises(ValueError, match=r"pe_mask is read-only"):
        buf.dispatch(x, idx, pe_mask=frozen)
    with pytest.raises(shmoe.Error, match=r"zero_copy=True in shrink mode"):
        buf.dispatch(x, idx, zero_copy=True, pe_mask=mask)
    # Every PE masks itself: each refuses alone, at once (none waits for another).
    mine = np.zeros(n, np.int32)
    mine[me] = 1
    with pytest.raises(shmoe.Error, match=rf"pe_mask\[{me}\]=1 masks this PE itself"):
        buf.dispatch(x, idx, pe_mask=mine)
    _, _, _, _, handle = buf.dispatch(x, idx, pe_mask=mask)  # still usable
    with pytest.raises(shmoe.Error, match=r"shrink mode: pass pe_mask"):
        buf.combine(np.ones((handle.num_recv_rows, 8), np.float32), handle, np.ones((4, 1)))
    buf.close()

    plain = moe.MoeBuffer(4, 8, n, 1, "float32")
    with pytest.raises(shmoe.Error, match=r"pe_mask is given, but the buffer is not in shrink"):
        plain.dispatch(x, idx, pe_mask=mask)
    with pytest.raises(ValueError, match=r"not in shrink mode \(shrink_timeout_ms=0\)"):
        plain.sync_live(mask)
    plain.close()
