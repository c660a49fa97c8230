"""deep_ep (DeepEP's API on shmoe) in real torch.distributed jobs: processes started by
torch.multiprocessing.spawn with a gloo group and no shmoerun. Every received row is checked
against an independent reference built from exact integer encodings (column 0: the source rank,
column 1: the token, both exact in bfloat16), and every bad input must raise on every rank."""

import os
import socket
import time
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


def _typed_tokens(rank, dtype):
    """Rank `rank`'s tokens in `dtype`: column 0 the rank, column 1 the token, the rest k / 8
    with |k| <= 16 (the same wherever it is computed)."""
    g = torch.Generator().manual_seed(900 + rank)
    x = torch.randint(-16, 17, (TOKENS, HIDDEN), generator=g).float() / 8
    x[:, 0] = rank
    x[:, 1] = torch.arange(TOKENS)
    return x.to(dtype)


def _other_dtypes(rank, n, buffer, layout, rows, reached):
    """A dispatch of float32 and of FP8 x: the rows arrive bit for bit as the source ranks sent
    them (DeepEP moves any dtype with 16-byte rows), a cached dispatch repeats them, and a bf16
    combine at the dispatch's width sums them (exactly: every sum here fits bf16)."""
    idx, w, per_rank, in_rank, per_expert = layout
    for dtype in (torch.float32, torch.float8_e4m3fn):
        x = _typed_tokens(rank, dtype)
        recv_x, _, recv_w, _, handle, _ = buffer.dispatch(
            x, num_tokens_per_rank=per_rank, is_token_in_rank=in_rank,
            num_tokens_per_expert=per_expert, topk_idx=idx, topk_weights=w)
        assert recv_x.dtype == dtype and tuple(recv_x.shape) == (len(rows), HIDDEN)
        want = torch.stack([_typed_tokens(src, dtype)[t] for src, t in rows])
        assert torch.equal(recv_x.view(torch.uint8), want.view(torch.uint8)), dtype
        again = buffer.dispatch(x, handle=handle)[0]
        assert torch.equal(again.view(torch.uint8), want.view(torch.uint8)), dtype
        combined, _, _ = buffer.combine(recv_x.to(torch.bfloat16), handle, topk_weights=recv_w)
        assert torch.equal(combined.float(), x.to(torch.bfloat16).float() * reached), dtype


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
    # With bias: added to the float32 sum, then rounded once (sums of these values are exact in
    # float32, so the reference is the exact sum rounded to bfloat16).
    g = torch.Generator().manual_seed(7 + rank)
    b0, b1 = ((torch.randint(-8, 8, (TOKENS, HIDDEN), generator=g) / 8).to(torch.bfloat16)
              for _ in range(2))
    biased, _, _ = buffer.combine(recv_x, handle, bias=(b0, b1))
    exact = x.double() * reached.double() + b0.double() + b1.double()
    assert torch.equal(biased, exact.float().to(torch.bfloat16))
    expect_w = torch.where(idx >= 0, w, torch.zeros_like(w))
    assert torch.allclose(combined_w, expect_w, rtol=0, atol=1e-6)
    # num_worst_tokens: padded with zero rows, -1 indices, zero weights, and an empty list.
    worst = n * TOKENS
    wx, widx, ww, wcounts, _, _ = buffer.dispatch(
        x, num_tokens_per_rank=per_rank, is_token_in_rank=in_rank, num_tokens_per_expert=per_expert,
        topk_idx=idx, topk_weights=w, num_worst_tokens=worst)
    assert wcounts == [] and wx.shape[0] == worst and torch.equal(wx[: len(rows)], recv_x)
    assert bool((widx[len(rows):] == -1).all()) and bool((ww[len(rows):] == 0).all())
    _other_dtypes(rank, n, buffer, (idx, w, per_rank, in_rank, per_expert), rows, reached)


