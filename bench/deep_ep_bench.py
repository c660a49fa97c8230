"""deep_ep against shmoe's C++ operators on the same shape, in one run.

Started as DeepEP programs are (torch.multiprocessing.spawn, a gloo group, no shmoerun), each
process times, iteration by iteration in turn so that both see the same machine:
  normal:      deep_ep's dispatch + combine (normal mode: one row per token and destination
               rank, the top-k indices and weights along), against the bare C++ operators under
               it (shmoe's dispatch + combine through the extension, every buffer allocated
               once) with the same routing: destination ranks as the experts, combine weights 1.
  low latency: deep_ep's low_latency_dispatch (BF16) + low_latency_combine against the bare
               C++ operators with the real experts and weights; and the same with an FP8
               dispatch (no C++ counterpart: shmoe's own FP8 dispatch is MX, another format).
Each call pair is timed on the host clock after a barrier, in blocks of calls that take turns,
round after round (see _time). Reported: the median over rounds of the slowest rank's median,
and the median over rounds of the ratio C++ / deep_ep (1.0: deep_ep costs nothing on top), with
its range. deep_ep's combine input (--combine-input): `fresh` (the default, as in a model) is a
new tensor of recv_x's shape per call, made and written before the timed region as an expert's
output is; `recv` passes recv_x itself (experts that wrote over it in place).

    python3 bench/deep_ep_bench.py [--procs 2] [--tokens 128] [--hidden 7168] [--topk 8]
        [--experts-per-rank 8] [--loops 10] [--warmup 3] [--rounds 7] [--normal-only]
        [--combine-input fresh|recv]
"""

import argparse
import os
import socket
import statistics
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def _bare(ctx, experts_per_rank, n, x, routes, weights):
    """The C++ dispatch + combine of extension context `ctx` with buffers allocated once."""
    tokens, hidden = x.shape
    cap = ctx.recv_capacity()
    xs = x.view(torch.int16).numpy()
    idx = routes.to(torch.int32).numpy()
    w = weights.to(torch.float32).numpy()
    expand_x = np.empty((cap, hidden), np.uint16)
    assist = np.empty((cap, 3), np.int32)
    count = np.empty(experts_per_rank * n, np.int32)
    nums, scales = np.empty(experts_per_rank, np.int32), np.empty(cap, np.float32)
    out = np.empty((tokens, hidden), np.uint16)

    def call():
        ctx.dispatch(False, xs, idx, w, tokens, expand_x, assist, count, nums, scales)
        ctx.combine(False, expand_x, assist, count, idx, w, tokens, out)

    return call


def _combine_input(kind, shape, g):
    """prepare() for _time: with kind "fresh", a new bf16 tensor of `shape` per call, written
    before the call as an expert's output is; with "recv", None (combine takes recv_x)."""
    if kind == "recv":
        return lambda: None
    out = (torch.rand(shape, generator=g) + 1).to(torch.bfloat16)
    return out.clone


def _ignoring(call):
    return lambda _: call()


def _time(variants, warmup, loops, rounds):
    """Per round, each variant's median microseconds per call on the slowest rank: a
    {name: [round medians]} dict. A variant is a callable, or a (prepare, call) pair: prepare()
    runs before the barrier, untimed, and call(what it returned) is timed. The variants take
    turns in blocks (a few warm-up calls, then `loops` timed ones): a block keeps the caches as a
    program calling one of them would, and a round gives every variant nearly the same machine,
    so ratios are taken round by round."""
    import shmoe

    medians = torch.zeros((rounds, len(variants)), dtype=torch.float64)
    for r in range(rounds):
        for v, variant in enumerate(variants.values()):
            prepare, call = variant if isinstance(variant, tuple) else (tuple, _ignoring(variant))
            times = []
            for i in range(warmup + loops):
                made = prepare()
                shmoe.barrier_all()
                t0 = time.perf_counter()
                call(made)
                t1 = time.perf_counter()
                del made
                if i >= warmup:
                    times.append((t1 - t0) * 1e6)
            medians[r, v] = statistics.median(times)
    dist.all_reduce(medians, op=dist.ReduceOp.MAX)
    return {name: medians[:, v].tolist() for v, name in enumerate(variants)}


def _report(mode, shape, deep_ep, cxx):
    ratios = sorted(c / d for c, d in zip(cxx, deep_ep))
    print(f"{mode:12s} {shape}: deep_ep {statistics.median(deep_ep):9.1f} us, C++ operators "
          f"{statistics.median(cxx):9.1f} us; C++/deep_ep = {statistics.median(ratios):.2f} "
          f"(rounds {ratios[0]:.2f}..{ratios[-1]:.2f})", flush=True)


