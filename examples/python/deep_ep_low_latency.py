"""DeepEP's low-latency mode on CPUs with FP8: each rank dispatches its tokens as E4M3 codes with
per-128-channel float32 scales (torch.float8_e4m3fn, as DeepEP returns them), every expert
returns what it received, and the weighted combine must give each token times the sum of its
weights, within E4M3's rounding.

    torchrun --nproc_per_node 2 examples/python/deep_ep_low_latency.py
"""

import torch
import torch.distributed as dist

import deep_ep
from launch import run, say

TOKENS, HIDDEN, TOPK, EXPERTS_PER_RANK = 32, 512, 4, 4


def main(rank: int, n: int) -> None:
    num_experts = EXPERTS_PER_RANK * n
    hint = deep_ep.Buffer.get_low_latency_rdma_size_hint(TOKENS, HIDDEN, n, num_experts)
    buffer = deep_ep.Buffer(dist.group.WORLD, num_rdma_bytes=hint, low_latency_mode=True,
                            num_qps_per_rank=num_experts // n)
    g = torch.Generator().manual_seed(rank)
    x = torch.randn((TOKENS, HIDDEN), generator=g).to(torch.bfloat16)
    topk_weights, topk_idx = torch.topk(torch.rand((TOKENS, num_experts), generator=g), TOPK)

    (values, scales), counts, handle, _, _ = buffer.low_latency_dispatch(
        x, topk_idx, TOKENS, num_experts, use_fp8=True)
    assert values.dtype == torch.float8_e4m3fn and scales.dtype == torch.float32
    blocks = values.float().view(*values.shape[:-1], -1, 128) * scales.unsqueeze(-1)
    y = blocks.view(values.shape).to(torch.bfloat16)  # each expert returns its input
    combined, _, _ = buffer.low_latency_combine(y, topk_idx, topk_weights, handle)

    want = x.float() * topk_weights.sum(dim=1, keepdim=True)
    err = (combined.float() - want).abs()
    bound = 2.0 ** -3 * want.abs() + 1e-2  # E4M3 and a bfloat16 rounding of each row
    assert bool((err <= bound).all()), f"combine off by up to {float(err.max())}"
    say(f"rank {rank}/{n}: {int(counts.sum())} rows as {values.dtype}, combine within E4M3")
    buffer.destroy()


if __name__ == "__main__":
    run(main)
