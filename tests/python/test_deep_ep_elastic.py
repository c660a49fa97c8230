"""deep_ep.ElasticBuffer (DeepEP V2's EP API on shmoe) in real torch.distributed jobs: processes
started by torch.multiprocessing.spawn with a gloo group. Every rank rebuilds every rank's random
tokens and routing from seeds, so the reference here (plain torch, written from the contract in
shmoe/elastic.h, not from the runtime) knows what each rank must receive and what each combine
must return, bit for bit; every bad input must raise on every rank."""

import pytest

torch = pytest.importorskip("torch")
import torch.distributed as dist  # noqa: E402

from test_deep_ep import spawn_ranks  # noqa: E402

TOKENS, HIDDEN, TOPK, LOCAL = 40, 96, 4, 3  # LOCAL experts per rank


def _routing(rank, n):
    """Rank `rank`'s tokens (bf16), top-k experts (some -1) and weights, from its seed."""
    g = torch.Generator().manual_seed(7000 + rank)
    tokens = TOKENS - rank  # ranks hold different counts
    x = torch.randn((tokens, HIDDEN), generator=g).to(torch.bfloat16)
    idx = torch.stack([torch.randperm(n * LOCAL, generator=g)[:TOPK] for _ in range(tokens)])
    idx[torch.rand((tokens, TOPK), generator=g) < 0.25] = -1
    w = torch.rand((tokens, TOPK), generator=g)
    return x, idx.to(torch.int64), w


def _received(rank, n):
    """(source, token) of every token rank `rank` receives, in source then token order."""
    rows = []
    for src in range(n):
        _, idx, _ = _routing(src, n)
        for t in range(idx.shape[0]):
            if ((idx[t] >= rank * LOCAL) & (idx[t] < (rank + 1) * LOCAL)).any():
                rows.append((src, t))
    return rows


def _partial(src, t, rank):
    """The bf16 row rank `rank` sends back for token t of `src` (a function of all three): values
    of very different sizes (+-2^24 beside +-1), so fp32 sums taken in another order differ."""
    g = torch.Generator().manual_seed(src * 100003 + t * 101 + rank)
    choices = torch.tensor([2.0**24, -(2.0**24), 1.0, -1.0, 0.5])
    return choices[torch.randint(0, 5, (HIDDEN,), generator=g)].to(torch.bfloat16)


def _check_dispatch(rank, n, x, idx, w, got, align):
    recv_x, recv_idx, recv_w, handle = got
    rows = _received(rank, n)
    assert handle.num_recv_tokens == len(rows) and recv_x.shape == (len(rows), HIDDEN)
    want_x = torch.stack([_routing(s, n)[0][t] for s, t in rows])
    assert torch.equal(recv_x, want_x)
    want_idx = torch.stack([_routing(s, n)[1][t] for s, t in rows]) - rank * LOCAL
    want_idx[(want_idx < 0) | (want_idx >= LOCAL)] = -1
    assert torch.equal(recv_idx, want_idx)
    assert torch.equal(recv_w, torch.stack([_routing(s, n)[2][t] for s, t in rows]))
    counts = torch.tensor([int((want_idx == e).sum()) for e in range(LOCAL)])
    aligned = (counts + align - 1) // align * align
    assert handle.num_recv_tokens_per_expert_list == aligned.tolist()
    assert torch.equal(handle.psum_num_recv_tokens_per_expert, aligned.cumsum(0).int())
    per_src = torch.tensor([sum(1 for s, _ in rows if s == i) for i in range(n)])
    assert torch.equal(handle.psum_num_recv_tokens_per_scaleup_rank, per_src.cumsum(0).int())
    assert handle.recv_src_metadata[:, 0].tolist() == [s * TOKENS + t for s, t in rows]
    return rows


def _reference_combine(rank, n, idx, bias):
    """DeepEP's combine of rank `rank`'s tokens: fp32 from bias0 + bias1, each rank's partial
    added at that rank's largest top-k slot, rounded once."""
    out = []
    for t in range(idx.shape[0]):
        acc = torch.zeros(HIDDEN)
        if len(bias) == 2:
            acc = bias[0][t].float() + bias[1][t].float()
        elif len(bias) == 1:
            acc = bias[0][t].float().clone()
        for k in range(TOPK):
            e = int(idx[t, k])
            if e < 0:
                continue
            owner = e // LOCAL
            if any(int(idx[t, l]) >= 0 and int(idx[t, l]) // LOCAL == owner
                   for l in range(k + 1, TOPK)):
                continue  # not the owner's largest slot
            acc = acc + _partial(rank, t, owner).float()
        out.append(acc.to(torch.bfloat16))
    return torch.stack(out)


