"""deep_ep.ElasticBuffer's primitives beside dispatch and combine (PP, AGRS sessions, Engram) in
real torch.distributed jobs: processes started by torch.multiprocessing.spawn with a gloo group,
no shmoerun. Every tensor a rank receives is checked against an independent reference: the
sender's tensor regenerated from its seed on the receiving rank. Bad input to a collective call
must raise on every rank, naming the argument; bad input to a one-sided call raises on the rank
that made it."""

import random
import time

import pytest

torch = pytest.importorskip("torch")
import torch.distributed as dist  # noqa: E402

from test_deep_ep import spawn_ranks  # noqa: E402

DTYPES = (torch.bfloat16, torch.float32, torch.int64, torch.float8_e4m3fn, torch.uint8)


def _tensor(seed, shape, dtype):
    """The tensor of `seed`, the same wherever it is made (random bits for every dtype)."""
    g = torch.Generator().manual_seed(seed)
    nbytes = int(torch.Size(shape).numel()) * dtype.itemsize
    bits = torch.randint(0, 256, (nbytes,), dtype=torch.uint8, generator=g)
    if dtype == torch.float8_e4m3fn:
        bits[(bits & 0x7F) == 0x7F] = 0  # no NaN: compare FP8 by value too
    return bits.view(dtype).view(shape)


def _same_bits(a, b):
    return a.shape == b.shape and a.dtype == b.dtype and \
        torch.equal(a.contiguous().view(-1).view(torch.uint8),
                    b.contiguous().view(-1).view(torch.uint8))


def _buffer(group, num_bytes):
    from deep_ep.elastic import ElasticBuffer

    return ElasticBuffer(group, num_bytes=num_bytes, explicitly_destroy=True)


# ---- PP -------------------------------------------------------------------------------------------

MAX_PP_BYTES, INFLIGHT = 4096, 2


