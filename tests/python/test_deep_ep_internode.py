"""deep_ep.Buffer's normal mode over simulated hosts (DeepEP V1's internode mode) and its FP8
(values, scales) x, in torch.distributed jobs started by torch.multiprocessing.spawn: each rank
sets SHMOE_HOST_ID (hosts of consecutive ranks), so rows move by shared memory within a host
and by UCX between hosts. The inputs are fresh random values from a seed drawn per test run;
every rank rebuilds every rank's inputs from it, and the reference (plain Python and torch,
written from DeepEP's contract) knows the layout, the rows each rank receives, the handle's
prefix sums and each combine's exact result."""

import os
import traceback

import pytest

torch = pytest.importorskip("torch")
import torch.distributed as dist  # noqa: E402

from test_deep_ep import spawn_ranks  # noqa: E402

TOKENS, HIDDEN, TOPK, LOCAL = 36, 256, 3, 2  # LOCAL experts per rank; HIDDEN / 128 scales


def _inputs(seed, rank, n):
    """Rank `rank`'s routing (some -1), weights, FP8 values and float32 scales, from the seed."""
    g = torch.Generator().manual_seed(seed * 64 + rank)
    tokens = TOKENS - 3 * rank  # ranks hold different counts
    idx = torch.stack([torch.randperm(n * LOCAL, generator=g)[:TOPK] for _ in range(tokens)])
    idx[torch.rand((tokens, TOPK), generator=g) < 0.3] = -1
    w = torch.rand((tokens, TOPK), generator=g) + 0.25
    values = torch.randn((tokens, HIDDEN), generator=g).to(torch.float8_e4m3fn)
    scales = torch.rand((tokens, HIDDEN // 128), generator=g) + 0.5
    return idx.to(torch.int64), w, values, scales


def _reference_layout(idx, n, hosts, experts):
    """(tokens per rank, tokens per host, tokens per expert, is_token_in_rank) by plain loops."""
    per_rank, per_host, per_expert = [0] * n, [0] * hosts, [0] * experts
    in_rank = []
    for row in idx.tolist():
        ranks = {e // LOCAL for e in row if e >= 0}
        for e in row:
            if e >= 0:
                per_expert[e] += 1
        for j in ranks:
            per_rank[j] += 1
        for h in {j // (n // hosts) for j in ranks}:
            per_host[h] += 1
        in_rank.append([j in ranks for j in range(n)])
    return per_rank, per_host, per_expert, in_rank


def _reference_received(seed, rank, n):
    """(source, token, local indices, weights) of each row rank `rank` receives, in order."""
    rows = []
    for src in range(n):
        idx, w, _, _ = _inputs(seed, src, n)
        for t, row in enumerate(idx.tolist()):
            local = [e - rank * LOCAL if e >= 0 and e // LOCAL == rank else -1 for e in row]
            if any(v >= 0 for v in local):
                rows.append((src, t, local,
                             [float(w[t, k]) if local[k] >= 0 else 0.0 for k in range(TOPK)]))
    return rows


def _check_layout(seed, rank, n, hosts, buffer):
    idx, _, _, _ = _inputs(seed, rank, n)
    per_rank, per_host, per_expert, in_rank, _ = buffer.get_dispatch_layout(idx, n * LOCAL)
    ref = _reference_layout(idx, n, hosts, n * LOCAL)
    assert per_rank.tolist() == ref[0] and per_expert.tolist() == ref[2]
    assert in_rank.tolist() == ref[3]
    assert per_host is None if hosts == 1 else per_host.tolist() == ref[1]
    return per_rank, per_host, per_expert, in_rank


def _fp8_dispatch(seed, rank, n, hosts, buffer, layout):
    """An FP8 (values, column-major scales) dispatch: the rows arrive bit for bit, in source rank
    then token order, with DeepEP's handle for the number of hosts."""
    idx, w, values, scales = _inputs(seed, rank, n)
    per_rank, per_host, per_expert, in_rank = layout
    x = (values, scales.T.contiguous().T)  # DeepEP's tests pass the scales column-major
    recv, recv_idx, recv_w, counts, handle, _ = buffer.dispatch(
        x, num_tokens_per_rank=per_rank, num_tokens_per_rdma_rank=per_host,
        is_token_in_rank=in_rank, num_tokens_per_expert=per_expert, topk_idx=idx, topk_weights=w)
    rows = _reference_received(seed, rank, n)
    sources = [_inputs(seed, src, n) for src in range(n)]
    want_values = torch.stack([sources[s][2][t] for s, t, _, _ in rows])
    want_scales = torch.stack([sources[s][3][t] for s, t, _, _ in rows])
    assert isinstance(recv, tuple) and recv[0].dtype == torch.float8_e4m3fn
    assert torch.equal(recv[0].view(torch.uint8), want_values.view(torch.uint8))
    assert torch.equal(recv[1], want_scales)
    assert recv_idx.tolist() == [r[2] for r in rows]
    assert torch.equal(recv_w, torch.tensor([r[3] for r in rows], dtype=torch.float32))
    assert counts == [sum(r[2].count(e) for r in rows) for e in range(LOCAL)]
    prefix = [sum(1 for r in rows if r[0] <= src) for src in range(n)]
    if hosts == 1:
        assert len(handle) == 6 and handle[0][:, rank].tolist() == prefix
    else:
        assert len(handle) == 10 and handle[-4].tolist() == prefix  # recv_gbl_rank_prefix_sum
        assert handle[7].tolist() == [[s, t] for s, t, _, _ in rows]  # recv_src_meta
    return recv, recv_idx, recv_w, handle, rows, sources


def _worst_and_cached(seed, rank, n, buffer, layout, got):
    """num_worst_tokens pads with zero rows and -1; a cached dispatch of the FP8 pair and of bf16
    rows of another width on the FP8 dispatch's handle repeats its routing."""
    idx, w, values, scales = _inputs(seed, rank, n)
    per_rank, per_host, per_expert, in_rank = layout
    recv, recv_idx, recv_w, handle, rows, sources = got
    worst = n * TOKENS
    wx, widx, ww, empty, _, _ = buffer.dispatch(
        (values, scales), num_tokens_per_rank=per_rank, num_tokens_per_rdma_rank=per_host,
        is_token_in_rank=in_rank, num_tokens_per_expert=per_expert, topk_idx=idx,
        topk_weights=w, num_worst_tokens=worst)
    R = len(rows)
    assert empty == [] and wx[0].shape[0] == worst and wx[1].shape[0] == worst
    assert torch.equal(wx[0][:R].view(torch.uint8), recv[0].view(torch.uint8))
    assert torch.equal(wx[1][:R], recv[1]) and not bool(wx[1][R:].any())
    assert torch.equal(widx[:R], recv_idx) and bool((widx[R:] == -1).all())
    assert torch.equal(ww[:R], recv_w)
    again = buffer.dispatch((values, scales), handle=handle)[0]
    assert torch.equal(again[0].view(torch.uint8), recv[0].view(torch.uint8))
    assert torch.equal(again[1], recv[1])
    narrow = values[:, :64].to(torch.bfloat16)
    got_narrow = buffer.dispatch(narrow, handle=handle)[0]
    want = torch.stack([sources[s][2][t, :64].to(torch.bfloat16) for s, t, _, _ in rows])
    assert torch.equal(got_narrow, want)


def _combine(seed, rank, n, buffer, layout, got):
    """Combine with two biases: each rank sends back its received rows times (its rank + 1), so
    token t of rank s comes back as values[t] x the sum of (j + 1) over the ranks j it went to,
    plus bias0 + bias1, summed in float32 (exact here) and rounded once; weights summed."""
    idx, w, values, _ = _inputs(seed, rank, n)
    in_rank = layout[3]
    recv, _, recv_w, handle, _, _ = got
    back = recv[0].to(torch.bfloat16) * (rank + 1)  # E4M3 x 1..4 is exact in bf16
    g = torch.Generator().manual_seed(seed * 64 + 32 + rank)
    b0, b1 = ((torch.randint(-64, 65, (idx.shape[0], HIDDEN), generator=g) / 8)
              .to(torch.bfloat16) for _ in range(2))
    combined, combined_w, _ = buffer.combine(back, handle, topk_weights=recv_w, bias=(b0, b1))
    factor = (in_rank.double() * torch.arange(1, n + 1, dtype=torch.float64)).sum(1, keepdim=True)
    exact = values.double() * factor + b0.double() + b1.double()
    assert torch.equal(combined, exact.float().to(torch.bfloat16))
    assert torch.equal(combined_w, torch.where(idx >= 0, w, torch.zeros_like(w)))


def _bad_input(seed, rank, n, hosts, buffer, layout):
    """A wrong num_tokens_per_rdma_rank or x_scales on rank 1: every rank raises, rank 1 naming
    the argument."""
    import shmoe

    idx, w, values, scales = _inputs(seed, rank, n)
    per_rank, per_host, per_expert, in_rank = layout
    cases = {"num_tokens_per_rdma_rank": dict(num_tokens_per_rdma_rank=torch.zeros(
                 hosts + 1, dtype=torch.int32)),
             "x_scales": dict(x=(values, scales[:-1]))}
    for name, change in cases.items():
        args = dict(x=(values, scales), num_tokens_per_rank=per_rank,
                    num_tokens_per_rdma_rank=per_host, is_token_in_rank=in_rank,
                    num_tokens_per_expert=per_expert, topk_idx=idx, topk_weights=w)
        if rank == 1:
            args.update(change)
        with pytest.raises(shmoe.Error) as err:
            buffer.dispatch(**args)
        assert name in str(err.value) if rank == 1 else "PE 1" in str(err.value), str(err.value)


def _worker(rank, n, port, failures, hosts, seed):
    try:
        os.environ["SHMOE_HOST_ID"] = f"internode-test-host{rank // (n // hosts)}"
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", world_size=n,
                                rank=rank)
        import deep_ep

        buffer = deep_ep.Buffer(None, int(64e6), int(64e6), explicitly_destroy=True)
        assert deep_ep.get_physical_domain_size(dist.group.WORLD) == (hosts, n // hosts)
        layout = _check_layout(seed, rank, n, hosts, buffer)
        got = _fp8_dispatch(seed, rank, n, hosts, buffer, layout)
        _worst_and_cached(seed, rank, n, buffer, layout, got)
        _combine(seed, rank, n, buffer, layout, got)
        _bad_input(seed, rank, n, hosts, buffer, layout)
        buffer.destroy()
        dist.barrier()
        dist.destroy_process_group()
    except BaseException:
        failures.put(f"rank {rank} (seed {seed}): {traceback.format_exc()}")
        raise


@pytest.mark.parametrize("n,hosts", [(2, 1), (2, 2), (4, 2)])
def test_normal_mode_over_hosts(n, hosts):
    spawn_ranks(_worker, n, hosts, int.from_bytes(os.urandom(3), "little"))