def _dispatch_and_combine(rank, n, buffer):
    x, idx, w = _routing(rank, n)
    for align, nbias in ((1, 0), (4, 1), (8, 2)):
        recv_x, recv_idx, recv_w, handle, event = buffer.dispatch(
            x, topk_idx=idx, topk_weights=w, num_experts=n * LOCAL, expert_alignment=align)
        event.current_stream_wait()
        rows = _check_dispatch(rank, n, x, idx, w, (recv_x, recv_idx, recv_w, handle), align)
        cached = buffer.dispatch(x, handle=handle)
        assert torch.equal(cached[0], recv_x) and torch.equal(cached[1], recv_idx)
        g = torch.Generator().manual_seed(50 + rank)
        bias = tuple(torch.randn((x.shape[0], HIDDEN), generator=g).to(torch.bfloat16)
                     for _ in range(nbias))
        partials = torch.stack([_partial(s, t, rank) for s, t in rows])
        combined, combined_w, _ = buffer.combine(
            partials, handle, topk_weights=recv_w,
            bias=bias if nbias == 2 else (bias[0] if nbias else None))
        assert torch.equal(combined, _reference_combine(rank, n, idx, bias))
        assert torch.equal(combined_w, w.masked_fill(idx < 0, 0))


def _scales(rank, tokens):
    return torch.arange(tokens * 2, dtype=torch.float32).view(tokens, 2) / 4 + rank


def _expand_fp8(rank, n, buffer):
    """FP8 (values, scales) in the expand layout: each expert's rows in source order from an
    aligned start, padding zeroed; without multiple reduction each row comes back alone."""
    x, idx, w = _routing(rank, n)
    values = x.float().clamp(-8, 8).to(torch.float8_e4m3fn)
    scales = _scales(rank, x.shape[0])
    (recv, sf), recv_idx, recv_w, handle, _ = buffer.dispatch(
        (values, scales), topk_idx=idx, topk_weights=w, num_experts=n * LOCAL,
        expert_alignment=4, do_expand=True, do_zero_padding=True,
        use_tma_aligned_col_major_sf=True)
    assert recv_idx is None and sf.stride() == (1, (sf.shape[0] + 3) // 4 * 4)
    start = 0
    for e in range(LOCAL):
        mine = [(s, t) for s, t in _received(rank, n)
                if (_routing(s, n)[1][t] == rank * LOCAL + e).any()]
        for i, (s, t) in enumerate(mine):
            sx, sidx, sw = _routing(s, n)
            assert torch.equal(recv[start + i].view(torch.uint8),
                               sx[t].float().clamp(-8, 8).to(torch.float8_e4m3fn).view(
                                   torch.uint8))
            assert torch.equal(sf[start + i], _scales(s, sx.shape[0])[t])
            k = int((sidx[t] == rank * LOCAL + e).nonzero()[0])
            assert float(recv_w[start + i]) == float(sw[t, k])
        end = (start + len(mine) + 3) // 4 * 4
        assert (recv[start + len(mine):end].view(torch.uint8) == 0).all()
        assert (recv_w[start + len(mine):end] == 0).all()
        assert int(handle.psum_num_recv_tokens_per_expert[e]) == start + len(mine)
        start = end


def _bad_input(rank, n, buffer):
    x, idx, w = _routing(rank, n)
    bad = idx.clone()
    if rank == n - 1:
        bad[0, 0] = n * LOCAL  # out of range on one rank only
    with pytest.raises(Exception) as e:
        buffer.dispatch(x, topk_idx=bad, topk_weights=w, num_experts=n * LOCAL)
    want = "topk_idx[0][0]" if rank == n - 1 else f"PE {n - 1} refused"
    assert want in str(e.value), str(e.value)
    with pytest.raises(Exception) as e:
        buffer.dispatch(x, topk_idx=idx, topk_weights=w, num_experts=n * LOCAL + 1)
    assert "num_experts" in str(e.value), str(e.value)
    # The buffer still works after refused calls, and a destroyed buffer refuses plainly.
    buffer.dispatch(x, topk_idx=idx, topk_weights=w, num_experts=n * LOCAL)


def _worker(rank, n, port, failures, scenario):
    import traceback

    try:
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", world_size=n,
                                rank=rank)
        import deep_ep

        group = dist.new_group(list(range(n)))
        for _ in range(2):  # a second buffer after destroy(), in the same job
            buffer = deep_ep.ElasticBuffer(group, num_max_tokens_per_rank=TOKENS, hidden=HIDDEN,
                                           num_topk=TOPK, explicitly_destroy=True)
            assert buffer.get_logical_domain_size() == (1, n)
            scenario(rank, n, buffer)
            buffer.destroy()
        dist.barrier()
        dist.destroy_process_group()
    except BaseException:
        failures.put(f"rank {rank}: {traceback.format_exc()}")
        raise


def _all(rank, n, buffer):
    _dispatch_and_combine(rank, n, buffer)
    _expand_fp8(rank, n, buffer)
    _bad_input(rank, n, buffer)


@pytest.mark.parametrize("n", [2, 3])
def test_elastic_buffer(n):
    spawn_ranks(_worker, n, _all)
