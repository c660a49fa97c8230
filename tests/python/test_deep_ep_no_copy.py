"""deep_ep.Buffer's results with no copy (SHMOE_DEEP_EP_RECV_BLOCKS, docs/deep_ep.md), in normal
mode and in low-latency mode (BF16): recv_x lies in a receive block its senders wrote, stays the
caller's while later dispatches run and goes back when the tensor is dropped. Checked in
torch.distributed jobs of spawned ranks: results held and dropped in random order (each rank its
own order, so in one call some ranks receive into a block and others copy), more results held
than blocks (the copy fallback, whose choice is checked call by call), a result that outlives a
replan of the operators (normal mode) and one that outlives destroy() (shmem_finalize). Inputs
are fresh random values from a seed drawn per run; every rank rebuilds every rank's tokens from
it, and each recv_x is compared bit for bit with the rows the rank should receive (source rank,
then token order; low-latency mode: in each local expert's slab), when new and after later
calls."""

import gc
import os
import random
import traceback

import pytest

torch = pytest.importorskip("torch")
import torch.distributed as dist  # noqa: E402

from test_deep_ep import spawn_ranks  # noqa: E402

BLOCKS, HIDDEN, TOPK, LOCAL = 2, 128, 2, 2  # LOCAL experts per rank
BIG = 1000  # the call with more tokens than the first operators hold


def _tokens(seed, call, rank):
    """Tokens of rank `rank` in call `call`: 16..55, within the first operators' 64, except
    BIG's."""
    return 100 if call == BIG else 16 + (seed + 7 * call + 5 * rank) % 40


def _inputs(seed, call, rank, n):
    tokens = _tokens(seed, call, rank)
    g = torch.Generator().manual_seed((seed * 2000 + call) * 64 + rank)
    idx = torch.stack([torch.randperm(n * LOCAL, generator=g)[:TOPK] for _ in range(tokens)])
    idx[torch.rand((tokens, TOPK), generator=g) < 0.2] = -1
    w = torch.rand((tokens, TOPK), generator=g)
    x = torch.randn((tokens, HIDDEN), generator=g).to(torch.bfloat16)
    return idx, w, x


