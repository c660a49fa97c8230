"""The Python side of bench/python_moe_bench.sh: dispatch + combine through shmoe.MoeBuffer,
timed as bench/python_moe_bench_cxx.cpp times the C++ call (a barrier, then the host clock around
one dispatch and one combine, the received rows going back as the experts' output).

With --raw, iterations alternate between the Buffer and the bare C++ operators under it (the
extension's MoeBuffer with buffers allocated once, no Python work around the call), so that
both are timed on the same machine at the same moments: on a loaded machine this is the steadier
measure of what the binding adds.

    shmoerun -n P python3 bench/python_moe_bench.py [--tokens 128 --hidden 7168 --topk 8
        --experts-per-pe 8 --warmup 5 --loops 50] [--torch] [--raw]
"""

import argparse
import time

import numpy as np

import shmoe
from shmoe import moe


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--tokens", type=int, default=128)
    p.add_argument("--hidden", type=int, default=7168)
    p.add_argument("--topk", type=int, default=8)
    p.add_argument("--experts-per-pe", type=int, default=8)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--loops", type=int, default=50)
    p.add_argument("--torch", action="store_true", help="torch tensors instead of numpy arrays")
    p.add_argument("--raw", action="store_true", help="alternate with the bare C++ operators")
    o = p.parse_args()

    shmoe.init()
    me, n = shmoe.my_pe(), shmoe.n_pes()
    experts = n * o.experts_per_pe
    rng = np.random.default_rng(1234 + me)
    x = (0x3F80 + rng.integers(0, 128, (o.tokens, o.hidden))).astype(np.uint16)  # bf16 in [1, 2)
    idx = np.stack([rng.permutation(experts)[: o.topk] for _ in range(o.tokens)]).astype(np.int64)
    w = (rng.integers(0, 1000, (o.tokens, o.topk)) / 1000).astype(np.float32)
    x_np, idx_np, w_np = x, idx, w
    if o.torch:
        import torch

        x = torch.from_numpy(x.view(np.int16)).view(torch.bfloat16)
        idx, w = torch.from_numpy(idx), torch.from_numpy(w)
    buf = moe.MoeBuffer(o.tokens, o.hidden, experts, o.topk, "bfloat16")

    def binding():
        recv_x, _, _, _, handle = buf.dispatch(x, idx, w)
        buf.combine(recv_x, handle, w)

    ctx = buf.operator  # the C++ operators the Buffer calls, with everything allocated once
    cap = ctx.recv_capacity()
    raw_x, raw_idx, raw_w = x_np, idx_np.astype(np.int32), w_np
    expand_x = np.empty((cap, o.hidden), np.uint16)
    assist, count = np.empty((cap, 3), np.int32), np.empty(n * o.experts_per_pe, np.int32)
    nums, scales = np.empty(o.experts_per_pe, np.int32), np.empty(cap, np.float32)
    out = np.empty((o.tokens, o.hidden), np.uint16)

    def bare():
        ctx.dispatch(False, raw_x, raw_idx, raw_w, o.tokens, expand_x, assist, count, nums,
                     scales)
        ctx.combine(False, expand_x, assist, count, raw_idx, raw_w, o.tokens, out)

    variants = {"python" + (" (torch)" if o.torch else ""): binding}
    if o.raw:
        variants["bare C++ operators"] = bare
    times = {name: [] for name in variants}
    for i in range(o.warmup + o.loops):
        for name, call in variants.items():
            shmoe.barrier_all()
            t0 = time.perf_counter()
            call()
            t1 = time.perf_counter()
            if i >= o.warmup:
                times[name].append((t1 - t0) * 1e6)
    stats = shmoe.zeros(6, np.float64)
    for name, t in times.items():
        stats[0], stats[1], stats[2] = np.mean(t), np.median(t), np.min(t)
        shmoe.max_reduce(None, stats[3:], stats[:3])  # the slowest PE's
        if me == 0:
            print(f"{name}: pes={n} mean_us={stats[3]:.1f} median_us={stats[4]:.1f} "
                  f"min_us={stats[5]:.1f}", flush=True)
    if o.raw:
        # Drift cancels in the difference of the two calls of one iteration.
        names = list(times)
        diff = np.array(times[names[0]]) - np.array(times[names[1]])
        stats[0], stats[1] = np.median(diff), np.median(times[names[1]])
        shmoe.max_reduce(None, stats[3:5], stats[:2])
        if me == 0:
            print(f"the binding adds {stats[3]:.1f} us per dispatch + combine (median of the "
                  f"paired differences), {100 * stats[3] / stats[4]:+.1f}% of the bare call",
                  flush=True)
    shmoe.free(stats)
    buf.close()
    shmoe.finalize()


if __name__ == "__main__":
    main()
