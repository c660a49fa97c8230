"""deep_ep (DeepEP's API on shmoe) in real torch.distributed jobs: processes started by
torch.multiprocessing.spawn with a gloo group and no shmoerun. Every received row is checked
against an independent reference built from exact integer encodings (column 0: the source rank,
column 1: the token, both exact in bfloat16), and every bad input must raise on every rank."""

import os
import socket
import traceback

import pytest

torch = pytest.importorskip("torch")
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402

TOKENS, HIDDEN, TOPK, EXPERTS_PER_RANK = 48, 64, 3, 4


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _routing(rank, n):
    """Rank `rank`'s top-k experts and weights, the same wherever it is computed."""
    g = torch.Generator().manual_seed(1000 + rank)
    experts = n * EXPERTS_PER_RANK
    idx = torch.stack([torch.randperm(experts, generator=g)[:TOPK] for _ in range(TOKENS)])
    idx[torch.rand((TOKENS, TOPK), generator=g) < 0.2] = -1  # some slots pick no expert
    w = torch.rand((TOKENS, TOPK), generator=g) + 0.5
    return idx.to(torch.int64), w


def _tokens(rank):
    x = torch.zeros((TOKENS, HIDDEN), dtype=torch.bfloat16)
    x[:, 0] = rank
    x[:, 1] = torch.arange(TOKENS)
    x[:, 2:] = (torch.arange(HIDDEN - 2) % 7 + 1).to(torch.bfloat16)
    return x


def _normal_mode(rank, n, buffer):
    import deep_ep

    experts = n * EXPERTS_PER_RANK
    idx, w = _routing(rank, n)
    per_rank, per_rdma, per_expert, in_rank, _ = buffer.get_dispatch_layout(idx, experts)
    assert per_rdma is None and per_rank.dtype == torch.int32 and in_rank.dtype == torch.bool
    assert per_expert.dtype == torch.int32
    x = _tokens(rank)
    recv_x, recv_idx, recv_w, counts, handle, event = buffer.dispatch(
        x, num_tokens_per_rank=per_rank, is_token_in_rank=in_rank, num_tokens_per_expert=per_expert,
        topk_idx=idx, topk_weights=w, config=deep_ep.Buffer.get_dispatch_config(n))
    event.current_stream_wait()
    # The reference: one row per (source rank, token) that goes to this rank, in that order.
    rows, ref_idx, ref_w, ref_counts, prefix = [], [], [], [0] * EXPERTS_PER_RANK, []
    for src in range(n):
        s_idx, s_w = _routing(src, n)
        for t in range(TOKENS):
            local = [int(e) - rank * EXPERTS_PER_RANK if e >= 0 and int(e) // EXPERTS_PER_RANK == rank
                     else -1 for e in s_idx[t]]
            if any(v >= 0 for v in local):
                rows.append((src, t))
                ref_idx.append(local)
                ref_w.append([float(s_w[t, k]) if local[k] >= 0 else 0.0 for k in range(TOPK)])
                for v in local:
                    if v >= 0:
                        ref_counts[v] += 1
        prefix.append(len(rows))
    assert [(int(r[0]), int(r[1])) for r in recv_x[:, :2].float()] == rows
    assert recv_idx.tolist() == ref_idx
    assert torch.equal(recv_w, torch.tensor(ref_w, dtype=torch.float32).reshape(-1, TOPK))
    assert counts == ref_counts
    assert handle[0][:, rank].tolist() == prefix
    assert handle[3].tolist() == [t for _, t in rows]
    # Cached dispatch: the same rows again.
    again, none_idx, _, _, _, _ = buffer.dispatch(x, handle=handle)
    assert none_idx is None and torch.equal(again, recv_x)
    # Combine: the unweighted sum over the ranks each token went to.
    combined, combined_w, _ = buffer.combine(recv_x, handle, topk_weights=recv_w)
    reached = in_rank.sum(dim=1, keepdim=True).to(torch.float32)
    assert torch.equal(combined.float(), x.float() * reached)
    expect_w = torch.where(idx >= 0, w, torch.zeros_like(w))
    assert torch.allclose(combined_w, expect_w, rtol=0, atol=1e-6)
    # num_worst_tokens: padded with zero rows, -1 indices, zero weights, and an empty list.
    worst = n * TOKENS
    wx, widx, ww, wcounts, _, _ = buffer.dispatch(
        x, num_tokens_per_rank=per_rank, is_token_in_rank=in_rank, num_tokens_per_expert=per_expert,
        topk_idx=idx, topk_weights=w, num_worst_tokens=worst)
    assert wcounts == [] and wx.shape[0] == worst and torch.equal(wx[: len(rows)], recv_x)
    assert bool((widx[len(rows):] == -1).all()) and bool((ww[len(rows):] == 0).all())


def _bad_input(rank, n, buffer):
    import shmoe

    experts = n * EXPERTS_PER_RANK
    idx, w = _routing(rank, n)
    per_rank, _, per_expert, in_rank, _ = buffer.get_dispatch_layout(idx, experts)
    x = _tokens(rank)
    cases = {
        "x": dict(x=x.float()),  # wrong dtype on rank 1
        "topk_idx": dict(topk_idx=torch.where(idx == idx.max(), torch.full_like(idx, experts),
                                              idx)),
        "is_token_in_rank": dict(is_token_in_rank=in_rank[:, :1].contiguous()),
    }
    for name, change in cases.items():
        args = dict(x=x, num_tokens_per_rank=per_rank, is_token_in_rank=in_rank,
                    num_tokens_per_expert=per_expert, topk_idx=idx, topk_weights=w)
        if rank == 1:
            args.update(change)
        with pytest.raises((ValueError, shmoe.Error)) as err:
            buffer.dispatch(**args)
        assert name in str(err.value) if rank == 1 else "PE 1" in str(err.value), str(err.value)
    with pytest.raises(ValueError, match="num_experts"):
        buffer.get_dispatch_layout(idx, experts + 1)
    _normal_mode(rank, n, buffer)  # nothing was left half done


def _worker(rank, n, port, scenario, failures):
    try:
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", world_size=n,
                                rank=rank)
        import deep_ep

        buffer = deep_ep.Buffer(dist.new_group(list(range(n))), int(64e6), 0,
                                explicitly_destroy=True)
        scenario(rank, n, buffer)
        buffer.destroy()
        dist.barrier()
        dist.destroy_process_group()
    except BaseException:
        failures.put(f"rank {rank}: {traceback.format_exc()}")
        raise


def _run(n, scenario):
    ctx = mp.get_context("spawn")
    failures = ctx.SimpleQueue()
    try:
        mp.spawn(_worker, args=(n, _free_port(), scenario, failures), nprocs=n)
    except Exception:
        lines = []
        while not failures.empty():
            lines.append(failures.get())
        pytest.fail("\n".join(lines) or "a rank failed")


@pytest.mark.parametrize("n", [2, 3, 4])
def test_normal_mode(n):
    _run(n, _normal_mode)


def test_bad_input_raises_on_every_rank():
    _run(3, _bad_input)


def test_torch_cpu_stand_ins():
    import deep_ep

    assert callable(torch.cpu.synchronize) and callable(torch.cpu.set_device)
    e0, e1 = torch.cpu.Event(enable_timing=True), torch.cpu.Event(enable_timing=True)
    e0.record()
    e1.record()
    assert e0.elapsed_time(e1) >= 0
    if not hasattr(torch.cpu, "_C"):
        pass
    assert deep_ep.topk_idx_t == torch.int64
    assert ("stand-ins" in deep_ep.__doc__) == bool(deep_ep._torch_cpu.ADDED)
