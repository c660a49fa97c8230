"""deep_ep.ElasticBuffer (DeepEP V2) against its peers on the same tokens and routing, in one run.

Started as DeepEP programs are (torch.multiprocessing.spawn, a gloo group, no shmoerun), each
process times, round by round in turn (bench/deep_ep_bench.py's _time), one dispatch + combine of
  elastic:  deep_ep.ElasticBuffer's dispatch and combine (each token once to each rank holding
            one of its experts, with its top-k indices and weights; combine back, from the biases);
  C++:      shmoe's MoE operators through shmoe.MoeBuffer with the same rows (one "expert" per
            rank: destination ranks as routes, combine weights 1);
  gloo:     what a CPU user writes today: torch.distributed.all_to_all_single on gloo of the
            same rows, grouped by destination (counts, rows, then back, summed in fp32).
Reported: the median over rounds of the slowest rank's median time per dispatch + combine, and
the ratios peer / elastic round by round (above 1.0: the ElasticBuffer is faster), with their
range. With --hosts 2 the ranks are split into two simulated hosts (SHMOE_HOST_ID): shared memory
inside a host, UCX between them.

    python3 bench/deep_ep_elastic_bench.py [--procs 2] [--hosts 1] [--tokens 128]
        [--hidden 7168] [--topk 8] [--experts-per-rank 8] [--loops 10] [--warmup 3] [--rounds 7]
        [--elastic-only] [--dispatch-only] [--do-expand]

--elastic-only times the ElasticBuffer alone (a build against another: run each in turn);
--dispatch-only times its dispatch alone (the result dropped before the next; implies
--elastic-only);
--do-expand dispatches with do_expand (a row per token and local expert; the peers unchanged).
"""

import os
import statistics
import sys

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from deep_ep_bench import _time, shape_arguments, spawn_ranks  # noqa: E402


def _gloo_peer(x, in_rank, n):
    """Dispatch + combine of x's rows to the ranks in_rank marks, by all_to_all_single."""
    order = [in_rank[:, j].nonzero().squeeze(1) for j in range(n)]
    counts = torch.tensor([len(o) for o in order], dtype=torch.int64)
    tokens = torch.cat(order)

    def call():
        send = x[tokens].view(torch.float16)  # gloo moves no bf16: the same bytes as float16
        recv_counts = torch.empty_like(counts)
        dist.all_to_all_single(recv_counts, counts)
        recv = torch.empty((int(recv_counts.sum()), x.shape[1]), dtype=torch.float16)
        dist.all_to_all_single(recv, send, recv_counts.tolist(), counts.tolist())
        back = torch.empty_like(send)
        dist.all_to_all_single(back, recv, counts.tolist(), recv_counts.tolist())
        out = torch.zeros(x.shape, dtype=torch.float32)
        out.index_add_(0, tokens, back.view(torch.bfloat16).float())
        return out.to(torch.bfloat16)

    return call


def _worker(rank, n, port, o):
    if o.hosts > 1:
        os.environ["SHMOE_HOST_ID"] = f"bench-host{rank // (n // o.hosts)}"
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", world_size=n,
                            rank=rank)
    import deep_ep

    experts = n * o.experts_per_rank
    g = torch.Generator().manual_seed(1234 + rank)
    x = (torch.rand((o.tokens, o.hidden), generator=g) + 1).to(torch.bfloat16)
    scores = torch.rand((o.tokens, experts), generator=g)
    w, idx = torch.topk(scores, o.topk, dim=1)
    buffer = deep_ep.ElasticBuffer(dist.group.WORLD, num_max_tokens_per_rank=o.tokens,
                                   hidden=o.hidden, num_topk=o.topk, explicitly_destroy=True)

    def elastic():
        recv_x, _, _, handle, _ = buffer.dispatch(x, topk_idx=idx, topk_weights=w,
                                                  num_experts=experts, do_expand=o.do_expand)
        if not o.dispatch_only:
            buffer.combine(recv_x, handle)

    peers = {} if o.elastic_only or o.dispatch_only else _peers(x, idx, n, o)
    times = _time({"elastic": elastic, **peers}, o.warmup, o.loops, o.rounds)
    if rank == 0:
        _report(times, n, o, experts)
    for peer in peers.values():
        getattr(peer, "close", lambda: None)()
    buffer.destroy()
    dist.barrier()
    dist.destroy_process_group()


def _peers(x, idx, n, o):
    """The C++ operators and gloo on the same rows (one "expert" per destination rank)."""
    import shmoe

    in_rank = torch.zeros((o.tokens, n), dtype=torch.bool)
    in_rank.scatter_(1, idx // o.experts_per_rank, True)
    ranks = torch.arange(n, dtype=torch.int32).expand(o.tokens, n)
    routes = torch.where(in_rank, ranks, torch.full_like(ranks, -1))
    ones = torch.ones((o.tokens, n))
    by_rank = shmoe.MoeBuffer(o.tokens, o.hidden, n, n, "bfloat16")

    def cxx():
        recv_x, _, _, _, handle = by_rank.dispatch(x, routes, ones)
        by_rank.combine(recv_x, handle)

    cxx.close = by_rank.close  # type: ignore[attr-defined]
    return {"C++": cxx, "gloo": _gloo_peer(x, in_rank, n)}


def _report(times, n, o, experts):
    print(f"{n} ranks on {o.hosts} host(s), {o.tokens} tokens, hidden {o.hidden}, "
          f"top-{o.topk}, {experts} experts{', do_expand' if o.do_expand else ''}"
          f"{', dispatch alone' if o.dispatch_only else ''}:", flush=True)
    for name in times:
        line = f"  {name:8s} {statistics.median(times[name]):10.1f} us"
        if name != "elastic":
            r = sorted(p / e for p, e in zip(times[name], times["elastic"]))
            line += f"   {name}/elastic = {statistics.median(r):.2f} ({r[0]:.2f}..{r[-1]:.2f})"
        print(line, flush=True)


def main():
    p = shape_arguments(__doc__.splitlines()[0])
    p.add_argument("--hosts", type=int, default=1)
    p.add_argument("--elastic-only", action="store_true", help="time the ElasticBuffer alone")
    p.add_argument("--do-expand", action="store_true", help="dispatch with do_expand")
    p.add_argument("--dispatch-only", action="store_true", help="time the dispatch alone")
    o = p.parse_args()
    if o.hosts < 1 or o.procs % o.hosts:
        p.error(f"--procs {o.procs} must be a multiple of --hosts {o.hosts}")
    spawn_ranks(_worker, o)


if __name__ == "__main__":
    main()
