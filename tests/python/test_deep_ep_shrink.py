"""deep_ep's shrink mode (Buffer(enable_shrink=True)) in real torch.distributed jobs: some ranks
stop calling at their first low-latency dispatch, combine or clean (their processes live on,
as DeepEP's --shrink-test has them); the others must mask exactly those ranks and still get
exact results from the live ranks. A rank away for two rounds rejoins; a rank late to every call
is named by the others' wait stats. References are independent: every rank's inputs come from
its seed, with exact integer encodings (column 0: source rank, column 1: token), and expert
outputs and weights chosen so that every sum is exact in float32."""

import functools
import os
import time
import traceback

import pytest

torch = pytest.importorskip("torch")
import torch.distributed as dist  # noqa: E402

import shmoe  # noqa: E402
from test_deep_ep import _cast_back, _fp8_round_trip, spawn_ranks  # noqa: E402

TOKENS, HIDDEN, TOPK, LOCAL = 12, 128, 3, 2
TIMEOUT_MS = 2500
# The ranks that stop, by the call at which they stop (DeepEP's test: 1, 3 and 5 at 8 ranks).
FAILURES = {4: {"dispatch": 3, "combine": 2, "clean": 1}}
# Each round: (use_fp8, return_recv_hook and zero_copy). FP8 with round_scale: power-of-two
# scales keep the expert outputs, and so the sums, exact.
ROUNDS = [(False, False), (True, False), (False, True)]


def _inputs(rank, n, rnd):
    """Rank `rank`'s tokens, routing and weights in round `rnd` (the same wherever computed):
    small integers (exact in bfloat16 and, with power-of-two scales, in E4M3) and weights in
    eighths. Copies, made once per process: the checks ask for every rank's inputs often, and a
    rank slow in its checks would be masked by the others at their bound."""
    return tuple(t.clone() for t in _made_inputs(rank, n, rnd))


@functools.lru_cache(maxsize=None)
def _made_inputs(rank, n, rnd):
    g = torch.Generator().manual_seed(10007 * rnd + rank)
    x = torch.randint(-4, 5, (TOKENS, HIDDEN), generator=g).to(torch.bfloat16)
    x[:, 0] = rank
    x[:, 1] = torch.arange(TOKENS)
    idx = torch.stack([torch.randperm(n * LOCAL, generator=g)[:TOPK] for _ in range(TOKENS)])
    idx[torch.rand((TOKENS, TOPK), generator=g) < 0.2] = -1
    w = torch.randint(1, 16, (TOKENS, TOPK), generator=g).to(torch.float32) / 8
    return x, idx.to(torch.int64), w


def _seen(x, fp8):
    """What an expert receives of rows x: x itself, or its FP8 round trip (round_scale)."""
    return _fp8_round_trip(x, True)[0] if fp8 else x.double()


def _check_dispatch(rank, n, rnd, fp8, recv, count, handle, masked):
    """Each local expert's rows: those of the live ranks that chose it, in rank then token
    order, exactly."""
    values = _cast_back(recv) if fp8 else recv.double()
    src_info, layout = handle[0], handle[1]
    for le in range(LOCAL):
        expert = rank * LOCAL + le
        want = [(src, t) for src in range(n) if src not in masked
                for t in range(TOKENS) if expert in _inputs(src, n, rnd)[1][t].tolist()]
        assert int(count[le]) == len(want), (le, int(count[le]), len(want))
        assert src_info[le, :len(want)].tolist() == [t for _, t in want]
        per_src = [sum(1 for s, _ in want if s == j) for j in range(n)]
        begins = [sum(per_src[:j]) for j in range(n)]
        assert layout[le].tolist() == [(b << 32) | c for b, c in zip(begins, per_src)]
        if want:
            ref = torch.stack([_seen(_inputs(s, n, rnd)[0], fp8)[t] for s, t in want])
            assert torch.equal(values[le, :len(want)], ref)
    return values


def _expert_outputs(values, rank):
    """What the local experts return: their rows times (global expert number + 1), bfloat16."""
    y = values.clone()
    for le in range(LOCAL):
        y[le] *= rank * LOCAL + le + 1
    return y.to(torch.bfloat16)


