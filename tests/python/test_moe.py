"""shmoe.MoeBuffer on real PEs: every PE regenerates every PE's tokens and routing, and checks
its dispatch outputs exactly against the rows it must receive, and its combine output bit for
bit against a replay of the operator's fp32 arithmetic and against an fp64 reference with the
C++ tool's tolerance (printed). int32 cases are exact integers throughout."""

import numpy as np
import pytest

import shmoe
from shmoe import moe
from reference import (
    STORAGE, combine_fp64, combine_replay, combine_tolerance, expert_step, golden_dispatch, load,
    mx_dequantize, mx_quantize, bits_to_float, moe_inputs, store,
)

SEED = 20240611


def same_bits(a, b):
    a, b = np.ascontiguousarray(a), np.ascontiguousarray(b)
    return (a.shape == b.shape and a.dtype == b.dtype
            and a.view(np.uint8).tobytes() == b.view(np.uint8).tobytes())


def tokens_of(pe, n, tokens, it):
    """The last PE passes fewer tokens on odd iterations (none at all where it is not PE 0)."""
    if it % 2 == 1 and pe == n - 1:
        return 0 if pe > 0 else tokens // 3
    return tokens


def expert_outputs(dtype, me, L, recv_x, recv_idx):
    y = np.empty_like(recv_x)
    for r in range(recv_x.shape[0]):
        y[r] = expert_step(dtype, me * L + int(recv_idx[r]), recv_x[r])
    return y


def check_combine(dtype, out, x_rows_of_slot, idx, w, label):
    """Bitwise against the fp32 replay; within tolerance of fp64 (printed); exact integers for
    int32."""
    me = shmoe.my_pe()
    expected = combine_replay(dtype, x_rows_of_slot, idx, w)
    assert same_bits(out, expected), f"{label}: combine differs from the fp32 replay"
    value, magnitude = combine_fp64(dtype, x_rows_of_slot, idx, w)
    tol = combine_tolerance(dtype, idx.shape[1], magnitude)
    err = np.abs(load(dtype, out).astype(np.float64) - value)
    assert np.all(err <= tol), f"{label}: |err| {err.max()} above tolerance"
    worst = float(np.max(err / tol)) if err.size else 0.0
    if dtype == "int32":
        exact = np.rint(value).astype(np.int64)
        assert np.array_equal(out.astype(np.int64), exact), f"{label}: int32 combine not exact"
    print(f"\nPE {me}: {label}: combine bitwise = fp32 replay; fp64 reference max |err|/tol = "
          f"{worst:.3f} (tol: {TOLERANCE_TEXT[dtype]})", end="")


TOLERANCE_TEXT = {
    "int32": "0.5 + (topk+1)*2^-24*sum|terms|; exact integers checked too",
    "float32": "(topk+1)*2^-24*sum|terms|",
    "bfloat16": "2^-8*sum|terms| + (topk+1)*2^-24*sum|terms|",
    "float16": "2^-11*sum|terms| + (topk+1)*2^-24*sum|terms| + 2^-24",
}