def _ll_reference(rank, n):
    """What rank `rank` must receive in low-latency mode: for each local expert, the (source rank,
    token) pairs that chose it, in source-rank then token order."""
    got = [[] for _ in range(EXPERTS_PER_RANK)]
    for src in range(n):
        s_idx, _ = _routing(src, n)
        for t in range(TOKENS):
            for e in s_idx[t].tolist():
                if e >= 0 and e // EXPERTS_PER_RANK == rank:
                    got[e - rank * EXPERTS_PER_RANK].append((src, t))
    return got


def _ll_tokens(rank, hidden):
    """Exact encodings (column 0: the source rank, column 1: the token) and a random body."""
    g = torch.Generator().manual_seed(500 + rank)
    x = (torch.randn((TOKENS, hidden), generator=g) * 3).to(torch.bfloat16)
    x[:, 0] = rank
    x[:, 1] = torch.arange(TOKENS)
    return x


def _low_latency(rank, n, buffer):
    import deep_ep
    import shmoe

    hidden, max_tokens = 256, TOKENS + 5
    experts = n * EXPERTS_PER_RANK
    idx, w = _routing(rank, n)
    x = _ll_tokens(rank, hidden)
    want = _ll_reference(rank, n)
    stats = torch.zeros(EXPERTS_PER_RANK, dtype=torch.int32)
    calls = 0
    for use_fp8, round_scale, ue8m0 in [(False, False, False), (True, False, False),
                                       (True, True, False), (True, True, True)]:
        for hooked in (False, True):
            recv, count, handle, event, hook = buffer.low_latency_dispatch(
                x, idx, max_tokens, experts, cumulative_local_expert_recv_stats=stats,
                use_fp8=use_fp8, round_scale=round_scale, use_ue8m0=ue8m0,
                return_recv_hook=hooked)
            calls += 1
            assert (hook is not None) == hooked
            if hooked:
                hook()
            event.current_stream_wait()
            assert count.dtype == torch.int32 and count.tolist() == [len(r) for r in want]
            assert stats.tolist() == [calls * len(r) for r in want]
            src_info, layout, m, h, e = handle
            assert (m, h, e) == (max_tokens, hidden, experts)
            values = recv[0] if use_fp8 else recv
            assert values.shape == (EXPERTS_PER_RANK, n * max_tokens, hidden)
            for le, pairs in enumerate(want):
                got = values[le, :len(pairs)].double()
                assert src_info[le, :len(pairs)].tolist() == [t for _, t in pairs]
                begins = [sum(1 for p in pairs if p[0] < j) for j in range(n)]
                counts = [sum(1 for p in pairs if p[0] == j) for j in range(n)]
                assert layout[le].tolist() == [(b << 32) | c for b, c in zip(begins, counts)]
                source = torch.stack([_ll_tokens(j, hidden)[t] for j, t in pairs]).double() \
                    if pairs else torch.zeros((0, hidden), dtype=torch.float64)
                if not use_fp8:
                    assert torch.equal(got, source)
                    continue
                _check_fp8(recv, le, len(pairs), source, round_scale, ue8m0)
            # Combine: each expert returns its rows times (its global number + 1), in bfloat16.
            y = (values.double() if not use_fp8 else _cast_back(recv)).clone()
            for le in range(EXPERTS_PER_RANK):
                y[le] *= rank * EXPERTS_PER_RANK + le + 1
            y = y.to(torch.bfloat16)
            zero_copy = hooked and not use_fp8
            if zero_copy:
                buffer.get_next_low_latency_combine_buffer(handle)[:] = y
            out = torch.empty((TOKENS, hidden), dtype=torch.bfloat16)
            combined, _, chook = buffer.low_latency_combine(
                torch.zeros_like(y) if zero_copy else y, idx, w, handle, zero_copy=zero_copy,
                return_recv_hook=hooked, out=out)
            if hooked:
                chook()
            assert combined is out
            _check_combine(rank, combined, idx, w, use_fp8, hidden, round_scale)
    buffer.clean_low_latency_buffer(max_tokens, hidden, experts)
    assert deep_ep.Buffer.get_low_latency_rdma_size_hint(max_tokens, hidden, n, experts) > 0
    # DeepEP's runtime takes the wait stats as [num_ranks] int64 (its docstring says [n, n]).
    with pytest.raises((ValueError, shmoe.Error), match="dispatch_wait_recv_cost_stats"):
        buffer.low_latency_dispatch(x, idx, max_tokens, experts, use_fp8=False,
                                    dispatch_wait_recv_cost_stats=torch.zeros((n, n),
                                                                              dtype=torch.int64))
    stats = torch.zeros(n, dtype=torch.int64)
    buffer.low_latency_dispatch(x, idx, max_tokens, experts, use_fp8=False,
                                dispatch_wait_recv_cost_stats=stats)


