"""The package with CPU torch tensors: symmetric tensors (bfloat16 too), every kind of call
taking tensors zero-copy, and the MoE buffer and MegaMoE checked against plain PyTorch
references."""

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed (pip install torch)")

import shmoe  # noqa: E402
import shmoe.torch as st  # noqa: E402
from shmoe import moe  # noqa: E402
from reference import mega_expert, mx_round  # noqa: E402

DTYPES = [torch.float32, torch.bfloat16, torch.float16, torch.float64, torch.int64, torch.int32,
          torch.int16, torch.uint8, torch.bool, torch.complex64]


def encoded(pe, shape, dtype):
    """pe * 32 + index (exact in every dtype here, bfloat16 included); parity for bool."""
    i = torch.arange(int(np.prod(shape))).reshape(shape)
    if dtype == torch.bool:
        return (i + pe) % 2 == 1
    return (pe * 32 + i).to(dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_symmetric_tensor_ring(dtype):
    me, n = shmoe.my_pe(), shmoe.n_pes()
    right, left = (me + 1) % n, (me - 1) % n
    t = st.zeros((4, 6), dtype)
    assert isinstance(t, torch.Tensor) and t.dtype == dtype and t.shape == (4, 6)
    assert bool((t == 0).all()) and shmoe.is_symmetric(t)
    shmoe.barrier_all()  # every PE has seen its zeros before any puts
    shmoe.put(t, encoded(me, (4, 6), dtype), right)
    shmoe.barrier_all()
    assert torch.equal(t, encoded(left, (4, 6), dtype))
    got = torch.zeros((4, 6), dtype=dtype)
    shmoe.get(got, t, right)
    assert torch.equal(got, encoded(me, (4, 6), dtype))
    view = shmoe.peer_array(t, right)
    assert isinstance(view, torch.Tensor) and view.dtype == dtype
    assert torch.equal(view, encoded(me, (4, 6), dtype))
    shmoe.barrier_all()
    shmoe.free(t)


def test_atomics_and_collectives_on_tensors():
    me, n = shmoe.my_pe(), shmoe.n_pes()
    counter = st.zeros(2, torch.int64)
    shmoe.atomic_fetch_add(counter, 1, me + 1, 0)
    src = st.empty(8, torch.float32)
    dest = st.empty(8, torch.float32)
    src.copy_(encoded(me, (8,), torch.float32))
    shmoe.sum_reduce(None, dest, src)
    assert torch.equal(dest, sum(encoded(pe, (8,), torch.float32) for pe in range(n)))
    gathered = st.zeros((n, 3), torch.bfloat16)
    mine = st.zeros(3, torch.bfloat16)
    mine.copy_(encoded(me, (3,), torch.bfloat16))
    shmoe.fcollect(shmoe.team_world(), gathered, mine)
    for pe in range(n):
        assert torch.equal(gathered[pe], encoded(pe, (3,), torch.bfloat16))
    shmoe.broadcast(None, mine, mine, n - 1)
    assert torch.equal(mine, encoded(n - 1, (3,), torch.bfloat16))
    shmoe.barrier_all()
    if me == 0:
        assert counter[1].item() == n * (n + 1) // 2
    # numpy and tensors mix: a numpy source into a symmetric tensor.
    shmoe.put(src, np.full(8, 2.5, np.float32), me)
    assert torch.equal(src, torch.full((8,), 2.5))
    shmoe.barrier_all()
    for t in (mine, gathered, dest, src, counter):
        shmoe.free(t)


def test_tensor_refusals():
    t = st.zeros((4, 4), torch.float32)
    with pytest.raises(ValueError, match=r"shmoe.put: src must be contiguous"):
        shmoe.put(t[:2], torch.zeros(4, 4).t()[:, :2], 0)
    with pytest.raises(ValueError, match=r"shmoe.put: dest must be contiguous"):
        shmoe.put(t[:, :2], torch.zeros(4, 2), 0)
    with pytest.raises(TypeError, match=r"shmoe.atomic_add: a has dtype float32, which has no "
                                        r"atomic add"):
        shmoe.atomic_add(t, 0, 1, 0)
    with pytest.raises(ValueError, match=r"shmoe.put: dest .* is not symmetric"):
        shmoe.put(torch.zeros(4, 4), torch.zeros(4, 4), 0)
    with pytest.raises(TypeError, match=r"shmoe.torch.zeros: dtype must be a torch.dtype, not "
                                        r"'float32'"):
        st.zeros(3, "float32")
    with pytest.raises(TypeError, match=r"shmoe.zeros: dtype torch.float32 is a torch dtype: use "
                                        r"shmoe.torch.zeros"):
        shmoe.zeros(3, torch.float32)
    with pytest.raises(TypeError, match=r"shmoe.put: src must be a numpy.ndarray or a CPU "
                                        r"torch.Tensor, not list"):
        shmoe.put(t, [1.0] * 16, 0)
    shmoe.free(t)


def torch_moe_reference(x, idx, w, factor):
    """A plain PyTorch MoE layer with the stand-in experts y_e(x) = bf16(x * factor(e)): each
    token's expert outputs weighted and summed in fp32 in increasing k, rounded to bf16; and in
    fp64 with the sum of |terms|."""
    acc = torch.zeros(x.shape, dtype=torch.float32)
    exact = torch.zeros(x.shape, dtype=torch.float64)
    magnitude = torch.zeros(x.shape, dtype=torch.float64)
    for k in range(idx.shape[1]):
        e = idx[:, k]
        f = torch.tensor([factor(int(v)) for v in e], dtype=torch.float32)[:, None]
        y = (x.float() * f).to(torch.bfloat16)
        routed = (e >= 0)[:, None]
        term = y.float() * w[:, k : k + 1]
        acc = torch.where(routed, acc + term, acc)
        term64 = y.double() * w[:, k : k + 1].double()
        exact += torch.where(routed, term64, torch.zeros_like(term64))
        magnitude += torch.where(routed, term64.abs(), torch.zeros_like(term64))
    return acc.to(torch.bfloat16), exact, magnitude


def factor(e):
    return 0.5 + 0.25 * (e % 7)


@pytest.mark.parametrize("fp8", [None, "e4m3"])
def test_moe_buffer_with_tensors(fp8):
    me, n = shmoe.my_pe(), shmoe.n_pes()
    tokens, hidden, topk, L = 16, 64, 2, 2
    E = n * L
    gen = torch.Generator().manual_seed(100 + me)
    x = (torch.rand(tokens, hidden, generator=gen) * 4 - 2).to(torch.bfloat16)
    idx = torch.stack([torch.randperm(E, generator=gen)[:topk] for _ in range(tokens)])
    idx[3, 1] = -1
    w = torch.rand(tokens, topk, generator=gen)
    buf = moe.MoeBuffer(tokens, hidden, E, topk, torch.bfloat16, fp8=fp8)
    per_pe, in_pe, per_expert = buf.get_dispatch_layout(idx, E)
    assert all(isinstance(v, torch.Tensor) for v in (per_pe, in_pe, per_expert))
    assert torch.equal(per_expert, torch.bincount(idx[idx >= 0], minlength=E).to(torch.int32))
    recv_x, recv_idx, recv_w, counts, handle = buf.dispatch(x, idx, w)
    assert isinstance(recv_idx, torch.Tensor) and recv_idx.dtype == torch.int64
    assert isinstance(recv_w, torch.Tensor) and recv_w.dtype == torch.float32
    assert sum(counts) == recv_idx.shape[0]
    if fp8:
        codes, scales = recv_x
        assert codes.dtype == torch.uint8 and scales.dtype == torch.uint8
        rows = moe.dequantize_mx(codes, scales, fp8)
        assert isinstance(rows, torch.Tensor) and rows.dtype == torch.float32
        expected = torch.from_numpy(mx_round(x.float().numpy(), fp8).astype(np.float32))
    else:
        assert recv_x.dtype == torch.bfloat16
        rows = recv_x.float()
        expected = x.float()
    # The experts, as PyTorch computes them on the rows received.
    f = torch.tensor([factor(me * L + int(le)) for le in recv_idx], dtype=torch.float32)[:, None]
    y = (rows * f).to(torch.bfloat16)
    out = buf.combine(y, handle, w)
    assert isinstance(out, torch.Tensor) and out.dtype == torch.bfloat16
    ref, exact, magnitude = torch_moe_reference(expected.to(torch.bfloat16), idx, w, factor)
    assert torch.equal(out.view(torch.int16), ref.view(torch.int16))
    tol = 2.0**-8 * magnitude + 3 * 2.0**-24 * magnitude + 1e-38
    err = (out.double() - exact).abs()
    assert bool((err <= tol).all())
    print(f"\nPE {me}: torch bfloat16{' fp8 ' + fp8 if fp8 else ''} combine = PyTorch fp32 "
          f"reference bit for bit; fp64 max |err|/tol = {float((err / tol).max()):.3f} "
          "(tol: 2^-8*sum|terms| + 3*2^-24*sum|terms|)", end="")
    buf.close()


def test_mega_with_tensors():
    me, n = shmoe.my_pe(), shmoe.n_pes()
    tokens, D, F, topk, L, mode = 12, 64, 128, 2, 2, "e4m3"
    E = n * L
    experts = [mega_expert(5, e, D, F) for e in range(E)]
    w1 = torch.from_numpy(np.stack([experts[me * L + le][0] for le in range(L)]))
    w2 = torch.from_numpy(np.stack([experts[me * L + le][1] for le in range(L)]))
    gen = torch.Generator().manual_seed(7 + me)
    x = torch.randn(tokens, D, generator=gen).to(torch.bfloat16)
    idx = torch.stack([torch.randperm(E, generator=gen)[:topk] for _ in range(tokens)])
    w = torch.rand(tokens, topk, generator=gen)
    layer = moe.MegaMoE(tokens, D, F, E, topk, mode)
    layer.load_weights(w1, w2)
    y = layer(x, idx, w)
    assert isinstance(y, torch.Tensor) and y.dtype == torch.bfloat16 and y.shape == (tokens, D)
    # The same layer on numpy inputs gives the same bits.
    y_np = layer(x.view(torch.int16).numpy().view(np.uint16), idx.numpy(), w.numpy())
    assert np.array_equal(y.view(torch.int16).numpy().view(np.uint16), y_np)
    # A plain PyTorch layer in fp64 with the dequantized weights (the tool's numeric_golden).
    ref = torch.zeros(tokens, D, dtype=torch.float64)
    for t in range(tokens):
        for k in range(topk):
            e = int(idx[t, k])
            a = torch.from_numpy(mx_round(experts[e][0], mode))
            b = torch.from_numpy(mx_round(experts[e][1], mode))
            h = a @ x[t].double()
            act = torch.nn.functional.silu(h[: F // 2]) * h[F // 2 :]
            ref[t] += float(w[t, k]) * (b @ act)
    rms = ref.pow(2).mean(dim=1, keepdim=True).sqrt()
    allowed = 0.05 * ref.abs() + 12 * 2.0**-4 * rms
    worst = float(((y.double() - ref).abs() / allowed).max())
    assert worst <= 1.0
    print(f"\nPE {me}: torch MegaMoE vs PyTorch fp64 layer: worst err/allowed={worst:.3f} "
          "(allowed: 0.05*|ref| + 0.75*row_rms)", end="")
    layer.close()
