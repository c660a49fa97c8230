"""shmoe.MoeBuffer's receive blocks (recv_blocks): a dispatch's recv_x is the rows its senders
wrote into a free block of symmetric heap, no copy out of the receive window, and the block goes
back when recv_x is dropped. On fresh random inputs (a seed from PE 0), every PE checks: each
recv_x bit for bit against the rows it must receive, while later dispatches run and after them;
more results held than blocks copy (result_counts says which); a dropped block is the next
dispatch's; combine of a block's rows against the fp32 replay; a result outliving close(); the
refusal in shrink mode."""

import gc
import os

import numpy as np
import pytest

import shmoe
from shmoe import moe
from reference import STORAGE, expert_step, golden_dispatch, moe_inputs
from test_moe import check_combine, expert_outputs, same_bits

TOKENS, HIDDEN, TOPK, L, BLOCKS = 24, 64, 2, 2, 2


def fresh_seed():
    """The same fresh seed on every PE: PE 0's, broadcast."""
    src, dest = shmoe.zeros(1, np.int64), shmoe.zeros(1, np.int64)
    src[0] = int.from_bytes(os.urandom(4), "little")
    shmoe.broadcast(shmoe.team_world(), dest, src, 0)
    seed = int(dest[0])
    shmoe.free(src)
    shmoe.free(dest)
    return seed


def address(a):
    return a.__array_interface__["data"][0]


def dispatch(buf, seed, call):
    """One dispatch of call `call`'s inputs: (recv_x, handle, the rows this PE must receive,
    recv_idx, x, idx, w)."""
    me, n = shmoe.my_pe(), shmoe.n_pes()
    inputs = [moe_inputs(seed + call, pe, TOKENS, HIDDEN, TOPK, n * L, "bfloat16", 0.1)
              for pe in range(n)]
    x, idx, w = inputs[me]
    recv_x, recv_idx, _, _, handle = buf.dispatch(x, idx, w)
    rows, local, _, _ = golden_dispatch(inputs, me, L)
    golden = np.array(rows, dtype=STORAGE["bfloat16"]).reshape(len(rows), HIDDEN)
    np.testing.assert_array_equal(recv_idx, local)
    assert same_bits(recv_x, golden), f"call {call}: recv_x differs from the rows sent"
    return recv_x, handle, golden, recv_idx, x, idx, w


def test_results_in_receive_blocks():
    me, n = shmoe.my_pe(), shmoe.n_pes()
    seed = fresh_seed()
    buf = moe.MoeBuffer(TOKENS, HIDDEN, n * L, TOPK, "bfloat16", recv_blocks=BLOCKS)
    window = (address(buf.receive_window), address(buf.receive_window) + buf.receive_window.size)
    held = [dispatch(buf, seed, call) for call in range(BLOCKS + 1)]
    assert buf.result_counts() == (BLOCKS, 1)  # the last found every block held: copied
    blocks = [address(h[0]) for h in held[:BLOCKS]]
    assert len(set(blocks)) == BLOCKS
    assert all(not window[0] <= b < window[1] for b in blocks), "a block result in the window"
    for call, (recv_x, _, golden, *_) in enumerate(held):  # later dispatches left them alone
        assert same_bits(recv_x, golden), f"call {call}'s recv_x changed"

    # The first block, dropped, is the only free one: the next dispatch's.
    freed = blocks[0]
    del held[0]
    gc.collect()
    recv_x, handle, golden, recv_idx, x, idx, w = dispatch(buf, seed, BLOCKS + 1)
    assert address(recv_x) == freed
    assert buf.result_counts() == (BLOCKS + 1, 1)

    # Combine of the block's rows (the experts write their outputs over them).
    recv_x[:] = expert_outputs("bfloat16", me, L, recv_x, recv_idx)
    out = buf.combine(recv_x, handle, w)
    ys = np.stack([np.stack([expert_step("bfloat16", int(idx[t, k]), x[t]) for k in range(TOPK)])
                   for t in range(idx.shape[0])])
    check_combine("bfloat16", out, ys, idx, w, "receive block")

    # A result outlives close(): the buffer's memory is left allocated while it is held.
    kept, kept_golden = held[0][0], held[0][2]
    del held, recv_x
    buf.close()
    gc.collect()
    assert same_bits(kept, kept_golden)


def test_no_receive_blocks_in_shrink_mode():
    n = shmoe.n_pes()
    with pytest.raises(shmoe.Error, match="recv_blocks=1 must be 0 in shrink mode"):
        moe.MoeBuffer(TOKENS, HIDDEN, n * L, TOPK, "bfloat16", shrink_timeout_ms=1000,
                      recv_blocks=1)