def run_case(dtype, *, tokens=24, hidden=72, topk=2, L=2, drop=0.1, double_plane=False,
             threshold=None, iterations=2, zero_copy=False):
    me, n = shmoe.my_pe(), shmoe.n_pes()
    E = n * L
    label = (f"{dtype}{' double-plane' if double_plane else ''}{' zero-copy' if zero_copy else ''} "
             f"tokens={tokens} hidden={hidden} topk={topk} L={L}")
    # Not in a with block: a failed check must not lead into the collective close (run_pytest.py
    # ends the PE at once instead).
    buf = moe.MoeBuffer(tokens, hidden, E, topk, dtype, double_plane=double_plane,
                     double_plane_threshold=threshold)
    assert buf.num_local_experts == L and buf.recv_capacity == n * tokens * topk
    for it in range(iterations):
        inputs = [moe_inputs(SEED + it, pe, tokens_of(pe, n, tokens, it), hidden, topk, E,
                             dtype, drop) for pe in range(n)]
        x, idx, w = inputs[me]

        per_pe, in_pe, per_expert = buf.get_dispatch_layout(idx, E)
        np.testing.assert_array_equal(per_expert, [(idx == e).sum() for e in range(E)])
        owner = np.where(idx >= 0, idx // L, -1)
        expected_in_pe = np.array([[(owner[t] == p).any() for p in range(n)]
                                   for t in range(idx.shape[0])], dtype=bool).reshape(-1, n)
        np.testing.assert_array_equal(in_pe, expected_in_pe)
        np.testing.assert_array_equal(per_pe, in_pe.sum(axis=0))

        recv_x, recv_idx, recv_w, counts, handle = buf.dispatch(x, idx, w, zero_copy=zero_copy)
        rows, local, weights, _ = golden_dispatch(inputs, me, L)
        golden_x = np.array(rows, dtype=STORAGE[dtype]).reshape(len(rows), hidden)
        assert same_bits(recv_x, golden_x), f"{label}: dispatch rows differ"
        np.testing.assert_array_equal(recv_idx, local)
        assert same_bits(recv_w, weights)
        assert counts == [int((local == le).sum()) for le in range(L)]

        y = expert_outputs(dtype, me, L, recv_x, recv_idx)
        if zero_copy:  # the experts write over the received rows, and combine reads them there
            recv_x[:] = y
            y = recv_x
        out = buf.combine(y, handle, w)
        ys = np.stack([np.stack([expert_step(dtype, int(idx[t, k]), x[t])
                                 for k in range(topk)]) for t in range(idx.shape[0])]) \
            if idx.shape[0] else np.zeros((0, topk, hidden), STORAGE[dtype])
        check_combine(dtype, out, ys, idx, w, label)
        # Without weights, combine takes the dispatch's.
        assert same_bits(buf.combine(y, handle), out)
    buf.close()


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16", "int32"])
def test_dispatch_combine(dtype):
    run_case(dtype)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_double_plane(dtype):
    run_case(dtype, tokens=64, hidden=256, topk=2, L=2, double_plane=True, threshold=4096)


@pytest.mark.parametrize("double_plane", [False, True])
def test_zero_copy(double_plane):
    n = shmoe.n_pes()
    run_case("bfloat16", tokens=32, hidden=96, topk=min(3, 2 * n), L=2, double_plane=double_plane,
             threshold=4096, zero_copy=True, iterations=3)
    run_case("float32", tokens=7, hidden=33, topk=min(2, n), L=1, drop=0.5, zero_copy=True)


def test_wide_topk_all_dropped_and_one_expert():
    n = shmoe.n_pes()
    run_case("float32", tokens=9, hidden=33, topk=min(4, n * 3), L=3, drop=0.3)
    run_case("bfloat16", tokens=5, hidden=16, topk=1, L=1, drop=1.0)  # every slot -1


@pytest.mark.parametrize("fmt", ["e4m3", "e5m2"])
def test_fp8_dispatch(fmt):
    me, n = shmoe.my_pe(), shmoe.n_pes()
    tokens, hidden, topk, L = 20, 80, 2, 2  # 80: a last block of 16 elements
    E = n * L
    buf = moe.MoeBuffer(tokens, hidden, E, topk, "bfloat16", fp8=fmt)
    inputs = [moe_inputs(SEED, pe, tokens, hidden, topk, E, "bfloat16", 0.1) for pe in range(n)]
    x, idx, w = inputs[me]
    (codes, scales), recv_idx, recv_w, counts, handle = buf.dispatch(x, idx, w)
    rows, local, weights, _ = golden_dispatch(inputs, me, L)
    golden = bits_to_float(np.array(rows, np.uint16).reshape(len(rows), hidden))
    want_codes, want_scales = mx_quantize(golden, fmt)
    assert codes.shape == (len(rows), hidden) and scales.shape == (len(rows), 3)
    np.testing.assert_array_equal(codes, want_codes)
    np.testing.assert_array_equal(scales, want_scales)
    np.testing.assert_array_equal(recv_idx, local)
    assert same_bits(recv_w, weights)
    # shmoe's own MX helpers agree with the reference.
    c2, s2 = moe.quantize_mx(golden, fmt)
    np.testing.assert_array_equal(c2, want_codes)
    np.testing.assert_array_equal(s2, want_scales)
    dq = moe.dequantize_mx(codes, scales, fmt)
    np.testing.assert_array_equal(
        dq, mx_dequantize(want_codes, want_scales, fmt).astype(np.float32))
    # The experts work on the dequantized rows; combine returns bfloat16.
    y = np.stack([store("bfloat16", dq[r] * np.float32(0.5 + 0.25 * ((me * L + recv_idx[r]) % 7)))
                  for r in range(len(rows))]) if rows else np.zeros((0, hidden), np.uint16)
    out = buf.combine(y, handle, w)
    tq_codes, tq_scales = mx_quantize(bits_to_float(x), fmt)
    tq = mx_dequantize(tq_codes, tq_scales, fmt).astype(np.float32)
    ys = np.stack([np.stack([store("bfloat16", tq[t] * np.float32(0.5 + 0.25 * (idx[t, k] % 7)))
                             for k in range(topk)]) for t in range(tokens)])
    check_combine("bfloat16", out, ys, idx, w, f"fp8 {fmt} dispatch")
    buf.close()


# ---- Refusals --------------------------------------------------------------------------------


def test_buffer_refusals():
    n = shmoe.n_pes()
    if n > 1:
        with pytest.raises(shmoe.Error, match=rf"shmoe.MoeBuffer: num_experts={2 * n + 1} is not "
                                             rf"divisible by the {n} PEs"):
            moe.MoeBuffer(8, 16, 2 * n + 1, 2, "float32")
    with pytest.raises(shmoe.Error, match=r"shmoe.MoeBuffer: dtype float64 is not one of float32, "
                                        r"bfloat16, float16, int32"):
        moe.MoeBuffer(8, 16, n, 1, np.float64)
    with pytest.raises(shmoe.Error, match=r"shmoe.MoeBuffer: fp8='e4m3' quantizes bfloat16 tokens; "
                                         r"dtype is float32"):
        moe.MoeBuffer(8, 16, n, 1, "float32", fp8="e4m3")
    with pytest.raises(shmoe.Error, match=r"shmoe.MoeBuffer: fp8='e3m4' is not one of e4m3, e5m2"):
        moe.MoeBuffer(8, 16, n, 1, "bfloat16", fp8="e3m4")
    with pytest.raises(shmoe.Error, match=rf"shmoe.MoeBuffer: num_topk={n + 1} is more than "
                                         rf"num_experts={n}"):
        moe.MoeBuffer(8, 16, n, n + 1, "float32")
    with pytest.raises(shmoe.Error, match=r"shmoe.MoeBuffer: hidden=0 must be at least 1"):
        moe.MoeBuffer(8, 0, n, 1, "float32")
    with pytest.raises(ValueError, match=r"shmoe.MoeBuffer: workers=\(1,\) must be \(matrix, "
                                         r"vector\) counts"):
        moe.MoeBuffer(8, 16, n, 1, "float32", workers=(1,))


def test_call_refusals():
    me, n = shmoe.my_pe(), shmoe.n_pes()
    E = 2 * n
    buf = moe.MoeBuffer(8, 16, E, 2, "float32")
    x, idx, w = moe_inputs(SEED, me, 8, 16, 2, E, "float32", 0.0)
    with pytest.raises(shmoe.Error, match=r"Buffer.dispatch: x has dtype float64 but the buffer "
                                        r"carries float32"):
        buf.dispatch(x.astype(np.float64), idx, w)
    with pytest.raises(shmoe.Error, match=r"Buffer.dispatch: x has shape \[8, 15\]; dimension 1 "
                                         r"must be 16"):
        buf.dispatch(x[:, :15], idx, w)
    with pytest.raises(shmoe.Error, match=r"Buffer.dispatch: x has 9 rows, more than "
                                         r"max_tokens_per_pe=8"):
        buf.dispatch(np.zeros((9, 16), np.float32), np.zeros((9, 2), np.int64), None)
    with pytest.raises(shmoe.Error, match=r"Buffer.dispatch: topk_idx has shape \[8, 1\]; dimension "
                                         r"1 must be 2"):
        buf.dispatch(x, idx[:, :1], w)
    bad = idx.copy()
    bad[3, 1] = E
    # The operator checks the routing's values itself, on every PE alike.
    with pytest.raises(shmoe.Error, match=rf"dispatch: PE 0: topk_idx\[3\]\[1\]={E} is out of "
                                          rf"range \(0\.\.{E - 1}, or -1 for no expert\)"):
        buf.dispatch(x, bad, w)
    bad[3, 1] = -2
    with pytest.raises(shmoe.Error, match=r"topk_idx\[3\]\[1\]=-2 is out of range"):
        buf.dispatch(x, bad, w)
    with pytest.raises(shmoe.Error, match=r"Buffer.dispatch: topk_idx has dtype float32; expert "
                                        r"indices are integers"):
        buf.dispatch(x, idx.astype(np.float32), w)
    with pytest.raises(shmoe.Error, match=r"Buffer.dispatch: topk_weights has dtype int64; weights "
                                        r"are floating point"):
        buf.dispatch(x, idx, idx)
    with pytest.raises(TypeError, match=r"Buffer.dispatch: x must be a numpy.ndarray"):
        buf.dispatch(x.tolist(), idx, w)
    with pytest.raises(ValueError, match=rf"Buffer.get_dispatch_layout: num_experts={E + 1} but "
                                         rf"the buffer has {E} experts"):
        buf.get_dispatch_layout(idx, E + 1)

    recv_x, _, _, _, handle = buf.dispatch(x, idx, None)
    with pytest.raises(shmoe.Error, match=r"Buffer.combine: y has shape .*; dimension 0 must be"):
        buf.combine(np.zeros((recv_x.shape[0] + 1, 16), np.float32), handle, w)
    with pytest.raises(shmoe.Error, match=r"Buffer.combine: topk_weights is None, and so was the "
                                         r"dispatch's"):
        buf.combine(recv_x, handle)
    with pytest.raises(shmoe.Error, match=r"Buffer.combine: handle must be what a dispatch of "
                                         r"this buffer"):
        buf.combine(recv_x, object(), w)
    # A handle of another buffer: refused where its rows are laid out otherwise (another top-k),
    # taken where the routing is the same (the rows combined at another width and dtype).
    with moe.MoeBuffer(8, 16, E, 1, "float32") as other_topk:
        with pytest.raises(shmoe.Error, match=r"same experts, top-k and capacity"):
            other_topk.combine(recv_x, handle, w[:, :1])
    with moe.MoeBuffer(8, 4, E, 2, "float32") as narrow:
        got = narrow.combine(np.ascontiguousarray(recv_x[:, :4]), handle, w)
        assert np.array_equal(got, buf.combine(recv_x, handle, w)[:, :4])
    with pytest.raises(shmoe.Error, match=r"Buffer.combine: topk_weights has shape \[8, 1\]"):
        buf.combine(recv_x, handle, w[:, :1])
    # After all these, the buffer still works: every PE refused every call alike.
    out = buf.combine(recv_x, handle, w)
    assert out.shape == (8, 16)
    buf.close()
    with pytest.raises(shmoe.Error, match=r"Buffer.dispatch: the buffer is closed"):
        buf.dispatch(x, idx, w)


@pytest.mark.skipif("shmoe.n_pes() < 2")
def test_refusal_on_one_pe_reaches_every_pe():
    me, n = shmoe.my_pe(), shmoe.n_pes()
    E = 2 * n
    buf = moe.MoeBuffer(8, 16, E, 2, "float32")
    x, idx, w = moe_inputs(SEED, me, 8, 16, 2, E, "float32", 0.0)
    bad_x = x.astype(np.float64) if me == 1 else x
    if me == 1:
        with pytest.raises(shmoe.Error, match=r"^MoeBuffer.dispatch: x has dtype float64"):
            buf.dispatch(bad_x, idx, w)
    else:
        with pytest.raises(shmoe.Error, match=r"^MoeBuffer.dispatch: PE 1 refused the call: x has "
                                              r"dtype float64 but the buffer carries float32$"):
            buf.dispatch(bad_x, idx, w)
    recv_x, recv_idx, _, _, handle = buf.dispatch(x, idx, w)
    y = expert_outputs("float32", me, 2, recv_x, recv_idx)
    bad_w = w[:, :1] if me == 0 else w
    if me == 0:
        with pytest.raises(shmoe.Error, match=r"^MoeBuffer.combine: topk_weights has shape"):
            buf.combine(y, handle, bad_w)
    else:
        with pytest.raises(shmoe.Error, match=r"Buffer.combine: PE 0 refused the call"):
            buf.combine(y, handle, bad_w)
    # The next pair works on every PE.
    out = buf.combine(y, handle, w)
    ys = np.stack([np.stack([expert_step("float32", int(idx[t, k]), x[t]) for k in range(2)])
                   for t in range(8)])
    assert same_bits(out, combine_replay("float32", ys, idx, w))
    buf.close()


def test_operator_refusal_is_shmoe_error():
    """A refusal of the C++ operator (here: more rows for one PE than max_recv_rows) is
    shmoe.Error on every PE, with the operator's message."""
    me, n = shmoe.my_pe(), shmoe.n_pes()
    buf = moe.MoeBuffer(8, 16, n, 1, "float32", max_recv_rows=4)
    x = np.zeros((8, 16), np.float32)
    idx = np.zeros((8, 1), np.int64)  # every token of every PE to expert 0 (PE 0)
    with pytest.raises(shmoe.Error, match=r"max_recv_rows"):
        buf.dispatch(x, idx, None)
    out = buf.dispatch(x[:1], idx[:1], None)  # 1 row per PE: fits when n <= 4
    assert out[0].shape == ((n if me == 0 else 0), 16)
    buf.close()


def test_context_manager_closes():
    n = shmoe.n_pes()
    with moe.MoeBuffer(4, 8, n, 1, "int32") as buf:
        assert buf.recv_capacity == 4 * n
    with pytest.raises(shmoe.Error, match=r"Buffer.get_dispatch_layout: the buffer is closed"):
        buf.get_dispatch_layout(np.zeros((1, 1), np.int64), n)
