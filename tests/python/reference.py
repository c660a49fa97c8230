"""Independent NumPy references for the tests: element roundings (bfloat16, float16, int32), OCP
MX FP8 quantization written from the specification (not from shmoe's code), and the MoE layer
in fp64. Inputs are generated from (seed, PE), so every PE can regenerate every other PE's."""

import numpy as np

# ---- Element types ---------------------------------------------------------------------------


def round_bf16(x):
    """float32 values rounded to bfloat16 (nearest, ties to even), as float32. Normal range
    only (the tests' values are)."""
    x = np.asarray(x, dtype=np.float64)
    _, e = np.frexp(x)  # x = m * 2**e, 0.5 <= |m| < 1
    step = np.ldexp(1.0, np.maximum(e, -125) - 8)  # 8 significant bits
    return (np.rint(x / step) * step).astype(np.float32)


def bf16_bits(x_bf16_values):
    return (np.asarray(x_bf16_values, dtype=np.float32).view(np.uint32) >> 16).astype(np.uint16)


def bits_to_float(bits):
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def store(dtype, acc):
    """fp32 results as the element type stores them: bf16/fp16 round to nearest even, int32
    rounds to nearest even and saturates. Returns values of the element type's numpy storage
    (bfloat16 as uint16 bit patterns)."""
    acc = np.asarray(acc, dtype=np.float32)
    if dtype == "float32":
        return acc
    if dtype == "float16":
        return acc.astype(np.float16)
    if dtype == "bfloat16":
        return bf16_bits(round_bf16(acc))
    if dtype == "int32":
        r = np.rint(acc.astype(np.float64))
        return np.clip(r, -(2.0**31), 2.0**31 - 1).astype(np.int32)
    raise ValueError(dtype)


def load(dtype, a):
    """Stored elements as float32 (bfloat16 from uint16 bit patterns)."""
    return bits_to_float(a) if dtype == "bfloat16" else np.asarray(a).astype(np.float32)


STORAGE = {"float32": np.float32, "float16": np.float16, "bfloat16": np.uint16, "int32": np.int32}

# ---- MX FP8 (OCP Microscaling v1.0, MXFP8 E4M3 / E5M2) ----------------------------------------

FP8 = {
    # mantissa bits, exponent bias, emax of the element format, largest finite, its code, NaN code
    "e4m3": (3, 7, 8, 448.0, 0x7E, 0x7F),
    "e5m2": (2, 15, 15, 57344.0, 0x7B, 0x7E),
}


def fp8_values(fmt):
    """The value of each of the 256 codes."""
    mant, bias, _, _, _, _ = FP8[fmt]
    out = np.empty(256)
    for code in range(256):
        sign = -1.0 if code & 0x80 else 1.0
        mag = code & 0x7F
        exp, m = mag >> mant, mag & ((1 << mant) - 1)
        if (fmt == "e4m3" and mag == 0x7F) or (fmt == "e5m2" and mag > 0x7C):
            out[code] = np.nan
        elif fmt == "e5m2" and mag == 0x7C:
            out[code] = sign * np.inf
        elif exp == 0:
            out[code] = sign * m * 2.0 ** (1 - bias - mant)
        else:
            out[code] = sign * (1 + m / 2**mant) * 2.0 ** (exp - bias)
    return out


def fp8_encode(v, fmt):
    """Codes of float64 values: nearest, ties to even, saturating at the largest finite."""
    mant, bias, _, top, top_code, nan_code = FP8[fmt]
    v = np.asarray(v, dtype=np.float64)
    grid = fp8_values(fmt)[: top_code + 1]  # the non-negative finite values, increasing
    a = np.abs(v)
    finite = np.isfinite(a)
    safe = np.where(finite & (a > 0), a, 1.0)
    _, e = np.frexp(safe)
    e = np.maximum(e - 1, 1 - bias)  # binade exponent; subnormals share the lowest
    step = np.ldexp(1.0, e - mant)
    q = np.where(finite, np.minimum(np.rint(a / step) * step, top), top)
    q = np.where(a == 0, 0.0, q)
    codes = np.searchsorted(grid, q).astype(np.uint8)
    assert np.all(grid[codes] == q), "fp8_encode: a value off the grid"
    if fmt == "e5m2":
        codes = np.where(np.isinf(a), 0x7C, codes)
    codes = np.where(np.isnan(v), nan_code, codes)
    return (codes | np.where(np.signbit(v), 0x80, 0)).astype(np.uint8)