def _check_combine(rank, n, rnd, fp8, combined, masked):
    """combined[t] = sum over the slots whose expert's rank is live of w * (expert output),
    exact in float64 and float32 by construction, rounded once to bfloat16."""
    x, idx, w = _inputs(rank, n, rnd)
    seen = _seen(x, fp8)
    ref = torch.zeros((TOKENS, HIDDEN), dtype=torch.float64)
    for t in range(TOKENS):
        for k in range(TOPK):
            e = int(idx[t, k])
            if e >= 0 and e // LOCAL not in masked:
                ref[t] += float(w[t, k]) * (seen[t] * (e + 1)).to(torch.bfloat16).double()
    assert torch.equal(combined, ref.float().to(torch.bfloat16))


def _mask(buffer, n):
    status = torch.full((n,), 7, dtype=torch.int32)
    buffer.low_latency_query_mask_buffer(status)
    return {r for r in range(n) if int(status[r])}


def _refusals(rank, n, group):
    """Without enable_shrink the mask methods refuse; with it, bad ranks are refused."""
    import deep_ep

    plain = deep_ep.Buffer(group, int(64e6), 0, low_latency_mode=True)
    for call in (lambda: plain.low_latency_update_mask_buffer(0, True),
                 lambda: plain.low_latency_query_mask_buffer(torch.zeros(n, dtype=torch.int32)),
                 plain.low_latency_clean_mask_buffer):
        with pytest.raises(RuntimeError, match="enable_shrink=True"):
            call()


def _shrink_job(rank, n, group, buffer):
    import deep_ep

    fails = FAILURES[n]
    stop = {r: call for call, r in fails.items()}.get(rank)
    experts = n * LOCAL
    expected = set()
    with pytest.raises((ValueError, shmoe.Error), match=f"rank_to_mask={n} is out of range"):
        buffer.low_latency_update_mask_buffer(n, True)
    with pytest.raises((ValueError, shmoe.Error), match="this rank"):
        buffer.low_latency_update_mask_buffer(rank, True)
    with pytest.raises((ValueError, shmoe.Error), match="mask_status"):
        buffer.low_latency_query_mask_buffer(torch.zeros(n, dtype=torch.int64))
    for rnd, (fp8, hooked) in enumerate(ROUNDS):
        x, idx, w = _inputs(rank, n, rnd)
        expected.add(fails.get("dispatch", -1))
        if stop == "dispatch":
            # It fails with arguments of its own that are wrong: it alone raises, and stops.
            with pytest.raises((ValueError, shmoe.Error), match="x"):
                buffer.low_latency_dispatch(x.float(), idx, TOKENS, experts, use_fp8=fp8)
            return
        recv, count, handle, _, hook = buffer.low_latency_dispatch(
            x, idx, TOKENS, experts, use_fp8=fp8, round_scale=fp8, return_recv_hook=hooked)
        if hooked:
            hook()
        masked = _mask(buffer, n)
        assert masked == expected - {-1}, (rnd, "dispatch", masked)
        values = _check_dispatch(rank, n, rnd, fp8, recv, count, handle, masked)
        expected.add(fails.get("combine", -1))
        if stop == "combine":
            return
        y = _expert_outputs(values, rank)
        if hooked:
            buffer.get_next_low_latency_combine_buffer(handle)[:] = y
        combined, _, chook = buffer.low_latency_combine(
            torch.zeros_like(y) if hooked else y, idx, w, handle, zero_copy=hooked,
            return_recv_hook=hooked)
        if hooked:
            chook()
        masked = _mask(buffer, n)
        assert masked == expected - {-1}, (rnd, "combine", masked)
        _check_combine(rank, n, rnd, fp8, combined, masked)
        expected.add(fails.get("clean", -1))
        if stop == "clean":
            return
        buffer.clean_low_latency_buffer(TOKENS, HIDDEN, experts)
        assert _mask(buffer, n) == expected - {-1}, (rnd, "clean")
    # Unmasked by hand, the failed ranks would be waited for again; masked again by hand, the
    # next call goes on at once without them.
    buffer.low_latency_clean_mask_buffer()
    assert _mask(buffer, n) == set()
    for r in sorted(expected - {-1}):
        buffer.low_latency_update_mask_buffer(r, mask=True)
    assert _mask(buffer, n) == expected - {-1}
    buffer.clean_low_latency_buffer(TOKENS, HIDDEN, experts)
    assert _mask(buffer, n) == expected - {-1}