def _pp_messages(n, seed):
    """Every rank's sends, the same list on every rank: (src, dst, seed, shape, dtype), one to
    INFLIGHT to each neighbour (so no send waits), of random shapes and dtypes that fit
    MAX_PP_BYTES."""
    rng = random.Random(seed)
    out = []
    for src in range(n):
        for dst in sorted({(src + 1) % n, (src - 1) % n}):
            for k in range(rng.randint(1, INFLIGHT)):
                dtype = rng.choice(DTYPES)
                rows = rng.randint(1, MAX_PP_BYTES // (8 * dtype.itemsize))
                out.append((src, dst, seed * 1000 + src * 100 + dst * 10 + k, (rows, 8), dtype))
    rng.shuffle(out)  # the order of sends to different ranks does not matter
    return out


def _pp(rank, n, group):
    from deep_ep.elastic import ElasticBuffer

    buffer = _buffer(group, ElasticBuffer.get_pp_buffer_size_hint(MAX_PP_BYTES, INFLIGHT))
    with pytest.raises(RuntimeError, match="pp_set_config"):
        buffer.pp_send(torch.zeros(4), (rank + 1) % n)  # not configured yet
    buffer.pp_set_config(MAX_PP_BYTES, INFLIGHT)
    for seed in range(3):
        # Sends first, then the receives, each neighbour's in its send order.
        messages = _pp_messages(n, seed)
        for src, dst, s, shape, dtype in messages:
            if src == rank:
                buffer.pp_send(_tensor(s, shape, dtype), dst)
        for src, dst, s, shape, dtype in messages:
            if dst == rank:
                got = torch.empty(shape, dtype=dtype)
                buffer.pp_recv(got, src)
                assert _same_bits(got, _tensor(s, shape, dtype)), (rank, src, s)
    # A ring in both directions, many more tensors than slots: each slot is reused.
    for step in range(4 * INFLIGHT + 1):
        nxt, prv = (rank + 1) % n, (rank - 1) % n
        buffer.pp_send(_tensor(50_000 + step * 10 + rank, (32, 8), torch.bfloat16), nxt)
        buffer.pp_send(_tensor(60_000 + step * 10 + rank, (16, 8), torch.float32), prv)
        got = torch.empty((32, 8), dtype=torch.bfloat16)
        buffer.pp_recv(got, prv)
        assert _same_bits(got, _tensor(50_000 + step * 10 + prv, (32, 8), torch.bfloat16))
        got = torch.empty((16, 8), dtype=torch.float32)
        buffer.pp_recv(got, nxt)
        assert _same_bits(got, _tensor(60_000 + step * 10 + nxt, (16, 8), torch.float32))
    _pp_waits_for_a_free_slot(rank, n, buffer)
    _pp_refusals(rank, n, buffer)
    buffer.destroy()


def _pp_waits_for_a_free_slot(rank, n, buffer):
    """Rank 0 sends INFLIGHT + 2 tensors to rank 1, which starts receiving only after a pause:
    the sends beyond the slots wait for it, and every tensor arrives in order."""
    pause = 0.3
    tensors = [_tensor(77 + k, (16, 8), torch.float32) for k in range(INFLIGHT + 2)]
    dist.barrier()
    if rank == 0:
        start = time.monotonic()
        for t in tensors:
            buffer.pp_send(t, 1)
        assert time.monotonic() - start >= pause * 0.8, "a send did not wait for its slot"
    elif rank == 1:
        time.sleep(pause)
        for t in tensors:
            got = torch.empty_like(t)
            buffer.pp_recv(got, 0)
            assert torch.equal(got, t)
    dist.barrier()


def _pp_refusals(rank, n, buffer):
    """One-sided calls refuse on the calling rank; pp_set_config on every rank."""
    with pytest.raises(RuntimeError, match="dst_rank_idx=.* is not a ring neighbour"):
        buffer.pp_send(torch.zeros(4), rank)
    with pytest.raises(RuntimeError, match="num_max_tensor_bytes=4096"):
        buffer.pp_send(torch.zeros(MAX_PP_BYTES // 4 + 1), (rank + 1) % n)
    with pytest.raises(RuntimeError, match="contiguous"):
        buffer.pp_recv(torch.zeros(8, 8).t(), (rank + 1) % n)
    # Only rank 0 passes a bad value; every rank raises, naming it.
    with pytest.raises(RuntimeError, match="num_max_inflight_tensors=0"):
        buffer.pp_set_config(MAX_PP_BYTES, 0 if rank == 0 else INFLIGHT)
    with pytest.raises(RuntimeError, match="num_max_tensor_bytes"):
        buffer.pp_set_config(MAX_PP_BYTES + (rank == n - 1), INFLIGHT)
    buffer.pp_set_config(MAX_PP_BYTES, INFLIGHT)  # usable again
    t = _tensor(5, (4, 8), torch.bfloat16)
    buffer.pp_send(t, (rank + 1) % n)
    got = torch.empty_like(t)
    buffer.pp_recv(got, (rank - 1) % n)
    assert torch.equal(got.view(torch.int16), t.view(torch.int16))


# ---- AGRS -----------------------------------------------------------------------------------------

AGRS_CALLS = 4
AGRS_SHAPES = ((3, 5), (7,), (2, 3, 4))


def _agrs_tensors(session, call, rank, shapes, dtypes):
    return [_tensor(100_000 + session * 1000 + call * 100 + i * 10 + rank, shape, dtype)
            for i, (shape, dtype) in enumerate(zip(shapes, dtypes))]


def _agrs(rank, n, group):
    from deep_ep.elastic import ElasticBuffer

    per_call = [ElasticBuffer.get_agrs_num_max_session_bytes(group, AGRS_SHAPES, d) for d in DTYPES]
    session_bytes = ElasticBuffer.get_agrs_buffer_size_hint(group, AGRS_CALLS * max(per_call))
    assert session_bytes % (2 << 20) == 0
    buffer = _buffer(group, session_bytes)
    buffer.agrs_set_config(session_bytes, AGRS_CALLS)
    rng = random.Random(11)  # the same calls on every rank
    for session in range(4):
        with buffer.agrs_new_session():
            calls = []
            for call in range(rng.randint(1, AGRS_CALLS)):
                k = rng.randint(1, len(AGRS_SHAPES))
                shapes = AGRS_SHAPES[:k]
                inplace, single = rng.random() < 0.5, k == 1 and rng.random() < 0.5
                types = [rng.choice(DTYPES) for _ in shapes]
                if inplace:  # agrs_get_inplace_tensor takes one dtype
                    types = [types[0]] * k
                mine = _agrs_tensors(session, call, rank, shapes, types)
                if inplace:  # written where the gather reads it: no copy
                    places = buffer.agrs_get_inplace_tensor(shapes[0] if single else shapes,
                                                            types[0])
                    places = [places] if single else list(places)
                    for p, x in zip(places, mine):
                        p.copy_(x)
                    mine = places
                if single:
                    gathered, handle = buffer.all_gather(mine[0])
                    gathered = [gathered]
                else:
                    *gathered, handle = buffer.all_gather(mine)
                calls.append((call, shapes, types, gathered, handle))
            rng.shuffle(calls)  # handles waited for in any order
            for call, shapes, types, gathered, handle in calls:
                handle()
                want = [_agrs_tensors(session, call, r, shapes, types) for r in range(n)]
                for i, g in enumerate(gathered):
                    assert _same_bits(g, torch.stack([w[i] for w in want])), (session, call, i)
    _agrs_refusals(rank, n, buffer, session_bytes)
    buffer.destroy()


def _agrs_refusals(rank, n, buffer, session_bytes):
    with pytest.raises(RuntimeError, match="no session is open"):
        buffer.all_gather(torch.zeros(4))
    with buffer.agrs_new_session():
        with pytest.raises(RuntimeError, match="num_max_session_bytes"):
            buffer.all_gather(torch.zeros(session_bytes // n + 64, dtype=torch.uint8))
        for _ in range(AGRS_CALLS):
            buffer.all_gather(torch.zeros(4))[1]()
        with pytest.raises(RuntimeError, match=f"num_max_all_gathers_per_session={AGRS_CALLS}"):
            buffer.all_gather(torch.zeros(4))
        with pytest.raises(RuntimeError, match="a session is open"):
            buffer.create_agrs_session()
    with pytest.raises(RuntimeError, match="no session is open"):
        buffer.destroy_agrs_session()  # refused on every rank
    # Only the last rank passes a bad value; every rank raises, naming it.
    with pytest.raises(RuntimeError, match="num_max_all_gathers_per_session=33"):
        buffer.agrs_set_config(session_bytes, 33 if rank == n - 1 else AGRS_CALLS)
    with pytest.raises(RuntimeError, match="num_max_session_bytes"):
        buffer.agrs_set_config(session_bytes * 4, AGRS_CALLS)  # more than the buffer
    buffer.agrs_set_config(session_bytes, AGRS_CALLS)
    with buffer.agrs_new_session():
        gathered, handle = buffer.all_gather(torch.full((3,), float(rank)))
        handle()
        assert gathered.tolist() == [[float(r)] * 3 for r in range(n)]


# ---- Engram ---------------------------------------------------------------------------------------

ENTRIES, HIDDEN, TOKENS, PER_TOKEN, PACKS = 37, 48, 9, 3, 2


def _engram_storage(rank, fp8):
    dtype = torch.float8_e4m3fn if fp8 else torch.bfloat16
    return _tensor(200_000 + rank, (ENTRIES, HIDDEN), dtype)


def _engram(rank, n, group):
    from deep_ep.elastic import ElasticBuffer

    for fp8 in (False, True):
        dtype = torch.float8_e4m3fn if fp8 else torch.bfloat16
        recv_bytes, storage_bytes = ElasticBuffer.get_engram_storage_size_hint(
            ENTRIES, HIDDEN, TOKENS * PER_TOKEN, dtype)
        buffer = _buffer(group, recv_bytes + storage_bytes)
        sf = _tensor(300_000, (n * ENTRIES, PACKS), torch.float32) if fp8 else None
        if fp8:
            sf = torch.where(sf.isfinite(), sf, torch.zeros_like(sf))
        buffer.engram_write(_engram_storage(rank, fp8), sf=sf)
        table = torch.cat([_engram_storage(r, fp8) for r in range(n)])
        for round_ in range(3):
            g = torch.Generator().manual_seed(400 + round_ * 10 + rank)
            indices = torch.randint(0, n * ENTRIES, (TOKENS, PER_TOKEN), dtype=torch.int32,
                                    generator=g)
            for col_major in (False, True):
                data, got_sf = buffer.engram_fetch(indices,
                                                   use_tma_aligned_col_major_sf=col_major)()
                assert _same_bits(data, table[indices.view(-1).long()].view(TOKENS, -1))
                if not fp8:
                    assert got_sf is None
                    continue
                want = sf[indices.view(-1).long()].view(TOKENS, -1)
                assert torch.equal(got_sf, want)
                if col_major:
                    assert got_sf.stride() == (1, (TOKENS + 3) // 4 * 4)
        _engram_refusals(rank, n, buffer, fp8, sf)
        buffer.destroy()


def _engram_refusals(rank, n, buffer, fp8, sf):
    with pytest.raises(RuntimeError, match=r"indices\[0\]\[1\]=-1 is out of range"):
        buffer.engram_fetch(torch.tensor([[0, -1]], dtype=torch.int32))
    with pytest.raises(RuntimeError, match="indices .*int64"):
        buffer.engram_fetch(torch.zeros((1, 1), dtype=torch.int64))
    storage = _engram_storage(rank, fp8)
    # Only rank 0 passes a storage of another width; every rank raises, naming it.
    bad = storage[:, :HIDDEN - 16].contiguous() if rank == 0 else storage
    with pytest.raises(RuntimeError, match=r"storage.shape\[1\] \(hidden\)"):
        buffer.engram_write(bad, sf=sf)
    if fp8:
        with pytest.raises(RuntimeError, match="sf is missing"):
            buffer.engram_write(storage)
    else:
        with pytest.raises(RuntimeError, match="sf is given"):
            buffer.engram_write(storage, sf=torch.zeros((n * ENTRIES, 1)))
    # The storage written before is still fetched.
    data, _ = buffer.engram_fetch(torch.tensor([[n * ENTRIES - 1]], dtype=torch.int32))()
    assert _same_bits(data, _engram_storage(n - 1, fp8)[-1:])


# ---- The jobs -------------------------------------------------------------------------------------

def _worker(rank, n, port, failures):
    import traceback

    try:
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", world_size=n,
                                rank=rank)
        group = dist.group.WORLD
        _pp(rank, n, group)
        _agrs(rank, n, group)
        _engram(rank, n, group)
        dist.barrier()
        dist.destroy_process_group()
    except BaseException:
        failures.put(f"rank {rank}: {traceback.format_exc()}")
        raise


@pytest.mark.parametrize("n", [2, 3])
def test_pp_agrs_and_engram(n):
    """One job per size (a job costs seconds to start: torch in every rank), each buffer
    destroyed before the next is made, in the same shmoe job."""
    spawn_ranks(_worker, n)
