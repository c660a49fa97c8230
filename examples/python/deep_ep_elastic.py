"""DeepEP V2's ElasticBuffer on CPUs: each rank routes its tokens to top-k experts, dispatches
them to the ranks that hold those experts, and combines the received rows back; with small
integer tokens every sum is exact, so the combine must give each token times the number of ranks
it reached, bit for bit, and the top-k weights must come back as they were sent.

    torchrun --nproc_per_node 2 examples/python/deep_ep_elastic.py
    shmoerun -n 2 python3 examples/python/deep_ep_elastic.py
    python3 examples/python/deep_ep_elastic.py          (spawns 2 ranks itself)
"""

import torch
import torch.distributed as dist

import deep_ep
from launch import run, say

TOKENS, HIDDEN, TOPK, EXPERTS_PER_RANK = 64, 256, 4, 4


def main(rank: int, n: int) -> None:
    num_experts = EXPERTS_PER_RANK * n
    buffer = deep_ep.ElasticBuffer(dist.group.WORLD, num_max_tokens_per_rank=TOKENS,
                                   hidden=HIDDEN, num_topk=TOPK, explicitly_destroy=True)
    g = torch.Generator().manual_seed(rank)
    x = torch.randint(-8, 9, (TOKENS, HIDDEN), generator=g).to(torch.bfloat16)
    scores = torch.rand((TOKENS, num_experts), generator=g)
    topk_weights, topk_idx = torch.topk(scores, TOPK, dim=1)

    recv_x, recv_idx, recv_w, handle, _ = buffer.dispatch(
        x, topk_idx=topk_idx, topk_weights=topk_weights, num_experts=num_experts)
    # ... the local experts would run on recv_x here (recv_idx: their local indices) ...
    combined, combined_w, _ = buffer.combine(recv_x, handle, topk_weights=recv_w)

    reached = torch.tensor([[torch.unique(topk_idx[t] // EXPERTS_PER_RANK).numel()]
                            for t in range(TOKENS)])
    assert torch.equal(combined, (x.float() * reached).to(torch.bfloat16)), "combine differs"
    assert torch.equal(combined_w, topk_weights), "weights differ"
    assert handle.num_recv_tokens_per_expert_list == \
        [int((recv_idx == e).sum()) for e in range(EXPERTS_PER_RANK)], "per-expert counts differ"
    scaleout, scaleup = buffer.get_logical_domain_size()
    say(f"rank {rank}/{n}: received {recv_x.shape[0]} tokens on {scaleout} x {scaleup} ranks, "
        "combine exact")
    buffer.destroy()


if __name__ == "__main__":
    run(main)
