"""DeepEP's normal mode on CPUs: each rank routes its tokens to top-k experts, dispatches them to
the ranks that hold those experts, and combines them back; the combine of the received rows must
give each token times the number of ranks it reached, bit for bit.

    torchrun --nproc_per_node 2 examples/python/deep_ep_normal.py
    shmoerun -n 2 python3 examples/python/deep_ep_normal.py
    python3 examples/python/deep_ep_normal.py          (spawns 2 ranks itself)
"""

import torch
import torch.distributed as dist

import deep_ep
from launch import run, say

TOKENS, HIDDEN, TOPK, EXPERTS_PER_RANK = 64, 256, 4, 4


def main(rank: int, n: int) -> None:
    num_experts = EXPERTS_PER_RANK * n
    buffer = deep_ep.Buffer(dist.group.WORLD, num_nvl_bytes=256 << 20)
    g = torch.Generator().manual_seed(rank)
    x = torch.randn((TOKENS, HIDDEN), generator=g).to(torch.bfloat16)
    scores = torch.rand((TOKENS, num_experts), generator=g)
    topk_weights, topk_idx = torch.topk(scores, TOPK, dim=1)

    per_rank, _, per_expert, in_rank, _ = buffer.get_dispatch_layout(topk_idx, num_experts)
    recv_x, recv_idx, recv_w, counts, handle, _ = buffer.dispatch(
        x, num_tokens_per_rank=per_rank, is_token_in_rank=in_rank,
        num_tokens_per_expert=per_expert, topk_idx=topk_idx, topk_weights=topk_weights)
    combined, _, _ = buffer.combine(recv_x, handle, topk_weights=recv_w)

    reached = in_rank.sum(dim=1, keepdim=True).float()
    assert torch.equal(combined, (x.float() * reached).to(torch.bfloat16)), "combine differs"
    assert sum(counts) == int((recv_idx >= 0).sum()), "per-expert counts differ"
    say(f"rank {rank}/{n}: received {recv_x.shape[0]} tokens, combine exact")
    buffer.destroy()


if __name__ == "__main__":
    run(main)
