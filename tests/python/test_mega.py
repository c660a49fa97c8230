"""shmoe.MegaMoE on real PEs, checked as `shmoe-moe mega` checks the C++ operator
(tools/moe/mega_run.cpp): per-expert token counts against a replay of the routing; every output
element against the fp64 replay of the FP8 roundings (|err| <= 2^-7 |ref| + 0.03 row RMS +
slack) and against the unquantized fp64 layer (|err| <= 0.05 |ref| + 12 * 2^-4 row RMS for
E4M3, 0.15 |ref| + 12 * 2^-3 row RMS for E5M2); the unfused chain bit for bit; and weights given
already quantized (by the reference quantizer) giving the same bits as float weights."""

import numpy as np
import pytest

import shmoe
from shmoe import moe
from reference import mega_check, mega_expert, mega_inputs, mega_reference, mx_quantize, mx_round

SEED = 777
CASES = [
    # tokens, model_dim, ffn_dim, topk, experts per PE, mode, drop, wave_rows, weights kept as
    (24, 128, 256, 2, 2, "e4m3", 0.0, 0, "fp8"),  # wave_rows 0: automatic
    (17, 96, 160, 1, 3, "e5m2", 0.1, 8, "bf16"),
]
IDEAL = {"e4m3": (0.05, 12 * 2.0**-4), "e5m2": (0.15, 12 * 2.0**-3)}
REPLAY = (2.0**-7, 0.03)


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[5]}-T{c[0]}-D{c[1]}-F{c[2]}-{c[8]}")
def test_mega_against_reference(case):
    tokens, D, F, topk, L, mode, drop, wave_rows, weights = case
    me, n = shmoe.my_pe(), shmoe.n_pes()
    E = n * L
    experts = [mega_expert(SEED, e, D, F) for e in range(E)]
    mine = experts[me * L : (me + 1) * L]
    w1 = np.stack([w[0] for w in mine])
    w2 = np.stack([w[1] for w in mine])

    layer = moe.MegaMoE(tokens, D, F, E, topk, mode, wave_rows=wave_rows, weights=weights)
    layer.load_weights(w1, w2)
    for it in range(2):
        inputs = [mega_inputs(SEED + it, pe, tokens if it == 0 or pe else tokens // 2, D, topk, E,
                              drop) for pe in range(n)]
        x, idx, w = inputs[me]
        y = layer(x, idx, w)
        assert y.shape == (x.shape[0], D) and y.dtype == np.uint16

        expected_counts = [int(sum((i == me * L + le).sum() for _, i, _ in inputs))
                           for le in range(L)]
        assert layer.last_num_recv_tokens_per_expert == expected_counts

        dequantized = [(mx_round(w1e, mode), mx_round(w2e, mode)) for w1e, w2e in experts]
        ref, slack = mega_reference(x, idx, w, dequantized, mode, replay_fp8=True)
        worst_replay, rms_replay, finite = mega_check(y, ref, slack, *REPLAY)
        assert finite
        assert worst_replay <= 1.0, f"fp8_replay: worst |err|/allowed = {worst_replay}"
        ideal, _ = mega_reference(x, idx, w, dequantized, mode, replay_fp8=False)
        worst_ideal, rms_ideal, _ = mega_check(y, ideal, np.zeros_like(ideal), *IDEAL[mode])
        assert worst_ideal <= 1.0, f"numeric_golden: worst |err|/allowed = {worst_ideal}"
        print(f"\nPE {me}: mega {mode} iteration {it}: fp8_replay rms_err={100 * rms_replay:.3f}% "
              f"worst err/allowed={worst_replay:.3f} (allowed: {REPLAY[0]:.3g}*|ref| + "
              f"{REPLAY[1]:.3g}*row_rms + slack); numeric_golden rms_err={100 * rms_ideal:.3f}% "
              f"worst err/allowed={worst_ideal:.3f} (allowed: {IDEAL[mode][0]:.3g}*|ref| + "
              f"{IDEAL[mode][1]:.3g}*row_rms)", end="")

        unfused = layer(x, idx, w, fused=False)
        np.testing.assert_array_equal(unfused, y)

    # The same experts given as (codes, scales) from the reference quantizer: the same bits.
    def quantized(ws):
        codes, scales = zip(*(mx_quantize(m, mode) for m in ws))
        return np.stack(codes), np.stack(scales)

    layer.load_weights(quantized(w1), quantized(w2))
    x, idx, w = mega_inputs(SEED, me, tokens, D, topk, E, drop)
    again = layer(x, idx, w)
    layer.load_weights(w1, w2)
    np.testing.assert_array_equal(again, layer(x, idx, w))
    layer.close()