def mx_quantize(x, fmt):
    """x float32 [rows, n] -> (codes [rows, n], scales [rows, ceil(n / 32)]): each block of 32
    gets the E8M0 scale 2^(floor(log2 amax) - emax_elem) (clamped to 2^-127..2^127; code 0 for
    an all-zero block, 0xFF for a block with NaN or infinity)."""
    _, _, emax, _, _, _ = FP8[fmt]
    x = np.asarray(x, dtype=np.float64)
    rows, n = x.shape
    blocks = -(-n // 32)
    codes = np.empty((rows, n), np.uint8)
    scales = np.empty((rows, blocks), np.uint8)
    for b in range(blocks):
        blk = x[:, 32 * b : 32 * (b + 1)]
        amax = np.max(np.abs(blk), axis=1)
        special = ~np.all(np.isfinite(blk), axis=1)
        _, e = np.frexp(np.where(amax > 0, amax, 1.0))
        s = np.clip(e - 1 - emax, -127, 127)
        s = np.where(amax > 0, s, -127)
        scales[:, b] = np.where(special, 0xFF, s + 127)
        factor = np.where(special, 1.0, np.ldexp(1.0, -s))
        codes[:, 32 * b : 32 * (b + 1)] = fp8_encode(blk * factor[:, None], fmt)
    return codes, scales


def mx_dequantize(codes, scales, fmt):
    values = fp8_values(fmt)[codes]
    n = codes.shape[-1]
    factor = np.where(scales == 0xFF, np.nan, np.ldexp(1.0, scales.astype(np.int64) - 127))
    return values * np.repeat(factor, 32, axis=-1)[..., :n]


def mx_round(x, fmt):
    """x rounded through MX FP8 and back (float64)."""
    c, s = mx_quantize(np.asarray(x, dtype=np.float32), fmt)
    return mx_dequantize(c, s, fmt)


# ---- Workloads -------------------------------------------------------------------------------


def routing(rng, tokens, topk, experts, drop=0.0):
    """Distinct experts per token; with probability `drop` a slot is -1 (no expert)."""
    idx = np.array([rng.choice(experts, topk, replace=False) for _ in range(tokens)],
                   dtype=np.int64).reshape(tokens, topk)
    if drop > 0:
        idx[rng.random(idx.shape) < drop] = -1
    return idx


def moe_inputs(seed, pe, tokens, hidden, topk, experts, dtype, drop=0.1):
    """One PE's tokens, routing and weights. int32 tokens encode (PE, token, column) as
    pe * 2^17 + token * 2^8 + column (sign alternating), and int32 buffers get integer weights
    0..3, so every weighted sum stays below 2^24 and is exact in fp32."""
    rng = np.random.default_rng([seed, pe])
    if dtype == "int32":
        t = np.arange(tokens)[:, None]
        j = np.arange(hidden)[None, :]
        x = (pe * 2**17 + t * 2**8 + j).astype(np.int32)
        x = x * np.where((t + j) % 2 == 0, 1, -1).astype(np.int32)
    else:
        x = store(dtype, rng.uniform(-2, 2, (tokens, hidden)).astype(np.float32))
    idx = routing(rng, tokens, topk, experts, drop)
    if dtype == "int32":
        w = rng.integers(0, 4, (tokens, topk)).astype(np.float32)
    else:
        w = rng.random((tokens, topk)).astype(np.float32)
    return x, idx, w


def expert_factor(e):
    return np.float32(0.5 + 0.25 * (e % 7)) if e >= 0 else np.float32(0)


def expert_step(dtype, e, x):
    """The stand-in expert: y = x * (0.5 + 0.25 * (e % 7)) in fp32, stored as the dtype (int32
    experts multiply by e % 3 + 1, exactly)."""
    if dtype == "int32":
        return (np.asarray(x).astype(np.int64) * (e % 3 + 1)).astype(np.int32)
    return store(dtype, load(dtype, x) * expert_factor(e))


def golden_dispatch(all_inputs, me, experts_per_pe):
    """What PE `me` must receive: rows grouped by local expert, then source PE, then token."""
    rows, local, weights, sources = [], [], [], []
    for le in range(experts_per_pe):
        e = me * experts_per_pe + le
        for src, (x, idx, w) in enumerate(all_inputs):
            for t, k in zip(*np.nonzero(idx == e)):
                rows.append(x[t])
                local.append(le)
                weights.append(w[t, k])
                sources.append((src, t, k))
    return rows, np.array(local, dtype=np.int64), np.array(weights, dtype=np.float32), sources


def combine_replay(dtype, ys, idx, w):
    """The operator's arithmetic exactly: per token, fp32 sum over k in increasing order of
    y[t, k] * w[t, k] (no fused multiply-add), rounded once to the dtype. ys[t][k] is the expert
    output row of slot (t, k)."""
    tokens, topk = idx.shape
    hidden = ys.shape[-1]
    acc = np.zeros((tokens, hidden), np.float32)
    for k in range(topk):
        term = load(dtype, ys[:, k]) * w[:, k : k + 1].astype(np.float32)
        acc = np.where(idx[:, k : k + 1] >= 0, acc + term, acc).astype(np.float32)
    return store(dtype, acc)


def combine_fp64(dtype, ys, idx, w):
    """(value, sum of |terms|) of the combine in fp64."""
    terms = load(dtype, ys).astype(np.float64) * w[:, :, None]
    terms = np.where(idx[:, :, None] >= 0, terms, 0.0)
    return terms.sum(axis=1), np.abs(terms).sum(axis=1)


def combine_tolerance(dtype, topk, magnitude):
    """The output type's rounding plus fp32 products and sums over topk terms (as the C++ tool's
    combine check)."""
    accumulate = (topk + 1) * 2.0**-24 * magnitude
    return {
        "int32": 0.5 + accumulate + 1e-9,
        "float16": 2.0**-11 * magnitude + accumulate + 2.0**-24,
        "bfloat16": 2.0**-8 * magnitude + accumulate + 1e-38,
        "float32": accumulate + 1e-38,
    }[dtype]


# ---- MegaMoE ---------------------------------------------------------------------------------


def mega_inputs(seed, pe, tokens, model_dim, topk, experts, drop=0.0):
    rng = np.random.default_rng([seed, pe, 11])
    x = bf16_bits(round_bf16(rng.standard_normal((tokens, model_dim)).astype(np.float32)))
    idx = routing(rng, tokens, topk, experts, drop)
    w = rng.random((tokens, topk)).astype(np.float32)
    return x, idx, w


def mega_expert(seed, e, model_dim, ffn_dim):
    """Expert e's float weights ~ N(0, 1/fan_in): w1 [F, D], w2 [D, F/2]."""
    rng = np.random.default_rng([seed, e, 10])
    w1 = (rng.standard_normal((ffn_dim, model_dim)) / np.sqrt(model_dim)).astype(np.float32)
    w2 = (rng.standard_normal((model_dim, ffn_dim // 2)) / np.sqrt(ffn_dim // 2)).astype(np.float32)
    return w1, w2


def mega_reference(x_bits, idx, w, experts_dq, fmt, replay_fp8):
    """The layer in fp64 (y, slack): SwiGLU(x @ w1.T) @ w2.T summed with the routing weights;
    with replay_fp8 the tokens and activations are rounded through MX FP8 where the operator
    rounds them, and `slack` bounds what an activation on an FP8 rounding boundary (which fp32
    and fp64 may round apart) can move (as tools/moe/mega_workload.cpp)."""
    ambiguity = 2.0**-12
    x = bits_to_float(x_bits).astype(np.float64)
    if replay_fp8:
        x = mx_round(x, fmt)
    tokens, D = x.shape
    y = np.zeros((tokens, D))
    slack = np.zeros((tokens, D))
    for t in range(tokens):
        for k in range(idx.shape[1]):
            e = idx[t, k]
            if e < 0:
                continue
            w1, w2 = experts_dq[e]
            h = w1 @ x[t]
            half = h.size // 2
            a = h[:half] / (1 + np.exp(-h[:half])) * h[half:]
            moved = np.zeros(half)
            if replay_fp8:
                up = mx_round((a * (1 + ambiguity))[None, :], fmt)[0] / (1 + ambiguity)
                down = mx_round((a * (1 - ambiguity))[None, :], fmt)[0] / (1 - ambiguity)
                a = mx_round(a[None, :], fmt)[0]
                moved = np.maximum(np.abs(up - a), np.abs(down - a))
                moved = np.where(moved > 2 * ambiguity * np.abs(a), moved, 0.0)
            y[t] += w[t, k] * (w2 @ a)
            slack[t] += np.abs(w[t, k] * w2) @ moved
    return y, slack


def mega_check(y_bits, ref, slack, rel, floor):
    """Largest |y - ref| / (rel |ref| + floor * row RMS(ref) + slack), and the relative RMS
    error, as tools/moe/mega_run.cpp checks."""
    got = bits_to_float(y_bits).astype(np.float64)
    rms = np.sqrt(np.mean(ref**2, axis=1, keepdims=True))
    allowed = rel * np.abs(ref) + floor * rms + slack
    err = np.abs(got - ref)
    worst = float(np.max(np.where(allowed > 0, err / np.where(allowed > 0, allowed, 1), 0.0)))
    rms_err = float(np.sqrt(np.sum(err**2) / max(np.sum(ref**2), 1e-300)))
    return worst, rms_err, bool(np.all(np.isfinite(got)))