def _job(rank, n, port, failures, body, nvl_bytes=0):
    """One rank of a shrink-mode job: a torch.distributed gloo job, a shrink-mode Buffer (with
    nvl_bytes for normal mode), then body(rank, n, group, buffer); a failure goes to `failures`
    with its traceback."""
    try:
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", world_size=n,
                                rank=rank)
        import deep_ep

        group = dist.new_group(list(range(n)))
        hint = deep_ep.Buffer.get_low_latency_rdma_size_hint(TOKENS, HIDDEN, n, n * LOCAL)
        buffer = deep_ep.Buffer(group, nvl_bytes, hint, low_latency_mode=True,
                                explicitly_destroy=True, enable_shrink=True)
        body(rank, n, group, buffer)
        # A failed rank gets here while the others still run: destroy() must not wait for them.
        buffer.destroy()
        dist.barrier()
        dist.destroy_process_group()
    except BaseException:
        failures.put(f"rank {rank}: {traceback.format_exc()}")
        raise


def _spawn(body, n, nvl_bytes=0):
    """Runs _job(..., body, nvl_bytes) in n spawned processes."""
    spawn_ranks(_job, n, body, nvl_bytes)


def _stop_calling(rank, n, group, buffer):
    """The refusals, then ranks that stop calling at their first dispatch, combine or clean."""
    _refusals(rank, n, group)
    _shrink_job(rank, n, group, buffer)


# 4 ranks, three of which fail (one at each call); DeepEP's own --shrink-test runs 8 in
# scripts/deepep-tests.sh.
def test_failed_ranks_are_masked(monkeypatch):
    monkeypatch.setenv("SHMOE_SHRINK_TIMEOUT_MS", str(TIMEOUT_MS))
    _spawn(_stop_calling, 4)


AWAY = 2  # the rank that is away for two rounds and comes back


def _round(rank, n, buffer, rnd, masked):
    """One BF16 dispatch and combine, checked exactly; the mask must be `masked` after each.
    Returns when the dispatch returned (time.time())."""
    x, idx, w = _inputs(rank, n, rnd)
    recv, count, handle, _, _ = buffer.low_latency_dispatch(x, idx, TOKENS, n * LOCAL,
                                                            use_fp8=False)
    dispatched = time.time()
    assert _mask(buffer, n) == masked, (rnd, "dispatch")
    values = _check_dispatch(rank, n, rnd, False, recv, count, handle, masked)
    combined, _, _ = buffer.low_latency_combine(_expert_outputs(values, rank), idx, w, handle)
    assert _mask(buffer, n) == masked, (rnd, "combine")
    _check_combine(rank, n, rnd, False, combined, masked)
    return dispatched


def _away_and_back(rank, n, group, buffer):
    """Rank AWAY misses rounds 1 and 2 (waiting for rank 0's word, as a stopped rank would be
    resumed), the others mask it; then the others unmask it, it clears its own mask, and the
    next clean_low_latency_buffer of each is a rejoin: round 3 is exact with every rank live."""
    _round(rank, n, buffer, 0, set())
    word = torch.zeros(1)
    if rank == AWAY:
        dist.recv(word, src=0)
        buffer.low_latency_clean_mask_buffer()
    else:
        _round(rank, n, buffer, 1, {AWAY})
        _round(rank, n, buffer, 2, {AWAY})
        if rank == 0:
            dist.send(word, dst=AWAY)
        buffer.low_latency_update_mask_buffer(AWAY, mask=False)
    buffer.clean_low_latency_buffer(TOKENS, HIDDEN, n * LOCAL)
    assert _mask(buffer, n) == set()
    _round(rank, n, buffer, 3, set())


def test_a_rank_that_was_away_rejoins(monkeypatch):
    monkeypatch.setenv("SHMOE_SHRINK_TIMEOUT_MS", str(TIMEOUT_MS))
    _spawn(_away_and_back, 4)


LATE, LATE_S = 3, 0.3  # the rank that comes late to every call, and by how much