def _worker(rank, n, port, o):
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", world_size=n,
                            rank=rank)
    import deep_ep
    import shmoe.moe

    experts = n * o.experts_per_rank
    g = torch.Generator().manual_seed(1234 + rank)
    x = (torch.rand((o.tokens, o.hidden), generator=g) + 1).to(torch.bfloat16)
    scores = torch.rand((o.tokens, experts), generator=g)
    idx = torch.topk(scores, o.topk, dim=1).indices.to(torch.int64)
    w = torch.rand((o.tokens, o.topk), generator=g)
    hint = deep_ep.Buffer.get_low_latency_rdma_size_hint(o.tokens, o.hidden, n, experts)
    buffer = deep_ep.Buffer(dist.group.WORLD, int(256e6), hint, explicitly_destroy=True)

    per_rank, _, per_expert, in_rank, _ = buffer.get_dispatch_layout(idx, experts)

    def normal(fresh):
        recv_x, _, _, _, handle, _ = buffer.dispatch(
            x, num_tokens_per_rank=per_rank, is_token_in_rank=in_rank,
            num_tokens_per_expert=per_expert, topk_idx=idx, topk_weights=w)
        buffer.combine(recv_x if fresh is None else fresh, handle)

    # One untimed call finds recv_x's rows (the routing is the same in every call).
    recv_x, _, _, _, handle, _ = buffer.dispatch(
        x, num_tokens_per_rank=per_rank, is_token_in_rank=in_rank,
        num_tokens_per_expert=per_expert, topk_idx=idx, topk_weights=w)
    buffer.combine(recv_x, handle)
    normal_input = _combine_input(o.combine_input, recv_x.shape, g)
    del recv_x, handle

    by_rank = shmoe.MoeBuffer(o.tokens, o.hidden, n, n, "bfloat16")
    ranks = torch.arange(n, dtype=torch.int32).expand(o.tokens, n)
    routes = torch.where(in_rank, ranks, torch.full_like(ranks, -1))
    bare_normal = _bare(by_rank.operator, 1, n, x, routes, torch.ones((o.tokens, n)))

    def low_latency(use_fp8, fresh):
        recv, _, handle, _, _ = buffer.low_latency_dispatch(x, idx, o.tokens, experts,
                                                            use_fp8=use_fp8)
        values = recv[0].to(torch.bfloat16) if use_fp8 else recv  # the experts' input dtype
        buffer.low_latency_combine(values if fresh is None else fresh, idx, w, handle)

    ll_input = _combine_input(o.combine_input, (o.experts_per_rank, n * o.tokens, o.hidden), g)

    by_expert = shmoe.MoeBuffer(o.tokens, o.hidden, experts, o.topk, "bfloat16")
    bare_ll = _bare(by_expert.operator, o.experts_per_rank, n, x, idx, w)

    normal_times = _time({"deep_ep": (normal_input, normal), "C++": bare_normal}, o.warmup,
                         o.loops, o.rounds)
    ll_times = None if o.normal_only else _time(
        {"deep_ep": (ll_input, lambda fresh: low_latency(False, fresh)), "C++": bare_ll,
         "FP8": (ll_input, lambda fresh: low_latency(True, fresh))}, o.warmup, o.loops, o.rounds)
    if rank == 0:
        shape = (f"{n} ranks, {o.tokens} tokens, hidden {o.hidden}, top-{o.topk}, {experts} "
                 f"experts, combine input {o.combine_input}")
        _report("normal", shape, normal_times["deep_ep"], normal_times["C++"])
        if ll_times is not None:
            _report("low latency", shape, ll_times["deep_ep"], ll_times["C++"])
            print(f"low latency, FP8 dispatch: deep_ep {statistics.median(ll_times['FP8']):9.1f} "
                  "us per dispatch + combine", flush=True)
    by_expert.close()
    by_rank.close()
    buffer.destroy()
    dist.barrier()
    dist.destroy_process_group()


def shape_arguments(description):
    """The options both deep_ep benchmarks take: ranks, shape, and how long to time."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--procs", type=int, default=2)
    p.add_argument("--tokens", type=int, default=128)
    p.add_argument("--hidden", type=int, default=7168)
    p.add_argument("--topk", type=int, default=8)
    p.add_argument("--experts-per-rank", type=int, default=8)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--loops", type=int, default=10)
    p.add_argument("--rounds", type=int, default=7)
    return p


def spawn_ranks(worker, o):
    """Runs worker(rank, procs, port, o) in o.procs processes, as DeepEP's programs start."""
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    # Both sides' buffers: deep_ep's (sized from its own byte counts) and the C++ operators'.
    os.environ.setdefault("SHMEM_SYMMETRIC_SIZE", "4G")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(worker, args=(o.procs, port, o), nprocs=o.procs)


def main():
    p = shape_arguments(__doc__.splitlines()[0])
    p.add_argument("--normal-only", action="store_true", help="time normal mode alone")
    p.add_argument("--combine-input", choices=("fresh", "recv"), default="fresh",
                   help="combine's x: a new tensor per call (an expert's output, as in a model) "
                   "or recv_x itself")
    spawn_ranks(_worker, p.parse_args())


if __name__ == "__main__":
    main()
