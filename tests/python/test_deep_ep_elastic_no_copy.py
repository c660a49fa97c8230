"""deep_ep.ElasticBuffer's results with no copy (SHMOE_DEEP_EP_RECV_BLOCKS, docs/deep_ep.md):
dispatch's recv_x (x without scales) lies in a receive block its senders wrote, one row per
token or, with do_expand, per (token, local expert), and goes back to the pool when the tensor
is dropped. Checked as tests/python/test_deep_ep_no_copy.py checks V1 (its Held results, random
holding and dropping, more held than blocks, a result outliving destroy()), in torch.distributed
jobs of spawned ranks on fresh random inputs: each recv_x bit for bit against the rows plain
loops over every rank's tokens give; recv_x at a block's address, a dropped block the next
dispatch's; an expanded recv_x larger than a block copied; combine of recv_x itself equal to
combine of a copy, and (one row per token) to the reference sum. At 2 and 4 ranks on one host
and on 2 simulated hosts of 2 ranks."""

import gc
import os
import traceback

import pytest

torch = pytest.importorskip("torch")
import torch.distributed as dist  # noqa: E402

from test_deep_ep import spawn_ranks  # noqa: E402
from test_deep_ep_no_copy import (BLOCKS, HIDDEN, LOCAL, TOPK, Held, _after_finalize,  # noqa: E402
                                  _expected, _inputs, _random_order, _same)

# num_max_tokens_per_rank, expert_alignment. A block holds ranks x MAX rows: every expanded
# recv_x here too (at most ranks x 55 tokens x TOPK rows, plus padding).
MAX, ALIGN = 128, 4


class Flat:
    """One row per token, in source then token order (as normal mode's recv_x)."""

    kwargs: dict = {}
    expected, same = staticmethod(_expected), staticmethod(_same)

    @classmethod
    def dispatch(cls, seed, call, rank, n, buffer):
        idx, w, x = _inputs(seed, call, rank, n)
        return buffer.dispatch(x, topk_idx=idx, topk_weights=w, num_experts=n * LOCAL,
                               **cls.kwargs)[0]

    @staticmethod
    def counts(buffer):
        return buffer.runtime.result_counts()


class Expanded(Flat):
    """do_expand: per local expert its (token, expert) rows in source then token order, each
    expert's run from a multiple of ALIGN, the padding zeroed (do_zero_padding)."""

    kwargs = {"do_expand": True, "expert_alignment": ALIGN, "do_zero_padding": True}

    @staticmethod
    def expected(seed, call, rank, n):
        runs = []
        for e in range(rank * LOCAL, (rank + 1) * LOCAL):
            rows = []
            for src in range(n):
                idx, _, x = _inputs(seed, call, src, n)
                rows += [x[t] for t, row in enumerate(idx.tolist()) for k in row if k == e]
            rows += [torch.zeros(HIDDEN, dtype=torch.bfloat16)] * (-len(rows) % ALIGN)
            runs += rows
        return torch.stack(runs) if runs else torch.empty((0, HIDDEN), dtype=torch.bfloat16)


def _addresses(held, buffer):
    """Both blocks free: recv_x starts block 0, the next held one block 1 (ranks x MAX bf16 rows
    further); the first dropped, the next dispatch lands in its block."""
    while held.results:
        held.drop(0)
    assert held.dispatch(300) and held.dispatch(301)
    first, second = (recv.data_ptr() for _, recv, _ in held.results)
    assert second - first == buffer.num_ranks * MAX * HIDDEN * 2, (first, second)
    held.drop(0)
    assert held.dispatch(302)
    assert held.results[-1][1].data_ptr() == first
    held.check()


def _combine(seed, rank, n, buffer, mode):
    """Combine of recv_x in its block and of a copy of it: the same bits; one row per token: each
    token back as x times the ranks it went to (exact in fp32, rounded once to bf16)."""
    idx, w, x = _inputs(seed, 400, rank, n)
    in_blocks = buffer.runtime.result_counts()[0]
    recv_x, _, _, handle, _ = buffer.dispatch(x, topk_idx=idx, topk_weights=w,
                                              num_experts=n * LOCAL, **mode.kwargs)
    assert buffer.runtime.result_counts()[0] == in_blocks + 1
    fresh = recv_x.clone()
    in_place = buffer.combine(recv_x, handle)[0]
    copied = buffer.combine(fresh, handle)[0]
    assert _same(in_place, copied)
    if mode is Flat:
        ranks = torch.tensor([len({e // LOCAL for e in row if e >= 0}) for row in idx.tolist()])
        # From a zero accumulator: a token sent nowhere is +0, never x * 0 = -0.
        want = torch.zeros(x.shape) + x.float() * ranks[:, None]
        assert _same(in_place, want.to(torch.bfloat16))


def _beyond_a_block(seed, rank, n, buffer):
    """Expanded without do_cpu_sync: recv_x has the worst case's rows (ranks x MAX x top-k, plus
    padding), more than a block holds, so it is copied though blocks are free: the rows first,
    then zeros (do_zero_padding)."""
    idx, w, x = _inputs(seed, 500, rank, n)
    in_blocks, copied = buffer.runtime.result_counts()
    recv_x = buffer.dispatch(x, topk_idx=idx, topk_weights=w, num_experts=n * LOCAL,
                             do_cpu_sync=False, **Expanded.kwargs)[0]
    assert buffer.runtime.result_counts() == (in_blocks, copied + 1)
    assert recv_x.shape[0] == n * MAX * min(TOPK, LOCAL) + LOCAL * (ALIGN - 1)
    want = Expanded.expected(seed, 500, rank, n)
    assert _same(recv_x[:len(want)], want) and not recv_x[len(want):].view(torch.int16).any()


def _worker(rank, n, port, failures, seed, expand, hosts):
    try:
        os.environ["SHMOE_DEEP_EP_RECV_BLOCKS"] = str(BLOCKS)
        if hosts > 1:  # simulated hosts: rows to the other host are put into its blocks (UCX)
            os.environ["SHMOE_HOST_ID"] = f"no-copy-host{rank // (n // hosts)}"
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", world_size=n,
                                rank=rank)
        import deep_ep

        mode = Expanded if expand else Flat
        buffer = deep_ep.ElasticBuffer(dist.group.WORLD, num_max_tokens_per_rank=MAX,
                                       hidden=HIDDEN, num_topk=TOPK, explicitly_destroy=True)
        held = Held(seed, rank, n, buffer, mode)
        _random_order(seed, rank, n, buffer, held)
        _addresses(held, buffer)
        while held.results:
            held.drop(0)
        _combine(seed, rank, n, buffer, mode)
        gc.collect()  # its block is free again
        _beyond_a_block(seed, rank, n, buffer)
        _after_finalize(seed, rank, n, buffer, held)
        dist.barrier()
        dist.destroy_process_group()
    except BaseException:
        failures.put(f"rank {rank} (seed {seed}): {traceback.format_exc()}")
        raise


@pytest.mark.parametrize("expand", [False, True], ids=["flat", "expanded"])
@pytest.mark.parametrize("n,hosts", [(2, 1), (4, 1), (4, 2)], ids=["2", "4", "2x2"])
def test_elastic_results_in_receive_blocks(n, hosts, expand):
    spawn_ranks(_worker, n, int.from_bytes(os.urandom(3), "little"), expand, hosts)