def _late_to_every_call(rank, n, group, buffer):
    """Rank LATE sleeps before each low-latency call; every other rank's wait stats must blame
    it: most of the wait, and at least most of its delay per call."""
    calls = 3
    waits = {k: torch.zeros(n, dtype=torch.int64) for k in ("dispatch", "combine")}
    for rnd in range(calls):
        x, idx, w = _inputs(rank, n, rnd)
        if rank == LATE:
            time.sleep(LATE_S)
        recv, count, handle, _, _ = buffer.low_latency_dispatch(
            x, idx, TOKENS, n * LOCAL, use_fp8=False,
            dispatch_wait_recv_cost_stats=waits["dispatch"])
        values = _check_dispatch(rank, n, rnd, False, recv, count, handle, set())
        if rank == LATE:
            time.sleep(LATE_S)
        combined, _, _ = buffer.low_latency_combine(
            _expert_outputs(values, rank), idx, w, handle,
            combine_wait_recv_cost_stats=waits["combine"])
        _check_combine(rank, n, rnd, False, combined, set())
    assert _mask(buffer, n) == set()
    if rank != LATE:
        for kind, ns in waits.items():
            assert int(ns.argmax()) == LATE, (kind, ns.tolist())
            assert int(ns[LATE]) >= calls * LATE_S * 0.5e9, (kind, ns.tolist())


def test_the_late_rank_shows_in_the_wait_stats(monkeypatch):
    monkeypatch.setenv("SHMOE_SHRINK_TIMEOUT_MS", str(TIMEOUT_MS))
    _spawn(_late_to_every_call, 4)


STOPPED = 1  # the rank that stops calling after its normal-mode calls


def _normal_mode_then_a_rank_stops(rank, n, group, buffer):
    """Every rank runs a normal-mode dispatch (recv_x in a receive block, held) and combine;
    then rank STOPPED stops calling until rank 0 has destroyed its Buffer. The others' destroy()
    must return without it (a collective there, such as the plan teardown's max-reduce over
    held blocks, would wait for it until SHMOE_HANG_TIMEOUT)."""
    g = torch.Generator().manual_seed(int.from_bytes(os.urandom(4), "little") + rank)
    x = torch.randn((TOKENS, HIDDEN), generator=g).to(torch.bfloat16)
    idx = torch.stack([torch.randperm(n * LOCAL, generator=g)[:TOPK] for _ in range(TOKENS)])
    w = torch.rand((TOKENS, TOPK), generator=g)
    per_rank, _, per_expert, in_rank, _ = buffer.get_dispatch_layout(idx, n * LOCAL)
    recv_x, _, _, _, handle, _ = buffer.dispatch(
        x, num_tokens_per_rank=per_rank, is_token_in_rank=in_rank,
        num_tokens_per_expert=per_expert, topk_idx=idx, topk_weights=w)
    combined, _, _ = buffer.combine(recv_x, handle)
    assert torch.equal(combined.float(), x.float() * in_rank.sum(1, keepdim=True))
    assert buffer._normal.runtime.result_counts()[0] == 1  # recv_x is in a block, held below
    word = torch.zeros(1)
    if rank == STOPPED:
        dist.recv(word, src=0)
    else:
        began = time.monotonic()
        buffer.destroy()
        assert time.monotonic() - began < TIMEOUT_MS / 1000, "destroy() waited for a rank"
        if rank == 0:
            dist.send(word, dst=STOPPED)
    del recv_x


def test_destroy_after_normal_mode_does_not_wait_for_a_stopped_rank(monkeypatch):
    monkeypatch.setenv("SHMOE_SHRINK_TIMEOUT_MS", str(TIMEOUT_MS))
    _spawn(_normal_mode_then_a_rank_stops, 2, int(64e6))


@pytest.mark.parametrize("value", ["soon", "0", "-5", "2147483648"])
def test_bad_timeout_is_refused(value, monkeypatch):
    from deep_ep import shrink

    monkeypatch.setenv("SHMOE_SHRINK_TIMEOUT_MS", value)
    with pytest.raises((ValueError, shmoe.Error), match=f"SHMOE_SHRINK_TIMEOUT_MS='{value}' must be an int"):
        shrink.timeout_ms("deep_ep.Buffer")
    monkeypatch.delenv("SHMOE_SHRINK_TIMEOUT_MS")
    assert shrink.timeout_ms("deep_ep.Buffer") == shrink.DEFAULT_TIMEOUT_MS