def _expected(seed, call, rank, n):
    """The rows rank `rank` receives in call `call`, by plain loops over every rank's tokens."""
    rows = []
    for src in range(n):
        idx, _, x = _inputs(seed, call, src, n)
        for t, row in enumerate(idx.tolist()):
            if any(e >= 0 and e // LOCAL == rank for e in row):
                rows.append(x[t])
    return torch.stack(rows) if rows else torch.empty((0, HIDDEN), dtype=torch.bfloat16)


def _dispatch(seed, call, rank, n, buffer):
    """Only recv_x is kept: the tensor alone must keep its block."""
    idx, w, x = _inputs(seed, call, rank, n)
    per_rank, _, per_expert, in_rank, _ = buffer.get_dispatch_layout(idx, n * LOCAL)
    return buffer.dispatch(x, num_tokens_per_rank=per_rank, is_token_in_rank=in_rank,
                           num_tokens_per_expert=per_expert, topk_idx=idx, topk_weights=w)[0]


def _same(got, want):
    return got.shape == want.shape and torch.equal(got.view(torch.int16), want.view(torch.int16))


class Normal:
    """Normal mode's calls and expectations."""

    dispatch, expected, same = staticmethod(_dispatch), staticmethod(_expected), staticmethod(_same)

    @staticmethod
    def counts(buffer):
        return buffer._normal.runtime.result_counts()


MAX = 64  # low-latency mode's num_max_dispatch_tokens_per_rank


class LowLatency:
    """Low-latency mode's: recv_x [LOCAL, MAX x ranks, HIDDEN], local expert e's rows from the
    head of its slab (the rest unspecified, as in DeepEP)."""

    @staticmethod
    def dispatch(seed, call, rank, n, buffer):
        idx, _, x = _inputs(seed, call, rank, n)
        return buffer.low_latency_dispatch(x, idx, MAX, n * LOCAL, use_fp8=False)[0]

    @staticmethod
    def expected(seed, call, rank, n):
        """The ranks, and per local expert its rows, by plain loops over every rank's tokens."""
        rows = [[] for _ in range(LOCAL)]
        for src in range(n):
            idx, _, x = _inputs(seed, call, src, n)
            for t, row in enumerate(idx.tolist()):
                for e in row:
                    if e >= 0 and e // LOCAL == rank:
                        rows[e % LOCAL].append(x[t])
        return n, rows

    @staticmethod
    def same(got, want):
        n, rows = want
        return got.shape == (LOCAL, MAX * n, HIDDEN) and all(
            _same(got[e, :len(r)], torch.stack(r)) for e, r in enumerate(rows) if r)

    @staticmethod
    def counts(buffer):
        return buffer._low_latency.runtime.result_counts()


class Held:
    """The results a rank holds, each with its expected rows and whether it is in a block."""

    def __init__(self, seed, rank, n, buffer, mode=Normal):
        self.seed, self.rank, self.n, self.buffer, self.mode = seed, rank, n, buffer, mode
        self.results = []  # (call, recv_x, in a block)

    def counts(self):
        return self.mode.counts(self.buffer)

    def dispatch(self, call):
        """A dispatch, which must take a block exactly when one is free."""
        in_blocks, copied = self.counts()
        free = sum(1 for r in self.results if r[2]) < BLOCKS
        recv = self.mode.dispatch(self.seed, call, self.rank, self.n, self.buffer)
        now = self.counts()
        assert now == ((in_blocks + 1, copied) if free else (in_blocks, copied + 1)), (free, now)
        self.results.append((call, recv, free))
        self.check()
        return free

    def check(self):
        for call, recv, in_block in self.results:
            want = self.mode.expected(self.seed, call, self.rank, self.n)
            assert self.mode.same(recv, want), (
                f"call {call}'s recv_x (in a block: {in_block}) changed")

    def drop(self, i):
        del self.results[i]
        gc.collect()


def _random_order(seed, rank, n, buffer, held):
    """14 calls, each rank holding 0..3 results (more than BLOCKS) and dropping them in its own
    random order; every held result is checked after every call."""
    rng = random.Random(seed * 31 + rank)
    paths = set()
    for call in range(14):
        paths.add(held.dispatch(call))
        # Calls 3 and 4 take both blocks (none held before them), so call 5 must copy.
        keep = {2: 0, 3: 3, 4: 3, 5: 3}.get(call, rng.randint(0, 3))
        while len(held.results) > keep:
            held.drop(rng.randrange(len(held.results)))
            held.check()
    assert paths == {True, False}, paths


def _replan(seed, rank, n, buffer, held):
    """A result in a block outlives the operators it came from: a dispatch of more tokens than
    they hold makes new ones, collectively; the old rows still read right, and dropping them
    after is harmless. The new operators lend their own blocks."""
    while held.results:
        held.drop(0)
    assert held.dispatch(100)
    assert held.dispatch(BIG)  # replans: its rows go into a block of the new operators
    held.check()
    held.drop(0)  # the old operators' block, after they are gone
    held.check()
    assert held.dispatch(101)
    held.check()


def _after_finalize(seed, rank, n, buffer, held):
    """destroy() frees the operators and finalizes shmoe while results in blocks are held: the
    rows still read right (the heap stays mapped), and dropping them after is harmless."""
    while held.results:
        held.drop(0)
    assert held.dispatch(200)
    assert held.dispatch(201)
    kept = [(call, recv) for call, recv, _ in held.results]
    held.results.clear()
    buffer.destroy()
    mode = held.mode
    for call, recv in kept:
        assert mode.same(recv, mode.expected(seed, call, rank, n)), f"call {call} after finalize"
    kept.pop(0)
    gc.collect()
    assert mode.same(kept[0][1], mode.expected(seed, kept[0][0], rank, n))
    kept.clear()
    gc.collect()


def _worker(rank, n, port, failures, seed, low_latency=False):
    try:
        os.environ["SHMOE_DEEP_EP_RECV_BLOCKS"] = str(BLOCKS)
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", world_size=n,
                                rank=rank)
        import deep_ep

        if low_latency:
            hint = deep_ep.Buffer.get_low_latency_rdma_size_hint(MAX, HIDDEN, n, n * LOCAL)
            buffer = deep_ep.Buffer(None, 0, hint, low_latency_mode=True, explicitly_destroy=True)
        else:
            buffer = deep_ep.Buffer(None, int(64e6), 0, explicitly_destroy=True)
        held = Held(seed, rank, n, buffer, LowLatency if low_latency else Normal)
        _random_order(seed, rank, n, buffer, held)
        if not low_latency:  # low-latency operators are made once per shape, never replanned
            _replan(seed, rank, n, buffer, held)
        _after_finalize(seed, rank, n, buffer, held)
        dist.barrier()
        dist.destroy_process_group()
    except BaseException:
        failures.put(f"rank {rank} (seed {seed}): {traceback.format_exc()}")
        raise


@pytest.mark.parametrize("n", [2, 4])
def test_results_in_receive_blocks(n):
    spawn_ranks(_worker, n, int.from_bytes(os.urandom(3), "little"))


def _low_latency_worker(rank, n, port, failures, seed):
    _worker(rank, n, port, failures, seed, low_latency=True)


@pytest.mark.parametrize("n", [2, 4])
def test_low_latency_results_in_receive_blocks(n):
    spawn_ranks(_low_latency_worker, n, int.from_bytes(os.urandom(3), "little"))