def test_mega_refusals():
    me, n = shmoe.my_pe(), shmoe.n_pes()
    with pytest.raises(shmoe.Error, match=r"shmoe.MegaMoE: intermediate_hidden=63 must be even"):
        moe.MegaMoE(4, 32, 63, n, 1)
    with pytest.raises(shmoe.Error, match=r"shmoe.MegaMoE: mode='fp8' is not one of e4m3, e5m2"):
        moe.MegaMoE(4, 32, 64, n, 1, "fp8")
    with pytest.raises(shmoe.Error,
                       match=r"shmoe.MegaMoE: weights='int4' must be 'auto', 'fp8' or "
                             r"'bf16'"):
        moe.MegaMoE(4, 32, 64, n, 1, weights="int4")
    if n > 1:
        with pytest.raises(shmoe.Error,
                           match=rf"num_experts={n + 1} is not divisible by the {n} PEs"):
            moe.MegaMoE(4, 32, 64, n + 1, 1)
    layer = moe.MegaMoE(4, 32, 64, n, 1)
    x = np.zeros((4, 32), np.uint16)
    idx = np.zeros((4, 1), np.int64)
    w = np.ones((4, 1), np.float32)
    with pytest.raises(shmoe.Error, match=r"MegaMoE.__call__: call load_weights first"):
        layer(x, idx, w)
    with pytest.raises(shmoe.Error, match=r"MegaMoE.load_weights: w1 has shape \[1, 64, 31\]; "
                                         r"dimension 2 must be 32"):
        layer.load_weights(np.zeros((1, 64, 31), np.float32), np.zeros((1, 32, 32), np.float32))
    with pytest.raises(shmoe.Error, match=r"MegaMoE.load_weights: w2 has dtype int32; give floats or "
                                        r"\(codes, scales\)"):
        layer.load_weights(np.zeros((1, 64, 32), np.float32), np.zeros((1, 32, 32), np.int32))
    with pytest.raises(shmoe.Error, match=r"MegaMoE.load_weights: w1\[1\] \(scales\) has shape \[1, "
                                         r"64, 2\]; dimension 2 must be 1"):
        layer.load_weights((np.zeros((1, 64, 32), np.uint8), np.zeros((1, 64, 2), np.uint8)),
                           np.zeros((1, 32, 32), np.float32))
    layer.load_weights(np.full((1, 64, 32), 0.01, np.float32),
                       np.full((1, 32, 32), 0.01, np.float32))
    with pytest.raises(shmoe.Error, match=r"MegaMoE.__call__: x has dtype float32 but the buffer "
                                        r"carries bfloat16"):
        layer(x.astype(np.float32), idx, w)
    with pytest.raises(shmoe.Error, match=r"MegaMoE.__call__: x has 5 rows, more than max_tokens_per_pe=4"):
        layer(np.zeros((5, 32), np.uint16), np.zeros((5, 1), np.int64), np.ones((5, 1), np.float32))
    with pytest.raises(shmoe.Error, match=rf"PE 0: topk_idx\[2\]\[0\]={n} is out of range"):
        layer(x, np.where(np.arange(4)[:, None] == 2, n, 0), w)
    y = layer(x, idx, w)  # still works after the refusals
    assert y.shape == (4, 32) and not y.any()  # zero tokens give a zero output
    assert layer.last_num_recv_tokens_per_expert == ([4 * n] if me == 0 else [0])
    layer.close()