def _cast_back(recv):
    """FP8 (values, scales) back to float64, DeepEP's per_token_cast_back with UE8M0 unpacking."""
    values, scales = recv
    if scales.dtype == torch.int32:
        exps = scales.contiguous().view(torch.uint8).to(torch.float64)
        scales = torch.pow(2.0, exps - 127)[..., : values.shape[-1] // 128]
    v = values.double().view(*values.shape[:-1], -1, 128)
    return (v * scales.double().unsqueeze(-1)).view(values.shape)


def _e4m3(v):
    """float64 values rounded to E4M3 (nearest, ties to even; 3 mantissa bits, steps of 2^-9
    below 2^-6), saturated at 448."""
    step = torch.pow(2.0, torch.floor(torch.log2(v.abs().clamp(min=2.0 ** -6))) - 3)
    return (torch.round(v / step) * step).clamp(-448, 448)


def _fp8_round_trip(x, round_scale):
    """DeepEP's per-token cast of bfloat16 rows x, computed independently: per 128 channels,
    amax (at least 1e-4) in float32, scale = amax * (1 / 448) in float32 (with round_scale the
    power of two at or above it) and factor 448 / amax (1 / scale), x * factor in float32 rounded
    to E4M3, times the scale. Returns (values times scale as float64, scales float64)."""
    blocks = x.float().view(x.shape[0], -1, 128)
    amax = blocks.abs().amax(dim=2).clamp(min=1e-4)
    scale = amax * torch.tensor(1.0 / 448.0, dtype=torch.float32)
    factor = torch.tensor(448.0, dtype=torch.float32) / amax
    if round_scale:
        scale = torch.pow(2.0, torch.ceil(torch.log2(scale.double()))).float()
        factor = 1.0 / scale
    codes = _e4m3((blocks * factor.unsqueeze(-1)).double())
    return (codes * scale.double().unsqueeze(-1)).view(x.shape), scale.double()


def _check_fp8(recv, le, rows, source, round_scale, ue8m0):
    """The received FP8 rows of local expert `le` are exactly the round trip of their sources."""
    want, scale = _fp8_round_trip(source.to(torch.bfloat16), round_scale)
    if ue8m0:
        assert recv[1].dtype == torch.int32 and recv[1].shape[-1] == -(-source.shape[1] // 512)
    else:
        assert torch.equal(recv[1][le, :rows].double(), scale)
    assert torch.equal(_cast_back(recv)[le, :rows], want)


def _expert_outputs(x, idx):
    """[tokens, top-k, hidden]: what expert idx[t, k] returns for row x[t] (x times the global
    expert number + 1, in bfloat16), float64."""
    return torch.stack([(x * (idx[:, k] + 1).double().unsqueeze(1)).to(torch.bfloat16).double()
                        for k in range(idx.shape[1])], dim=1)


def _check_combine(rank, combined, idx, w, use_fp8, hidden, round_scale):
    """combined[t] = sum over k of w[t, k] * (expert output of token t at slot k), in float32,
    rounded once to bfloat16: against float64 sums of the same bfloat16 expert outputs."""
    x = _ll_tokens(rank, hidden)
    seen = _fp8_round_trip(x, round_scale)[0] if use_fp8 else x.double()
    terms = torch.where((idx >= 0).unsqueeze(2), w.double().unsqueeze(2), torch.zeros(1)
                        .double()) * _expert_outputs(seen, idx)
    ref = terms.sum(dim=1)
    # One rounding to bfloat16 (half an ulp: 2^-8 relative) after a float32 sum of at most
    # TOPK terms (each addition within 2^-24 relative of the running sum's terms).
    bound = 2.0 ** -8 * ref.abs() + TOPK * 2.0 ** -24 * terms.abs().sum(dim=1)
    over = (combined.double() - ref).abs() - bound
    worst = int(over.argmax())
    assert bool((over <= 0).all()), (
        f"use_fp8={use_fp8}: combined[{worst // hidden}][{worst % hidden}]="
        f"{float(combined.view(-1)[worst])}, expected {float(ref.view(-1)[worst])}")


def _bad_input(rank, n, buffer):
    import shmoe

    experts = n * EXPERTS_PER_RANK
    idx, w = _routing(rank, n)
    per_rank, _, per_expert, in_rank, _ = buffer.get_dispatch_layout(idx, experts)
    x = _tokens(rank)
    cases = {
        "x": dict(x=x[:, :63].to(torch.uint8)),  # rows of an odd byte count on rank 1
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
    # Combine: a wrong x on rank 1; top-k weights on some ranks only.
    recv_x, _, recv_w, _, handle, _ = buffer.dispatch(
        x, num_tokens_per_rank=per_rank, is_token_in_rank=in_rank,
        num_tokens_per_expert=per_expert, topk_idx=idx, topk_weights=w)
    with pytest.raises((ValueError, shmoe.Error)) as err:
        buffer.combine(recv_x.float() if rank == 1 else recv_x, handle)
    assert "x (float32" in str(err.value) if rank == 1 else "PE 1" in str(err.value), \
        str(err.value)
    with pytest.raises(shmoe.Error, match="topk_weights given on some ranks"):
        buffer.combine(recv_x, handle, topk_weights=recv_w if rank == 0 else None)
    # Ranks that disagree on the top-k width (both fit the operators): every rank raises.
    args = dict(x=x, num_tokens_per_rank=per_rank, is_token_in_rank=in_rank,
                num_tokens_per_expert=per_expert, topk_idx=idx, topk_weights=w)
    if rank == 2:
        args.update(topk_idx=idx[:, :1].contiguous(), topk_weights=w[:, :1].contiguous())
    with pytest.raises(shmoe.Error, match="ranks disagree on num_topk"):
        buffer.dispatch(**args)
    # More tokens on rank 0 than the operators hold: every rank retries on larger ones.
    times = 3 if rank == 0 else 1
    big_idx, big_w = idx.repeat(times, 1), w.repeat(times, 1)
    per_rank, _, per_expert, in_rank, _ = buffer.get_dispatch_layout(big_idx, experts)
    recv_x, _, _, _, handle, _ = buffer.dispatch(
        x.repeat(times, 1), num_tokens_per_rank=per_rank, is_token_in_rank=in_rank,
        num_tokens_per_expert=per_expert, topk_idx=big_idx, topk_weights=big_w)
    want = []
    for src in range(n):
        s_idx, _ = _routing(src, n)
        for t in range(TOKENS * (3 if src == 0 else 1)):
            if any(int(e) >= 0 and int(e) // EXPERTS_PER_RANK == rank for e in s_idx[t % TOKENS]):
                want.append((src, t))
    assert [(int(r[0]), int(r[1])) for r in recv_x[:, :2].float()] == \
        [(src, t % TOKENS) for src, t in want]
    assert handle[3].tolist() == [t for _, t in want]
    combined, _, _ = buffer.combine(recv_x, handle)
    assert torch.equal(combined.float(), x.repeat(times, 1).float() * in_rank.sum(1, keepdim=True))
    with pytest.raises(shmoe.Error, match="num_experts"):
        buffer.get_dispatch_layout(idx, experts + 1)
    _normal_mode(rank, n, buffer)  # nothing was left half done


def _whole_job(rank, n):
    return dist.new_group(list(range(n)))


def _odd_and_even_ranks(rank, n):
    """Two sub-groups, the even ranks and the odd ones (every rank makes both)."""
    groups = [dist.new_group(list(range(parity, n, 2))) for parity in (0, 1)]
    return groups[rank % 2]


def _worker(rank, n, port, failures, scenario, make_group=_whole_job):
    try:
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", world_size=n,
                                rank=rank)
        import deep_ep

        group = make_group(rank, n)
        buffer = deep_ep.Buffer(group, int(64e6), 0, explicitly_destroy=True)
        scenario(dist.get_rank(group), dist.get_world_size(group), buffer)
        buffer.destroy()
        dist.barrier()
        dist.destroy_process_group()
    except BaseException:
        failures.put(f"rank {rank}: {traceback.format_exc()}")
        raise


def spawn_ranks(target, n, *args):
    """Runs target(rank, n, port, failures, *args) in n spawned processes; a rank that fails
    puts its traceback in `failures`, and the test fails with every rank's."""
    ctx = mp.get_context("spawn")
    failures = ctx.SimpleQueue()
    try:
        mp.spawn(target, args=(n, _free_port(), failures, *args), nprocs=n)
    except Exception:
        lines = []
        while not failures.empty():
            lines.append(failures.get())
        pytest.fail("\n".join(lines) or "a rank failed")


def _run(n, scenario, make_group=_whole_job):
    spawn_ranks(_worker, n, scenario, make_group)


@pytest.mark.parametrize("n", [2, 3, 4])
def test_normal_and_low_latency_modes(n):
    """One job per size runs both modes (a job costs seconds to start: torch in every rank)."""
    _run(n, _both_modes)


def _both_modes(rank, n, buffer):
    _normal_mode(rank, n, buffer)
    _low_latency(rank, n, buffer)


def test_buffers_on_sub_groups():
    """Four ranks, a Buffer on the even ones and one on the odd ones: each works on its group's
    ranks alone (the rows a rank receives come from its group only)."""
    _run(4, _both_modes, _odd_and_even_ranks)


def test_bad_input_raises_on_every_rank():
    _run(3, _bad_input)


def _rank_that_raises(rank, n, port, log_dir):
    """Rank n - 1 raises after the Buffer is made; the others go on into a dispatch."""
    with open(os.path.join(log_dir, f"rank{rank}.err"), "w") as err:
        os.dup2(err.fileno(), 2)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", world_size=n,
                            rank=rank)
    import deep_ep

    buffer = deep_ep.Buffer(dist.group.WORLD, int(64e6), 0)
    idx, _ = _routing(rank, n)
    if rank == n - 1:
        raise RuntimeError("this rank fails on purpose")
    buffer.low_latency_dispatch(_ll_tokens(rank, 128), idx, TOKENS, n * EXPERTS_PER_RANK,
                                use_fp8=False)


def test_a_rank_that_raises_stops_the_others(tmp_path, monkeypatch):
    """Processes started without torch's spawn (which would kill the others itself): the rank
    that raises leaves at once, and the others stop with a message naming it, long before the
    hang timeout."""
    n = 3
    ctx = mp.get_context("spawn")
    monkeypatch.setenv("SHMOE_HANG_TIMEOUT", "120")
    port = _free_port()
    procs = [ctx.Process(target=_rank_that_raises, args=(r, n, port, str(tmp_path)))
             for r in range(n)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=60)
    alive = [r for r, p in enumerate(procs) if p.is_alive()]
    for p in procs:
        if p.is_alive():
            p.kill()
    assert alive == [], f"ranks {alive} still run 60 s after rank {n - 1} raised"
    assert all(p.exitcode != 0 for p in procs), [p.exitcode for p in procs]
    for r in range(n - 1):
        text = (tmp_path / f"rank{r}.err").read_text()
        assert f"PE {n - 1}" in text and "disconnected" in text, text


def test_cpu_event_times():
    import deep_ep

    assert callable(torch.cpu.synchronize) and callable(torch.cpu.set_device)
    e0, e1 = torch.cpu.Event(enable_timing=True), torch.cpu.Event(enable_timing=True)
    e0.record()
    time.sleep(0.02)
    e1.record()
    e1.synchronize()
    assert 15 <= e0.elapsed_time(e1) < 2000
    assert e0.query()
    with pytest.raises(RuntimeError, match="enable_timing"):
        torch.cpu.Event().elapsed_time(e1)
    assert deep_ep.topk_idx_t == torch.int64


def test_every_import_spelling():
    """The spellings the frameworks use (torchtitan 0.2, Megatron-core's fused_a2a) and DeepEP's
    own, and the static helpers they call before any Buffer exists."""
    import deep_ep
    from deep_ep import Buffer, Config, EventHandle, EventOverlap, topk_idx_t  # noqa: F401
    from deep_ep.buffer import Buffer as BufferAgain
    from deep_ep.utils import EventHandle as Handle2, EventOverlap as Overlap2
    from deep_ep.utils import check_nvlink_connections

    assert BufferAgain is Buffer and Handle2 is EventHandle and Overlap2 is EventOverlap
    assert topk_idx_t == torch.int64 and deep_ep.Config is Config
    assert Buffer.is_sm90_compiled() is True  # normal mode's FP8 (x, scales)
    assert check_nvlink_connections(None) is None
    with EventOverlap(EventHandle()) as ev:
        ev.current_stream_wait()
    before = Buffer.num_sms
    try:
        Buffer.set_num_sms(24)
        assert Buffer.get_dispatch_config(2).num_sms == 24
        for bad_value in (0, 3, -2, 2.0, True):
            with pytest.raises(ValueError, match=f"new_num_sms={bad_value!r} must be a positive "
                                                 "even int"):
                Buffer.set_num_sms(bad_value)
    finally:
        Buffer.set_num_sms(before)
    # The size hints the frameworks size their Buffer with: bytes per token x ranks x tokens.
    config = Buffer.get_combine_config(4)
    assert config.get_nvl_buffer_size_hint(7168 * 2, 4) == 7168 * 2 * 4 * 256


def _second_buffer(rank, n, buffer):
    """torchtitan and Megatron-core make a new Buffer on the same group when their size hints
    grow, and drop the old one without destroy(): both must work, each on its own operators."""
    import deep_ep

    _normal_mode(rank, n, buffer)
    again = deep_ep.Buffer(buffer.group, int(128e6), int(1e6))
    _normal_mode(rank, n, again)
    _normal_mode(rank, n, buffer)
    # The local buffer tensor: one byte area per Buffer and kind, the same memory at every call.
    g = torch.Generator().manual_seed(rank)
    t = again.get_local_buffer_tensor(torch.float32, torch.Size([4, 8]), offset=64)
    values = torch.randn((4, 8), generator=g)
    t.copy_(values)
    whole = again.get_local_buffer_tensor(torch.uint8)
    assert whole.shape == (int(128e6),)
    assert torch.equal(whole[64:64 + 128].view(torch.float32).view(4, 8), values)
    rdma = again.get_local_buffer_tensor(torch.bfloat16, use_rdma_buffer=True)
    assert rdma.shape == (int(1e6) // 2,) and rdma.data_ptr() != whole.data_ptr()
    assert buffer.get_local_buffer_tensor(torch.int32, use_rdma_buffer=True).numel() == 0
    with pytest.raises(ValueError, match=r"offset=3 must be a multiple of 4 .* in 0\.\.128000000"):
        again.get_local_buffer_tensor(torch.float32, offset=3)
    with pytest.raises(ValueError, match=r"size=\[1000, 1000\] needs 1000000 elements of "
                                         r"torch.float32; the num_rdma_bytes=1000000 buffer "
                                         r"holds 250000"):
        again.get_local_buffer_tensor(torch.float32, (1000, 1000), use_rdma_buffer=True)
    with pytest.raises(ValueError, match="dtype='float32' must be a torch.dtype"):
        again.get_local_buffer_tensor("float32")


def test_a_second_buffer_on_the_same_group():
    _run(2, _second_buffer)
